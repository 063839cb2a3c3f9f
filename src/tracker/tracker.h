/* SPDX-License-Identifier: Apache-2.0 */
/* The RNG state tracker, its states objects and snapshots (internal). */
#ifndef RECAP_TRACKER_TRACKER_H
#define RECAP_TRACKER_TRACKER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/lock.h"
#include "base/text.h"
#include "base/atfork.h"
#include "recap.h"
#include "rng/generator.h"

/* A state name in a message: "%.*s%s" with these arguments prints at most RECAP_NAME_MAX bytes
 * of it (a longer one was never a name) and the cut mark when it was longer. */
#define RECAP__NAME_FMT "%.*s%s"
#define RECAP__NAME_ARGS(name)                                                                 \
    RECAP_NAME_MAX, (name),                                                                    \
        (strnlen((name), RECAP_NAME_MAX + 1) > RECAP_NAME_MAX ? RECAP__TEXT_CUT : "")

/* A named state by value: what states objects, snapshots and blobs carry. The name is stored
 * inline so a snapshot's arrays, once large enough, are reused without allocating. */
typedef struct recap__entry {
    uint64_t seed;
    uint64_t offset;
    uint32_t len;
    char name[RECAP_NAME_MAX + 1];
} recap__entry_t;

/* A hash index over an array someone else keeps (a tracker's slots or seeds, a states object's
 * entries): a cell holds an entry's 32-bit hash (high half) and its position + 1 (low half), 0
 * when empty; open addressing, linear probing, at most half full, grown by doubling. Entries are
 * only added, or the whole index emptied or replaced, so no cell is ever a tombstone. (index.c) */
typedef struct recap__index {
    uint64_t *cells;
    size_t cap; /* a power of two, or 0 */
    size_t n;
} recap__index_t;

uint32_t recap__name_hash(const char *name, size_t len);
uint32_t recap__seed_hash(uint64_t seed);
/* Room for n entries in all; RECAP_ERR_NO_MEMORY leaves the index as it was. */
recap_status_t recap__index_reserve(recap__index_t *x, size_t n);
/* Adds the entry at `pos` (room reserved; not there already). */
void recap__index_put(recap__index_t *x, uint32_t hash, size_t pos);
void recap__index_clear(recap__index_t *x);
void recap__index_free(recap__index_t *x);

/* The next position + 1 whose hash is `hash`, probing from cell *i on (start: hash & (cap - 1),
 * cap > 0); 0 at the end of the chain: the caller compares the key at each. */
static inline size_t recap__index_next(const recap__index_t *x, uint32_t hash, size_t *i)
{
    for (;;) {
        uint64_t c = x->cells[*i];

        *i = (*i + 1) & (x->cap - 1);
        if (c == 0)
            return 0;
        if ((uint32_t)(c >> 32) == hash)
            return (size_t)(uint32_t)c;
    }
}

/* A named state inside a tracker. Value mode uses e.seed/e.offset; graph-safe mode keeps the
 * value in `obj`, shared with the generator while the state is installed, and e.seed/e.offset
 * are unused. Slots are allocated one by one so names stay put when the slot array grows. */
typedef struct recap__slot {
    recap__entry_t e;
    recap__genstate_t *obj;
    /* References to obj held beyond the slot's own: an unfork hands the generator's back here
     * and the next fork lends it again, so a fork+unfork pair does no reference counting. */
    int spare;
} recap__slot_t;

/* One open fork. `outer` is the state current before it (-1: the default state). Value mode
 * keeps the outer value here only when it is the default one: a named outer state is kept in its
 * slot, where a nested fork of the same name can advance it. Graph-safe mode keeps the outer
 * object here (with the generator's former reference) either way; a named one is also in its
 * slot, and being one object, advances there too. */
typedef struct recap__frame {
    recap_fork_token_t token;
    int slot; /* -1 for an inference tracker's pass-through fork */
    int outer;
    uint64_t seed;
    uint64_t offset;
    recap__genstate_t *saved;
} recap__frame_t;

struct recap_tracker {
    uint32_t magic; /* RECAP_MAGIC_TRACKER while live (base/handle.h) */
    /* &own_lock, or its generator's lock when the tracker may share it (tracker.c's
     * choose_lock): a fork then takes one lock, not the tracker's and then the generator's. Set
     * at create. */
    recap__lock_t *lock;
    recap__lock_t own_lock;
    uint32_t flags;
    int initialized;
    recap_tracker_params_t params; /* as given, for the default tracker's comparison */
    recap_generator_h gen;
    recap_generator_h host_gen;
    int owns_gen;
    int device;

    recap__slot_t **slots; /* insertion order */
    size_t nslots, slots_cap;
    size_t hint; /* slot of the last successful lookup */
    recap__index_t names; /* slot of each name (the first, were one there twice) */
    /* Changes whenever the names or their order change; unique across trackers, so a snapshot
     * whose layout equals the tracker's has the same names in the same order. */
    uint64_t layout;

    uint64_t *seeds;
    size_t nseeds, seeds_cap;
    recap__index_t seed_index; /* room for RECAP__INITIAL_CAP seeds at least (seeding's) */

    recap__frame_t *frames;
    size_t depth, frames_cap;
    int current; /* slot of the installed state, -1: the default state */
    recap_fork_token_t next_token;
    size_t users; /* regions and checkpoints that restore its snapshots (destroy waits for 0) */

    /* Every live tracker, for exact-capture scopes (scope.c). */
    struct recap_tracker *reg_prev, *reg_next;
    uint64_t reg_id;
    int scope_pins; /* exact-capture scope calls using it now (scope.c; atomic) */
};

/* The tracker's lock. No path takes it while holding another tracker's lock or a generator's,
 * so the caller never holds it already and one thread-local names the lock held. When it is the
 * generator's, the generator's operations the tracker's call makes find it held
 * (recap__gen_lock_held) and take it no second time. */
static inline void recap__tracker_lock(recap_tracker_h t)
{
    recap__lock(t->lock);
    recap__gen_lock_held = t->lock;
}

static inline void recap__tracker_unlock(recap_tracker_h t)
{
    recap__gen_lock_held = NULL;
    recap__unlock(t->lock);
}

/* fork/unfork's common case takes the lock bare: it calls none of the generator's operations;
 * falling back to the full path, it says it holds it (adopt). */
static inline void recap__tracker_lock_bare(recap_tracker_h t)
{
    recap__lock(t->lock);
}

static inline void recap__tracker_unlock_bare(recap_tracker_h t)
{
    recap__unlock(t->lock);
}

static inline void recap__tracker_adopt(recap_tracker_h t)
{
    recap__gen_lock_held = t->lock;
}

/* Whether the tracker's lock is its generator's (tracker.c's choose_lock), which it then holds. */
static inline int recap__tracker_holds_gen(const struct recap_tracker *t)
{
    return t->lock == &t->gen->lock;
}

/* Adds to / removes from the registry of live trackers (scope.c). */
void recap__scope_track(recap_tracker_h t);
void recap__scope_untrack(recap_tracker_h t);

#define RECAP__SNAP_HAS_HOST 1u
#define RECAP__SNAP_INITIALIZED 2u
#define RECAP__SNAP_KNOWN_FLAGS (RECAP__SNAP_HAS_HOST | RECAP__SNAP_INITIALIZED)

struct recap_snapshot {
    uint32_t magic; /* RECAP_MAGIC_SNAPSHOT while live */
    int valid; /* taken or deserialized at least once */
    uint32_t flags;
    uint64_t host_seed, host_offset;
    uint64_t gen_seed, gen_offset;
    recap__entry_t *e;
    size_t n, cap;
    uint64_t layout; /* the tracker's layout at take; 0 when unknown */
    int current;     /* the state the generator drew at take (index in e), -1: the default */
};

/* The name of the state `snap` was taken inside a fork of, copied into `name` (room for
 * RECAP_NAME_MAX + 1), when the tracker's generator now draws another one, else NULL: a
 * recompute forks it around the restore so it runs in the fork it was recorded in. */
const char *recap__snapshot_fork_of(recap_tracker_h tracker, recap_snapshot_h snap, char *name);

struct recap_states {
    uint32_t magic; /* RECAP_MAGIC_STATES while live */
    recap__entry_t *e;
    size_t n, cap;
    recap__index_t index; /* built at the first lookup or put past a few states (states.c) */
};

/* A value to write into a state object (obj) or else a generator (gen), and the value it held
 * before (filled in by recap__writes_apply). */
typedef struct recap__write {
    recap__genstate_t *obj;
    recap_generator_h gen;
    uint64_t seed, offset;
    uint64_t old_seed, old_offset;
} recap__write_t;

/* Writes w[0..n) in order, all or nothing (apply.c). */
recap_status_t recap__writes_apply(recap__write_t *w, size_t n);
/* Whether the tracker's generator or host generator is a framework's (writes may fail). */
int recap__tracker_has_framework(recap_tracker_h t);

/* Values a map replacement also writes into the tracker's generator and host generator. */
typedef struct recap__gen_values {
    int set_gen, set_host;
    uint64_t gen_seed, gen_offset;
    uint64_t host_seed, host_offset;
} recap__gen_values_t;

/* A prepared name -> state map, built without the tracker's lock; `writes` has room for one
 * write per name plus the two generators. */
typedef struct recap__map {
    recap__slot_t **slots;
    size_t n, cap;
    recap__index_t names; /* becomes the tracker's with the slots (a replacement builds it) */
    recap__write_t *writes;
} recap__map_t;

#define RECAP__INITIAL_CAP 8

/* Validates a state name (non-NULL, 1..RECAP_NAME_MAX bytes, not the default's name). */
recap_status_t recap__check_name(const char *name, size_t *len_p);
/* A fresh layout value (never 0). */
uint64_t recap__layout_next(void);

/* Slot index of `name` or -1, through the name index (recap__tracker_find below tries the last
 * hit first); the caller holds the tracker's lock. */
int recap__tracker_lookup(recap_tracker_h t, const char *name);
/* Slot index of the name name[0..len) hashing to `hash` in slots[] as `x` indexes it, or -1. */
int recap__index_find_name(const recap__index_t *x, recap__slot_t *const *slots,
                           const char *name, size_t len, uint32_t hash);
/* Whether the tracker used `seed` already; the caller holds its lock. */
int recap__tracker_has_seed(const struct recap_tracker *t, uint64_t seed);
int recap__name_is_bytewise(const recap__entry_t *e, const char *name);
extern int recap__names_bytewise;

/* Under AddressSanitizer the comparison below goes byte by byte: its word reads past a shorter
 * name's NUL are what ASan reports, also through helpers it instruments. */
#if defined(__SANITIZE_ADDRESS__)
#define RECAP_NAMES_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RECAP_NAMES_ASAN 1
#endif
#endif
#ifndef RECAP_NAMES_ASAN
#define RECAP_NAMES_ASAN 0
#endif

static inline uint64_t recap__name_word(const char *p)
{
    uint64_t w;

    memcpy(&w, p, sizeof(w));
    return w;
}

/*
 * Whether `name` is e's name, compared 8 bytes at a time: a fork's whole budget is a few dozen
 * nanoseconds and a byte loop over an 18-byte name took a third of it. The words cover
 * name[0 .. len] (len + 1 bytes, the last word overlapping the one before), so a name of another
 * length differs in them: a shorter one has its NUL where e's name has a letter, a longer one a
 * letter where e's has its NUL. A shorter name's bytes after its NUL are read but decide
 * nothing, and are only read when name[0 .. len] lies in the page of name[0]: such a read cannot
 * fault (libc's string functions read the same way). Otherwise, for names under 8 bytes, and
 * under valgrind and AddressSanitizer (which would report those reads), byte by byte.
 */
static inline int recap__name_is(const recap__entry_t *e, const char *name)
{
    size_t n = (size_t)e->len + 1, k;

    if (RECAP_NAMES_ASAN || n < sizeof(uint64_t) || ((uintptr_t)name & 4095) > 4096 - n ||
        recap__names_bytewise)
        return recap__name_is_bytewise(e, name);
    for (k = 0; k + sizeof(uint64_t) < n; k += sizeof(uint64_t))
        if (recap__name_word(name + k) != recap__name_word(e->name + k))
            return 0;
    k = n - sizeof(uint64_t);
    return recap__name_word(name + k) == recap__name_word(e->name + k);
}

/* Forks look up the same few names over and over: the last hit first, inline (the cost of the
 * common fork), then the name index, whatever the number of names. */
static inline int recap__tracker_find(recap_tracker_h t, const char *name)
{
    if (t->hint < t->nslots && recap__name_is(&t->slots[t->hint]->e, name))
        return (int)t->hint;
    return recap__tracker_lookup(t, name);
}

/* Builds, without holding the tracker's lock, a map holding copies of e[0..n); graph-safe
 * trackers get fresh objects for the names they lack. */
recap_status_t recap__map_prepare(recap_tracker_h t, const recap__entry_t *e, size_t n,
                                  recap__map_t *m);
/* Under the lock: creates the objects prepare could not know were needed (a name removed in
 * between). RECAP_ERR_NO_MEMORY leaves the tracker as it was. */
recap_status_t recap__map_complete(recap_tracker_h t, recap__map_t *m);
/* Under the tracker's lock with no fork open: completes m, writes the new values into the
 * objects of names present in both maps (a graph-safe tracker keeps those objects, so what a
 * captured graph refers to stays the same) and the values `gv` gives into the generators, then
 * installs m as the tracker's map and hands the old one back in m. All or nothing. */
recap_status_t recap__map_commit(recap_tracker_h t, recap__map_t *m,
                                 const recap__gen_values_t *gv);
void recap__map_free(recap__map_t *m);

/* Replaces the tracker's map with copies of e[0..n), writes `gv` (NULL: nothing) into its
 * generators and runs `then` under the same lock, when no fork is open (RECAP_ERR_STATE naming
 * `what` otherwise); all or nothing. */
typedef void (*recap__then_fn)(recap_tracker_h t, void *arg);
recap_status_t recap__tracker_replace(recap_tracker_h t, const recap__entry_t *e, size_t n,
                                      const recap__gen_values_t *gv, recap__then_fn then,
                                      void *arg, const char *what);

/* recap_tracker_destroy without the default tracker's check (default.c replaces it). */
recap_status_t recap__tracker_destroy(recap_tracker_h tracker);
/* A region or checkpoint takes (+1) and gives back (-1) a use of the tracker it restores:
 * destroying a tracker in use is RECAP_ERR_STATE, not a dangling pointer in the region. */
void recap__tracker_use(recap_tracker_h tracker, int d);
/* Whether t is the process's default tracker. */
int recap__tracker_is_default(recap_tracker_h t);

/* Drops the slot's references to its object. */
void recap__slot_release(recap__slot_t *s);
/* The value of slot i; the caller holds the tracker's lock. Fails only when a framework's
 * state object cannot be read. */
recap_status_t recap__slot_get(recap_tracker_h t, size_t i, uint64_t *seed, uint64_t *offset);

/* Fork handlers (called by src/process/atfork.c). */
void recap__default_tracker_atfork(recap__atfork_t when); /* default.c */
void recap__scope_atfork(recap__atfork_t when);

#endif
