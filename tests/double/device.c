/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double: initialization, devices and contexts. */
#include "tests/double/double.h"

int ctx_device(CUcontext c)
{
    return c == NULL ? -1 : ((double_ctx_t *)c)->device;
}

CUcontext current(void)
{
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
}

RECAP_API CUresult cuInit(unsigned int flags)
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

RECAP_API CUresult cuDriverGetVersion(int *v)
{
    ENTER();
    if (v == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuGetErrorName(CUresult rc, const char **s)
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

RECAP_API CUresult cuDeviceGetCount(int *n)
{
    NEED_INIT();
    if (n == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *n = ndev;
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    NEED_INIT();
    if (d == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    NEED_INIT();
    if (name == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "recap CUDA test double %d", d);
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
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

RECAP_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    NEED_INIT();
    if (bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)1 << 30;
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
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

RECAP_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
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

RECAP_API CUresult cuCtxGetCurrent(CUcontext *c)
{
    NEED_INIT();
    if (c == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *c = current();
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuCtxSetCurrent(CUcontext c)
{
    NEED_INIT();
    if (ctx_depth == 0)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = c;
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuCtxPushCurrent_v2(CUcontext c)
{
    NEED_INIT();
    if (c == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == (int)(sizeof(ctx_stack) / sizeof(ctx_stack[0])))
        return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuCtxPopCurrent_v2(CUcontext *c)
{
    NEED_INIT();
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_depth--;
    if (c != NULL)
        *c = ctx_stack[ctx_depth];
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuCtxGetDevice(CUdevice *d)
{
    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    *d = ctx_device(current());
    return CUDA_SUCCESS;
}
