/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Capture subscribers: the events a host's callbacks receive for captures reported through
 * recap's own calls (the preload and CUPTI front ends are covered by test_preload and
 * test_cupti), once each and in order; failing and re-entering callbacks. Needs a device (the
 * CUDA test double in CI).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define MAX_EVENTS 64

typedef struct {
    recap_capture_event_info_t ev[MAX_EVENTS];
    int n;
    recap_status_t result;      /* what the callback returns */
    recap_stream_t reenter_on;  /* when set, the callback begins a capture on it */
    recap_status_t reenter_status;
    recap_subscription_h self;
    recap_status_t unsub_status, sub_status;
    int sleep_us;
    int finished;
} log_t;

static recap_status_t record(const recap_capture_event_info_t *info, void *arg)
{
    log_t *l = arg;
    int i = __atomic_load_n(&l->n, __ATOMIC_RELAXED);

    if (i < MAX_EVENTS) {
        l->ev[i] = *info;
        __atomic_store_n(&l->n, i + 1, __ATOMIC_RELEASE);
    }
    if (l->reenter_on != NULL) {
        recap_subscription_h other;
        l->reenter_status = recap_stream_begin_capture(l->reenter_on, RECAP_CAPTURE_RELAXED);
        l->unsub_status = recap_capture_unsubscribe(l->self);
        l->sub_status = recap_capture_subscribe(RECAP_EVENT_MASK_ALL, record, l, &other);
    }
    if (l->sleep_us > 0)
        usleep((useconds_t)l->sleep_us);
    __atomic_store_n(&l->finished, 1, __ATOMIC_RELEASE);
    return l->result;
}

static int have_device(void)
{
    int n;

    return recap_device_count(&n) == RECAP_OK && n > 0;
}

typedef struct {
    recap_generator_h g;
    recap_stream_t s;
    void *buf;
    recap_graph_t graph;
    recap_graph_exec_t exec;
} rig_t;

/* Captures a fill, instantiates it, launches it `launches` times and destroys both handles. */
static void captured_step(rig_t *r, int launches)
{
    int k;

    ck_assert_ok(recap_generator_create(0, &r->g));
    ck_assert_ok(recap_stream_create(0, &r->s));
    ck_assert_ok(recap_device_alloc(0, 4096, &r->buf));
    ck_assert_ok(recap_stream_begin_capture(r->s, RECAP_CAPTURE_THREAD_LOCAL));
    ck_assert_ok(recap_generator_fill_u32(r->g, r->s, r->buf, 1024));
    ck_assert_ok(recap_stream_end_capture(r->s, &r->graph));
    ck_assert_ok(recap_graph_instantiate(r->graph, &r->exec));
    for (k = 0; k < launches; k++)
        ck_assert_ok(recap_graph_launch(r->exec, r->s));
    ck_assert_ok(recap_stream_synchronize(r->s));
    ck_assert_ok(recap_graph_exec_destroy(r->exec));
    ck_assert_ok(recap_graph_destroy(r->graph));
    ck_assert_ok(recap_device_free(0, r->buf));
    ck_assert_ok(recap_stream_destroy(r->s));
    ck_assert_ok(recap_generator_destroy(r->g));
}

/* Every event once, in order, with the handles of the call. */
START_TEST(events_arrive_once_in_order)
{
    log_t l = {0};
    recap_subscription_h sub;
    int k, launches = 1 + (int)tu_rand_below(5);
    rig_t r;

    if (!have_device())
        return;
    ck_assert_ok(recap_capture_subscribe(RECAP_EVENT_MASK_ALL, record, &l, &sub));
    captured_step(&r, launches);
    ck_assert_ok(recap_capture_unsubscribe(sub));
    ck_assert_int_eq(l.n, 5 + launches);
    ck_assert_int_eq(l.ev[0].event, RECAP_EVENT_CAPTURE_WILL_BEGIN);
    ck_assert_ptr_eq(l.ev[0].stream, r.s);
    ck_assert_int_eq(l.ev[0].mode, RECAP_CAPTURE_THREAD_LOCAL);
    ck_assert_int_eq(l.ev[1].event, RECAP_EVENT_CAPTURE_ENDED);
    ck_assert_ptr_eq(l.ev[1].graph, r.graph);
    ck_assert_int_eq(l.ev[2].event, RECAP_EVENT_GRAPH_INSTANTIATED);
    ck_assert_ptr_eq(l.ev[2].graph, r.graph);
    ck_assert_ptr_eq(l.ev[2].exec, r.exec);
    for (k = 0; k < launches; k++) {
        ck_assert_int_eq(l.ev[3 + k].event, RECAP_EVENT_GRAPH_WILL_LAUNCH);
        ck_assert_ptr_eq(l.ev[3 + k].exec, r.exec);
        ck_assert_ptr_eq(l.ev[3 + k].stream, r.s);
    }
    ck_assert_int_eq(l.ev[3 + launches].event, RECAP_EVENT_GRAPH_EXEC_DESTROYED);
    ck_assert_ptr_eq(l.ev[3 + launches].exec, r.exec);
    ck_assert_int_eq(l.ev[4 + launches].event, RECAP_EVENT_GRAPH_DESTROYED);
    ck_assert_ptr_eq(l.ev[4 + launches].graph, r.graph);
    for (k = 0; k < l.n; k++)
        ck_assert_int_eq(l.ev[k].source, RECAP_HOOKS_NONE);
}
END_TEST

/* A mask selects events; two subscribers each get theirs, in subscription order. */
START_TEST(masks_select_events)
{
    log_t launches = {0}, begins = {0};
    recap_subscription_h a, b;
    size_t count;
    rig_t r;

    if (!have_device())
        return;
    ck_assert_ok(recap_capture_subscribe(RECAP_EVENT_MASK(RECAP_EVENT_GRAPH_WILL_LAUNCH), record,
                                         &launches, &a));
    ck_assert_ok(recap_capture_subscribe(RECAP_EVENT_MASK(RECAP_EVENT_CAPTURE_WILL_BEGIN), record,
                                         &begins, &b));
    ck_assert_ok(recap_capture_subscribers(&count));
    ck_assert_uint_eq(count, 2);
    captured_step(&r, 3);
    ck_assert_ok(recap_capture_unsubscribe(a));
    ck_assert_ok(recap_capture_unsubscribe(b));
    ck_assert_int_eq(launches.n, 3);
    ck_assert_int_eq(begins.n, 1);
    ck_assert_ok(recap_capture_subscribers(&count));
    ck_assert_uint_eq(count, 0);
}
END_TEST

/* A failing callback is counted; the host's calls all succeed and the graph still replays
 * exactly (its launches advance the generator). */
START_TEST(failing_subscriber_does_not_break_the_call)
{
    log_t l = {.result = RECAP_ERR_CUDA};
    recap_subscription_h sub;
    uint64_t delivered, failed;
    rig_t r;

    if (!have_device())
        return;
    ck_assert_ok(recap_capture_subscribe(RECAP_EVENT_MASK_ALL, record, &l, &sub));
    captured_step(&r, 2);
    ck_assert_ok(recap_capture_subscription_stats(sub, &delivered, &failed));
    ck_assert_uint_eq(delivered, 7);
    ck_assert_uint_eq(failed, 7);
    ck_assert_ok(recap_capture_unsubscribe(sub));
}
END_TEST

/* Inside a callback, driving a capture and (un)subscribing are refused with a status; the event
 * that the callback's own capture causes is not delivered again. */
START_TEST(reentrant_callbacks_are_refused)
{
    log_t l = {0};
    recap_subscription_h sub;
    recap_stream_t other;
    rig_t r;

    if (!have_device())
        return;
    ck_assert_ok(recap_stream_create(0, &other));
    ck_assert_ok(recap_capture_subscribe(RECAP_EVENT_MASK(RECAP_EVENT_CAPTURE_WILL_BEGIN), record,
                                         &l, &sub));
    l.self = sub;
    l.reenter_on = other;
    captured_step(&r, 1);
    ck_assert_int_eq(l.n, 1);
    ck_assert_int_eq(l.reenter_status, RECAP_ERR_STATE);
    ck_assert_int_eq(l.unsub_status, RECAP_ERR_STATE);
    ck_assert_int_eq(l.sub_status, RECAP_ERR_STATE);
    ck_assert_ok(recap_capture_unsubscribe(sub));
    ck_assert_ok(recap_stream_destroy(other));
}
END_TEST

START_TEST(bad_subscriptions_are_refused)
{
    recap_subscription_h subs[17];
    log_t l = {0};
    int i;

    ck_assert_status(recap_capture_subscribe(0, record, &l, &subs[0]), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_capture_subscribe(1u << 20, record, &l, &subs[0]),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_capture_subscribe(RECAP_EVENT_MASK_ALL, NULL, &l, &subs[0]),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_capture_unsubscribe(NULL), RECAP_ERR_INVALID_ARG);
    for (i = 0; i < 16; i++)
        ck_assert_ok(recap_capture_subscribe(RECAP_EVENT_MASK_ALL, record, &l, &subs[i]));
    ck_assert_status(recap_capture_subscribe(RECAP_EVENT_MASK_ALL, record, &l, &subs[16]),
                     RECAP_ERR_BUSY);
    for (i = 0; i < 16; i++)
        ck_assert_ok(recap_capture_unsubscribe(subs[i]));
    ck_assert_status(recap_capture_unsubscribe(subs[0]), RECAP_ERR_INVALID_ARG);
}
END_TEST

/* unsubscribe waits for a callback running in another thread to return. */
static void *launch_thread(void *arg)
{
    recap_graph_exec_t exec = arg;

    recap_graph_will_launch(exec, NULL);
    return NULL;
}

START_TEST(unsubscribe_waits_for_running_callbacks)
{
    log_t l = {.sleep_us = 200000};
    recap_subscription_h sub;
    pthread_t th;
    int spins = 0;

    ck_assert_ok(recap_capture_subscribe(RECAP_EVENT_MASK(RECAP_EVENT_GRAPH_WILL_LAUNCH), record,
                                         &l, &sub));
    /* An exec recap holds no record for: the event is still delivered. */
    ck_assert_int_eq(pthread_create(&th, NULL, launch_thread, (void *)(uintptr_t)0x1234), 0);
    while (__atomic_load_n(&l.n, __ATOMIC_ACQUIRE) == 0 && spins++ < 1000000)
        usleep(10);
    ck_assert_int_eq(__atomic_load_n(&l.n, __ATOMIC_ACQUIRE), 1);
    ck_assert_ok(recap_capture_unsubscribe(sub));
    ck_assert_int_eq(__atomic_load_n(&l.finished, __ATOMIC_ACQUIRE), 1);
    pthread_join(th, NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("subscribers");
    TCase *tc = tcase_create("subscribers");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, events_arrive_once_in_order);
    tcase_add_test(tc, masks_select_events);
    tcase_add_test(tc, failing_subscriber_does_not_break_the_call);
    tcase_add_test(tc, reentrant_callbacks_are_refused);
    tcase_add_test(tc, bad_subscriptions_are_refused);
    tcase_add_test(tc, unsubscribe_waits_for_running_callbacks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
