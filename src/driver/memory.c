#include "config.h"

#include "base/error.h"
#include "driver/driver.h"

/* Runs one driver call in the device's primary context. */
#define WITH_DEVICE_CTX(device, what, call)                     \
    do {                                                        \
        const recap_device_t *dev_;                             \
        const recap_driver_t *drv;                              \
        recap_status_t st_;                                     \
        CUresult rc_;                                           \
        int pushed_;                                            \
        st_ = recap__device_get((device), &dev_);               \
        if (st_ != RECAP_OK)                                    \
            return st_;                                         \
        recap__driver_get(&drv);                                \
        st_ = recap__ctx_enter(dev_, &pushed_);                 \
        if (st_ != RECAP_OK)                                    \
            return st_;                                         \
        rc_ = (call);                                           \
        recap__ctx_leave(pushed_);                              \
        if (rc_ != CUDA_SUCCESS)                                \
            return recap__cuda_fail(rc_, (what));               \
    } while (0)

recap_status_t recap_device_alloc(int device, size_t bytes, void **ptr_p)
{
    CUdeviceptr p = 0;

    RECAP_CHECK_ARG(ptr_p != NULL, "ptr_p is NULL");
    RECAP_CHECK_ARG(bytes > 0, "allocation of 0 bytes");
    WITH_DEVICE_CTX(device, "cuMemAlloc", drv->cuMemAlloc(&p, bytes));
    *ptr_p = (void *)(uintptr_t)p;
    return RECAP_OK;
}

recap_status_t recap_device_free(int device, void *ptr)
{
    RECAP_CHECK_ARG(ptr != NULL, "ptr is NULL");
    WITH_DEVICE_CTX(device, "cuMemFree", drv->cuMemFree((CUdeviceptr)(uintptr_t)ptr));
    return RECAP_OK;
}

recap_status_t recap_memcpy_to_device(int device, void *dst, const void *src, size_t bytes)
{
    RECAP_CHECK_ARG(dst != NULL && src != NULL, "NULL buffer");
    if (bytes == 0)
        return RECAP_OK;
    WITH_DEVICE_CTX(device, "cuMemcpyHtoD",
                    drv->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes));
    return RECAP_OK;
}

recap_status_t recap_memcpy_to_host(int device, void *dst, const void *src, size_t bytes)
{
    RECAP_CHECK_ARG(dst != NULL && src != NULL, "NULL buffer");
    if (bytes == 0)
        return RECAP_OK;
    WITH_DEVICE_CTX(device, "cuMemcpyDtoH",
                    drv->cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes));
    return RECAP_OK;
}
