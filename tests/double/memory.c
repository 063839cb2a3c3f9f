/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double: device and pinned memory, synchronous copies, pointer attributes. */
#include "tests/double/double.h"

int find_alloc(uintptr_t p, size_t len)
{
    int i;

    for (i = 0; i < nallocs; i++)
        if (p >= allocs[i].base && p - allocs[i].base <= allocs[i].size &&
            len <= allocs[i].size - (p - allocs[i].base))
            return i;
    return -1;
}

/* Records an allocation of the current context's device; 0 when the table is full. */
int track_alloc(void *p, size_t bytes, int pinned)
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
int untrack_alloc(uintptr_t base, int pinned)
{
    int i;

    for (i = 0; i < nallocs; i++)
        if (allocs[i].base == base && allocs[i].pinned == pinned) {
            allocs[i] = allocs[--nallocs];
            return 1;
        }
    return 0;
}

RECAP_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
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

RECAP_API CUresult cuMemFree_v2(CUdeviceptr dptr)
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

CUresult check_range(CUdeviceptr p, size_t len)
{
    int i;

    pthread_mutex_lock(&lock);
    i = find_alloc((uintptr_t)p, len);
    pthread_mutex_unlock(&lock);
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* A synchronous copy or memset runs on the legacy stream: implicitly ordered after the blocking
 * streams (the driver does not count it among the potentially unsafe calls). */
CUresult sync_op_allowed(void)
{
    CUresult rc;

    pthread_mutex_lock(&lock);
    rc = legacy_use_locked(ctx_device(current()), 1);
    pthread_mutex_unlock(&lock);
    return rc;
}

RECAP_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
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

RECAP_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
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

RECAP_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr p)
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
RECAP_API CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
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
