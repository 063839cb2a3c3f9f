/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Concurrency: several threads each run a training-step-like program on their own graph-safe
 * tracker (device 0) and stream: thread-local captures with a fork inside, instantiation and
 * launches, eager forks between snapshots taken and restored, and draws from the process-wide
 * default tracker (forked under the test's own mutex, on a named state of the thread's own, and
 * read without it). Every thread must see exactly the words it sees when the programs run one
 * after the other on one thread (computed first, with the same seeds). scripts/ci-sanitize runs
 * this suite under ThreadSanitizer.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define THREADS 6
#define ROUNDS 25
#define LAUNCHES 3
#define NA 1500 /* u32 words per fill */
#define NB 700  /* floats per fill */

/* Words each thread sees: per round, LAUNCHES x (NA + NB) from its graph, NA from its eager
 * fork, NA from the shared tracker. */
#define WORDS_PER_ROUND (LAUNCHES * (NA + NB) + NA + NA)
#define WORDS (ROUNDS * WORDS_PER_ROUND)

typedef struct {
    int index;
    uint32_t *words;       /* what the thread saw */
    unsigned long ops;     /* recap calls that succeeded */
    char fail[400];        /* the first failure, or "" */
} prog_t;

static recap_tracker_h shared;
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;

#define PCHECK(p, expr)                                                                     \
    do {                                                                                    \
        recap_status_t st_ = (expr);                                                        \
        if (st_ != RECAP_OK) {                                                              \
            if ((p)->fail[0] == '\0')                                                       \
                snprintf((p)->fail, sizeof((p)->fail), "thread %d: %s:%d: %s: %s (%s)",     \
                         (p)->index, __FILE__, __LINE__, #expr, recap_strerror(st_),        \
                         recap_last_error());                                               \
            return;                                                                         \
        }                                                                                   \
        (p)->ops++;                                                                         \
    } while (0)

#define PASSERT(p, cond)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            if ((p)->fail[0] == '\0')                                                       \
                snprintf((p)->fail, sizeof((p)->fail), "thread %d: %s:%d: %s", (p)->index, \
                         __FILE__, __LINE__, #cond);                                        \
            return;                                                                         \
        }                                                                                   \
    } while (0)

static void shared_name(int index, char *name, size_t len)
{
    snprintf(name, len, "shared-%d", index);
}

typedef struct {
    recap_tracker_h t;
    recap_generator_h g;
    recap_stream_t s;
    recap_snapshot_h snap;
    void *a, *b;
    size_t at;
} rig_t;

/* Appends n words of device buffer buf (after the stream's work) to what the thread saw. */
static void take(prog_t *p, rig_t *r, const void *buf, size_t n)
{
    PCHECK(p, recap_stream_synchronize(r->s));
    PASSERT(p, r->at + n <= WORDS);
    PCHECK(p, recap_memcpy_to_host(0, p->words + r->at, buf, n * 4));
    r->at += n;
}

/* One round: a captured step launched LAUNCHES times, an eager fork between a snapshot and its
 * restore (drawn twice, equal), a fork of the thread's state in the shared tracker. */
static void round_run(prog_t *p, rig_t *r)
{
    recap_fork_token_t tok;
    recap_graph_exec_t exec;
    recap_graph_t graph;
    recap_generator_h sg;
    recap_states_h states;
    char name[32];
    size_t first, count;
    int k, init;

    PCHECK(p, recap_stream_begin_capture(r->s, RECAP_CAPTURE_THREAD_LOCAL));
    PCHECK(p, recap_tracker_fork(r->t, RECAP_RNG_MODEL_PARALLEL, &tok));
    PCHECK(p, recap_generator_fill_u32(r->g, r->s, r->a, NA));
    PCHECK(p, recap_tracker_unfork(r->t, tok));
    PCHECK(p, recap_generator_fill_uniform(r->g, r->s, r->b, NB));
    PCHECK(p, recap_stream_end_capture(r->s, &graph));
    PCHECK(p, recap_graph_instantiate(graph, &exec));
    PCHECK(p, recap_graph_destroy(graph));
    for (k = 0; k < LAUNCHES; k++) {
        PCHECK(p, recap_graph_launch(exec, r->s));
        take(p, r, r->a, NA);
        take(p, r, r->b, NB);
    }
    PCHECK(p, recap_graph_exec_destroy(exec));

    PCHECK(p, recap_snapshot_take(r->t, r->snap));
    PCHECK(p, recap_tracker_fork(r->t, RECAP_RNG_EXPERT_PARALLEL, &tok));
    PCHECK(p, recap_generator_fill_u32(r->g, r->s, r->a, NA));
    PCHECK(p, recap_tracker_unfork(r->t, tok));
    first = r->at;
    take(p, r, r->a, NA);
    PCHECK(p, recap_snapshot_restore(r->t, r->snap));
    PCHECK(p, recap_tracker_fork(r->t, RECAP_RNG_EXPERT_PARALLEL, &tok));
    PCHECK(p, recap_generator_fill_u32(r->g, r->s, r->b, NA));
    PCHECK(p, recap_tracker_unfork(r->t, tok));
    PCHECK(p, recap_stream_synchronize(r->s));
    PCHECK(p, recap_memcpy_to_host(0, p->words + r->at, r->b, NA * 4)); /* scratch, not kept */
    PASSERT(p, memcmp(p->words + first, p->words + r->at, NA * 4) == 0);

    /* The shared tracker: forks in LIFO order (one at a time, under the test's mutex), each
     * thread on a state only it draws from; reads without the mutex. */
    shared_name(p->index, name, sizeof(name));
    PCHECK(p, recap_tracker_is_initialized(shared, &init));
    PASSERT(p, init == 1);
    PCHECK(p, recap_tracker_get_states(shared, &states));
    PCHECK(p, recap_states_count(states, &count));
    PCHECK(p, recap_states_free(states));
    PASSERT(p, count == THREADS);
    PCHECK(p, recap_tracker_generator(shared, &sg));
    pthread_mutex_lock(&shared_lock);
    {
        recap_status_t st = recap_tracker_fork(shared, name, &tok);

        if (st == RECAP_OK) {
            st = recap_generator_fill_u32(sg, r->s, r->a, NA);
            if (st == RECAP_OK)
                st = recap_tracker_unfork(shared, tok);
            else
                recap_tracker_unfork(shared, tok);
        }
        pthread_mutex_unlock(&shared_lock);
        PCHECK(p, st);
    }
    take(p, r, r->a, NA);
}

static void program(prog_t *p)
{
    recap_tracker_params_t params = {.flags = RECAP_TRACKER_GRAPH_SAFE, .device = 0};
    recap_parallel_ranks_t ranks = {p->index % 2, 2, p->index % 3, 3, 0, 1, 0, 1, 0, 1};
    rig_t r = {0};
    int k;

    PCHECK(p, recap_tracker_create(&params, &r.t));
    PCHECK(p, recap_tracker_seed_parallel(r.t, 1000 + 13 * p->index, &ranks));
    PCHECK(p, recap_tracker_generator(r.t, &r.g));
    PCHECK(p, recap_stream_create(0, &r.s));
    PCHECK(p, recap_snapshot_create(&r.snap));
    PCHECK(p, recap_device_alloc(0, NA * 4, &r.a));
    PCHECK(p, recap_device_alloc(0, NA * 4, &r.b));
    for (k = 0; k < ROUNDS && p->fail[0] == '\0'; k++)
        round_run(p, &r);
    PASSERT(p, p->fail[0] != '\0' || r.at == WORDS);
    PCHECK(p, recap_stream_synchronize(r.s));
    PCHECK(p, recap_device_free(0, r.a));
    PCHECK(p, recap_device_free(0, r.b));
    PCHECK(p, recap_snapshot_destroy(r.snap));
    PCHECK(p, recap_stream_destroy(r.s));
    PCHECK(p, recap_tracker_destroy(r.t));
}

static void *program_thread(void *arg)
{
    program(arg);
    return NULL;
}

static void progs_init(prog_t *p)
{
    int i;

    for (i = 0; i < THREADS; i++) {
        memset(&p[i], 0, sizeof(p[i]));
        p[i].index = i;
        p[i].words = calloc(WORDS + NA, 4); /* + scratch for the snapshot comparison */
        ck_assert_ptr_nonnull(p[i].words);
    }
}

START_TEST(threads_see_exactly_their_single_threaded_streams)
{
    recap_tracker_params_t params = {.flags = RECAP_TRACKER_GRAPH_SAFE, .device = 0};
    prog_t solo[THREADS], par[THREADS];
    recap_capture_stats_t cs0, cs1;
    recap_states_h fresh;
    pthread_t th[THREADS];
    unsigned long ops = 0;
    char name[32];
    int i;

    ck_assert_ok(recap_default_tracker_initialize(&params, 0, &shared));
    for (i = 0; i < THREADS; i++) {
        shared_name(i, name, sizeof(name));
        ck_assert_ok(recap_tracker_add(shared, name, 5000 + (uint64_t)i));
    }
    ck_assert_ok(recap_tracker_get_states(shared, &fresh));
    ck_assert_ok(recap_capture_stats(&cs0));

    /* The oracle: each program alone, one after the other, on this thread. */
    progs_init(solo);
    for (i = 0; i < THREADS; i++) {
        program(&solo[i]);
        ck_assert_msg(solo[i].fail[0] == '\0', "%s", solo[i].fail);
    }
    ck_assert_ok(recap_tracker_set_states(shared, fresh));

    progs_init(par);
    for (i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, program_thread, &par[i]), 0);
    for (i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (i = 0; i < THREADS; i++) {
        ck_assert_msg(par[i].fail[0] == '\0', "%s", par[i].fail);
        ck_assert_uint_eq(par[i].ops, solo[i].ops);
        ck_assert_msg(memcmp(par[i].words, solo[i].words, WORDS * 4) == 0,
                      "thread %d saw other words than alone", i);
        ops += par[i].ops;
    }
    /* Different threads drew different numbers. */
    ck_assert_int_ne(memcmp(par[0].words, par[1].words, NA * 4), 0);
    ck_assert_ok(recap_capture_stats(&cs1));
    ck_assert_uint_eq(cs1.captures - cs0.captures, 2 * THREADS * ROUNDS);
    ck_assert_uint_eq(cs1.launches - cs0.launches, 2 * THREADS * ROUNDS * LAUNCHES);
    ck_assert_uint_eq(cs1.live_records, cs0.live_records);
    fprintf(stderr, "stress: %d threads x %lu recap calls each (%lu in all), %d captures and %d "
            "launches per thread\n", THREADS, ops / THREADS, ops, ROUNDS, ROUNDS * LAUNCHES);
    ck_assert_ok(recap_states_free(fresh));
    for (i = 0; i < THREADS; i++) {
        free(solo[i].words);
        free(par[i].words);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stress");
    TCase *tc = tcase_create("stress");

    tcase_set_timeout(tc, 300); /* under ThreadSanitizer */
    tcase_add_test(tc, threads_see_exactly_their_single_threaded_streams);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
