/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LD_PRELOAD front end, CUDA runtime half: the graph entry points of a shared libcudart
 * (PyTorch calls these through its libcudart.so's dynamic symbols). Each forwards to the real
 * function and reports the event; recap interposes nothing else of the runtime, so every other
 * call pays nothing.
 */
#define _GNU_SOURCE
#include "config.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "base/dl.h"
#include "base/log.h"
#include "hooks/lookup.h"
#include "hooks/events.h"

#define EXPORT __attribute__((visibility("default")))

/* The _ptsz (per-thread default stream) exports, which cuda_runtime_api.h does not declare. */
EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t, enum cudaStreamCaptureMode);
EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t, cudaGraph_t, const cudaGraphNode_t *,
                                                      const cudaGraphEdgeData *, size_t,
                                                      enum cudaStreamCaptureMode);
EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t, cudaGraph_t *);
EXPORT cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *, cudaGraph_t,
                                                       cudaGraphInstantiateParams *);
EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t, cudaStream_t);
EXPORT cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t, cudaStream_t);

/* The next definition after recap's, else a loaded libcudart's (hooks/lookup.c). */
static void *real_runtime(const char *name)
{
    void *fn = recap__lookup_runtime(name);

    if (fn == NULL)
        recap__log(RECAP_LOG_WARN, "%s: no CUDA runtime defines it; the call fails", name);
    return fn;
}

/* The real entry point, looked up once (threads racing here store the same value). */
#define REAL(type, name)                                                   \
    static type real_s_;                                                   \
    type real_ = __atomic_load_n(&real_s_, __ATOMIC_ACQUIRE);              \
    if (real_ == NULL) {                                                   \
        real_ = (type)real_runtime(name);                                  \
        __atomic_store_n(&real_s_, real_, __ATOMIC_RELEASE);               \
    }                                                                      \
    if (real_ == NULL)                                                     \
        return cudaErrorUnknown

typedef cudaError_t (*begin_fn)(cudaStream_t, enum cudaStreamCaptureMode);
typedef cudaError_t (*begin_to_graph_fn)(cudaStream_t, cudaGraph_t, const cudaGraphNode_t *,
                                         const cudaGraphEdgeData *, size_t,
                                         enum cudaStreamCaptureMode);
typedef cudaError_t (*end_fn)(cudaStream_t, cudaGraph_t *);
typedef cudaError_t (*inst_fn)(cudaGraphExec_t *, cudaGraph_t, unsigned long long);
typedef cudaError_t (*inst_params_fn)(cudaGraphExec_t *, cudaGraph_t, cudaGraphInstantiateParams *);
typedef cudaError_t (*clone_fn)(cudaGraph_t *, cudaGraph_t);
typedef cudaError_t (*graph_fn)(cudaGraph_t);
typedef cudaError_t (*exec_fn)(cudaGraphExec_t);
typedef cudaError_t (*launch_fn)(cudaGraphExec_t, cudaStream_t);

static cudaError_t begin_capture(begin_fn real, cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    recap_hook_call_t c;
    cudaError_t rc;

    recap__hook_begin(&c);
    recap__ev_before_begin_capture(&c, s, (int)mode);
    rc = real(s, mode);
    recap__ev_after_begin_capture(&c, s, rc == cudaSuccess);
    recap__hook_end(&c);
    return rc;
}

EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    REAL(begin_fn, "cudaStreamBeginCapture");
    return begin_capture(real_, s, mode);
}

EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    REAL(begin_fn, "cudaStreamBeginCapture_ptsz");
    return begin_capture(real_, s, mode);
}

static cudaError_t begin_to_graph(begin_to_graph_fn real, cudaStream_t s, cudaGraph_t g,
                                  const cudaGraphNode_t *deps, const cudaGraphEdgeData *data,
                                  size_t n, enum cudaStreamCaptureMode mode)
{
    recap_hook_call_t c;
    cudaError_t rc;

    recap__hook_begin(&c);
    recap__ev_before_begin_capture(&c, s, (int)mode);
    rc = real(s, g, deps, data, n, mode);
    recap__ev_after_begin_capture(&c, s, rc == cudaSuccess);
    recap__hook_end(&c);
    return rc;
}

EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t s, cudaGraph_t g,
                                                 const cudaGraphNode_t *deps,
                                                 const cudaGraphEdgeData *data, size_t n,
                                                 enum cudaStreamCaptureMode mode)
{
    REAL(begin_to_graph_fn, "cudaStreamBeginCaptureToGraph");
    return begin_to_graph(real_, s, g, deps, data, n, mode);
}

EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t s, cudaGraph_t g,
                                                      const cudaGraphNode_t *deps,
                                                      const cudaGraphEdgeData *data, size_t n,
                                                      enum cudaStreamCaptureMode mode)
{
    REAL(begin_to_graph_fn, "cudaStreamBeginCaptureToGraph_ptsz");
    return begin_to_graph(real_, s, g, deps, data, n, mode);
}

static cudaError_t end_capture(end_fn real, cudaStream_t s, cudaGraph_t *g)
{
    recap_hook_call_t c;
    cudaError_t rc;

    recap__hook_begin(&c);
    recap__ev_before_end_capture(&c, s);
    rc = real(s, g);
    recap__ev_after_end_capture(&c, s, rc == cudaSuccess && g != NULL, g != NULL ? *g : NULL);
    recap__hook_end(&c);
    return rc;
}

EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    REAL(end_fn, "cudaStreamEndCapture");
    return end_capture(real_, s, g);
}

EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g)
{
    REAL(end_fn, "cudaStreamEndCapture_ptsz");
    return end_capture(real_, s, g);
}

static cudaError_t instantiate(inst_fn real, cudaGraphExec_t *e, cudaGraph_t g,
                               unsigned long long flags)
{
    recap_hook_call_t c;
    cudaError_t rc;

    recap__hook_begin(&c);
    rc = real(e, g, flags);
    recap__ev_instantiated(&c, rc == cudaSuccess && e != NULL, g, e != NULL ? *e : NULL);
    recap__hook_end(&c);
    return rc;
}

EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags)
{
    REAL(inst_fn, "cudaGraphInstantiate");
    return instantiate(real_, e, g, flags);
}

EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *e, cudaGraph_t g,
                                                 unsigned long long flags)
{
    REAL(inst_fn, "cudaGraphInstantiateWithFlags");
    return instantiate(real_, e, g, flags);
}

static cudaError_t instantiate_params(inst_params_fn real, cudaGraphExec_t *e, cudaGraph_t g,
                                      cudaGraphInstantiateParams *p)
{
    recap_hook_call_t c;
    cudaError_t rc;

    recap__hook_begin(&c);
    rc = real(e, g, p);
    recap__ev_instantiated(&c, rc == cudaSuccess && e != NULL, g, e != NULL ? *e : NULL);
    recap__hook_end(&c);
    return rc;
}

EXPORT cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *e, cudaGraph_t g,
                                                  cudaGraphInstantiateParams *p)
{
    REAL(inst_params_fn, "cudaGraphInstantiateWithParams");
    return instantiate_params(real_, e, g, p);
}

EXPORT cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *e, cudaGraph_t g,
                                                       cudaGraphInstantiateParams *p)
{
    REAL(inst_params_fn, "cudaGraphInstantiateWithParams_ptsz");
    return instantiate_params(real_, e, g, p);
}

EXPORT cudaError_t cudaGraphClone(cudaGraph_t *clone, cudaGraph_t orig)
{
    recap_hook_call_t c;
    cudaError_t rc;
    REAL(clone_fn, "cudaGraphClone");

    recap__hook_begin(&c);
    rc = real_(clone, orig);
    recap__ev_cloned(&c, rc == cudaSuccess && clone != NULL, orig, clone != NULL ? *clone : NULL);
    recap__hook_end(&c);
    return rc;
}

EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    recap_hook_call_t c;
    cudaError_t rc;
    REAL(graph_fn, "cudaGraphDestroy");

    recap__hook_begin(&c);
    recap__ev_destroy_graph(&c, g);
    rc = real_(g);
    recap__ev_destroy_done(&c, g, 0, rc == cudaSuccess);
    recap__hook_end(&c);
    return rc;
}

EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e)
{
    recap_hook_call_t c;
    cudaError_t rc;
    REAL(exec_fn, "cudaGraphExecDestroy");

    recap__hook_begin(&c);
    recap__ev_destroy_exec(&c, e);
    rc = real_(e);
    recap__ev_destroy_done(&c, e, 1, rc == cudaSuccess);
    recap__hook_end(&c);
    return rc;
}

static cudaError_t launch(launch_fn real, cudaGraphExec_t e, cudaStream_t s)
{
    recap_hook_call_t c;
    cudaError_t rc;

    recap__hook_begin(&c);
    recap__ev_before_launch(&c, e, s);
    rc = real(e, s);
    recap__ev_after_launch(&c, e, rc == cudaSuccess);
    recap__hook_end(&c);
    return rc;
}

EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s)
{
    REAL(launch_fn, "cudaGraphLaunch");
    return launch(real_, e, s);
}

EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t e, cudaStream_t s)
{
    REAL(launch_fn, "cudaGraphLaunch_ptsz");
    return launch(real_, e, s);
}

/* Upload moves no random numbers: interposed only so the driver half does not report it as
 * something else; it forwards untouched. */
EXPORT cudaError_t cudaGraphUpload(cudaGraphExec_t e, cudaStream_t s)
{
    recap_hook_call_t c;
    cudaError_t rc;
    REAL(launch_fn, "cudaGraphUpload");

    recap__hook_begin(&c);
    rc = real_(e, s);
    recap__hook_end(&c);
    return rc;
}

EXPORT cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t e, cudaStream_t s)
{
    recap_hook_call_t c;
    cudaError_t rc;
    REAL(launch_fn, "cudaGraphUpload_ptsz");

    recap__hook_begin(&c);
    rc = real_(e, s);
    recap__hook_end(&c);
    return rc;
}
