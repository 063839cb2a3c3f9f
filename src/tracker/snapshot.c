/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whole-state snapshots (Megatron's get_all_rng_states / _set_all_rng_states): the host
 * generator, the tracker's generator and every named state, as values. Taking and restoring are
 * copies: a snapshot keeps its arrays, and its `layout` tells when the names need no copying or
 * comparing because they are the tracker's own, in the same order.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/handle.h"
#include "tracker/tracker.h"

recap_status_t recap_snapshot_create(recap_snapshot_h *snap_p)
{
    recap_snapshot_h s;

    RECAP_CHECK_ARG(snap_p != NULL, "snap_p is NULL");
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "snapshot");
    s->magic = RECAP_MAGIC_SNAPSHOT;
    s->current = -1;
    if (recap__handle_register(s, RECAP_MAGIC_SNAPSHOT) != RECAP_OK) {
        free(s);
        return RECAP_ERR_NO_MEMORY;
    }
    *snap_p = s;
    return RECAP_OK;
}

recap_status_t recap_snapshot_destroy(recap_snapshot_h snap)
{
    RECAP_CHECK_ARG(snap != NULL, "snapshot is NULL");
    RECAP_CHECK_ARG(recap__handle_unregister(snap, RECAP_MAGIC_SNAPSHOT),
                    "snapshot handle %p is not live (destroyed already, or never created)",
                    (void *)snap);
    snap->magic = RECAP_MAGIC_DEAD;
    free(snap->e);
    free(snap);
    return RECAP_OK;
}

static recap_status_t snap_reserve(recap_snapshot_h s, size_t n)
{
    recap__entry_t *e;

    if (n < RECAP__INITIAL_CAP)
        n = RECAP__INITIAL_CAP;
    e = recap__realloc_n(s->e, n, sizeof(*e));
    if (e == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "snapshot of %zu states", n);
    s->e = e;
    s->cap = n;
    return RECAP_OK;
}

/* Called with the tracker's lock held and room for every state. A framework's failure to be
 * read leaves the snapshot invalid (never half of one state and half of another). */
static recap_status_t take_locked(recap_tracker_h t, recap_snapshot_h s)
{
    int names_known = s->valid && s->layout == t->layout;
    recap_status_t st = RECAP_OK;
    size_t i;

    for (i = 0; i < t->nslots && st == RECAP_OK; i++) {
        if (!names_known)
            s->e[i] = t->slots[i]->e;
        st = recap__slot_get(t, i, &s->e[i].seed, &s->e[i].offset);
    }
    if (st == RECAP_OK)
        st = recap__generator_get_value(t->gen, &s->gen_seed, &s->gen_offset);
    s->host_seed = s->host_offset = 0;
    if (st == RECAP_OK && t->host_gen != NULL)
        st = recap__generator_get_value(t->host_gen, &s->host_seed, &s->host_offset);
    if (st != RECAP_OK) {
        s->valid = 0;
        s->layout = 0;
        return st;
    }
    s->n = t->nslots;
    s->layout = t->layout;
    s->current = t->current;
    s->flags = t->initialized ? RECAP__SNAP_INITIALIZED : 0;
    if (t->host_gen != NULL)
        s->flags |= RECAP__SNAP_HAS_HOST;
    s->valid = 1;
    return RECAP_OK;
}

recap_status_t recap_snapshot_take(recap_tracker_h tracker, recap_snapshot_h snap)
{
    recap_status_t st;
    size_t n;

    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_HANDLE(snap, RECAP_MAGIC_SNAPSHOT, "snapshot");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_snapshot_take");
    /* Grow outside the lock; an add in between makes us look again. */
    for (;;) {
        recap__tracker_lock(tracker);
        n = tracker->nslots;
        if (snap->cap >= n)
            break;
        recap__tracker_unlock(tracker);
        st = snap_reserve(snap, n);
        if (st != RECAP_OK)
            return st;
    }
    st = take_locked(tracker, snap);
    recap__tracker_unlock(tracker);
    return st;
}

/* Same names in the same order: the snapshot's values can go into the tracker's slots. */
static int names_fit(recap_tracker_h t, recap_snapshot_h s)
{
    size_t i;

    if (s->layout == t->layout)
        return 1;
    if (s->n != t->nslots)
        return 0;
    for (i = 0; i < s->n; i++) {
        const recap__entry_t *a = &s->e[i], *b = &t->slots[i]->e;
        if (a->len != b->len || memcmp(a->name, b->name, a->len) != 0)
            return 0;
    }
    s->layout = t->layout;
    return 1;
}

/* Under the tracker's lock. In graph-safe mode the values go into the existing objects, so a
 * captured graph's objects stay the ones it refers to. The generator is written last: inside a
 * fork its object is the current slot's, and the generator's value is what the snapshot says the
 * generator held. recap's own states take any value; this is the path with no allocation. */
static void write_values(recap_tracker_h t, const struct recap_snapshot *s)
{
    size_t i;

    for (i = 0; i < s->n; i++) {
        recap__slot_t *slot = t->slots[i];

        if (slot->obj == NULL) {
            slot->e.seed = s->e[i].seed;
            slot->e.offset = s->e[i].offset;
        } else if ((int)i != t->current) {
            recap__genstate_set_value(slot->obj, s->e[i].seed, s->e[i].offset);
        }
    }
    recap__generator_set_value(t->gen, s->gen_seed, s->gen_offset);
    if (t->host_gen != NULL)
        recap__generator_set_value(t->host_gen, s->host_seed, s->host_offset);
    t->initialized = (s->flags & RECAP__SNAP_INITIALIZED) != 0;
}

/*
 * The generator's value is the progress of the state it drew at take: the default outside forks,
 * else the forked one. A restore makes that state the current one again, so the generator and
 * the names stay apart as they were (as in Megatron's module, where the generator and the map
 * are separate): a snapshot taken outside forks restored inside fork(x) has the generator draw
 * the restored default value, a nested fork(x) x's restored value, and the fork's unfork stores
 * what the generator drew into x and puts the outer state back, as always. In value mode that is
 * the slots' own bookkeeping. A graph-safe tracker's generator holds the current state's object,
 * which cannot take another state's value while that fork is open: RECAP_ERR_STATE, nothing
 * changed (outside forks the values go into the objects as they are).
 */
static recap_status_t check_fork(recap_tracker_h t, const struct recap_snapshot *s)
{
    if (!(t->flags & RECAP_TRACKER_GRAPH_SAFE) || t->current < 0 || s->current == t->current)
        return RECAP_OK;
    return recap__fail(RECAP_ERR_STATE, "restore inside a fork of \"" RECAP__NAME_FMT "\" of a snapshot taken "
                       "%s: a graph-safe tracker's generator holds that state's object, which "
                       "cannot take the generator's value; restore it outside the fork",
                       RECAP__NAME_ARGS(t->slots[t->current]->e.name),
                       s->current < 0 ? "outside forks" : "inside another fork");
}

/* The same with a framework's generator, whose writes may fail: the object and generator writes
 * go first, all or nothing, then the tracker's own slots. */
static recap_status_t write_values_framework(recap_tracker_h t, const struct recap_snapshot *s)
{
    recap__write_t *w = recap__alloc_n(recap__count_add(s->n, 2), sizeof(*w));
    recap_status_t st;
    size_t i, k = 0;

    if (w == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "snapshot restore");
    for (i = 0; i < s->n; i++) {
        if (t->slots[i]->obj == NULL || (int)i == t->current)
            continue;
        w[k].obj = t->slots[i]->obj;
        w[k].seed = s->e[i].seed;
        w[k++].offset = s->e[i].offset;
    }
    w[k].obj = NULL;
    w[k].gen = t->gen;
    w[k].seed = s->gen_seed;
    w[k++].offset = s->gen_offset;
    if (t->host_gen != NULL) {
        w[k].obj = NULL;
        w[k].gen = t->host_gen;
        w[k].seed = s->host_seed;
        w[k++].offset = s->host_offset;
    }
    st = recap__writes_apply(w, k);
    free(w);
    if (st != RECAP_OK)
        return st;
    for (i = 0; i < s->n; i++) {
        if (t->slots[i]->obj == NULL) {
            t->slots[i]->e.seed = s->e[i].seed;
            t->slots[i]->e.offset = s->e[i].offset;
        }
    }
    t->initialized = (s->flags & RECAP__SNAP_INITIALIZED) != 0;
    return RECAP_OK;
}

/* After the map is replaced with the snapshot's names (which needs every fork closed): the
 * values went in with the map and the generators' with it (recap__tracker_replace). */
static void restore_replaced(recap_tracker_h t, void *arg)
{
    recap_snapshot_h s = arg;

    s->layout = t->layout;
    t->initialized = (s->flags & RECAP__SNAP_INITIALIZED) != 0;
}

recap_status_t recap_snapshot_restore(recap_tracker_h tracker, recap_snapshot_h snap)
{
    recap__gen_values_t gv = {0};
    int has_host;

    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_HANDLE(snap, RECAP_MAGIC_SNAPSHOT, "snapshot");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_snapshot_restore");
    if (!snap->valid)
        return recap__fail(RECAP_ERR_STATE, "restore of a snapshot never taken or deserialized");
    has_host = (snap->flags & RECAP__SNAP_HAS_HOST) != 0;
    if (has_host != (tracker->host_gen != NULL))
        return recap__fail(RECAP_ERR_INVALID_ARG, "the snapshot %s a host generator state and "
                           "the tracker %s a host generator", has_host ? "holds" : "holds no",
                           tracker->host_gen ? "has" : "has no");
    recap__tracker_lock(tracker);
    if (names_fit(tracker, snap)) {
        recap_status_t st = check_fork(tracker, snap);

        if (st == RECAP_OK && recap__tracker_has_framework(tracker))
            st = write_values_framework(tracker, snap);
        else if (st == RECAP_OK)
            write_values(tracker, snap);
        if (st == RECAP_OK && !(tracker->flags & RECAP_TRACKER_GRAPH_SAFE))
            tracker->current = snap->current;
        recap__tracker_unlock(tracker);
        return st;
    }
    recap__tracker_unlock(tracker);
    gv.set_gen = gv.set_host = 1;
    gv.gen_seed = snap->gen_seed;
    gv.gen_offset = snap->gen_offset;
    gv.host_seed = snap->host_seed;
    gv.host_offset = snap->host_offset;
    return recap__tracker_replace(tracker, snap->e, snap->n, &gv, restore_replaced, snap,
                                  "restore of a snapshot of other states");
}

const char *recap__snapshot_fork_of(recap_tracker_h tracker, recap_snapshot_h snap, char *name)
{
    const char *r = NULL;

    recap__tracker_lock(tracker);
    if (snap->valid && snap->current >= 0 && names_fit(tracker, snap) &&
        snap->current != tracker->current) {
        const recap__entry_t *e = &tracker->slots[snap->current]->e;
        memcpy(name, e->name, e->len);
        name[e->len] = '\0';
        r = name;
    }
    recap__tracker_unlock(tracker);
    return r;
}
