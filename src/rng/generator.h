/* SPDX-License-Identifier: Apache-2.0 */
/* Generators (internal): recap's own and a framework's, one table of operations per kind, and
 * what trackers do with them (exchange a value, install a state object, draw). */
#ifndef RECAP_RNG_GENERATOR_H
#define RECAP_RNG_GENERATOR_H

#include <stdint.h>

#include "base/lock.h"
#include "recap.h"
#include "rng/framework.h"
#include "rng/state.h"

/* PyTorch's default seed, so a fresh recap generator matches a fresh torch generator. */
#define RECAP_DEFAULT_SEED 67280421310721ULL

struct recap__capture;

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

/* A new state object for the generator: recap's own kind, or a framework object (created through
 * the framework's table) with that value. */
recap_status_t recap__generator_new_state(recap_generator_h gen, uint64_t seed, uint64_t offset,
                                          recap__genstate_t **s_p);

/* A generator's value: its state's (rng/state.h says how captures see it), or for a framework
 * generator the framework's current state. Fails only for a framework generator (its operation
 * failed); outputs are written on success only. */
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

/* Draws `inc` values per thread (a multiple of 4) for work on `stream`: by value outside a
 * capture (the offset advances; RECAP_ERR_INVALID_ARG when it would wrap), pointer-based inside
 * one (the capture-relative offset advances). */
recap_status_t recap__generator_draw(recap_generator_h gen, recap_stream_t stream, uint64_t inc,
                                     recap_philox_args_t *args);

/* Trackers driving a generator (destroy refuses while any does). */
void recap__generator_drive(recap_generator_h gen, int delta);

#endif
