/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LD_PRELOAD front end, CUDA runtime half: the graph entry points of a shared libcudart
 * (PyTorch calls these through its libcudart.so's dynamic symbols), listed in interpose.h.
 * Each forwards to the real function and reports the event; recap interposes nothing else of
 * the runtime, so every other call pays nothing.
 */
#define _GNU_SOURCE
#include "config.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "base/dl.h"
#include "hooks/interpose.h"
#include "hooks/lookup.h"

/* The next definition after recap's, else a loaded libcudart's (lookup.c). */
static void *real_runtime(const char *name)
{
    void *fn = recap__lookup_runtime(name);

    if (fn == NULL)
        recap__hooks_no_runtime(name);
    return fn;
}

/* The runtime's types; the wrappers are interpose.h's. */
#define RECAP__I_RESULT cudaError_t
#define RECAP__I_OK cudaSuccess
#define RECAP__I_REAL(name) real_runtime(name)
#define RECAP__I_MISSING cudaErrorUnknown
#define RECAP__I_STREAM cudaStream_t
#define RECAP__I_GRAPH cudaGraph_t
#define RECAP__I_EXEC cudaGraphExec_t
#define RECAP__I_NODE cudaGraphNode_t
#define RECAP__I_EDGE cudaGraphEdgeData
#define RECAP__I_MODE enum cudaStreamCaptureMode
#define RECAP__I_MODE_RELAXED cudaStreamCaptureModeRelaxed
#define RECAP__I_PARAMS cudaGraphInstantiateParams
#define RECAP__I_UPDATE_INFO cudaGraphExecUpdateResultInfo
#define RECAP__I_NODE_PARAMS struct cudaGraphNodeParams
#define RECAP__I_NODE_TYPE_GRAPH cudaGraphNodeTypeGraph

/* cudaGraphAddNode took no edge data before CUDA 13 (cudaGraphAddNode_v2 did): the parameters
 * are the fifth argument there, the sixth from CUDA 13 on. The wrapper passes all six on either
 * way and reports the node's parameters from the one the runtime underneath reads. */
static int runtime_version(void)
{
    static int version_s = -1;
    int version = __atomic_load_n(&version_s, __ATOMIC_ACQUIRE);

    if (version < 0) { /* threads racing here store the same */
        cudaError_t (*get)(int *) = (cudaError_t(*)(int *))real_runtime("cudaRuntimeGetVersion");
        int v = 0;
        if (get == NULL || get(&v) != cudaSuccess)
            v = CUDART_VERSION;
        version = v;
        __atomic_store_n(&version_s, version, __ATOMIC_RELEASE);
    }
    return version;
}
#define RECAP__I_ADDED_PARAMS(nd, p) \
    (runtime_version() >= 13000 ? (const void *)(p) : (const void *)(uintptr_t)(nd))

RECAP__INTERPOSED_RUNTIME(RECAP__INTERPOSE)
