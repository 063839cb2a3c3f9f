/*
 * A CUDA driver test double: a fake libcuda.so.1 implementing the subset of the driver API that
 * recap uses, so CI (no GPU) exercises recap's device code paths. Device memory is host memory
 * tracked by allocation; kernels are recap's own kernel bodies (the src/kernels body headers) compiled
 * for the host and run thread by thread over the launch grid; streams execute in order at once.
 *
 * recap finds it through RECAP_CUDA_DRIVER (test-only). Knobs, for tests:
 *   RECAP_DOUBLE_DEVICES=N     number of devices (default 2)
 *   RECAP_DOUBLE_FAIL_INIT=1   cuInit fails with CUDA_ERROR_NO_DEVICE
 * Never installed.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/registry.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEV 16
#define MAX_ALLOC 4096
#define FATBIN_MAGIC 0xBA55ED50u

typedef struct double_ctx {
    int device;
} double_ctx_t;

typedef struct double_stream {
    int device;
    int alive;
} double_stream_t;

/* Every recap kernel runs through one signature: its by-value parameter block, thread, threads. */
typedef void (*kernel_body_t)(const void *, uint64_t, uint64_t);

typedef struct double_function {
    const char *name;
    kernel_body_t body;
    size_t params_size;
    int device;
} double_function_t;

#define KERNEL_FN(id, name, type, body) {name, (kernel_body_t)body, sizeof(type), 0},
static const double_function_t kernel_table[] = {RECAP_KERNELS(KERNEL_FN)};
#undef KERNEL_FN
#define NKERNELS (sizeof(kernel_table) / sizeof(kernel_table[0]))

typedef struct double_module {
    int device;
    double_function_t fns[NKERNELS];
} double_module_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized, ndev = 2;
static double_ctx_t primary[MAX_DEV];
static struct {
    uintptr_t base;
    size_t size;
    int device;
} allocs[MAX_ALLOC];
static int nallocs;
static unsigned long launches;

/* The current-context stack of each thread. */
static _Thread_local CUcontext ctx_stack[32];
static _Thread_local int ctx_depth;

EXPORT unsigned long recap_double_launch_count(void);
EXPORT unsigned long recap_double_launch_count(void)
{
    return __atomic_load_n(&launches, __ATOMIC_RELAXED);
}

static int ctx_device(CUcontext c)
{
    return c == NULL ? -1 : ((double_ctx_t *)c)->device;
}

static CUcontext current(void)
{
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
}

#define NEED_INIT()                          \
    do {                                     \
        if (!initialized)                    \
            return CUDA_ERROR_NOT_INITIALIZED; \
    } while (0)

EXPORT CUresult cuInit(unsigned int flags)
{
    const char *n = getenv("RECAP_DOUBLE_DEVICES");
    const char *fail = getenv("RECAP_DOUBLE_FAIL_INIT");
    int i;

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
    if (v == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorName(CUresult rc, const char **s)
{
    switch (rc) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: *s = "CUDA_ERROR_CONTEXT_IS_DESTROYED"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; return CUDA_ERROR_INVALID_VALUE;
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
    *c = (CUcontext)&primary[d];
    return CUDA_SUCCESS;
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

EXPORT CUresult cuCtxSynchronize(void)
{
    NEED_INIT();
    return current() == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
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

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    void *p;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (dptr == NULL || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes > ((size_t)1 << 34))
        return CUDA_ERROR_OUT_OF_MEMORY;
    p = aligned_alloc(256, (bytes + 255) & ~(size_t)255);
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    if (nallocs == MAX_ALLOC) {
        pthread_mutex_unlock(&lock);
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    allocs[nallocs].base = (uintptr_t)p;
    allocs[nallocs].size = bytes;
    allocs[nallocs].device = ctx_device(current());
    nallocs++;
    pthread_mutex_unlock(&lock);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    int i;

    NEED_INIT();
    pthread_mutex_lock(&lock);
    for (i = 0; i < nallocs; i++)
        if (allocs[i].base == (uintptr_t)dptr)
            break;
    if (i == nallocs) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    free((void *)allocs[i].base);
    allocs[i] = allocs[--nallocs];
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

static CUresult check_range(CUdeviceptr p, size_t len)
{
    int i;

    pthread_mutex_lock(&lock);
    i = find_alloc((uintptr_t)p, len);
    pthread_mutex_unlock(&lock);
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (src == NULL || check_range(dst, n) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (dst == NULL || check_range(src, n) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
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

/* ------------------------------------------------------------------ streams */

EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
    double_stream_t *st;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (s == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    st = calloc(1, sizeof(*st));
    if (st == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    st->device = ctx_device(current());
    st->alive = 1;
    *s = (CUstream)st;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
    NEED_INIT();
    if (s == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    free(s);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream s)
{
    NEED_INIT();
    return CUDA_SUCCESS; /* work runs at submission */
}

static int stream_device(CUstream s)
{
    return s == NULL ? ctx_device(current()) : ((double_stream_t *)s)->device;
}

EXPORT CUresult cuStreamGetCtx(CUstream s, CUcontext *c)
{
    NEED_INIT();
    if (c == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (s == NULL) {
        *c = current();
        return *c == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
    }
    *c = (CUcontext)&primary[((double_stream_t *)s)->device];
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ modules and launches */

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
    *m = (CUmodule)mod;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    double_module_t *mod = (double_module_t *)m;
    size_t i;

    NEED_INIT();
    if (f == NULL || m == NULL || name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (i = 0; i < sizeof(mod->fns) / sizeof(mod->fns[0]); i++)
        if (strcmp(mod->fns[i].name, name) == 0) {
            *f = (CUfunction)&mod->fns[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}

/* Checks the memory a kernel will touch against the allocations, as the GPU's memory protection
 * would (the double turns a would-be illegal address into a launch error). */
static CUresult check_kernel_memory(const double_function_t *fn, const void *params)
{
    if (strncmp(fn->name, "recap_fill_", 11) == 0) {
        const recap_fill_params_t *p = params;
        size_t es = strcmp(fn->name, RECAP_KERNEL_FILL_F64) == 0 ? 8 : 4;
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

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shmem, CUstream s,
                               void **params, void **extra)
{
    const double_function_t *fn = (const double_function_t *)f;
    uint64_t t, nthreads;
    CUresult rc;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (fn == NULL || params == NULL || params[0] == NULL || extra != NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (gx == 0 || bx == 0 || bx > 1024 || gy != 1 || gz != 1 || by != 1 || bz != 1)
        return CUDA_ERROR_INVALID_VALUE;
    if (fn->device != ctx_device(current()) || stream_device(s) != fn->device)
        return CUDA_ERROR_INVALID_HANDLE;
    rc = check_kernel_memory(fn, params[0]);
    if (rc != CUDA_SUCCESS)
        return rc;
    nthreads = (uint64_t)gx * bx;
    for (t = 0; t < nthreads; t++)
        fn->body(params[0], t, nthreads);
    __atomic_add_fetch(&launches, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}
