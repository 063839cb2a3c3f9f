/* SPDX-License-Identifier: Apache-2.0 */
/* Handle validity: a double destroy and a forged handle get RECAP_ERR_INVALID_ARG, never a
 * crash or a spin on a lock that was never initialized (issue 20, defect 9). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define FORGED_BYTES 4096

/* Forged handles of two kinds: zeroed memory as large as any object, and random bytes on the
 * stack. Loop tests take _i: 0 zeroed, 1 random. */
static void *forged(int i, uint64_t *stack_buf)
{
    static void *zeroed;
    size_t k;

    if (i == 0) {
        if (zeroed == NULL)
            zeroed = calloc(1, FORGED_BYTES);
        ck_assert_ptr_nonnull(zeroed);
        return zeroed;
    }
    for (k = 0; k < FORGED_BYTES / sizeof(uint64_t); k++)
        stack_buf[k] = tu_rand();
    return stack_buf;
}

static void assert_not_live(void)
{
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "not live"));
}

START_TEST(generator_destroyed_twice_is_an_invalid_argument)
{
    recap_generator_h g;

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_destroy(g));
    ck_assert_status(recap_generator_destroy(g), RECAP_ERR_INVALID_ARG);
    assert_not_live();
}
END_TEST

START_TEST(forged_generator_is_an_invalid_argument)
{
    uint64_t buf[FORGED_BYTES / sizeof(uint64_t)];
    recap_generator_h g = forged(_i, buf);
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST, .generator = g};
    recap_tracker_h t = NULL;
    recap_philox_args_t a;
    uint8_t st[RECAP_STATE_BYTES];
    uint64_t seed = 0;
    uint32_t w[4];

    ck_assert_status(recap_generator_seed(g, &seed), RECAP_ERR_INVALID_ARG);
    assert_not_live();
    ck_assert_uint_eq(seed, 0);
    ck_assert_status(recap_generator_manual_seed(g, 1), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_get_state(g, st), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_reserve(g, NULL, 4, &a), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_fill_u32(g, NULL, w, 4), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_create(&p, &t), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_null(t);
    p.generator = NULL;
    p.host_generator = g;
    ck_assert_status(recap_tracker_create(&p, &t), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_null(t);
    ck_assert_status(recap_generator_destroy(g), RECAP_ERR_INVALID_ARG);
    assert_not_live();
}
END_TEST

/* A tracker given a destroyed generator is refused without reading it (ASan checks). */
START_TEST(tracker_on_a_destroyed_generator_is_an_invalid_argument)
{
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_tracker_h t = NULL;
    recap_generator_h g;

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_destroy(g));
    p.generator = g;
    ck_assert_status(recap_tracker_create(&p, &t), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_null(t);
    p.generator = NULL;
    p.host_generator = g;
    ck_assert_status(recap_tracker_create(&p, &t), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_null(t);
}
END_TEST

START_TEST(tracker_destroyed_twice_is_an_invalid_argument)
{
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_tracker_h t;

    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_status(recap_tracker_destroy(t), RECAP_ERR_INVALID_ARG);
    assert_not_live();
}
END_TEST

START_TEST(forged_tracker_is_an_invalid_argument)
{
    uint64_t buf[FORGED_BYTES / sizeof(uint64_t)];
    recap_tracker_h t = forged(_i, buf);
    recap_fork_token_t tok = 0;
    recap_generator_h g = NULL;
    recap_states_h s = NULL;
    recap_snapshot_h snap;
    recap_parallel_ranks_t r = {.tp_size = 1, .ep_size = 1, .etp_size = 1, .gtp_remat_size = 1,
                                .egtp_remat_size = 1};

    ck_assert_status(recap_tracker_add(t, "a", 1), RECAP_ERR_INVALID_ARG);
    assert_not_live();
    ck_assert_status(recap_tracker_fork(t, "a", &tok), RECAP_ERR_INVALID_ARG);
    ck_assert_uint_eq(tok, 0);
    ck_assert_status(recap_tracker_unfork(t, 1), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_reset(t), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_generator(t, &g), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_null(g);
    ck_assert_status(recap_tracker_get_states(t, &s), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_null(s);
    ck_assert_status(recap_tracker_seed_parallel(t, 1234, &r), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_status(recap_snapshot_take(t, snap), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_snapshot_restore(t, snap), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_snapshot_destroy(snap));
    ck_assert_status(recap_tracker_destroy(t), RECAP_ERR_INVALID_ARG);
    assert_not_live();
}
END_TEST

START_TEST(snapshot_destroyed_twice_is_an_invalid_argument)
{
    recap_snapshot_h s;

    ck_assert_ok(recap_snapshot_create(&s));
    ck_assert_ok(recap_snapshot_destroy(s));
    ck_assert_status(recap_snapshot_destroy(s), RECAP_ERR_INVALID_ARG);
    assert_not_live();
}
END_TEST

START_TEST(forged_snapshot_is_an_invalid_argument)
{
    uint64_t buf[FORGED_BYTES / sizeof(uint64_t)];
    recap_snapshot_h s = forged(_i, buf);
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_tracker_h t;
    uint8_t blob[1024];
    size_t len = 0;

    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_status(recap_snapshot_take(t, s), RECAP_ERR_INVALID_ARG);
    assert_not_live();
    ck_assert_status(recap_snapshot_restore(t, s), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_snapshot_serialize(s, blob, sizeof(blob), &len), RECAP_ERR_INVALID_ARG);
    ck_assert_uint_eq(len, 0);
    ck_assert_status(recap_snapshot_deserialize(blob, sizeof(blob), s), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_snapshot_destroy(s), RECAP_ERR_INVALID_ARG);
    assert_not_live();
    ck_assert_ok(recap_tracker_destroy(t));
}
END_TEST

START_TEST(states_freed_twice_is_an_invalid_argument)
{
    recap_states_h s, c;

    ck_assert_ok(recap_states_create(&s));
    ck_assert_ok(recap_states_copy(s, &c));
    ck_assert_ok(recap_states_free(s));
    ck_assert_status(recap_states_free(s), RECAP_ERR_INVALID_ARG);
    assert_not_live();
    ck_assert_ok(recap_states_free(c));
    ck_assert_status(recap_states_free(c), RECAP_ERR_INVALID_ARG);
}
END_TEST

START_TEST(forged_states_is_an_invalid_argument)
{
    uint64_t buf[FORGED_BYTES / sizeof(uint64_t)];
    recap_states_h s = forged(_i, buf), c = NULL;
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_tracker_h t;
    uint8_t st[RECAP_STATE_BYTES] = {0};
    size_t n = 99;

    ck_assert_status(recap_states_count(s, &n), RECAP_ERR_INVALID_ARG);
    assert_not_live();
    ck_assert_uint_eq(n, 99);
    ck_assert_status(recap_states_lookup(s, "a", st), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_states_put(s, "a", st), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_states_copy(s, &c), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_null(c);
    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_status(recap_tracker_set_states(t, s), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_status(recap_states_free(s), RECAP_ERR_INVALID_ARG);
    assert_not_live();
}
END_TEST

START_TEST(plain_host_destroyed_twice_is_an_invalid_argument)
{
    recap_plain_engine_h h;

    ck_assert_ok(recap_plain_engine_create(RECAP_DEVICE_HOST, 0, &h));
    ck_assert_ok(recap_plain_engine_destroy(h));
    ck_assert_status(recap_plain_engine_destroy(h), RECAP_ERR_INVALID_ARG);
    assert_not_live();
}
END_TEST

START_TEST(forged_plain_host_is_an_invalid_argument)
{
    uint64_t buf[FORGED_BYTES / sizeof(uint64_t)];
    recap_plain_engine_h h = forged(_i, buf);
    recap_plain_stats_t stats;
    recap_buffer_t b = NULL;

    ck_assert_status(recap_plain_engine_stats(h, &stats), RECAP_ERR_INVALID_ARG);
    assert_not_live();
    ck_assert_status(recap_plain_engine_reset_peak(h), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_plain_buffer_create(h, 16, 0, &b), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_null(b);
    ck_assert_status(recap_plain_engine_destroy(h), RECAP_ERR_INVALID_ARG);
    assert_not_live();
}
END_TEST

/* Regions, managers and checkpoints over a plain engine. */
static void plain_params(recap_plain_engine_h *h, recap_region_params_t *p)
{
    const recap_engine_ops_t *ops;

    ck_assert_ok(recap_plain_engine_create(RECAP_DEVICE_HOST, 0, h));
    ck_assert_ok(recap_plain_engine_ops(&ops));
    memset(p, 0, sizeof(*p));
    p->ops = ops;
    p->host = *h;
}

static void ident_fn(const float *x, float *y, uint64_t n)
{
    uint64_t i;

    for (i = 0; i < n; i++)
        y[i] = x[i];
}

START_TEST(region_manager_checkpoint_destroyed_twice_are_invalid_arguments)
{
    static const recap_type_t t[] = {RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT, RECAP_TYPE_UINT64};
    recap_region_params_t p;
    recap_plain_engine_h h;
    recap_region_h r;
    recap_manager_h m;
    recap_checkpoint_h c;
    recap_signature_h sig;
    recap_value_t v[3];

    plain_params(&h, &p);
    ck_assert_ok(recap_region_create(&p, &r));
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_status(recap_region_destroy(r), RECAP_ERR_INVALID_ARG);
    assert_not_live();
    ck_assert_ok(recap_manager_create(p.ops, h, &m));
    ck_assert_ok(recap_manager_destroy(m));
    ck_assert_status(recap_manager_destroy(m), RECAP_ERR_INVALID_ARG);
    assert_not_live();
    /* A region given a destroyed manager is refused. */
    p.manager = m;
    r = NULL;
    ck_assert_status(recap_region_create(&p, &r), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_null(r);
    p.manager = NULL;
    ck_assert_ok(recap_signature_create(RECAP_TYPE_VOID, t, 3, &sig));
    ck_assert_ok(recap_plain_buffer_create(h, 16, 1, &v[0].buf));
    ck_assert_ok(recap_plain_buffer_create(h, 16, 1, &v[1].buf));
    v[2].u64 = 4;
    ck_assert_ok(recap_checkpoint_run(&p, sig, (recap_func_t)ident_fn, v, 3, &c));
    ck_assert_ok(recap_checkpoint_destroy(c));
    ck_assert_status(recap_checkpoint_destroy(c), RECAP_ERR_INVALID_ARG);
    assert_not_live();
    ck_assert_ok(recap_plain_buffer_destroy(v[0].buf));
    ck_assert_ok(recap_plain_buffer_destroy(v[1].buf));
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_ok(recap_plain_engine_destroy(h));
}
END_TEST

START_TEST(forged_region_manager_checkpoint_are_invalid_arguments)
{
    uint64_t buf[FORGED_BYTES / sizeof(uint64_t)];
    void *f = forged(_i, buf);
    recap_region_state_t state = RECAP_REGION_DONE;
    recap_buffer_t out[1] = {NULL};
    recap_value_t val;
    size_t n = 99;

    ck_assert_status(recap_region_state((recap_region_h)f, &state), RECAP_ERR_INVALID_ARG);
    assert_not_live();
    ck_assert_int_eq(state, RECAP_REGION_DONE);
    ck_assert_status(recap_region_record((recap_region_h)f, NULL, NULL, NULL, 0),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_region_release((recap_region_h)f, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_region_rebuild((recap_region_h)f), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_region_finish((recap_region_h)f), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_region_destroy((recap_region_h)f), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_manager_count((recap_manager_h)f, &n), RECAP_ERR_INVALID_ARG);
    ck_assert_uint_eq(n, 99);
    ck_assert_status(recap_manager_release((recap_manager_h)f, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_manager_destroy((recap_manager_h)f), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_checkpoint_backward((recap_checkpoint_h)f, out, 1),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_checkpoint_return_value((recap_checkpoint_h)f, &val),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_checkpoint_destroy((recap_checkpoint_h)f), RECAP_ERR_INVALID_ARG);
    assert_not_live();
}
END_TEST

/* A handle of one kind passed as another (through a cast) is not mistaken for it. */
START_TEST(handle_of_another_kind_is_an_invalid_argument)
{
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_tracker_h t;
    recap_snapshot_h s;
    uint64_t seed;

    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_snapshot_create(&s));
    ck_assert_status(recap_generator_seed((recap_generator_h)(void *)t, &seed),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_destroy((recap_generator_h)(void *)t), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_states_free((recap_states_h)(void *)s), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_destroy((recap_tracker_h)(void *)s), RECAP_ERR_INVALID_ARG);
    /* Both still live. */
    ck_assert_ok(recap_snapshot_take(t, s));
    ck_assert_ok(recap_snapshot_destroy(s));
    ck_assert_ok(recap_tracker_destroy(t));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("handles");
    TCase *tc = tcase_create("core");

    tu_rand_init();
    tcase_add_test(tc, generator_destroyed_twice_is_an_invalid_argument);
    tcase_add_loop_test(tc, forged_generator_is_an_invalid_argument, 0, 2);
    tcase_add_test(tc, tracker_destroyed_twice_is_an_invalid_argument);
    tcase_add_test(tc, tracker_on_a_destroyed_generator_is_an_invalid_argument);
    tcase_add_loop_test(tc, forged_tracker_is_an_invalid_argument, 0, 2);
    tcase_add_test(tc, snapshot_destroyed_twice_is_an_invalid_argument);
    tcase_add_loop_test(tc, forged_snapshot_is_an_invalid_argument, 0, 2);
    tcase_add_test(tc, states_freed_twice_is_an_invalid_argument);
    tcase_add_loop_test(tc, forged_states_is_an_invalid_argument, 0, 2);
    tcase_add_test(tc, plain_host_destroyed_twice_is_an_invalid_argument);
    tcase_add_loop_test(tc, forged_plain_host_is_an_invalid_argument, 0, 2);
    tcase_add_test(tc, region_manager_checkpoint_destroyed_twice_are_invalid_arguments);
    tcase_add_loop_test(tc, forged_region_manager_checkpoint_are_invalid_arguments, 0, 2);
    tcase_add_test(tc, handle_of_another_kind_is_an_invalid_argument);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
