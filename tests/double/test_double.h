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
 *
 * One program, a file a topic (test_double_<topic>.c, each adding its tests to the one case);
 * tests/double/test_double.c holds the rig they share: the driver's entry points, the context,
 * kernels and buffers each test starts with, and the helpers below.
 */
#ifndef RECAP_TESTS_TEST_DOUBLE_H
#define RECAP_TESTS_TEST_DOUBLE_H

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
    X(cuGetErrorName) X(cuGraphAddEmptyNode) X(cuGraphAddChildGraphNode)                            \
    X(cuGraphChildGraphNodeGetGraph) X(cuGraphAddDependencies) X(cuGraphGetEdges_v2)                \
    X(cuGraphNodeGetDependentNodes_v2) X(cuGraphNodeGetDependentNodes)

#define NWORDS 1000u
#define BUF_BYTES (NWORDS * 4u)

/* Asserts a driver result, naming both codes on failure. */
#define CK(expr, want)                                                                        \
    do {                                                                                      \
        CUresult rc_ = (expr), want_ = (want);                                                \
        ck_assert_msg(rc_ == want_, "%s returned %d %s, expected %d %s", #expr, (int)rc_,     \
                      en(rc_), (int)want_, en(want_));                                        \
    } while (0)
#define OK(expr) CK((expr), CUDA_SUCCESS)

/* Resolves a driver entry point into p_<name> (setup). */
#define LOAD(f)                                                                \
    p_##f = (__typeof__(f) *)dlsym(lib, #f);                                   \
    ck_assert_msg(p_##f != NULL, "the driver does not export %s", #f);

#define DECL(f) extern __typeof__(f) *p_##f;
DRIVER_FNS(DECL)
#undef DECL

extern void *lib;
extern CUcontext ctx;
extern CUfunction k_fill, k_advance;
extern CUdeviceptr buf_a, buf_b, slot;
extern int base_graphs, base_execs;
extern unsigned long (*d_launch_count)(void);
extern unsigned long (*d_node_count)(CUgraph);
extern int (*d_live_graphs)(void);
extern int (*d_live_execs)(void);
extern unsigned long (*d_stream_ops)(void);
extern void (*d_fail_next)(const char *, int);

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

/* The rig's helpers (tests/double/test_double.c). */
const char *en(CUresult rc);
int is_double(void);
CUstream new_stream(unsigned flags);
CUresult fill(CUstream s, CUdeviceptr dst, uint64_t seed, uint64_t offset);
CUresult advance(CUstream s, uint64_t inc);
void read_words(CUdeviceptr src, uint32_t *out, size_t n);
uint64_t slot_offset(void);
int all_zero(CUdeviceptr p);
CUstreamCaptureStatus capture_status(CUstream s);
size_t node_count(CUgraph g);
CUstreamCaptureMode set_mode(CUstreamCaptureMode m);
void end_invalidated(CUstream s);
job_t on_other_thread(int what, CUstreamCaptureMode mode, CUstream s);
void check_no_leaks(void);

/* Each topic file's tests, in the order they run. */
void double_add_capture_tests(TCase *tc);
void double_add_modes_tests(TCase *tc);
void double_add_graphs_tests(TCase *tc);
void double_add_memops_tests(TCase *tc);
void double_add_threads_tests(TCase *tc);

#endif
