/* SPDX-License-Identifier: Apache-2.0 */
/* Philox4x32-10 (recap/philox.h) against Random123's known answers and cuRAND's layout. */
#include <stdlib.h>
#include <string.h>

#include "rng/philox_kat.h"
#include "testutil.h"

START_TEST(philox_matches_random123_known_answers)
{
    int i;

    for (i = 0; i < RECAP__PHILOX_KAT_COUNT; i++) {
        uint32_t out[4];
        recap_philox4x32_10(&recap__philox_kat[i][0], &recap__philox_kat[i][4], out);
        ck_assert_mem_eq(out, &recap__philox_kat[i][6], sizeof(out));
    }
}
END_TEST

START_TEST(philox_output_may_alias_counter)
{
    uint32_t ctr[4] = {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344};
    const uint32_t key[2] = {0xa4093822, 0x299f31d0};
    const uint32_t want[4] = {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1};

    recap_philox4x32_10(ctr, key, ctr);
    ck_assert_mem_eq(ctr, want, sizeof(want));
}
END_TEST

/* curand_init(seed, s, offset) then curand(): word k is word (offset + k) of subsequence s, and
 * subsequence s's word 4c+j is word j of cuRAND host block b = 65536 c + s. Checked against the
 * host generator for random seeds, subsequences < 65536 and offsets. */
START_TEST(stream_matches_curand_host_generator_layout)
{
    enum { COUNTERS = 6, WORDS = 4 * 65536 * COUNTERS };
    uint32_t *ref = malloc(WORDS * sizeof(uint32_t));
    int trial;

    ck_assert_ptr_nonnull(ref);
    for (trial = 0; trial < 8; trial++) {
        uint64_t seed = tu_rand(), s = tu_rand_below(65536), skip = tu_rand_below(9);
        recap_philox_stream_t st;
        uint64_t k;

        ck_assert_int_eq(ref_curand_u32(seed, 0, ref, WORDS), 0);
        recap_philox_init(seed, s, skip, &st);
        for (k = 0; k < 4 * COUNTERS - skip; k++) {
            uint64_t word = skip + k, b = 65536 * (word / 4) + s;
            ck_assert_uint_eq(recap_philox_next(&st), ref[4 * b + word % 4]);
        }
    }
    free(ref);
}
END_TEST

/* The counter is 128 bits: an offset near 2^66 carries into the subsequence half exactly as
 * cuRAND's Philox_State_Incr does. Reference: unsigned __int128 arithmetic. */
START_TEST(stream_counter_carries_into_high_half)
{
    int trial;

    for (trial = 0; trial < 100; trial++) {
        uint64_t seed = tu_rand(), s = tu_rand(), k;
        uint64_t offset = (UINT64_MAX - 4 * tu_rand_below(8)) & ~(uint64_t)3;
        recap_philox_stream_t st;

        recap_philox_init(seed, s, offset, &st);
        for (k = 0; k < 40; k++) {
            unsigned __int128 ctr = ((unsigned __int128)s << 64) + (offset / 4) + k / 4;
            uint32_t c[4] = {(uint32_t)ctr, (uint32_t)(ctr >> 32), (uint32_t)(ctr >> 64),
                             (uint32_t)(ctr >> 96)};
            uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, out[4];
            recap_philox4x32_10(c, key, out);
            ck_assert_uint_eq(recap_philox_next(&st), out[k % 4]);
        }
    }
}
END_TEST

START_TEST(uniform_matches_curand_formula)
{
    int i;

    /* The endpoints: 0 maps to 2^-33, UINT32_MAX rounds to 1.0f (cuRAND's (0, 1]). */
    ck_assert_float_eq(recap_philox_uniform(0), 0x1p-33f);
    ck_assert_float_eq(recap_philox_uniform(UINT32_MAX), 1.0f);
    for (i = 0; i < 100000; i++) {
        uint32_t w = (uint32_t)tu_rand();
        double exact = (double)(float)w * 0x1p-32 + 0x1p-33;
        ck_assert_float_eq(recap_philox_uniform(w), (float)exact);
    }
}
END_TEST

START_TEST(unpack_reads_values_or_device_pointers)
{
    uint64_t dev_seed = tu_rand(), dev_base = 4 * tu_rand_below(1u << 30), seed, offset;
    recap_philox_args_t a = {0};

    a.seed = tu_rand();
    a.offset = 4 * tu_rand_below(1000);
    recap_philox_unpack(&a, &seed, &offset);
    ck_assert_uint_eq(seed, a.seed);
    ck_assert_uint_eq(offset, a.offset);

    a.captured = 1;
    a.seed_ptr = &dev_seed;
    a.offset_ptr = &dev_base;
    a.offset_intragraph = 4 * tu_rand_below(1000);
    recap_philox_unpack(&a, &seed, &offset);
    ck_assert_uint_eq(seed, dev_seed);
    ck_assert_uint_eq(offset, dev_base + a.offset_intragraph);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("philox");
    TCase *tc = tcase_create("philox");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, philox_matches_random123_known_answers);
    tcase_add_test(tc, philox_output_may_alias_counter);
    tcase_add_test(tc, stream_matches_curand_host_generator_layout);
    tcase_add_test(tc, stream_counter_carries_into_high_half);
    tcase_add_test(tc, uniform_matches_curand_formula);
    tcase_add_test(tc, unpack_reads_values_or_device_pointers);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
