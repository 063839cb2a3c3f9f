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

#include <cuda.h>

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
static int fail_nth; /* > 0: only librecap's fail_nth-th calloc from now fails */

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
    if (__atomic_load_n(&fail_nth, __ATOMIC_RELAXED) > 0 &&
        from_recap(__builtin_return_address(0)) &&
        __atomic_sub_fetch(&fail_nth, 1, __ATOMIC_RELAXED) == 0) {
        __atomic_add_fetch(&failed_callocs, 1, __ATOMIC_RELAXED);
        return NULL;
    }
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

/* A generator, a stream, a buffer and a captured graph filling it from the generator. */
static void captured(recap_generator_h *g, recap_stream_t *s, void **buf, recap_graph_t *graph)
{
    ck_assert_ok(recap_generator_create(0, g));
    ck_assert_ok(recap_stream_create(0, s));
    ck_assert_ok(recap_device_alloc(0, 4096, buf));
    ck_assert_ok(recap_stream_begin_capture(*s, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_generator_fill_u32(*g, *s, *buf, 1024));
    ck_assert_ok(recap_stream_end_capture(*s, graph));
}

static void uncaptured(recap_generator_h g, recap_stream_t s, void *buf, recap_graph_t graph)
{
    ck_assert_ok(recap_graph_destroy(graph));
    ck_assert_ok(recap_device_free(0, buf));
    ck_assert_ok(recap_stream_destroy(s));
    ck_assert_ok(recap_generator_destroy(g));
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
    captured(&g, &s, &buf, &graph);
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
    uncaptured(g, s, buf, graph);
}
END_TEST

/* The composition walk out of memory anywhere (the n-th of its allocations fails, n random, in
 * a graph nested at a random depth): instantiate fails with RECAP_ERR_NO_MEMORY, or succeeds
 * and its launches advance the generator exactly as the graph's own do; never a silent wrong
 * record. */
START_TEST(walk_out_of_memory_anywhere_fails_or_is_exact)
{
    CUresult (*graph_create)(CUgraph *, unsigned);
    CUresult (*add_child)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph);
    CUresult (*graph_destroy)(CUgraph);
    const char *path = getenv("RECAP_CUDA_DRIVER");
    recap_graph_t graph = NULL;
    recap_graph_exec_t exec;
    uint64_t o0, o1, step;
    recap_generator_h g;
    recap_stream_t s;
    void *lib, *buf;
    int round, d, nomem = 0, exact = 0;

    if (!INJECTS) {
        fprintf(stderr, "sanitizer build: no calloc injection, case skipped\n");
        return;
    }
    lib = dlopen(path != NULL && *path != '\0' ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(lib);
    *(void **)&graph_create = dlsym(lib, "cuGraphCreate");
    *(void **)&add_child = dlsym(lib, "cuGraphAddChildGraphNode");
    *(void **)&graph_destroy = dlsym(lib, "cuGraphDestroy");
    ck_assert(graph_create != NULL && add_child != NULL && graph_destroy != NULL);
    captured(&g, &s, &buf, &graph);
    ck_assert_ok(recap_graph_instantiate(graph, &exec)); /* what one launch draws */
    ck_assert_ok(recap_generator_offset(g, &o0));
    ck_assert_ok(recap_graph_launch(exec, s));
    ck_assert_ok(recap_generator_offset(g, &o1));
    ck_assert_ok(recap_graph_exec_destroy(exec));
    step = o1 - o0;
    ck_assert_uint_gt(step, 0);
    for (round = 0; round < 60; round++) {
        CUgraph cur = (CUgraph)graph, p;
        CUgraphNode node;
        recap_status_t st;

        for (d = 1 + (int)tu_rand_below(50); d > 0; d--) {
            ck_assert_int_eq(graph_create(&p, 0), CUDA_SUCCESS);
            ck_assert_int_eq(add_child(&node, p, NULL, 0, cur), CUDA_SUCCESS);
            if (cur != (CUgraph)graph)
                ck_assert_int_eq(graph_destroy(cur), CUDA_SUCCESS);
            cur = p;
        }
        __atomic_store_n(&fail_nth, 1 + (int)tu_rand_below(120), __ATOMIC_RELAXED);
        st = recap_graph_instantiate(cur, &exec);
        __atomic_store_n(&fail_nth, 0, __ATOMIC_RELAXED);
        ck_assert_msg(st == RECAP_OK || st == RECAP_ERR_NO_MEMORY, "%d: %s", st,
                      recap_last_error());
        if (st == RECAP_OK) {
            ck_assert_ok(recap_generator_offset(g, &o0));
            ck_assert_ok(recap_graph_launch(exec, s));
            ck_assert_ok(recap_generator_offset(g, &o1));
            ck_assert_uint_eq(o1 - o0, step);
            ck_assert_ok(recap_graph_exec_destroy(exec));
            exact++;
        } else {
            nomem++;
        }
        ck_assert_int_eq(graph_destroy(cur), CUDA_SUCCESS);
    }
    fprintf(stderr, "walk out of memory: %d refused, %d exact\n", nomem, exact);
    ck_assert_int_gt(nomem, 0);
    uncaptured(g, s, buf, graph);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("oom");
    TCase *tc = tcase_create("core");

    tu_rand_init();
    tcase_add_test(tc, instantiate_fails_when_the_exec_record_cannot_be_kept);
    tcase_add_test(tc, walk_out_of_memory_anywhere_fails_or_is_exact);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
