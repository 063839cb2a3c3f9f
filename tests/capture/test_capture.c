/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Graph-safe RNG: captured work replayed K times draws exactly what K eager runs of the same work
 * draw from the same starting state (eager execution is the oracle), with fresh numbers each
 * replay, eager draws interleaved, several instantiations and clones, concurrent captures,
 * forks and snapshots inside captures, and the failure modes. Runs against the CUDA test double
 * in CI and the real driver on the GPU machine.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* One "training step": three fills from two generators into three device buffers. */
typedef struct {
    recap_generator_h g1, g2;
    size_t n[3];
    void *buf[3];
} step_t;

static const size_t esize[3] = {4, 4, 8};

static void step_init(step_t *w)
{
    int i;

    ck_assert_ok(recap_generator_create(0, &w->g1));
    ck_assert_ok(recap_generator_create(0, &w->g2));
    ck_assert_ok(recap_generator_manual_seed(w->g1, tu_rand()));
    ck_assert_ok(recap_generator_manual_seed(w->g2, tu_rand()));
    for (i = 0; i < 3; i++) {
        w->n[i] = 1 + tu_rand_below(i == 1 ? 300000 : 5000);
        ck_assert_ok(recap_device_alloc(0, w->n[i] * esize[i], &w->buf[i]));
    }
}

/* A second step over fresh buffers whose generators start where w's are now. */
static void step_twin(const step_t *w, step_t *t)
{
    uint8_t st[RECAP_STATE_BYTES];
    int i;

    ck_assert_ok(recap_generator_create(0, &t->g1));
    ck_assert_ok(recap_generator_create(0, &t->g2));
    ck_assert_ok(recap_generator_get_state(w->g1, st));
    ck_assert_ok(recap_generator_set_state(t->g1, st));
    ck_assert_ok(recap_generator_get_state(w->g2, st));
    ck_assert_ok(recap_generator_set_state(t->g2, st));
    for (i = 0; i < 3; i++) {
        t->n[i] = w->n[i];
        ck_assert_ok(recap_device_alloc(0, t->n[i] * esize[i], &t->buf[i]));
    }
}

static void step_run(step_t *w, recap_stream_t s)
{
    ck_assert_ok(recap_generator_fill_u32(w->g1, s, w->buf[0], w->n[0]));
    ck_assert_ok(recap_generator_fill_uniform(w->g2, s, w->buf[1], w->n[1]));
    ck_assert_ok(recap_generator_fill_uniform_double(w->g1, s, w->buf[2], w->n[2]));
}

/* The step's output bytes, after the stream's work finished. */
static unsigned char *step_read(step_t *w, recap_stream_t s)
{
    size_t total = w->n[0] * 4 + w->n[1] * 4 + w->n[2] * 8, at = 0;
    unsigned char *out = malloc(total);
    int i;

    ck_assert_ptr_nonnull(out);
    ck_assert_ok(recap_stream_synchronize(s));
    for (i = 0; i < 3; i++) {
        ck_assert_ok(recap_memcpy_to_host(0, out + at, w->buf[i], w->n[i] * esize[i]));
        at += w->n[i] * esize[i];
    }
    return out;
}

static size_t step_bytes(const step_t *w)
{
    return w->n[0] * 4 + w->n[1] * 4 + w->n[2] * 8;
}

static void step_free(step_t *w)
{
    int i;

    for (i = 0; i < 3; i++)
        ck_assert_ok(recap_device_free(0, w->buf[i]));
    ck_assert_ok(recap_generator_destroy(w->g1));
    ck_assert_ok(recap_generator_destroy(w->g2));
}

static recap_graph_t capture_step(step_t *w, recap_stream_t s, recap_capture_mode_t mode)
{
    recap_graph_t g = NULL;

    ck_assert_ok(recap_stream_begin_capture(s, mode));
    step_run(w, s);
    ck_assert_ok(recap_stream_end_capture(s, &g));
    ck_assert_ptr_nonnull(g);
    return g;
}

START_TEST(k_replays_equal_k_eager_runs)
{
    step_t w, oracle;
    recap_stream_t s;
    recap_graph_t g;
    recap_graph_exec_t e;
    unsigned char *prev = NULL;
    int k, K = 2 + (int)tu_rand_below(5);

    ck_assert_ok(recap_stream_create(0, &s));
    step_init(&w);
    step_twin(&w, &oracle);
    g = capture_step(&w, s, (recap_capture_mode_t)tu_rand_below(3));
    ck_assert_ok(recap_graph_instantiate(g, &e));
    for (k = 0; k < K; k++) {
        unsigned char *got, *want;

        ck_assert_ok(recap_graph_launch(e, s));
        got = step_read(&w, s);
        step_run(&oracle, s);
        want = step_read(&oracle, s);
        ck_assert_msg(memcmp(got, want, step_bytes(&w)) == 0, "replay %d differs from eager run %d", k, k);
        if (prev != NULL)
            ck_assert_msg(memcmp(got, prev, step_bytes(&w)) != 0, "replay %d repeated numbers", k);
        free(prev);
        free(want);
        prev = got;
    }
    free(prev);
    ck_assert_ok(recap_graph_exec_destroy(e));
    ck_assert_ok(recap_graph_destroy(g));
    step_free(&w);
    step_free(&oracle);
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

/* Eager draws between replays: the next replay starts after them (the slot is rewritten). */
START_TEST(replays_and_eager_draws_never_overlap)
{
    step_t w, oracle;
    recap_stream_t s;
    recap_graph_t g;
    recap_graph_exec_t e;
    int k;

    ck_assert_ok(recap_stream_create(0, &s));
    step_init(&w);
    step_twin(&w, &oracle);
    g = capture_step(&w, s, RECAP_CAPTURE_GLOBAL);
    ck_assert_ok(recap_graph_instantiate(g, &e));
    for (k = 0; k < 6; k++) {
        unsigned char *got, *want;

        if (tu_rand_below(2)) {
            ck_assert_ok(recap_graph_launch(e, s));
        } else {
            step_run(&w, s); /* eager draws advance the same generators */
        }
        got = step_read(&w, s);
        step_run(&oracle, s);
        want = step_read(&oracle, s);
        ck_assert_msg(memcmp(got, want, step_bytes(&w)) == 0, "step %d differs from eager", k);
        free(got);
        free(want);
    }
    ck_assert_ok(recap_graph_exec_destroy(e));
    ck_assert_ok(recap_graph_destroy(g));
    step_free(&w);
    step_free(&oracle);
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

START_TEST(steady_state_launches_write_no_slots)
{
    recap_capture_stats_t a, b;
    step_t w;
    recap_stream_t s;
    recap_graph_t g;
    recap_graph_exec_t e;
    uint64_t off_before, off_after;
    int k;

    ck_assert_ok(recap_stream_create(0, &s));
    step_init(&w);
    g = capture_step(&w, s, RECAP_CAPTURE_GLOBAL);
    ck_assert_ok(recap_graph_instantiate(g, &e));
    ck_assert_ok(recap_graph_launch(e, s)); /* first launch writes the slots */
    ck_assert_ok(recap_capture_stats(&a));
    ck_assert_ok(recap_generator_offset(w.g1, &off_before));
    for (k = 0; k < 20; k++)
        ck_assert_ok(recap_graph_launch(e, s));
    ck_assert_ok(recap_capture_stats(&b));
    ck_assert_ok(recap_generator_offset(w.g1, &off_after));
    ck_assert_uint_eq(b.launches - a.launches, 20);
    ck_assert_uint_eq(b.slot_writes, a.slot_writes);
    /* g1 draws two fills per step: each launch advances it by their two increments */
    ck_assert_uint_eq(off_after - off_before, 20 * (4 * ((w.n[0] + 262143) / 262144) +
                                                     8 * ((w.n[2] + 262143) / 262144)));
    ck_assert_ok(recap_stream_synchronize(s));
    ck_assert_ok(recap_graph_exec_destroy(e));
    ck_assert_ok(recap_graph_destroy(g));
    step_free(&w);
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

/* Two execs of one graph and an exec of a clone share the generators: any launch order equals
 * the same number of eager runs. Destroying everything releases recap's records. */
START_TEST(instantiations_and_clones_share_the_stream)
{
    recap_capture_stats_t before, after;
    step_t w, oracle;
    recap_stream_t s;
    recap_graph_t g, c;
    recap_graph_exec_t e[3];
    int k;

    ck_assert_ok(recap_capture_stats(&before));
    ck_assert_ok(recap_stream_create(0, &s));
    step_init(&w);
    step_twin(&w, &oracle);
    g = capture_step(&w, s, RECAP_CAPTURE_GLOBAL);
    ck_assert_ok(recap_graph_clone(g, &c));
    ck_assert_ok(recap_graph_instantiate(g, &e[0]));
    ck_assert_ok(recap_graph_instantiate(g, &e[1]));
    ck_assert_ok(recap_graph_instantiate(c, &e[2]));
    ck_assert_ok(recap_graph_destroy(g)); /* execs and the clone outlive the graph */
    for (k = 0; k < 6; k++) {
        unsigned char *got, *want;

        ck_assert_ok(recap_graph_launch(e[tu_rand_below(3)], s));
        got = step_read(&w, s);
        step_run(&oracle, s);
        want = step_read(&oracle, s);
        ck_assert_msg(memcmp(got, want, step_bytes(&w)) == 0, "launch %d differs from eager", k);
        free(got);
        free(want);
    }
    for (k = 0; k < 3; k++)
        ck_assert_ok(recap_graph_exec_destroy(e[k]));
    ck_assert_ok(recap_graph_destroy(c));
    ck_assert_ok(recap_capture_stats(&after));
    ck_assert_uint_eq(after.live_records, before.live_records);
    step_free(&w);
    step_free(&oracle);
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

START_TEST(graph_without_rng_is_left_alone)
{
    recap_capture_stats_t a, b;
    recap_stream_t s;
    recap_graph_t g = NULL;
    recap_graph_exec_t e;

    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_capture_stats(&a));
    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_stream_end_capture(s, &g));
    ck_assert_ok(recap_graph_instantiate(g, &e));
    ck_assert_ok(recap_graph_launch(e, s));
    ck_assert_ok(recap_stream_synchronize(s));
    ck_assert_ok(recap_capture_stats(&b));
    ck_assert_uint_eq(b.captures - a.captures, 1);
    ck_assert_uint_eq(b.graphs_with_rng, a.graphs_with_rng);
    ck_assert_uint_eq(b.launches, a.launches);
    ck_assert_uint_eq(b.live_records, a.live_records);
    ck_assert_ok(recap_graph_exec_destroy(e));
    ck_assert_ok(recap_graph_destroy(g));
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

/* A generator created after the capture began was never primed: its use is an error, not a
 * silent wrong stream. */
START_TEST(unprimed_generator_in_capture_is_rejected)
{
    recap_generator_h late;
    recap_stream_t s;
    recap_graph_t g = NULL;
    recap_philox_args_t a;
    void *buf;

    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_device_alloc(0, 64, &buf));
    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_THREAD_LOCAL));
    ck_assert_ok(recap_generator_create(0, &late));
    ck_assert_status(recap_generator_fill_u32(late, s, buf, 16), RECAP_ERR_NOT_REGISTERED);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "not primed"));
    ck_assert_status(recap_generator_reserve(late, s, 4, &a), RECAP_ERR_NOT_REGISTERED);
    /* recap_capture_prime fixes it from inside the capture (relaxed-mode allocation) */
    ck_assert_ok(recap_capture_prime(s));
    ck_assert_ok(recap_generator_reserve(late, s, 4, &a));
    ck_assert_int_eq(a.captured, 1);
    ck_assert_uint_eq(a.offset_intragraph, 0);
    ck_assert_ok(recap_stream_end_capture(s, &g));
    ck_assert_ok(recap_graph_destroy(g));
    ck_assert_ok(recap_generator_destroy(late));
    ck_assert_ok(recap_device_free(0, buf));
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

START_TEST(reserve_inside_capture_returns_relative_offsets)
{
    recap_generator_h gen;
    recap_stream_t s;
    recap_graph_t g = NULL;
    recap_philox_args_t a;
    uint64_t off0, off1, expect = 0;
    int i;

    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_generator_create(0, &gen));
    ck_assert_ok(recap_generator_reserve(gen, s, 4 * (1 + tu_rand_below(50)), &a)); /* eager */
    ck_assert_int_eq(a.captured, 0);
    ck_assert_ok(recap_generator_offset(gen, &off0));
    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
    for (i = 0; i < 10; i++) {
        uint64_t n = 1 + tu_rand_below(33);
        ck_assert_ok(recap_generator_reserve(gen, s, n, &a));
        ck_assert_int_eq(a.captured, 1);
        ck_assert_ptr_nonnull(a.seed_ptr);
        ck_assert_ptr_eq(a.offset_ptr, a.seed_ptr + 1);
        ck_assert_uint_eq(a.offset_intragraph, expect);
        expect += (n + 3) / 4 * 4;
    }
    ck_assert_ok(recap_stream_end_capture(s, &g));
    ck_assert_ok(recap_generator_offset(gen, &off1));
    ck_assert_uint_eq(off1, off0); /* capturing draws nothing on the host */
    ck_assert_ok(recap_graph_destroy(g));
    ck_assert_ok(recap_generator_destroy(gen));
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

/* Two threads capture at once (thread-local mode), drawing from the same generator: each
 * capture counts from 0, and launching A then B equals eager A then eager B. */
typedef struct {
    recap_generator_h gen;
    void *buf;
    size_t n;
    recap_stream_t s;
    recap_graph_t g;
    pthread_barrier_t *bar;
} cap_thread_t;

static void *capture_thread(void *arg)
{
    cap_thread_t *c = arg;

    recap_stream_begin_capture(c->s, RECAP_CAPTURE_THREAD_LOCAL);
    pthread_barrier_wait(c->bar); /* both captures are open now */
    recap_generator_fill_u32(c->gen, c->s, c->buf, c->n);
    pthread_barrier_wait(c->bar);
    recap_stream_end_capture(c->s, &c->g);
    return NULL;
}

START_TEST(concurrent_captures_keep_their_own_offsets)
{
    pthread_barrier_t bar;
    pthread_t th[2];
    cap_thread_t c[2];
    recap_generator_h gen, oracle;
    recap_graph_exec_t e[2];
    uint8_t st[RECAP_STATE_BYTES];
    int i;

    pthread_barrier_init(&bar, NULL, 2);
    ck_assert_ok(recap_generator_create(0, &gen));
    ck_assert_ok(recap_generator_manual_seed(gen, tu_rand()));
    ck_assert_ok(recap_generator_create(0, &oracle));
    ck_assert_ok(recap_generator_get_state(gen, st));
    ck_assert_ok(recap_generator_set_state(oracle, st));
    for (i = 0; i < 2; i++) {
        c[i].gen = gen;
        c[i].n = 1 + tu_rand_below(600000);
        c[i].bar = &bar;
        c[i].g = NULL;
        ck_assert_ok(recap_device_alloc(0, c[i].n * 4, &c[i].buf));
        ck_assert_ok(recap_stream_create(0, &c[i].s));
        pthread_create(&th[i], NULL, capture_thread, &c[i]);
    }
    for (i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (i = 0; i < 2; i++) {
        uint32_t *got = malloc(c[i].n * 4), *want = malloc(c[i].n * 4);
        void *obuf;
        ck_assert_ptr_nonnull(c[i].g);
        ck_assert_ok(recap_graph_instantiate(c[i].g, &e[i]));
        ck_assert_ok(recap_graph_launch(e[i], c[0].s));
        ck_assert_ok(recap_stream_synchronize(c[0].s));
        ck_assert_ok(recap_memcpy_to_host(0, got, c[i].buf, c[i].n * 4));
        ck_assert_ok(recap_device_alloc(0, c[i].n * 4, &obuf));
        ck_assert_ok(recap_generator_fill_u32(oracle, c[0].s, obuf, c[i].n));
        ck_assert_ok(recap_stream_synchronize(c[0].s));
        ck_assert_ok(recap_memcpy_to_host(0, want, obuf, c[i].n * 4));
        ck_assert_msg(memcmp(got, want, c[i].n * 4) == 0, "graph of thread %d differs from eager", i);
        ck_assert_ok(recap_device_free(0, obuf));
        free(got);
        free(want);
    }
    for (i = 0; i < 2; i++) {
        ck_assert_ok(recap_graph_exec_destroy(e[i]));
        ck_assert_ok(recap_graph_destroy(c[i].g));
        ck_assert_ok(recap_device_free(0, c[i].buf));
        ck_assert_ok(recap_stream_destroy(c[i].s));
    }
    ck_assert_ok(recap_generator_destroy(gen));
    ck_assert_ok(recap_generator_destroy(oracle));
    pthread_barrier_destroy(&bar);
}
END_TEST

/* Recompute inside a graph: snapshot, draw, restore, draw again -> both draws equal, in every
 * replay, and the replays still advance. Graph-safe tracker with a fork as Megatron does. */
START_TEST(snapshot_restore_inside_capture_redraws_the_forward)
{
    recap_tracker_params_t p = {RECAP_TRACKER_GRAPH_SAFE, NULL, 0, NULL};
    recap_tracker_h t;
    recap_generator_h gen;
    recap_snapshot_h snap;
    recap_fork_token_t tok;
    recap_stream_t s;
    recap_graph_t g;
    recap_graph_exec_t e;
    size_t n = 1 + tu_rand_below(100000);
    void *a, *b;
    uint32_t *ha = malloc(n * 4), *hb = malloc(n * 4), *prev = calloc(n, 4);
    int k;

    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_tracker_add(t, RECAP_RNG_MODEL_PARALLEL, 1 + tu_rand_below(1000)));
    ck_assert_ok(recap_tracker_generator(t, &gen));
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_device_alloc(0, n * 4, &a));
    ck_assert_ok(recap_device_alloc(0, n * 4, &b));

    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_snapshot_take(t, snap));
    ck_assert_ok(recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok));
    ck_assert_ok(recap_generator_fill_u32(gen, s, a, n)); /* forward: dropout mask */
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_snapshot_restore(t, snap));
    ck_assert_ok(recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok));
    ck_assert_ok(recap_generator_fill_u32(gen, s, b, n)); /* recompute */
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_stream_end_capture(s, &g));
    ck_assert_ok(recap_graph_instantiate(g, &e));
    for (k = 0; k < 3; k++) {
        ck_assert_ok(recap_graph_launch(e, s));
        ck_assert_ok(recap_stream_synchronize(s));
        ck_assert_ok(recap_memcpy_to_host(0, ha, a, n * 4));
        ck_assert_ok(recap_memcpy_to_host(0, hb, b, n * 4));
        ck_assert_msg(memcmp(ha, hb, n * 4) == 0, "replay %d: recompute differs from forward", k);
        ck_assert_msg(memcmp(ha, prev, n * 4) != 0, "replay %d repeated the previous mask", k);
        memcpy(prev, ha, n * 4);
    }
    ck_assert_ok(recap_graph_exec_destroy(e));
    ck_assert_ok(recap_graph_destroy(g));
    ck_assert_ok(recap_device_free(0, a));
    ck_assert_ok(recap_device_free(0, b));
    ck_assert_ok(recap_snapshot_destroy(snap));
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_ok(recap_stream_destroy(s));
    free(ha);
    free(hb);
    free(prev);
}
END_TEST

/* A framework's backward (and so the recompute that restores the snapshot) runs on a worker
 * thread while the capture belongs to the thread that began it: the restore must still restore
 * capture-relative offsets. */
typedef struct {
    recap_tracker_h t;
    recap_snapshot_h snap;
    recap_generator_h gen;
    recap_stream_t s;
    void *b;
    size_t n;
    recap_status_t st[4];
} worker_recompute_t;

static void *worker_recompute(void *arg)
{
    worker_recompute_t *w = arg;
    recap_fork_token_t tok;

    w->st[0] = recap_snapshot_restore(w->t, w->snap);
    w->st[1] = recap_tracker_fork(w->t, RECAP_RNG_MODEL_PARALLEL, &tok);
    w->st[2] = recap_generator_fill_u32(w->gen, w->s, w->b, w->n);
    w->st[3] = recap_tracker_unfork(w->t, tok);
    return NULL;
}

START_TEST(recompute_on_a_worker_thread_inside_capture_redraws_the_forward)
{
    recap_tracker_params_t p = {RECAP_TRACKER_GRAPH_SAFE, NULL, 0, NULL};
    worker_recompute_t w = {0};
    recap_fork_token_t tok;
    recap_graph_t g;
    recap_graph_exec_t e;
    pthread_t th;
    void *a;
    uint32_t *ha, *hb;
    int k, i;

    w.n = 1 + tu_rand_below(100000);
    ha = malloc(w.n * 4);
    hb = malloc(w.n * 4);
    ck_assert_ok(recap_stream_create(0, &w.s));
    ck_assert_ok(recap_tracker_create(&p, &w.t));
    ck_assert_ok(recap_tracker_add(w.t, RECAP_RNG_MODEL_PARALLEL, 1 + tu_rand_below(1000)));
    ck_assert_ok(recap_tracker_generator(w.t, &w.gen));
    ck_assert_ok(recap_snapshot_create(&w.snap));
    ck_assert_ok(recap_device_alloc(0, w.n * 4, &a));
    ck_assert_ok(recap_device_alloc(0, w.n * 4, &w.b));
    ck_assert_ok(recap_stream_begin_capture(w.s, RECAP_CAPTURE_RELAXED));
    ck_assert_ok(recap_snapshot_take(w.t, w.snap));
    ck_assert_ok(recap_tracker_fork(w.t, RECAP_RNG_MODEL_PARALLEL, &tok));
    ck_assert_ok(recap_generator_fill_u32(w.gen, w.s, a, w.n));
    ck_assert_ok(recap_tracker_unfork(w.t, tok));
    pthread_create(&th, NULL, worker_recompute, &w);
    pthread_join(th, NULL);
    for (i = 0; i < 4; i++)
        ck_assert_status(w.st[i], RECAP_OK);
    ck_assert_ok(recap_stream_end_capture(w.s, &g));
    ck_assert_ok(recap_graph_instantiate(g, &e));
    for (k = 0; k < 3; k++) {
        ck_assert_ok(recap_graph_launch(e, w.s));
        ck_assert_ok(recap_stream_synchronize(w.s));
        ck_assert_ok(recap_memcpy_to_host(0, ha, a, w.n * 4));
        ck_assert_ok(recap_memcpy_to_host(0, hb, w.b, w.n * 4));
        ck_assert_msg(memcmp(ha, hb, w.n * 4) == 0, "replay %d: worker recompute differs", k);
    }
    ck_assert_ok(recap_graph_exec_destroy(e));
    ck_assert_ok(recap_graph_destroy(g));
    ck_assert_ok(recap_device_free(0, a));
    ck_assert_ok(recap_device_free(0, w.b));
    ck_assert_ok(recap_snapshot_destroy(w.snap));
    ck_assert_ok(recap_tracker_destroy(w.t));
    ck_assert_ok(recap_stream_destroy(w.s));
    free(ha);
    free(hb);
}
END_TEST

/* Graph-safe forks inside a capture: replays equal eager runs of the same forks. */
static void forked_step(recap_tracker_h t, recap_generator_h gen, recap_stream_t s, void *b0,
                        void *b1, size_t n)
{
    recap_fork_token_t tok;

    ck_assert_ok(recap_tracker_fork(t, "a", &tok));
    ck_assert_ok(recap_generator_fill_u32(gen, s, b0, n));
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_generator_fill_u32(gen, s, b1, n)); /* the default state */
}

START_TEST(graph_safe_forks_inside_capture_replay_like_eager)
{
    recap_tracker_params_t p = {RECAP_TRACKER_GRAPH_SAFE, NULL, 0, NULL};
    recap_tracker_h t[2];
    recap_generator_h gen[2];
    recap_stream_t s;
    recap_graph_t g;
    recap_graph_exec_t e;
    size_t n = 1 + tu_rand_below(50000);
    uint64_t seed = 1 + tu_rand_below(1u << 30), dseed = tu_rand();
    void *buf[2][2];
    uint32_t *h[2] = {malloc(2 * n * 4), malloc(2 * n * 4)};
    int i, j, k;

    ck_assert_ok(recap_stream_create(0, &s));
    for (i = 0; i < 2; i++) {
        ck_assert_ok(recap_tracker_create(&p, &t[i]));
        ck_assert_ok(recap_tracker_add(t[i], "a", seed));
        ck_assert_ok(recap_tracker_generator(t[i], &gen[i]));
        ck_assert_ok(recap_generator_manual_seed(gen[i], dseed));
        for (j = 0; j < 2; j++)
            ck_assert_ok(recap_device_alloc(0, n * 4, &buf[i][j]));
    }
    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
    forked_step(t[0], gen[0], s, buf[0][0], buf[0][1], n);
    ck_assert_ok(recap_stream_end_capture(s, &g));
    ck_assert_ok(recap_graph_instantiate(g, &e));
    for (k = 0; k < 3; k++) {
        ck_assert_ok(recap_graph_launch(e, s));
        forked_step(t[1], gen[1], s, buf[1][0], buf[1][1], n); /* the eager oracle */
        ck_assert_ok(recap_stream_synchronize(s));
        for (i = 0; i < 2; i++)
            for (j = 0; j < 2; j++)
                ck_assert_ok(recap_memcpy_to_host(0, h[i] + j * n, buf[i][j], n * 4));
        ck_assert_msg(memcmp(h[0], h[1], 2 * n * 4) == 0, "replay %d differs from eager", k);
    }
    ck_assert_ok(recap_graph_exec_destroy(e));
    ck_assert_ok(recap_graph_destroy(g));
    for (i = 0; i < 2; i++) {
        for (j = 0; j < 2; j++)
            ck_assert_ok(recap_device_free(0, buf[i][j]));
        ck_assert_ok(recap_tracker_destroy(t[i]));
    }
    free(h[0]);
    free(h[1]);
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

/* A value-mode tracker swaps seeds inside the generator: a graph cannot replay that, so the
 * capture reports it instead of replaying a wrong stream. */
START_TEST(value_mode_fork_with_new_seed_fails_the_capture)
{
    recap_tracker_params_t p = {0, NULL, 0, NULL};
    recap_tracker_h t;
    recap_generator_h gen;
    recap_fork_token_t tok;
    recap_stream_t s;
    recap_graph_t g = NULL;
    void *buf;

    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_tracker_add(t, "a", 1 + tu_rand_below(1000)));
    ck_assert_ok(recap_tracker_generator(t, &gen));
    ck_assert_ok(recap_device_alloc(0, 1024, &buf));
    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_tracker_fork(t, "a", &tok));
    ck_assert_ok(recap_generator_fill_u32(gen, s, buf, 256));
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_status(recap_stream_end_capture(s, &g), RECAP_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "graph-safe tracker"));
    ck_assert_ptr_null(g);
    ck_assert_ok(recap_device_free(0, buf));
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

/* Priming allocates device slots while another thread's global-mode capture is open: recap does
 * it under the relaxed capture mode, so that capture survives and replays correctly. (An
 * allocation in the global mode would invalidate it: tests/double/test_double.c shows the rule.) */
typedef struct {
    recap_generator_h gen;
    void *buf;
    recap_stream_t s;
    recap_graph_t g;
    recap_status_t end;
    pthread_barrier_t *bar;
} global_cap_t;

static void *global_capture_thread(void *arg)
{
    global_cap_t *c = arg;

    recap_stream_begin_capture(c->s, RECAP_CAPTURE_GLOBAL);
    recap_generator_fill_u32(c->gen, c->s, c->buf, 1000);
    pthread_barrier_wait(c->bar); /* the other thread primes now */
    pthread_barrier_wait(c->bar);
    c->end = recap_stream_end_capture(c->s, &c->g);
    return NULL;
}

START_TEST(priming_during_another_threads_global_capture_keeps_it_valid)
{
    pthread_barrier_t bar;
    pthread_t th;
    global_cap_t c = {0};
    recap_generator_h late;
    recap_stream_t s2;
    recap_capture_stats_t a, b;

    pthread_barrier_init(&bar, NULL, 2);
    c.bar = &bar;
    ck_assert_ok(recap_generator_create(0, &c.gen));
    ck_assert_ok(recap_device_alloc(0, 4000, &c.buf));
    ck_assert_ok(recap_stream_create(0, &c.s));
    ck_assert_ok(recap_stream_create(0, &s2));
    pthread_create(&th, NULL, global_capture_thread, &c);
    pthread_barrier_wait(&bar);
    ck_assert_ok(recap_capture_stats(&a));
    ck_assert_ok(recap_generator_create(0, &late)); /* a new state: priming must allocate */
    ck_assert_ok(recap_capture_will_begin(s2, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_capture_stats(&b));
    ck_assert_uint_ge(b.states_primed - a.states_primed, 1);
    pthread_barrier_wait(&bar);
    pthread_join(th, NULL);
    ck_assert_status(c.end, RECAP_OK);
    ck_assert_ptr_nonnull(c.g);
    ck_assert_ok(recap_graph_destroy(c.g));
    ck_assert_ok(recap_generator_destroy(late));
    ck_assert_ok(recap_generator_destroy(c.gen));
    ck_assert_ok(recap_device_free(0, c.buf));
    ck_assert_ok(recap_stream_destroy(c.s));
    ck_assert_ok(recap_stream_destroy(s2));
    pthread_barrier_destroy(&bar);
}
END_TEST

START_TEST(needs_registration_without_hooks)
{
    int needs = -1;

    ck_assert_ok(recap_capture_needs_registration(&needs));
    ck_assert_int_eq(needs, 1);
    needs = -1;
    ck_assert_ok(recap_capture_needs_registration(&needs)); /* cached */
    ck_assert_int_eq(needs, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("capture");
    TCase *tc = tcase_create("capture");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, k_replays_equal_k_eager_runs);
    tcase_add_test(tc, replays_and_eager_draws_never_overlap);
    tcase_add_test(tc, steady_state_launches_write_no_slots);
    tcase_add_test(tc, instantiations_and_clones_share_the_stream);
    tcase_add_test(tc, graph_without_rng_is_left_alone);
    tcase_add_test(tc, unprimed_generator_in_capture_is_rejected);
    tcase_add_test(tc, reserve_inside_capture_returns_relative_offsets);
    tcase_add_test(tc, concurrent_captures_keep_their_own_offsets);
    tcase_add_test(tc, snapshot_restore_inside_capture_redraws_the_forward);
    tcase_add_test(tc, graph_safe_forks_inside_capture_replay_like_eager);
    tcase_add_test(tc, value_mode_fork_with_new_seed_fails_the_capture);
    tcase_add_test(tc, priming_during_another_threads_global_capture_keeps_it_valid);
    tcase_add_test(tc, recompute_on_a_worker_thread_inside_capture_redraws_the_forward);
    tcase_add_test(tc, needs_registration_without_hooks);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
