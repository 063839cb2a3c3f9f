/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Capture subscribers: the host's callbacks for the events of the one event stream. Events are
 * emitted on every capture, launch and destroy of the process, so with nobody subscribed an event
 * costs one load; with subscribers, the list is copied under a mutex (at most MAX_SUBS entries,
 * each pinned by an in-flight count) and the callbacks run without any lock of recap's held, so
 * they may use trackers and generators.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/lock.h"
#include "base/log.h"
#include "capture/capture.h"
#include "capture/internal.h"

#define MAX_SUBS 16

struct recap_subscription {
    uint32_t mask;
    recap_capture_subscriber_func_t fn;
    void *arg;
    int in_flight; /* callbacks running now (atomic) */
    uint64_t delivered, failed; /* atomic */
    int warned;
};

static pthread_mutex_t subs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct recap_subscription *subs[MAX_SUBS];
int recap__nsubs; /* read without the lock on every event */
#define nsubs recap__nsubs
static uint64_t subscribed; /* subscriptions made in the process (RECAP_REPORT) */

/* The subscriptions the calling thread's delivery still pins (pinned[from..n)), so a fork's child
 * can recount in-flight callbacks: those of the other threads are gone with them. */
static __thread struct recap_subscription **delivering;
static __thread size_t delivering_from, delivering_n;

/* Nonzero while the calling thread runs a subscriber's callback. */
static __thread int in_callback __attribute__((tls_model("initial-exec")));
/* The front end reporting the calling thread's current CUDA call (RECAP_HOOKS_NONE: the host's
 * own recap_capture_* call). */
static __thread recap_hooks_t event_source __attribute__((tls_model("initial-exec")));

recap_hooks_t recap__events_source_set(recap_hooks_t source)
{
    recap_hooks_t old = event_source;

    event_source = source;
    return old;
}

recap_status_t recap__events_check_caller(const char *what)
{
    if (in_callback && event_source == RECAP_HOOKS_NONE)
        return recap__fail(RECAP_ERR_STATE, "%s called from inside a capture subscriber's "
                           "callback: a callback must not report or drive captures", what);
    return RECAP_OK;
}

static void deliver(struct recap_subscription *s, const recap_capture_event_info_t *info)
{
    recap_status_t st;
    int out;

    in_callback++;
    out = recap__lock_step_out(); /* a fork does not wait for the host's code (base/lock.h) */
    st = s->fn(info, s->arg);
    recap__lock_step_in(out);
    in_callback--;
    __atomic_add_fetch(&s->delivered, 1, __ATOMIC_RELAXED);
    if (st == RECAP_OK)
        return;
    __atomic_add_fetch(&s->failed, 1, __ATOMIC_RELAXED);
    if (!__atomic_exchange_n(&s->warned, 1, __ATOMIC_RELAXED))
        recap__log(RECAP_LOG_WARN, "a capture subscriber failed event %d (%s); the host's call "
                   "goes on (further failures of this subscriber are counted, not logged)",
                   (int)info->event, recap_strerror(st));
}

void recap__events_deliver(recap_capture_event_t event, recap_stream_t stream,
                           recap_capture_mode_t mode, recap_graph_t graph, recap_graph_exec_t exec)
{
    struct recap_subscription *pinned[MAX_SUBS];
    recap_capture_event_info_t ev;
    const recap_capture_event_info_t *info = &ev;
    size_t i, n = 0;

    /* A callback's own CUDA calls reach recap's bookkeeping, not the subscribers again. */
    if (in_callback)
        return;
    ev.event = event;
    ev.source = event_source;
    ev.stream = stream;
    ev.mode = mode;
    ev.graph = graph;
    ev.exec = exec;
    pthread_mutex_lock(&subs_lock);
    for (i = 0; i < MAX_SUBS; i++) {
        struct recap_subscription *s = subs[i];
        if (s != NULL && (s->mask & RECAP_EVENT_MASK(info->event))) {
            __atomic_add_fetch(&s->in_flight, 1, __ATOMIC_ACQUIRE);
            pinned[n++] = s;
        }
    }
    delivering = pinned;
    delivering_from = 0;
    delivering_n = n;
    pthread_mutex_unlock(&subs_lock);
    for (i = 0; i < n; i++) {
        deliver(pinned[i], info);
        __atomic_sub_fetch(&pinned[i]->in_flight, 1, __ATOMIC_RELEASE);
        delivering_from = i + 1; /* read by this thread's own fork handler only */
    }
    delivering_n = 0;
}

recap_status_t recap_capture_subscribe(uint32_t events_mask, recap_capture_subscriber_func_t fn,
                                       void *arg, recap_subscription_h *sub_p)
{
    struct recap_subscription *s;
    size_t i;

    RECAP_CHECK_ARG(fn != NULL && sub_p != NULL, "NULL argument");
    RECAP_CHECK_ARG(events_mask != 0 && (events_mask & ~RECAP_EVENT_MASK_ALL) == 0,
                    "event mask 0x%x (RECAP_EVENT_MASK bits of known events)", events_mask);
    if (in_callback)
        return recap__fail(RECAP_ERR_STATE, "recap_capture_subscribe from inside a "
                           "subscriber's callback");
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "subscription");
    s->mask = events_mask;
    s->fn = fn;
    s->arg = arg;
    pthread_mutex_lock(&subs_lock);
    for (i = 0; i < MAX_SUBS && subs[i] != NULL; i++)
        ;
    if (i < MAX_SUBS) {
        subs[i] = s;
        subscribed++;
        __atomic_add_fetch(&nsubs, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&subs_lock);
    if (i == MAX_SUBS) {
        free(s);
        return recap__fail(RECAP_ERR_BUSY, "%d capture subscriptions exist already", MAX_SUBS);
    }
    *sub_p = s;
    return RECAP_OK;
}

recap_status_t recap_capture_unsubscribe(recap_subscription_h sub)
{
    size_t i;

    RECAP_CHECK_ARG(sub != NULL, "subscription is NULL");
    if (in_callback)
        return recap__fail(RECAP_ERR_STATE, "recap_capture_unsubscribe from inside a "
                           "subscriber's callback (it would wait for itself)");
    pthread_mutex_lock(&subs_lock);
    for (i = 0; i < MAX_SUBS && subs[i] != sub; i++)
        ;
    if (i < MAX_SUBS) {
        subs[i] = NULL;
        __atomic_sub_fetch(&nsubs, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&subs_lock);
    if (i == MAX_SUBS)
        return recap__fail(RECAP_ERR_INVALID_ARG, "not a live subscription");
    /* Callbacks pinned before the removal finish in their threads; none starts after it. */
    while (__atomic_load_n(&sub->in_flight, __ATOMIC_ACQUIRE) > 0)
        sched_yield();
    free(sub);
    return RECAP_OK;
}

recap_status_t recap_capture_subscription_stats(recap_subscription_h sub, uint64_t *delivered_p,
                                                uint64_t *failed_p)
{
    RECAP_CHECK_ARG(sub != NULL && delivered_p != NULL && failed_p != NULL, "NULL argument");
    *delivered_p = __atomic_load_n(&sub->delivered, __ATOMIC_RELAXED);
    *failed_p = __atomic_load_n(&sub->failed, __ATOMIC_RELAXED);
    return RECAP_OK;
}

recap_status_t recap_capture_subscribers(size_t *count_p)
{
    RECAP_CHECK_ARG(count_p != NULL, "count_p is NULL");
    *count_p = (size_t)__atomic_load_n(&nsubs, __ATOMIC_ACQUIRE);
    return RECAP_OK;
}

uint64_t recap__events_subscribed(void)
{
    uint64_t n;

    pthread_mutex_lock(&subs_lock);
    n = subscribed;
    pthread_mutex_unlock(&subs_lock);
    return n;
}

/* In the child only the forking thread's deliveries are in flight: the other threads are gone,
 * and recap_capture_unsubscribe must not wait for them. */
void recap__events_atfork(recap__atfork_t when)
{
    size_t i;

    if (when == RECAP_ATFORK_CHILD) {
        for (i = 0; i < MAX_SUBS; i++)
            if (subs[i] != NULL)
                subs[i]->in_flight = 0;
        for (i = delivering_from; i < delivering_n; i++)
            delivering[i]->in_flight = 0;
        for (i = delivering_from; i < delivering_n; i++)
            delivering[i]->in_flight++;
    }
    recap__atfork_mutex(&subs_lock, when);
}
