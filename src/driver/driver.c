/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/dl.h"
#include "base/error.h"
#include "base/log.h"
#include "driver/driver.h"

static recap_driver_t driver;
static void *driver_lib;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static recap_status_t driver_status = RECAP_ERR_NO_DRIVER;
static char driver_why[256];

/* Each entry names the ABI version of the symbol cuda.h maps its macro to (e.g. cuMemAlloc is
 * cuMemAlloc_v2), so the behaviour matches what a program compiled against cuda.h gets. */
#define DRV_SYM(field, name) {(void **)&driver.field, name, 0}
/* Capture and graph entry points: without them recap still fills and tracks, and capture calls
 * report RECAP_ERR_UNSUPPORTED. */
#define DRV_OPT(field, name) {(void **)&driver.field, name, 1}
/* Entry points only recap-probe's checks and the stream-ordered host calls use: a missing one
 * is reported by the call that needs it. */
#define DRV_EXTRA(field, name) {(void **)&driver.field, name, 2}
static const struct {
    void **slot;
    const char *name;
    int optional;
} driver_syms[] = {
    DRV_SYM(cuInit, "cuInit"),
    DRV_SYM(cuDriverGetVersion, "cuDriverGetVersion"),
    DRV_SYM(cuGetErrorName, "cuGetErrorName"),
    DRV_SYM(cuDeviceGetCount, "cuDeviceGetCount"),
    DRV_SYM(cuDeviceGet, "cuDeviceGet"),
    DRV_SYM(cuDeviceGetName, "cuDeviceGetName"),
    DRV_SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
    DRV_SYM(cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
    DRV_SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    DRV_SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
    DRV_SYM(cuCtxGetCurrent, "cuCtxGetCurrent"),
    DRV_SYM(cuCtxPushCurrent, "cuCtxPushCurrent_v2"),
    DRV_SYM(cuCtxPopCurrent, "cuCtxPopCurrent_v2"),
    DRV_SYM(cuModuleLoadData, "cuModuleLoadData"),
    DRV_SYM(cuModuleGetFunction, "cuModuleGetFunction"),
    DRV_SYM(cuModuleUnload, "cuModuleUnload"),
    DRV_SYM(cuLaunchKernel, "cuLaunchKernel"),
    DRV_SYM(cuMemAlloc, "cuMemAlloc_v2"),
    DRV_SYM(cuMemFree, "cuMemFree_v2"),
    DRV_SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
    DRV_SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
    DRV_SYM(cuPointerGetAttributes, "cuPointerGetAttributes"),
    DRV_SYM(cuStreamGetCtx, "cuStreamGetCtx"),
    DRV_SYM(cuCtxGetDevice, "cuCtxGetDevice"),
    DRV_SYM(cuStreamCreate, "cuStreamCreate"),
    DRV_SYM(cuStreamDestroy, "cuStreamDestroy_v2"),
    DRV_SYM(cuStreamSynchronize, "cuStreamSynchronize"),
    DRV_OPT(cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
    DRV_OPT(cuStreamEndCapture, "cuStreamEndCapture"),
    DRV_OPT(cuStreamGetCaptureInfo, "cuStreamGetCaptureInfo_v2"),
    DRV_OPT(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode"),
    DRV_OPT(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
    DRV_OPT(cuGraphLaunch, "cuGraphLaunch"),
    DRV_OPT(cuGraphClone, "cuGraphClone"),
    DRV_OPT(cuGraphDestroy, "cuGraphDestroy"),
    DRV_OPT(cuGraphExecDestroy, "cuGraphExecDestroy"),
    DRV_EXTRA(cuEventCreate, "cuEventCreate"),
    DRV_EXTRA(cuEventRecord, "cuEventRecord"),
    DRV_EXTRA(cuEventQuery, "cuEventQuery"),
    DRV_EXTRA(cuEventDestroy, "cuEventDestroy_v2"),
    DRV_EXTRA(cuGraphCreate, "cuGraphCreate"),
    DRV_EXTRA(cuGraphUpload, "cuGraphUpload"),
    DRV_EXTRA(cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph"),
    DRV_EXTRA(cuGraphConditionalHandleCreate, "cuGraphConditionalHandleCreate"),
    DRV_EXTRA(cuMemsetD32Async, "cuMemsetD32Async"),
    DRV_EXTRA(cuMemAllocHost, "cuMemAllocHost_v2"),
    DRV_EXTRA(cuMemFreeHost, "cuMemFreeHost"),
    DRV_EXTRA(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
    DRV_EXTRA(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
    DRV_EXTRA(cuLaunchHostFunc, "cuLaunchHostFunc"),
    DRV_EXTRA(cuGraphGetNodes, "cuGraphGetNodes"),
    DRV_EXTRA(cuGraphNodeGetType, "cuGraphNodeGetType"),
    DRV_EXTRA(cuGraphKernelNodeGetParams, "cuGraphKernelNodeGetParams_v2"),
    DRV_EXTRA(cuGraphChildGraphNodeGetGraph, "cuGraphChildGraphNodeGetGraph"),
    DRV_EXTRA(cuGraphGetEdges, "cuGraphGetEdges_v2"),
    DRV_EXTRA(cuGraphGetEdges_v1, "cuGraphGetEdges"),
    DRV_EXTRA(cuGraphExecGetFlags, "cuGraphExecGetFlags"),
    DRV_EXTRA(cuStreamWaitEvent, "cuStreamWaitEvent"),
    DRV_EXTRA(cuCtxSynchronize, "cuCtxSynchronize"),
};

static void driver_load(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    void *lib;
    size_t i;
    CUresult rc;

    if (path == NULL || *path == '\0')
        path = "libcuda.so.1";
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    driver_lib = lib;
    if (lib == NULL) {
        snprintf(driver_why, sizeof(driver_why), "cannot load %s: %s", path, dlerror());
        return;
    }
    for (i = 0; i < sizeof(driver_syms) / sizeof(driver_syms[0]); i++) {
        *driver_syms[i].slot = recap__dlsym(lib, driver_syms[i].name);
        if (*driver_syms[i].slot == NULL && driver_syms[i].optional)
            continue;
        if (*driver_syms[i].slot == NULL) {
            snprintf(driver_why, sizeof(driver_why), "%s lacks %s", path, driver_syms[i].name);
            return; /* the handle stays open: unloading a driver is never worth the risk */
        }
    }
    driver.has_graphs = 1;
    for (i = 0; i < sizeof(driver_syms) / sizeof(driver_syms[0]); i++)
        if (driver_syms[i].optional == 1 && *driver_syms[i].slot == NULL)
            driver.has_graphs = 0;
    rc = driver.cuInit(0);
    if (rc != CUDA_SUCCESS) {
        const char *name = "?";
        driver.cuGetErrorName(rc, &name);
        snprintf(driver_why, sizeof(driver_why), "cuInit failed: %s", name);
        return;
    }
    driver_status = RECAP_OK;
    recap__log(RECAP_LOG_INFO, "loaded CUDA driver %s", path);
}

void *recap__driver_lib(void)
{
    pthread_once(&driver_once, driver_load);
    return driver_lib;
}

recap_status_t recap__driver_get(const recap_driver_t **drv_p)
{
    pthread_once(&driver_once, driver_load);
    if (driver_status != RECAP_OK)
        return recap__fail(driver_status, "%s", driver_why);
    *drv_p = &driver;
    return RECAP_OK;
}

recap_status_t recap__driver_graphs(const recap_driver_t **drv_p)
{
    recap_status_t st = recap__driver_get(drv_p);

    if (st == RECAP_OK && !(*drv_p)->has_graphs)
        return recap__fail(RECAP_ERR_UNSUPPORTED, "this CUDA driver lacks the stream capture / "
                           "graph API recap uses (CUDA >= 11.3 needed)");
    return st;
}

recap_status_t recap__cuda_fail(CUresult rc, const char *what)
{
    const char *name = "unknown CUresult";

    if (driver.cuGetErrorName != NULL)
        driver.cuGetErrorName(rc, &name);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY)
        return recap__fail(RECAP_ERR_NO_MEMORY, "%s: %s", what, name);
    return recap__fail(RECAP_ERR_CUDA, "%s: %s (%d)", what, name, (int)rc);
}

recap_status_t recap_driver_version(int *version_p)
{
    const recap_driver_t *drv;
    recap_status_t st;
    CUresult rc;
    int v;

    RECAP_CHECK_ARG(version_p != NULL, "version_p is NULL");
    st = recap__driver_get(&drv);
    if (st != RECAP_OK)
        return st;
    rc = drv->cuDriverGetVersion(&v);
    if (rc != CUDA_SUCCESS)
        return recap__cuda_fail(rc, "cuDriverGetVersion");
    *version_p = v;
    return RECAP_OK;
}
