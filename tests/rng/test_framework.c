/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Framework generators: a framework's own generator (tests/support/fake_framework.c) driven by
 * recap's tracker, seeding and snapshots. The framework's kernel draws what cuRAND's host generator
 * gives for the framework's current state, so every draw inside a fork is checked against
 * cuRAND at the state the fork should have installed. (The tracker, seeding and snapshot suites
 * also run whole on a framework generator: test_*_fw.)
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fake_framework.h"
#include "testutil.h"

#define NW 64

static uint32_t mode_flags(int i)
{
    return i ? RECAP_TRACKER_GRAPH_SAFE : 0;
}

static recap_tracker_h tracker_on(ff_t *f, uint32_t flags)
{
    recap_tracker_params_t p = {.flags = flags, .generator = f->gen};
    recap_tracker_h t;

    ck_assert_ok(recap_tracker_create(&p, &t));
    return t;
}

/* The framework's own draw inside a fork of `name`. */
static void fork_draw(recap_tracker_h t, ff_t *f, const char *name, uint32_t *w)
{
    recap_fork_token_t tok;

    ck_assert_ok(recap_tracker_fork(t, name, &tok));
    ff_draw(f, w, NW);
    ck_assert_ok(recap_tracker_unfork(t, tok));
}

static void expect_curand(const uint32_t *w, uint64_t seed, uint64_t offset)
{
    uint32_t ref[NW];

    ck_assert_int_eq(ref_curand_u32(seed, offset, ref, NW), 0);
    ck_assert_mem_eq(w, ref, sizeof(ref));
}

static void expect_value(const ff_t *f, uint64_t seed, uint64_t offset)
{
    uint64_t s, o;

    ff_current_value(f, &s, &o);
    ck_assert_uint_eq(s, seed);
    ck_assert_uint_eq(o, offset);
}

/* Forks put the named state into the framework's generator: its kernel draws from it, the
 * default state is untouched, and a state continues where its last fork left it. */
START_TEST(framework_kernels_draw_from_the_forked_state)
{
    uint64_t sa = 1 + tu_rand_below(1u << 30), sb = sa + 1 + tu_rand_below(1000);
    uint64_t dseed = tu_rand();
    ff_t *f = ff_new(RECAP_DEVICE_HOST, dseed, 1);
    recap_tracker_h t = tracker_on(f, mode_flags(_i));
    uint32_t w[NW];
    int k;

    ck_assert_ok(recap_tracker_add(t, "a", sa));
    ck_assert_ok(recap_tracker_add(t, "b", sb));
    for (k = 0; k < 3; k++) {
        fork_draw(t, f, "a", w);
        expect_curand(w, sa, 4 * (uint64_t)k);
        fork_draw(t, f, "b", w);
        expect_curand(w, sb, 4 * (uint64_t)k);
        expect_value(f, dseed, 0);
    }
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_int_eq(ff_free(f), 0);
}
END_TEST

/* A -> B -> A nested draws exactly what the same forks one after the other draw. */
START_TEST(nested_forks_equal_sequential_forks)
{
    uint64_t sa = 1 + tu_rand_below(1u << 30), sb = sa + 7;
    ff_t *f = ff_new(RECAP_DEVICE_HOST, 5, 1), *g = ff_new(RECAP_DEVICE_HOST, 5, 1);
    recap_tracker_h t = tracker_on(f, mode_flags(_i)), u = tracker_on(g, mode_flags(_i));
    recap_fork_token_t ta, tb, ta2;
    uint32_t nested[3][NW], seq[3][NW];

    ck_assert_ok(recap_tracker_add(t, "a", sa));
    ck_assert_ok(recap_tracker_add(t, "b", sb));
    ck_assert_ok(recap_tracker_add(u, "a", sa));
    ck_assert_ok(recap_tracker_add(u, "b", sb));
    ck_assert_ok(recap_tracker_fork(t, "a", &ta));
    ff_draw(f, nested[0], NW);
    ck_assert_ok(recap_tracker_fork(t, "b", &tb));
    ff_draw(f, nested[1], NW);
    ck_assert_ok(recap_tracker_fork(t, "a", &ta2));
    ff_draw(f, nested[2], NW);
    ck_assert_ok(recap_tracker_unfork(t, ta2));
    ck_assert_ok(recap_tracker_unfork(t, tb));
    ck_assert_ok(recap_tracker_unfork(t, ta));
    fork_draw(u, g, "a", seq[0]);
    fork_draw(u, g, "b", seq[1]);
    fork_draw(u, g, "a", seq[2]);
    ck_assert_mem_eq(nested, seq, sizeof(seq));
    expect_curand(nested[2], sa, 4);
    expect_value(f, 5, 0);
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_ok(recap_tracker_destroy(u));
    ck_assert_int_eq(ff_free(f), 0);
    ck_assert_int_eq(ff_free(g), 0);
}
END_TEST

/* Graph-safe mode installs the tracker's state object itself (what a captured graph refers to)
 * and gives the framework's own object back after the fork. */
START_TEST(graph_safe_fork_installs_the_object_itself)
{
    ff_t *f = ff_new(RECAP_DEVICE_HOST, 9, 1);
    recap_tracker_h t = tracker_on(f, RECAP_TRACKER_GRAPH_SAFE);
    ff_obj_t *outer = f->current, *inside, *again;
    void *obj = NULL;
    recap_fork_token_t tok;
    uint32_t w[NW];

    ck_assert_ok(recap_tracker_add(t, "a", 77));
    ck_assert_ok(recap_tracker_state_object(t, "a", &obj));
    ck_assert_status(recap_tracker_state_object(t, "b", &obj), RECAP_ERR_NOT_FOUND);
    ck_assert_ok(recap_tracker_fork(t, "a", &tok));
    inside = f->current;
    ck_assert_ptr_eq(inside, obj);
    ck_assert_ptr_ne(inside, outer);
    ff_draw(f, w, NW);
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ptr_eq(f->current, outer);
    ck_assert_ok(recap_tracker_fork(t, "a", &tok));
    again = f->current;
    ck_assert_ptr_eq(again, inside);
    ck_assert_uint_eq(again->offset, 4);
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_int_eq(ff_free(f), 0);
}
END_TEST

/* Megatron's model_parallel_cuda_manual_seed seeds the framework's generator. */
START_TEST(seed_parallel_seeds_the_framework_generator)
{
    recap_parallel_ranks_t r = {3, 8, 1, 4, 0, 1, 0, 1, 0, 1};
    int64_t seed = 1 + (int64_t)tu_rand_below(1u << 20);
    ff_t *f = ff_new(RECAP_DEVICE_HOST, 1, 1);
    recap_tracker_h t = tracker_on(f, mode_flags(_i));
    uint32_t w[NW];

    f->current->offset = 40;
    ck_assert_ok(recap_tracker_seed_parallel(t, seed, &r));
    expect_value(f, (uint64_t)seed, 0);
    fork_draw(t, f, RECAP_RNG_MODEL_PARALLEL, w);
    expect_curand(w, (uint64_t)seed + 2718 + 3, 0);
    fork_draw(t, f, RECAP_RNG_EXPERT_PARALLEL, w);
    expect_curand(w, (uint64_t)seed + 1024 + 100, 0);
    ff_draw(f, w, NW);
    expect_curand(w, (uint64_t)seed, 0);
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_int_eq(ff_free(f), 0);
}
END_TEST

/* A snapshot taken, then draws, then restore: the framework draws the same numbers again, and
 * the serialized snapshot restores into another framework's tracker too. */
START_TEST(snapshot_restores_the_framework_state)
{
    ff_t *f = ff_new(RECAP_DEVICE_HOST, tu_rand(), 1), *g = ff_new(RECAP_DEVICE_HOST, 3, 1);
    recap_tracker_h t = tracker_on(f, mode_flags(_i)), u = tracker_on(g, mode_flags(_i));
    recap_parallel_ranks_t r = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
    uint32_t a[3][NW], b[3][NW];
    recap_snapshot_h snap, back;
    unsigned char blob[4096];
    size_t len;

    ck_assert_ok(recap_tracker_seed_parallel(t, 1234, &r));
    ck_assert_ok(recap_tracker_seed_parallel(u, 99, &r));
    fork_draw(t, f, RECAP_RNG_MODEL_PARALLEL, a[0]);
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_snapshot_create(&back));
    ck_assert_ok(recap_snapshot_take(t, snap));
    ff_draw(f, a[0], NW);
    fork_draw(t, f, RECAP_RNG_MODEL_PARALLEL, a[1]);
    fork_draw(t, f, RECAP_RNG_DATA_PARALLEL, a[2]);
    ck_assert_ok(recap_snapshot_restore(t, snap));
    ff_draw(f, b[0], NW);
    fork_draw(t, f, RECAP_RNG_MODEL_PARALLEL, b[1]);
    fork_draw(t, f, RECAP_RNG_DATA_PARALLEL, b[2]);
    ck_assert_mem_eq(a, b, sizeof(a));
    ck_assert_ok(recap_snapshot_serialize(snap, blob, sizeof(blob), &len));
    ck_assert_ok(recap_snapshot_deserialize(blob, len, back));
    ck_assert_ok(recap_snapshot_restore(u, back));
    ff_draw(g, b[0], NW);
    fork_draw(u, g, RECAP_RNG_MODEL_PARALLEL, b[1]);
    fork_draw(u, g, RECAP_RNG_DATA_PARALLEL, b[2]);
    ck_assert_mem_eq(a, b, sizeof(a));
    recap_snapshot_destroy(snap);
    recap_snapshot_destroy(back);
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_ok(recap_tracker_destroy(u));
    ck_assert_int_eq(ff_free(f), 0);
    ck_assert_int_eq(ff_free(g), 0);
}
END_TEST

/* Everything the framework and the tracker hold, as bytes to compare before and after. */
typedef struct {
    uint64_t seed, offset;
    const void *current;
    uint8_t states[8][RECAP_STATE_BYTES];
    size_t n;
    const char *name;
} world_t;

static world_t world(recap_tracker_h t, const ff_t *f)
{
    world_t w;
    recap_states_h s;
    size_t i;

    memset(&w, 0, sizeof(w));
    ff_current_value(f, &w.seed, &w.offset);
    w.current = f->current;
    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_ok(recap_states_count(s, &w.n));
    for (i = 0; i < w.n && i < 8; i++) {
        const char *name;
        ck_assert_ok(recap_states_name(s, i, &name));
        ck_assert_ok(recap_states_lookup(s, name, w.states[i]));
    }
    recap_states_free(s);
    ck_assert_ok(recap_tracker_current_name(t, &w.name));
    return w;
}

static void expect_same_world(const world_t *a, const world_t *b)
{
    ck_assert_uint_eq(a->seed, b->seed);
    ck_assert_uint_eq(a->offset, b->offset);
    ck_assert_ptr_eq(a->current, b->current);
    ck_assert_uint_eq(a->n, b->n);
    ck_assert_mem_eq(a->states, b->states, sizeof(a->states));
    ck_assert_str_eq(a->name, b->name);
}

/* Each framework operation failing at each point of fork, unfork, seeding, restore and
 * set_states: the call returns the framework's status and nothing changed, and the same call
 * succeeds afterwards. */
static const char *const ops[] = {"get_state",     "set_state",     "state_create",
                                  "state_clone",   "state_install", "state_current",
                                  "state_get",     "state_set",     "state_retain"};
#define NOPS ((int)(sizeof(ops) / sizeof(ops[0])))

/* What the fake framework's failing operation returns (recap passes it on). */
static recap_status_t expected_status(const char *op)
{
    return strcmp(op, "state_create") == 0 || strcmp(op, "state_clone") == 0
               ? RECAP_ERR_NO_MEMORY
               : RECAP_ERR_CUDA;
}

START_TEST(failing_framework_operations_change_nothing)
{
    int graph_safe = _i / NOPS;
    const char *op = ops[_i % NOPS];
    recap_parallel_ranks_t r = {1, 2, 0, 1, 0, 1, 0, 1, 0, 1};
    ff_t *f = ff_new(RECAP_DEVICE_HOST, 11, 1);
    recap_tracker_h t = tracker_on(f, mode_flags(graph_safe));
    recap_snapshot_h snap;
    recap_states_h states;
    recap_fork_token_t tok, tok2;
    world_t before;
    int after, failures = 0;

    ck_assert_ok(recap_tracker_seed_parallel(t, 500, &r));
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_tracker_get_states(t, &states));
    ck_assert_ok(recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok));
    f->current->offset += 8;
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_snapshot_take(t, snap));
    f->current->offset += 12;
    for (after = 0; after < 6; after++) {
        recap_status_t st;
        int step;

        for (step = 0; step < 5; step++) {
            before = world(t, f);
            f->fail_op = op;
            f->fail_after = after;
            switch (step) {
            case 0:
                st = recap_tracker_fork(t, RECAP_RNG_DATA_PARALLEL, &tok);
                if (st == RECAP_OK) {
                    f->fail_op = NULL;
                    ck_assert_ok(recap_tracker_unfork(t, tok));
                }
                break;
            case 1: /* unfork: fork first without failures */
                f->fail_op = NULL;
                ck_assert_ok(recap_tracker_fork(t, RECAP_RNG_DATA_PARALLEL, &tok2));
                f->current->offset += 4;
                before = world(t, f);
                f->fail_op = op;
                f->fail_after = after;
                st = recap_tracker_unfork(t, tok2);
                f->fail_op = NULL;
                if (st != RECAP_OK) { /* the fork stays open; a retry ends it */
                    world_t now = world(t, f);
                    failures++;
                    ck_assert_int_eq(st, expected_status(op));
                    expect_same_world(&before, &now);
                    ck_assert_ok(recap_tracker_unfork(t, tok2));
                }
                continue;
            case 2:
                st = recap_tracker_seed_parallel(t, 600 + after, &r);
                break;
            case 3:
                st = recap_snapshot_restore(t, snap);
                break;
            default:
                st = recap_tracker_set_states(t, states);
                break;
            }
            f->fail_op = NULL;
            if (st != RECAP_OK) {
                world_t now = world(t, f);
                failures++;
                ck_assert_int_eq(st, expected_status(op));
                expect_same_world(&before, &now);
            }
        }
    }
    /* The operations a mode uses did fail somewhere (value mode never calls object ops). */
    if (!graph_safe && strncmp(op, "state_", 6) == 0)
        ck_assert_int_eq(failures, 0);
    else if (strcmp(op, "state_create") != 0 && strcmp(op, "state_clone") != 0 &&
             strcmp(op, "state_retain") != 0)
        ck_assert_int_gt(failures, 0);
    recap_states_free(states);
    recap_snapshot_destroy(snap);
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_int_eq(ff_free(f), 0);
}
END_TEST

START_TEST(incomplete_ops_tables_are_refused_by_name)
{
    recap_framework_ops_t o = ff_ops(1);
    recap_generator_h g;

    o.state_install = NULL;
    ck_assert_status(recap_generator_create_framework(&o, NULL, RECAP_DEVICE_HOST, &g),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "state_install"));
    o = ff_ops(0);
    o.set_state = NULL;
    ck_assert_status(recap_generator_create_framework(&o, NULL, RECAP_DEVICE_HOST, &g),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "set_state"));
    o = ff_ops(0);
    o.state_create = ff_ops(1).state_create;
    ck_assert_status(recap_generator_create_framework(&o, NULL, RECAP_DEVICE_HOST, &g),
                     RECAP_ERR_INVALID_ARG);
    o = ff_ops(0);
    o.version = 99;
    ck_assert_status(recap_generator_create_framework(&o, NULL, RECAP_DEVICE_HOST, &g),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_create_framework(NULL, NULL, RECAP_DEVICE_HOST, &g),
                     RECAP_ERR_INVALID_ARG);
    o = ff_ops(0);
    ck_assert_status(recap_generator_create_framework(&o, NULL, -7, &g), RECAP_ERR_INVALID_ARG);
}
END_TEST

/* A value-only framework cannot back a graph-safe tracker; it can back a value-mode one. */
START_TEST(graph_safe_tracker_needs_the_graph_safe_form)
{
    ff_t *f = ff_new(RECAP_DEVICE_HOST, 1, 0);
    recap_tracker_params_t p = {.flags = RECAP_TRACKER_GRAPH_SAFE, .generator = f->gen};
    recap_tracker_h t;

    ck_assert_status(recap_tracker_create(&p, &t), RECAP_ERR_INVALID_ARG);
    p.flags = 0;
    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_int_eq(ff_free(f), 0);
}
END_TEST

/* The generator cannot go while a tracker drives it (as generator or host generator). */
START_TEST(destroying_a_driven_generator_is_refused)
{
    ff_t *f = ff_new(RECAP_DEVICE_HOST, 1, 1), *h = ff_new(RECAP_DEVICE_HOST, 2, 0);
    recap_tracker_params_t p = {.generator = f->gen, .host_generator = h->gen};
    recap_framework_info_t info[4];
    recap_generator_h own;
    recap_tracker_h t;
    size_t n;

    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_tracker_add(t, "a", 1));
    ck_assert_status(recap_generator_destroy(f->gen), RECAP_ERR_STATE);
    ck_assert_status(recap_generator_destroy(h->gen), RECAP_ERR_STATE);
    ck_assert_ok(recap_framework_generators(info, 4, &n));
    ck_assert_uint_ge(n, 2);
    ck_assert_int_eq(info[0].trackers + info[1].trackers, 2);
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_int_eq(ff_free(f), 0);
    ck_assert_int_eq(ff_free(h), 0);
    /* recap's own generators likewise */
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &own));
    p.generator = own;
    p.host_generator = NULL;
    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_status(recap_generator_destroy(own), RECAP_ERR_STATE);
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_ok(recap_generator_destroy(own));
    p.host_generator = p.generator = NULL;
    ck_assert_ok(recap_framework_generators(NULL, 0, &n));
    ck_assert_uint_eq(n, 0);
}
END_TEST

/* An operation calling back into recap gets RECAP_ERR_STATE instead of a deadlock; the outer
 * call completes. */
START_TEST(reentering_recap_from_an_operation_is_refused)
{
    ff_t *f = ff_new(RECAP_DEVICE_HOST, 1, 1);
    recap_tracker_h t = tracker_on(f, 0);
    recap_fork_token_t tok;
    uint32_t w[NW];

    ck_assert_ok(recap_tracker_add(t, "a", 31));
    f->reenter = t;
    f->reenter_status = RECAP_OK;
    ck_assert_ok(recap_tracker_fork(t, "a", &tok));
    ck_assert_int_eq(f->reenter_status, RECAP_ERR_STATE);
    f->reenter = NULL;
    ff_draw(f, w, NW);
    expect_curand(w, 31, 0);
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_int_eq(ff_free(f), 0);
}
END_TEST

/* recap's fills draw from the framework's current state by value and advance it. */
START_TEST(recap_fill_draws_from_the_framework_state)
{
    uint64_t seed = tu_rand(), off = tu_rand_offset();
    ff_t *f = ff_new(RECAP_DEVICE_HOST, seed, 0);
    recap_philox_args_t args;
    uint32_t w[NW];

    f->current->offset = off;
    ck_assert_ok(recap_generator_fill_u32(f->gen, NULL, w, NW));
    expect_curand(w, seed, off);
    expect_value(f, seed, off + 4);
    ck_assert_status(recap_generator_reserve(f->gen, NULL, 4, &args), RECAP_ERR_UNSUPPORTED);
    ck_assert_int_eq(ff_free(f), 0);
}
END_TEST

/* On a device (the CUDA double, or the GPU), recap's fill draws from the framework's state
 * outside captures and refuses inside one. */
START_TEST(device_framework_generator_fills_outside_captures_only)
{
    uint64_t seed = tu_rand();
    ff_t *f;
    recap_stream_t s;
    recap_graph_t graph;
    uint32_t w[NW];
    void *buf;
    int n;

    if (recap_device_count(&n) != RECAP_OK || n < 1)
        return;
    f = ff_new(0, seed, 1);
    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_device_alloc(0, sizeof(w), &buf));
    ck_assert_ok(recap_generator_fill_u32(f->gen, s, buf, NW));
    ck_assert_ok(recap_stream_synchronize(s));
    ck_assert_ok(recap_memcpy_to_host(0, w, buf, sizeof(w)));
    expect_curand(w, seed, 0);
    expect_value(f, seed, 4);
    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_RELAXED));
    ck_assert_status(recap_generator_fill_u32(f->gen, s, buf, NW), RECAP_ERR_UNSUPPORTED);
    ck_assert_ok(recap_stream_end_capture(s, &graph));
    ck_assert_ok(recap_graph_destroy(graph));
    expect_value(f, seed, 4);
    ck_assert_ok(recap_device_free(0, buf));
    ck_assert_ok(recap_stream_destroy(s));
    ck_assert_int_eq(ff_free(f), 0);
}
END_TEST

START_TEST(needs_registration_asks_the_framework)
{
    ff_t *f = ff_new(RECAP_DEVICE_HOST, 1, 0);
    recap_framework_ops_t o = ff_ops(0);
    recap_generator_h g;
    int needs = -1;

    f->needs_registration = 1;
    ck_assert_ok(recap_generator_needs_registration(f->gen, &needs));
    ck_assert_int_eq(needs, 1);
    f->needs_registration = 0;
    ck_assert_ok(recap_generator_needs_registration(f->gen, &needs));
    ck_assert_int_eq(needs, 0);
    f->fail_op = "needs_registration";
    ck_assert_status(recap_generator_needs_registration(f->gen, &needs), RECAP_ERR_CUDA);
    o.needs_registration = NULL;
    ck_assert_ok(recap_generator_create_framework(&o, f, RECAP_DEVICE_HOST, &g));
    ck_assert_status(recap_generator_needs_registration(g, &needs), RECAP_ERR_UNSUPPORTED);
    ck_assert_ok(recap_generator_is_framework(g, &needs));
    ck_assert_int_eq(needs, 1);
    ck_assert_ok(recap_generator_destroy(g));
    ck_assert_int_eq(ff_free(f), 0);
}
END_TEST

static recap_status_t nothing(const recap_capture_event_info_t *info, void *arg)
{
    return RECAP_OK;
}

/* recap-probe's hooks check lists the framework generators and subscribers of its process. */
START_TEST(probe_lists_frameworks_and_subscribers)
{
    ff_t *f = ff_new(RECAP_DEVICE_HOST, 1, 1);
    recap_tracker_h t = tracker_on(f, RECAP_TRACKER_GRAPH_SAFE);
    recap_subscription_h sub;
    recap_probe_result_t *res;
    size_t n;

    ck_assert_ok(recap_capture_subscribe(RECAP_EVENT_MASK_ALL, nothing, NULL, &sub));
    ck_assert_ok(recap_probe_run("hooks", &res, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_msg(strstr(res[0].detail, "framework generators: 1 (fake framework (device -1, "
                                        "value and graph-safe, 1 tracker)); capture "
                                        "subscribers: 1") != NULL, "%s", res[0].detail);
    recap_probe_free(res);
    ck_assert_ok(recap_capture_unsubscribe(sub));
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_int_eq(ff_free(f), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("framework");
    TCase *tc = tcase_create("framework");

    tcase_add_loop_test(tc, framework_kernels_draw_from_the_forked_state, 0, 2);
    tcase_add_loop_test(tc, nested_forks_equal_sequential_forks, 0, 2);
    tcase_add_test(tc, graph_safe_fork_installs_the_object_itself);
    tcase_add_loop_test(tc, seed_parallel_seeds_the_framework_generator, 0, 2);
    tcase_add_loop_test(tc, snapshot_restores_the_framework_state, 0, 2);
    tcase_add_loop_test(tc, failing_framework_operations_change_nothing, 0, 2 * NOPS);
    tcase_add_test(tc, incomplete_ops_tables_are_refused_by_name);
    tcase_add_test(tc, graph_safe_tracker_needs_the_graph_safe_form);
    tcase_add_test(tc, destroying_a_driven_generator_is_refused);
    tcase_add_test(tc, reentering_recap_from_an_operation_is_refused);
    tcase_add_test(tc, recap_fill_draws_from_the_framework_state);
    tcase_add_test(tc, device_framework_generator_fills_outside_captures_only);
    tcase_add_test(tc, needs_registration_asks_the_framework);
    tcase_add_test(tc, probe_lists_frameworks_and_subscribers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
