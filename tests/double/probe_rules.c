/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stream-capture rule probe: runs a fixed list of capture/graph scenarios against a CUDA driver
 * library and prints what each call returned, one line per observation. Run it against the real
 * libcuda.so.1 on a GPU machine and against the test double, then diff the outputs: every line
 * that differs is a place where the double does not behave like the driver.
 *
 *   make probe-rules
 *   tests/double/probe_rules /path/to/libcuda.so.1 src/kernels/kernels.fatbin
 *
 * Built on demand only (tests/double/Makefile.inc): a tool for checking the double against a
 * newer driver. CI builds it so it keeps compiling.
 */
#define _GNU_SOURCE
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fill_body.h"

#define FNS(X)                                                                                 \
    X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent)                    \
    X(cuModuleLoadData) X(cuModuleGetFunction) X(cuLaunchKernel) X(cuMemAlloc_v2)              \
    X(cuMemFree_v2) X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) X(cuMemcpyHtoDAsync_v2)              \
    X(cuMemcpyDtoHAsync_v2) X(cuMemsetD8_v2) X(cuMemsetD32Async) X(cuStreamCreate)             \
    X(cuStreamDestroy_v2) X(cuStreamSynchronize) X(cuCtxSynchronize) X(cuStreamBeginCapture_v2) \
    X(cuStreamBeginCapture_v2_ptsz) X(cuStreamBeginCapture_ptsz) X(cuStreamEndCapture)         \
    X(cuStreamIsCapturing) X(cuStreamGetCaptureInfo) X(cuStreamGetCaptureInfo_v2)              \
    X(cuThreadExchangeStreamCaptureMode) X(cuGraphCreate) X(cuGraphDestroy) X(cuGraphClone)    \
    X(cuGraphGetNodes) X(cuGraphInstantiateWithFlags) X(cuGraphInstantiate)                    \
    X(cuGraphExecDestroy) X(cuGraphLaunch) X(cuStreamWriteValue64_v2) X(cuStreamWriteValue32_v2) \
    X(cuGraphAddKernelNode_v2) X(cuGetErrorName) X(cuDeviceGetAttribute) X(cuGraphUpload) X(cuPointerGetAttribute)

#define DECL(f) static __typeof__(f) *p_##f;
FNS(DECL)
#undef DECL

static CUcontext ctx;
static CUfunction fill;
static CUdeviceptr buf;
static void *image;

static const char *en(CUresult rc)
{
    const char *s = "?";
    if (p_cuGetErrorName(rc, &s) != CUDA_SUCCESS)
        return "UNKNOWN_CODE";
    return s;
}

#define SHOW(label, rc) printf("%-58s %s\n", label, en(rc))

static const char *stname(CUstreamCaptureStatus s)
{
    return s == CU_STREAM_CAPTURE_STATUS_NONE ? "NONE"
           : s == CU_STREAM_CAPTURE_STATUS_ACTIVE ? "ACTIVE"
           : s == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "INVALIDATED" : "?";
}

static void status(const char *label, CUstream s)
{
    CUstreamCaptureStatus st = 99;
    CUresult rc = p_cuStreamIsCapturing(s, &st);
    printf("%-58s %s %s\n", label, en(rc), rc == CUDA_SUCCESS ? stname(st) : "-");
}

static CUresult launch(CUstream s)
{
    recap__fill_params_t p;
    void *args[] = {&p};

    memset(&p, 0, sizeof(p));
    p.dst = buf;
    p.n = 1000;
    p.philox.seed = 1;
    return p_cuLaunchKernel(fill, 2, 1, 1, 64, 1, 1, 0, s, args, NULL);
}

static CUstream mkstream(unsigned flags)
{
    CUstream s = NULL;
    if (p_cuStreamCreate(&s, flags) != CUDA_SUCCESS)
        abort();
    return s;
}

/* Ends a capture quietly and returns the node count of its graph (-1 for no graph). */
static long finish(CUstream s, const char *label)
{
    CUgraph g = (CUgraph)0x1;
    size_t n = 0;
    CUresult rc = p_cuStreamEndCapture(s, &g);
    char l[128];

    snprintf(l, sizeof(l), "%s: end", label);
    printf("%-58s %s graph=%s", l, en(rc), g == NULL ? "NULL" : g == (CUgraph)0x1 ? "unset" : "set");
    if (rc == CUDA_SUCCESS && g != NULL) {
        p_cuGraphGetNodes(g, NULL, &n);
        printf(" nodes=%zu", n);
        p_cuGraphDestroy(g);
    }
    printf("\n");
    return rc == CUDA_SUCCESS ? (long)n : -1;
}

static CUstreamCaptureMode set_mode(CUstreamCaptureMode m)
{
    p_cuThreadExchangeStreamCaptureMode(&m);
    return m;
}

/* ---------------------------------------------------------------- other-thread actions */

typedef struct {
    int what; /* 0 memalloc, 1 end capture, 2 ctx sync, 3 stream sync, 4 launch */
    CUstreamCaptureMode mode;
    CUstream stream;
    CUresult rc;
    CUgraph graph;
} job_t;

static void *job_main(void *arg)
{
    job_t *j = arg;
    CUdeviceptr p = 0;

    p_cuCtxSetCurrent(ctx);
    set_mode(j->mode);
    switch (j->what) {
    case 0:
        j->rc = p_cuMemAlloc_v2(&p, 256);
        if (j->rc == CUDA_SUCCESS)
            p_cuMemFree_v2(p);
        break;
    case 1: j->graph = (CUgraph)0x1; j->rc = p_cuStreamEndCapture(j->stream, &j->graph); break;
    case 2: j->rc = p_cuCtxSynchronize(); break;
    case 3: j->rc = p_cuStreamSynchronize(j->stream); break;
    case 4: j->rc = launch(j->stream); break;
    }
    return NULL;
}

static CUresult other_thread(int what, CUstreamCaptureMode mode, CUstream s, CUgraph *g)
{
    pthread_t t;
    job_t j = {what, mode, s, CUDA_SUCCESS, NULL};

    pthread_create(&t, NULL, job_main, &j);
    pthread_join(t, NULL);
    if (g != NULL)
        *g = j.graph;
    return j.rc;
}

/* ---------------------------------------------------------------- scenarios */

static void basics(void)
{
    CUstream s = mkstream(CU_STREAM_NON_BLOCKING);
    CUgraph g = (CUgraph)0x1;
    CUstreamCaptureStatus st = 99;
    cuuint64_t id = 12345, id2 = 0;
    CUgraph cg = NULL;
    const CUgraphNode *deps = NULL;
    size_t ndeps = 99;
    int v = -1;

    p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 0);
    printf("%-58s %d\n", "attr CAN_USE_64_BIT_STREAM_MEM_OPS", v);
    SHOW("begin legacy NULL", p_cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
    SHOW("begin CU_STREAM_LEGACY", p_cuStreamBeginCapture_v2(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL));
    SHOW("begin bad mode 7", p_cuStreamBeginCapture_v2(s, (CUstreamCaptureMode)7));
    status("  status after bad mode", s);
    SHOW("end not capturing", p_cuStreamEndCapture(s, &g));
    printf("%-58s %s\n", "  graph after end-not-capturing", g == NULL ? "NULL" : g == (CUgraph)0x1 ? "unset" : "set");
    SHOW("capinfo v1 not capturing", p_cuStreamGetCaptureInfo(s, &st, &id));
    printf("%-58s %s id=%s\n", "  ", stname(st), id == 12345 ? "unset" : id == 0 ? "0" : "other");
    SHOW("begin", p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    SHOW("begin again", p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    SHOW("capinfo v2 during", p_cuStreamGetCaptureInfo_v2(s, &st, &id, &cg, &deps, &ndeps));
    printf("%-58s %s id>0=%d graph=%s ndeps=%zu\n", "  ", stname(st), id > 0 && id != 12345,
           cg ? "set" : "NULL", ndeps);
    SHOW("launch in capture", launch(s));
    SHOW("capinfo v2 after launch", p_cuStreamGetCaptureInfo_v2(s, &st, NULL, NULL, NULL, &ndeps));
    printf("%-58s %s ndeps=%zu\n", "  ", stname(st), ndeps);
    SHOW("capinfo v2 all NULL", p_cuStreamGetCaptureInfo_v2(s, &st, NULL, NULL, NULL, NULL));
    SHOW("end with NULL graph ptr", p_cuStreamEndCapture(s, NULL));
    status("  status after end(NULL)", s);
    finish(s, "basic");
    status("  status after end", s);
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    p_cuStreamGetCaptureInfo(s, &st, &id2);
    printf("%-58s %s\n", "next capture id == id + 1", id2 == id + 1 ? "yes" : id2 > id ? "greater" : "no");
    finish(s, "empty");
    /* per-thread default stream */
    SHOW("begin ptsz NULL (per-thread stream)", p_cuStreamBeginCapture_v2_ptsz(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
    status("  legacy NULL status (non-ptsz IsCapturing)", NULL);
    status("  CU_STREAM_PER_THREAD status", CU_STREAM_PER_THREAD);
    SHOW("  launch on CU_STREAM_PER_THREAD", launch(CU_STREAM_PER_THREAD));
    finish(CU_STREAM_PER_THREAD, "ptsz");
    if (p_cuStreamBeginCapture_ptsz != NULL) {
        /* the 1-argument legacy form: which mode? a cuMemAlloc from another thread tells */
        SHOW("legacy 1-arg cuStreamBeginCapture_ptsz(s)", ((CUresult(*)(CUstream))p_cuStreamBeginCapture_ptsz)(s));
        SHOW("  other-thread memalloc (GLOBAL)", other_thread(0, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, NULL));
        status("  status", s);
        finish(s, "legacy 1-arg");
    }
    p_cuStreamDestroy_v2(s);
}

static void unsafe_calls(void)
{
    CUstream s = mkstream(CU_STREAM_NON_BLOCKING), b = mkstream(0), o = mkstream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = 0;
    uint32_t host[64];
    CUmodule m;

    memset(host, 0, sizeof(host));
    /* same thread, GLOBAL */
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    launch(s);
    SHOW("G same-thread memalloc", p_cuMemAlloc_v2(&p, 256));
    status("  status", s);
    SHOW("  memalloc again", p_cuMemAlloc_v2(&p, 256));
    SHOW("  launch into invalidated", launch(s));
    SHOW("  launch on other stream", launch(o));
    SHOW("  begin again on invalidated", p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    finish(s, "  G same-thread memalloc");
    SHOW("  memalloc after end", p_cuMemAlloc_v2(&p, 256));
    p_cuMemFree_v2(p);

    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("G other-thread GLOBAL memalloc", other_thread(0, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, NULL));
    status("  status", s);
    finish(s, "  G other-thread");

    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("G other-thread THREAD_LOCAL memalloc", other_thread(0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL, NULL));
    status("  status", s);
    SHOW("G other-thread RELAXED memalloc", other_thread(0, CU_STREAM_CAPTURE_MODE_RELAXED, NULL, NULL));
    status("  status", s);
    set_mode(CU_STREAM_CAPTURE_MODE_RELAXED);
    SHOW("G same-thread RELAXED memalloc", p_cuMemAlloc_v2(&p, 256));
    p_cuMemFree_v2(p);
    status("  status", s);
    set_mode(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    SHOW("G same-thread THREAD_LOCAL memalloc", p_cuMemAlloc_v2(&p, 256));
    status("  status", s);
    set_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);
    finish(s, "  G");

    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    SHOW("TL other-thread GLOBAL memalloc", other_thread(0, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, NULL));
    status("  status", s);
    SHOW("TL same-thread GLOBAL memalloc", p_cuMemAlloc_v2(&p, 256));
    status("  status", s);
    finish(s, "  TL");

    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    SHOW("R same-thread GLOBAL memalloc", p_cuMemAlloc_v2(&p, 256));
    p_cuMemFree_v2(p);
    status("  status", s);
    SHOW("R other-thread GLOBAL memalloc", other_thread(0, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, NULL));
    status("  status", s);
    SHOW("R same-thread GLOBAL ctxsync", p_cuCtxSynchronize());
    status("  status", s);
    finish(s, "  R");

    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    set_mode(CU_STREAM_CAPTURE_MODE_RELAXED);
    SHOW("R+relaxed thread: ctxsync", p_cuCtxSynchronize());
    status("  status", s);
    SHOW("R+relaxed thread: streamsync other", p_cuStreamSynchronize(o));
    status("  status", s);
    SHOW("R+relaxed thread: memalloc", p_cuMemAlloc_v2(&p, 256));
    status("  status", s);
    SHOW("R+relaxed thread: memfree", p_cuMemFree_v2(p));
    status("  status", s);
    SHOW("R+relaxed thread: memcpyHtoD sync (nonblocking cap)", p_cuMemcpyHtoD_v2(buf, host, 64));
    status("  status", s);
    SHOW("R+relaxed thread: memcpyDtoH sync", p_cuMemcpyDtoH_v2(host, buf, 64));
    status("  status", s);
    SHOW("R+relaxed thread: memsetD8 sync", p_cuMemsetD8_v2(buf, 0, 64));
    status("  status", s);
    SHOW("R+relaxed thread: moduleload", p_cuModuleLoadData(&m, image));
    status("  status", s);
    SHOW("R+relaxed thread: launch legacy", launch(NULL));
    status("  status", s);
    SHOW("R+relaxed thread: streamsync legacy", p_cuStreamSynchronize(NULL));
    status("  status", s);
    SHOW("R+relaxed thread: streamsync capturing", p_cuStreamSynchronize(s));
    status("  status", s);
    set_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);
    finish(s, "  R+relaxed");

    /* blocking capture stream + legacy stream work, relaxed everywhere */
    set_mode(CU_STREAM_CAPTURE_MODE_RELAXED);
    p_cuStreamBeginCapture_v2(b, CU_STREAM_CAPTURE_MODE_RELAXED);
    status("Rb: IsCapturing(legacy NULL)", NULL);
    status("  status b", b);
    SHOW("Rb: launch legacy", launch(NULL));
    status("  status b", b);
    finish(b, "  Rb launch legacy");
    p_cuStreamBeginCapture_v2(b, CU_STREAM_CAPTURE_MODE_RELAXED);
    SHOW("Rb: memcpyHtoD sync", p_cuMemcpyHtoD_v2(buf, host, 64));
    status("  status b", b);
    finish(b, "  Rb memcpy");
    p_cuStreamBeginCapture_v2(b, CU_STREAM_CAPTURE_MODE_RELAXED);
    SHOW("Rb: streamsync legacy", p_cuStreamSynchronize(NULL));
    status("  status b", b);
    finish(b, "  Rb sync legacy");
    p_cuStreamBeginCapture_v2(b, CU_STREAM_CAPTURE_MODE_RELAXED);
    SHOW("Rb: launch on other nonblocking", launch(o));
    SHOW("Rb: memcpyHtoDAsync legacy", p_cuMemcpyHtoDAsync_v2(buf, host, 64, NULL));
    status("  status b", b);
    finish(b, "  Rb async legacy");
    set_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);

    /* GLOBAL, same thread, each unsafe call on a fresh capture */
#define G_CASE(label, call)                                                 \
    do {                                                                    \
        p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);        \
        SHOW(label, call);                                                  \
        status("  status", s);                                              \
        finish(s, "  " label);                                              \
    } while (0)
    G_CASE("G: ctxsync", p_cuCtxSynchronize());
    G_CASE("G: streamsync other", p_cuStreamSynchronize(o));
    G_CASE("G: streamsync capturing", p_cuStreamSynchronize(s));
    G_CASE("G: streamsync legacy", p_cuStreamSynchronize(NULL));
    G_CASE("G: memcpyHtoD sync", p_cuMemcpyHtoD_v2(buf, host, 64));
    G_CASE("G: memcpyDtoH sync", p_cuMemcpyDtoH_v2(host, buf, 64));
    G_CASE("G: memsetD8 sync", p_cuMemsetD8_v2(buf, 0, 64));
    G_CASE("G: memfree bogus", p_cuMemFree_v2(buf + 4));
    G_CASE("G: moduleload", p_cuModuleLoadData(&m, image));
    G_CASE("G: launch legacy", launch(NULL));
    G_CASE("G: launch other stream", launch(o));
    G_CASE("G: memcpyHtoDAsync other stream", p_cuMemcpyHtoDAsync_v2(buf, host, 64, o));
    G_CASE("G: memcpyHtoDAsync legacy", p_cuMemcpyHtoDAsync_v2(buf, host, 64, NULL));
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("G: other-thread ctxsync", other_thread(2, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, NULL));
    status("  status", s);
    finish(s, "  G other ctxsync");
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("G: other-thread streamsync other", other_thread(3, CU_STREAM_CAPTURE_MODE_GLOBAL, o, NULL));
    status("  status", s);
    finish(s, "  G other streamsync");
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("G: other-thread RELAXED streamsync capturing", other_thread(3, CU_STREAM_CAPTURE_MODE_RELAXED, s, NULL));
    status("  status", s);
    finish(s, "  G other relaxed streamsync capturing");
    p_cuStreamDestroy_v2(s);
    p_cuStreamDestroy_v2(b);
    p_cuStreamDestroy_v2(o);
}

static void wrong_thread(void)
{
    CUstream s = mkstream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUstreamCaptureMode modes[] = {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                   CU_STREAM_CAPTURE_MODE_RELAXED};
    const char *names[] = {"GLOBAL", "THREAD_LOCAL", "RELAXED"};
    char l[128];

    for (int i = 0; i < 3; i++) {
        p_cuStreamBeginCapture_v2(s, modes[i]);
        launch(s);
        snprintf(l, sizeof(l), "end from other thread, capture %s", names[i]);
        SHOW(l, other_thread(1, CU_STREAM_CAPTURE_MODE_GLOBAL, s, &g));
        printf("%-58s %s\n", "  graph", g == NULL ? "NULL" : g == (CUgraph)0x1 ? "unset" : "set");
        if (g != NULL && g != (CUgraph)0x1)
            p_cuGraphDestroy(g);
        status("  status", s);
        SHOW("  launch after", launch(s));
        finish(s, "  then end from owner");
    }
    p_cuStreamDestroy_v2(s);
}

static void graphs(void)
{
    CUstream s = mkstream(CU_STREAM_NON_BLOCKING);
    CUgraph g = NULL, g2 = NULL, c = NULL;
    CUgraphExec e = NULL, e2 = NULL;
    size_t n = 0;
    uint32_t host[64];
    CUdeviceptr w = 0;

    p_cuMemAlloc_v2(&w, 256);
    memset(host, 0, sizeof(host));
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    launch(s);
    launch(s);
    SHOW("writevalue64 in capture", p_cuStreamWriteValue64_v2(s, w, 7, 0));
    SHOW("writevalue32 in capture", p_cuStreamWriteValue32_v2(s, w + 8, 7, 0));
    SHOW("writevalue64 bad address in capture", p_cuStreamWriteValue64_v2(s, 0x10, 7, 0));
    status("  status", s);
    SHOW("memcpyHtoDAsync pageable in capture", p_cuMemcpyHtoDAsync_v2(w, host, 64, s));
    status("  status", s);
    SHOW("memcpyDtoHAsync pageable in capture", p_cuMemcpyDtoHAsync_v2(host, w, 64, s));
    status("  status", s);
    SHOW("memsetD32Async in capture", p_cuMemsetD32Async(w, 1, 16, s));
    status("  status", s);
    SHOW("end", p_cuStreamEndCapture(s, &g));
    if (g != NULL) {
        p_cuGraphGetNodes(g, NULL, &n);
        printf("%-58s %zu\n", "  nodes", n);
    }
    SHOW("instantiate", p_cuGraphInstantiateWithFlags(&e, g, 0));
    SHOW("clone", p_cuGraphClone(&c, g));
    n = 0;
    p_cuGraphGetNodes(c, NULL, &n);
    printf("%-58s %zu\n", "  clone nodes", n);
    SHOW("launch exec", p_cuGraphLaunch(e, s));
    SHOW("launch exec legacy", p_cuGraphLaunch(e, NULL));
    SHOW("sync", p_cuStreamSynchronize(s));
    /* graph launch inside a capture */
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("graph launch into capture", p_cuGraphLaunch(e, s));
    launch(s);
    finish(s, "  graph launch into capture");
    /* snapshot: add a node after instantiation */
    if (p_cuGraphAddKernelNode_v2 != NULL) {
        CUDA_KERNEL_NODE_PARAMS kp;
        recap__fill_params_t fp;
        void *args[] = {&fp};
        CUgraphNode node;

        memset(&fp, 0, sizeof(fp));
        fp.dst = buf;
        fp.n = 100;
        memset(&kp, 0, sizeof(kp));
        kp.func = fill;
        kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
        kp.blockDimX = 32;
        kp.blockDimY = kp.blockDimZ = 1;
        kp.kernelParams = args;
        SHOW("add kernel node", p_cuGraphAddKernelNode_v2(&node, g, NULL, 0, &kp));
        n = 0;
        p_cuGraphGetNodes(g, NULL, &n);
        printf("%-58s %zu\n", "  nodes", n);
    }
    SHOW("empty graph create", p_cuGraphCreate(&g2, 0));
    SHOW("instantiate empty", p_cuGraphInstantiateWithFlags(&e2, g2, 0));
    SHOW("launch empty", p_cuGraphLaunch(e2, s));
    SHOW("exec destroy", p_cuGraphExecDestroy(e2));
    if (p_cuGraphInstantiate != NULL) {
        CUgraphNode en_ = NULL;
        char logbuf[64] = "";
        SHOW("v1 instantiate", ((CUresult(*)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t))
                                    p_cuGraphInstantiate)(&e2, g2, &en_, logbuf, sizeof(logbuf)));
        p_cuGraphExecDestroy(e2);
    }
    SHOW("graph destroy (with exec alive)", p_cuGraphDestroy(g));
    SHOW("launch exec after graph destroy", p_cuGraphLaunch(e, s));
    SHOW("sync", p_cuStreamSynchronize(s));
    p_cuGraphExecDestroy(e);
    p_cuGraphDestroy(c);
    p_cuGraphDestroy(g2);
    p_cuMemFree_v2(w);
    p_cuStreamDestroy_v2(s);
}


/* Follow-ups: one node kind per graph, so a launch failure names its cause. */
static void graph_kinds(void)
{
    CUstream s = mkstream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr w = 0;
    static uint32_t host[64];
    CUgraph g;
    CUgraphExec e;

    p_cuMemAlloc_v2(&w, 256);
#define KIND(label, call)                                                                   \
    do {                                                                                    \
        g = NULL;                                                                           \
        e = NULL;                                                                           \
        p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);                        \
        SHOW(label ": capture", call);                                                      \
        SHOW(label ": end", p_cuStreamEndCapture(s, &g));                                   \
        SHOW(label ": instantiate", p_cuGraphInstantiateWithFlags(&e, g, 0));               \
        SHOW(label ": launch", p_cuGraphLaunch(e, s));                                      \
        SHOW(label ": sync", p_cuStreamSynchronize(s));                                     \
        p_cuGraphExecDestroy(e);                                                            \
        p_cuGraphDestroy(g);                                                                \
    } while (0)
    KIND("kernel", launch(s));
    KIND("write64", p_cuStreamWriteValue64_v2(s, w, 7, 0));
    KIND("write32", p_cuStreamWriteValue32_v2(s, w, 7, 0));
    KIND("memsetD32Async", p_cuMemsetD32Async(w, 1, 16, s));
    KIND("HtoDAsync pageable", p_cuMemcpyHtoDAsync_v2(w, host, 64, s));
    KIND("DtoHAsync pageable", p_cuMemcpyDtoHAsync_v2(host, w, 64, s));
    /* a kernel-only executable: launches, into a capture, after its graph is destroyed */
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    launch(s);
    launch(s);
    p_cuStreamEndCapture(s, &g);
    p_cuGraphInstantiateWithFlags(&e, g, 0);
    SHOW("k2: launch", p_cuGraphLaunch(e, s));
    SHOW("k2: launch legacy", p_cuGraphLaunch(e, NULL));
    SHOW("k2: launch ptsz", p_cuGraphLaunch(e, CU_STREAM_PER_THREAD));
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("k2: launch into capture", p_cuGraphLaunch(e, s));
    launch(s);
    finish(s, "k2: into capture");
    SHOW("k2: graph destroy", p_cuGraphDestroy(g));
    SHOW("k2: launch after graph destroy", p_cuGraphLaunch(e, s));
    SHOW("k2: sync", p_cuStreamSynchronize(s));
    p_cuGraphExecDestroy(e);
    p_cuMemFree_v2(w);
    p_cuStreamDestroy_v2(s);
}

static void round2(void)
{
    CUstream s = mkstream(CU_STREAM_NON_BLOCKING), b = mkstream(0), o = mkstream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = 0;
    uint32_t host[64];
    CUgraph g;

    memset(host, 0, sizeof(host));
    if (p_cuStreamBeginCapture_ptsz != NULL) {
        ((CUresult(*)(CUstream))p_cuStreamBeginCapture_ptsz)(s);
        SHOW("legacy 1-arg: same-thread memalloc", p_cuMemAlloc_v2(&p, 256));
        p_cuMemFree_v2(p);
        status("  status", s);
        SHOW("legacy 1-arg: end from other thread", other_thread(1, CU_STREAM_CAPTURE_MODE_GLOBAL, s, &g));
        status("  status", s);
        finish(s, "legacy 1-arg");
    }
    p_cuStreamBeginCapture_v2(b, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("Gb: memcpyHtoD sync", p_cuMemcpyHtoD_v2(buf, host, 64));
    status("  status b", b);
    finish(b, "  Gb");
    p_cuStreamBeginCapture_v2(b, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("Gb: launch legacy", launch(NULL));
    status("  status b", b);
    finish(b, "  Gb");
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    status("G nonblocking: IsCapturing(legacy)", NULL);
    finish(s, "  G");
    /* relaxed thread; capture begun RELAXED in this thread; ctxsync from another relaxed thread */
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    SHOW("R: other RELAXED thread ctxsync", other_thread(2, CU_STREAM_CAPTURE_MODE_RELAXED, NULL, NULL));
    status("  status", s);
    finish(s, "  R");
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("G: other RELAXED thread ctxsync", other_thread(2, CU_STREAM_CAPTURE_MODE_RELAXED, NULL, NULL));
    status("  status", s);
    finish(s, "  G");
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    SHOW("R: other RELAXED thread streamsync other", other_thread(3, CU_STREAM_CAPTURE_MODE_RELAXED, o, NULL));
    status("  status", s);
    SHOW("R: other GLOBAL thread streamsync other", other_thread(3, CU_STREAM_CAPTURE_MODE_GLOBAL, o, NULL));
    status("  status", s);
    SHOW("R: same GLOBAL thread streamsync other", p_cuStreamSynchronize(o));
    status("  status", s);
    finish(s, "  R");
    /* after invalidation, does the capture still prohibit? */
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("G: memalloc (invalidates)", p_cuMemAlloc_v2(&p, 256));
    SHOW("  then other-thread memalloc", other_thread(0, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, NULL));
    SHOW("  end with NULL graph pointer", p_cuStreamEndCapture(s, NULL));
    status("  status", s);
    /* two captures: GLOBAL in this thread on s, THREAD_LOCAL in this thread on o */
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    p_cuStreamBeginCapture_v2(o, CU_STREAM_CAPTURE_MODE_RELAXED);
    SHOW("G s + R o: same-thread memalloc", p_cuMemAlloc_v2(&p, 256));
    status("  status s", s);
    status("  status o", o);
    finish(s, "  s");
    finish(o, "  o");
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("destroy capturing stream", p_cuStreamDestroy_v2(s));
    p_cuStreamDestroy_v2(b);
    p_cuStreamDestroy_v2(o);
}

/* Odds and ends: queries and work on invalidated captures, argument checks. */
static void round3(void)
{
    CUstream s = mkstream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr w = 0, p = 0;
    static uint32_t host[64];
    CUstreamCaptureStatus st = 99;
    cuuint64_t id = 12345;
    CUgraph g = NULL, cg = NULL;
    CUgraphExec e = NULL, e2 = NULL;
    size_t n = 99;

    p_cuMemAlloc_v2(&w, 256);
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    launch(s);
    p_cuStreamEndCapture(s, &g);
    p_cuGraphInstantiateWithFlags(&e, g, 0);

    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    p_cuMemAlloc_v2(&p, 64);
    SHOW("invalidated: capinfo v1", p_cuStreamGetCaptureInfo(s, &st, &id));
    printf("%-58s %s id=%s\n", "  ", stname(st), id == 12345 ? "unset" : id == 0 ? "0" : "set");
    cg = (CUgraph)0x1;
    n = 99;
    SHOW("invalidated: capinfo v2", p_cuStreamGetCaptureInfo_v2(s, &st, NULL, &cg, NULL, &n));
    printf("%-58s graph=%s n=%zu\n", "  ", cg == (CUgraph)0x1 ? "unset" : cg ? "set" : "NULL", n);
    SHOW("invalidated: writevalue64", p_cuStreamWriteValue64_v2(s, w, 1, 0));
    SHOW("invalidated: memsetD32Async", p_cuMemsetD32Async(w, 1, 4, s));
    SHOW("invalidated: HtoDAsync", p_cuMemcpyHtoDAsync_v2(w, host, 16, s));
    SHOW("invalidated: graph launch", p_cuGraphLaunch(e, s));
    finish(s, "invalidated");

    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    SHOW("R: graph launch into capture", p_cuGraphLaunch(e, s));
    status("  status", s);
    finish(s, "R graph launch");
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("G: graph upload into capture", p_cuGraphUpload(e, s));
    status("  status", s);
    finish(s, "G upload");
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    launch(s);
    p_cuStreamGetCaptureInfo_v2(s, &st, NULL, &cg, NULL, NULL);
    SHOW("G: instantiate the graph being captured", p_cuGraphInstantiateWithFlags(&e2, cg, 0));
    status("  status", s);
    if (e2 != NULL)
        p_cuGraphExecDestroy(e2);
    SHOW("G: launch from other thread (GLOBAL)", other_thread(4, CU_STREAM_CAPTURE_MODE_GLOBAL, s, NULL));
    status("  status", s);
    finish(s, "G instantiate/launch");

    SHOW("end capture legacy NULL", p_cuStreamEndCapture(NULL, &g));
    SHOW("IsCapturing NULL status ptr", p_cuStreamIsCapturing(s, NULL));
    SHOW("GetNodes NULL count", p_cuGraphGetNodes(g, NULL, NULL));
    SHOW("GraphCreate flags 1", p_cuGraphCreate(&cg, 1));
    SHOW("instantiate flags 0x100", p_cuGraphInstantiateWithFlags(&e2, g, 0x100));
    SHOW("writevalue64 misaligned", p_cuStreamWriteValue64_v2(s, w + 4, 1, 0));
    SHOW("writevalue32 misaligned", p_cuStreamWriteValue32_v2(s, w + 2, 1, 0));
    SHOW("writevalue64 flags 2", p_cuStreamWriteValue64_v2(s, w, 1, 2));
    SHOW("memsetD32Async misaligned", p_cuMemsetD32Async(w + 2, 1, 4, s));
    SHOW("memsetD32Async beyond allocation", p_cuMemsetD32Async(w, 1, 1000, s));
    SHOW("HtoDAsync beyond allocation", p_cuMemcpyHtoDAsync_v2(w + 200, host, 64, s));
    SHOW("HtoDAsync NULL host", p_cuMemcpyHtoDAsync_v2(w, NULL, 64, s));
    SHOW("sync", p_cuStreamSynchronize(s));
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    SHOW("capture: writevalue64 misaligned", p_cuStreamWriteValue64_v2(s, w + 4, 1, 0));
    SHOW("capture: memsetD32Async beyond allocation", p_cuMemsetD32Async(w, 1, 1000, s));
    SHOW("capture: HtoDAsync beyond allocation", p_cuMemcpyHtoDAsync_v2(w + 200, host, 64, s));
    status("  status", s);
    finish(s, "capture arg checks");
    p_cuGraphExecDestroy(e);
    p_cuGraphDestroy(g);
    /* last: may poison the context */
    SHOW("eager writevalue64 bad address", p_cuStreamWriteValue64_v2(s, 0x10, 7, 0));
    SHOW("  sync", p_cuStreamSynchronize(s));
}

/* Which graph and stream calls a GLOBAL capture prohibits; thread mode values. */
static void round4(void)
{
    CUstream s = mkstream(CU_STREAM_NON_BLOCKING), o = mkstream(CU_STREAM_NON_BLOCKING), t = NULL;
    CUdeviceptr w = 0;
    CUgraph g = NULL, g2 = NULL, c = NULL, cg = NULL, ge = NULL;
    CUgraphExec e = NULL, e2 = NULL, e3 = NULL;
    CUstreamCaptureStatus st;
    CUstreamCaptureMode m;
    size_t n = 0;
    int dev = -1;
    CUfunction f;
    CUgraphNode node;
    CUDA_KERNEL_NODE_PARAMS kp;
    recap__fill_params_t fp;
    void *args[] = {&fp};

    /* (NULL crashes the real driver) */
    m = (CUstreamCaptureMode)9;
    SHOW("exchange 9", p_cuThreadExchangeStreamCaptureMode(&m));
    m = CU_STREAM_CAPTURE_MODE_GLOBAL;
    SHOW("exchange back", p_cuThreadExchangeStreamCaptureMode(&m));
    printf("%-58s %d\n", "  previous mode", (int)m);

    p_cuMemAlloc_v2(&w, 256);
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    launch(s);
    p_cuStreamEndCapture(s, &g);
    p_cuGraphInstantiateWithFlags(&e, g, 0);
    p_cuGraphCreate(&g2, 0);
    p_cuGraphInstantiateWithFlags(&e3, g2, 0);
    memset(&fp, 0, sizeof(fp));
    fp.dst = buf;
    fp.n = 64;
    memset(&kp, 0, sizeof(kp));
    kp.func = fill;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 32;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;

#define GC(label, call)                                                     \
    do {                                                                    \
        p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);        \
        SHOW(label, call);                                                  \
        status("  status", s);                                              \
        finish(s, "  " label);                                              \
    } while (0)
    GC("G: instantiate unrelated graph", p_cuGraphInstantiateWithFlags(&e2, g, 0));
    if (e2) p_cuGraphExecDestroy(e2);
    GC("G: graph create", p_cuGraphCreate(&c, 0));
    GC("G: graph clone", p_cuGraphClone(&cg, g));
    GC("G: graph get nodes", p_cuGraphGetNodes(g, NULL, &n));
    GC("G: add kernel node to unrelated graph", p_cuGraphAddKernelNode_v2(&node, g2, NULL, 0, &kp));
    GC("G: graph destroy unrelated", p_cuGraphDestroy(c));
    GC("G: exec destroy unrelated", p_cuGraphExecDestroy(e3));
    GC("G: graph launch on other stream", p_cuGraphLaunch(e, o));
    GC("G: graph upload on other stream", p_cuGraphUpload(e, o));
    GC("G: stream create", p_cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
    GC("G: stream destroy other", p_cuStreamDestroy_v2(t));
    GC("G: pointer attribute", p_cuPointerGetAttribute(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, w));
    GC("G: module get function", p_cuModuleGetFunction(&f, NULL, "x"));
    GC("G: writevalue other stream", p_cuStreamWriteValue64_v2(o, w, 1, 0));
    GC("G: memsetD32Async other stream", p_cuMemsetD32Async(w, 1, 4, o));
    /* the graph being captured, relaxed */
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    launch(s);
    p_cuStreamGetCaptureInfo_v2(s, &st, NULL, &ge, NULL, NULL);
    SHOW("R: instantiate the graph being captured", p_cuGraphInstantiateWithFlags(&e2, ge, 0));
    status("  status", s);
    if (e2) p_cuGraphExecDestroy(e2);
    finish(s, "  R");
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    SHOW("R: instantiate unrelated graph", p_cuGraphInstantiateWithFlags(&e2, g, 0));
    status("  status", s);
    if (e2) p_cuGraphExecDestroy(e2);
    finish(s, "  R");
    /* a memset node beyond its allocation */
    p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    p_cuMemsetD32Async(w, 1, 1000, s);
    p_cuStreamEndCapture(s, &c);
    SHOW("memset beyond allocation: instantiate", p_cuGraphInstantiateWithFlags(&e2, c, 0));
    SHOW("memset beyond allocation: launch", p_cuGraphLaunch(e2, s));
    SHOW("  sync", p_cuStreamSynchronize(s));
}

static void *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    void *p;

    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    p = malloc((size_t)n + 16);
    if (fread(p, 1, (size_t)n, f) != (size_t)n)
        abort();
    fclose(f);
    return p;
}

int main(int argc, char **argv)
{
    void *lib;
    CUdevice dev;
    CUmodule mod;

    if (argc < 3) {
        fprintf(stderr, "usage: %s libcuda.so fatbin\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
#define LOAD(f)                                                           \
    p_##f = (__typeof__(f) *)dlsym(lib, #f);                              \
    if (p_##f == NULL)                                                    \
        printf("missing symbol %s\n", #f);
    FNS(LOAD)
#undef LOAD
    image = read_file(argv[2]);
    if (image == NULL || p_cuInit(0) != CUDA_SUCCESS || p_cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        p_cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || p_cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
        p_cuModuleLoadData(&mod, image) != CUDA_SUCCESS ||
        p_cuModuleGetFunction(&fill, mod, RECAP_KERNEL_FILL_U32) != CUDA_SUCCESS ||
        p_cuMemAlloc_v2(&buf, 4096) != CUDA_SUCCESS) {
        fprintf(stderr, "setup failed\n");
        return 2;
    }
    if (argc > 3 && strcmp(argv[3], "4") == 0) {
        round4();
        printf("done\n");
        return 0;
    }
    if (argc > 3 && strcmp(argv[3], "3") == 0) {
        round3();
        printf("done\n");
        return 0;
    }
    if (argc > 3 && strcmp(argv[3], "2") == 0) {
        round2();
        graph_kinds();
        printf("done\n");
        return 0;
    }
    basics();
    unsafe_calls();
    wrong_thread();
    graphs();
    printf("done\n");
    return 0;
}
