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
#include <stdint.h>
#include <string.h>

#include "base/dl.h"
#include "base/log.h"
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

/* dl_iterate_phdr callback: the first loaded libcudart that defines the symbol. */
struct find_ctx {
    const char *name;
    void *fn;
};

static int find_in_cudart(struct dl_phdr_info *info, size_t size, void *data)
{
    struct find_ctx *f = data;
    void *h;

    (void)size;
    if (f->fn != NULL || info->dlpi_name == NULL || strstr(info->dlpi_name, "libcudart") == NULL)
        return 0;
    h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    if (h != NULL) {
        f->fn = recap__dlsym(h, f->name);
        dlclose(h);
    }
    return f->fn != NULL;
}

/* The next definition after recap's; a libcudart loaded RTLD_LOCAL (as Python extensions load
 * theirs) is not in the global scope, so it is looked for among the loaded objects. */
static void *real_runtime(const char *name)
{
    struct find_ctx f = {name, recap__dlsym(RTLD_NEXT, name)};

    if (f.fn == NULL)
        dl_iterate_phdr(find_in_cudart, &f);
    if (f.fn == NULL)
        recap__log(RECAP_LOG_WARN, "%s: no CUDA runtime defines it; the call fails", name);
    return f.fn;
}

#define REAL(type, name)                                                   \
    static type real_;                                                     \
    if (real_ == NULL)                                                     \
        real_ = (type)real_runtime(name);                                  \
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
    recap__ev_launched(&c, e, s, rc == cudaSuccess);
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

/* Graph composition: an exec's update and its child graph nodes' updates change what its
 * launches draw; a conditional node's bodies are reported so instantiate can look inside them
 * (capture/compose.c). */
typedef cudaError_t (*exec_update_fn)(cudaGraphExec_t, cudaGraph_t, cudaGraphExecUpdateResultInfo *);
typedef cudaError_t (*exec_child_fn)(cudaGraphExec_t, cudaGraphNode_t, cudaGraph_t);
typedef cudaError_t (*exec_node_fn)(cudaGraphExec_t, cudaGraphNode_t, struct cudaGraphNodeParams *);
typedef cudaError_t (*add_node6_fn)(cudaGraphNode_t *, cudaGraph_t, const cudaGraphNode_t *,
                                    const cudaGraphEdgeData *, size_t, struct cudaGraphNodeParams *);

EXPORT cudaError_t cudaGraphExecUpdate(cudaGraphExec_t e, cudaGraph_t g,
                                       cudaGraphExecUpdateResultInfo *info)
{
    recap_hook_call_t c;
    cudaError_t rc;
    REAL(exec_update_fn, "cudaGraphExecUpdate");

    recap__hook_begin(&c);
    rc = real_(e, g, info);
    recap__ev_exec_updated(&c, rc == cudaSuccess, e, g);
    recap__hook_end(&c);
    return rc;
}

EXPORT cudaError_t cudaGraphExecChildGraphNodeSetParams(cudaGraphExec_t e, cudaGraphNode_t n,
                                                        cudaGraph_t child)
{
    recap_hook_call_t c;
    cudaError_t rc;
    REAL(exec_child_fn, "cudaGraphExecChildGraphNodeSetParams");

    recap__hook_begin(&c);
    rc = real_(e, n, child);
    recap__ev_exec_child_updated(&c, rc == cudaSuccess, e, n, child);
    recap__hook_end(&c);
    return rc;
}

EXPORT cudaError_t cudaGraphExecNodeSetParams(cudaGraphExec_t e, cudaGraphNode_t n,
                                              struct cudaGraphNodeParams *p)
{
    recap_hook_call_t c;
    cudaError_t rc;
    REAL(exec_node_fn, "cudaGraphExecNodeSetParams");

    recap__hook_begin(&c);
    rc = real_(e, n, p);
    if (p != NULL && p->type == cudaGraphNodeTypeGraph)
        recap__ev_exec_child_updated(&c, rc == cudaSuccess, e, n, p->graph.graph);
    recap__hook_end(&c);
    return rc;
}

/* cudaGraphAddNode took no edge data before CUDA 13 (cudaGraphAddNode_v2 did): the parameters
 * are the fifth argument there, the sixth from CUDA 13 on. All six are passed on either way. */
static int runtime_version(void)
{
    static int version = -1;

    if (version < 0) {
        cudaError_t (*get)(int *) = (cudaError_t(*)(int *))real_runtime("cudaRuntimeGetVersion");
        int v = 0;
        if (get == NULL || get(&v) != cudaSuccess)
            v = CUDART_VERSION;
        version = v;
    }
    return version;
}

static cudaError_t add_node(add_node6_fn real, int six, cudaGraphNode_t *n, cudaGraph_t g,
                            const cudaGraphNode_t *deps, const cudaGraphEdgeData *data, size_t nd,
                            struct cudaGraphNodeParams *p)
{
    recap_hook_call_t c;
    cudaError_t rc;
    const void *params = six ? (const void *)p : (const void *)(uintptr_t)nd;

    recap__hook_begin(&c);
    rc = real(n, g, deps, data, nd, p);
    recap__ev_node_added(&c, rc == cudaSuccess && n != NULL, g, n != NULL ? *n : NULL, params);
    recap__hook_end(&c);
    return rc;
}

EXPORT cudaError_t cudaGraphAddNode(cudaGraphNode_t *n, cudaGraph_t g, const cudaGraphNode_t *deps,
                                    const cudaGraphEdgeData *data, size_t nd,
                                    struct cudaGraphNodeParams *p)
{
    REAL(add_node6_fn, "cudaGraphAddNode");
    return add_node(real_, runtime_version() >= 13000, n, g, deps, data, nd, p);
}

EXPORT cudaError_t cudaGraphAddNode_v2(cudaGraphNode_t *n, cudaGraph_t g, const cudaGraphNode_t *deps,
                                       const cudaGraphEdgeData *data, size_t nd,
                                       struct cudaGraphNodeParams *p);
EXPORT cudaError_t cudaGraphAddNode_v2(cudaGraphNode_t *n, cudaGraph_t g, const cudaGraphNode_t *deps,
                                       const cudaGraphEdgeData *data, size_t nd,
                                       struct cudaGraphNodeParams *p)
{
    REAL(add_node6_fn, "cudaGraphAddNode_v2");
    return add_node(real_, 1, n, g, deps, data, nd, p);
}
