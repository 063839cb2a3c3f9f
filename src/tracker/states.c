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
    s->n = n;
    return s;
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
        st = recap__fail(RECAP_ERR_NOT_FOUND, "no state \"%.*s\"", RECAP_NAME_MAX, name);
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
    for (i = 0; i < states->n; i++)
        if (states->e[i].len == len && memcmp(states->e[i].name, name, len) == 0)
            break;
    if (i == states->n) {
        e = recap__realloc_n(states->e, recap__count_add(states->n, 1), sizeof(*e));
        if (e == NULL)
            return recap__fail(RECAP_ERR_NO_MEMORY, "states object");
        states->e = e;
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
    len = strlen(name);
    for (i = 0; i < states->n; i++) {
        const recap__entry_t *e = &states->e[i];
        if (e->len == len && memcmp(e->name, name, len) == 0) {
            recap__state_encode(e->seed, e->offset, state);
            return RECAP_OK;
        }
    }
    return recap__fail(RECAP_ERR_NOT_FOUND, "no state named \"%.*s\"", RECAP_NAME_MAX, name);
}
