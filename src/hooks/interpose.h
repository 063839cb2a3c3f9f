/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The interposed CUDA entry points, listed once, and the wrapper each kind of entry point gets,
 * written once for the runtime and the driver (as UCX's src/ucm/util/replace.h writes its
 * replacements). preload_runtime.c and preload_driver.c each say what their API's
 * types are and expand their list into wrappers; preload_driver.c also makes the table
 * procaddress.c hands the driver wrappers out from.
 *
 * X(kind, symbol, base): `symbol` is the exported name, `base` the name cuGetProcAddress is
 * asked (driver rows only). Kinds say what the wrapper reports around the real call:
 *   BEGIN, BEGIN_NOMODE (CUDA 10.0's form: relaxed), BEGIN_TO_GRAPH   capture begins
 *   END                                                                 capture ends
 *   INST_FLAGS, INST_PARAMS, INST_LEGACY (five arguments)               an exec is instantiated
 *   CLONE, DESTROY_GRAPH, DESTROY_EXEC, LAUNCH                          graphs and execs
 *   EXEC_UPDATE, EXEC_UPDATE_LEGACY (the driver's four-argument form)   an exec is updated
 *   EXEC_CHILD, EXEC_NODE (reports only a child graph node's update)    an exec's child graph
 *                                                                       node runs another graph
 *   ADD_NODE (no edge data), ADD_NODE_EDGES, ADD_NODE_RUNTIME           a node is added (reported
 *           for a conditional node's bodies); ADD_NODE_RUNTIME is cudaGraphAddNode, which took
 *           no edge data before CUDA 13 and does from 13 on: it passes all six arguments on and
 *           asks RECAP__I_ADDED_PARAMS which one holds the node's parameters
 *   UPLOAD: moves no random numbers; interposed only so the call underneath is not reported
 *           as something else, it reports nothing.
 */
#ifndef RECAP_HOOKS_INTERPOSE_H
#define RECAP_HOOKS_INTERPOSE_H

#include "hooks/events.h"

/* The shared libcudart's graph entry points (PyTorch calls these through its libcudart.so's
 * dynamic symbols), per-thread default stream (_ptsz) exports included. */
#define RECAP__INTERPOSED_RUNTIME(X)                                                     \
    X(BEGIN, cudaStreamBeginCapture, "")                                                 \
    X(BEGIN, cudaStreamBeginCapture_ptsz, "")                                            \
    X(BEGIN_TO_GRAPH, cudaStreamBeginCaptureToGraph, "")                                 \
    X(BEGIN_TO_GRAPH, cudaStreamBeginCaptureToGraph_ptsz, "")                            \
    X(END, cudaStreamEndCapture, "")                                                     \
    X(END, cudaStreamEndCapture_ptsz, "")                                                \
    X(INST_FLAGS, cudaGraphInstantiate, "")                                              \
    X(INST_FLAGS, cudaGraphInstantiateWithFlags, "")                                     \
    X(INST_PARAMS, cudaGraphInstantiateWithParams, "")                                   \
    X(INST_PARAMS, cudaGraphInstantiateWithParams_ptsz, "")                              \
    X(CLONE, cudaGraphClone, "")                                                         \
    X(DESTROY_GRAPH, cudaGraphDestroy, "")                                               \
    X(DESTROY_EXEC, cudaGraphExecDestroy, "")                                            \
    X(LAUNCH, cudaGraphLaunch, "")                                                       \
    X(LAUNCH, cudaGraphLaunch_ptsz, "")                                                  \
    X(UPLOAD, cudaGraphUpload, "")                                                       \
    X(UPLOAD, cudaGraphUpload_ptsz, "")                                                  \
    X(EXEC_UPDATE, cudaGraphExecUpdate, "")                                              \
    X(EXEC_CHILD, cudaGraphExecChildGraphNodeSetParams, "")                              \
    X(EXEC_NODE, cudaGraphExecNodeSetParams, "")                                         \
    X(ADD_NODE_RUNTIME, cudaGraphAddNode, "")                                            \
    X(ADD_NODE_EDGES, cudaGraphAddNode_v2, "")

/* libcuda's graph entry points in all their exported versions (_v2, _ptsz, legacy forms). */
#define RECAP__INTERPOSED_DRIVER(X)                                                      \
    X(BEGIN, cuStreamBeginCapture_v2, "cuStreamBeginCapture")                            \
    X(BEGIN, cuStreamBeginCapture_v2_ptsz, "cuStreamBeginCapture")                       \
    X(BEGIN_NOMODE, cuStreamBeginCapture, "cuStreamBeginCapture")                        \
    X(BEGIN_NOMODE, cuStreamBeginCapture_ptsz, "cuStreamBeginCapture")                   \
    X(BEGIN_TO_GRAPH, cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph")        \
    X(BEGIN_TO_GRAPH, cuStreamBeginCaptureToGraph_ptsz, "cuStreamBeginCaptureToGraph")   \
    X(END, cuStreamEndCapture, "cuStreamEndCapture")                                     \
    X(END, cuStreamEndCapture_ptsz, "cuStreamEndCapture")                                \
    X(INST_FLAGS, cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")            \
    X(INST_PARAMS, cuGraphInstantiateWithParams, "cuGraphInstantiateWithParams")         \
    X(INST_PARAMS, cuGraphInstantiateWithParams_ptsz, "cuGraphInstantiateWithParams")    \
    X(INST_LEGACY, cuGraphInstantiate, "cuGraphInstantiate")                             \
    X(INST_LEGACY, cuGraphInstantiate_v2, "cuGraphInstantiate")                          \
    X(CLONE, cuGraphClone, "cuGraphClone")                                               \
    X(DESTROY_GRAPH, cuGraphDestroy, "cuGraphDestroy")                                   \
    X(DESTROY_EXEC, cuGraphExecDestroy, "cuGraphExecDestroy")                            \
    X(LAUNCH, cuGraphLaunch, "cuGraphLaunch")                                            \
    X(LAUNCH, cuGraphLaunch_ptsz, "cuGraphLaunch")                                       \
    X(UPLOAD, cuGraphUpload, "cuGraphUpload")                                            \
    X(UPLOAD, cuGraphUpload_ptsz, "cuGraphUpload")                                       \
    X(EXEC_UPDATE, cuGraphExecUpdate_v2, "cuGraphExecUpdate")                            \
    X(EXEC_UPDATE_LEGACY, cuGraphExecUpdate, "cuGraphExecUpdate")                        \
    X(EXEC_CHILD, cuGraphExecChildGraphNodeSetParams,                                    \
      "cuGraphExecChildGraphNodeSetParams")                                              \
    X(EXEC_NODE, cuGraphExecNodeSetParams, "cuGraphExecNodeSetParams")                   \
    X(ADD_NODE, cuGraphAddNode, "cuGraphAddNode")                                        \
    X(ADD_NODE_EDGES, cuGraphAddNode_v2, "cuGraphAddNode")

/*
 * One wrapper. The file expanding a list defines its API first:
 *   RECAP__I_RESULT, RECAP__I_OK        the result type and its success value
 *   RECAP__I_REAL(name), RECAP__I_MISSING  the real function (void *, NULL when none) and what
 *                                       the wrapper returns without one
 *   RECAP__I_STREAM, _GRAPH, _EXEC, _NODE, _EDGE, _MODE, _PARAMS, RECAP__I_MODE_RELAXED
 *   RECAP__I_UPDATE_INFO, RECAP__I_NODE_PARAMS, RECAP__I_NODE_TYPE_GRAPH (graph composition)
 *   RECAP__I_UPDATE_RESULT              (the driver: EXEC_UPDATE_LEGACY's result)
 *   RECAP__I_ADDED_PARAMS(nd, p)        (the runtime: ADD_NODE_RUNTIME's parameters)
 * The prototype comes first, so names the API's header does not declare (the runtime's _ptsz)
 * are declared, and those it does are checked against it.
 */
#define RECAP__WRAPPER(sym, params, args, before, after)          \
    RECAP_API RECAP__I_RESULT sym params;                         \
    RECAP_API RECAP__I_RESULT sym params                          \
    {                                                             \
        static RECAP__I_RESULT(*real_s_) params;                  \
        RECAP__I_RESULT(*real_) params;                           \
        recap__hook_call_t c;                                      \
        RECAP__I_RESULT rc;                                       \
                                                                  \
        /* Looked up once; threads racing here store the same. */ \
        real_ = __atomic_load_n(&real_s_, __ATOMIC_ACQUIRE);      \
        if (real_ == NULL) {                                      \
            real_ = (__typeof__(real_))RECAP__I_REAL(#sym);       \
            __atomic_store_n(&real_s_, real_, __ATOMIC_RELEASE);  \
        }                                                         \
        if (real_ == NULL)                                        \
            return RECAP__I_MISSING;                              \
        recap__hook_begin(&c);                                    \
        before;                                                   \
        rc = real_ args;                                          \
        after;                                                    \
        recap__hook_end(&c);                                      \
        return rc;                                                \
    }

#define RECAP__I_DONE (rc == RECAP__I_OK)
#define RECAP__I_NOTHING ((void)0)

#define RECAP__WRAP_BEGIN(sym)                                                          \
    RECAP__WRAPPER(sym, (RECAP__I_STREAM s, RECAP__I_MODE mode), (s, mode),             \
                   recap__ev_before_begin_capture(&c, s, (int)mode),                    \
                   recap__ev_after_begin_capture(&c, s, RECAP__I_DONE))
#define RECAP__WRAP_BEGIN_NOMODE(sym)                                                   \
    RECAP__WRAPPER(sym, (RECAP__I_STREAM s), (s),                                       \
                   recap__ev_before_begin_capture(&c, s, (int)RECAP__I_MODE_RELAXED),   \
                   recap__ev_after_begin_capture(&c, s, RECAP__I_DONE))
#define RECAP__WRAP_BEGIN_TO_GRAPH(sym)                                                 \
    RECAP__WRAPPER(sym,                                                                 \
                   (RECAP__I_STREAM s, RECAP__I_GRAPH g, const RECAP__I_NODE *deps,     \
                    const RECAP__I_EDGE *data, size_t n, RECAP__I_MODE mode),           \
                   (s, g, deps, data, n, mode),                                         \
                   recap__ev_before_begin_capture(&c, s, (int)mode),                    \
                   recap__ev_after_begin_capture(&c, s, RECAP__I_DONE))
#define RECAP__WRAP_END(sym)                                                            \
    RECAP__WRAPPER(sym, (RECAP__I_STREAM s, RECAP__I_GRAPH *g), (s, g),                 \
                   recap__ev_before_end_capture(&c, s),                                 \
                   recap__ev_after_end_capture(&c, s, RECAP__I_DONE && g != NULL,       \
                                               g != NULL ? *g : NULL))
#define RECAP__I_INSTANTIATED recap__ev_instantiated(&c, RECAP__I_DONE && e != NULL, g, \
                                                     e != NULL ? *e : NULL)
#define RECAP__WRAP_INST_FLAGS(sym)                                                     \
    RECAP__WRAPPER(sym, (RECAP__I_EXEC * e, RECAP__I_GRAPH g, unsigned long long flags),\
                   (e, g, flags), RECAP__I_NOTHING, RECAP__I_INSTANTIATED)
#define RECAP__WRAP_INST_PARAMS(sym)                                                    \
    RECAP__WRAPPER(sym, (RECAP__I_EXEC * e, RECAP__I_GRAPH g, RECAP__I_PARAMS * p),     \
                   (e, g, p), RECAP__I_NOTHING, RECAP__I_INSTANTIATED)
#define RECAP__WRAP_INST_LEGACY(sym)                                                    \
    RECAP__WRAPPER(sym,                                                                 \
                   (RECAP__I_EXEC * e, RECAP__I_GRAPH g, RECAP__I_NODE * err, char *log,\
                    size_t len),                                                        \
                   (e, g, err, log, len), RECAP__I_NOTHING, RECAP__I_INSTANTIATED)
#define RECAP__WRAP_CLONE(sym)                                                          \
    RECAP__WRAPPER(sym, (RECAP__I_GRAPH * clone, RECAP__I_GRAPH orig), (clone, orig),   \
                   RECAP__I_NOTHING,                                                    \
                   recap__ev_cloned(&c, RECAP__I_DONE && clone != NULL, orig,           \
                                    clone != NULL ? *clone : NULL))
#define RECAP__WRAP_DESTROY_GRAPH(sym)                                                  \
    RECAP__WRAPPER(sym, (RECAP__I_GRAPH g), (g), recap__ev_destroy_graph(&c, g),        \
                   recap__ev_destroy_done(&c, g, 0, RECAP__I_DONE))
#define RECAP__WRAP_DESTROY_EXEC(sym)                                                   \
    RECAP__WRAPPER(sym, (RECAP__I_EXEC e), (e), recap__ev_destroy_exec(&c, e),          \
                   recap__ev_destroy_done(&c, e, 1, RECAP__I_DONE))
#define RECAP__WRAP_LAUNCH(sym)                                                         \
    RECAP__WRAPPER(sym, (RECAP__I_EXEC e, RECAP__I_STREAM s), (e, s),                   \
                   recap__ev_before_launch(&c, e, s),                                   \
                   (recap__ev_after_launch(&c, e, RECAP__I_DONE),                       \
                    recap__ev_launched(&c, e, s, RECAP__I_DONE)))
#define RECAP__WRAP_UPLOAD(sym)                                                         \
    RECAP__WRAPPER(sym, (RECAP__I_EXEC e, RECAP__I_STREAM s), (e, s), RECAP__I_NOTHING, \
                   RECAP__I_NOTHING)

#define RECAP__WRAP_EXEC_UPDATE(sym)                                                    \
    RECAP__WRAPPER(sym, (RECAP__I_EXEC e, RECAP__I_GRAPH g, RECAP__I_UPDATE_INFO * info),\
                   (e, g, info), RECAP__I_NOTHING,                                      \
                   recap__ev_exec_updated(&c, RECAP__I_DONE, e, g))
#define RECAP__WRAP_EXEC_UPDATE_LEGACY(sym)                                             \
    RECAP__WRAPPER(sym,                                                                 \
                   (RECAP__I_EXEC e, RECAP__I_GRAPH g, RECAP__I_NODE * err,             \
                    RECAP__I_UPDATE_RESULT * result),                                   \
                   (e, g, err, result), RECAP__I_NOTHING,                               \
                   recap__ev_exec_updated(&c, RECAP__I_DONE, e, g))
#define RECAP__WRAP_EXEC_CHILD(sym)                                                     \
    RECAP__WRAPPER(sym, (RECAP__I_EXEC e, RECAP__I_NODE n, RECAP__I_GRAPH child),       \
                   (e, n, child), RECAP__I_NOTHING,                                     \
                   recap__ev_exec_child_updated(&c, RECAP__I_DONE, e, n, child))
#define RECAP__WRAP_EXEC_NODE(sym)                                                      \
    RECAP__WRAPPER(sym, (RECAP__I_EXEC e, RECAP__I_NODE n, RECAP__I_NODE_PARAMS * p),   \
                   (e, n, p), RECAP__I_NOTHING,                                         \
                   if (p != NULL && p->type == RECAP__I_NODE_TYPE_GRAPH)                \
                       recap__ev_exec_child_updated(&c, RECAP__I_DONE, e, n,            \
                                                    p->graph.graph))
#define RECAP__I_NODE_ADDED(params)                                                     \
    recap__ev_node_added(&c, RECAP__I_DONE && n != NULL, g, n != NULL ? *n : NULL, params)
#define RECAP__WRAP_ADD_NODE(sym)                                                       \
    RECAP__WRAPPER(sym,                                                                 \
                   (RECAP__I_NODE * n, RECAP__I_GRAPH g, const RECAP__I_NODE *deps,     \
                    size_t nd, RECAP__I_NODE_PARAMS *p),                                \
                   (n, g, deps, nd, p), RECAP__I_NOTHING, RECAP__I_NODE_ADDED(p))
#define RECAP__I_ADD_NODE_SIX(sym, params)                                              \
    RECAP__WRAPPER(sym,                                                                 \
                   (RECAP__I_NODE * n, RECAP__I_GRAPH g, const RECAP__I_NODE *deps,     \
                    const RECAP__I_EDGE *data, size_t nd, RECAP__I_NODE_PARAMS *p),     \
                   (n, g, deps, data, nd, p), RECAP__I_NOTHING, RECAP__I_NODE_ADDED(params))
#define RECAP__WRAP_ADD_NODE_EDGES(sym) RECAP__I_ADD_NODE_SIX(sym, p)
#define RECAP__WRAP_ADD_NODE_RUNTIME(sym) RECAP__I_ADD_NODE_SIX(sym, RECAP__I_ADDED_PARAMS(nd, p))

/* Expands one row of a list into its wrapper. */
#define RECAP__INTERPOSE(kind, symbol, base) RECAP__WRAP_##kind(symbol)

#endif
