/* SPDX-License-Identifier: Apache-2.0 */
/* The manager: chains of regions released together and rebuilt in forward order by one trigger,
 * giving what the same layers give without checkpointing; and the objects it refuses. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "test_region_util.h"

#define MAXL 5

/* The order the layers ran in, as layer numbers (passed as the function's `b`). */
static int order[4 * MAXL], norder;

static void layer_fn(const float *x, float *y, uint64_t n, float a, float b, recap_tracker_h t)
{
    if (norder < 4 * MAXL)
        order[norder++] = (int)b;
    rr_dropout_fn(x, y, n, a, b, t);
}

typedef struct {
    rr_rig_t rig;
    recap_signature_h sig;
    size_t n;
    int layers;
    recap_buffer_t act[MAXL + 1]; /* act[0] the input, act[i] layer i's output */
    float *ref[MAXL + 1];
    recap_region_h r[MAXL];
} chain_t;

static void chain_init(chain_t *c, int layers, int64_t seed, uint32_t tracker_flags)
{
    int i;

    memset(c, 0, sizeof(*c));
    rr_rig_init(&c->rig, tracker_flags, seed);
    c->sig = rr_dropout_sig();
    c->n = 1 + tu_rand_below(10000);
    c->layers = layers;
    for (i = 0; i <= layers; i++)
        c->act[i] = rr_fbuf(&c->rig, c->n, 1, i == 0);
}

static void layer_args(chain_t *c, int i, recap_value_t *v)
{
    rr_dropout_args(v, c->act[i], c->act[i + 1], c->n, 1.0f + 0.25f * (float)i, (float)(i + 1),
                    c->rig.tracker);
}

static void chain_free(chain_t *c)
{
    int i;

    for (i = 0; i <= c->layers; i++) {
        ck_assert_ok(recap_plain_buffer_destroy(c->act[i]));
        free(c->ref[i]);
    }
    ck_assert_ok(recap_signature_destroy(c->sig));
    rr_rig_free(&c->rig);
}

/* The same layers called directly, from the same RNG state: the reference outputs. */
static void run_plain(chain_t *c)
{
    recap_snapshot_h snap;
    recap_value_t v[6];
    int i;

    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_snapshot_take(c->rig.tracker, snap));
    for (i = 0; i < c->layers; i++) {
        layer_args(c, i, v);
        layer_fn(rr_data(v[0].buf), rr_data(v[1].buf), c->n, v[3].f32, v[4].f32, c->rig.tracker);
        c->ref[i + 1] = rr_copy(c->act[i + 1], c->n);
    }
    ck_assert_ok(recap_snapshot_restore(c->rig.tracker, snap));
    ck_assert_ok(recap_snapshot_destroy(snap));
}

static void record_all(chain_t *c, recap_manager_h m)
{
    recap_value_t v[6];
    int i;

    c->rig.params.manager = m;
    for (i = 0; i < c->layers; i++) {
        layer_args(c, i, v);
        ck_assert_ok(recap_region_create(&c->rig.params, &c->r[i]));
        ck_assert_ok(recap_region_record(c->r[i], c->sig, (recap_func_t)layer_fn, v, 6));
    }
}

START_TEST(a_chain_rebuilds_in_forward_order_and_equals_no_checkpointing)
{
    chain_t c;
    recap_manager_h m;
    recap_buffer_t loss;
    uint32_t expect[RR_DRAW_WORDS(4)], got[RR_DRAW_WORDS(4)];
    recap_snapshot_h mid;
    recap_region_state_t s;
    size_t count;
    int i;

    chain_init(&c, 3, 1 + (int64_t)tu_rand_below(1u << 30), _i ? RECAP_TRACKER_GRAPH_SAFE : 0);
    run_plain(&c);
    ck_assert_ok(recap_manager_create(c.rig.ops, c.rig.engine, &m));
    norder = 0;
    record_all(&c, m);
    ck_assert_ok(recap_manager_count(m, &count));
    ck_assert_uint_eq(count, 3);
    for (i = 1; i <= 3; i++)
        ck_assert_mem_eq(rr_data(c.act[i]), c.ref[i], c.n * sizeof(float));
    loss = rr_fbuf(&c.rig, 1, 1, 0);
    ck_assert_ok(recap_manager_release(m, loss));
    ck_assert_uint_eq(rr_stats(&c.rig).triggers_armed, 1);
    for (i = 1; i <= 3; i++)
        ck_assert_ptr_null(rr_data(c.act[i]));
    ck_assert_ptr_nonnull(rr_data(c.act[0]));
    rr_draw_all(&c.rig, got, 4); /* the step draws on before the backward */
    ck_assert_ok(recap_snapshot_create(&mid));
    ck_assert_ok(recap_snapshot_take(c.rig.tracker, mid));
    ck_assert_ok(recap_plain_buffer_fire(loss));
    ck_assert_ok(recap_plain_buffer_fire(loss)); /* once only */
    ck_assert_int_eq(norder, 6);
    for (i = 0; i < 6; i++)
        ck_assert_int_eq(order[i], i % 3 + 1); /* forward, then the rebuild in forward order */
    for (i = 1; i <= 3; i++) {
        ck_assert_mem_eq(rr_data(c.act[i]), c.ref[i], c.n * sizeof(float));
        ck_assert_ok(recap_region_state(c.r[i - 1], &s));
        ck_assert_int_eq(s, RECAP_REGION_REBUILT);
    }
    ck_assert_uint_eq(rr_stats(&c.rig).loads, 3);
    rr_draw_all(&c.rig, got, 4);
    ck_assert_ok(recap_snapshot_restore(c.rig.tracker, mid));
    rr_draw_all(&c.rig, expect, 4);
    ck_assert_mem_eq(got, expect, sizeof(got));
    ck_assert_ok(recap_manager_count(m, &count));
    ck_assert_uint_eq(count, 0); /* ready for the next step */
    for (i = 0; i < 3; i++) {
        ck_assert_ok(recap_region_finish(c.r[i]));
        ck_assert_ok(recap_region_destroy(c.r[i]));
    }
    ck_assert_ok(recap_snapshot_destroy(mid));
    ck_assert_ok(recap_manager_destroy(m));
    ck_assert_ok(recap_plain_buffer_destroy(loss));
    chain_free(&c);
}
END_TEST

/* A chain of regions each with its own trigger, fired out of order, cannot rebuild a region
 * whose input is still released: the manager's single trigger is what makes chains work. */
START_TEST(separate_triggers_fired_backwards_fail_where_the_manager_succeeds)
{
    chain_t c;
    int i;

    chain_init(&c, 2, 77, 0);
    record_all(&c, NULL);
    for (i = 0; i < 2; i++)
        ck_assert_ok(recap_region_release(c.r[i], NULL));
    ck_assert_status(recap_region_rebuild(c.r[1]), RECAP_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "no storage"));
    ck_assert_ok(recap_region_rebuild(c.r[0]));
    ck_assert_ok(recap_region_rebuild(c.r[1]));
    for (i = 0; i < 2; i++)
        ck_assert_ok(recap_region_destroy(c.r[i]));
    chain_free(&c);
}
END_TEST

START_TEST(wrong_objects_are_refused)
{
    chain_t c;
    recap_manager_h m, other;
    recap_plain_engine_h host2;
    recap_region_params_t p2;
    recap_region_h lone, foreign;
    size_t count;
    int i;

    chain_init(&c, 2, 78, 0);
    ck_assert_ok(recap_manager_create(c.rig.ops, c.rig.engine, &m));
    ck_assert_ok(recap_manager_create(c.rig.ops, c.rig.engine, &other));
    ck_assert_status(recap_manager_create(NULL, c.rig.engine, &m), RECAP_ERR_INVALID_ARG);
    record_all(&c, m);
    ck_assert_status(recap_manager_add(m, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_manager_add(NULL, c.r[0]), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_manager_add(m, c.r[0]), RECAP_ERR_EXISTS);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "already added"));
    ck_assert_status(recap_manager_add(other, c.r[0]), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "another manager"));
    /* A region of another engine. */
    ck_assert_ok(recap_plain_engine_create(RECAP_DEVICE_HOST, 0, &host2));
    p2 = c.rig.params;
    p2.host = host2;
    p2.manager = NULL;
    ck_assert_ok(recap_region_create(&p2, &foreign));
    ck_assert_status(recap_manager_add(m, foreign), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "another engine"));
    p2.manager = m;
    ck_assert_status(recap_region_create(&p2, &lone), RECAP_ERR_INVALID_ARG);
    /* Managed regions go through the manager. */
    ck_assert_status(recap_region_release(c.r[0], NULL), RECAP_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "manager"));
    ck_assert_status(recap_manager_rebuild(m), RECAP_ERR_STATE);
    /* A region not yet recorded makes the release refuse, releasing nothing. */
    c.rig.params.manager = m;
    ck_assert_ok(recap_region_create(&c.rig.params, &lone));
    ck_assert_status(recap_manager_release(m, NULL), RECAP_ERR_STATE);
    ck_assert_ptr_nonnull(rr_data(c.act[1]));
    ck_assert_ok(recap_region_destroy(lone)); /* leaves the manager */
    ck_assert_ok(recap_manager_count(m, &count));
    ck_assert_uint_eq(count, 2);
    ck_assert_ok(recap_manager_release(m, NULL));
    ck_assert_status(recap_manager_release(m, NULL), RECAP_ERR_STATE);
    ck_assert_status(recap_region_rebuild(c.r[0]), RECAP_ERR_STATE);
    c.rig.params.manager = NULL;
    ck_assert_ok(recap_region_create(&c.rig.params, &lone));
    ck_assert_status(recap_manager_add(m, lone), RECAP_ERR_STATE); /* awaits its rebuild */
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "awaits"));
    ck_assert_ok(recap_manager_rebuild(m));
    ck_assert_status(recap_manager_add(other, c.r[0]), RECAP_ERR_STATE); /* already rebuilt */
    ck_assert_ok(recap_manager_add(m, lone)); /* the next step's */
    ck_assert_ok(recap_region_destroy(lone));
    ck_assert_ok(recap_region_destroy(foreign));
    ck_assert_ok(recap_plain_engine_destroy(host2));
    for (i = 0; i < 2; i++)
        ck_assert_ok(recap_region_destroy(c.r[i]));
    ck_assert_ok(recap_manager_destroy(m));
    ck_assert_ok(recap_manager_destroy(other));
    ck_assert_status(recap_manager_destroy(NULL), RECAP_ERR_INVALID_ARG);
    chain_free(&c);
}
END_TEST

/* Training steps reuse one manager; a trigger of the previous step must not rebuild the next
 * step's regions. */
START_TEST(a_manager_serves_step_after_step)
{
    chain_t c;
    recap_manager_h m;
    recap_buffer_t loss[2];
    int step, i;

    chain_init(&c, 2, 79, 0);
    ck_assert_ok(recap_manager_create(c.rig.ops, c.rig.engine, &m));
    run_plain(&c);
    for (step = 0; step < 2; step++) {
        loss[step] = rr_fbuf(&c.rig, 1, 1, 0);
        record_all(&c, m);
        ck_assert_ok(recap_manager_release(m, loss[step]));
        if (step == 1) {
            ck_assert_ok(recap_plain_buffer_fire(loss[0]));
            ck_assert_ptr_null(rr_data(c.act[2]));
        }
        ck_assert_ok(recap_plain_buffer_fire(loss[step]));
        for (i = 1; i <= 2; i++)
            ck_assert_ptr_nonnull(rr_data(c.act[i]));
        for (i = 0; i < 2; i++)
            ck_assert_ok(recap_region_destroy(c.r[i]));
    }
    ck_assert_ok(recap_manager_destroy(m));
    for (step = 0; step < 2; step++)
        ck_assert_ok(recap_plain_buffer_destroy(loss[step]));
    chain_free(&c);
}
END_TEST

/* Destroying the manager first leaves its regions usable on their own. */
START_TEST(regions_outlive_their_manager)
{
    chain_t c;
    recap_manager_h m;
    int i;

    chain_init(&c, 2, 80, 0);
    ck_assert_ok(recap_manager_create(c.rig.ops, c.rig.engine, &m));
    record_all(&c, m);
    ck_assert_ok(recap_manager_destroy(m));
    for (i = 0; i < 2; i++)
        ck_assert_ok(recap_region_release(c.r[i], NULL));
    for (i = 0; i < 2; i++)
        ck_assert_ok(recap_region_rebuild(c.r[i]));
    for (i = 0; i < 2; i++)
        ck_assert_ok(recap_region_destroy(c.r[i]));
    chain_free(&c);
}
END_TEST

/* A trigger buffer or an input of another plain engine is refused (found by the fuzzer: the
 * trigger was armed in the buffer's engine and removed from the manager's, a use after free when
 * the buffer went), and the manager and its regions stay usable. */
START_TEST(buffers_of_another_plain_engine_are_refused)
{
    chain_t c;
    recap_plain_engine_h other;
    recap_buffer_t foreign, loss;
    recap_region_h r;
    recap_manager_h m;
    recap_value_t v[6];
    int i;

    chain_init(&c, 2, 81, 0);
    ck_assert_ok(recap_plain_engine_create(RECAP_DEVICE_HOST, 0, &other));
    ck_assert_ok(recap_plain_buffer_create(other, c.n * sizeof(float), 1, &foreign));
    ck_assert_ok(recap_manager_create(c.rig.ops, c.rig.engine, &m));
    record_all(&c, m);
    ck_assert_status(recap_manager_release(m, foreign), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "belongs to plain engine"));
    ck_assert_ok(recap_region_create(&c.rig.params, &r)); /* (registers with m) */
    rr_dropout_args(v, foreign, c.act[1], c.n, 1.0f, 0.0f, c.rig.tracker);
    ck_assert_status(recap_region_record(r, c.sig, (recap_func_t)layer_fn, v, 6),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_ok(recap_plain_buffer_destroy(foreign));
    loss = rr_fbuf(&c.rig, 1, 1, 0);
    ck_assert_ok(recap_manager_release(m, loss));
    ck_assert_ok(recap_plain_buffer_fire(loss));
    for (i = 1; i <= 2; i++)
        ck_assert_ptr_nonnull(rr_data(c.act[i]));
    ck_assert_ok(recap_manager_destroy(m));
    for (i = 0; i < 2; i++)
        ck_assert_ok(recap_region_destroy(c.r[i]));
    ck_assert_ok(recap_plain_buffer_destroy(loss));
    ck_assert_ok(recap_plain_engine_destroy(other));
    chain_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("region_manager");
    TCase *tc = tcase_create("region_manager");

    tcase_add_loop_test(tc, a_chain_rebuilds_in_forward_order_and_equals_no_checkpointing, 0, 2);
    tcase_add_test(tc, separate_triggers_fired_backwards_fail_where_the_manager_succeeds);
    tcase_add_test(tc, wrong_objects_are_refused);
    tcase_add_test(tc, a_manager_serves_step_after_step);
    tcase_add_test(tc, regions_outlive_their_manager);
    tcase_add_test(tc, buffers_of_another_plain_engine_are_refused);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
