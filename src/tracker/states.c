/* SPDX-License-Identifier: Apache-2.0 */
/* States objects: by-value copies of a tracker's name -> state map (get_states/set_states). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/handle.h"
#include "tracker/tracker.h"

static recap_states_h states_alloc(size_t n)
{
    recap_states_h s = calloc(1, sizeof(*s));

    if (s == NULL)
        return NULL;
    s->e = n ? recap__alloc_n(n, sizeof(*s->e)) : NULL;
    if ((n && s->e == NULL) || recap__handle_register(s, RECAP_MAGIC_STATES) != RECAP_OK) {
        free(s->e);
        free(s);
        return NULL;
    }
    s->magic = RECAP_MAGIC_STATES;
    s->n = s->cap = n;
    return s;
}

/* Below this many states a scan is as quick as the index and allocates nothing. */
#define STATES_SCAN_MAX 8

static int entry_is(const recap__entry_t *e, const char *name, size_t len)
{
    return e->len == len && memcmp(e->name, name, len) == 0;
}

/* Builds the index of a states object grown past a few states, or catches it up with the puts
 * since; 0 when memory ran out (the caller scans instead). A lookup writing it is fine: a states
 * object is used from one thread at a time (recap.h). */
static int states_index(recap_states_h s)
{
    size_t i;

    if (s->index.n == s->n && s->index.cap != 0)
        return 1;
    if (recap__index_reserve(&s->index, s->n) != RECAP_OK)
        return 0;
    for (i = s->index.n; i < s->n; i++)
        recap__index_put(&s->index, recap__name_hash(s->e[i].name, s->e[i].len), i);
    return 1;
}

/* Position of name[0..len) in s, or s->n: through the index past a few states, since a loop
 * putting or looking up every name of a large object would otherwise be quadratic. */
static size_t states_find(recap_states_h s, const char *name, size_t len)
{
    size_t i, p;

    if (s->n > STATES_SCAN_MAX && states_index(s)) {
        uint32_t hash = recap__name_hash(name, len);

        i = hash & (s->index.cap - 1);
        while ((p = recap__index_next(&s->index, hash, &i)) != 0)
            if (entry_is(&s->e[p - 1], name, len))
                return p - 1;
        return s->n;
    }
    for (i = 0; i < s->n && !entry_is(&s->e[i], name, len); i++)
        ;
    return i;
}

recap_status_t recap_tracker_get_states(recap_tracker_h tracker, recap_states_h *states_p)
{
    recap_status_t st = RECAP_OK;
    recap_states_h s;
    size_t i, n;

    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_ARG(states_p != NULL, "NULL argument");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_tracker_get_states");
    /* Allocate outside the lock; an add in between makes us try again. */
    for (;;) {
        n = __atomic_load_n(&tracker->nslots, __ATOMIC_RELAXED);
        s = states_alloc(n);
        if (s == NULL)
            return recap__fail(RECAP_ERR_NO_MEMORY, "states object");
        recap__tracker_lock(tracker);
        if (tracker->nslots <= n)
            break;
        recap__tracker_unlock(tracker);
        recap_states_free(s);
    }
    s->n = tracker->nslots;
    for (i = 0; i < s->n && st == RECAP_OK; i++) {
        s->e[i] = tracker->slots[i]->e;
        st = recap__slot_get(tracker, i, &s->e[i].seed, &s->e[i].offset);
    }
    recap__tracker_unlock(tracker);
    if (st != RECAP_OK) {
        recap_states_free(s);
        return st;
    }
    *states_p = s;
    return RECAP_OK;
}

recap_status_t recap_tracker_state_object(recap_tracker_h tracker, const char *name, void **obj_p)
{
    recap_status_t st = RECAP_OK;
    int i;

    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_ARG(name != NULL && obj_p != NULL, "NULL argument");
    RECAP_CHECK_ARG(tracker->gen->fw != NULL && (tracker->flags & RECAP_TRACKER_GRAPH_SAFE),
                    "state objects belong to graph-safe trackers on framework generators");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_tracker_state_object");
    recap__tracker_lock(tracker);
    i = recap__tracker_find(tracker, name);
    if (i < 0)
        st = recap__fail(RECAP_ERR_NOT_FOUND, "no state \"" RECAP__NAME_FMT "\"",
                         RECAP__NAME_ARGS(name));
    else
        *obj_p = tracker->slots[i]->obj->fobj;
    recap__tracker_unlock(tracker);
    return st;
}

/* The used seeds stay as they are, as in Megatron. */
static void mark_initialized(recap_tracker_h t, void *arg)
{
    t->initialized = 1;
}

recap_status_t recap_tracker_set_states(recap_tracker_h tracker, recap_states_h states)
{
    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_HANDLE(states, RECAP_MAGIC_STATES, "states object");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_tracker_set_states");
    if (tracker->flags & RECAP_TRACKER_INFERENCE)
        return RECAP_OK;
    return recap__tracker_replace(tracker, states->e, states->n, NULL, mark_initialized, NULL,
                                  "set_states");
}

recap_status_t recap_states_copy(recap_states_h states, recap_states_h *copy_p)
{
    recap_states_h c;

    RECAP_CHECK_HANDLE(states, RECAP_MAGIC_STATES, "states object");
    RECAP_CHECK_ARG(copy_p != NULL, "NULL argument");
    c = states_alloc(states->n);
    if (c == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "states object");
    if (states->n)
        memcpy(c->e, states->e, states->n * sizeof(*c->e));
    *copy_p = c;
    return RECAP_OK;
}

recap_status_t recap_states_create(recap_states_h *states_p)
{
    recap_states_h s;

    RECAP_CHECK_ARG(states_p != NULL, "states_p is NULL");
    s = states_alloc(0);
    if (s == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "states object");
    *states_p = s;
    return RECAP_OK;
}

recap_status_t recap_states_put(recap_states_h states, const char *name,
                                const uint8_t state[RECAP_STATE_BYTES])
{
    uint64_t seed, offset;
    recap__entry_t *e;
    recap_status_t st;
    size_t len, i;

    RECAP_CHECK_HANDLE(states, RECAP_MAGIC_STATES, "states object");
    RECAP_CHECK_ARG(state != NULL, "NULL argument");
    st = recap__check_name(name, &len);
    if (st == RECAP_OK)
        st = recap__state_decode(state, &seed, &offset);
    if (st != RECAP_OK)
        return st;
    i = states_find(states, name, len);
    if (i == states->n) {
        if (i == states->cap) {
            size_t cap = i < STATES_SCAN_MAX ? STATES_SCAN_MAX : recap__count_add(i, i);

            e = recap__realloc_n(states->e, cap, sizeof(*e));
            if (e == NULL)
                return recap__fail(RECAP_ERR_NO_MEMORY, "states object");
            states->e = e;
            states->cap = cap;
        }
        e = states->e;
        memset(&e[i], 0, sizeof(e[i]));
        memcpy(e[i].name, name, len);
        e[i].len = (uint32_t)len;
        states->n++;
    }
    states->e[i].seed = seed;
    states->e[i].offset = offset;
    return RECAP_OK;
}

recap_status_t recap_states_free(recap_states_h states)
{
    RECAP_CHECK_ARG(states != NULL, "states is NULL");
    RECAP_CHECK_ARG(recap__handle_unregister(states, RECAP_MAGIC_STATES),
                    "states object handle %p is not live (freed already, or never created)",
                    (void *)states);
    states->magic = RECAP_MAGIC_DEAD;
    free(states->e);
    recap__index_free(&states->index);
    free(states);
    return RECAP_OK;
}

recap_status_t recap_states_count(recap_states_h states, size_t *count_p)
{
    RECAP_CHECK_HANDLE(states, RECAP_MAGIC_STATES, "states object");
    RECAP_CHECK_ARG(count_p != NULL, "NULL argument");
    *count_p = states->n;
    return RECAP_OK;
}

recap_status_t recap_states_name(recap_states_h states, size_t index, const char **name_p)
{
    RECAP_CHECK_HANDLE(states, RECAP_MAGIC_STATES, "states object");
    RECAP_CHECK_ARG(name_p != NULL, "NULL argument");
    RECAP_CHECK_ARG(index < states->n, "index %zu out of range (%zu states)", index, states->n);
    *name_p = states->e[index].name;
    return RECAP_OK;
}

recap_status_t recap_states_lookup(recap_states_h states, const char *name,
                                   uint8_t state[RECAP_STATE_BYTES])
{
    size_t i, len;

    RECAP_CHECK_HANDLE(states, RECAP_MAGIC_STATES, "states object");
    RECAP_CHECK_ARG(name != NULL && state != NULL, "NULL argument");
    len = strnlen(name, RECAP_NAME_MAX + 1);
    i = len <= RECAP_NAME_MAX ? states_find(states, name, len) : states->n;
    if (i < states->n) {
        recap__state_encode(states->e[i].seed, states->e[i].offset, state);
        return RECAP_OK;
    }
    return recap__fail(RECAP_ERR_NOT_FOUND, "no state named \"" RECAP__NAME_FMT "\"",
                       RECAP__NAME_ARGS(name));
}
