/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A CUDA driver test double: a fake libcuda.so.1 implementing the subset of the driver API that
 * recap uses, so CI (no GPU) exercises recap's device code paths. Device memory is host memory
 * tracked by allocation; kernels are recap's own kernel bodies (the src/kernels body headers) compiled
 * for the host and run thread by thread over the launch grid; streams execute in order at once.
 *
 * Stream capture and graphs: a capturing stream records its work (kernels, stream memory
 * operations, async copies and memsets) as the nodes of a graph instead of running it; graphs are linear node lists, executables are snapshots of them. The capture rules
 * of the real driver that recap can observe are enforced (see "capture rules" below), and
 * tests/double/probe_rules.c checks them against a real driver.
 *
 * recap finds it through RECAP_CUDA_DRIVER (test-only). Knobs, for tests:
 *   RECAP_DOUBLE_DEVICES=N     number of devices (default 2)
 *   RECAP_DOUBLE_FAIL_INIT=1   cuInit fails with CUDA_ERROR_NO_DEVICE
 * and the recap_double_* exports (launch/node/stream-operation counts, live graph, executable and
 * module counts, primary context retains, fault injection). Never installed.
 */
#define _GNU_SOURCE
/* cuda.h then declares the legacy and per-thread-stream names too (cuGraphInstantiate's 5-argument
 * form, cuStreamGetCaptureInfo's 3-argument form, the _ptsz variants). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/registry.h"
#include "double.h"

#define MAX_DEV 16
#define MAX_ALLOC 4096
#define FATBIN_MAGIC 0xBA55ED50u

typedef struct double_ctx {
    int device;
} double_ctx_t;

typedef struct double_capture double_capture_t;

typedef struct double_stream {
    int device;
    int alive;
    unsigned flags;
    double_capture_t *cap; /* capture in progress on this stream, or NULL */
    struct double_stream *next;
} double_stream_t;

#define KERNEL_FN(id, name, type, body) {name, (kernel_body_t)body, sizeof(type), 0},
static const double_function_t kernel_table[] = {RECAP_KERNELS(KERNEL_FN)};
#undef KERNEL_FN
#define NKERNELS (sizeof(kernel_table) / sizeof(kernel_table[0]))

typedef struct double_module {
    int device;
    double_function_t fns[NKERNELS];
    struct double_module *next;
} double_module_t;

struct double_capture {
    uint64_t id;
    CUstreamCaptureMode mode;
    pthread_t thread; /* the thread that began it */
    int invalidated;
    double_stream_t *stream;
    double_graph_t *graph;
    double_capture_t *next;
};

pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
int initialized;
static int ndev = 2;
static double_ctx_t primary[MAX_DEV];
static int primary_retains[MAX_DEV]; /* cuDevicePrimaryCtxRetain minus ...Release, per device */
typedef struct {
    uintptr_t base;
    size_t size;
    int device;
    int pinned; /* cuMemAllocHost: host memory the device can address (UVA) */
} double_alloc_t;
static double_alloc_t allocs[MAX_ALLOC];
static int nallocs;
static unsigned long launches, stream_ops;

/* Live objects, under the lock. */
static double_stream_t *streams;
double_graph_t *graphs;
double_exec_t *execs;
static double_module_t *modules;
static double_capture_t *captures; /* every capture in progress */
static uint64_t capture_seq;

/* The current-context stack of each thread, its capture interaction mode and its per-thread
 * default stream. */
static _Thread_local CUcontext ctx_stack[32];
static _Thread_local int ctx_depth;
static _Thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static _Thread_local double_stream_t ptds;

/* ------------------------------------------------------------------ test-only inspection */

EXPORT unsigned long recap_double_launch_count(void);
EXPORT unsigned long recap_double_stream_ops(void);
EXPORT unsigned long recap_double_node_count(CUgraph g);
EXPORT int recap_double_live_graphs(void);
EXPORT int recap_double_live_execs(void);
EXPORT int recap_double_live_modules(void);
EXPORT int recap_double_primary_retains(int device);
EXPORT void recap_double_fail_next(const char *fn_name, int count);
EXPORT void recap_double_defer_sync_copies(int on);

EXPORT unsigned long recap_double_launch_count(void)
{
    return __atomic_load_n(&launches, __ATOMIC_RELAXED);
}

EXPORT unsigned long recap_double_stream_ops(void)
{
    return __atomic_load_n(&stream_ops, __ATOMIC_RELAXED);
}

/* Nodes of a live graph (or of a live executable); 0 for anything else. */
EXPORT unsigned long recap_double_node_count(CUgraph g)
{
    unsigned long n = 0;

    pthread_mutex_lock(&lock);
    for (double_graph_t *p = graphs; p != NULL; p = p->next)
        if (p == (double_graph_t *)g)
            n = p->n;
    for (double_exec_t *e = execs; e != NULL; e = e->next)
        if (e == (double_exec_t *)g)
            n = e->n;
    pthread_mutex_unlock(&lock);
    return n;
}

EXPORT int recap_double_live_graphs(void)
{
    int n = 0;

    pthread_mutex_lock(&lock);
    for (double_graph_t *p = graphs; p != NULL; p = p->next)
        n++;
    pthread_mutex_unlock(&lock);
    return n;
}

EXPORT int recap_double_live_execs(void)
{
    int n = 0;

    pthread_mutex_lock(&lock);
    for (double_exec_t *e = execs; e != NULL; e = e->next)
        n++;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Modules loaded and not unloaded, on every device. */
EXPORT int recap_double_live_modules(void)
{
    int n = 0;

    pthread_mutex_lock(&lock);
    for (double_module_t *m = modules; m != NULL; m = m->next)
        n++;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Retains of the device's primary context not yet released; -1 for a device that is not. */
EXPORT int recap_double_primary_retains(int device)
{
    int n = -1;

    pthread_mutex_lock(&lock);
    if (device >= 0 && device < MAX_DEV)
        n = primary_retains[device];
    pthread_mutex_unlock(&lock);
    return n;
}

/* Fault injection: the next `count` calls of the exported driver function `fn_name` fail. */
#define MAX_FAIL 16
static struct {
    char name[64];
    int count;
} fail_table[MAX_FAIL];
static int fail_armed; /* entries with count > 0 */

/* recap_double_defer_sync_copies(1): a synchronous host-to-device copy returns with its bytes
 * staged and lands only at the next synchronization (of any stream, or the context) or the next
 * synchronous copy, as the DMA of a copy from pageable memory may on a real device: after
 * kernels launched meanwhile on non-blocking streams (which the double runs at submission). */
typedef struct pending_copy {
    CUdeviceptr dst;
    size_t n;
    struct pending_copy *next;
    unsigned char bytes[];
} pending_copy_t;
static int defer_copies;
static pending_copy_t *pending_head, **pending_tail = &pending_head;

EXPORT void recap_double_defer_sync_copies(int on)
{
    __atomic_store_n(&defer_copies, on, __ATOMIC_RELAXED);
}

/* Lands the staged copies in order; the caller holds `lock`. */
static void land_copies_locked(void)
{
    pending_copy_t *p;

    while ((p = pending_head) != NULL) {
        pending_head = p->next;
        memcpy((void *)(uintptr_t)p->dst, p->bytes, p->n);
        free(p);
    }
    pending_tail = &pending_head;
}

static void land_copies(void)
{
    pthread_mutex_lock(&lock);
    land_copies_locked();
    pthread_mutex_unlock(&lock);
}

/* Stages a copy when deferring; 0 when the caller copies now. */
static int stage_copy(CUdeviceptr dst, const void *src, size_t n)
{
    pending_copy_t *p;

    if (!__atomic_load_n(&defer_copies, __ATOMIC_RELAXED) ||
        (p = malloc(sizeof(*p) + n)) == NULL)
        return 0;
    p->dst = dst;
    p->n = n;
    p->next = NULL;
    memcpy(p->bytes, src, n);
    pthread_mutex_lock(&lock);
    *pending_tail = p;
    pending_tail = &p->next;
    pthread_mutex_unlock(&lock);
    return 1;
}

EXPORT void recap_double_fail_next(const char *fn_name, int count)
{
    int i, free_slot = -1;

    if (fn_name == NULL || strlen(fn_name) >= sizeof(fail_table[0].name))
        return;
    pthread_mutex_lock(&lock);
    for (i = 0; i < MAX_FAIL; i++) {
        if (fail_table[i].count > 0 && strcmp(fail_table[i].name, fn_name) == 0)
            break;
        if (fail_table[i].count <= 0 && free_slot < 0)
            free_slot = i;
    }
    if (i == MAX_FAIL)
        i = free_slot;
    if (i >= 0) {
        if (fail_table[i].count <= 0 && count > 0)
            fail_armed++;
        else if (fail_table[i].count > 0 && count <= 0)
            fail_armed--;
        strcpy(fail_table[i].name, fn_name);
        fail_table[i].count = count > 0 ? count : 0;
    }
    pthread_mutex_unlock(&lock);
}

CUresult injected(const char *fn)
{
    CUresult rc = CUDA_SUCCESS;

    if (__atomic_load_n(&fail_armed, __ATOMIC_RELAXED) == 0)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_FAIL; i++)
        if (fail_table[i].count > 0 && strcmp(fail_table[i].name, fn) == 0) {
            if (--fail_table[i].count == 0)
                fail_armed--;
            rc = strcmp(fn, "cuMemAlloc_v2") == 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
            break;
        }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* ------------------------------------------------------------------ init, devices, contexts */

int ctx_device(CUcontext c)
{
    return c == NULL ? -1 : ((double_ctx_t *)c)->device;
}

CUcontext current(void)
{
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
}

EXPORT CUresult cuInit(unsigned int flags)
{
    const char *n = getenv("RECAP_DOUBLE_DEVICES");
    const char *fail = getenv("RECAP_DOUBLE_FAIL_INIT");
    int i;

    ENTER();
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fail != NULL && *fail == '1')
        return CUDA_ERROR_NO_DEVICE;
    if (n != NULL)
        ndev = atoi(n);
    if (ndev < 0 || ndev > MAX_DEV)
        ndev = 2;
    for (i = 0; i < MAX_DEV; i++)
        primary[i].device = i;
    initialized = 1;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
    ENTER();
    if (v == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorName(CUresult rc, const char **s)
{
    ENTER();
    if (s == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    switch (rc) {
#define NAME(e) case e: *s = #e; break;
    NAME(CUDA_SUCCESS)
    NAME(CUDA_ERROR_INVALID_VALUE)
    NAME(CUDA_ERROR_OUT_OF_MEMORY)
    NAME(CUDA_ERROR_NOT_INITIALIZED)
    NAME(CUDA_ERROR_NO_DEVICE)
    NAME(CUDA_ERROR_INVALID_DEVICE)
    NAME(CUDA_ERROR_INVALID_CONTEXT)
    NAME(CUDA_ERROR_INVALID_HANDLE)
    NAME(CUDA_ERROR_INVALID_IMAGE)
    NAME(CUDA_ERROR_NOT_FOUND)
    NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    NAME(CUDA_ERROR_ILLEGAL_STATE)
    NAME(CUDA_ERROR_CONTEXT_IS_DESTROYED)
    NAME(CUDA_ERROR_NOT_PERMITTED)
    NAME(CUDA_ERROR_NOT_SUPPORTED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_MERGE)
    NAME(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_ISOLATION)
    NAME(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
    NAME(CUDA_ERROR_CAPTURED_EVENT)
    NAME(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
    NAME(CUDA_ERROR_UNKNOWN)
#undef NAME
    default: *s = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *n)
{
    NEED_INIT();
    if (n == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *n = ndev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    NEED_INIT();
    if (d == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    NEED_INIT();
    if (name == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "recap CUDA test double %d", d);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    NEED_INIT();
    if (v == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 4; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: *v = 1; break;
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    NEED_INIT();
    if (bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)1 << 30;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    NEED_INIT();
    if (c == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    primary_retains[d]++;
    pthread_mutex_unlock(&lock);
    *c = (CUcontext)&primary[d];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    CUresult rc = CUDA_SUCCESS;

    NEED_INIT();
    if (d < 0 || d >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    if (primary_retains[d] == 0)
        rc = CUDA_ERROR_INVALID_CONTEXT; /* released more often than retained */
    else
        primary_retains[d]--;
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *c)
{
    NEED_INIT();
    if (c == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *c = current();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext c)
{
    NEED_INIT();
    if (ctx_depth == 0)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext c)
{
    NEED_INIT();
    if (c == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == (int)(sizeof(ctx_stack) / sizeof(ctx_stack[0])))
        return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *c)
{
    NEED_INIT();
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_depth--;
    if (c != NULL)
        *c = ctx_stack[ctx_depth];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    *d = ctx_device(current());
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ capture rules
 *
 * What the real driver does (cuThreadExchangeStreamCaptureMode in cuda.h; each rule below was
 * observed with tests/double/probe_rules.c on driver 580.159, CUDA 13.0):
 *  - A "potentially unsafe" call (cuMemAlloc, cuMemFree, cuStreamSynchronize of a stream that is
 *    not capturing, the legacy stream included, cuGraphInstantiate*, cuGraphExecDestroy) is
 *    prohibited for a thread whose interaction
 *    mode is not RELAXED if the thread itself has a capture in progress that was not begun
 *    RELAXED, or, for a thread in GLOBAL mode, if any thread has a GLOBAL capture in progress
 *    (an invalidated capture not yet ended still counts). The call fails with
 *    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates those captures.
 *  - cuCtxSynchronize while any stream of the context captures fails the same way whatever the
 *    modes, and invalidates every such capture; synchronizing a capturing stream invalidates
 *    its capture.
 *  - Work on the legacy NULL stream (launches, async and synchronous copies and memsets, graph
 *    launches, synchronization) while a blocking stream (created without
 *    CU_STREAM_NON_BLOCKING, or a per-thread default stream) of the same context captures fails
 *    with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidates those captures. With only
 *    non-blocking streams capturing, synchronous copies and memsets are allowed in any mode, and
 *    so is cuModuleLoadData.
 *  - Work into an invalidated capture fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, and so
 *    does cuStreamGetCtx on its stream (as the 580 driver answers on an H200).
 *  - cuGraphLaunch and cuGraphUpload into a capturing stream fail with
 *    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the capture.
 *  - Graph calls other than those (create, clone, destroy, node queries and additions, launches
 *    on other streams) and stream creation and destruction are allowed in every mode.
 *  - cuStreamEndCapture from another thread than the one that began a GLOBAL or THREAD_LOCAL
 *    capture fails with CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, returns no graph, and ends the
 *    capture all the same. The 1-argument cuStreamBeginCapture forms capture RELAXED.
 */

static int prohibits_locked(const double_capture_t *c)
{
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED || c->mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return 0;
    if (pthread_equal(c->thread, pthread_self()))
        return 1;
    return thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

static CUresult unsafe_call_locked(void)
{
    CUresult rc = CUDA_SUCCESS;

    for (double_capture_t *c = captures; c != NULL; c = c->next)
        if (prohibits_locked(c)) {
            c->invalidated = 1;
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    return rc;
}

static CUresult unsafe_call(void)
{
    CUresult rc;

    pthread_mutex_lock(&lock);
    rc = unsafe_call_locked();
    pthread_mutex_unlock(&lock);
    return rc;
}

static int blocking_capture(const double_capture_t *c, int device)
{
    return (c->stream->flags & CU_STREAM_NON_BLOCKING) == 0 && c->stream->device == device;
}

/* Work submitted to the legacy stream of `device`; invalidate = 0 for queries. */
static CUresult legacy_use_locked(int device, int invalidate)
{
    CUresult rc = CUDA_SUCCESS;

    for (double_capture_t *c = captures; c != NULL; c = c->next)
        if (blocking_capture(c, device)) {
            if (invalidate)
                c->invalidated = 1;
            rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
    return rc;
}

/* ------------------------------------------------------------------ memory */

static int find_alloc(uintptr_t p, size_t len)
{
    int i;

    for (i = 0; i < nallocs; i++)
        if (p >= allocs[i].base && p - allocs[i].base <= allocs[i].size &&
            len <= allocs[i].size - (p - allocs[i].base))
            return i;
    return -1;
}

/* Records an allocation of the current context's device; 0 when the table is full. */
static int track_alloc(void *p, size_t bytes, int pinned)
{
    int ok;

    pthread_mutex_lock(&lock);
    ok = nallocs < MAX_ALLOC;
    if (ok)
        allocs[nallocs++] = (double_alloc_t){(uintptr_t)p, bytes, ctx_device(current()), pinned};
    pthread_mutex_unlock(&lock);
    return ok;
}

/* Forgets an allocation of the given kind; 0 when there is none at that address. The caller
 * holds the lock. */
static int untrack_alloc(uintptr_t base, int pinned)
{
    int i;

    for (i = 0; i < nallocs; i++)
        if (allocs[i].base == base && allocs[i].pinned == pinned) {
            allocs[i] = allocs[--nallocs];
            return 1;
        }
    return 0;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    void *p;
    CUresult rc;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((rc = unsafe_call()) != CUDA_SUCCESS)
        return rc;
    if (dptr == NULL || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes > ((size_t)1 << 34))
        return CUDA_ERROR_OUT_OF_MEMORY;
    p = aligned_alloc(256, (bytes + 255) & ~(size_t)255);
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!track_alloc(p, bytes, 0)) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult rc;

    NEED_INIT();
    pthread_mutex_lock(&lock);
    if ((rc = unsafe_call_locked()) == CUDA_SUCCESS && !untrack_alloc((uintptr_t)dptr, 0))
        rc = CUDA_ERROR_INVALID_VALUE; /* also for pinned memory: cuMemFreeHost frees that */
    pthread_mutex_unlock(&lock);
    if (rc == CUDA_SUCCESS)
        free((void *)(uintptr_t)dptr);
    return rc;
}

static CUresult check_range(CUdeviceptr p, size_t len)
{
    int i;

    pthread_mutex_lock(&lock);
    i = find_alloc((uintptr_t)p, len);
    pthread_mutex_unlock(&lock);
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* A synchronous copy or memset runs on the legacy stream: implicitly ordered after the blocking
 * streams (the driver does not count it among the potentially unsafe calls). */
static CUresult sync_op_allowed(void)
{
    CUresult rc;

    pthread_mutex_lock(&lock);
    rc = legacy_use_locked(ctx_device(current()), 1);
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    CUresult rc;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((rc = sync_op_allowed()) != CUDA_SUCCESS)
        return rc;
    if (src == NULL || check_range(dst, n) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    land_copies();
    if (!stage_copy(dst, src, n))
        memcpy((void *)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    CUresult rc;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((rc = sync_op_allowed()) != CUDA_SUCCESS)
        return rc;
    if (dst == NULL || check_range(src, n) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    land_copies();
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr p)
{
    int i, dev;

    NEED_INIT();
    if (data == NULL || a != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    i = find_alloc((uintptr_t)p, 1);
    dev = i < 0 ? -1 : allocs[i].device;
    pthread_mutex_unlock(&lock);
    if (i < 0)
        return CUDA_ERROR_INVALID_VALUE;
    *(int *)data = dev;
    return CUDA_SUCCESS;
}

/* Like the driver: an unknown pointer is not an error; its attributes read as zero (memory type
 * 0). Only the attributes recap asks for are known. */
EXPORT CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
                                       CUdeviceptr p)
{
    unsigned int k, type;
    int i, dev;

    NEED_INIT();
    if (n == 0 || attrs == NULL || data == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (k = 0; k < n; k++)
        if (data[k] == NULL || (attrs[k] != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL &&
                                attrs[k] != CU_POINTER_ATTRIBUTE_MEMORY_TYPE))
            return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    i = find_alloc((uintptr_t)p, 1);
    dev = i < 0 ? 0 : allocs[i].device;
    type = i < 0 ? 0 : allocs[i].pinned ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    pthread_mutex_unlock(&lock);
    for (k = 0; k < n; k++)
        if (attrs[k] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
            *(int *)data[k] = dev;
        else
            *(unsigned int *)data[k] = type;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ nodes and graphs */

void op_free(op_t *op)
{
    if (op == NULL)
        return;
    double_op_free_bodies(op);
    free(op->params);
    free(op);
}

op_t *op_clone(const op_t *src)
{
    op_t *op = malloc(sizeof(*op));

    if (op == NULL)
        return NULL;
    *op = *src;
    op->params = NULL;
    if (double_op_compound(src->kind)) {
        if (double_op_clone_bodies(op, src) != CUDA_SUCCESS) {
            free(op);
            return NULL;
        }
    } else if (src->kind == OP_KERNEL) {
        op->params = malloc(src->fn->params_size);
        if (op->params == NULL) {
            free(op);
            return NULL;
        }
        memcpy(op->params, src->params, src->fn->params_size);
    }
    return op;
}

/* A deep copy of a node list (NULL when out of memory; an empty list gives a 1-entry array). */
op_t **ops_clone(op_t *const *ops, size_t n)
{
    op_t **out = calloc(n > 0 ? n : 1, sizeof(*out));

    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        out[i] = op_clone(ops[i]);
        if (out[i] == NULL) {
            while (i-- > 0)
                op_free(out[i]);
            free(out);
            return NULL;
        }
    }
    return out;
}

double_graph_t *graph_new_locked(void)
{
    double_graph_t *g = calloc(1, sizeof(*g));

    if (g == NULL)
        return NULL;
    g->next = graphs;
    graphs = g;
    return g;
}

int graph_live_locked(CUgraph h)
{
    for (double_graph_t *g = graphs; g != NULL; g = g->next)
        if (g == (double_graph_t *)h)
            return 1;
    return 0;
}

void graph_free_locked(double_graph_t *g)
{
    double_graph_t **pp;

    for (pp = &graphs; *pp != NULL; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    for (size_t i = 0; i < g->n; i++)
        op_free(g->ops[i]);
    free(g->ops);
    free(g->efrom);
    free(g->eto);
    free(g);
}

/* Appends an owned node. */
CUresult graph_append_locked(double_graph_t *g, op_t *op)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 8;
        op_t **ops = realloc(g->ops, cap * sizeof(*ops));
        if (ops == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        g->ops = ops;
        g->cap = cap;
    }
    /* captured nodes form a chain (the double's captures are linear) */
    if (g->capturing && g->n > 0 && double_graph_edge_locked(g, g->n - 1, g->n) != CUDA_SUCCESS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->ops[g->n++] = op;
    return CUDA_SUCCESS;
}

int exec_live_locked(CUgraphExec h)
{
    for (double_exec_t *e = execs; e != NULL; e = e->next)
        if (e == (double_exec_t *)h)
            return 1;
    return 0;
}

/* ------------------------------------------------------------------ streams */

/* Resolves a stream handle (lock held): *out = NULL for the legacy stream. `per_thread`: the call
 * came through a _ptsz export, where NULL names the calling thread's default stream. */
static CUresult resolve_locked(CUstream s, int per_thread, double_stream_t **out)
{
    if (s == CU_STREAM_LEGACY || (s == NULL && !per_thread)) {
        *out = NULL;
        return CUDA_SUCCESS;
    }
    if (s == NULL || s == CU_STREAM_PER_THREAD) {
        if (ptds.cap == NULL)
            ptds.device = ctx_device(current());
        ptds.alive = 1;
        *out = &ptds;
        return CUDA_SUCCESS;
    }
    for (double_stream_t *st = streams; st != NULL; st = st->next)
        if (st == (double_stream_t *)s) {
            *out = st;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_HANDLE;
}

static int stream_device_of(const double_stream_t *st)
{
    return st == NULL ? ctx_device(current()) : st->device;
}

static void capture_unlink_locked(double_capture_t *cap)
{
    double_capture_t **pp;

    for (pp = &captures; *pp != NULL; pp = &(*pp)->next)
        if (*pp == cap) {
            *pp = cap->next;
            break;
        }
    cap->stream->cap = NULL;
}

EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
    double_stream_t *st;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (s == NULL || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    st = calloc(1, sizeof(*st));
    if (st == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    st->device = ctx_device(current());
    st->alive = 1;
    st->flags = flags;
    pthread_mutex_lock(&lock);
    st->next = streams;
    streams = st;
    pthread_mutex_unlock(&lock);
    *s = (CUstream)st;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
    double_stream_t **pp;

    NEED_INIT();
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    for (pp = &streams; *pp != NULL; pp = &(*pp)->next)
        if (*pp == (double_stream_t *)s)
            break;
    if (*pp == NULL) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *pp = (*pp)->next;
    if (((double_stream_t *)s)->cap != NULL) { /* the capture dies with its stream */
        double_capture_t *cap = ((double_stream_t *)s)->cap;
        capture_unlink_locked(cap);
        graph_free_locked(cap->graph);
        free(cap);
    }
    pthread_mutex_unlock(&lock);
    free(s);
    return CUDA_SUCCESS;
}

static CUresult stream_synchronize(CUstream s, int per_thread)
{
    double_stream_t *st;
    CUresult rc;

    pthread_mutex_lock(&lock);
    land_copies_locked();
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS) {
        if (st != NULL && st->cap != NULL) {
            st->cap->invalidated = 1;
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        } else {
            rc = unsafe_call_locked();
            if (rc == CUDA_SUCCESS && st == NULL)
                rc = legacy_use_locked(ctx_device(current()), 1);
        }
    }
    pthread_mutex_unlock(&lock);
    return rc; /* work runs at submission */
}

EXPORT CUresult cuStreamSynchronize(CUstream s)
{
    NEED_INIT();
    return stream_synchronize(s, 0);
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    NEED_INIT();
    return stream_synchronize(s, 1);
}

EXPORT CUresult cuCtxSynchronize(void)
{
    CUresult rc;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    land_copies_locked();
    rc = CUDA_SUCCESS;
    for (double_capture_t *c = captures; c != NULL; c = c->next)
        if (c->stream->device == ctx_device(current())) {
            c->invalidated = 1;
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    pthread_mutex_unlock(&lock);
    return rc;
}

static CUresult stream_get_ctx(CUstream s, CUcontext *c, int per_thread)
{
    double_stream_t *st;
    CUresult rc;

    if (c == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS && st != NULL && st->cap != NULL && st->cap->invalidated)
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    pthread_mutex_unlock(&lock);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (st == NULL || st == &ptds) {
        *c = current();
        return *c == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
    }
    *c = (CUcontext)&primary[st->device];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetCtx(CUstream s, CUcontext *c)
{
    NEED_INIT();
    return stream_get_ctx(s, c, 0);
}

EXPORT CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext *c)
{
    NEED_INIT();
    return stream_get_ctx(s, c, 1);
}

/* ------------------------------------------------------------------ modules */

EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
    double_module_t *mod;
    uint32_t magic;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (m == NULL || image == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&magic, image, sizeof(magic));
    if (magic != FATBIN_MAGIC)
        return CUDA_ERROR_INVALID_IMAGE;
    mod = calloc(1, sizeof(*mod));
    if (mod == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    mod->device = ctx_device(current());
    for (size_t i = 0; i < NKERNELS; i++) {
        mod->fns[i] = kernel_table[i];
        mod->fns[i].device = mod->device;
    }
    pthread_mutex_lock(&lock);
    mod->next = modules;
    modules = mod;
    pthread_mutex_unlock(&lock);
    *m = (CUmodule)mod;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleUnload(CUmodule m)
{
    double_module_t **pp, *found = NULL;

    NEED_INIT();
    pthread_mutex_lock(&lock);
    for (pp = &modules; *pp != NULL; pp = &(*pp)->next)
        if (*pp == (double_module_t *)m) {
            found = *pp;
            *pp = found->next;
            break;
        }
    pthread_mutex_unlock(&lock);
    if (found == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    free(found);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    double_module_t *mod = (double_module_t *)m;
    size_t i;

    NEED_INIT();
    if (m == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (f == NULL || name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (i = 0; i < sizeof(mod->fns) / sizeof(mod->fns[0]); i++)
        if (strcmp(mod->fns[i].name, name) == 0) {
            *f = (CUfunction)&mod->fns[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}

/* ------------------------------------------------------------------ executing work */

/* Checks the memory a kernel will touch against the allocations, as the GPU's memory protection
 * would (the double turns a would-be illegal address into a launch error). */
static CUresult check_kernel_memory(const double_function_t *fn, const void *params)
{
    if (strncmp(fn->name, "recap_fill_", 11) == 0) {
        const recap_fill_params_t *p = params;
        size_t es = strncmp(fn->name, RECAP_KERNEL_FILL_F64, strlen(RECAP_KERNEL_FILL_F64)) == 0 ? 8 : 4;
        if (check_range(p->dst, p->n * es) != CUDA_SUCCESS)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        if (p->philox.captured && (check_range((CUdeviceptr)(uintptr_t)p->philox.seed_ptr, 8) ||
                                   check_range((CUdeviceptr)(uintptr_t)p->philox.offset_ptr, 8)))
            return CUDA_ERROR_ILLEGAL_ADDRESS;
    } else {
        /* advance / slot_write: every slot must be 16 bytes of device memory */
        const uint64_t *slot = ((const recap_advance_params_t *)params)->slot;
        uint32_t i, count = strcmp(fn->name, RECAP_KERNEL_ADVANCE) == 0
                                ? ((const recap_advance_params_t *)params)->count
                                : ((const recap_slot_write_params_t *)params)->count;
        if (count > RECAP_SLOTS_PER_LAUNCH)
            return CUDA_ERROR_INVALID_VALUE;
        for (i = 0; i < count; i++)
            if (check_range(slot[i], 16) != CUDA_SUCCESS)
                return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    return CUDA_SUCCESS;
}

/* Executes one unit of work now (no lock held). */
static CUresult run_op(const op_t *op)
{
    CUresult rc = CUDA_SUCCESS;
    uint64_t t, nthreads;

    switch (op->kind) {
    case OP_CHILD:
    case OP_COND:
    case OP_EMPTY:
        return double_run_compound(op);
    case OP_KERNEL:
        rc = check_kernel_memory(op->fn, op->params);
        if (rc != CUDA_SUCCESS)
            return rc;
        nthreads = (uint64_t)op->grid * op->block;
        for (t = 0; t < nthreads; t++)
            op->fn->body(op->params, t, nthreads);
        __atomic_add_fetch(&launches, 1, __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
    case OP_WRITE32:
        if (check_range(op->dptr, 4) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_VALUE;
        *(volatile uint32_t *)(uintptr_t)op->dptr = (uint32_t)op->value;
        break;
    case OP_WRITE64:
        if (check_range(op->dptr, 8) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_VALUE;
        *(volatile uint64_t *)(uintptr_t)op->dptr = op->value;
        break;
    case OP_MEMSET8:
        if (check_range(op->dptr, op->n) != CUDA_SUCCESS)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        memset((void *)(uintptr_t)op->dptr, (int)(uint8_t)op->value, op->n);
        break;
    case OP_MEMSET32:
        if (check_range(op->dptr, 4 * op->n) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < op->n; i++)
            ((uint32_t *)(uintptr_t)op->dptr)[i] = (uint32_t)op->value;
        break;
    case OP_HTOD:
        if (check_range(op->dptr, op->n) != CUDA_SUCCESS)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        memcpy((void *)(uintptr_t)op->dptr, op->host, op->n);
        break;
    case OP_DTOH:
        if (check_range(op->dptr, op->n) != CUDA_SUCCESS)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        memcpy(op->host, (const void *)(uintptr_t)op->dptr, op->n);
        break;
    case OP_HOSTFN:
        op->hostfn(op->host);
        break;
    }
    __atomic_add_fetch(&stream_ops, 1, __ATOMIC_RELAXED);
    return rc;
}

CUresult run_ops(op_t *const *ops, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        CUresult rc = run_op(ops[i]);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

/* Submits work to a stream: a capturing stream records a copy of it, the legacy stream checks the
 * blocking captures, and otherwise the work runs at once. */
static CUresult submit(CUstream s, int per_thread, const op_t *op)
{
    double_stream_t *st;
    CUresult rc;

    pthread_mutex_lock(&lock);
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS && st == NULL)
        rc = legacy_use_locked(ctx_device(current()), 1);
    if (rc == CUDA_SUCCESS && st != NULL && st->cap != NULL) {
        if (st->cap->invalidated) {
            rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else {
            op_t *rec = op_clone(op);
            rc = rec == NULL ? CUDA_ERROR_OUT_OF_MEMORY : graph_append_locked(st->cap->graph, rec);
            if (rc != CUDA_SUCCESS)
                op_free(rec);
        }
        pthread_mutex_unlock(&lock);
        return rc;
    }
    pthread_mutex_unlock(&lock);
    return rc == CUDA_SUCCESS ? run_op(op) : rc;
}

static CUresult stream_device_check(CUstream s, int per_thread, int device)
{
    double_stream_t *st;
    CUresult rc;

    pthread_mutex_lock(&lock);
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS && stream_device_of(st) != device)
        rc = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_unlock(&lock);
    return rc;
}

static CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, CUstream s, void **params, void **extra,
                              int per_thread)
{
    const double_function_t *fn = (const double_function_t *)f;
    op_t op;
    CUresult rc;

    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (fn == NULL || params == NULL || params[0] == NULL || extra != NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (gx == 0 || bx == 0 || bx > 1024 || gy != 1 || gz != 1 || by != 1 || bz != 1)
        return CUDA_ERROR_INVALID_VALUE;
    if (fn->device != ctx_device(current()))
        return CUDA_ERROR_INVALID_HANDLE;
    if ((rc = stream_device_check(s, per_thread, fn->device)) != CUDA_SUCCESS)
        return rc;
    memset(&op, 0, sizeof(op));
    op.kind = OP_KERNEL;
    op.fn = fn;
    op.grid = gx;
    op.block = bx;
    op.params = params[0]; /* borrowed: submit() copies it when it records the launch */
    rc = submit(s, per_thread, &op);
    return rc;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shmem, CUstream s,
                               void **params, void **extra)
{
    NEED_INIT();
    return launch_kernel(f, gx, gy, gz, bx, by, bz, s, params, extra, 0);
}

EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                    CUstream s, void **params, void **extra)
{
    NEED_INIT();
    return launch_kernel(f, gx, gy, gz, bx, by, bz, s, params, extra, 1);
}

/* ------------------------------------------------------------------ stream memory operations,
 * async copies, memsets */

static CUresult write_value(CUstream s, CUdeviceptr addr, uint64_t value, unsigned flags, int wide,
                            int per_thread)
{
    op_t op;

    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) != 0 || (addr & (wide ? 7u : 3u)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    memset(&op, 0, sizeof(op));
    op.kind = wide ? OP_WRITE64 : OP_WRITE32;
    op.dptr = addr;
    op.value = value;
    /* The address must be device memory: checked when the write runs (at once, or at each launch
     * of a graph that holds it; the real driver accepts any address into a capture). */
    return submit(s, per_thread, &op);
}

EXPORT CUresult cuStreamWriteValue64_v2(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    NEED_INIT();
    return write_value(s, addr, value, flags, 1, 0);
}

EXPORT CUresult cuStreamWriteValue64_v2_ptsz(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    NEED_INIT();
    return write_value(s, addr, value, flags, 1, 1);
}

EXPORT CUresult cuStreamWriteValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    NEED_INIT();
    return write_value(s, addr, value, flags, 0, 0);
}

EXPORT CUresult cuStreamWriteValue32_v2_ptsz(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    NEED_INIT();
    return write_value(s, addr, value, flags, 0, 1);
}

static CUresult memcpy_async(op_kind_t kind, CUdeviceptr d, void *h, size_t n, CUstream s, int per_thread)
{
    op_t op;

    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (h == NULL || check_range(d, n) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    memset(&op, 0, sizeof(op));
    op.kind = kind;
    op.dptr = d;
    op.host = h;
    op.n = n;
    return submit(s, per_thread, &op);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    NEED_INIT();
    return memcpy_async(OP_HTOD, dst, (void *)(uintptr_t)src, n, s, 0);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    NEED_INIT();
    return memcpy_async(OP_HTOD, dst, (void *)(uintptr_t)src, n, s, 1);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    NEED_INIT();
    return memcpy_async(OP_DTOH, src, dst, n, s, 0);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    NEED_INIT();
    return memcpy_async(OP_DTOH, src, dst, n, s, 1);
}

/* A host function in stream order: at once on an idle stream (the double runs work as it is
 * submitted), a host node inside a capture. */
static CUresult launch_host_func(CUstream s, CUhostFn fn, void *data, int per_thread)
{
    op_t op;

    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (fn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    memset(&op, 0, sizeof(op));
    op.kind = OP_HOSTFN;
    op.hostfn = fn;
    op.host = data;
    return submit(s, per_thread, &op);
}

EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data)
{
    NEED_INIT();
    return launch_host_func(s, fn, data, 0);
}

EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *data)
{
    NEED_INIT();
    return launch_host_func(s, fn, data, 1);
}

/* Pinned host memory: host memory the device addresses too (UVA), so kernels and copies may
 * use it and pointer queries report it as host memory of the allocating context's device. */
EXPORT CUresult cuMemAllocHost_v2(void **p, size_t bytes)
{
    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (p == NULL || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    *p = malloc(bytes);
    if (*p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!track_alloc(*p, bytes, 1)) {
        free(*p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    int known;

    NEED_INIT();
    pthread_mutex_lock(&lock);
    known = untrack_alloc((uintptr_t)p, 1);
    pthread_mutex_unlock(&lock);
    if (!known)
        return CUDA_ERROR_INVALID_VALUE;
    free(p);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n)
{
    op_t op;
    CUresult rc;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((rc = sync_op_allowed()) != CUDA_SUCCESS)
        return rc;
    if (check_range(dst, n) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    memset(&op, 0, sizeof(op));
    op.kind = OP_MEMSET8;
    op.dptr = dst;
    op.value = uc;
    op.n = n;
    return run_op(&op);
}

static CUresult memset32_async(CUdeviceptr dst, unsigned ui, size_t n, CUstream s, int per_thread)
{
    op_t op;

    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    /* The range is checked when it runs, and at instantiation for a captured memset. */
    if ((dst & 3u) != 0 || n > SIZE_MAX / 4)
        return CUDA_ERROR_INVALID_VALUE;
    memset(&op, 0, sizeof(op));
    op.kind = OP_MEMSET32;
    op.dptr = dst;
    op.value = ui;
    op.n = n;
    return submit(s, per_thread, &op);
}

EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n, CUstream s)
{
    NEED_INIT();
    return memset32_async(dst, ui, n, s, 0);
}

EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int ui, size_t n, CUstream s)
{
    NEED_INIT();
    return memset32_async(dst, ui, n, s, 1);
}

/* ------------------------------------------------------------------ stream capture */

EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    CUstreamCaptureMode old;

    NEED_INIT();
    if (mode == NULL) /* (the real driver crashes) */
        return CUDA_ERROR_INVALID_VALUE;
    old = thread_mode; /* any value goes, as with the real driver; unknown ones act as THREAD_LOCAL */
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

static CUresult begin_capture(CUstream s, CUstreamCaptureMode mode, int per_thread)
{
    double_stream_t *st;
    double_capture_t *cap;
    CUresult rc;

    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS && st == NULL)
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (rc == CUDA_SUCCESS && st->cap != NULL)
        rc = CUDA_ERROR_ILLEGAL_STATE;
    if (rc == CUDA_SUCCESS && st->device < 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS) {
        cap = calloc(1, sizeof(*cap));
        if (cap == NULL || (cap->graph = graph_new_locked()) == NULL) {
            free(cap);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            cap->graph->capturing = 1;
            cap->id = ++capture_seq;
            cap->mode = mode;
            cap->thread = pthread_self();
            cap->stream = st;
            cap->next = captures;
            captures = cap;
            st->cap = cap;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    NEED_INIT();
    return begin_capture(s, mode, 0);
}

EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
    NEED_INIT();
    return begin_capture(s, mode, 1);
}

/* The 1-argument forms of CUDA 10.0, before capture modes: they capture RELAXED. */
EXPORT CUresult cuStreamBeginCapture(CUstream s)
{
    NEED_INIT();
    return begin_capture(s, CU_STREAM_CAPTURE_MODE_RELAXED, 0);
}

EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s)
{
    NEED_INIT();
    return begin_capture(s, CU_STREAM_CAPTURE_MODE_RELAXED, 1);
}

static CUresult end_capture(CUstream s, CUgraph *out, int per_thread)
{
    double_stream_t *st;
    double_capture_t *cap;
    CUresult rc;

    if (out != NULL)
        *out = NULL;
    pthread_mutex_lock(&lock);
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS && (st == NULL || st->cap == NULL))
        rc = CUDA_ERROR_ILLEGAL_STATE;
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_unlock(&lock);
        return rc;
    }
    /* The capture ends whatever the outcome; its graph goes to the caller only on success. */
    cap = st->cap;
    capture_unlink_locked(cap);
    if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(cap->thread, pthread_self()))
        rc = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    else if (cap->invalidated)
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (rc != CUDA_SUCCESS || out == NULL) {
        graph_free_locked(cap->graph);
    } else {
        cap->graph->capturing = 0;
        *out = (CUgraph)cap->graph;
    }
    pthread_mutex_unlock(&lock);
    free(cap);
    return rc;
}

EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *out)
{
    NEED_INIT();
    return end_capture(s, out, 0);
}

EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *out)
{
    NEED_INIT();
    return end_capture(s, out, 1);
}

static CUresult capture_info(CUstream s, int per_thread, CUstreamCaptureStatus *status,
                             cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *ndeps)
{
    double_stream_t *st;
    CUresult rc;

    if (status == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS && st == NULL) {
        rc = legacy_use_locked(ctx_device(current()), 0);
        if (rc == CUDA_SUCCESS)
            *status = CU_STREAM_CAPTURE_STATUS_NONE;
    } else if (rc == CUDA_SUCCESS && st->cap == NULL) {
        *status = CU_STREAM_CAPTURE_STATUS_NONE;
    } else if (rc == CUDA_SUCCESS) {
        double_capture_t *cap = st->cap;
        double_graph_t *g = cap->graph;

        *status = cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
        if (!cap->invalidated) {
            if (id != NULL)
                *id = cap->id;
            /* linear graphs: the next node depends on the last one */
            if (graph != NULL)
                *graph = (CUgraph)g;
            if (deps != NULL)
                *deps = g->n > 0 ? (const CUgraphNode *)&g->ops[g->n - 1] : NULL;
            if (edges != NULL)
                *edges = NULL;
            if (ndeps != NULL)
                *ndeps = g->n > 0 ? 1 : 0;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    NEED_INIT();
    return capture_info(s, 0, status, NULL, NULL, NULL, NULL, NULL);
}

EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status)
{
    NEED_INIT();
    return capture_info(s, 1, status, NULL, NULL, NULL, NULL, NULL);
}

EXPORT CUresult cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id)
{
    NEED_INIT();
    return capture_info(s, 0, status, id, NULL, NULL, NULL, NULL);
}

EXPORT CUresult cuStreamGetCaptureInfo_ptsz(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id)
{
    NEED_INIT();
    return capture_info(s, 1, status, id, NULL, NULL, NULL, NULL);
}

EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                          CUgraph *graph, const CUgraphNode **deps, size_t *ndeps)
{
    NEED_INIT();
    return capture_info(s, 0, status, id, graph, deps, NULL, ndeps);
}

EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream s, CUstreamCaptureStatus *status,
                                               cuuint64_t *id, CUgraph *graph,
                                               const CUgraphNode **deps, size_t *ndeps)
{
    NEED_INIT();
    return capture_info(s, 1, status, id, graph, deps, NULL, ndeps);
}

EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                          CUgraph *graph, const CUgraphNode **deps,
                                          const CUgraphEdgeData **edges, size_t *ndeps)
{
    NEED_INIT();
    if (edges != NULL && deps == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return capture_info(s, 0, status, id, graph, deps, edges, ndeps);
}

EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream s, CUstreamCaptureStatus *status,
                                               cuuint64_t *id, CUgraph *graph,
                                               const CUgraphNode **deps,
                                               const CUgraphEdgeData **edges, size_t *ndeps)
{
    NEED_INIT();
    if (edges != NULL && deps == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return capture_info(s, 1, status, id, graph, deps, edges, ndeps);
}

/* ------------------------------------------------------------------ graphs */

EXPORT CUresult cuGraphCreate(CUgraph *out, unsigned int flags)
{
    double_graph_t *g;

    NEED_INIT();
    if (out == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    g = graph_new_locked();
    pthread_mutex_unlock(&lock);
    if (g == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = (CUgraph)g;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(CUgraph graph)
{
    CUresult rc = CUDA_SUCCESS;

    NEED_INIT();
    pthread_mutex_lock(&lock);
    if (!graph_live_locked(graph) || ((double_graph_t *)graph)->capturing ||
        ((double_graph_t *)graph)->embedded)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        graph_free_locked((double_graph_t *)graph);
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuGraphClone(CUgraph *out, CUgraph orig)
{
    double_graph_t *src = (double_graph_t *)orig, *g;
    CUresult rc = CUDA_SUCCESS;

    NEED_INIT();
    if (out == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (!graph_live_locked(orig)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if ((g = graph_new_locked()) == NULL) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        g->ops = ops_clone(src->ops, src->n);
        if (g->ops == NULL) {
            graph_free_locked(g);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            g->n = g->cap = src->n;
            if (double_graph_copy_edges_locked(g, src) != CUDA_SUCCESS) {
                graph_free_locked(g);
                rc = CUDA_ERROR_OUT_OF_MEMORY;
            } else {
                *out = (CUgraph)g;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode *nodes, size_t *count)
{
    double_graph_t *g = (double_graph_t *)graph;
    CUresult rc = CUDA_SUCCESS;

    NEED_INIT();
    if (count == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (!graph_live_locked(graph)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (nodes == NULL) {
        *count = g->n;
    } else {
        size_t i;
        for (i = 0; i < *count; i++)
            nodes[i] = i < g->n ? (CUgraphNode)g->ops[i] : NULL;
        if (*count > g->n)
            *count = g->n;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* Nodes added with cuGraphAddKernelNode keep their dependencies as edges (cuGraphGetEdges), but
 * the double's graphs run in insertion order. */
EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                        size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *p)
{
    const double_function_t *fn;
    op_t *op;
    CUresult rc = CUDA_SUCCESS;

    NEED_INIT();
    if (node == NULL || p == NULL || (ndeps > 0 && deps == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    fn = (const double_function_t *)p->func;
    if (fn == NULL || p->kernelParams == NULL || p->kernelParams[0] == NULL || p->extra != NULL ||
        p->gridDimX == 0 || p->blockDimX == 0 || p->blockDimX > 1024 || p->gridDimY != 1 ||
        p->gridDimZ != 1 || p->blockDimY != 1 || p->blockDimZ != 1)
        return CUDA_ERROR_INVALID_VALUE;
    op = calloc(1, sizeof(*op));
    if (op == NULL || (op->params = malloc(fn->params_size)) == NULL) {
        free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->kind = OP_KERNEL;
    op->fn = fn;
    op->grid = p->gridDimX;
    op->block = p->blockDimX;
    memcpy(op->params, p->kernelParams[0], fn->params_size);
    pthread_mutex_lock(&lock);
    if (!graph_live_locked(graph))
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        rc = double_graph_add_locked((double_graph_t *)graph, op, deps, ndeps);
    pthread_mutex_unlock(&lock);
    if (rc != CUDA_SUCCESS)
        op_free(op);
    else
        *node = (CUgraphNode)op;
    return rc;
}

#define INSTANTIATE_FLAGS                                                                   \
    (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |  \
     CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

static CUresult instantiate(CUgraphExec *out, CUgraph graph, unsigned long long flags)
{
    double_graph_t *g = (double_graph_t *)graph;
    double_exec_t *e = NULL;
    CUresult rc = CUDA_SUCCESS;

    if (out == NULL || (flags & ~(unsigned long long)INSTANTIATE_FLAGS) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    if ((rc = unsafe_call_locked()) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&lock);
        return rc;
    }
    if (!graph_live_locked(graph))
        rc = CUDA_ERROR_INVALID_VALUE;
    /* memset nodes must lie in device memory (stream writes are checked at launch) */
    for (size_t i = 0; rc == CUDA_SUCCESS && i < g->n; i++)
        if (g->ops[i]->kind == OP_MEMSET32 && find_alloc((uintptr_t)g->ops[i]->dptr, 4 * g->ops[i]->n) < 0)
            rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && (e = calloc(1, sizeof(*e))) == NULL)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && (e->ops = ops_clone(g->ops, g->n)) == NULL) { /* a snapshot */
        free(e);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS) {
        e->n = g->n;
        e->src = g;
        e->flags = flags;
        e->next = execs;
        execs = e;
        *out = (CUgraphExec)e;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph graph, unsigned long long flags)
{
    NEED_INIT();
    return instantiate(out, graph, flags);
}

static CUresult instantiate_with_params(CUgraphExec *out, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    CUresult rc;

    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    rc = instantiate(out, graph, p->flags);
    p->hErrNode_out = NULL;
    p->result_out = rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return rc;
}

EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *out, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    NEED_INIT();
    return instantiate_with_params(out, graph, p);
}

EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *out, CUgraph graph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    NEED_INIT();
    return instantiate_with_params(out, graph, p);
}

/* The 5-argument forms (CUDA 10 to 11), which cuda.h now maps cuGraphInstantiate away from. */
static CUresult instantiate_v1(CUgraphExec *out, CUgraph graph, CUgraphNode *err_node, char *log, size_t log_size)
{
    CUresult rc = instantiate(out, graph, 0);

    if (log != NULL && log_size > 0)
        log[0] = '\0';
    if (rc != CUDA_SUCCESS && err_node != NULL)
        *err_node = NULL;
    return rc;
}

EXPORT CUresult cuGraphInstantiate(CUgraphExec *out, CUgraph graph, CUgraphNode *err_node, char *log,
                                   size_t log_size)
{
    NEED_INIT();
    return instantiate_v1(out, graph, err_node, log, log_size);
}

EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *out, CUgraph graph, CUgraphNode *err_node, char *log,
                                      size_t log_size)
{
    NEED_INIT();
    return instantiate_v1(out, graph, err_node, log, log_size);
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec)
{
    double_exec_t **pp, *e = NULL;
    CUresult rc;

    NEED_INIT();
    pthread_mutex_lock(&lock);
    if ((rc = unsafe_call_locked()) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&lock);
        return rc;
    }
    for (pp = &execs; *pp != NULL; pp = &(*pp)->next)
        if (*pp == (double_exec_t *)exec) {
            e = *pp;
            *pp = e->next;
            break;
        }
    if (e != NULL) { /* under the lock: child graph nodes own live (embedded) graphs */
        for (size_t i = 0; i < e->n; i++)
            op_free(e->ops[i]);
        free(e->ops);
        free(e);
    }
    pthread_mutex_unlock(&lock);
    return e == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* Runs an executable's nodes in order. The real driver refuses to launch a graph into a capture
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture invalidated, also when it was invalidated
 * before). A stream memory write to memory that is not the device's fails the launch with
 * CUDA_ERROR_INVALID_VALUE, after the nodes before it have run (as observed). */
static CUresult graph_launch(CUgraphExec exec, CUstream s, int per_thread)
{
    double_exec_t *e = (double_exec_t *)exec;
    double_stream_t *st;
    CUresult rc;

    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    rc = exec_live_locked(exec) ? resolve_locked(s, per_thread, &st) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && st == NULL)
        rc = legacy_use_locked(ctx_device(current()), 1);
    if (rc == CUDA_SUCCESS && st != NULL && st->cap != NULL) {
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        st->cap->invalidated = 1;
    }
    pthread_mutex_unlock(&lock);
    if (rc != CUDA_SUCCESS)
        return rc;
    return run_ops(e->ops, e->n);
}

EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream s)
{
    NEED_INIT();
    return graph_launch(exec, s, 0);
}

EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s)
{
    NEED_INIT();
    return graph_launch(exec, s, 1);
}

static CUresult graph_upload(CUgraphExec exec, CUstream s, int per_thread)
{
    double_stream_t *st;
    CUresult rc;

    pthread_mutex_lock(&lock);
    rc = exec_live_locked(exec) ? resolve_locked(s, per_thread, &st) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && st != NULL && st->cap != NULL) {
        st->cap->invalidated = 1;
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_unlock(&lock);
    return rc; /* nothing to upload */
}

EXPORT CUresult cuGraphUpload(CUgraphExec exec, CUstream s)
{
    NEED_INIT();
    return graph_upload(exec, s, 0);
}

EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream s)
{
    NEED_INIT();
    return graph_upload(exec, s, 1);
}
