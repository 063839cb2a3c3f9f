/* SPDX-License-Identifier: Apache-2.0 */
/* Generators and their state objects (internal). */
#ifndef RECAP_RNG_GENERATOR_H
#define RECAP_RNG_GENERATOR_H

#include <stdint.h>

#include "base/lock.h"
#include "recap.h"

/* PyTorch's default seed, so a fresh recap generator matches a fresh torch generator. */
#define RECAP_DEFAULT_SEED 67280421310721ULL

/*
 * A generator's state: (seed, offset). It is an object of its own, reference counted, because
 * graph-safe trackers share one state between a named slot and the generator it is installed
 * in (PyTorch's graphsafe_set_state): draws through the generator advance the named state, and
 * graphs hold the states they drew from.
 *
 * A device state that takes part in captures has a capture part, which capture/ owns (its device
 * slot, the launches' bookkeeping: capture/internal.h): NULL until a capture primes the state,
 * set once and read with acquire; rng never looks inside it, and hands it to capture/ through the
 * port (rng/port.h) when the state is released.
 *
 * seed and offset are read and written with atomic operations: draws through a generator hold
 * the generator's lock (which also fixes which state is installed), graph launches add their
 * increments with an atomic add, so neither needs a lock of the state.
 */
struct recap__fw;
struct recap__capture;
struct recap__gen_kind;

typedef struct recap__genstate {
    int refs;
    int device;
    /* A framework's state object (fw != NULL): its value lives in the framework and is read and
     * written through fw's operations; it takes no part in recap's capture bookkeeping. */
    const struct recap__fw *fw;
    void *fobj;
    uint64_t seed;
    uint64_t offset;
    struct recap__genstate_capture *capture; /* capture/'s part, opaque here */
    struct recap__genstate *reg_prev, *reg_next; /* live device states (rng/registry.c) */
} recap__genstate_t;

/* `lock` protects which state is installed and orders draws through this generator; a tracker
 * driving recap's own generator may take it as its own lock (tracker/tracker.c's choose_lock). A
 * framework generator (fw != NULL) keeps in `state` the wrapper of the object it last installed
 * in graph-safe mode (NULL until then): the framework holds the truth. `drivers` counts the
 * trackers driving the generator, so it is not destroyed under them. `forker` is the tracker
 * with forks open on it (NULL: none), set by its outermost fork and cleared by the matching
 * unfork (tracker/fork.c): a fork saves the generator's state and the unfork puts it back, so
 * another tracker's forks in between would swap their states. The claim is made under `lock`
 * (exchange_value, install_genstate); the holder gives it back with one atomic store. */
struct recap_generator {
    uint32_t magic; /* RECAP_MAGIC_GENERATOR while live (base/handle.h) */
    int device;
    recap__lock_t lock;
    int drivers;
    recap__genstate_t *state;
    const struct recap__gen_kind *kind; /* recap's own or a framework's (below) */
    struct recap__fw *fw;               /* a framework generator's framework, else NULL */
    struct recap_tracker *forker;
    /* Whether a tracker holds this generator's lock as its own while it takes another
     * generator's (outer), and whether this one's is taken so (inner): tracker.c keeps the two
     * apart, so such nestings form no cycle. Set once, under tracker.c's share_lock. */
    unsigned char lock_outer, lock_inner;
};

/*
 * What differs between recap's own generator and a framework's, as one table each (`kind`):
 * recap__own_kind (rng/generator.c) keeps the value in a recap state object and answers captures
 * through the port; recap__fw_kind (rng/framework.c) reads and writes the framework's state
 * through its operations. The operations of rng/generator.c are written once over the table.
 * get, set and install run with the generator's lock held; new_state and draw take it themselves.
 */
typedef struct recap__gen_kind {
    recap_status_t (*get)(recap_generator_h gen, uint64_t *seed, uint64_t *offset);
    recap_status_t (*set)(recap_generator_h gen, uint64_t seed, uint64_t offset);
    /* Installs s (taking over the caller's reference on success) and hands back the state
     * installed before it, with a reference for the caller. */
    recap_status_t (*install)(recap_generator_h gen, struct recap__genstate *s,
                              struct recap__genstate **old_p);
    recap_status_t (*new_state)(recap_generator_h gen, uint64_t seed, uint64_t offset,
                                struct recap__genstate **s_p);
    /* Draws inc values per thread (a multiple of 4) for work on `stream`; cap and cap_st: the
     * capture recording the stream and the port's answer when asked (a device generator), else
     * NULL and RECAP_OK. */
    recap_status_t (*draw)(recap_generator_h gen, struct recap__capture *cap,
                           recap_status_t cap_st, recap_stream_t stream, uint64_t inc,
                           recap_philox_args_t *args);
    /* Destroying: unlink before the handle goes (waits for readers in other threads), release
     * after the generator's state went. */
    void (*unlink)(recap_generator_h gen);
    void (*release)(recap_generator_h gen);
} recap__gen_kind_t;

extern const recap__gen_kind_t recap__own_kind;
extern const recap__gen_kind_t recap__fw_kind;

/* The generator lock the calling thread holds as its tracker's lock (tracker.h's
 * recap__tracker_lock), else NULL: the generator's operations a tracker's call makes find it
 * held and take it no second time. A tracker's lock is never taken inside another's, so one
 * pointer suffices; initial-exec, as every generator operation reads it. */
extern __thread const recap__lock_t *recap__gen_lock_held
    __attribute__((tls_model("initial-exec")));

static inline void recap__gen_lock(recap_generator_h gen)
{
    if (recap__gen_lock_held != &gen->lock)
        recap__lock(&gen->lock);
}

static inline void recap__gen_unlock(recap_generator_h gen)
{
    if (recap__gen_lock_held != &gen->lock)
        recap__unlock(&gen->lock);
}

recap__genstate_t *recap__genstate_new(int device, uint64_t seed, uint64_t offset);
/* A new state object for the generator: recap's own kind, or a framework object (created through
 * the framework's table) with that value. */
recap_status_t recap__generator_new_state(recap_generator_h gen, uint64_t seed, uint64_t offset,
                                          recap__genstate_t **s_p);
void recap__genstate_ref(recap__genstate_t *s);
void recap__genstate_unref(recap__genstate_t *s);

/* Value access. While the state takes part in a running capture (whichever thread asks: a
 * framework's backward runs on worker threads), the offset seen and set is the virtual one (the
 * host offset plus the offset relative to the capture), so snapshots and forks inside a capture
 * save and restore capture-relative offsets; a seed change there cannot be replayed and marks
 * the capture as failed (recap_capture_ended reports it). */
/* Value accessors fail only for framework states and generators (the framework's operation
 * failed); outputs are written on success only. */
recap_status_t recap__genstate_get_value(recap__genstate_t *gs, uint64_t *seed, uint64_t *offset);
recap_status_t recap__genstate_set_value(recap__genstate_t *gs, uint64_t seed, uint64_t offset);
recap_status_t recap__generator_get_value(recap_generator_h gen, uint64_t *seed, uint64_t *offset);
recap_status_t recap__generator_set_value(recap_generator_h gen, uint64_t seed, uint64_t offset);
/* Installs (*seed, *offset) and returns the previous value in them, under one lock acquisition:
 * a tracker fork/unfork is exactly this, on every layer of a training step. `claim` (a tracker's
 * outermost fork, else NULL) first takes the generator for that tracker (`forker`) in the same
 * lock section: RECAP_ERR_STATE, no message set and *holder_p = the tracker holding it, when
 * another one does. On failure nothing changed (the claim neither). */
recap_status_t recap__generator_exchange_value(recap_generator_h gen, struct recap_tracker *claim,
                                               uint64_t *seed, uint64_t *offset,
                                               struct recap_tracker **holder_p);

/* Graph-safe access. install takes over the caller's reference to `s` and hands back the state
 * installed before it (*old_p, whose reference moves to the caller); on failure the caller keeps
 * its reference and nothing changed. For a framework generator the state "installed before" is
 * what the framework reports as current, which may be an object recap did not install. `claim`
 * and *holder_p as for exchange_value. */
recap_status_t recap__generator_install_genstate(recap_generator_h gen, struct recap_tracker *claim,
                                                 recap__genstate_t *s, recap__genstate_t **old_p,
                                                 struct recap_tracker **holder_p);

/* Validates a 16-byte state and decodes it. */
recap_status_t recap__state_decode(const uint8_t state[RECAP_STATE_BYTES], uint64_t *seed,
                                   uint64_t *offset);
void recap__state_encode(uint64_t seed, uint64_t offset, uint8_t state[RECAP_STATE_BYTES]);

/* Draws `inc` values per thread (a multiple of 4) for work on `stream`: by value outside a
 * capture (the offset advances; RECAP_ERR_INVALID_ARG when it would wrap), pointer-based inside
 * one (the capture-relative offset advances). */
recap_status_t recap__generator_draw(recap_generator_h gen, recap_stream_t stream, uint64_t inc,
                                     recap_philox_args_t *args);

/* Framework generators (rng/framework.c). */
recap_status_t recap__fw_state_get(recap__genstate_t *gs, uint64_t *seed, uint64_t *offset);
recap_status_t recap__fw_state_set(recap__genstate_t *gs, uint64_t seed, uint64_t offset);
void recap__fw_state_release(recap__genstate_t *gs);
recap_status_t recap__fw_get(recap_generator_h gen, uint64_t *seed, uint64_t *offset);
recap_status_t recap__fw_set(recap_generator_h gen, uint64_t seed, uint64_t offset);
recap_status_t recap__fw_new_state(recap_generator_h gen, uint64_t seed, uint64_t offset,
                                   recap__genstate_t **s_p);
/* With the generator's lock held: installs s and hands back the framework's object installed
 * before it (framework.c says how references move). */
recap_status_t recap__fw_exchange(recap_generator_h gen, recap__genstate_t *s,
                                  recap__genstate_t **old_p);
int recap__fw_graph_safe(const recap_generator_h gen);
/* The values of every framework generator alive (scope.c): up to cap entries, with ids that tell a
 * generator still alive at restore from a new one at the same address; the count alive. */
typedef struct recap__fw_value {
    recap_generator_h gen;
    uint64_t id;
    uint64_t seed, offset;
} recap__fw_value_t;
recap_status_t recap__fw_save_all(recap__fw_value_t *v, size_t cap, size_t *count_p);
/* Writes back the values of those still alive; the first failure is returned. */
recap_status_t recap__fw_restore_all(const recap__fw_value_t *v, size_t n);
/* Framework generators created in this process and their distinct names, for RECAP_REPORT: each
 * name ended by a NUL, *len_p bytes in all (0 when they do not fit cap); *left_out_p: how many
 * names the list had no room for. */
void recap__fw_seen(uint64_t *created_p, char *names, size_t cap, size_t *len_p,
                    uint64_t *left_out_p);
/* Destroying a framework generator: off the registry first (waits for scopes reading it), then,
 * after its state objects went back, the rest. */
void recap__fw_unlink(recap_generator_h gen);
void recap__fw_destroy(recap_generator_h gen);
void recap__fw_atfork(recap__atfork_t when);

/* Whether the calling thread is inside a framework operation recap called: recap's tracker,
 * snapshot and generator calls made from there would wait on locks the thread holds, so they
 * fail with RECAP_ERR_STATE instead. */
/* Initial-exec: every fork reads it, and the default model costs a __tls_get_addr call. */
extern __thread int recap__fw_depth __attribute__((tls_model("initial-exec")));
static inline int recap__fw_in_op(void)
{
    return recap__fw_depth > 0;
}
#define RECAP_CHECK_NOT_IN_FRAMEWORK_OP(what)                                                 \
    do {                                                                                     \
        if (__builtin_expect(recap__fw_in_op(), 0))                                          \
            return recap__fail(RECAP_ERR_STATE, "%s called from inside a framework generator " \
                               "operation (recap holds the locks it would take)", (what));   \
    } while (0)

/* Trackers driving a generator (destroy refuses while any does). */
void recap__generator_drive(recap_generator_h gen, int delta);

#endif
