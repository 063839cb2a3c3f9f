/* SPDX-License-Identifier: Apache-2.0 */
/* Per-rank seeding (Megatron's model_parallel_cuda_manual_seed). */
#include "config.h"

#include <stddef.h>
#include <string.h>

#include "testutil.h"

#define NWORDS 64

static recap_tracker_h new_tracker(uint32_t flags)
{
    recap_tracker_params_t p = {.flags = flags, .device = RECAP_DEVICE_HOST};
    recap_tracker_h t;

    ck_assert_ok(recap_tracker_create(&p, &t));
    return t;
}

static recap_parallel_ranks_t single(void)
{
    recap_parallel_ranks_t r = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1};

    return r;
}

static void encode(uint64_t seed, uint64_t offset, uint8_t st[RECAP_STATE_BYTES])
{
    int i;

    for (i = 0; i < 8; i++) {
        st[i] = (uint8_t)(seed >> (8 * i));
        st[8 + i] = (uint8_t)(offset >> (8 * i));
    }
}

/* The tracker's states are exactly `names` with seeds `seeds`, at offset 0, in this order. */
static void assert_seeded(recap_tracker_h t, const char *const *names, const uint64_t *seeds,
                          size_t n)
{
    uint8_t st[RECAP_STATE_BYTES], want[RECAP_STATE_BYTES];
    recap_states_h s;
    const char *name;
    size_t i, count;

    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_ok(recap_states_count(s, &count));
    ck_assert_uint_eq(count, n);
    for (i = 0; i < n; i++) {
        ck_assert_ok(recap_states_name(s, i, &name));
        ck_assert_str_eq(name, names[i]);
        ck_assert_ok(recap_states_lookup(s, names[i], st));
        encode(seeds[i], 0, want);
        ck_assert_msg(memcmp(st, want, sizeof(st)) == 0, "%s: not seeded with %llu", names[i],
                      (unsigned long long)seeds[i]);
    }
    ck_assert_ok(recap_states_free(s));
}

static const char *const base_names[] = {RECAP_RNG_DATA_PARALLEL, RECAP_RNG_MODEL_PARALLEL,
                                         RECAP_RNG_EXPERT_PARALLEL, RECAP_RNG_GTP_REMAT,
                                         RECAP_RNG_EGTP_REMAT};

START_TEST(seeds_follow_megatron_over_a_rank_grid)
{
    recap_tracker_h t = new_tracker(_i ? RECAP_TRACKER_GRAPH_SAFE : 0);
    recap_parallel_ranks_t r = single();
    int64_t seed = 1 + (int64_t)tu_rand_below(1ULL << 40);
    uint8_t st[RECAP_STATE_BYTES], want[RECAP_STATE_BYTES];
    recap_generator_h g;
    uint64_t seeds[3];
    int init = 0;

    r.tp_size = 4;
    r.ep_size = 3;
    r.etp_size = 2;
    ck_assert_ok(recap_tracker_generator(t, &g));
    for (r.tp_rank = 0; r.tp_rank < r.tp_size; r.tp_rank++)
        for (r.ep_rank = 0; r.ep_rank < r.ep_size; r.ep_rank++)
            for (r.etp_rank = 0; r.etp_rank < r.etp_size; r.etp_rank++) {
                ck_assert_ok(recap_generator_manual_seed(g, tu_rand()));
                ck_assert_ok(recap_tracker_seed_parallel(t, seed, &r));
                seeds[0] = (uint64_t)seed;
                seeds[1] = (uint64_t)seed + 2718 + (uint64_t)r.tp_rank;
                seeds[2] = (uint64_t)seed + 1024 + 100 * (uint64_t)r.ep_rank +
                           (uint64_t)r.etp_rank;
                assert_seeded(t, base_names, seeds, 3);
                ck_assert_ok(recap_generator_get_state(g, st));
                encode((uint64_t)seed, 0, want);
                ck_assert_mem_eq(st, want, sizeof(st));
                ck_assert_ok(recap_tracker_is_initialized(t, &init));
                ck_assert_int_eq(init, 1);
            }
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(remat_states_appear_only_when_their_size_exceeds_one)
{
    recap_tracker_h t = new_tracker(0);
    recap_parallel_ranks_t r = single();
    int64_t seed = 1 + (int64_t)tu_rand_below(1ULL << 40);
    const char *names_egtp[] = {RECAP_RNG_DATA_PARALLEL, RECAP_RNG_MODEL_PARALLEL,
                                RECAP_RNG_EXPERT_PARALLEL, RECAP_RNG_EGTP_REMAT};
    uint64_t tp_seed, ep_seed, seeds[5];

    r.tp_size = 8;
    r.tp_rank = (int)tu_rand_below(8);
    r.ep_size = 4;
    r.ep_rank = (int)tu_rand_below(4);
    r.etp_size = 2;
    r.etp_rank = (int)tu_rand_below(2);
    tp_seed = (uint64_t)seed + 2718 + (uint64_t)r.tp_rank;
    ep_seed = (uint64_t)seed + 1024 + 100 * (uint64_t)r.ep_rank + (uint64_t)r.etp_rank;
    seeds[0] = (uint64_t)seed;
    seeds[1] = tp_seed;
    seeds[2] = ep_seed;

    ck_assert_ok(recap_tracker_seed_parallel(t, seed, &r));
    assert_seeded(t, base_names, seeds, 3);

    r.gtp_remat_size = 4;
    r.gtp_remat_rank = (int)tu_rand_below(4);
    r.egtp_remat_size = 2;
    r.egtp_remat_rank = (int)tu_rand_below(2);
    seeds[3] = tp_seed + 65536 * (1 + (uint64_t)r.gtp_remat_rank);
    seeds[4] = ep_seed + 32768 + 65536 * (1 + (uint64_t)r.egtp_remat_rank);
    ck_assert_ok(recap_tracker_seed_parallel(t, seed, &r));
    assert_seeded(t, base_names, seeds, 5);

    r.gtp_remat_size = 1;
    r.gtp_remat_rank = 0;
    seeds[3] = seeds[4];
    ck_assert_ok(recap_tracker_seed_parallel(t, seed, &r));
    assert_seeded(t, names_egtp, seeds, 4);
    recap_tracker_destroy(t);
}
END_TEST

/* Two trackers stand for two ranks; the data-parallel rank is not an input of the seeds. */
START_TEST(tp_ranks_draw_differently_and_dp_ranks_alike)
{
    recap_tracker_h tp0 = new_tracker(0), tp1 = new_tracker(0), dp1 = new_tracker(0);
    recap_parallel_ranks_t r0 = single(), r1;
    int64_t seed = 1 + (int64_t)tu_rand_below(1ULL << 40);
    uint32_t a[NWORDS], b[NWORDS], c[NWORDS];

    r0.tp_size = 2;
    r1 = r0;
    r1.tp_rank = 1;
    ck_assert_ok(recap_tracker_seed_parallel(tp0, seed, &r0));
    ck_assert_ok(recap_tracker_seed_parallel(tp1, seed, &r1));
    ck_assert_ok(recap_tracker_seed_parallel(dp1, seed, &r0));
    tu_fork_draw(tp0, RECAP_RNG_MODEL_PARALLEL, a, NWORDS);
    tu_fork_draw(tp1, RECAP_RNG_MODEL_PARALLEL, b, NWORDS);
    tu_fork_draw(dp1, RECAP_RNG_MODEL_PARALLEL, c, NWORDS);
    ck_assert_mem_ne(a, b, sizeof(a));
    ck_assert_mem_eq(a, c, sizeof(a));
    /* Data-parallel and expert states agree across tensor-parallel ranks. */
    tu_fork_draw(tp0, RECAP_RNG_DATA_PARALLEL, a, NWORDS);
    tu_fork_draw(tp1, RECAP_RNG_DATA_PARALLEL, b, NWORDS);
    ck_assert_mem_eq(a, b, sizeof(a));
    tu_fork_draw(tp0, RECAP_RNG_EXPERT_PARALLEL, a, NWORDS);
    tu_fork_draw(tp1, RECAP_RNG_EXPERT_PARALLEL, b, NWORDS);
    ck_assert_mem_eq(a, b, sizeof(a));
    recap_tracker_destroy(tp0);
    recap_tracker_destroy(tp1);
    recap_tracker_destroy(dp1);
}
END_TEST

/* A bad call must leave the tracker exactly as it was: states, seeds and generator. */
static void assert_rejected(recap_tracker_h t, int64_t seed, const recap_parallel_ranks_t *r,
                            const char *why)
{
    uint8_t st[RECAP_STATE_BYTES], want[RECAP_STATE_BYTES];
    recap_generator_h g;
    recap_states_h s;
    size_t n;

    ck_assert_ok(recap_tracker_generator(t, &g));
    ck_assert_status(recap_tracker_seed_parallel(t, seed, r), RECAP_ERR_INVALID_ARG);
    ck_assert_msg(strstr(recap_last_error(), why) != NULL, "message \"%s\" lacks \"%s\"",
                  recap_last_error(), why);
    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_ok(recap_states_count(s, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_ok(recap_states_lookup(s, "mine", st));
    encode(77, 0, want);
    ck_assert_mem_eq(st, want, sizeof(st));
    ck_assert_ok(recap_states_free(s));
    ck_assert_ok(recap_generator_get_state(g, st));
    encode(55, 0, want);
    ck_assert_mem_eq(st, want, sizeof(st));
}

#define RANK_FIELD(f) offsetof(recap_parallel_ranks_t, f)
static const size_t rank_field[5][2] = {
    {RANK_FIELD(tp_rank), RANK_FIELD(tp_size)},
    {RANK_FIELD(ep_rank), RANK_FIELD(ep_size)},
    {RANK_FIELD(etp_rank), RANK_FIELD(etp_size)},
    {RANK_FIELD(gtp_remat_rank), RANK_FIELD(gtp_remat_size)},
    {RANK_FIELD(egtp_remat_rank), RANK_FIELD(egtp_remat_size)},
};

static int *rank_field_of(recap_parallel_ranks_t *r, int k, int which)
{
    return (int *)((char *)r + rank_field[k][which]);
}

START_TEST(bad_seeding_arguments_leave_the_tracker_untouched)
{
    recap_tracker_h t = new_tracker(0);
    recap_parallel_ranks_t ok = single(), r;
    recap_generator_h g;
    int k;

    ck_assert_ok(recap_tracker_add(t, "mine", 77));
    ck_assert_ok(recap_tracker_generator(t, &g));
    ck_assert_ok(recap_generator_manual_seed(g, 55));
    assert_rejected(t, 0, &ok, "> 0");
    assert_rejected(t, -1 - (int64_t)tu_rand_below(1000), &ok, "> 0");
    ok.tp_size = ok.ep_size = ok.etp_size = ok.gtp_remat_size = ok.egtp_remat_size = 2;
    for (k = 0; k < 5; k++) {
        r = ok;
        *rank_field_of(&r, k, 1) = 0;
        assert_rejected(t, 1, &r, "size 0");
        r = ok;
        *rank_field_of(&r, k, 0) = -1;
        assert_rejected(t, 1, &r, "rank -1");
        *rank_field_of(&r, k, 0) = 2;
        assert_rejected(t, 1, &r, "rank 2");
    }
    /* Ranks whose derived seeds collide (tp 0 vs ep 16, etp 94) fail before any add. */
    r = single();
    r.ep_size = 17;
    r.ep_rank = 16;
    r.etp_size = 95;
    r.etp_rank = 94;
    assert_rejected(t, 1000, &r, "same seed");
    ck_assert_status(recap_tracker_seed_parallel(NULL, 1, &ok), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_seed_parallel(t, 1, NULL), RECAP_ERR_INVALID_ARG);
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(seeding_replaces_earlier_states_and_seeds)
{
    recap_tracker_h t = new_tracker(0);
    recap_parallel_ranks_t r = single();
    uint8_t st[RECAP_STATE_BYTES];
    recap_states_h s;

    ck_assert_ok(recap_tracker_add(t, "old", 9));
    ck_assert_ok(recap_tracker_seed_parallel(t, 1234, &r));
    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_status(recap_states_lookup(s, "old", st), RECAP_ERR_NOT_FOUND);
    ck_assert_ok(recap_states_free(s));
    ck_assert_ok(recap_tracker_add(t, "old", 9)); /* seed 9 was forgotten */
    ck_assert_status(recap_tracker_add(t, "x", 1234 + 2718), RECAP_ERR_DUPLICATE_SEED);
    ck_assert_status(recap_tracker_add(t, "y", 1234), RECAP_ERR_DUPLICATE_SEED);
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(seeding_an_inference_tracker_only_seeds_its_generator)
{
    recap_tracker_h t = new_tracker(RECAP_TRACKER_INFERENCE);
    recap_parallel_ranks_t r = single();
    uint8_t st[RECAP_STATE_BYTES], want[RECAP_STATE_BYTES];
    recap_generator_h g;
    recap_states_h s;
    size_t n = 1;
    int init = 1;

    ck_assert_ok(recap_tracker_seed_parallel(t, 31337, &r));
    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_ok(recap_states_count(s, &n));
    ck_assert_uint_eq(n, 0);
    ck_assert_ok(recap_states_free(s));
    ck_assert_ok(recap_tracker_is_initialized(t, &init));
    ck_assert_int_eq(init, 0);
    ck_assert_ok(recap_tracker_generator(t, &g));
    ck_assert_ok(recap_generator_get_state(g, st));
    encode(31337, 0, want);
    ck_assert_mem_eq(st, want, sizeof(st));
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(seeding_with_a_fork_open_is_rejected)
{
    recap_tracker_h t = new_tracker(0);
    recap_parallel_ranks_t r = single();
    recap_fork_token_t tok;

    ck_assert_ok(recap_tracker_seed_parallel(t, 5, &r));
    ck_assert_ok(recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok));
    ck_assert_status(recap_tracker_seed_parallel(t, 6, &r), RECAP_ERR_STATE);
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_tracker_seed_parallel(t, 6, &r));
    recap_tracker_destroy(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("seeding");
    TCase *tc = tcase_create("seeding");

    tcase_add_loop_test(tc, seeds_follow_megatron_over_a_rank_grid, 0, 2);
    tcase_add_test(tc, remat_states_appear_only_when_their_size_exceeds_one);
    tcase_add_test(tc, tp_ranks_draw_differently_and_dp_ranks_alike);
    tcase_add_test(tc, bad_seeding_arguments_leave_the_tracker_untouched);
    tcase_add_test(tc, seeding_replaces_earlier_states_and_seeds);
    tcase_add_test(tc, seeding_an_inference_tracker_only_seeds_its_generator);
    tcase_add_test(tc, seeding_with_a_fork_open_is_rejected);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
