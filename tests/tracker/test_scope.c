/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exact-capture scopes: what a warm-up and a capture inside a scope draw leaves no trace, so the
 * first replay after it draws what the first eager step would have (the eager run is the oracle),
 * on recap's own generators (host and, on the CUDA double or a GPU, device) and on a framework's.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fake_framework.h"
#include "testutil.h"

#define NW 64

static recap_tracker_h seeded(int device, uint32_t flags, recap_generator_h gen, int64_t seed)
{
    recap_tracker_params_t p = {.flags = flags, .generator = gen, .device = device};
    recap_parallel_ranks_t r = {1, 2, 0, 1, 0, 1, 0, 1, 0, 1};
    recap_tracker_h t;

    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_tracker_seed_parallel(t, seed, &r));
    return t;
}

/* One "training step" on the host: the generator, then a fork of each named state. */
static void host_step(recap_tracker_h t, uint32_t *w)
{
    recap_generator_h g;
    recap_fork_token_t tok;

    ck_assert_ok(recap_tracker_generator(t, &g));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, w, NW));
    ck_assert_ok(recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, w + NW, NW));
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_tracker_fork(t, RECAP_RNG_DATA_PARALLEL, &tok));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, w + 2 * NW, NW));
    ck_assert_ok(recap_tracker_unfork(t, tok));
}

/* Steps inside a scope (a warm-up) leave the tracker where it was: the steps after the scope
 * equal the first steps of a twin that never warmed up; in both modes, on recap's generator and
 * on a framework's. */
START_TEST(warm_up_inside_a_scope_leaves_no_trace)
{
    int graph_safe = _i & 1, framework = _i >> 1;
    int64_t seed = 1 + (int64_t)tu_rand_below(1u << 30);
    ff_t *fa = framework ? ff_new(RECAP_DEVICE_HOST, 5, 1) : NULL;
    ff_t *fb = framework ? ff_new(RECAP_DEVICE_HOST, 5, 1) : NULL;
    uint32_t flags = graph_safe ? RECAP_TRACKER_GRAPH_SAFE : 0;
    recap_tracker_h a = seeded(RECAP_DEVICE_HOST, flags, fa ? fa->gen : NULL, seed);
    recap_tracker_h b = seeded(RECAP_DEVICE_HOST, flags, fb ? fb->gen : NULL, seed);
    uint32_t wa[3 * NW], wb[3 * NW];
    recap_exact_scope_h scope;
    int k;

    ck_assert_ok(recap_exact_capture_enter(&scope));
    for (k = 0; k < 3; k++)
        host_step(a, wa);
    ck_assert_ok(recap_exact_capture_leave(scope));
    for (k = 0; k < 4; k++) {
        host_step(a, wa);
        host_step(b, wb);
        ck_assert_mem_eq(wa, wb, sizeof(wa));
    }
    ck_assert_ok(recap_tracker_destroy(a));
    ck_assert_ok(recap_tracker_destroy(b));
    if (framework) {
        ck_assert_int_eq(ff_free(fa), 0);
        ck_assert_int_eq(ff_free(fb), 0);
    }
}
END_TEST

/* A framework generator no tracker drives is restored too. */
START_TEST(lone_framework_generator_is_restored)
{
    ff_t *f = ff_new(RECAP_DEVICE_HOST, tu_rand(), 0);
    uint64_t seed, offset;
    recap_exact_scope_h scope;
    uint32_t w[NW];

    f->current->offset = tu_rand_offset();
    ff_current_value(f, &seed, &offset);
    ck_assert_ok(recap_exact_capture_enter(&scope));
    ff_draw(f, w, NW);
    ck_assert_ok(recap_generator_fill_u32(f->gen, NULL, w, NW));
    ck_assert_ok(recap_exact_capture_leave(scope));
    ck_assert_uint_eq(f->current->seed, seed);
    ck_assert_uint_eq(f->current->offset, offset);
    ck_assert_int_eq(ff_free(f), 0);
}
END_TEST

static uint64_t gen_offset(recap_tracker_h t)
{
    recap_generator_h g;
    uint64_t o;

    ck_assert_ok(recap_tracker_generator(t, &g));
    ck_assert_ok(recap_generator_offset(g, &o));
    return o;
}

/* Nested scopes each restore what they saw; RECAP_EXACT_CAPTURE=0 restores nothing; a tracker
 * destroyed inside a scope is skipped. */
START_TEST(nesting_the_switch_and_destroyed_trackers)
{
    recap_tracker_h t = seeded(RECAP_DEVICE_HOST, 0, NULL, 99), gone;
    recap_exact_scope_h outer, inner;
    uint32_t w[3 * NW];

    host_step(t, w);
    ck_assert_ok(recap_exact_capture_enter(&outer));
    host_step(t, w);
    ck_assert_uint_eq(gen_offset(t), 8);
    ck_assert_ok(recap_exact_capture_enter(&inner));
    host_step(t, w);
    gone = seeded(RECAP_DEVICE_HOST, 0, NULL, 7);
    ck_assert_ok(recap_exact_capture_leave(inner));
    ck_assert_uint_eq(gen_offset(t), 8);
    ck_assert_ok(recap_exact_capture_enter(&inner));
    ck_assert_ok(recap_tracker_destroy(gone));
    ck_assert_ok(recap_exact_capture_leave(inner));
    ck_assert_ok(recap_exact_capture_leave(outer));
    ck_assert_uint_eq(gen_offset(t), 4);
    setenv("RECAP_EXACT_CAPTURE", "0", 1);
    ck_assert_ok(recap_exact_capture_enter(&outer));
    host_step(t, w);
    ck_assert_ok(recap_exact_capture_leave(outer));
    unsetenv("RECAP_EXACT_CAPTURE");
    ck_assert_uint_eq(gen_offset(t), 8);
    ck_assert_status(recap_exact_capture_enter(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_exact_capture_leave(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_tracker_destroy(t));
}
END_TEST

/* Trackers created and destroyed in random order inside a scope: at leave, every tracker alive
 * at enter and still alive is back where it was, whatever was created or destroyed around it. */
START_TEST(churn_inside_a_scope_restores_the_survivors)
{
    enum { MOST = 64 };
    recap_tracker_h t[2 * MOST] = {NULL};
    uint64_t before[2 * MOST];
    size_t n = 2 + (size_t)tu_rand_below(MOST - 1), total = n, i, k, ops;
    recap_exact_scope_h scope;
    uint32_t w[3 * NW];

    for (i = 0; i < n; i++) {
        t[i] = seeded(RECAP_DEVICE_HOST, 0, NULL, 1 + (int64_t)i);
        for (k = tu_rand_below(3); k > 0; k--)
            host_step(t[i], w);
        before[i] = gen_offset(t[i]);
    }
    ck_assert_ok(recap_exact_capture_enter(&scope));
    for (ops = 4 * n; ops > 0; ops--) {
        k = (size_t)tu_rand_below(total);
        if (tu_rand_below(3) == 0 && total < 2 * MOST) {
            t[total++] = seeded(RECAP_DEVICE_HOST, 0, NULL, 1000 + (int64_t)ops);
        } else if (t[k] != NULL && tu_rand_below(4) == 0) {
            ck_assert_ok(recap_tracker_destroy(t[k]));
            t[k] = NULL;
        } else if (t[k] != NULL) {
            host_step(t[k], w);
        }
    }
    ck_assert_ok(recap_exact_capture_leave(scope));
    for (i = 0; i < total; i++) {
        if (t[i] == NULL)
            continue;
        if (i < n)
            ck_assert_uint_eq(gen_offset(t[i]), before[i]);
        ck_assert_ok(recap_tracker_destroy(t[i]));
    }
}
END_TEST

/* A framework that fails to take its state back: leave returns its status, restores the rest and
 * frees the scope. */
START_TEST(failing_restore_is_reported_and_the_rest_restored)
{
    ff_t *f = ff_new(RECAP_DEVICE_HOST, 3, 0);
    recap_tracker_h t = seeded(RECAP_DEVICE_HOST, 0, NULL, 42);
    recap_exact_scope_h scope;
    uint32_t w[3 * NW];

    ck_assert_ok(recap_exact_capture_enter(&scope));
    host_step(t, w);
    f->current->offset += 4;
    f->fail_op = "set_state";
    ck_assert_status(recap_exact_capture_leave(scope), RECAP_ERR_CUDA);
    ck_assert_uint_eq(gen_offset(t), 0);
    ck_assert_uint_eq(f->current->offset, 4);
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_int_eq(ff_free(f), 0);
}
END_TEST

/* On a device: warm-up steps and the capture inside a scope, then K launches of the graph equal
 * the first K eager steps of a twin (the first replay draws what the first eager step would). */
static void device_step(recap_tracker_h t, recap_stream_t s, void *buf, size_t n)
{
    recap_generator_h g;
    recap_fork_token_t tok;

    ck_assert_ok(recap_tracker_generator(t, &g));
    ck_assert_ok(recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok));
    ck_assert_ok(recap_generator_fill_u32(g, s, buf, n));
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_generator_fill_u32(g, s, (uint32_t *)buf + n, n));
}

START_TEST(graph_after_a_scope_replays_the_eager_steps)
{
    const size_t n = 3000;
    int64_t seed = 1 + (int64_t)tu_rand_below(1u << 30);
    recap_tracker_h a, b;
    recap_stream_t s;
    recap_graph_t graph;
    recap_graph_exec_t exec;
    recap_exact_scope_h scope;
    uint32_t *ha = malloc(2 * n * 4), *hb = malloc(2 * n * 4);
    void *da, *db;
    int devices, k;

    if (recap_device_count(&devices) != RECAP_OK || devices < 1) {
        free(ha);
        free(hb);
        return;
    }
    a = seeded(0, RECAP_TRACKER_GRAPH_SAFE, NULL, seed);
    b = seeded(0, RECAP_TRACKER_GRAPH_SAFE, NULL, seed);
    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_device_alloc(0, 2 * n * 4, &da));
    ck_assert_ok(recap_device_alloc(0, 2 * n * 4, &db));
    ck_assert_ok(recap_exact_capture_enter(&scope));
    for (k = 0; k < 3; k++)
        device_step(a, s, da, n);
    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_THREAD_LOCAL));
    device_step(a, s, da, n);
    ck_assert_ok(recap_stream_end_capture(s, &graph));
    ck_assert_status(recap_exact_capture_leave(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_exact_capture_leave(scope));
    ck_assert_ok(recap_graph_instantiate(graph, &exec));
    for (k = 0; k < 3; k++) {
        ck_assert_ok(recap_graph_launch(exec, s));
        device_step(b, s, db, n);
        ck_assert_ok(recap_stream_synchronize(s));
        ck_assert_ok(recap_memcpy_to_host(0, ha, da, 2 * n * 4));
        ck_assert_ok(recap_memcpy_to_host(0, hb, db, 2 * n * 4));
        ck_assert_msg(memcmp(ha, hb, 2 * n * 4) == 0, "launch %d differs from eager step %d", k,
                      k);
    }
    ck_assert_ok(recap_graph_exec_destroy(exec));
    ck_assert_ok(recap_graph_destroy(graph));
    ck_assert_ok(recap_device_free(0, da));
    ck_assert_ok(recap_device_free(0, db));
    ck_assert_ok(recap_stream_destroy(s));
    ck_assert_ok(recap_tracker_destroy(a));
    ck_assert_ok(recap_tracker_destroy(b));
    free(ha);
    free(hb);
}
END_TEST

/* Inside a capture of the calling thread a scope cannot begin or end. */
START_TEST(scope_refused_inside_a_capture)
{
    recap_exact_scope_h scope, early;
    recap_stream_t s;
    recap_graph_t graph;
    int devices;

    if (recap_device_count(&devices) != RECAP_OK || devices < 1)
        return;
    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_exact_capture_enter(&early));
    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_RELAXED));
    ck_assert_status(recap_exact_capture_enter(&scope), RECAP_ERR_STATE);
    ck_assert_status(recap_exact_capture_leave(early), RECAP_ERR_STATE);
    ck_assert_ok(recap_stream_end_capture(s, &graph));
    ck_assert_ok(recap_exact_capture_leave(early));
    ck_assert_ok(recap_graph_destroy(graph));
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scope");
    TCase *tc = tcase_create("scope");

    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, warm_up_inside_a_scope_leaves_no_trace, 0, 4);
    tcase_add_test(tc, lone_framework_generator_is_restored);
    tcase_add_test(tc, nesting_the_switch_and_destroyed_trackers);
    tcase_add_test(tc, churn_inside_a_scope_restores_the_survivors);
    tcase_add_test(tc, failing_restore_is_reported_and_the_rest_restored);
    tcase_add_test(tc, graph_after_a_scope_replays_the_eager_steps);
    tcase_add_test(tc, scope_refused_inside_a_capture);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
