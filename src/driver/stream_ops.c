/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stream-ordered host work: pinned host memory, asynchronous copies and host functions, each in
 * the device's primary context. Inside a capture the driver turns them into graph nodes, which
 * is why a host whose step runs in a graph needs them rather than the synchronous copies.
 */
#include "config.h"

#include "base/error.h"
#include "driver/driver.h"

/* The driver table, when it has the entry point `field`. */
#define NEED_ENTRY(drv, field)                                                          \
    const recap__driver_t *drv = NULL;                                                   \
    do {                                                                                \
        recap_status_t st_ = recap__driver_get(&drv);                                   \
        if (st_ != RECAP_OK)                                                            \
            return st_;                                                                 \
        if (drv->field == NULL)                                                         \
            return recap__fail(RECAP_ERR_UNSUPPORTED, "the CUDA driver has no " #field); \
    } while (0)

recap_status_t recap_host_alloc(int device, size_t bytes, void **ptr_p)
{
    void *p = NULL;

    RECAP_CHECK_ARG(ptr_p != NULL, "ptr_p is NULL");
    RECAP_CHECK_ARG(bytes > 0, "allocation of 0 bytes");
    {
        NEED_ENTRY(drv, cuMemAllocHost);
        RECAP_IN_DEVICE(device, "cuMemAllocHost", drv->cuMemAllocHost(&p, bytes));
    }
    *ptr_p = p;
    return RECAP_OK;
}

recap_status_t recap_host_free(int device, void *ptr)
{
    RECAP_CHECK_ARG(ptr != NULL, "ptr is NULL");
    NEED_ENTRY(drv, cuMemFreeHost);
    RECAP_IN_DEVICE(device, "cuMemFreeHost", drv->cuMemFreeHost(ptr));
    return RECAP_OK;
}

recap_status_t recap_memcpy_to_device_async(int device, void *dst, const void *src, size_t bytes,
                                            recap_stream_t stream)
{
    RECAP_CHECK_ARG(dst != NULL && src != NULL, "NULL buffer");
    if (bytes == 0)
        return RECAP_OK;
    {
        NEED_ENTRY(drv, cuMemcpyHtoDAsync);
        RECAP_IN_DEVICE(device, "cuMemcpyHtoDAsync",
                        drv->cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, bytes,
                                               (CUstream)stream));
    }
    return RECAP_OK;
}

recap_status_t recap_memcpy_to_host_async(int device, void *dst, const void *src, size_t bytes,
                                          recap_stream_t stream)
{
    RECAP_CHECK_ARG(dst != NULL && src != NULL, "NULL buffer");
    if (bytes == 0)
        return RECAP_OK;
    {
        NEED_ENTRY(drv, cuMemcpyDtoHAsync);
        RECAP_IN_DEVICE(device, "cuMemcpyDtoHAsync",
                        drv->cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, bytes,
                                               (CUstream)stream));
    }
    return RECAP_OK;
}

recap_status_t recap_stream_host_func(int device, recap_stream_t stream, void (*fn)(void *data),
                                      void *data)
{
    RECAP_CHECK_ARG(fn != NULL, "fn is NULL");
    NEED_ENTRY(drv, cuLaunchHostFunc);
    RECAP_IN_DEVICE(device, "cuLaunchHostFunc",
                    drv->cuLaunchHostFunc((CUstream)stream, fn, data));
    return RECAP_OK;
}
