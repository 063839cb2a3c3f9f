/* SPDX-License-Identifier: Apache-2.0 */
/* Streams: the device a stream belongs to, for the driver calls made on its behalf. */
#include "config.h"

#include <stdint.h>

#include "base/error.h"
#include "driver/driver.h"

/* Driver calls made on behalf of a stream run in the context the stream belongs to. */
recap_status_t recap__stream_device(CUstream stream, int *device_p)
{
    const recap__driver_t *drv;
    CUcontext ctx = NULL, popped;
    CUdevice dev = 0;
    recap_status_t st;
    CUresult rc;

    st = recap__driver_get(&drv);
    if (st != RECAP_OK)
        return st;
    rc = drv->cuStreamGetCtx(stream, &ctx);
    if (rc == CUDA_ERROR_INVALID_CONTEXT && stream == NULL) {
        *device_p = 0; /* the legacy stream before any context exists: device 0's */
        return RECAP_OK;
    }
    if (rc != CUDA_SUCCESS)
        return recap__cuda_fail(rc, "cuStreamGetCtx");
    rc = drv->cuCtxPushCurrent(ctx);
    if (rc != CUDA_SUCCESS)
        return recap__cuda_fail(rc, "cuCtxPushCurrent");
    rc = drv->cuCtxGetDevice(&dev);
    drv->cuCtxPopCurrent(&popped);
    if (rc != CUDA_SUCCESS)
        return recap__cuda_fail(rc, "cuCtxGetDevice");
    *device_p = (int)dev;
    return RECAP_OK;
}

recap_status_t recap__stream_check_device(CUstream stream, int device)
{
    const recap__driver_t *drv;
    const recap__device_t *dev;
    CUcontext ctx = NULL;
    int on;

    /* The legacy and per-thread streams are the current context's: whichever that is, the
     * work goes where the caller's context is, as with any kernel. */
    if ((uintptr_t)stream <= (uintptr_t)CU_STREAM_PER_THREAD)
        return RECAP_OK;
    /* One call for the common case, a stream of the device's primary context. */
    if (recap__driver_get(&drv) == RECAP_OK && recap__device_get(device, &dev) == RECAP_OK &&
        drv->cuStreamGetCtx(stream, &ctx) == CUDA_SUCCESS && ctx == dev->ctx)
        return RECAP_OK;
    if (recap__stream_device(stream, &on) != RECAP_OK)
        return RECAP_OK; /* unknown here: the launch reports it */
    if (on != device)
        return recap__fail(RECAP_ERR_WRONG_DEVICE, "stream %p is on device %d, the generator on "
                           "device %d", (void *)stream, on, device);
    return RECAP_OK;
}
