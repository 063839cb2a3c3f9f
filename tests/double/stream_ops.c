/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double: stream memory operations, async copies, memsets, host functions. */
#include "tests/double/double.h"

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

RECAP_API CUresult cuStreamWriteValue64_v2(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    NEED_INIT();
    return write_value(s, addr, value, flags, 1, 0);
}

RECAP_API CUresult cuStreamWriteValue64_v2_ptsz(CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    NEED_INIT();
    return write_value(s, addr, value, flags, 1, 1);
}

RECAP_API CUresult cuStreamWriteValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    NEED_INIT();
    return write_value(s, addr, value, flags, 0, 0);
}

RECAP_API CUresult cuStreamWriteValue32_v2_ptsz(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
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

RECAP_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    NEED_INIT();
    return memcpy_async(OP_HTOD, dst, (void *)(uintptr_t)src, n, s, 0);
}

RECAP_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    NEED_INIT();
    return memcpy_async(OP_HTOD, dst, (void *)(uintptr_t)src, n, s, 1);
}

RECAP_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    NEED_INIT();
    return memcpy_async(OP_DTOH, src, dst, n, s, 0);
}

RECAP_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s)
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

RECAP_API CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data)
{
    NEED_INIT();
    return launch_host_func(s, fn, data, 0);
}

RECAP_API CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *data)
{
    NEED_INIT();
    return launch_host_func(s, fn, data, 1);
}

/* Pinned host memory: host memory the device addresses too (UVA), so kernels and copies may
 * use it and pointer queries report it as host memory of the allocating context's device. */
RECAP_API CUresult cuMemAllocHost_v2(void **p, size_t bytes)
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

RECAP_API CUresult cuMemFreeHost(void *p)
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

RECAP_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n)
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

RECAP_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n, CUstream s)
{
    NEED_INIT();
    return memset32_async(dst, ui, n, s, 0);
}

RECAP_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int ui, size_t n, CUstream s)
{
    NEED_INIT();
    return memset32_async(dst, ui, n, s, 1);
}
