/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LD_PRELOAD front end, CUDA runtime half: the graph entry points of a shared libcudart
 * (PyTorch calls these through its libcudart.so's dynamic symbols), listed in hooks/interpose.h.
 * Each forwards to the real function and reports the event; recap interposes nothing else of
 * the runtime, so every other call pays nothing.
 */
#define _GNU_SOURCE
#include "config.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "base/dl.h"
#include "base/log.h"
#include "hooks/interpose.h"
#include "hooks/lookup.h"

/* The next definition after recap's, else a loaded libcudart's (hooks/lookup.c). */
static void *real_runtime(const char *name)
{
    void *fn = recap__lookup_runtime(name);

    if (fn == NULL)
        recap__log(RECAP_LOG_WARN, "%s: no CUDA runtime defines it; the call fails", name);
    return fn;
}

/* The runtime's types; the wrappers are hooks/interpose.h's. */
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

RECAP__INTERPOSED_RUNTIME(RECAP__INTERPOSE)
