/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double: graphs and executables. */
#include "tests/double/double.h"

RECAP_API CUresult cuGraphCreate(CUgraph *out, unsigned int flags)
{
    double_graph_t *g;

    NEED_INIT();
    if (out == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    g = graph_new_locked();
    pthread_mutex_unlock(&lock);
    if (g == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = (CUgraph)g;
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuGraphDestroy(CUgraph graph)
{
    CUresult rc = CUDA_SUCCESS;

    NEED_INIT();
    pthread_mutex_lock(&lock);
    if (!graph_live_locked(graph) || ((double_graph_t *)graph)->capturing ||
        ((double_graph_t *)graph)->embedded)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        graph_free_locked((double_graph_t *)graph);
    pthread_mutex_unlock(&lock);
    return rc;
}

RECAP_API CUresult cuGraphClone(CUgraph *out, CUgraph orig)
{
    double_graph_t *src = (double_graph_t *)orig, *g;
    CUresult rc = CUDA_SUCCESS;

    NEED_INIT();
    if (out == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (!graph_live_locked(orig)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if ((g = graph_new_locked()) == NULL) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        op_t **ops = ops_clone(src->ops, src->n);

        if (ops == NULL || graph_take_ops_locked(g, ops, src->n) != CUDA_SUCCESS ||
            double_graph_copy_edges_locked(g, src) != CUDA_SUCCESS) {
            graph_free_locked(g);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            *out = (CUgraph)g;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

RECAP_API CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode *nodes, size_t *count)
{
    double_graph_t *g = (double_graph_t *)graph;
    CUresult rc = CUDA_SUCCESS;

    NEED_INIT();
    /* as the H200's driver (580) does: an array with a count of 0 is refused */
    if (count == NULL || (nodes != NULL && *count == 0))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (!graph_live_locked(graph)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (nodes == NULL) {
        *count = g->n;
    } else {
        size_t i;
        for (i = 0; i < *count; i++)
            nodes[i] = i < g->n ? (CUgraphNode)g->ops[i] : NULL;
        if (*count > g->n)
            *count = g->n;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* Nodes added with cuGraphAddKernelNode keep their dependencies as edges (cuGraphGetEdges), but
 * the double's graphs run in insertion order. */
RECAP_API CUresult cuGraphAddKernelNode_v2(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                        size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *p)
{
    const double_function_t *fn;
    op_t *op;
    CUresult rc = CUDA_SUCCESS;

    NEED_INIT();
    if (node == NULL || p == NULL || (ndeps > 0 && deps == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    fn = (const double_function_t *)p->func;
    if (fn == NULL || p->kernelParams == NULL || p->kernelParams[0] == NULL || p->extra != NULL ||
        p->gridDimX == 0 || p->blockDimX == 0 || p->blockDimX > 1024 || p->gridDimY != 1 ||
        p->gridDimZ != 1 || p->blockDimY != 1 || p->blockDimZ != 1)
        return CUDA_ERROR_INVALID_VALUE;
    op = calloc(1, sizeof(*op));
    if (op == NULL || (op->params = malloc(fn->params_size)) == NULL) {
        free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->kind = OP_KERNEL;
    op->fn = fn;
    op->grid = p->gridDimX;
    op->block = p->blockDimX;
    memcpy(op->params, p->kernelParams[0], fn->params_size);
    pthread_mutex_lock(&lock);
    if (!graph_live_locked(graph))
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        rc = double_graph_add_locked((double_graph_t *)graph, op, deps, ndeps);
    pthread_mutex_unlock(&lock);
    if (rc != CUDA_SUCCESS)
        op_free(op);
    else
        *node = (CUgraphNode)op;
    return rc;
}

#define INSTANTIATE_FLAGS                                                                   \
    (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |  \
     CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

static CUresult instantiate(CUgraphExec *out, CUgraph graph, unsigned long long flags)
{
    double_graph_t *g = (double_graph_t *)graph;
    double_exec_t *e = NULL;
    CUresult rc = CUDA_SUCCESS;

    if (out == NULL || (flags & ~(unsigned long long)INSTANTIATE_FLAGS) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    if ((rc = unsafe_call_locked()) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&lock);
        return rc;
    }
    if (!graph_live_locked(graph))
        rc = CUDA_ERROR_INVALID_VALUE;
    /* memset nodes must lie in device memory (stream writes are checked at launch) */
    for (size_t i = 0; rc == CUDA_SUCCESS && i < g->n; i++)
        if (g->ops[i]->kind == OP_MEMSET32 && find_alloc((uintptr_t)g->ops[i]->dptr, 4 * g->ops[i]->n) < 0)
            rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && (e = calloc(1, sizeof(*e))) == NULL)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && (e->ops = ops_clone(g->ops, g->n)) == NULL) { /* a snapshot */
        free(e);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS) {
        e->n = g->n;
        e->src = g;
        e->flags = flags;
        e->next = execs;
        execs = e;
        *out = (CUgraphExec)e;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

RECAP_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph graph, unsigned long long flags)
{
    NEED_INIT();
    return instantiate(out, graph, flags);
}

static CUresult instantiate_with_params(CUgraphExec *out, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    CUresult rc;

    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    rc = instantiate(out, graph, p->flags);
    p->hErrNode_out = NULL;
    p->result_out = rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return rc;
}

RECAP_API CUresult cuGraphInstantiateWithParams(CUgraphExec *out, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    NEED_INIT();
    return instantiate_with_params(out, graph, p);
}

RECAP_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *out, CUgraph graph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    NEED_INIT();
    return instantiate_with_params(out, graph, p);
}

/* The 5-argument forms (CUDA 10 to 11), which cuda.h now maps cuGraphInstantiate away from. */
static CUresult instantiate_v1(CUgraphExec *out, CUgraph graph, CUgraphNode *err_node, char *log, size_t log_size)
{
    CUresult rc = instantiate(out, graph, 0);

    if (log != NULL && log_size > 0)
        log[0] = '\0';
    if (rc != CUDA_SUCCESS && err_node != NULL)
        *err_node = NULL;
    return rc;
}

RECAP_API CUresult cuGraphInstantiate(CUgraphExec *out, CUgraph graph, CUgraphNode *err_node, char *log,
                                   size_t log_size)
{
    NEED_INIT();
    return instantiate_v1(out, graph, err_node, log, log_size);
}

RECAP_API CUresult cuGraphInstantiate_v2(CUgraphExec *out, CUgraph graph, CUgraphNode *err_node, char *log,
                                      size_t log_size)
{
    NEED_INIT();
    return instantiate_v1(out, graph, err_node, log, log_size);
}

RECAP_API CUresult cuGraphExecDestroy(CUgraphExec exec)
{
    double_exec_t **pp, *e = NULL;
    CUresult rc;

    NEED_INIT();
    pthread_mutex_lock(&lock);
    if ((rc = unsafe_call_locked()) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&lock);
        return rc;
    }
    for (pp = &execs; *pp != NULL; pp = &(*pp)->next)
        if (*pp == (double_exec_t *)exec) {
            e = *pp;
            *pp = e->next;
            break;
        }
    if (e != NULL) { /* under the lock: child graph nodes own live (embedded) graphs */
        for (size_t i = 0; i < e->n; i++)
            op_free(e->ops[i]);
        free(e->ops);
        free(e);
    }
    pthread_mutex_unlock(&lock);
    return e == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* Runs an executable's nodes in order. The real driver refuses to launch a graph into a capture
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture invalidated, also when it was invalidated
 * before). A stream memory write to memory that is not the device's fails the launch with
 * CUDA_ERROR_INVALID_VALUE, after the nodes before it have run (as observed). */
static CUresult graph_launch(CUgraphExec exec, CUstream s, int per_thread)
{
    double_exec_t *e = (double_exec_t *)exec;
    double_stream_t *st;
    CUresult rc;

    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    rc = exec_live_locked(exec) ? resolve_locked(s, per_thread, &st) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && st == NULL)
        rc = legacy_use_locked(ctx_device(current()), 1);
    if (rc == CUDA_SUCCESS && st != NULL && st->cap != NULL) {
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        st->cap->invalidated = 1;
    }
    pthread_mutex_unlock(&lock);
    if (rc != CUDA_SUCCESS)
        return rc;
    return run_ops(e->ops, e->n);
}

RECAP_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream s)
{
    NEED_INIT();
    return graph_launch(exec, s, 0);
}

RECAP_API CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s)
{
    NEED_INIT();
    return graph_launch(exec, s, 1);
}

static CUresult graph_upload(CUgraphExec exec, CUstream s, int per_thread)
{
    double_stream_t *st;
    CUresult rc;

    pthread_mutex_lock(&lock);
    rc = exec_live_locked(exec) ? resolve_locked(s, per_thread, &st) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && st != NULL && st->cap != NULL) {
        st->cap->invalidated = 1;
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_unlock(&lock);
    return rc; /* nothing to upload */
}

RECAP_API CUresult cuGraphUpload(CUgraphExec exec, CUstream s)
{
    NEED_INIT();
    return graph_upload(exec, s, 0);
}

RECAP_API CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream s)
{
    NEED_INIT();
    return graph_upload(exec, s, 1);
}
