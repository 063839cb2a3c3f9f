/* SPDX-License-Identifier: Apache-2.0 */
/* Tracker lifecycle, adding named states and simple accessors. */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#endif

#include "base/alloc.h"
#include "base/error.h"
#include "base/handle.h"
#include "tracker/tracker.h"

static uint64_t layout_counter;

uint64_t recap__layout_next(void)
{
    return __atomic_add_fetch(&layout_counter, 1, __ATOMIC_RELAXED);
}

recap_status_t recap__check_name(const char *name, size_t *len_p)
{
    size_t len;

    RECAP_CHECK_ARG(name != NULL, "state name is NULL");
    len = strnlen(name, RECAP_NAME_MAX + 1);
    RECAP_CHECK_ARG(len > 0, "state name is empty");
    RECAP_CHECK_ARG(len <= RECAP_NAME_MAX, "state name is longer than %d bytes", RECAP_NAME_MAX);
    RECAP_CHECK_ARG(strcmp(name, RECAP_RNG_DEFAULT) != 0,
                    "\"%s\" names the generator's own state and cannot be added", name);
    *len_p = len;
    return RECAP_OK;
}

/* Under valgrind, whose memcheck sees every byte read, names are compared byte by byte
 * (tracker.h's recap__name_is says why). */
int recap__names_bytewise;

__attribute__((constructor)) static void names_at_load(void)
{
#ifdef HAVE_VALGRIND_VALGRIND_H
    recap__names_bytewise = RUNNING_ON_VALGRIND != 0;
#endif
}

int recap__name_is_bytewise(const recap__entry_t *e, const char *name)
{
    uint32_t k;

    for (k = 0; k < e->len; k++)
        if (e->name[k] != name[k])
            return 0;
    return name[k] == '\0';
}

recap_status_t recap__slot_get(recap_tracker_h t, size_t i, uint64_t *seed, uint64_t *offset)
{
    const recap__slot_t *s = t->slots[i];

    if (s->obj == NULL) {
        *seed = s->e.seed;
        *offset = s->e.offset;
        return RECAP_OK;
    }
    /* Atomic reads (draws through the generator advance it), capture-relative inside a
     * capture; a framework's object is read through its operations. */
    return recap__genstate_get_value(s->obj, seed, offset);
}

/*
 * A tracker over recap's own generator takes the generator's lock as its own: a fork then takes
 * one lock where it took the tracker's and then the generator's, which was most of its cost on
 * hosts where a locked instruction is dear (bench_tracker). The generator's draws and the
 * tracker's operations then exclude each other, as the tracker's forks and the draws already did
 * through the generator's lock. A framework generator (or host generator) keeps the tracker's own
 * lock: its operations are the host's code, which must not run under a lock its draws take.
 *
 * A tracker's snapshots, restores and seeding take its host generator's lock while holding its
 * own, so sharing orders two generators' locks: tracker A over G with host H holds G while it
 * takes H, and tracker B over H with host G would hold H while it takes G. A generator whose lock
 * is so held while another's is taken (outer) never becomes one taken under another's (inner),
 * nor the reverse: every such edge then goes from an outer to an inner generator, no chain of
 * two exists, and no cycle. A tracker that would break that keeps its own lock (as before); the
 * marks stay (a later tracker may hold the same pair).
 */
static recap__lock_t share_lock = RECAP_LOCK_INIT;

static void choose_lock(recap_tracker_h t)
{
    recap_generator_h g = t->gen, h = t->host_gen;

    t->lock = &t->own_lock;
    if (g->fw != NULL || (h != NULL && h->fw != NULL))
        return;
    recap__lock(&share_lock);
    if (h == NULL) {
        t->lock = &g->lock;
    } else if (!g->lock_inner && !h->lock_outer) {
        g->lock_outer = 1;
        h->lock_inner = 1;
        t->lock = &g->lock;
    }
    recap__unlock(&share_lock);
}

static recap_status_t tracker_alloc(const recap_tracker_params_t *p, recap_tracker_h *t_p)
{
    recap_tracker_h t = calloc(1, sizeof(*t));

    if (t == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "tracker");
    t->seeds = recap__alloc_n(RECAP__INITIAL_CAP, sizeof(*t->seeds));
    t->frames = recap__alloc_n(RECAP__INITIAL_CAP, sizeof(*t->frames));
    /* Seeding records its few seeds under the lock, where it cannot fail: room made here. */
    if (t->seeds == NULL || t->frames == NULL ||
        recap__index_reserve(&t->seed_index, RECAP__INITIAL_CAP) != RECAP_OK) {
        free(t->seeds);
        free(t->frames);
        recap__index_free(&t->seed_index);
        free(t);
        return recap__fail(RECAP_ERR_NO_MEMORY, "tracker");
    }
    t->lock = &t->own_lock;
    t->seeds_cap = t->frames_cap = RECAP__INITIAL_CAP;
    t->params = *p;
    t->flags = p->flags;
    t->current = -1;
    t->layout = recap__layout_next();
    /* Tokens of different trackers differ, so one handed to the wrong tracker is caught. */
    t->next_token = t->layout << 32 | 1;
    t->magic = RECAP_MAGIC_TRACKER;
    if (recap__handle_register(t, RECAP_MAGIC_TRACKER) != RECAP_OK) {
        free(t->seeds);
        free(t->frames);
        recap__index_free(&t->seed_index);
        free(t);
        return RECAP_ERR_NO_MEMORY;
    }
    *t_p = t;
    return RECAP_OK;
}

recap_status_t recap_tracker_create(const recap_tracker_params_t *params, recap_tracker_h *tracker_p)
{
    recap_tracker_h t = NULL;
    recap_status_t st;

    RECAP_CHECK_ARG(params != NULL && tracker_p != NULL, "NULL argument");
    RECAP_CHECK_ARG((params->flags & ~(uint32_t)(RECAP_TRACKER_GRAPH_SAFE |
                                                 RECAP_TRACKER_INFERENCE)) == 0,
                    "unknown tracker flags 0x%x", (unsigned)params->flags);
    /* The set of live handles, not the magic: a destroyed generator's memory is not read. */
    RECAP_CHECK_ARG(params->generator == NULL ||
                    recap__handle_live(params->generator, RECAP_MAGIC_GENERATOR),
                    "params.generator %p is not a live generator", (void *)params->generator);
    RECAP_CHECK_ARG(params->host_generator == NULL ||
                    recap__handle_live(params->host_generator, RECAP_MAGIC_GENERATOR),
                    "params.host_generator %p is not a live generator",
                    (void *)params->host_generator);
    RECAP_CHECK_ARG(params->generator == NULL || params->generator->fw == NULL ||
                    !(params->flags & RECAP_TRACKER_GRAPH_SAFE) ||
                    recap__fw_graph_safe(params->generator),
                    "a graph-safe tracker needs the graph-safe form of the framework generator's "
                    "operations (state_clone .. state_release)");
    RECAP_CHECK_ARG(params->host_generator == NULL ||
                    params->host_generator != params->generator,
                    "the same generator as generator and host_generator");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_tracker_create");
    st = tracker_alloc(params, &t);
    if (st != RECAP_OK)
        return st;
    if (params->generator != NULL) {
        t->gen = params->generator;
    } else {
        st = recap_generator_create(params->device, &t->gen);
        if (st != RECAP_OK) {
            recap__handle_unregister(t, RECAP_MAGIC_TRACKER);
            free(t->seeds);
            free(t->frames);
            recap__index_free(&t->seed_index);
            free(t);
            return st;
        }
        t->owns_gen = 1;
    }
    t->device = t->gen->device;
    t->host_gen = params->host_generator;
    choose_lock(t);
    recap__generator_drive(t->gen, 1);
    if (t->host_gen != NULL)
        recap__generator_drive(t->host_gen, 1);
    recap__scope_track(t);
    *tracker_p = t;
    return RECAP_OK;
}

recap_status_t recap_tracker_destroy(recap_tracker_h tracker)
{
    RECAP_CHECK_LIVE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_tracker_destroy");
    /* recap_default_tracker_get would hand out the freed handle afterwards. */
    if (recap__tracker_is_default(tracker))
        return recap__fail(RECAP_ERR_STATE, "the default tracker cannot be destroyed with "
                           "recap_tracker_destroy (recap_default_tracker_get would return it); "
                           "replace it with recap_default_tracker_initialize(params, "
                           "force_reset=1, ...)");
    return recap__tracker_destroy(tracker);
}

recap_status_t recap__tracker_destroy(recap_tracker_h tracker)
{
    recap__map_t m = {0};

    recap__tracker_lock(tracker);
    if (tracker->depth > 0) {
        size_t depth = tracker->depth;
        recap__tracker_unlock(tracker);
        return recap__fail(RECAP_ERR_STATE, "tracker destroyed with %zu fork(s) open: its "
                           "generator would keep a named state; unfork first", depth);
    }
    if (tracker->users > 0) {
        size_t users = tracker->users;
        recap__tracker_unlock(tracker);
        return recap__fail(RECAP_ERR_STATE, "tracker destroyed while %zu recompute region(s) "
                           "or checkpoint(s) use it (they restore its states when they rebuild): "
                           "destroy them first", users);
    }
    recap__tracker_unlock(tracker);
    /* First, so that an exact-capture scope snapshotting it in another thread finishes with a
     * live handle. */
    recap__scope_untrack(tracker);
    RECAP_CHECK_ARG(recap__handle_unregister(tracker, RECAP_MAGIC_TRACKER),
                    "tracker %p destroyed twice at once", (void *)tracker);
    tracker->magic = RECAP_MAGIC_DEAD;
    m.slots = tracker->slots;
    m.n = tracker->nslots;
    m.names = tracker->names;
    recap__map_free(&m);
    recap__index_free(&tracker->seed_index);
    recap__generator_drive(tracker->gen, -1);
    if (tracker->host_gen != NULL)
        recap__generator_drive(tracker->host_gen, -1);
    if (tracker->owns_gen)
        recap_generator_destroy(tracker->gen);
    free(tracker->seeds);
    free(tracker->frames);
    free(tracker);
    return RECAP_OK;
}

void recap__tracker_use(recap_tracker_h tracker, int d)
{
    recap__tracker_lock(tracker);
    tracker->users += (size_t)(ptrdiff_t)d;
    recap__tracker_unlock(tracker);
}

static void forget_seeds(recap_tracker_h t, void *arg)
{
    t->nseeds = 0;
    recap__index_clear(&t->seed_index);
    t->initialized = 0;
}

recap_status_t recap_tracker_reset(recap_tracker_h tracker)
{
    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_tracker_reset");
    return recap__tracker_replace(tracker, NULL, 0, NULL, forget_seeds, NULL, "reset");
}

recap_status_t recap_tracker_is_initialized(recap_tracker_h tracker, int *initialized_p)
{
    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_ARG(initialized_p != NULL, "NULL argument");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_tracker_is_initialized");
    recap__tracker_lock(tracker);
    *initialized_p = tracker->initialized;
    recap__tracker_unlock(tracker);
    return RECAP_OK;
}

recap_status_t recap_tracker_is_graph_safe(recap_tracker_h tracker, int *graph_safe_p)
{
    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_ARG(graph_safe_p != NULL, "NULL argument");
    *graph_safe_p = (tracker->flags & RECAP_TRACKER_GRAPH_SAFE) != 0;
    return RECAP_OK;
}

recap_status_t recap_tracker_generator(recap_tracker_h tracker, recap_generator_h *gen_p)
{
    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_ARG(gen_p != NULL, "NULL argument");
    *gen_p = tracker->gen;
    return RECAP_OK;
}

recap_status_t recap_tracker_current_name(recap_tracker_h tracker, const char **name_p)
{
    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_ARG(name_p != NULL, "NULL argument");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_tracker_current_name");
    recap__tracker_lock(tracker);
    *name_p = tracker->current < 0 ? RECAP_RNG_DEFAULT : tracker->slots[tracker->current]->e.name;
    recap__tracker_unlock(tracker);
    return RECAP_OK;
}

/* Grows the slot and seed arrays and their indexes for one more add; the caller holds the lock.
 * Growing first keeps a failed add from recording anything. */
static recap_status_t reserve_one(recap_tracker_h t)
{
    if (recap__index_reserve(&t->names, t->nslots + 1) != RECAP_OK ||
        recap__index_reserve(&t->seed_index, t->nseeds + 1) != RECAP_OK)
        return recap__fail(RECAP_ERR_NO_MEMORY, "tracker states");
    if (t->nslots == t->slots_cap) {
        size_t cap = t->slots_cap ? 2 * t->slots_cap : RECAP__INITIAL_CAP;
        recap__slot_t **s = recap__realloc_n(t->slots, cap, sizeof(*s));
        if (s == NULL)
            return recap__fail(RECAP_ERR_NO_MEMORY, "tracker states");
        t->slots = s;
        t->slots_cap = cap;
    }
    if (t->nseeds == t->seeds_cap) {
        uint64_t *s = recap__realloc_n(t->seeds, recap__count_add(t->seeds_cap, t->seeds_cap), sizeof(*s));
        if (s == NULL)
            return recap__fail(RECAP_ERR_NO_MEMORY, "tracker seeds");
        t->seeds = s;
        t->seeds_cap *= 2;
    }
    return RECAP_OK;
}

static recap_status_t add_locked(recap_tracker_h t, recap__map_t *m)
{
    recap__slot_t *s = m->slots[0];
    recap_status_t st;

    if (recap__tracker_has_seed(t, s->e.seed))
        return recap__fail(RECAP_ERR_DUPLICATE_SEED, "seed %llu is already used by this "
                           "tracker", (unsigned long long)s->e.seed);
    if (recap__tracker_find(t, s->e.name) >= 0)
        return recap__fail(RECAP_ERR_EXISTS, "state \"%s\" already exists", s->e.name);
    st = recap__map_complete(t, m);
    if (st == RECAP_OK)
        st = reserve_one(t);
    if (st != RECAP_OK)
        return st;
    recap__index_put(&t->seed_index, recap__seed_hash(s->e.seed), t->nseeds);
    t->seeds[t->nseeds++] = s->e.seed;
    recap__index_put(&t->names, recap__name_hash(s->e.name, s->e.len), t->nslots);
    t->slots[t->nslots++] = s;
    t->layout = recap__layout_next();
    t->initialized = 1;
    return RECAP_OK;
}

recap_status_t recap_tracker_add(recap_tracker_h tracker, const char *name, uint64_t seed)
{
    recap__entry_t e = {0};
    recap__map_t m;
    recap_status_t st;
    size_t len;

    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_tracker_add");
    st = recap__check_name(name, &len);
    if (st != RECAP_OK)
        return st;
    if (tracker->flags & RECAP_TRACKER_INFERENCE)
        return RECAP_OK;
    memcpy(e.name, name, len);
    e.len = (uint32_t)len;
    e.seed = seed;
    st = recap__map_prepare(tracker, &e, 1, &m);
    if (st != RECAP_OK)
        return st;
    recap__tracker_lock(tracker);
    st = add_locked(tracker, &m);
    recap__tracker_unlock(tracker);
    if (st == RECAP_OK)
        m.n = 0; /* the slot now belongs to the tracker */
    recap__map_free(&m);
    return st;
}
