/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The test double's cuGetProcAddress: what the CUDA runtime (>= 11.3) uses to find every driver
 * entry point. Answers from a fixed table, not from dlsym, as the real driver does (so a
 * preloaded recap sees exactly the lookups a real driver would answer): the variant for the
 * requested CUDA version, and the per-thread-default-stream (_ptsz) variant when the flags ask.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <string.h>

#include "recap.h" /* RECAP_API, the one export macro */

RECAP_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
RECAP_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status);

typedef struct {
    const char *name;
    int since;       /* CUDA version that introduced this variant */
    void *fn;        /* legacy-stream variant */
    void *fn_ptsz;   /* per-thread default stream variant, or NULL when the same */
} entry_t;

#define E(name, since, fn, pt) {name, since, (void *)(fn), (void *)(pt)}
static const entry_t table[] = {
    E("cuInit", 2000, cuInit, NULL),
    E("cuDriverGetVersion", 2020, cuDriverGetVersion, NULL),
    E("cuGetErrorName", 6000, cuGetErrorName, NULL),
    E("cuDeviceGet", 2000, cuDeviceGet, NULL),
    E("cuDeviceGetCount", 2000, cuDeviceGetCount, NULL),
    E("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain, NULL),
    E("cuCtxSetCurrent", 4000, cuCtxSetCurrent, NULL),
    E("cuCtxGetCurrent", 4000, cuCtxGetCurrent, NULL),
    E("cuMemAlloc", 3020, cuMemAlloc_v2, NULL),
    E("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2, NULL),
    E("cuStreamCreate", 2000, cuStreamCreate, NULL),
    E("cuStreamSynchronize", 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
    E("cuLaunchKernel", 4000, cuLaunchKernel, cuLaunchKernel_ptsz),
    E("cuStreamBeginCapture", 10000, cuStreamBeginCapture, cuStreamBeginCapture_ptsz),
    E("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz),
    E("cuStreamEndCapture", 10000, cuStreamEndCapture, cuStreamEndCapture_ptsz),
    E("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo, cuStreamGetCaptureInfo_ptsz),
    E("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2, cuStreamGetCaptureInfo_v2_ptsz),
    E("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo_v3_ptsz),
    E("cuGraphInstantiate", 10000, cuGraphInstantiate, NULL),
    E("cuGraphInstantiate", 11000, cuGraphInstantiate_v2, NULL),
    E("cuGraphInstantiate", 12000, cuGraphInstantiateWithFlags, NULL),
    E("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags, NULL),
    E("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams,
      cuGraphInstantiateWithParams_ptsz),
    E("cuGraphLaunch", 10000, cuGraphLaunch, cuGraphLaunch_ptsz),
    E("cuGraphUpload", 11010, cuGraphUpload, cuGraphUpload_ptsz),
    E("cuGraphClone", 10000, cuGraphClone, NULL),
    E("cuGraphDestroy", 10000, cuGraphDestroy, NULL),
    E("cuGraphExecDestroy", 10000, cuGraphExecDestroy, NULL),
    E("cuGraphExecUpdate", 10020, cuGraphExecUpdate, NULL),
    E("cuGraphExecUpdate", 12000, cuGraphExecUpdate_v2, NULL),
    E("cuGetProcAddress", 11030, cuGetProcAddress, NULL),
    E("cuGetProcAddress", 12000, cuGetProcAddress_v2, NULL),
};

RECAP_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status)
{
    const entry_t *best = NULL;
    int found_name = 0;
    size_t i;

    if (symbol == NULL || pfn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(table[i].name, symbol) != 0)
            continue;
        found_name = 1;
        if (table[i].since <= version && (best == NULL || table[i].since > best->since))
            best = &table[i];
    }
    if (best == NULL) {
        if (status != NULL)
            *status = found_name ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                 : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->fn_ptsz != NULL
               ? best->fn_ptsz
               : best->fn;
    if (status != NULL)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
