/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fills against cuRAND's host generator: random seeds, offsets and sizes (tiny, not multiples of
 * 4, straddling the 65536-subsequence stride), unaligned destinations, no write past the end,
 * and the offset advance.
 */
#include <stdlib.h>
#include <string.h>

#include "fill_cases.h"

static int test_device = RECAP_DEVICE_HOST;

enum { KIND_U32, KIND_F32, KIND_F64 };
static const size_t elem_size[] = {4, 4, 8};

/* A buffer where the generator writes: host memory, or device memory of test_device. */
typedef struct {
    unsigned char *host; /* what the test compares */
    void *dev;
    size_t bytes;
} tbuf_t;

static void tbuf_alloc(tbuf_t *b, size_t bytes)
{
    b->bytes = bytes;
    b->host = malloc(bytes);
    ck_assert_ptr_nonnull(b->host);
    memset(b->host, 0xA5, bytes); /* poison: every word the fill should write must change */
    b->dev = NULL;
    if (test_device != RECAP_DEVICE_HOST) {
        ck_assert_ok(recap_device_alloc(test_device, bytes, &b->dev));
        ck_assert_ok(recap_memcpy_to_device(test_device, b->dev, b->host, bytes));
    }
}

static void *tbuf_target(tbuf_t *b)
{
    return b->dev != NULL ? b->dev : (void *)b->host;
}

static void tbuf_fetch(tbuf_t *b)
{
    if (b->dev != NULL)
        ck_assert_ok(recap_memcpy_to_host(test_device, b->host, b->dev, b->bytes));
}

static void tbuf_free(tbuf_t *b)
{
    if (b->dev != NULL)
        ck_assert_ok(recap_device_free(test_device, b->dev));
    free(b->host);
}

static recap_status_t do_fill(recap_generator_h g, int kind, void *buf, size_t n)
{
    switch (kind) {
    case KIND_U32: return recap_generator_fill_u32(g, NULL, buf, n);
    case KIND_F32: return recap_generator_fill_uniform(g, NULL, buf, n);
    default: return recap_generator_fill_uniform_double(g, NULL, buf, n);
    }
}

static void reference(int kind, uint64_t seed, uint64_t offset, void *out, size_t n)
{
    int rc;

    switch (kind) {
    case KIND_U32: rc = ref_curand_u32(seed, offset, out, n); break;
    case KIND_F32: rc = ref_curand_uniform(seed, offset, out, n); break;
    default: rc = ref_curand_uniform_double(seed, offset, out, n); break;
    }
    ck_assert_int_eq(rc, 0);
}

/* One fill of n elements at `skip` elements into a buffer, with guards on both sides. */
static void check_one(int kind, uint64_t seed, uint64_t offset, size_t n, size_t skip)
{
    const size_t es = elem_size[kind], guard = 4;
    uint64_t counters = kind == KIND_F64 ? 2 : 1;
    unsigned char *want = malloc(n * es);
    unsigned char poison[8 * 8]; /* covers skip (<= 5) and guard (4) elements of 8 bytes */
    recap_generator_h g;
    uint64_t after;
    uint8_t state[RECAP_STATE_BYTES];
    tbuf_t b;

    ck_assert_ptr_nonnull(want);
    tbuf_alloc(&b, (skip + n + guard) * es);
    memset(poison, 0xA5, sizeof(poison));
    ck_assert_ok(recap_generator_create(test_device, &g));
    ck_assert_ok(recap_generator_manual_seed(g, seed));
    /* set_state takes (seed, offset) as torch.cuda.set_rng_state bytes */
    ck_assert_ok(recap_generator_get_state(g, state));
    for (int i = 0; i < 8; i++)
        state[8 + i] = (uint8_t)(offset >> (8 * i));
    ck_assert_ok(recap_generator_set_state(g, state));

    ck_assert_ok(do_fill(g, kind, (unsigned char *)tbuf_target(&b) + skip * es, n));
    tbuf_fetch(&b);
    reference(kind, seed, offset, want, n);
    ck_assert_msg(memcmp(b.host + skip * es, want, n * es) == 0,
                  "fill kind %d seed %llu offset %llu n %zu skip %zu differs from cuRAND", kind,
                  (unsigned long long)seed, (unsigned long long)offset, n, skip);
    ck_assert_mem_eq(b.host, poison, skip * es);
    ck_assert_mem_eq(b.host + (skip + n) * es, poison, guard * es);

    ck_assert_ok(recap_generator_offset(g, &after));
    ck_assert_uint_eq(after, offset + 4 * counters * ((n + 262143) / 262144));
    ck_assert_ok(recap_generator_destroy(g));
    tbuf_free(&b);
    free(want);
}

static size_t random_size(void)
{
    static const size_t edges[] = {1, 2, 3, 4, 5, 7, 8, 262143, 262144, 262145, 4 * 65536 + 13};

    switch (tu_rand_below(3)) {
    case 0: return edges[tu_rand_below(sizeof(edges) / sizeof(edges[0]))];
    case 1: return 1 + tu_rand_below(4096);
    default: return 1 + tu_rand_below(600000);
    }
}

static void check_kind(int kind)
{
    int trial;

    for (trial = 0; trial < 12; trial++) {
        size_t n = random_size();
        check_one(kind, tu_rand(), tu_rand_offset(), n, tu_rand_below(2) ? 0 : 1 + tu_rand_below(5));
    }
}

START_TEST(fill_u32_equals_curand_generate)
{
    check_kind(KIND_U32);
}
END_TEST

START_TEST(fill_uniform_equals_curand_generate_uniform)
{
    check_kind(KIND_F32);
}
END_TEST

START_TEST(fill_uniform_double_equals_curand_generate_uniform_double)
{
    check_kind(KIND_F64);
}
END_TEST

/* Two consecutive fills draw disjoint counters: the second equals cuRAND at the advanced offset. */
START_TEST(consecutive_fills_continue_the_stream)
{
    uint64_t seed = tu_rand();
    size_t n1 = random_size(), n2 = random_size();
    uint32_t *r = malloc(n2 * 4);
    recap_generator_h g;
    tbuf_t b1, b2;

    tbuf_alloc(&b1, n1 * 4);
    tbuf_alloc(&b2, n2 * 4);
    ck_assert_ok(recap_generator_create(test_device, &g));
    ck_assert_ok(recap_generator_manual_seed(g, seed));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, tbuf_target(&b1), n1));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, tbuf_target(&b2), n2));
    tbuf_fetch(&b1);
    tbuf_fetch(&b2);
    ck_assert_int_eq(ref_curand_u32(seed, 4 * ((n1 + 262143) / 262144), r, n2), 0);
    ck_assert_mem_eq(b2.host, r, n2 * 4);
    ck_assert_ok(recap_generator_destroy(g));
    tbuf_free(&b1);
    tbuf_free(&b2);
    free(r);
}
END_TEST

START_TEST(fill_rejects_bad_input)
{
    recap_generator_h g;
    tbuf_t b;

    tbuf_alloc(&b, 64);
    ck_assert_ok(recap_generator_create(test_device, &g));
    ck_assert_status(recap_generator_fill_u32(NULL, NULL, tbuf_target(&b), 4), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_fill_u32(g, NULL, NULL, 4), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_fill_u32(g, NULL, tbuf_target(&b), 0), RECAP_ERR_INVALID_ARG);
    ck_assert_str_eq(recap_last_error(), "fill_u32: zero-length fill");
    ck_assert_status(recap_generator_fill_uniform(g, NULL, (float *)((char *)tbuf_target(&b) + 2), 4),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_generator_fill_uniform_double(g, NULL, (double *)((char *)tbuf_target(&b) + 4), 2),
                     RECAP_ERR_INVALID_ARG);
    /* A rejected fill draws nothing. */
    {
        uint64_t off;
        ck_assert_ok(recap_generator_offset(g, &off));
        ck_assert_uint_eq(off, 0);
    }
    ck_assert_ok(recap_generator_destroy(g));
    tbuf_free(&b);
}
END_TEST

void fill_cases_add(TCase *tc, int device)
{
    test_device = device;
    tcase_add_test(tc, fill_u32_equals_curand_generate);
    tcase_add_test(tc, fill_uniform_equals_curand_generate_uniform);
    tcase_add_test(tc, fill_uniform_double_equals_curand_generate_uniform_double);
    tcase_add_test(tc, consecutive_fills_continue_the_stream);
    tcase_add_test(tc, fill_rejects_bad_input);
}
