/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA driver, resolved at run time. librecap never links libcuda or cudart: it dlopens
 * "libcuda.so.1" (or $RECAP_CUDA_DRIVER, the test-only override that points the suites at the
 * CUDA test double), so it loads on machines with no GPU and never drags a second cudart into
 * the host process.
 */
#ifndef RECAP_DRIVER_DRIVER_H
#define RECAP_DRIVER_DRIVER_H

#include <cuda.h>

#include "kernels/registry.h"
#include "recap.h"

typedef struct recap_driver {
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuGetErrorName)(CUresult, const char **);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuCtxPushCurrent)(CUcontext);
    CUresult (*cuCtxPopCurrent)(CUcontext *);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, CUstream, void **, void **);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*cuPointerGetAttributes)(unsigned int, CUpointer_attribute *, void **, CUdeviceptr);
    CUresult (*cuStreamGetCtx)(CUstream, CUcontext *);
    CUresult (*cuCtxGetDevice)(CUdevice *);
    /* streams, capture and graphs */
    CUresult (*cuStreamCreate)(CUstream *, unsigned int);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuStreamBeginCapture)(CUstream, CUstreamCaptureMode);
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
    CUresult (*cuStreamGetCaptureInfo)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                                       const CUgraphNode **, size_t *);
    CUresult (*cuThreadExchangeStreamCaptureMode)(CUstreamCaptureMode *);
    CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
    CUresult (*cuGraphClone)(CUgraph *, CUgraph);
    CUresult (*cuGraphDestroy)(CUgraph);
    CUresult (*cuGraphExecDestroy)(CUgraphExec);
    int has_graphs; /* every capture/graph entry point above resolved */
    /* Used only by recap-probe's checks (src/probe) and the stream-ordered host calls, each NULL
     * when the driver lacks it. */
    CUresult (*cuEventCreate)(CUevent *, unsigned int);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventQuery)(CUevent);
    CUresult (*cuEventDestroy)(CUevent);
    CUresult (*cuGraphCreate)(CUgraph *, unsigned int);
    CUresult (*cuGraphUpload)(CUgraphExec, CUstream);
    CUresult (*cuStreamBeginCaptureToGraph)(CUstream, CUgraph, const CUgraphNode *,
                                            const CUgraphEdgeData *, size_t, CUstreamCaptureMode);
    CUresult (*cuGraphConditionalHandleCreate)(CUgraphConditionalHandle *, CUgraph, CUcontext,
                                               unsigned int, unsigned int);
    CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
    CUresult (*cuMemAllocHost)(void **, size_t);
    CUresult (*cuMemFreeHost)(void *);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*cuLaunchHostFunc)(CUstream, CUhostFn, void *);
    /* Graph composition (capture/compose.c): what a graph holds, walked at instantiate and
     * update; cross-stream ordering of launches that share a generator. */
    CUresult (*cuGraphGetNodes)(CUgraph, CUgraphNode *, size_t *);
    CUresult (*cuGraphNodeGetType)(CUgraphNode, CUgraphNodeType *);
    CUresult (*cuGraphKernelNodeGetParams)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
    CUresult (*cuGraphChildGraphNodeGetGraph)(CUgraphNode, CUgraph *);
    CUresult (*cuGraphGetEdges)(CUgraph, CUgraphNode *, CUgraphNode *, CUgraphEdgeData *,
                                size_t *);
    CUresult (*cuGraphGetEdges_v1)(CUgraph, CUgraphNode *, CUgraphNode *, size_t *);
    CUresult (*cuGraphExecGetFlags)(CUgraphExec, cuuint64_t *);
    CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
    CUresult (*cuCtxSynchronize)(void);
} recap_driver_t;

/* The driver, when it has the capture and graph API; RECAP_ERR_UNSUPPORTED otherwise. */
recap_status_t recap__driver_graphs(const recap_driver_t **drv_p);

/* Loads and initializes the driver once per process; later calls return the cached outcome.
 * RECAP_ERR_NO_DRIVER (with a message) when it is absent or cuInit fails. */
recap_status_t recap__driver_get(const recap_driver_t **drv_p);

/* The dlopen handle of the driver library (NULL when it could not be loaded): the hooks resolve
 * the real entry points they interpose from it. */
void *recap__driver_lib(void);

/* Turns a failed driver call into RECAP_ERR_CUDA with "what: CUDA_ERROR_NAME". */
recap_status_t recap__cuda_fail(CUresult rc, const char *what);

/* The ordinal of the device that owns `ptr` when the driver knows the pointer (device, managed
 * or registered host memory), -1 when it does not (plain host memory, garbage). Asked with
 * cuPointerGetAttributes, which answers CUDA_SUCCESS for unknown pointers: cuPointerGetAttribute
 * would fail the call, and compute-sanitizer and API tracers in the host job would report that
 * failure as an error of the user's program. */
int recap__pointer_device(const recap_driver_t *drv, const void *ptr);

/* Kernels recap launches on a device (kernels/registry.h), loaded once per device in its primary
 * context. */

typedef struct recap_device {
    CUdevice dev;
    CUcontext ctx;   /* the device's primary context, retained for the process lifetime */
    int sm_count;
    CUfunction fn[RECAP_K_COUNT];
} recap_device_t;

/* The device's context and kernels, set up on first use. RECAP_ERR_NO_DEVICE for a bad index. */
recap_status_t recap__device_get(int ordinal, const recap_device_t **dev_p);
recap_status_t recap__device_count(int *count_p);
/* Which of recap's kernels `fn` is (a recap_kernel_id_t) on any device set up so far, else -1:
 * how a graph walk recognises recap's own kernel nodes. */
int recap__device_kernel_id(CUfunction fn);

/* Makes the device's primary context current for the calling thread when it is not already;
 * *pushed_p tells recap__ctx_leave whether to pop. */
recap_status_t recap__ctx_enter(const recap_device_t *dev, int *pushed_p);
void recap__ctx_leave(int pushed);

/* Runs one driver call in the primary context of `device`; a failure returns from the calling
 * function with a status naming `what`. */
#define RECAP_IN_DEVICE(device, what, call)                           \
    do {                                                              \
        const recap_device_t *dev_;                                   \
        recap_status_t st_ = recap__device_get((device), &dev_);      \
        CUresult rc_;                                                 \
        int pushed_;                                                  \
        if (st_ != RECAP_OK)                                          \
            return st_;                                               \
        st_ = recap__ctx_enter(dev_, &pushed_);                       \
        if (st_ != RECAP_OK)                                          \
            return st_;                                               \
        rc_ = (call);                                                 \
        recap__ctx_leave(pushed_);                                    \
        if (rc_ != CUDA_SUCCESS)                                      \
            return recap__cuda_fail(rc_, (what));                     \
    } while (0)

#endif
