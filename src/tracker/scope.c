/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exact-capture scopes: every tracker's and framework generator's RNG state taken at entry and
 * put back at exit, so a framework's warm-up iterations and captures leave no trace in the
 * numbers the job draws (include/recap.h says what users get).
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/env.h"
#include "base/error.h"
#include "base/settings.h"
#include "capture/capture.h"
#include "tracker/tracker.h"

/* Every live tracker. The lock is held for list changes only, never around a snapshot: a
 * snapshot runs framework generators' operations, which may take long, fork, or call recap (and
 * so this lock) again. Entering or leaving a scope pins the trackers it saves or restores instead;
 * a tracker being destroyed leaves the list, then waits for its pins to go. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static recap_tracker_h reg_head;
static uint64_t reg_ids;
/* The trackers the calling thread pins (at most one scope call at a time per thread: a
 * framework operation cannot enter or leave a scope), so a fork's child can recount pins. */
static __thread recap_tracker_h *pinning;
static __thread size_t npinning;

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
    /* A scope in another thread may be snapshotting or restoring it now. */
    while (__atomic_load_n(&t->scope_pins, __ATOMIC_ACQUIRE) > 0)
        sched_yield();
}

/* Under reg_lock: pins (or, with delta -1, unpins) the trackers of the calling thread's scope call
 * (the NULL entries are trackers gone). */
static void pin(recap_tracker_h *ts, size_t n, int delta)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (ts[i] != NULL)
            __atomic_add_fetch(&ts[i]->scope_pins, delta, __ATOMIC_RELEASE);
    pinning = delta > 0 ? ts : NULL;
    npinning = delta > 0 ? n : 0;
}

static void unpin(recap_tracker_h *ts, size_t n)
{
    pthread_mutex_lock(&reg_lock);
    pin(ts, n, -1);
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

/* A snapshot of every live tracker, each pinned meanwhile. */
static recap_status_t save_trackers(recap_exact_scope_h s)
{
    recap_tracker_h t, *ts;
    recap_status_t st = RECAP_OK;
    size_t n = 0, i;

    pthread_mutex_lock(&reg_lock);
    for (t = reg_head; t != NULL; t = t->reg_next)
        n++;
    s->tr = calloc(n ? n : 1, sizeof(*s->tr));
    ts = calloc(n ? n : 1, sizeof(*ts));
    if (s->tr == NULL || ts == NULL) {
        pthread_mutex_unlock(&reg_lock);
        free(ts);
        return recap__fail(RECAP_ERR_NO_MEMORY, "exact-capture scope");
    }
    for (t = reg_head, i = 0; t != NULL; t = t->reg_next, i++) {
        ts[i] = t;
        s->tr[i].t = t;
        s->tr[i].id = t->reg_id;
    }
    pin(ts, n, 1);
    pthread_mutex_unlock(&reg_lock);
    for (i = 0; i < n && st == RECAP_OK; i++) {
        saved_tracker_t *e = &s->tr[s->ntr];

        st = recap_snapshot_create(&e->snap);
        if (st != RECAP_OK)
            break;
        s->ntr++;
        st = recap_snapshot_take(e->t, e->snap);
    }
    unpin(ts, n);
    free(ts);
    return st;
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
        st = save_trackers(s);
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

/* Restores the trackers still alive (each pinned meanwhile); the first failure is returned. */
static recap_status_t restore_trackers(recap_exact_scope_h scope)
{
    recap_status_t first = RECAP_OK, st;
    recap_tracker_h t, *ts = calloc(scope->ntr ? scope->ntr : 1, sizeof(*ts));
    size_t i;

    if (ts == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "exact-capture scope");
    /* The list and the saved entries are both in falling registration order (the list grows at
     * its head, with rising ids), so one walk of each finds the survivors: linear in trackers. */
    pthread_mutex_lock(&reg_lock);
    t = reg_head;
    for (i = 0; i < scope->ntr; i++) {
        while (t != NULL && t->reg_id > scope->tr[i].id)
            t = t->reg_next; /* created inside the scope */
        /* NULL: destroyed inside the scope */
        ts[i] = t != NULL && t->reg_id == scope->tr[i].id && t == scope->tr[i].t ? t : NULL;
    }
    pin(ts, scope->ntr, 1);
    pthread_mutex_unlock(&reg_lock);
    for (i = 0; i < scope->ntr; i++) {
        if (ts[i] == NULL)
            continue;
        st = recap_snapshot_restore(ts[i], scope->tr[i].snap);
        if (first == RECAP_OK)
            first = st;
    }
    unpin(ts, scope->ntr);
    free(ts);
    return first;
}

/* Trackers first (their generators' values with them), then the framework generators that no
 * tracker drives, which get the same values again where one does. */
recap_status_t recap_exact_capture_leave(recap_exact_scope_h scope)
{
    recap_status_t first = RECAP_OK, st;

    RECAP_CHECK_ARG(scope != NULL, "scope is NULL");
    st = check_outside_capture("recap_exact_capture_leave");
    if (st != RECAP_OK)
        return st;
    if (scope->enabled) {
        st = restore_trackers(scope);
        if (first == RECAP_OK)
            first = st;
        st = recap__fw_restore_all(scope->fw, scope->nfw);
        if (first == RECAP_OK)
            first = st;
    }
    scope_free(scope);
    return first;
}

/* In the child only the forking thread's pins are real: the other threads are gone. */
void recap__scope_atfork(recap__atfork_t when)
{
    recap_tracker_h t;
    size_t i;

    if (when == RECAP_ATFORK_CHILD) {
        for (t = reg_head; t != NULL; t = t->reg_next)
            t->scope_pins = 0;
        for (i = 0; i < npinning; i++)
            if (pinning[i] != NULL)
                pinning[i]->scope_pins = 0;
        for (i = 0; i < npinning; i++)
            if (pinning[i] != NULL)
                pinning[i]->scope_pins++;
    }
    recap__atfork_mutex(&reg_lock, when);
}
