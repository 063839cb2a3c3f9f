/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Destroy under use: an object another live object points to refuses to be destroyed
 * (RECAP_ERR_STATE, nothing changed), as trackers always did: a plain engine while regions,
 * checkpoints or managers made with it live, a tracker while regions or checkpoints restore it,
 * a generator while a tracker drives it. A region and a manager may go at any time (a manager
 * lets its regions go). Objects in random states are destroyed in random orders; after every
 * successful destroy the survivors are used again, and every object goes in the end. The
 * sanitizer builds see any use of a freed one.
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define NFLOATS 8

enum { O_ENGINE, O_BUFFERS, O_GENERATOR, O_TRACKER, O_MANAGER, O_REGION, O_CHECKPOINT, NOBJ };

static const char *const names[NOBJ] = {"plain engine", "buffers", "generator", "tracker",
                                        "manager", "region", "checkpoint"};

typedef struct {
    int live[NOBJ];
    recap_plain_engine_h engine;
    const recap_engine_ops_t *ops;
    recap_generator_h gen;
    recap_tracker_h tracker;
    recap_manager_h mgr;
    recap_region_h region;
    recap_checkpoint_h ckpt;
    recap_signature_h sig;
    recap_buffer_t x, y, y2, trigger;
} world_t;

static void twice(const float *x, float *y, uint64_t n)
{
    uint64_t i;

    for (i = 0; i < n; i++)
        y[i] = 2 * x[i];
}

/* Whether a live object points to object o (so destroying o must be refused). The buffers are
 * the test's: it keeps them while a region or checkpoint holds their handles (the contract of
 * recap_region_record), and the engine refuses while they live. */
static int used(const world_t *w, int o)
{
    switch (o) {
    case O_ENGINE:
        return w->live[O_MANAGER] || w->live[O_REGION] || w->live[O_CHECKPOINT] ||
               w->live[O_BUFFERS];
    case O_GENERATOR:
        return w->live[O_TRACKER];
    case O_TRACKER:
        return w->live[O_REGION] || w->live[O_CHECKPOINT];
    case O_BUFFERS:
        return w->live[O_REGION] || w->live[O_CHECKPOINT];
    default:
        return 0;
    }
}

static recap_status_t destroy(world_t *w, int o)
{
    recap_status_t st;

    switch (o) {
    case O_ENGINE:
        return recap_plain_engine_destroy(w->engine);
    case O_BUFFERS:
        ck_assert_ok(recap_plain_buffer_destroy(w->x));
        ck_assert_ok(recap_plain_buffer_destroy(w->y));
        ck_assert_ok(recap_plain_buffer_destroy(w->y2));
        ck_assert_ok(recap_plain_buffer_destroy(w->trigger));
        return RECAP_OK;
    case O_GENERATOR:
        return recap_generator_destroy(w->gen);
    case O_TRACKER:
        return recap_tracker_destroy(w->tracker);
    case O_MANAGER:
        return recap_manager_destroy(w->mgr);
    case O_REGION:
        return recap_region_destroy(w->region);
    case O_CHECKPOINT:
        st = recap_checkpoint_destroy(w->ckpt);
        return st;
    }
    return RECAP_ERR_INVALID_ARG;
}

/* The survivors at work: each call must find its pointers valid. */
static void use_survivors(world_t *w)
{
    recap_region_state_t rs;
    recap_plain_stats_t ps;
    recap_fork_token_t tok;
    size_t n;
    uint8_t st[RECAP_STATE_BYTES];

    if (w->live[O_ENGINE])
        ck_assert_ok(recap_plain_engine_stats(w->engine, &ps));
    if (w->live[O_GENERATOR])
        ck_assert_ok(recap_generator_get_state(w->gen, st));
    if (w->live[O_TRACKER]) {
        ck_assert_ok(recap_tracker_fork(w->tracker, RECAP_RNG_MODEL_PARALLEL, &tok));
        ck_assert_ok(recap_tracker_unfork(w->tracker, tok));
    }
    if (w->live[O_MANAGER])
        ck_assert_ok(recap_manager_count(w->mgr, &n));
    if (w->live[O_REGION])
        ck_assert_ok(recap_region_state(w->region, &rs));
}

/* Objects in random states: the region NEW, RECORDED, RELEASED (by its manager, a trigger
 * armed) or REBUILT; the checkpoint run or not. */
static void build(world_t *w)
{
    static const recap_type_t types[] = {RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT,
                                         RECAP_TYPE_UINT64};
    recap_tracker_params_t tp = {.device = RECAP_DEVICE_HOST};
    recap_region_params_t rp = {0};
    recap_value_t v[3];
    int steps = (int)tu_rand_below(4), i;

    memset(w, 0, sizeof(*w));
    ck_assert_ok(recap_plain_engine_create(RECAP_DEVICE_HOST, 0, &w->engine));
    ck_assert_ok(recap_plain_engine_ops(&w->ops));
    ck_assert_ok(recap_plain_buffer_create(w->engine, NFLOATS * 4, 1, &w->x));
    ck_assert_ok(recap_plain_buffer_create(w->engine, NFLOATS * 4, 1, &w->y));
    ck_assert_ok(recap_plain_buffer_create(w->engine, NFLOATS * 4, 1, &w->y2));
    ck_assert_ok(recap_plain_buffer_create(w->engine, 4, 1, &w->trigger));
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &w->gen));
    tp.generator = w->gen;
    tp.flags = tu_rand_below(2) ? RECAP_TRACKER_GRAPH_SAFE : 0;
    ck_assert_ok(recap_tracker_create(&tp, &w->tracker));
    ck_assert_ok(recap_tracker_add(w->tracker, RECAP_RNG_MODEL_PARALLEL, 11));
    ck_assert_ok(recap_manager_create(w->ops, w->engine, &w->mgr));
    rp.ops = w->ops;
    rp.host = w->engine;
    rp.tracker = w->tracker;
    rp.manager = w->mgr;
    ck_assert_ok(recap_region_create(&rp, &w->region));
    ck_assert_ok(recap_signature_create(RECAP_TYPE_VOID, types, 3, &w->sig));
    v[0].buf = w->x;
    v[1].buf = w->y;
    v[2].u64 = NFLOATS;
    if (steps >= 1)
        ck_assert_ok(recap_region_record(w->region, w->sig, (recap_func_t)twice, v, 3));
    if (steps >= 2)
        ck_assert_ok(recap_manager_release(w->mgr, w->trigger));
    if (steps >= 3)
        ck_assert_ok(recap_plain_buffer_fire(w->trigger));
    rp.manager = NULL;
    v[1].buf = w->y2;
    ck_assert_ok(recap_checkpoint_run(&rp, w->sig, (recap_func_t)twice, v, 3, &w->ckpt));
    ck_assert_ok(recap_signature_destroy(w->sig)); /* the region and checkpoint keep theirs */
    for (i = 0; i < NOBJ; i++)
        w->live[i] = 1;
}

START_TEST(objects_in_use_refuse_destroy_in_any_order)
{
    int round;

    for (round = 0; round < 200; round++) {
        world_t w;
        int left = NOBJ, attempts = 0;

        build(&w);
        while (left > 0) {
            int o = (int)tu_rand_below(NOBJ);
            recap_status_t st;

            if (!w.live[o])
                continue;
            ck_assert_int_lt(++attempts, 10000);
            if (used(&w, o)) {
                if (o == O_BUFFERS)
                    continue; /* the test's own contract, not recap's to refuse */
                st = destroy(&w, o);
                ck_assert_msg(st == RECAP_ERR_STATE, "round %d: the %s was destroyed (%s) while "
                              "in use", round, names[o], recap_strerror(st));
            } else {
                ck_assert_ok(destroy(&w, o));
                w.live[o] = 0;
                left--;
            }
            use_survivors(&w);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("destroy_in_use");
    TCase *tc = tcase_create("destroy");

    tcase_add_test(tc, objects_in_use_refuse_destroy_in_any_order);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
