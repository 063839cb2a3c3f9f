/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LD_PRELOAD front end, driver half: the graph entry points of libcuda in all their exported
 * versions (_v2, per-thread-stream _ptsz, the legacy forms). Programs reach them by dynamic
 * linking against libcuda, or through cuGetProcAddress / dlsym (hooks/procaddress.c hands out
 * these wrappers there). The real function comes from the driver library recap loads.
 */
#define __CUDA_API_VERSION_INTERNAL /* cuda.h then declares every exported name, unrenamed */
#include "config.h"

#include <cuda.h>

#include "hooks/events.h"
#include "hooks/preload_driver.h"

#define REAL(type, name)                                          \
    static type real_;                                            \
    if (real_ == NULL)                                            \
        real_ = (type)recap__hooks_real_driver(name);             \
    if (real_ == NULL)                                            \
        return CUDA_ERROR_NOT_FOUND

typedef CUresult (*begin2_fn)(CUstream, CUstreamCaptureMode);
typedef CUresult (*begin1_fn)(CUstream);
typedef CUresult (*begin_to_graph_fn)(CUstream, CUgraph, const CUgraphNode *,
                                      const CUgraphEdgeData *, size_t, CUstreamCaptureMode);
typedef CUresult (*end_fn)(CUstream, CUgraph *);
typedef CUresult (*inst_flags_fn)(CUgraphExec *, CUgraph, unsigned long long);
typedef CUresult (*inst_params_fn)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);
typedef CUresult (*inst_legacy_fn)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
typedef CUresult (*clone_fn)(CUgraph *, CUgraph);
typedef CUresult (*graph_fn)(CUgraph);
typedef CUresult (*exec_fn)(CUgraphExec);
typedef CUresult (*launch_fn)(CUgraphExec, CUstream);

static CUresult begin2(begin2_fn real, CUstream s, CUstreamCaptureMode mode)
{
    recap_hook_call_t c;
    CUresult rc;

    recap__hook_begin(&c);
    recap__ev_before_begin_capture(&c, s, (int)mode);
    rc = real(s, mode);
    recap__ev_after_begin_capture(&c, s, rc == CUDA_SUCCESS);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    REAL(begin2_fn, "cuStreamBeginCapture_v2");
    return begin2(real_, s, mode);
}

RECAP_HOOK CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
    REAL(begin2_fn, "cuStreamBeginCapture_v2_ptsz");
    return begin2(real_, s, mode);
}

/* The CUDA 10.0 form, without a mode (driver 580 captures in relaxed mode there). */
static CUresult begin1(begin1_fn real, CUstream s)
{
    recap_hook_call_t c;
    CUresult rc;

    recap__hook_begin(&c);
    recap__ev_before_begin_capture(&c, s, CU_STREAM_CAPTURE_MODE_RELAXED);
    rc = real(s);
    recap__ev_after_begin_capture(&c, s, rc == CUDA_SUCCESS);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuStreamBeginCapture(CUstream s)
{
    REAL(begin1_fn, "cuStreamBeginCapture");
    return begin1(real_, s);
}

RECAP_HOOK CUresult cuStreamBeginCapture_ptsz(CUstream s)
{
    REAL(begin1_fn, "cuStreamBeginCapture_ptsz");
    return begin1(real_, s);
}

static CUresult begin_to_graph(begin_to_graph_fn real, CUstream s, CUgraph g,
                               const CUgraphNode *deps, const CUgraphEdgeData *data, size_t n,
                               CUstreamCaptureMode mode)
{
    recap_hook_call_t c;
    CUresult rc;

    recap__hook_begin(&c);
    recap__ev_before_begin_capture(&c, s, (int)mode);
    rc = real(s, g, deps, data, n, mode);
    recap__ev_after_begin_capture(&c, s, rc == CUDA_SUCCESS);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                                const CUgraphEdgeData *data, size_t n,
                                                CUstreamCaptureMode mode)
{
    REAL(begin_to_graph_fn, "cuStreamBeginCaptureToGraph");
    return begin_to_graph(real_, s, g, deps, data, n, mode);
}

RECAP_HOOK CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode *deps,
                                                     const CUgraphEdgeData *data, size_t n,
                                                     CUstreamCaptureMode mode)
{
    REAL(begin_to_graph_fn, "cuStreamBeginCaptureToGraph_ptsz");
    return begin_to_graph(real_, s, g, deps, data, n, mode);
}

static CUresult end_capture(end_fn real, CUstream s, CUgraph *g)
{
    recap_hook_call_t c;
    CUresult rc;

    recap__hook_begin(&c);
    recap__ev_before_end_capture(&c, s);
    rc = real(s, g);
    recap__ev_after_end_capture(&c, s, rc == CUDA_SUCCESS && g != NULL, g != NULL ? *g : NULL);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuStreamEndCapture(CUstream s, CUgraph *g)
{
    REAL(end_fn, "cuStreamEndCapture");
    return end_capture(real_, s, g);
}

RECAP_HOOK CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g)
{
    REAL(end_fn, "cuStreamEndCapture_ptsz");
    return end_capture(real_, s, g);
}

RECAP_HOOK CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags)
{
    recap_hook_call_t c;
    CUresult rc;
    REAL(inst_flags_fn, "cuGraphInstantiateWithFlags");

    recap__hook_begin(&c);
    rc = real_(e, g, flags);
    recap__ev_instantiated(&c, rc == CUDA_SUCCESS && e != NULL, g, e != NULL ? *e : NULL);
    recap__hook_end(&c);
    return rc;
}

static CUresult inst_params(inst_params_fn real, CUgraphExec *e, CUgraph g,
                            CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    recap_hook_call_t c;
    CUresult rc;

    recap__hook_begin(&c);
    rc = real(e, g, p);
    recap__ev_instantiated(&c, rc == CUDA_SUCCESS && e != NULL, g, e != NULL ? *e : NULL);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuGraphInstantiateWithParams(CUgraphExec *e, CUgraph g,
                                                 CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    REAL(inst_params_fn, "cuGraphInstantiateWithParams");
    return inst_params(real_, e, g, p);
}

RECAP_HOOK CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *e, CUgraph g,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    REAL(inst_params_fn, "cuGraphInstantiateWithParams_ptsz");
    return inst_params(real_, e, g, p);
}

/* The legacy five-argument forms (exported as cuGraphInstantiate and cuGraphInstantiate_v2). */
static CUresult inst_legacy(inst_legacy_fn real, CUgraphExec *e, CUgraph g, CUgraphNode *err,
                            char *log, size_t len)
{
    recap_hook_call_t c;
    CUresult rc;

    recap__hook_begin(&c);
    rc = real(e, g, err, log, len);
    recap__ev_instantiated(&c, rc == CUDA_SUCCESS && e != NULL, g, e != NULL ? *e : NULL);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuGraphInstantiate(CUgraphExec *e, CUgraph g, CUgraphNode *err, char *log,
                                       size_t len)
{
    REAL(inst_legacy_fn, "cuGraphInstantiate");
    return inst_legacy(real_, e, g, err, log, len);
}

RECAP_HOOK CUresult cuGraphInstantiate_v2(CUgraphExec *e, CUgraph g, CUgraphNode *err, char *log,
                                          size_t len)
{
    REAL(inst_legacy_fn, "cuGraphInstantiate_v2");
    return inst_legacy(real_, e, g, err, log, len);
}

RECAP_HOOK CUresult cuGraphClone(CUgraph *clone, CUgraph orig)
{
    recap_hook_call_t c;
    CUresult rc;
    REAL(clone_fn, "cuGraphClone");

    recap__hook_begin(&c);
    rc = real_(clone, orig);
    recap__ev_cloned(&c, rc == CUDA_SUCCESS && clone != NULL, orig, clone != NULL ? *clone : NULL);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuGraphDestroy(CUgraph g)
{
    recap_hook_call_t c;
    CUresult rc;
    REAL(graph_fn, "cuGraphDestroy");

    recap__hook_begin(&c);
    recap__ev_destroy_graph(&c, g);
    rc = real_(g);
    recap__ev_destroy_done(&c, g, 0, rc == CUDA_SUCCESS);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuGraphExecDestroy(CUgraphExec e)
{
    recap_hook_call_t c;
    CUresult rc;
    REAL(exec_fn, "cuGraphExecDestroy");

    recap__hook_begin(&c);
    recap__ev_destroy_exec(&c, e);
    rc = real_(e);
    recap__ev_destroy_done(&c, e, 1, rc == CUDA_SUCCESS);
    recap__hook_end(&c);
    return rc;
}

static CUresult launch(launch_fn real, CUgraphExec e, CUstream s)
{
    recap_hook_call_t c;
    CUresult rc;

    recap__hook_begin(&c);
    recap__ev_before_launch(&c, e, s);
    rc = real(e, s);
    recap__ev_after_launch(&c, e, rc == CUDA_SUCCESS);
    recap__ev_launched(&c, e, s, rc == CUDA_SUCCESS);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
    REAL(launch_fn, "cuGraphLaunch");
    return launch(real_, e, s);
}

RECAP_HOOK CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s)
{
    REAL(launch_fn, "cuGraphLaunch_ptsz");
    return launch(real_, e, s);
}

RECAP_HOOK CUresult cuGraphUpload(CUgraphExec e, CUstream s)
{
    REAL(launch_fn, "cuGraphUpload");
    return real_(e, s);
}

RECAP_HOOK CUresult cuGraphUpload_ptsz(CUgraphExec e, CUstream s)
{
    REAL(launch_fn, "cuGraphUpload_ptsz");
    return real_(e, s);
}

/* Graph composition (capture/compose.c): exec updates, child graph node updates in an exec, and
 * the bodies of conditional nodes added with cuGraphAddNode. */
typedef CUresult (*exec_update2_fn)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
typedef CUresult (*exec_update1_fn)(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *);
typedef CUresult (*exec_child_fn)(CUgraphExec, CUgraphNode, CUgraph);
typedef CUresult (*exec_node_fn)(CUgraphExec, CUgraphNode, CUgraphNodeParams *);
typedef CUresult (*add_node1_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                 CUgraphNodeParams *);
typedef CUresult (*add_node2_fn)(CUgraphNode *, CUgraph, const CUgraphNode *,
                                 const CUgraphEdgeData *, size_t, CUgraphNodeParams *);

RECAP_HOOK CUresult cuGraphExecUpdate_v2(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *info)
{
    recap_hook_call_t c;
    CUresult rc;
    REAL(exec_update2_fn, "cuGraphExecUpdate_v2");

    recap__hook_begin(&c);
    rc = real_(e, g, info);
    recap__ev_exec_updated(&c, rc == CUDA_SUCCESS, e, g);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuGraphExecUpdate(CUgraphExec e, CUgraph g, CUgraphNode *err,
                                      CUgraphExecUpdateResult *result)
{
    recap_hook_call_t c;
    CUresult rc;
    REAL(exec_update1_fn, "cuGraphExecUpdate");

    recap__hook_begin(&c);
    rc = real_(e, g, err, result);
    recap__ev_exec_updated(&c, rc == CUDA_SUCCESS, e, g);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec e, CUgraphNode n, CUgraph child)
{
    recap_hook_call_t c;
    CUresult rc;
    REAL(exec_child_fn, "cuGraphExecChildGraphNodeSetParams");

    recap__hook_begin(&c);
    rc = real_(e, n, child);
    recap__ev_exec_child_updated(&c, rc == CUDA_SUCCESS, e, n, child);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuGraphExecNodeSetParams(CUgraphExec e, CUgraphNode n, CUgraphNodeParams *p)
{
    recap_hook_call_t c;
    CUresult rc;
    REAL(exec_node_fn, "cuGraphExecNodeSetParams");

    recap__hook_begin(&c);
    rc = real_(e, n, p);
    if (p != NULL && p->type == CU_GRAPH_NODE_TYPE_GRAPH)
        recap__ev_exec_child_updated(&c, rc == CUDA_SUCCESS, e, n, p->graph.graph);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuGraphAddNode(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd,
                                   CUgraphNodeParams *p)
{
    recap_hook_call_t c;
    CUresult rc;
    REAL(add_node1_fn, "cuGraphAddNode");

    recap__hook_begin(&c);
    rc = real_(n, g, deps, nd, p);
    recap__ev_node_added(&c, rc == CUDA_SUCCESS && n != NULL, g, n != NULL ? *n : NULL, p);
    recap__hook_end(&c);
    return rc;
}

RECAP_HOOK CUresult cuGraphAddNode_v2(CUgraphNode *n, CUgraph g, const CUgraphNode *deps,
                                      const CUgraphEdgeData *data, size_t nd, CUgraphNodeParams *p)
{
    recap_hook_call_t c;
    CUresult rc;
    REAL(add_node2_fn, "cuGraphAddNode_v2");

    recap__hook_begin(&c);
    rc = real_(n, g, deps, data, nd, p);
    recap__ev_node_added(&c, rc == CUDA_SUCCESS && n != NULL, g, n != NULL ? *n : NULL, p);
    recap__hook_end(&c);
    return rc;
}

#define HOOK(base, sym) {base, #sym, (void *)sym}
const recap_driver_hook_t recap__driver_hooks[] = {
    HOOK("cuStreamBeginCapture", cuStreamBeginCapture_v2),
    HOOK("cuStreamBeginCapture", cuStreamBeginCapture_v2_ptsz),
    HOOK("cuStreamBeginCapture", cuStreamBeginCapture),
    HOOK("cuStreamBeginCapture", cuStreamBeginCapture_ptsz),
    HOOK("cuStreamBeginCaptureToGraph", cuStreamBeginCaptureToGraph),
    HOOK("cuStreamBeginCaptureToGraph", cuStreamBeginCaptureToGraph_ptsz),
    HOOK("cuStreamEndCapture", cuStreamEndCapture),
    HOOK("cuStreamEndCapture", cuStreamEndCapture_ptsz),
    HOOK("cuGraphInstantiateWithFlags", cuGraphInstantiateWithFlags),
    HOOK("cuGraphInstantiateWithParams", cuGraphInstantiateWithParams),
    HOOK("cuGraphInstantiateWithParams", cuGraphInstantiateWithParams_ptsz),
    HOOK("cuGraphInstantiate", cuGraphInstantiate),
    HOOK("cuGraphInstantiate", cuGraphInstantiate_v2),
    HOOK("cuGraphInstantiate", cuGraphInstantiateWithFlags),
    HOOK("cuGraphClone", cuGraphClone),
    HOOK("cuGraphDestroy", cuGraphDestroy),
    HOOK("cuGraphExecDestroy", cuGraphExecDestroy),
    HOOK("cuGraphLaunch", cuGraphLaunch),
    HOOK("cuGraphLaunch", cuGraphLaunch_ptsz),
    HOOK("cuGraphUpload", cuGraphUpload),
    HOOK("cuGraphUpload", cuGraphUpload_ptsz),
    HOOK("cuGraphExecUpdate", cuGraphExecUpdate_v2),
    HOOK("cuGraphExecUpdate", cuGraphExecUpdate),
    HOOK("cuGraphExecChildGraphNodeSetParams", cuGraphExecChildGraphNodeSetParams),
    HOOK("cuGraphExecNodeSetParams", cuGraphExecNodeSetParams),
    HOOK("cuGraphAddNode", cuGraphAddNode),
    HOOK("cuGraphAddNode", cuGraphAddNode_v2),
};
const unsigned recap__ndriver_hooks = sizeof(recap__driver_hooks) / sizeof(recap__driver_hooks[0]);
