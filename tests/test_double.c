/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA test double follows the driver's stream-capture and graph rules.
 *
 * Loads the driver named by $RECAP_CUDA_DRIVER (make check points it at the double; empty or
 * unset: this suite is skipped, exit 77) and calls it through dlsym. The assertions are the real
 * driver's behaviour: pointing RECAP_CUDA_DRIVER at a real libcuda.so.1 and
 * RECAP_DOUBLE_TEST_FATBIN at recap's kernels.fatbin runs the same checks against a GPU, minus
 * those that need the double's recap_double_* inspection exports (launch and node counts, live
 * handles, fault injection), which are skipped there.
 */
#define _GNU_SOURCE
#define __CUDA_API_VERSION_INTERNAL 1 /* the legacy names too: cuGraphInstantiate (5 args) etc. */
#include <check.h>
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/registry.h"
#include "testutil.h"

/* Driver functions the suite calls; every one must be exported. */
#define DRIVER_FNS(X)                                                                              \
    X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxSynchronize)    \
    X(cuModuleLoadData) X(cuModuleGetFunction) X(cuLaunchKernel) X(cuLaunchKernel_ptsz)            \
    X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2)                         \
    X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) X(cuMemsetD8_v2) X(cuMemsetD32Async)           \
    X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuStreamSynchronize) X(cuStreamBeginCapture_v2)      \
    X(cuStreamBeginCapture_v2_ptsz) X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)               \
    X(cuStreamIsCapturing) X(cuStreamGetCaptureInfo) X(cuStreamGetCaptureInfo_v2)                  \
    X(cuThreadExchangeStreamCaptureMode) X(cuGraphCreate) X(cuGraphDestroy) X(cuGraphClone)        \
    X(cuGraphGetNodes) X(cuGraphAddKernelNode_v2) X(cuGraphInstantiateWithFlags)                   \
    X(cuGraphInstantiateWithParams) X(cuGraphInstantiate) X(cuGraphInstantiate_v2)                 \
    X(cuGraphExecDestroy) X(cuGraphLaunch) X(cuGraphLaunch_ptsz) X(cuGraphUpload)                  \
    X(cuStreamWriteValue64_v2) X(cuStreamWriteValue32_v2) X(cuDeviceGetAttribute)                  \
    X(cuGetErrorName)

#define DECL(f) static __typeof__(f) *p_##f;
DRIVER_FNS(DECL)
#undef DECL

/* The double's inspection exports; NULL against a real driver. */
static unsigned long (*d_launch_count)(void);
static unsigned long (*d_node_count)(CUgraph);
static int (*d_live_graphs)(void);
static int (*d_live_execs)(void);
static unsigned long (*d_stream_ops)(void);
static void (*d_fail_next)(const char *, int);

static void *lib;
static CUcontext ctx;
static CUfunction k_fill, k_advance;
static CUdeviceptr buf_a, buf_b, slot;
static int base_graphs, base_execs;

#define NWORDS 1000u
#define BUF_BYTES (NWORDS * 4u)

/* Asserts a driver result, naming both codes on failure. */
static const char *en(CUresult rc)
{
    const char *s = NULL;
    return p_cuGetErrorName(rc, &s) == CUDA_SUCCESS && s != NULL ? s : "(unnamed)";
}

#define CK(expr, want)                                                                        \
    do {                                                                                      \
        CUresult rc_ = (expr), want_ = (want);                                                \
        ck_assert_msg(rc_ == want_, "%s returned %d %s, expected %d %s", #expr, (int)rc_,     \
                      en(rc_), (int)want_, en(want_));                                        \
    } while (0)
#define OK(expr) CK((expr), CUDA_SUCCESS)

static void *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    void *p;

    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    p = malloc((size_t)n + 16);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return p;
}

/* Runs in each test's process (Check forks), so a real driver is initialised after the fork. */
static void setup(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER"), *fatbin = getenv("RECAP_DOUBLE_TEST_FATBIN");
    static const uint32_t fake_image[4] = {0xBA55ED50u, 0, 0, 0}; /* all the double checks */
    void *image;
    CUdevice dev;
    CUmodule mod;

    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "dlopen(%s): %s", path, dlerror());
#define LOAD(f)                                                                \
    p_##f = (__typeof__(f) *)dlsym(lib, #f);                                   \
    ck_assert_msg(p_##f != NULL, "the driver does not export %s", #f);
    DRIVER_FNS(LOAD)
#undef LOAD
    d_launch_count = (unsigned long (*)(void))dlsym(lib, "recap_double_launch_count");
    d_node_count = (unsigned long (*)(CUgraph))dlsym(lib, "recap_double_node_count");
    d_live_graphs = (int (*)(void))dlsym(lib, "recap_double_live_graphs");
    d_live_execs = (int (*)(void))dlsym(lib, "recap_double_live_execs");
    d_stream_ops = (unsigned long (*)(void))dlsym(lib, "recap_double_stream_ops");
    d_fail_next = (void (*)(const char *, int))dlsym(lib, "recap_double_fail_next");

    image = fatbin != NULL && *fatbin != '\0' ? read_file(fatbin) : (void *)fake_image;
    OK(p_cuInit(0));
    OK(p_cuDeviceGet(&dev, 0));
    OK(p_cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(p_cuCtxSetCurrent(ctx));
    OK(p_cuModuleLoadData(&mod, image));
    OK(p_cuModuleGetFunction(&k_fill, mod, RECAP_KERNEL_FILL_U32));
    OK(p_cuModuleGetFunction(&k_advance, mod, RECAP_KERNEL_ADVANCE));
    OK(p_cuMemAlloc_v2(&buf_a, BUF_BYTES));
    OK(p_cuMemAlloc_v2(&buf_b, BUF_BYTES));
    OK(p_cuMemAlloc_v2(&slot, 16));
    OK(p_cuMemsetD8_v2(buf_a, 0, BUF_BYTES));
    OK(p_cuMemsetD8_v2(buf_b, 0, BUF_BYTES));
    OK(p_cuMemsetD8_v2(slot, 0, 16));
    base_graphs = d_live_graphs ? d_live_graphs() : 0;
    base_execs = d_live_execs ? d_live_execs() : 0;
}

static void teardown(void)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_GLOBAL;

    p_cuThreadExchangeStreamCaptureMode(&m);
    p_cuMemFree_v2(buf_a);
    p_cuMemFree_v2(buf_b);
    p_cuMemFree_v2(slot);
}

/* ------------------------------------------------------------------ helpers */

static int is_double(void)
{
    return d_launch_count != NULL;
}

static CUstream new_stream(unsigned flags)
{
    CUstream s = NULL;
    OK(p_cuStreamCreate(&s, flags));
    return s;
}

static CUresult fill(CUstream s, CUdeviceptr dst, uint64_t seed, uint64_t offset)
{
    recap__fill_params_t p;
    void *args[] = {&p};

    memset(&p, 0, sizeof(p));
    p.dst = dst;
    p.n = NWORDS;
    p.philox.seed = seed;
    p.philox.offset = offset;
    recap__fill_keys(seed, &p.keys); /* outside a capture the host computes the round keys */
    return p_cuLaunchKernel(k_fill, 2, 1, 1, 64, 1, 1, 0, s, args, NULL);
}

/* slot[1] += inc: one node whose effect counts the launches. */
static CUresult advance(CUstream s, uint64_t inc)
{
    recap__advance_params_t p;
    void *args[] = {&p};

    memset(&p, 0, sizeof(p));
    p.slot[0] = slot;
    p.inc[0] = inc;
    p.count = 1;
    return p_cuLaunchKernel(k_advance, 1, 1, 1, RECAP_SLOTS_PER_LAUNCH, 1, 1, 0, s, args, NULL);
}

static void read_words(CUdeviceptr src, uint32_t *out, size_t n)
{
    OK(p_cuMemcpyDtoH_v2(out, src, n * 4));
}

static uint64_t slot_offset(void)
{
    uint64_t v[2];
    OK(p_cuMemcpyDtoH_v2(v, slot, sizeof(v)));
    return v[1];
}

static int all_zero(CUdeviceptr p)
{
    uint32_t w[NWORDS];

    read_words(p, w, NWORDS);
    for (size_t i = 0; i < NWORDS; i++)
        if (w[i] != 0)
            return 0;
    return 1;
}

static CUstreamCaptureStatus capture_status(CUstream s)
{
    CUstreamCaptureStatus st = (CUstreamCaptureStatus)99;
    OK(p_cuStreamIsCapturing(s, &st));
    return st;
}

static size_t node_count(CUgraph g)
{
    size_t n = 12345;

    OK(p_cuGraphGetNodes(g, NULL, &n));
    if (d_node_count != NULL)
        ck_assert_uint_eq(d_node_count(g), n);
    return n;
}

static CUstreamCaptureMode set_mode(CUstreamCaptureMode m)
{
    OK(p_cuThreadExchangeStreamCaptureMode(&m));
    return m;
}

/* Ends a capture that must have been invalidated. */
static void end_invalidated(CUstream s)
{
    CUgraph g = (CUgraph)0x1;

    CK(p_cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
}

/* Runs one driver call on a fresh thread (current context set, given capture mode). */
enum { JOB_MEMALLOC, JOB_END_CAPTURE, JOB_CTX_SYNC, JOB_LAUNCH };

typedef struct {
    int what;
    CUstreamCaptureMode mode;
    CUstream stream;
    CUresult rc;
    CUgraph graph;
    CUstreamCaptureMode initial_mode;
} job_t;

static void *job_main(void *arg)
{
    job_t *j = arg;
    CUdeviceptr p = 0;
    CUstreamCaptureMode m = j->mode;

    p_cuCtxSetCurrent(ctx);
    p_cuThreadExchangeStreamCaptureMode(&m);
    j->initial_mode = m;
    switch (j->what) {
    case JOB_MEMALLOC:
        j->rc = p_cuMemAlloc_v2(&p, 256);
        if (j->rc == CUDA_SUCCESS)
            p_cuMemFree_v2(p);
        break;
    case JOB_END_CAPTURE:
        j->graph = (CUgraph)0x1;
        j->rc = p_cuStreamEndCapture(j->stream, &j->graph);
        break;
    case JOB_CTX_SYNC: j->rc = p_cuCtxSynchronize(); break;
    case JOB_LAUNCH: j->rc = fill(j->stream, buf_b, 9, 0); break;
    }
    return NULL;
}

static job_t on_other_thread(int what, CUstreamCaptureMode mode, CUstream s)
{
    pthread_t t;
    job_t j;

    memset(&j, 0, sizeof(j));
    j.what = what;
    j.mode = mode;
    j.stream = s;
    ck_assert_int_eq(pthread_create(&t, NULL, job_main, &j), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    return j;
}

static void check_no_leaks(void)
{
    if (d_live_graphs != NULL) {
        ck_assert_int_eq(d_live_graphs(), base_graphs);
        ck_assert_int_eq(d_live_execs(), base_execs);
    }
}

/* ------------------------------------------------------------------ capture basics */

START_TEST(capture_records_kernel_nodes_without_running_them)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    unsigned long launches = is_double() ? d_launch_count() : 0;
    CUgraph g = NULL;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(fill(s, buf_a, 1, 0));
    OK(fill(s, buf_a, 2, 0));
    OK(advance(s, 4));
    ck_assert(all_zero(buf_a)); /* recorded, not run */
    if (is_double())
        ck_assert_uint_eq(d_launch_count(), launches);
    OK(p_cuStreamEndCapture(s, &g));
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    ck_assert_uint_eq(node_count(g), 3);
    ck_assert(all_zero(buf_a));
    ck_assert_uint_eq(slot_offset(), 0);
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(graph_launch_writes_what_eager_launch_writes)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e;
    uint32_t eager[NWORDS], graph[NWORDS];
    uint64_t seed = tu_rand(), offset = tu_rand_offset();

    OK(fill(s, buf_a, seed, offset));
    OK(p_cuStreamSynchronize(s));
    read_words(buf_a, eager, NWORDS);

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_b, seed, offset));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    ck_assert(all_zero(buf_b));
    OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    read_words(buf_b, graph, NWORDS);
    ck_assert_mem_eq(eager, graph, sizeof(eager));
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(k_graph_launches_run_the_nodes_k_times)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e;
    unsigned long launches;
    const int K = 7;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 5, 0));
    OK(advance(s, 12));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    launches = is_double() ? d_launch_count() : 0;
    for (int i = 0; i < K; i++)
        OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    ck_assert_uint_eq(slot_offset(), 12u * K);
    if (is_double())
        ck_assert_uint_eq(d_launch_count() - launches, 2u * K);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
}
END_TEST

START_TEST(capture_ids_are_unique_and_increasing)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING), t = new_stream(CU_STREAM_NON_BLOCKING);
    CUstreamCaptureStatus st;
    cuuint64_t id1 = 0, id2 = 0, id3 = 0, id_v2 = 0;
    CUgraph g, cg = NULL;
    const CUgraphNode *deps = NULL;
    size_t ndeps = 99;
    const char *fork_env = getenv("CK_FORK");

    id1 = 777;
    OK(p_cuStreamGetCaptureInfo(s, &st, &id1));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamGetCaptureInfo(s, &st, &id1));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    ck_assert_uint_ge(id1, 1);
    if (is_double() && (fork_env == NULL || strcmp(fork_env, "no") != 0))
        ck_assert_uint_eq(id1, 1); /* a fresh process: the first capture */
    OK(p_cuStreamGetCaptureInfo_v2(s, &st, &id_v2, &cg, &deps, &ndeps));
    ck_assert_uint_eq(id_v2, id1);
    ck_assert_ptr_nonnull(cg);
    ck_assert_uint_eq(ndeps, 0);
    OK(fill(s, buf_a, 1, 0));
    OK(p_cuStreamGetCaptureInfo_v2(s, &st, NULL, NULL, NULL, &ndeps));
    ck_assert_uint_eq(ndeps, 1);
    OK(p_cuStreamBeginCapture_v2(t, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamGetCaptureInfo(t, &st, &id2));
    ck_assert_uint_eq(id2, id1 + 1);
    OK(p_cuStreamEndCapture(t, &g));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamGetCaptureInfo(s, &st, &id3));
    ck_assert_uint_eq(id3, id2 + 1);
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    OK(p_cuStreamDestroy_v2(t));
    check_no_leaks();
}
END_TEST

START_TEST(begin_and_end_capture_errors)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g = (CUgraph)0x1;

    CK(p_cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(p_cuStreamBeginCapture_v2(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_RELAXED),
       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(p_cuStreamBeginCapture_v2(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    CK(p_cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    ck_assert_ptr_null(g);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_ERROR_ILLEGAL_STATE);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(p_cuStreamEndCapture(s, &g));
    ck_assert_uint_eq(node_count(g), 0);
    OK(p_cuGraphDestroy(g));
    /* a NULL graph pointer ends the capture, discarding the graph */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 1, 0));
    OK(p_cuStreamEndCapture(s, NULL));
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(per_thread_stream_variants_capture_the_per_thread_stream)
{
    CUgraph g = NULL;
    recap__fill_params_t p;
    void *args[] = {&p};

    memset(&p, 0, sizeof(p));
    p.dst = buf_a;
    p.n = NWORDS;
    OK(p_cuStreamBeginCapture_v2_ptsz(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(capture_status(CU_STREAM_PER_THREAD), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    /* the per-thread stream is blocking: the legacy stream would depend on it */
    {
        CUstreamCaptureStatus st;
        CK(p_cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    }
    OK(p_cuLaunchKernel_ptsz(k_fill, 2, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    OK(p_cuStreamEndCapture_ptsz(NULL, &g));
    ck_assert_uint_eq(node_count(g), 1);
    ck_assert(all_zero(buf_a));
    OK(p_cuGraphDestroy(g));
    check_no_leaks();
}
END_TEST

/* ------------------------------------------------------------------ capture interaction modes */

START_TEST(global_mode_unsafe_call_fails_and_invalidates)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING), o = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = 0;
    CUstreamCaptureStatus st;
    cuuint64_t id = 777;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 1, 0));
    CK(p_cuMemAlloc_v2(&p, 256), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    OK(p_cuStreamGetCaptureInfo(s, &st, &id));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    ck_assert_uint_eq(id, 777); /* no id for an invalidated capture */
    CK(fill(s, buf_a, 1, 0), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(p_cuStreamWriteValue64_v2(s, slot, 1, 0), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(p_cuMemsetD32Async(buf_a, 1, 4, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* an invalidated capture still prohibits, until it ends */
    CK(p_cuMemFree_v2(buf_b), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(p_cuStreamSynchronize(o), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    OK(fill(o, buf_b, 3, 0)); /* other streams run as usual */
    end_invalidated(s);
    ck_assert(all_zero(buf_a));
    OK(p_cuMemAlloc_v2(&p, 256));
    OK(p_cuMemFree_v2(p));
    OK(p_cuStreamDestroy_v2(s));
    OK(p_cuStreamDestroy_v2(o));
    check_no_leaks();
}
END_TEST

START_TEST(global_capture_is_invalidated_by_other_threads_unsafe_call)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    job_t j;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 1, 0));
    j = on_other_thread(JOB_MEMALLOC, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    ck_assert_int_eq(j.initial_mode, CU_STREAM_CAPTURE_MODE_GLOBAL); /* the default */
    CK(j.rc, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_invalidated(s);
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(relaxed_thread_may_allocate_during_global_capture)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = 0;
    CUgraph g;
    job_t j;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 1, 0));
    j = on_other_thread(JOB_MEMALLOC, CU_STREAM_CAPTURE_MODE_RELAXED, NULL);
    OK(j.rc);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    /* a THREAD_LOCAL thread ignores other threads' captures too */
    j = on_other_thread(JOB_MEMALLOC, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL);
    OK(j.rc);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    /* and the capturing thread itself, once relaxed */
    ck_assert_int_eq(set_mode(CU_STREAM_CAPTURE_MODE_RELAXED), CU_STREAM_CAPTURE_MODE_GLOBAL);
    OK(p_cuMemAlloc_v2(&p, 256));
    OK(p_cuMemFree_v2(p));
    ck_assert_int_eq(set_mode(CU_STREAM_CAPTURE_MODE_GLOBAL), CU_STREAM_CAPTURE_MODE_RELAXED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(p_cuStreamEndCapture(s, &g));
    ck_assert_uint_eq(node_count(g), 1);
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(thread_local_capture_only_prohibits_its_own_thread)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = 0;
    CUgraph g;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    OK(on_other_thread(JOB_MEMALLOC, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL).rc);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphDestroy(g));

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CK(p_cuMemAlloc_v2(&p, 256), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_invalidated(s);

    /* this thread in THREAD_LOCAL mode: its own capture still prohibits */
    set_mode(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuMemAlloc_v2(&p, 256), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated(s);
    set_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(relaxed_capture_prohibits_no_call_but_context_sync)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING), o = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = 0;
    CUgraph g;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(p_cuMemAlloc_v2(&p, 256));
    OK(p_cuMemFree_v2(p));
    OK(p_cuStreamSynchronize(o));
    OK(on_other_thread(JOB_MEMALLOC, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL).rc);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphDestroy(g));
    /* synchronizing the context would wait for the capturing stream: refused in every mode */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(on_other_thread(JOB_CTX_SYNC, CU_STREAM_CAPTURE_MODE_RELAXED, NULL).rc,
       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_invalidated(s);
    OK(p_cuStreamDestroy_v2(s));
    OK(p_cuStreamDestroy_v2(o));
    check_no_leaks();
}
END_TEST

START_TEST(synchronizing_a_capturing_stream_invalidates_it)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);

    set_mode(CU_STREAM_CAPTURE_MODE_RELAXED);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(p_cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_invalidated(s);
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(legacy_stream_work_during_blocking_capture_is_implicit)
{
    CUstream b = new_stream(0), nb = new_stream(CU_STREAM_NON_BLOCKING);
    CUstreamCaptureStatus st;
    uint32_t w[16] = {0};
    CUgraph g;

    /* a blocking stream: the legacy stream would wait for it */
    OK(p_cuStreamBeginCapture_v2(b, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(p_cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    ck_assert_int_eq(capture_status(b), CU_STREAM_CAPTURE_STATUS_ACTIVE); /* a query: no harm */
    CK(fill(NULL, buf_a, 1, 0), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    ck_assert_int_eq(capture_status(b), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_invalidated(b);
    OK(p_cuStreamBeginCapture_v2(b, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuMemcpyHtoD_v2(buf_a, w, sizeof(w)), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    end_invalidated(b);
    ck_assert(all_zero(buf_a));
    /* a non-blocking one: synchronous copies and legacy-stream work go on, in any mode */
    OK(p_cuStreamBeginCapture_v2(nb, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamIsCapturing(NULL, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    OK(p_cuMemcpyHtoD_v2(buf_a, w, sizeof(w)));
    OK(p_cuMemcpyDtoH_v2(w, buf_a, sizeof(w)));
    OK(p_cuMemsetD8_v2(buf_a, 0, 64));
    OK(fill(NULL, buf_b, 1, 0));
    ck_assert_int_eq(capture_status(nb), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(p_cuStreamEndCapture(nb, &g));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(b));
    OK(p_cuStreamDestroy_v2(nb));
    check_no_leaks();
}
END_TEST

START_TEST(end_capture_from_wrong_thread)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUstreamCaptureMode strict[] = {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL};
    CUgraph g = (CUgraph)0x1;
    job_t j;

    for (int i = 0; i < 2; i++) {
        OK(p_cuStreamBeginCapture_v2(s, strict[i]));
        OK(fill(s, buf_a, 1, 0));
        j = on_other_thread(JOB_END_CAPTURE, CU_STREAM_CAPTURE_MODE_GLOBAL, s);
        CK(j.rc, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
        ck_assert_ptr_null(j.graph);
        /* the driver ends the capture all the same, keeping no graph */
        ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
        CK(p_cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
        check_no_leaks();
    }
    /* a RELAXED capture may end anywhere */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(on_other_thread(JOB_LAUNCH, CU_STREAM_CAPTURE_MODE_GLOBAL, s).rc);
    j = on_other_thread(JOB_END_CAPTURE, CU_STREAM_CAPTURE_MODE_GLOBAL, s);
    OK(j.rc);
    ck_assert_uint_eq(node_count(j.graph), 1);
    OK(p_cuGraphDestroy(j.graph));
    ck_assert(all_zero(buf_b));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(capture_mode_is_per_thread_and_exchanged)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;

    OK(p_cuThreadExchangeStreamCaptureMode(&m));
    ck_assert_int_eq(m, CU_STREAM_CAPTURE_MODE_GLOBAL);
    ck_assert_int_eq(on_other_thread(JOB_MEMALLOC, CU_STREAM_CAPTURE_MODE_RELAXED, NULL).initial_mode,
                     CU_STREAM_CAPTURE_MODE_GLOBAL);
    m = CU_STREAM_CAPTURE_MODE_RELAXED;
    OK(p_cuThreadExchangeStreamCaptureMode(&m));
    ck_assert_int_eq(m, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    /* the driver takes any value (and crashes on NULL) */
    m = (CUstreamCaptureMode)9;
    OK(p_cuThreadExchangeStreamCaptureMode(&m));
    ck_assert_int_eq(m, CU_STREAM_CAPTURE_MODE_RELAXED);
    m = CU_STREAM_CAPTURE_MODE_GLOBAL;
    OK(p_cuThreadExchangeStreamCaptureMode(&m));
    ck_assert_int_eq(m, 9);
}
END_TEST

/* ------------------------------------------------------------------ graphs */

static CUDA_KERNEL_NODE_PARAMS fill_node(recap__fill_params_t *p, void **args, CUdeviceptr dst)
{
    CUDA_KERNEL_NODE_PARAMS kp;

    memset(p, 0, sizeof(*p));
    p->dst = dst;
    p->n = NWORDS;
    p->philox.seed = 99;
    recap__fill_keys(99, &p->keys);
    args[0] = p;
    memset(&kp, 0, sizeof(kp));
    kp.func = k_fill;
    kp.gridDimX = 2;
    kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 64;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    return kp;
}

START_TEST(instantiate_takes_a_snapshot)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e;
    CUgraphNode node;
    recap__fill_params_t fp;
    void *args[1];
    CUDA_KERNEL_NODE_PARAMS kp = fill_node(&fp, args, buf_b);

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(advance(s, 3));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    OK(p_cuGraphAddKernelNode_v2(&node, g, NULL, 0, &kp));
    ck_assert_uint_eq(node_count(g), 2);
    if (d_node_count != NULL)
        ck_assert_uint_eq(d_node_count((CUgraph)e), 1);
    OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    ck_assert_uint_eq(slot_offset(), 3);
    ck_assert(all_zero(buf_b)); /* the node added later is not in the executable */
    /* the executable outlives its graph */
    OK(p_cuGraphDestroy(g));
    OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    ck_assert_uint_eq(slot_offset(), 6);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(clone_is_a_deep_copy)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g, c;
    CUgraphExec e;
    CUgraphNode node;
    recap__fill_params_t fp;
    void *args[1];
    CUDA_KERNEL_NODE_PARAMS kp = fill_node(&fp, args, buf_b);
    uint32_t want[NWORDS], got[NWORDS];

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 11, 8));
    OK(advance(s, 1));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphClone(&c, g));
    ck_assert_uint_eq(node_count(c), 2);
    OK(p_cuGraphAddKernelNode_v2(&node, g, NULL, 0, &kp)); /* the original changes, not the clone */
    ck_assert_uint_eq(node_count(g), 3);
    ck_assert_uint_eq(node_count(c), 2);
    OK(p_cuGraphDestroy(g));
    OK(p_cuGraphInstantiateWithFlags(&e, c, 0));
    OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    ck_assert_uint_eq(slot_offset(), 1);
    ck_assert(all_zero(buf_b));
    read_words(buf_a, got, NWORDS);
    OK(fill(s, buf_b, 11, 8));
    OK(p_cuStreamSynchronize(s));
    read_words(buf_b, want, NWORDS);
    ck_assert_mem_eq(got, want, sizeof(got));
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(c));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(instantiate_variants_and_upload)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e1, e2, e3, e4;
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    CUgraphNode err = NULL;
    char log[32] = "x";

    OK(p_cuGraphCreate(&g, 0));
    ck_assert_uint_eq(node_count(g), 0);
    OK(p_cuGraphDestroy(g));
    CK(p_cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(advance(s, 5));
    OK(p_cuStreamEndCapture(s, &g));
    memset(&ip, 0, sizeof(ip));
    ip.result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
    OK(p_cuGraphInstantiateWithParams(&e1, g, &ip));
    ck_assert_int_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
    OK(p_cuGraphInstantiate(&e2, g, &err, log, sizeof(log)));
    OK(p_cuGraphInstantiate_v2(&e3, g, &err, log, sizeof(log)));
    OK(p_cuGraphInstantiateWithFlags(&e4, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    OK(p_cuGraphUpload(e1, s));
    OK(p_cuGraphLaunch(e1, s));
    OK(p_cuGraphLaunch(e2, s));
    OK(p_cuGraphLaunch_ptsz(e3, s));
    OK(p_cuStreamSynchronize(s)); /* the legacy stream does not wait for a non-blocking one */
    OK(p_cuGraphLaunch(e4, NULL));
    OK(p_cuStreamSynchronize(NULL));
    ck_assert_uint_eq(slot_offset(), 20);
    OK(p_cuGraphExecDestroy(e1));
    OK(p_cuGraphExecDestroy(e2));
    OK(p_cuGraphExecDestroy(e3));
    OK(p_cuGraphExecDestroy(e4));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(graph_launch_into_a_capture_is_unsupported)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(advance(s, 1));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuGraphLaunch(e, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CK(p_cuGraphLaunch(e, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); /* not ..._INVALIDATED */
    end_invalidated(s);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(p_cuGraphLaunch(e, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); /* whatever the mode */
    end_invalidated(s);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuGraphUpload(e, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated(s);
    ck_assert_uint_eq(slot_offset(), 0);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(instantiate_and_exec_destroy_are_potentially_unsafe)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING), o = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g, g2, c, live;
    CUgraphExec e, e2 = NULL;
    CUstreamCaptureStatus st;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(advance(s, 1));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    /* in a GLOBAL capture: instantiating (any graph) and destroying an executable are refused */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuGraphInstantiateWithFlags(&e2, g, 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated(s);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuGraphExecDestroy(e), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated(s);
    /* other graph and stream calls are not */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuGraphCreate(&g2, 0));
    OK(p_cuGraphClone(&c, g));
    OK(p_cuGraphDestroy(c));
    OK(p_cuGraphDestroy(g2));
    OK(p_cuGraphLaunch(e, o));
    OK(p_cuGraphUpload(e, o));
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(p_cuStreamEndCapture(s, &c));
    OK(p_cuGraphDestroy(c));
    /* in a RELAXED capture even the graph being captured can be instantiated */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(advance(s, 1));
    OK(p_cuStreamGetCaptureInfo_v2(s, &st, NULL, &live, NULL, NULL));
    OK(p_cuGraphInstantiateWithFlags(&e2, live, 0));
    OK(p_cuGraphExecDestroy(e2));
    OK(p_cuStreamEndCapture(s, &c));
    OK(p_cuGraphDestroy(c));
    OK(p_cuStreamSynchronize(o));
    ck_assert_uint_eq(slot_offset(), 1);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    OK(p_cuStreamDestroy_v2(o));
    check_no_leaks();
}
END_TEST

/* Captured memory operations are not checked when captured: memsets at instantiation, stream
 * writes when a launch reaches them (the nodes before have run then). */
START_TEST(memory_operation_nodes_are_checked_at_instantiate_or_launch)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e = NULL;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuMemsetD32Async(slot, 1, 1000, s)); /* 4000 bytes into 16 */
    OK(p_cuStreamEndCapture(s, &g));
    CK(p_cuGraphInstantiateWithFlags(&e, g, 0), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuGraphDestroy(g));
    CK(p_cuMemsetD32Async(slot, 1, 1000, s), CUDA_ERROR_INVALID_VALUE);

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(advance(s, 1));
    OK(p_cuStreamWriteValue64_v2(s, (CUdeviceptr)0x10, 7, 0));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    CK(p_cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuStreamSynchronize(s));
    ck_assert_uint_eq(slot_offset(), 1);
    CK(p_cuStreamWriteValue64_v2(s, (CUdeviceptr)0x10, 7, 0), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuStreamWriteValue64_v2(s, slot + 4, 7, 0), CUDA_ERROR_INVALID_VALUE); /* misaligned */
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(destroyed_handles_are_accounted_and_refused)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g, c, empty;
    CUgraphExec e;

    if (!is_double())
        return; /* a real driver may crash on a destroyed handle */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(d_live_graphs(), base_graphs + 1); /* the graph being captured */
    OK(fill(s, buf_a, 1, 0));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphClone(&c, g));
    OK(p_cuGraphCreate(&empty, 0));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    ck_assert_int_eq(d_live_graphs(), base_graphs + 3);
    ck_assert_int_eq(d_live_execs(), base_execs + 1);
    OK(p_cuGraphDestroy(g));
    OK(p_cuGraphDestroy(c));
    OK(p_cuGraphDestroy(empty));
    OK(p_cuGraphExecDestroy(e));
    check_no_leaks();
    CK(p_cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuGraphExecDestroy(e), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuGraphInstantiateWithFlags(&e, g, 0), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuGraphClone(&c, (CUgraph)&c), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(d_node_count(g), 0);
    /* an invalidated capture's graph goes with it */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 1, 0));
    CK(p_cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated(s);
    /* as does the graph of a capture ended with no graph pointer, or whose stream is destroyed */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamEndCapture(s, NULL));
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

/* ------------------------------------------------------------------ stream memory operations */

START_TEST(stream_write_value_in_capture_becomes_a_node)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e;
    uint64_t v[2];
    unsigned long ops;
    int attr = 0;

    OK(p_cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 0));
    ck_assert_int_eq(attr, 1);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamWriteValue64_v2(s, slot, 0x1122334455667788ull, 0));
    OK(p_cuStreamWriteValue32_v2(s, slot + 8, 0xabcdef01u, 0));
    OK(p_cuStreamEndCapture(s, &g));
    ck_assert_uint_eq(node_count(g), 2);
    OK(p_cuMemcpyDtoH_v2(v, slot, sizeof(v)));
    ck_assert_uint_eq(v[0], 0);
    ck_assert_uint_eq(v[1], 0);
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    ops = is_double() ? d_stream_ops() : 0;
    OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    if (is_double())
        ck_assert_uint_eq(d_stream_ops() - ops, 2);
    OK(p_cuMemcpyDtoH_v2(v, slot, sizeof(v)));
    ck_assert_uint_eq(v[0], 0x1122334455667788ull);
    ck_assert_uint_eq(v[1], 0xabcdef01u);
    /* outside a capture the write happens on the stream at once */
    OK(p_cuStreamWriteValue64_v2(s, slot, 5, 0));
    OK(p_cuStreamSynchronize(s));
    OK(p_cuMemcpyDtoH_v2(v, slot, sizeof(v)));
    ck_assert_uint_eq(v[0], 5);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(async_copies_and_memsets_in_capture_become_nodes)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e;
    static uint32_t in[64], out[64];
    uint32_t w[64];
    unsigned long ops;

    for (int i = 0; i < 64; i++)
        in[i] = 1000u + (uint32_t)i;
    memset(out, 0, sizeof(out));
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuMemsetD32Async(buf_a, 0x5a5a5a5au, 64, s));
    OK(p_cuMemcpyHtoDAsync_v2(buf_b, in, sizeof(in), s));
    OK(p_cuMemcpyDtoHAsync_v2(out, buf_a, sizeof(out), s));
    OK(p_cuStreamEndCapture(s, &g));
    ck_assert_uint_eq(node_count(g), 3);
    ck_assert(all_zero(buf_a));
    ck_assert(all_zero(buf_b));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    in[0] = 7; /* copies read host memory when they run */
    ops = is_double() ? d_stream_ops() : 0;
    OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    if (is_double())
        ck_assert_uint_eq(d_stream_ops() - ops, 3);
    for (int i = 0; i < 64; i++)
        ck_assert_uint_eq(out[i], 0x5a5a5a5au);
    read_words(buf_b, w, 64);
    ck_assert_uint_eq(w[0], 7);
    ck_assert_uint_eq(w[63], 1063);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

/* ------------------------------------------------------------------ the double's own knobs */

START_TEST(fault_injection_fails_the_next_calls)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = 0;
    CUgraph g;
    CUgraphExec e;

    if (!is_double())
        return;
    d_fail_next("cuMemAlloc_v2", 2);
    CK(p_cuMemAlloc_v2(&p, 64), CUDA_ERROR_OUT_OF_MEMORY);
    CK(p_cuMemAlloc_v2(&p, 64), CUDA_ERROR_OUT_OF_MEMORY);
    OK(p_cuMemAlloc_v2(&p, 64));
    OK(p_cuMemFree_v2(p));
    d_fail_next("cuStreamBeginCapture_v2", 1);
    CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_UNKNOWN);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(advance(s, 1));
    d_fail_next("cuStreamEndCapture", 1);
    CK(p_cuStreamEndCapture(s, &g), CUDA_ERROR_UNKNOWN);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE); /* untouched */
    OK(p_cuStreamEndCapture(s, &g));
    d_fail_next("cuGraphInstantiateWithFlags", 1);
    CK(p_cuGraphInstantiateWithFlags(&e, g, 0), CUDA_ERROR_UNKNOWN);
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    d_fail_next("cuGraphLaunch", 3);
    d_fail_next("cuGraphLaunch", 1); /* re-arming replaces the count */
    CK(p_cuGraphLaunch(e, s), CUDA_ERROR_UNKNOWN);
    OK(p_cuGraphLaunch(e, s));
    ck_assert_uint_eq(slot_offset(), 1); /* the failed launch ran nothing */
    d_fail_next("cuLaunchKernel", 1);
    d_fail_next("cuLaunchKernel", 0); /* disarmed */
    OK(advance(s, 1));
    /* each export counts on its own: the _ptsz variant is another function */
    d_fail_next("cuGraphLaunch_ptsz", 1);
    OK(p_cuGraphLaunch(e, s));
    CK(p_cuGraphLaunch_ptsz(e, s), CUDA_ERROR_UNKNOWN);
    ck_assert_uint_eq(slot_offset(), 3);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

/* ------------------------------------------------------------------ threads */

#define NTHREADS 6
#define NLAUNCH 25

typedef struct {
    int index;
    CUresult rc;
    size_t nodes;
    uint64_t offset;
} worker_t;

/* Each thread captures its own stream (THREAD_LOCAL, so the others' captures do not matter),
 * allocates a slot in RELAXED mode mid-capture, and runs its graph NLAUNCH times. */
static void *worker(void *arg)
{
    worker_t *w = arg;
    CUstream s = NULL;
    CUdeviceptr my_slot = 0;
    CUgraph g = NULL;
    CUgraphExec e = NULL;
    recap__advance_params_t p;
    void *args[] = {&p};
    uint64_t v[2] = {0, 0};
    CUstreamCaptureMode m;

#define TRY(expr)                                 \
    if ((w->rc = (expr)) != CUDA_SUCCESS)         \
        return NULL;
    TRY(p_cuCtxSetCurrent(ctx));
    m = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    TRY(p_cuThreadExchangeStreamCaptureMode(&m));
    TRY(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    TRY(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    m = CU_STREAM_CAPTURE_MODE_RELAXED;
    TRY(p_cuThreadExchangeStreamCaptureMode(&m));
    TRY(p_cuMemAlloc_v2(&my_slot, 16));
    TRY(p_cuThreadExchangeStreamCaptureMode(&m));
    TRY(p_cuMemcpyHtoD_v2(my_slot, v, sizeof(v)));
    memset(&p, 0, sizeof(p));
    p.slot[0] = my_slot;
    p.inc[0] = (uint64_t)w->index + 1;
    p.count = 1;
    for (int i = 0; i < 3; i++)
        TRY(p_cuLaunchKernel(k_advance, 1, 1, 1, RECAP_SLOTS_PER_LAUNCH, 1, 1, 0, s, args, NULL));
    TRY(p_cuStreamEndCapture(s, &g));
    TRY(p_cuGraphGetNodes(g, NULL, &w->nodes));
    TRY(p_cuGraphInstantiateWithFlags(&e, g, 0));
    for (int i = 0; i < NLAUNCH; i++)
        TRY(p_cuGraphLaunch(e, s));
    TRY(p_cuStreamSynchronize(s));
    TRY(p_cuMemcpyDtoH_v2(v, my_slot, sizeof(v)));
    w->offset = v[1];
    TRY(p_cuGraphExecDestroy(e));
    TRY(p_cuGraphDestroy(g));
    TRY(p_cuMemFree_v2(my_slot));
    TRY(p_cuStreamDestroy_v2(s));
#undef TRY
    return NULL;
}

START_TEST(threads_capture_and_launch_concurrently)
{
    pthread_t t[NTHREADS];
    worker_t w[NTHREADS];

    for (int i = 0; i < NTHREADS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].index = i;
        ck_assert_int_eq(pthread_create(&t[i], NULL, worker, &w[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        CK(w[i].rc, CUDA_SUCCESS);
        ck_assert_uint_eq(w[i].nodes, 3);
        ck_assert_uint_eq(w[i].offset, 3u * NLAUNCH * (uint64_t)(i + 1));
    }
    check_no_leaks();
}
END_TEST

int main(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    Suite *s;
    TCase *tc;

    if (path == NULL || *path == '\0') {
        fprintf(stderr, "test_double: RECAP_CUDA_DRIVER is empty: nothing to test\n");
        return 77;
    }
    s = suite_create("double");
    tc = tcase_create("capture");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, capture_records_kernel_nodes_without_running_them);
    tcase_add_test(tc, graph_launch_writes_what_eager_launch_writes);
    tcase_add_test(tc, k_graph_launches_run_the_nodes_k_times);
    tcase_add_test(tc, capture_ids_are_unique_and_increasing);
    tcase_add_test(tc, begin_and_end_capture_errors);
    tcase_add_test(tc, per_thread_stream_variants_capture_the_per_thread_stream);
    tcase_add_test(tc, global_mode_unsafe_call_fails_and_invalidates);
    tcase_add_test(tc, global_capture_is_invalidated_by_other_threads_unsafe_call);
    tcase_add_test(tc, relaxed_thread_may_allocate_during_global_capture);
    tcase_add_test(tc, thread_local_capture_only_prohibits_its_own_thread);
    tcase_add_test(tc, relaxed_capture_prohibits_no_call_but_context_sync);
    tcase_add_test(tc, synchronizing_a_capturing_stream_invalidates_it);
    tcase_add_test(tc, legacy_stream_work_during_blocking_capture_is_implicit);
    tcase_add_test(tc, end_capture_from_wrong_thread);
    tcase_add_test(tc, capture_mode_is_per_thread_and_exchanged);
    tcase_add_test(tc, instantiate_takes_a_snapshot);
    tcase_add_test(tc, clone_is_a_deep_copy);
    tcase_add_test(tc, instantiate_variants_and_upload);
    tcase_add_test(tc, graph_launch_into_a_capture_is_unsupported);
    tcase_add_test(tc, instantiate_and_exec_destroy_are_potentially_unsafe);
    tcase_add_test(tc, memory_operation_nodes_are_checked_at_instantiate_or_launch);
    tcase_add_test(tc, destroyed_handles_are_accounted_and_refused);
    tcase_add_test(tc, stream_write_value_in_capture_becomes_a_node);
    tcase_add_test(tc, async_copies_and_memsets_in_capture_become_nodes);
    tcase_add_test(tc, fault_injection_fails_the_next_calls);
    tcase_add_test(tc, threads_capture_and_launch_concurrently);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
