/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exact-capture scopes: every tracker's and framework generator's RNG state taken at entry and
 * put back at exit, so a framework's warm-up iterations and captures leave no trace in the
 * numbers the job draws (include/recap.h says what users get).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/env.h"
#include "base/error.h"
#include "base/settings.h"
#include "capture/capture.h"
#include "tracker/tracker.h"

/* Every live tracker. Entering or leaving a scope holds this lock while it snapshots or
 * restores them, so none is destroyed meanwhile; snapshots take each tracker's own lock inside
 * it, and tracker creation (the only other taker) holds nothing else. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static recap_tracker_h reg_head;
static uint64_t reg_ids;

void recap__scope_track(recap_tracker_h t)
{
    pthread_mutex_lock(&reg_lock);
    t->reg_id = ++reg_ids;
    t->reg_prev = NULL;
    t->reg_next = reg_head;
    if (reg_head != NULL)
        reg_head->reg_prev = t;
    reg_head = t;
    pthread_mutex_unlock(&reg_lock);
}

void recap__scope_untrack(recap_tracker_h t)
{
    pthread_mutex_lock(&reg_lock);
    if (t->reg_prev != NULL)
        t->reg_prev->reg_next = t->reg_next;
    else if (reg_head == t)
        reg_head = t->reg_next;
    if (t->reg_next != NULL)
        t->reg_next->reg_prev = t->reg_prev;
    t->reg_prev = t->reg_next = NULL;
    pthread_mutex_unlock(&reg_lock);
}

typedef struct {
    recap_tracker_h t;
    uint64_t id;
    recap_snapshot_h snap;
} saved_tracker_t;

struct recap_exact_scope {
    int enabled;
    saved_tracker_t *tr;
    size_t ntr;
    recap__fw_value_t *fw;
    size_t nfw;
};

static int exact_enabled(void)
{
    /* "1" (index 0) or unset: on; "0": off; anything else is warned about, and on. */
    return recap__env_choice("RECAP_EXACT_CAPTURE", recap__setting_choices("RECAP_EXACT_CAPTURE"),
                             0, 0) == 0;
}

static void scope_free(recap_exact_scope_h s)
{
    size_t i;

    for (i = 0; i < s->ntr; i++)
        recap_snapshot_destroy(s->tr[i].snap);
    free(s->tr);
    free(s->fw);
    free(s);
}

static recap_status_t check_outside_capture(const char *what)
{
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP(what);
    if (recap__capture_of_thread() != NULL)
        return recap__fail(RECAP_ERR_STATE, "%s inside a capture of this thread: enter the "
                           "scope before the warm-up and leave it after the capture ended", what);
    return RECAP_OK;
}

/* Under reg_lock: a snapshot of every live tracker. */
static recap_status_t save_trackers(recap_exact_scope_h s)
{
    recap_tracker_h t;
    recap_status_t st;
    size_t n = 0;

    for (t = reg_head; t != NULL; t = t->reg_next)
        n++;
    s->tr = calloc(n ? n : 1, sizeof(*s->tr));
    if (s->tr == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "exact-capture scope");
    for (t = reg_head; t != NULL; t = t->reg_next) {
        saved_tracker_t *e = &s->tr[s->ntr];

        st = recap_snapshot_create(&e->snap);
        if (st != RECAP_OK)
            return st;
        s->ntr++;
        e->t = t;
        e->id = t->reg_id;
        st = recap_snapshot_take(t, e->snap);
        if (st != RECAP_OK)
            return st;
    }
    return RECAP_OK;
}

static recap_status_t save_frameworks(recap_exact_scope_h s)
{
    size_t n = 0, cap;
    recap_status_t st;

    /* Count, then read; a generator created in between makes us read again. */
    for (;;) {
        st = recap__fw_save_all(NULL, 0, &cap);
        if (st != RECAP_OK)
            return st;
        free(s->fw);
        s->fw = recap__alloc_n(cap ? cap : 1, sizeof(*s->fw));
        if (s->fw == NULL)
            return recap__fail(RECAP_ERR_NO_MEMORY, "exact-capture scope");
        st = recap__fw_save_all(s->fw, cap, &n);
        if (st != RECAP_OK || n <= cap)
            break;
    }
    s->nfw = n;
    return st;
}

recap_status_t recap_exact_capture_enter(recap_exact_scope_h *scope_p)
{
    recap_exact_scope_h s;
    recap_status_t st;

    RECAP_CHECK_ARG(scope_p != NULL, "scope_p is NULL");
    st = check_outside_capture("recap_exact_capture_enter");
    if (st != RECAP_OK)
        return st;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "exact-capture scope");
    s->enabled = exact_enabled();
    if (s->enabled) {
        pthread_mutex_lock(&reg_lock);
        st = save_trackers(s);
        pthread_mutex_unlock(&reg_lock);
        if (st == RECAP_OK)
            st = save_frameworks(s);
        if (st != RECAP_OK) {
            scope_free(s);
            return st;
        }
    }
    *scope_p = s;
    return RECAP_OK;
}

/* Trackers first (their generators' values with them), then the framework generators that no
 * tracker drives, which get the same values again where one does. */
recap_status_t recap_exact_capture_leave(recap_exact_scope_h scope)
{
    recap_status_t first = RECAP_OK, st;
    recap_tracker_h t;
    size_t i;

    RECAP_CHECK_ARG(scope != NULL, "scope is NULL");
    st = check_outside_capture("recap_exact_capture_leave");
    if (st != RECAP_OK)
        return st;
    if (scope->enabled) {
        pthread_mutex_lock(&reg_lock);
        for (i = 0; i < scope->ntr; i++) {
            for (t = reg_head; t != NULL && !(t == scope->tr[i].t &&
                                               t->reg_id == scope->tr[i].id);
                 t = t->reg_next)
                ;
            if (t == NULL)
                continue; /* destroyed inside the scope */
            st = recap_snapshot_restore(t, scope->tr[i].snap);
            if (first == RECAP_OK)
                first = st;
        }
        pthread_mutex_unlock(&reg_lock);
        st = recap__fw_restore_all(scope->fw, scope->nfw);
        if (first == RECAP_OK)
            first = st;
    }
    scope_free(scope);
    return first;
}

void recap__scope_atfork(recap__atfork_t when)
{
    recap__atfork_mutex(&reg_lock, when);
}
