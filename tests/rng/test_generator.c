/* SPDX-License-Identifier: Apache-2.0 */
/* Generator state, reservation and the error plumbing of the ABI. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "testutil.h"

START_TEST(new_generator_has_pytorch_default_seed)
{
    recap_generator_h g;
    uint64_t seed, off;

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_seed(g, &seed));
    ck_assert_ok(recap_generator_offset(g, &off));
    ck_assert_uint_eq(seed, 67280421310721ULL);
    ck_assert_uint_eq(off, 0);
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

START_TEST(state_bytes_are_seed_then_offset_little_endian)
{
    recap_generator_h g;
    uint8_t st[RECAP_STATE_BYTES], want[RECAP_STATE_BYTES];
    uint64_t seed = tu_rand(), off = tu_rand_offset(), got;
    int i;

    for (i = 0; i < 8; i++) {
        want[i] = (uint8_t)(seed >> (8 * i));
        want[8 + i] = (uint8_t)(off >> (8 * i));
    }
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_set_state(g, want));
    ck_assert_ok(recap_generator_get_state(g, st));
    ck_assert_mem_eq(st, want, sizeof(st));
    ck_assert_ok(recap_generator_seed(g, &got));
    ck_assert_uint_eq(got, seed);
    ck_assert_ok(recap_generator_offset(g, &got));
    ck_assert_uint_eq(got, off);
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

START_TEST(misaligned_offset_is_rejected_and_state_kept)
{
    recap_generator_h g;
    uint8_t st[RECAP_STATE_BYTES], before[RECAP_STATE_BYTES];

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_manual_seed(g, 5));
    ck_assert_ok(recap_generator_get_state(g, before));
    memcpy(st, before, sizeof(st));
    st[8] = (uint8_t)(1 + tu_rand_below(3));
    ck_assert_status(recap_generator_set_state(g, st), RECAP_ERR_MISALIGNED);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "multiple of 4"));
    ck_assert_ok(recap_generator_get_state(g, st));
    ck_assert_mem_eq(st, before, sizeof(st));
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

START_TEST(reserve_advances_by_rounded_count)
{
    recap_generator_h g;
    recap_philox_args_t a;
    uint64_t seed = tu_rand(), expect = 0;
    int i;

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_manual_seed(g, seed));
    for (i = 0; i < 1000; i++) {
        uint64_t n = 1 + tu_rand_below(64);
        ck_assert_ok(recap_generator_reserve(g, NULL, n, &a));
        ck_assert_int_eq(a.captured, 0);
        ck_assert_uint_eq(a.seed, seed);
        ck_assert_uint_eq(a.offset, expect);
        expect += (n + 3) / 4 * 4;
    }
    ck_assert_status(recap_generator_reserve(g, NULL, 0, &a), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

START_TEST(reserve_that_would_wrap_is_rejected)
{
    recap_generator_h g;
    recap_philox_args_t a;
    uint8_t st[RECAP_STATE_BYTES];
    uint64_t off;

    memset(st, 0xff, sizeof(st));
    st[8] = 0xfc; /* offset 2^64 - 4 */
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_set_state(g, st));
    ck_assert_status(recap_generator_reserve(g, NULL, 8, &a), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_generator_offset(g, &off));
    ck_assert_uint_eq(off, UINT64_MAX - 3);
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

/* A count no buffer can hold is refused before anything is written or drawn (issue 20,
 * defect 14: SIZE_MAX / 8 words were accepted). */
START_TEST(fill_of_more_than_any_address_space_is_rejected)
{
    recap_generator_h g;
    uint32_t w[4];
    double d[2];
    uint64_t offset = 1;

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_status(recap_generator_fill_u32(g, NULL, w, SIZE_MAX / 8), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_fill_u32(g, NULL, w, ((size_t)1 << 55) + 1),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_fill_uniform(g, NULL, (float *)w, SIZE_MAX / 4),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_fill_uniform_double(g, NULL, d, ((size_t)1 << 54) + 1),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_generator_offset(g, &offset));
    ck_assert_uint_eq(offset, 0);
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

/* What recap.h says a fill advances: 4 * ceil(n / 262144) for words and floats, 8 * ceil(n /
 * 262144) for doubles. */
START_TEST(fill_advances_the_offset_as_documented)
{
    size_t n = 262144 + 1;
    void *buf = malloc(n * sizeof(double));
    recap_generator_h g;
    uint64_t offset;

    ck_assert_ptr_nonnull(buf);
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, buf, n));
    ck_assert_ok(recap_generator_offset(g, &offset));
    ck_assert_uint_eq(offset, 8);
    ck_assert_ok(recap_generator_fill_uniform(g, NULL, buf, 262144));
    ck_assert_ok(recap_generator_offset(g, &offset));
    ck_assert_uint_eq(offset, 12);
    ck_assert_ok(recap_generator_fill_uniform_double(g, NULL, buf, n));
    ck_assert_ok(recap_generator_offset(g, &offset));
    ck_assert_uint_eq(offset, 12 + 16);
    ck_assert_ok(recap_generator_fill_uniform_double(g, NULL, buf, 1));
    ck_assert_ok(recap_generator_offset(g, &offset));
    ck_assert_uint_eq(offset, 12 + 16 + 8);
    ck_assert_ok(recap_generator_destroy(g));
    free(buf);
}
END_TEST

START_TEST(manual_seed_resets_offset)
{
    recap_generator_h g;
    recap_philox_args_t a;
    uint64_t off;

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_reserve(g, NULL, 10, &a));
    ck_assert_ok(recap_generator_manual_seed(g, 99));
    ck_assert_ok(recap_generator_offset(g, &off));
    ck_assert_uint_eq(off, 0);
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

START_TEST(null_arguments_get_a_status_and_message)
{
    recap_generator_h g;
    recap_philox_args_t a;
    uint8_t st[RECAP_STATE_BYTES];
    uint64_t v;
    int d;

    ck_assert_status(recap_generator_create(RECAP_DEVICE_HOST, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_str_eq(recap_last_error(), "gen_p is NULL");
    ck_assert_status(recap_generator_destroy(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_manual_seed(NULL, 1), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_get_state(NULL, st), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_set_state(NULL, st), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_reserve(NULL, NULL, 4, &a), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_seed(NULL, &v), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_offset(NULL, &v), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_device(NULL, &d), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_status(recap_generator_get_state(g, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_reserve(g, NULL, 4, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_generator_device(g, &d));
    ck_assert_int_eq(d, RECAP_DEVICE_HOST);
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

START_TEST(every_status_has_a_distinct_text)
{
    int a, b;

    for (a = RECAP_ERR_BUSY; a <= RECAP_OK; a++) {
        ck_assert_str_ne(recap_strerror((recap_status_t)a), "unknown status");
        for (b = a + 1; b <= RECAP_OK; b++)
            ck_assert_str_ne(recap_strerror((recap_status_t)a), recap_strerror((recap_status_t)b));
    }
    ck_assert_str_eq(recap_strerror((recap_status_t)-1000), "unknown status");
    /* 1.1: stream-ordered host calls; 1.2: framework generators, capture subscribers;
     * 1.3: recap_cupti_holder; 1.4: exact-capture scopes; 1.5: the engine names and graph
     * composition; 1.6: recap_log_write */
    ck_assert_int_eq(recap_abi_version(), 1 << 16 | 6);
    ck_assert_str_eq(recap_version_string(), PACKAGE_VERSION);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("generator");
    TCase *tc = tcase_create("generator");

    tcase_add_test(tc, new_generator_has_pytorch_default_seed);
    tcase_add_test(tc, state_bytes_are_seed_then_offset_little_endian);
    tcase_add_test(tc, misaligned_offset_is_rejected_and_state_kept);
    tcase_add_test(tc, reserve_advances_by_rounded_count);
    tcase_add_test(tc, reserve_that_would_wrap_is_rejected);
    tcase_add_test(tc, manual_seed_resets_offset);
    tcase_add_test(tc, fill_of_more_than_any_address_space_is_rejected);
    tcase_add_test(tc, fill_advances_the_offset_as_documented);
    tcase_add_test(tc, null_arguments_get_a_status_and_message);
    tcase_add_test(tc, every_status_has_a_distinct_text);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
