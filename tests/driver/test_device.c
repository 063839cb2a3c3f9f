/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device generators through the driver: in CI against the CUDA test double, on the GPU machine
 * (scripts/gpu-check, RECAP_CUDA_DRIVER empty) against the real driver. Same assertions.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "fill_cases.h"

/* A function of the CUDA test double; NULL against a real driver. */
static void *double_fn(const char *name)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    void *lib, *fn;
    int n;

    ck_assert_ok(recap_device_count(&n));
    if (path == NULL || *path == '\0')
        return NULL;
    lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL)
        return NULL;
    fn = dlsym(lib, name);
    dlclose(lib);
    return fn;
}

/* Whether the suite runs against the real driver (RECAP_CUDA_DRIVER empty or unset). */
static int real_driver(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");

    return path == NULL || *path == '\0';
}

static int device_count(void)
{
    int n = 0;

    ck_assert_ok(recap_device_count(&n));
    ck_assert_int_ge(n, 1);
    return n;
}

START_TEST(driver_and_devices_are_reported)
{
    char name[128];
    int v = 0, major = 0, minor = 0, n = device_count();
    size_t mem = 0;

    ck_assert_ok(recap_driver_version(&v));
    ck_assert_int_ge(v, 11030);
    ck_assert_ok(recap_device_info(0, name, sizeof(name), &major, &minor, &mem));
    ck_assert_int_ge(major, 7);
    ck_assert_uint_gt(mem, 0);
    ck_assert_int_gt((int)strlen(name), 0);
    ck_assert_status(recap_device_info(n, name, sizeof(name), NULL, NULL, NULL), RECAP_ERR_NO_DEVICE);
}
END_TEST

START_TEST(generator_on_missing_device_is_rejected)
{
    recap_generator_h g = NULL;
    int n = device_count();

    ck_assert_status(recap_generator_create(n, &g), RECAP_ERR_NO_DEVICE);
    ck_assert_ptr_null(g);
    ck_assert_status(recap_generator_create(-7, &g), RECAP_ERR_NO_DEVICE);
}
END_TEST

START_TEST(device_fill_rejects_host_memory)
{
    recap_generator_h g;
    uint32_t host[64];

    ck_assert_ok(recap_generator_create(0, &g));
    ck_assert_status(recap_generator_fill_u32(g, NULL, host, 64), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

START_TEST(device_fill_rejects_buffer_of_other_device)
{
    recap_generator_h g;
    void *buf;

    if (device_count() < 2)
        return; /* the GPU machine has one device; CI's double has two and runs this */
    ck_assert_ok(recap_device_alloc(1, 256, &buf));
    ck_assert_ok(recap_generator_create(0, &g));
    ck_assert_status(recap_generator_fill_u32(g, NULL, buf, 64), RECAP_ERR_WRONG_DEVICE);
    ck_assert_ok(recap_generator_destroy(g));
    ck_assert_ok(recap_device_free(1, buf));
}
END_TEST

/* A device-1 generator given a device-0 stream: refused, the offset unmoved (issue 20,
 * defect 14); its own device's stream works. */
START_TEST(stream_of_another_device_is_wrong_device)
{
    recap_generator_h g;
    recap_philox_args_t a;
    recap_stream_t s0, s1;
    uint64_t offset = 99;
    void *buf;

    if (device_count() < 2)
        return; /* the GPU machine has one device; CI's double has two and runs this */
    ck_assert_ok(recap_generator_create(1, &g));
    ck_assert_ok(recap_stream_create(0, &s0));
    ck_assert_ok(recap_stream_create(1, &s1));
    ck_assert_ok(recap_device_alloc(1, 256, &buf));
    ck_assert_status(recap_generator_reserve(g, s0, 4, &a), RECAP_ERR_WRONG_DEVICE);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "device 0"));
    ck_assert_status(recap_generator_fill_u32(g, s0, buf, 64), RECAP_ERR_WRONG_DEVICE);
    ck_assert_ok(recap_generator_offset(g, &offset));
    ck_assert_uint_eq(offset, 0);
    ck_assert_ok(recap_generator_reserve(g, s1, 4, &a));
    ck_assert_uint_eq(a.offset, 0);
    ck_assert_ok(recap_generator_fill_u32(g, s1, buf, 64));
    ck_assert_ok(recap_stream_synchronize(s1));
    ck_assert_ok(recap_generator_offset(g, &offset));
    ck_assert_uint_eq(offset, 8);
    ck_assert_ok(recap_device_free(1, buf));
    ck_assert_ok(recap_stream_destroy(s0));
    ck_assert_ok(recap_stream_destroy(s1));
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

/* recap_memcpy_to_device returns with the bytes in place: a fill launched right after on a
 * recap stream is not overwritten by the tail of the copy. The double stages synchronous copies
 * to the device until the next synchronization, as a pageable copy's DMA may run late on a real
 * device (issue 20, defect 12: fills after a sentinel copy differed in their last elements). */
START_TEST(copy_to_device_is_complete_before_a_following_fill)
{
    void (*defer)(int) = (void (*)(int))double_fn("recap_double_defer_sync_copies");
    size_t n = 4096, i;
    uint32_t *sentinel = malloc(n * 4), *got = malloc(n * 4), *ref = malloc(n * 4);
    recap_generator_h dg, hg;
    recap_stream_t s;
    void *buf;

    ck_assert(sentinel != NULL && got != NULL && ref != NULL);
    for (i = 0; i < n; i++)
        sentinel[i] = 0xa5a5a5a5u;
    ck_assert_ok(recap_generator_create(0, &dg));
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &hg));
    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_device_alloc(0, n * 4, &buf));
    /* The double has it (an older double would make this test pass without trying). */
    ck_assert(defer != NULL || real_driver());
    if (defer != NULL)
        defer(1);
    ck_assert_ok(recap_memcpy_to_device(0, buf, sentinel, n * 4));
    ck_assert_ok(recap_generator_fill_u32(dg, s, buf, n));
    ck_assert_ok(recap_stream_synchronize(s));
    ck_assert_ok(recap_memcpy_to_host(0, got, buf, n * 4));
    if (defer != NULL)
        defer(0);
    ck_assert_ok(recap_generator_fill_u32(hg, NULL, ref, n));
    ck_assert_mem_eq(got, ref, n * 4);
    ck_assert_ok(recap_device_free(0, buf));
    ck_assert_ok(recap_stream_destroy(s));
    ck_assert_ok(recap_generator_destroy(dg));
    ck_assert_ok(recap_generator_destroy(hg));
    free(sentinel);
    free(got);
    free(ref);
}
END_TEST

/* What a host node saw: a copy of the pinned buffer the device copied into, and how many ran. */
typedef struct {
    const uint32_t *src;
    uint32_t *seen;
    size_t n;
    int calls;
} host_node_t;

static void host_node(void *data)
{
    host_node_t *h = data;

    memcpy(h->seen, h->src, h->n * 4);
    h->calls++;
}

/* H2D of `a`, D2H into `b`, a host function copying `b`, then H2D of `a2` over the device
 * buffer: in stream order the host function sees `a`. */
static void enqueue_round(recap_stream_t s, uint32_t *dev, const uint32_t *a, const uint32_t *a2,
                          uint32_t *b, host_node_t *h)
{
    ck_assert_ok(recap_memcpy_to_device_async(0, dev, a, h->n * 4, s));
    ck_assert_ok(recap_memcpy_to_host_async(0, b, dev, h->n * 4, s));
    ck_assert_ok(recap_stream_host_func(0, s, host_node, h));
    ck_assert_ok(recap_memcpy_to_device_async(0, dev, a2, h->n * 4, s));
}

static void random_words(uint32_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        w[i] = (uint32_t)tu_rand_below(1ull << 32);
}

START_TEST(stream_ordered_copies_and_host_functions_run_eagerly_and_replay_in_graphs)
{
    size_t n = 1 + tu_rand_below(100000);
    uint32_t *a, *a2, *b, *dev, *last = malloc(n * 4);
    host_node_t h = {NULL, malloc(n * 4), n, 0};
    recap_stream_t s;
    recap_graph_t g;
    recap_graph_exec_t e;
    int k;

    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_host_alloc(0, n * 4, (void **)&a));
    ck_assert_ok(recap_host_alloc(0, n * 4, (void **)&a2));
    ck_assert_ok(recap_host_alloc(0, n * 4, (void **)&b));
    ck_assert_ok(recap_device_alloc(0, n * 4, (void **)&dev));
    h.src = b;
    random_words(a, n);
    random_words(a2, n);
    enqueue_round(s, dev, a, a2, b, &h);
    ck_assert_ok(recap_stream_synchronize(s));
    ck_assert_int_eq(h.calls, 1);
    ck_assert_mem_eq(h.seen, a, n * 4);
    ck_assert_ok(recap_memcpy_to_host(0, last, dev, n * 4));
    ck_assert_mem_eq(last, a2, n * 4);

    /* Captured: nothing runs until a launch; each launch reads the pinned source as it is then. */
    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
    enqueue_round(s, dev, a, a2, b, &h);
    ck_assert_ok(recap_stream_end_capture(s, &g));
    ck_assert_int_eq(h.calls, 1);
    ck_assert_ok(recap_graph_instantiate(g, &e));
    for (k = 0; k < 3; k++) {
        random_words(a, n);
        ck_assert_ok(recap_graph_launch(e, s));
        ck_assert_ok(recap_stream_synchronize(s));
        ck_assert_int_eq(h.calls, 2 + k);
        ck_assert_msg(memcmp(h.seen, a, n * 4) == 0, "launch %d: the host node saw stale data", k);
    }
    ck_assert_ok(recap_graph_exec_destroy(e));
    ck_assert_ok(recap_graph_destroy(g));

    ck_assert_status(recap_stream_host_func(0, s, NULL, &h), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_memcpy_to_device_async(0, NULL, a, 4, s), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_memcpy_to_host_async(0, b, NULL, 4, s), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_host_alloc(0, 0, (void **)&last), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_host_alloc(device_count(), 4, (void **)&last), RECAP_ERR_NO_DEVICE);
    ck_assert_status(recap_host_free(0, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_memcpy_to_host_async(0, b, dev, 0, s)); /* nothing to copy */

    ck_assert_ok(recap_device_free(0, dev));
    ck_assert_ok(recap_host_free(0, a));
    ck_assert_ok(recap_host_free(0, a2));
    ck_assert_ok(recap_host_free(0, b));
    ck_assert_ok(recap_stream_destroy(s));
    free(h.seen);
    free(last);
}
END_TEST

/* Pinned host memory is addressable by the device (UVA): a device fill writes it with exactly the
 * words of the host generator. */
START_TEST(device_fill_writes_pinned_host_memory)
{
    size_t n = 1 + tu_rand_below(100000);
    uint64_t seed = tu_rand_below(1ull << 62);
    uint32_t *pin, *ref = malloc(n * 4);
    recap_generator_h dg, hg;
    recap_stream_t s;

    ck_assert_ok(recap_generator_create(0, &dg));
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &hg));
    ck_assert_ok(recap_generator_manual_seed(dg, seed));
    ck_assert_ok(recap_generator_manual_seed(hg, seed));
    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_host_alloc(0, n * 4, (void **)&pin));
    ck_assert_ok(recap_generator_fill_u32(dg, s, pin, n));
    ck_assert_ok(recap_stream_synchronize(s));
    ck_assert_ok(recap_generator_fill_u32(hg, NULL, ref, n));
    ck_assert_mem_eq(pin, ref, n * 4);
    ck_assert_ok(recap_host_free(0, pin));
    ck_assert_ok(recap_stream_destroy(s));
    ck_assert_ok(recap_generator_destroy(dg));
    ck_assert_ok(recap_generator_destroy(hg));
    free(ref);
}
END_TEST

START_TEST(host_generator_takes_no_stream)
{
    recap_generator_h g;
    uint32_t host[8];

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_status(recap_generator_fill_u32(g, (recap_stream_t)0x10, host, 8), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

/* Without a driver, device calls say so and host generators still work. */
START_TEST(missing_driver_gives_no_driver_status)
{
    recap_generator_h g = NULL;
    uint32_t w[4];
    int n;

    setenv("RECAP_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    ck_assert_status(recap_device_count(&n), RECAP_ERR_NO_DRIVER);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "/nonexistent/libcuda.so.1"));
    ck_assert_status(recap_generator_create(0, &g), RECAP_ERR_NO_DRIVER);
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, w, 4));
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

/* RECAP_CUDA_DRIVER names any path: a missing one of 300 to 3,000 bytes is named whole in the
 * error, or its beginning with the cut mark. */
START_TEST(a_long_missing_driver_path_is_named_whole_or_marked)
{
    tu_long_missing_path("RECAP_CUDA_DRIVER", recap_device_count, RECAP_ERR_NO_DRIVER);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("device");
    TCase *nodrv = tcase_create("no_driver");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, driver_and_devices_are_reported);
    tcase_add_test(tc, generator_on_missing_device_is_rejected);
    tcase_add_test(tc, device_fill_rejects_host_memory);
    tcase_add_test(tc, device_fill_rejects_buffer_of_other_device);
    tcase_add_test(tc, stream_of_another_device_is_wrong_device);
    tcase_add_test(tc, copy_to_device_is_complete_before_a_following_fill);
    tcase_add_test(tc, host_generator_takes_no_stream);
    tcase_add_test(tc, device_fill_writes_pinned_host_memory);
    tcase_add_test(tc, stream_ordered_copies_and_host_functions_run_eagerly_and_replay_in_graphs);
    fill_cases_add(tc, 0);
    suite_add_tcase(s, tc);
    /* Each Check test runs in a forked child, so the driver is loaded afresh there. */
    tcase_add_test(nodrv, missing_driver_gives_no_driver_status);
    tcase_add_test(nodrv, a_long_missing_driver_path_is_named_whole_or_marked);
    suite_add_tcase(s, nodrv);
    return tu_run(s);
}
