/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation failures inside recap, injected by this program's calloc: while `fail_recap` is
 * set, a calloc called from librecap itself returns NULL; every other one (the CUDA test
 * double's, libc's) succeeds. Against a real driver the same holds. Sanitizer builds interpose
 * the allocator themselves, so there the cases are skipped.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define INJECTS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define INJECTS 0
#endif
#endif
#ifndef INJECTS
#define INJECTS 1
#endif

static int fail_recap;
static int failed_callocs;

#if INJECTS
extern void *__libc_calloc(size_t n, size_t size);

/* Whether the code at `ret` belongs to librecap. dladdr allocates nothing. */
static int from_recap(void *ret)
{
    Dl_info info;

    return dladdr(ret, &info) != 0 && info.dli_fname != NULL &&
           strstr(info.dli_fname, "librecap") != NULL;
}

/* Default visibility: the tests build with hidden visibility, and librecap must find it. */
RECAP_API void *calloc(size_t n, size_t size)
{
    if (__atomic_load_n(&fail_recap, __ATOMIC_RELAXED) &&
        from_recap(__builtin_return_address(0))) {
        __atomic_add_fetch(&failed_callocs, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    return __libc_calloc(n, size);
}
#endif

/* The double's count of live execs; -1 against a real driver. */
static int live_execs(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    int (*count)(void);
    void *lib;
    int n = -1;

    lib = dlopen(path != NULL && *path != '\0' ? path : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ck_assert_ptr_nonnull(lib);
    count = (int (*)(void))dlsym(lib, "recap_double_live_execs");
    if (count != NULL)
        n = count();
    dlclose(lib);
    return n;
}

static uint64_t live_records(void)
{
    recap_capture_stats_t cs;

    ck_assert_ok(recap_capture_stats(&cs));
    return cs.live_records;
}

/* recap_graph_instantiate fails, and destroys the exec it made, when the exec's RNG record
 * cannot be kept: launches of an exec recap does not know would never advance the generator
 * (issue 20, defect 13). */
START_TEST(instantiate_fails_when_the_exec_record_cannot_be_kept)
{
    recap_graph_exec_t exec = (recap_graph_exec_t)0x1;
    recap_generator_h g;
    recap_stream_t s;
    recap_graph_t graph = NULL;
    uint64_t records;
    void *buf;
    int execs;

    if (!INJECTS) {
        fprintf(stderr, "sanitizer build: no calloc injection, case skipped\n");
        return;
    }
    ck_assert_ok(recap_generator_create(0, &g));
    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_device_alloc(0, 4096, &buf));
    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_generator_fill_u32(g, s, buf, 1024));
    ck_assert_ok(recap_stream_end_capture(s, &graph));
    records = live_records();
    execs = live_execs();

    __atomic_store_n(&fail_recap, 1, __ATOMIC_RELAXED);
    ck_assert_status(recap_graph_instantiate(graph, &exec), RECAP_ERR_NO_MEMORY);
    __atomic_store_n(&fail_recap, 0, __ATOMIC_RELAXED);
    ck_assert_int_gt(failed_callocs, 0);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "exec is destroyed"));
    ck_assert_ptr_eq(exec, (recap_graph_exec_t)0x1);
    ck_assert_uint_eq(live_records(), records);
    if (execs >= 0)
        ck_assert_int_eq(live_execs(), execs);

    /* The next instantiation works and its exec is known. */
    ck_assert_ok(recap_graph_instantiate(graph, &exec));
    ck_assert_uint_eq(live_records(), records + 1);
    ck_assert_ok(recap_graph_exec_destroy(exec));
    ck_assert_ok(recap_graph_destroy(graph));
    ck_assert_ok(recap_device_free(0, buf));
    ck_assert_ok(recap_stream_destroy(s));
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("oom");
    TCase *tc = tcase_create("core");

    tu_rand_init();
    tcase_add_test(tc, instantiate_fails_when_the_exec_record_cannot_be_kept);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
