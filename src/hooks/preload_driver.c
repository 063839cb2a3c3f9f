/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LD_PRELOAD front end, driver half: the graph entry points of libcuda in all their exported
 * versions (_v2, per-thread-stream _ptsz, the legacy forms), listed in interpose.h.
 * Programs reach them by dynamic linking against libcuda, or through cuGetProcAddress / dlsym
 * (procaddress.c hands out these wrappers there). The real function comes from the driver library recap loads.
 */
#define __CUDA_API_VERSION_INTERNAL /* cuda.h then declares every exported name, unrenamed */
#include "config.h"

#include <cuda.h>

#include "hooks/interpose.h"
#include "hooks/preload_driver.h"

/* The driver's types; the wrappers are interpose.h's. */
#define RECAP__I_RESULT CUresult
#define RECAP__I_OK CUDA_SUCCESS
#define RECAP__I_REAL(name) recap__hooks_real_driver(name)
#define RECAP__I_MISSING CUDA_ERROR_NOT_FOUND
#define RECAP__I_STREAM CUstream
#define RECAP__I_GRAPH CUgraph
#define RECAP__I_EXEC CUgraphExec
#define RECAP__I_NODE CUgraphNode
#define RECAP__I_EDGE CUgraphEdgeData
#define RECAP__I_MODE CUstreamCaptureMode
#define RECAP__I_MODE_RELAXED CU_STREAM_CAPTURE_MODE_RELAXED
#define RECAP__I_PARAMS CUDA_GRAPH_INSTANTIATE_PARAMS
#define RECAP__I_UPDATE_INFO CUgraphExecUpdateResultInfo
#define RECAP__I_UPDATE_RESULT CUgraphExecUpdateResult
#define RECAP__I_NODE_PARAMS CUgraphNodeParams
#define RECAP__I_NODE_TYPE_GRAPH CU_GRAPH_NODE_TYPE_GRAPH

RECAP__INTERPOSED_DRIVER(RECAP__INTERPOSE)

/* cuGetProcAddress("cuGraphInstantiate") may answer with the flags form: the wrapper of that. */
#define HOOK(kind, sym, base) {base, #sym, (void *)sym},
const recap__driver_hook_t recap__driver_hooks[] = {
    RECAP__INTERPOSED_DRIVER(HOOK)
    {"cuGraphInstantiate", "cuGraphInstantiateWithFlags", (void *)cuGraphInstantiateWithFlags},
};
const unsigned recap__ndriver_hooks = sizeof(recap__driver_hooks) / sizeof(recap__driver_hooks[0]);
