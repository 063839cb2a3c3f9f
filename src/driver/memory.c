/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "base/error.h"
#include "driver/driver.h"

/* The driver table for RECAP_IN_DEVICE's calls (the device lookup loads it first). */
static const recap__driver_t *drv_table(void)
{
    const recap__driver_t *drv = NULL;

    recap__driver_get(&drv);
    return drv;
}

recap_status_t recap_device_alloc(int device, size_t bytes, void **ptr_p)
{
    CUdeviceptr p = 0;

    RECAP_CHECK_ARG(ptr_p != NULL, "ptr_p is NULL");
    RECAP_CHECK_ARG(bytes > 0, "allocation of 0 bytes");
    RECAP_IN_DEVICE(device, "cuMemAlloc", drv_table()->cuMemAlloc(&p, bytes));
    *ptr_p = (void *)(uintptr_t)p;
    return RECAP_OK;
}

recap_status_t recap_device_free(int device, void *ptr)
{
    RECAP_CHECK_ARG(ptr != NULL, "ptr is NULL");
    RECAP_IN_DEVICE(device, "cuMemFree", drv_table()->cuMemFree((CUdeviceptr)(uintptr_t)ptr));
    return RECAP_OK;
}

/*
 * The synchronous copies return with the bytes where they go. A synchronous cuMemcpyDtoH does
 * (it returns once the copy completed), but a synchronous cuMemcpyHtoD from pageable memory may
 * return once the data is staged, its DMA still running on the legacy stream, and recap's
 * streams are non-blocking: a fill launched right after could be overwritten by the copy's tail
 * (seen on an H200). So a copy to the device goes on a stream of its own, waited for. The
 * stream is a blocking one, so the copy still starts after the legacy stream's earlier work,
 * as cuMemcpyHtoD's did; the wait runs in relaxed capture mode, as a synchronous copy is allowed
 * to while another thread captures. The stream is made per call (these copies are for setup
 * and checking, not hot paths).
 */
static recap_status_t copy_to_device_and_wait(int device, void *dst, const void *src,
                                              size_t bytes)
{
    const recap__driver_t *drv = drv_table();
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    const char *what = "cuStreamCreate";
    const recap__device_t *dev;
    recap_status_t st;
    CUstream s = NULL;
    CUresult rc;
    int pushed;

    st = recap__device_get(device, &dev);
    if (st != RECAP_OK)
        return st;
    st = recap__ctx_enter(dev, &pushed);
    if (st != RECAP_OK)
        return st;
    if (drv->has_graphs)
        drv->cuThreadExchangeStreamCaptureMode(&mode);
    rc = drv->cuStreamCreate(&s, CU_STREAM_DEFAULT);
    if (rc == CUDA_SUCCESS) {
        what = "cuMemcpyHtoDAsync";
        rc = drv->cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, bytes, s);
        if (rc == CUDA_SUCCESS) {
            what = "cuStreamSynchronize";
            rc = drv->cuStreamSynchronize(s);
        }
        drv->cuStreamDestroy(s);
    }
    if (drv->has_graphs)
        drv->cuThreadExchangeStreamCaptureMode(&mode);
    recap__ctx_leave(pushed);
    return rc == CUDA_SUCCESS ? RECAP_OK : recap__cuda_fail(rc, what);
}

recap_status_t recap_memcpy_to_device(int device, void *dst, const void *src, size_t bytes)
{
    RECAP_CHECK_ARG(dst != NULL && src != NULL, "NULL buffer");
    if (bytes == 0)
        return RECAP_OK;
    if (drv_table() != NULL && drv_table()->cuMemcpyHtoDAsync != NULL)
        return copy_to_device_and_wait(device, dst, src, bytes);
    RECAP_IN_DEVICE(device, "cuMemcpyHtoD",
                    drv_table()->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes));
    return RECAP_OK;
}

recap_status_t recap_memcpy_to_host(int device, void *dst, const void *src, size_t bytes)
{
    RECAP_CHECK_ARG(dst != NULL && src != NULL, "NULL buffer");
    if (bytes == 0)
        return RECAP_OK;
    RECAP_IN_DEVICE(device, "cuMemcpyDtoH",
                    drv_table()->cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes));
    return RECAP_OK;
}

int recap__pointer_device(const recap__driver_t *drv, const void *ptr)
{
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    unsigned int type = 0;
    int ordinal = -1;
    void *data[2] = {&type, &ordinal};

    /* An unknown pointer leaves the memory type 0 (and the ordinal a default that could read as
     * device 0), so the type decides. */
    if (drv->cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS ||
        type == 0)
        return -1;
    return ordinal;
}
