/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver entry points recap uses, listed once (as libfabric's src/hmem_cuda.c lists CUDA's):
 * X(kind, field, symbol, parameters). driver.h makes the function table's fields from it and
 * driver.c the table it resolves them by. The symbol is the ABI version cuda.h maps its macro to
 * (cuMemAlloc is cuMemAlloc_v2), so recap behaves as a program compiled against cuda.h.
 *
 * Kinds: REQUIRED, without which the driver is unusable; GRAPHS, the capture and graph API
 * (without it recap still fills and tracks, and capture calls report RECAP_ERR_UNSUPPORTED);
 * EXTRA, used only by recap-probe's checks, the stream-ordered host calls and graph composition
 * (capture/walk.c and edges.c: what a graph holds, walked at instantiate and update;
 * capture/launch_order.c: cross-stream ordering of launches that share a generator), each NULL when the driver lacks it and reported
 * by the call that needs it.
 */
#ifndef RECAP_DRIVER_ENTRY_POINTS_H
#define RECAP_DRIVER_ENTRY_POINTS_H

#define RECAP__DRIVER_ENTRY_POINTS(X) \
    X(REQUIRED, cuInit, "cuInit", (unsigned int)) \
    X(REQUIRED, cuDriverGetVersion, "cuDriverGetVersion", (int *)) \
    X(REQUIRED, cuGetErrorName, "cuGetErrorName", (CUresult, const char **)) \
    X(REQUIRED, cuDeviceGetCount, "cuDeviceGetCount", (int *)) \
    X(REQUIRED, cuDeviceGet, "cuDeviceGet", (CUdevice *, int)) \
    X(REQUIRED, cuDeviceGetName, "cuDeviceGetName", (char *, int, CUdevice)) \
    X(REQUIRED, cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *, CUdevice_attribute, \
      CUdevice)) \
    X(REQUIRED, cuDeviceTotalMem, "cuDeviceTotalMem_v2", (size_t *, CUdevice)) \
    X(REQUIRED, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice)) \
    X(REQUIRED, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice)) \
    X(REQUIRED, cuCtxGetCurrent, "cuCtxGetCurrent", (CUcontext *)) \
    X(REQUIRED, cuCtxPushCurrent, "cuCtxPushCurrent_v2", (CUcontext)) \
    X(REQUIRED, cuCtxPopCurrent, "cuCtxPopCurrent_v2", (CUcontext *)) \
    X(REQUIRED, cuModuleLoadData, "cuModuleLoadData", (CUmodule *, const void *)) \
    X(REQUIRED, cuModuleGetFunction, "cuModuleGetFunction", (CUfunction *, CUmodule, \
      const char *)) \
    X(REQUIRED, cuModuleUnload, "cuModuleUnload", (CUmodule)) \
    X(REQUIRED, cuLaunchKernel, "cuLaunchKernel", (CUfunction, unsigned, unsigned, unsigned, \
      unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **)) \
    X(REQUIRED, cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr *, size_t)) \
    X(REQUIRED, cuMemFree, "cuMemFree_v2", (CUdeviceptr)) \
    X(REQUIRED, cuMemcpyHtoD, "cuMemcpyHtoD_v2", (CUdeviceptr, const void *, size_t)) \
    X(REQUIRED, cuMemcpyDtoH, "cuMemcpyDtoH_v2", (void *, CUdeviceptr, size_t)) \
    X(REQUIRED, cuPointerGetAttributes, "cuPointerGetAttributes", (unsigned int, \
      CUpointer_attribute *, void **, CUdeviceptr)) \
    X(REQUIRED, cuStreamGetCtx, "cuStreamGetCtx", (CUstream, CUcontext *)) \
    X(REQUIRED, cuCtxGetDevice, "cuCtxGetDevice", (CUdevice *)) \
    X(REQUIRED, cuStreamCreate, "cuStreamCreate", (CUstream *, unsigned int)) \
    X(REQUIRED, cuStreamDestroy, "cuStreamDestroy_v2", (CUstream)) \
    X(REQUIRED, cuStreamSynchronize, "cuStreamSynchronize", (CUstream)) \
    X(GRAPHS, cuStreamBeginCapture, "cuStreamBeginCapture_v2", (CUstream, CUstreamCaptureMode)) \
    X(GRAPHS, cuStreamEndCapture, "cuStreamEndCapture", (CUstream, CUgraph *)) \
    X(GRAPHS, cuStreamGetCaptureInfo, "cuStreamGetCaptureInfo_v2", (CUstream, \
      CUstreamCaptureStatus *, cuuint64_t *, CUgraph *, const CUgraphNode **, size_t *)) \
    X(GRAPHS, cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", \
      (CUstreamCaptureMode *)) \
    X(GRAPHS, cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", (CUgraphExec *, \
      CUgraph, unsigned long long)) \
    X(GRAPHS, cuGraphLaunch, "cuGraphLaunch", (CUgraphExec, CUstream)) \
    X(GRAPHS, cuGraphClone, "cuGraphClone", (CUgraph *, CUgraph)) \
    X(GRAPHS, cuGraphDestroy, "cuGraphDestroy", (CUgraph)) \
    X(GRAPHS, cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec)) \
    X(EXTRA, cuEventCreate, "cuEventCreate", (CUevent *, unsigned int)) \
    X(EXTRA, cuEventRecord, "cuEventRecord", (CUevent, CUstream)) \
    X(EXTRA, cuEventQuery, "cuEventQuery", (CUevent)) \
    X(EXTRA, cuEventDestroy, "cuEventDestroy_v2", (CUevent)) \
    X(EXTRA, cuGraphCreate, "cuGraphCreate", (CUgraph *, unsigned int)) \
    X(EXTRA, cuGraphUpload, "cuGraphUpload", (CUgraphExec, CUstream)) \
    X(EXTRA, cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", (CUstream, CUgraph, \
      const CUgraphNode *, const CUgraphEdgeData *, size_t, CUstreamCaptureMode)) \
    X(EXTRA, cuGraphConditionalHandleCreate, "cuGraphConditionalHandleCreate", \
      (CUgraphConditionalHandle *, CUgraph, CUcontext, unsigned int, unsigned int)) \
    X(EXTRA, cuMemsetD32Async, "cuMemsetD32Async", (CUdeviceptr, unsigned int, size_t, CUstream)) \
    X(EXTRA, cuMemAllocHost, "cuMemAllocHost_v2", (void **, size_t)) \
    X(EXTRA, cuMemFreeHost, "cuMemFreeHost", (void *)) \
    X(EXTRA, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (CUdeviceptr, const void *, size_t, \
      CUstream)) \
    X(EXTRA, cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *, CUdeviceptr, size_t, CUstream)) \
    X(EXTRA, cuLaunchHostFunc, "cuLaunchHostFunc", (CUstream, CUhostFn, void *)) \
    X(EXTRA, cuGraphGetNodes, "cuGraphGetNodes", (CUgraph, CUgraphNode *, size_t *)) \
    X(EXTRA, cuGraphNodeGetType, "cuGraphNodeGetType", (CUgraphNode, CUgraphNodeType *)) \
    X(EXTRA, cuGraphKernelNodeGetParams, "cuGraphKernelNodeGetParams_v2", (CUgraphNode, \
      CUDA_KERNEL_NODE_PARAMS *)) \
    X(EXTRA, cuGraphChildGraphNodeGetGraph, "cuGraphChildGraphNodeGetGraph", (CUgraphNode, \
      CUgraph *)) \
    X(EXTRA, cuGraphGetEdges, "cuGraphGetEdges_v2", (CUgraph, CUgraphNode *, CUgraphNode *, \
      CUgraphEdgeData *, size_t *)) \
    X(EXTRA, cuGraphGetEdges_v1, "cuGraphGetEdges", (CUgraph, CUgraphNode *, CUgraphNode *, \
      size_t *)) \
    X(EXTRA, cuGraphNodeGetDependentNodes, "cuGraphNodeGetDependentNodes_v2", (CUgraphNode, \
      CUgraphNode *, CUgraphEdgeData *, size_t *)) \
    X(EXTRA, cuGraphNodeGetDependentNodes_v1, "cuGraphNodeGetDependentNodes", (CUgraphNode, \
      CUgraphNode *, size_t *)) \
    X(EXTRA, cuGraphExecGetFlags, "cuGraphExecGetFlags", (CUgraphExec, cuuint64_t *)) \
    X(EXTRA, cuStreamWaitEvent, "cuStreamWaitEvent", (CUstream, CUevent, unsigned int)) \
    X(EXTRA, cuCtxSynchronize, "cuCtxSynchronize", (void))

#endif
