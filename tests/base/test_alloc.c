/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Counts that become sizes (src/base/alloc.h): random counts and element sizes whose byte size
 * fits are computed exactly; those that wrap around a size_t fail, for flexible arrays (a header
 * and n elements), plain arrays and reallocations.
 */
#include <stdint.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "testutil.h"

/* Whether header + n * size fits, by 128-bit arithmetic. */
static int fits(size_t header, size_t n, size_t size)
{
    unsigned __int128 b = (unsigned __int128)n * size + header;

    return b <= SIZE_MAX;
}

START_TEST(byte_sizes_are_exact_or_refused)
{
    int i;

    for (i = 0; i < 100000; i++) {
        size_t size = 1 + tu_rand_below(4096), header = tu_rand_below(256), n, bytes = 0;

        switch (tu_rand_below(4)) {
        case 0: n = tu_rand_below(1u << 20); break;           /* small */
        case 1: n = SIZE_MAX / size - tu_rand_below(3); break; /* near the edge */
        case 2: n = SIZE_MAX / size + 1 + tu_rand_below(1u << 16); break; /* just past it */
        default: n = (size_t)tu_rand(); break;
        }
        ck_assert_int_eq(recap__bytes(header, n, size, &bytes), fits(header, n, size));
        if (fits(header, n, size))
            ck_assert_uint_eq(bytes, header + n * size);
        else
            ck_assert_ptr_null(recap__alloc_flex(header, n, size));
    }
}
END_TEST

START_TEST(wrapping_counts_allocate_nothing)
{
    size_t size = 2 + tu_rand_below(64), n = SIZE_MAX / size + 1 + tu_rand_below(1024);
    void *p = malloc(16);

    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_null(recap__alloc_n(n, size));
    ck_assert_ptr_null(recap__zalloc_flex(8, n, size));
    ck_assert_ptr_null(recap__realloc_n(p, n, size)); /* p is left as it was */
    ck_assert_uint_eq(recap__count_add(SIZE_MAX - tu_rand_below(8), 8 + tu_rand_below(8)), SIZE_MAX);
    ck_assert_uint_eq(recap__count_add(3, 4), 7);
    p = recap__realloc_n(p, 4, 8);
    ck_assert_ptr_nonnull(p);
    free(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("alloc");

    tcase_add_test(tc, byte_sizes_are_exact_or_refused);
    tcase_add_test(tc, wrapping_counts_allocate_nothing);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
