/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA test double's graph composition: child graph nodes (an embedded copy of the child,
 * as the real driver makes), graph edges (cuGraphGetEdges, cuGraphNodeGetDependentNodes,
 * cuGraphAddDependencies), kernel node parameters read back, exec update and child graph node
 * update in an exec, exec flags, conditional nodes with their handles and bodies, and empty
 * nodes. Graphs still run in insertion order; edges are kept for what recap reads of them.
 *
 * Conditional nodes run their body as the handle's value says (IF: body 0 when nonzero, else
 * body 1 if any; WHILE: body 0 once when nonzero, as if the body cleared the value; SWITCH:
 * body[value]); nothing in the double sets a handle's value from a kernel.
 */
#include "tests/double/double.h"

/* A conditional handle: its value, set at creation (CU_GRAPH_COND_ASSIGN_DEFAULT) or 0. Handles
 * come from a fixed pool, reused in turn (nothing to free, as the driver frees them with their
 * graph). */
typedef struct {
    unsigned value;
} cond_handle_t;

#define NHANDLES 1024
static cond_handle_t handles[NHANDLES];
static unsigned next_handle;

CUresult double_graph_edge_locked(double_graph_t *g, size_t from, size_t to)
{
    if (g->ne == g->ecap) {
        size_t cap = g->ecap ? 2 * g->ecap : 8;
        size_t *f = realloc(g->efrom, cap * sizeof(*f)), *t;
        if (f == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        g->efrom = f;
        t = realloc(g->eto, cap * sizeof(*t));
        if (t == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        g->eto = t;
        g->ecap = cap;
    }
    g->efrom[g->ne] = from;
    g->eto[g->ne] = to;
    g->ne++;
    g->dep_valid = 0;
    return CUDA_SUCCESS;
}

CUresult double_graph_copy_edges_locked(double_graph_t *g, const double_graph_t *src)
{
    for (size_t i = 0; i < src->ne; i++)
        if (double_graph_edge_locked(g, src->efrom[i], src->eto[i]) != CUDA_SUCCESS)
            return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

/* (from the newest node back: dependencies are mostly on recent nodes) */
static long index_locked(const double_graph_t *g, CUgraphNode node)
{
    for (size_t i = g->n; i-- > 0;)
        if ((CUgraphNode)g->ops[i] == node)
            return (long)i;
    return -1;
}

CUresult double_graph_add_locked(double_graph_t *g, op_t *op, const CUgraphNode *deps, size_t ndeps)
{
    size_t at = g->n, ne = g->ne, i;
    CUresult rc;

    for (i = 0; i < ndeps; i++)
        if (index_locked(g, deps[i]) < 0)
            return CUDA_ERROR_INVALID_VALUE;
    rc = graph_append_locked(g, op);
    for (i = 0; rc == CUDA_SUCCESS && i < ndeps; i++)
        rc = double_graph_edge_locked(g, (size_t)index_locked(g, deps[i]), at);
    if (rc != CUDA_SUCCESS)
        graph_truncate_locked(g, at, ne); /* the caller frees op */
    return rc;
}

/* An embedded copy of src (nodes and edges). */
static double_graph_t *embed_locked(const double_graph_t *src)
{
    double_graph_t *g = graph_new_locked();
    op_t **ops;

    if (g == NULL)
        return NULL;
    g->embedded = 1;
    ops = ops_clone(src->ops, src->n);
    if (ops == NULL || graph_take_ops_locked(g, ops, src->n) != CUDA_SUCCESS ||
        double_graph_copy_edges_locked(g, src) != CUDA_SUCCESS) {
        graph_free_locked(g);
        return NULL;
    }
    return g;
}

CUresult double_op_clone_bodies(op_t *dst, const op_t *src)
{
    for (unsigned i = 0; i < src->nbodies; i++) {
        dst->body[i] = src->body[i] != NULL ? embed_locked(src->body[i]) : NULL;
        if (src->body[i] != NULL && dst->body[i] == NULL) {
            while (i-- > 0)
                graph_free_locked(dst->body[i]);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    return CUDA_SUCCESS;
}

void double_op_free_bodies(op_t *op)
{
    if (!double_op_compound(op->kind))
        return;
    for (unsigned i = 0; i < op->nbodies; i++)
        if (op->body[i] != NULL)
            graph_free_locked(op->body[i]);
}

static CUresult run_body(const double_graph_t *g)
{
    return g != NULL ? run_ops(g->ops, g->n) : CUDA_SUCCESS;
}

CUresult double_run_compound(const op_t *op)
{
    cond_handle_t *h = (cond_handle_t *)(uintptr_t)op->cond;

    switch (op->kind) {
    case OP_CHILD:
        return run_body(op->body[0]);
    case OP_COND:
        if (op->cond_type == CU_GRAPH_COND_TYPE_IF)
            return h->value ? run_body(op->body[0])
                            : op->nbodies > 1 ? run_body(op->body[1]) : CUDA_SUCCESS;
        if (op->cond_type == CU_GRAPH_COND_TYPE_WHILE)
            return h->value ? run_body(op->body[0]) : CUDA_SUCCESS;
        return h->value < op->nbodies ? run_body(op->body[h->value]) : CUDA_SUCCESS;
    default:
        return CUDA_SUCCESS;
    }
}

/* ------------------------------------------------------------------ nodes */

static CUresult add_child_locked(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                 size_t ndeps, CUgraph child)
{
    op_t *op;
    CUresult rc;

    if (!graph_live_locked(graph) || !graph_live_locked(child) || graph == child)
        return CUDA_ERROR_INVALID_VALUE;
    op = calloc(1, sizeof(*op));
    if (op == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->kind = OP_CHILD;
    op->nbodies = 1;
    op->body[0] = embed_locked((double_graph_t *)child);
    if (op->body[0] == NULL) {
        free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rc = double_graph_add_locked((double_graph_t *)graph, op, deps, ndeps);
    if (rc != CUDA_SUCCESS)
        op_free(op);
    else
        *node = (CUgraphNode)op;
    return rc;
}

RECAP_API CUresult cuGraphAddChildGraphNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                         size_t ndeps, CUgraph child)
{
    CUresult rc;

    NEED_INIT();
    if (node == NULL || (ndeps > 0 && deps == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    rc = add_child_locked(node, graph, deps, ndeps, child);
    pthread_mutex_unlock(&lock);
    return rc;
}

RECAP_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *out)
{
    NEED_INIT();
    if (node == NULL || out == NULL || ((op_t *)node)->kind != OP_CHILD)
        return CUDA_ERROR_INVALID_VALUE;
    *out = (CUgraph)((op_t *)node)->body[0];
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuGraphAddEmptyNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                    size_t ndeps)
{
    op_t *op;
    CUresult rc;

    NEED_INIT();
    if (node == NULL || (ndeps > 0 && deps == NULL) || (op = calloc(1, sizeof(*op))) == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    op->kind = OP_EMPTY;
    pthread_mutex_lock(&lock);
    rc = graph_live_locked(graph) ? double_graph_add_locked((double_graph_t *)graph, op, deps, ndeps)
                                  : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    if (rc != CUDA_SUCCESS)
        free(op);
    else
        *node = (CUgraphNode)op;
    return rc;
}

RECAP_API CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type)
{
    NEED_INIT();
    if (node == NULL || type == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    switch (((op_t *)node)->kind) {
    case OP_KERNEL: *type = CU_GRAPH_NODE_TYPE_KERNEL; break;
    case OP_CHILD: *type = CU_GRAPH_NODE_TYPE_GRAPH; break;
    case OP_COND: *type = CU_GRAPH_NODE_TYPE_CONDITIONAL; break;
    case OP_EMPTY: *type = CU_GRAPH_NODE_TYPE_EMPTY; break;
    case OP_HOSTFN: *type = CU_GRAPH_NODE_TYPE_HOST; break;
    case OP_HTOD: case OP_DTOH: *type = CU_GRAPH_NODE_TYPE_MEMCPY; break;
    case OP_MEMSET8: case OP_MEMSET32: *type = CU_GRAPH_NODE_TYPE_MEMSET; break;
    default: *type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP; break;
    }
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p)
{
    op_t *op = (op_t *)node;

    NEED_INIT();
    if (op == NULL || p == NULL || op->kind != OP_KERNEL)
        return CUDA_ERROR_INVALID_VALUE;
    memset(p, 0, sizeof(*p));
    op->kparams[0] = op->params; /* owned by the node, as the driver's are */
    p->func = (CUfunction)op->fn;
    p->gridDimX = op->grid;
    p->gridDimY = p->gridDimZ = 1;
    p->blockDimX = op->block;
    p->blockDimY = p->blockDimZ = 1;
    p->kernelParams = op->kparams;
    return CUDA_SUCCESS;
}

static CUresult get_edges(CUgraph graph, CUgraphNode *from, CUgraphNode *to,
                          CUgraphEdgeData *data, size_t *n)
{
    double_graph_t *g = (double_graph_t *)graph;
    CUresult rc = CUDA_SUCCESS;

    /* as the H200's driver (580) does: arrays with a count of 0 are refused */
    if (n == NULL || (from == NULL) != (to == NULL) || (from != NULL && *n == 0))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (!graph_live_locked(graph)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (from == NULL) {
        *n = g->ne;
    } else {
        size_t i;
        for (i = 0; i < *n && i < g->ne; i++) {
            from[i] = (CUgraphNode)g->ops[g->efrom[i]];
            to[i] = (CUgraphNode)g->ops[g->eto[i]];
            if (data != NULL)
                memset(&data[i], 0, sizeof(data[i]));
        }
        *n = i;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

RECAP_API CUresult cuGraphGetEdges_v2(CUgraph graph, CUgraphNode *from, CUgraphNode *to,
                                   CUgraphEdgeData *data, size_t *n)
{
    NEED_INIT();
    return get_edges(graph, from, to, data, n);
}

RECAP_API CUresult cuGraphGetEdges(CUgraph graph, CUgraphNode *from, CUgraphNode *to, size_t *n)
{
    NEED_INIT();
    return get_edges(graph, from, to, NULL, n);
}

#if DOUBLE_DEPENDENT_NODES >= 1
/* Builds g's dependents lists from its edges (counted per node, then placed in edge order). */
static CUresult dependents_locked(double_graph_t *g)
{
    size_t *first, *dep, e, x;

    if (g->dep_valid)
        return CUDA_SUCCESS;
    first = calloc(g->n + 2, sizeof(*first));
    dep = calloc(g->ne + 1, sizeof(*dep));
    if (first == NULL || dep == NULL) {
        free(first);
        free(dep);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (e = 0; e < g->ne; e++)
        first[g->efrom[e] + 2]++;
    for (x = 0; x < g->n; x++)
        first[x + 2] += first[x + 1];
    for (e = 0; e < g->ne; e++)
        dep[first[g->efrom[e] + 1]++] = g->eto[e];
    free(g->dep_first);
    free(g->dep);
    g->dep_first = first;
    g->dep = dep;
    g->dep_valid = 1;
    return CUDA_SUCCESS;
}

/* A node's dependents (the heads of its outgoing edges), in the order their edges were added:
 * O(its dependents) a call, once the graph's lists are built. The driver's checks: NULL count,
 * an array with a count of 0 (as get_edges: the H200's driver refuses it), edge data without the
 * node array (the documentation's rule), and a node in no live graph are
 * CUDA_ERROR_INVALID_VALUE. A count larger than the dependents gets them, the rest of the array
 * NULL (zeroed edge data), and the count set to theirs. */
static CUresult dependent_nodes(CUgraphNode node, CUgraphNode *deps, CUgraphEdgeData *data,
                                size_t *n)
{
    CUresult rc = CUDA_SUCCESS;
    op_t *op;

    if (n == NULL || (deps != NULL && *n == 0) || (data != NULL && deps == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    op = node_live_locked(node);
    if (op == NULL || op->owner == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        rc = dependents_locked(op->owner);
    if (rc == CUDA_SUCCESS) {
        const double_graph_t *g = op->owner;
        size_t first = g->dep_first[op->index], count = g->dep_first[op->index + 1] - first, i;

        if (deps != NULL) {
            for (i = 0; i < *n; i++) {
                deps[i] = i < count ? (CUgraphNode)g->ops[g->dep[first + i]] : NULL;
                if (data != NULL)
                    memset(&data[i], 0, sizeof(data[i]));
            }
            if (*n > count)
                *n = count;
        } else {
            *n = count;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

#if DOUBLE_DEPENDENT_NODES >= 2
RECAP_API CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode node, CUgraphNode *deps,
                                                   CUgraphEdgeData *data, size_t *n)
{
    NEED_INIT();
    return dependent_nodes(node, deps, data, n);
}
#endif

RECAP_API CUresult cuGraphNodeGetDependentNodes(CUgraphNode node, CUgraphNode *deps, size_t *n)
{
    NEED_INIT();
    return dependent_nodes(node, deps, NULL, n);
}
#endif

RECAP_API CUresult cuGraphAddDependencies(CUgraph graph, const CUgraphNode *from, const CUgraphNode *to,
                                       size_t n)
{
    double_graph_t *g = (double_graph_t *)graph;
    CUresult rc = CUDA_SUCCESS;

    NEED_INIT();
    if (n > 0 && (from == NULL || to == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (!graph_live_locked(graph))
        rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++) {
        long a = index_locked(g, from[i]), b = index_locked(g, to[i]);
        /* the double runs nodes in insertion order: an edge backwards could not hold */
        rc = a < 0 || b < 0 || a >= b ? CUDA_ERROR_INVALID_VALUE
                                      : double_graph_edge_locked(g, (size_t)a, (size_t)b);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* ------------------------------------------------------------------ conditional nodes */

RECAP_API CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *out, CUgraph graph,
                                               CUcontext ctx, unsigned int value,
                                               unsigned int flags)
{
    cond_handle_t *h = NULL;

    NEED_INIT();
    (void)ctx;
    if (out == NULL || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (graph_live_locked(graph)) {
        h = &handles[next_handle++ % NHANDLES];
        h->value = (flags & CU_GRAPH_COND_ASSIGN_DEFAULT) ? value : 0;
    }
    pthread_mutex_unlock(&lock);
    if (h == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *out = (CUgraphConditionalHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

static CUresult add_node(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                         CUgraphNodeParams *p)
{
    CUDA_CONDITIONAL_NODE_PARAMS *c;
    op_t *op;
    CUresult rc;

    if (node == NULL || p == NULL || (ndeps > 0 && deps == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    if (p->type == CU_GRAPH_NODE_TYPE_GRAPH) {
        pthread_mutex_lock(&lock);
        rc = add_child_locked(node, graph, deps, ndeps, p->graph.graph);
        pthread_mutex_unlock(&lock);
        return rc;
    }
    if (p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL)
        return CUDA_ERROR_NOT_SUPPORTED;
    c = &p->conditional;
    if (c->handle == 0 || c->size < 1 || c->size > 2 ||
        (c->type == CU_GRAPH_COND_TYPE_WHILE && c->size != 1))
        return CUDA_ERROR_INVALID_VALUE;
    if ((op = calloc(1, sizeof(*op))) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->kind = OP_COND;
    op->cond = c->handle;
    op->cond_type = c->type;
    pthread_mutex_lock(&lock);
    rc = graph_live_locked(graph) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; rc == CUDA_SUCCESS && i < c->size; i++) {
        op->body[i] = graph_new_locked();
        if (op->body[i] == NULL)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else
            op->body[i]->embedded = 1;
        op->nbodies = i + 1;
    }
    if (rc == CUDA_SUCCESS)
        rc = double_graph_add_locked((double_graph_t *)graph, op, deps, ndeps);
    if (rc != CUDA_SUCCESS) {
        op_free(op);
    } else {
        c->phGraph_out = (CUgraph *)op->body; /* owned by the node */
        *node = (CUgraphNode)op;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

RECAP_API CUresult cuGraphAddNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                               size_t ndeps, CUgraphNodeParams *p)
{
    NEED_INIT();
    return add_node(node, graph, deps, ndeps, p);
}

RECAP_API CUresult cuGraphAddNode_v2(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                  const CUgraphEdgeData *data, size_t ndeps, CUgraphNodeParams *p)
{
    NEED_INIT();
    (void)data;
    return add_node(node, graph, deps, ndeps, p);
}

/* ------------------------------------------------------------------ executables */

RECAP_API CUresult cuGraphExecGetFlags(CUgraphExec exec, cuuint64_t *flags)
{
    CUresult rc = CUDA_SUCCESS;

    NEED_INIT();
    if (flags == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (exec_live_locked(exec))
        *flags = ((double_exec_t *)exec)->flags;
    else
        rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    return rc;
}

/* The same topology (node count and kinds, in order) is required, as the real driver does. */
RECAP_API CUresult cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info)
{
    double_exec_t *e = (double_exec_t *)exec;
    double_graph_t *g = (double_graph_t *)graph;
    CUgraphExecUpdateResult result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    op_t **ops = NULL;

    NEED_INIT();
    pthread_mutex_lock(&lock);
    if (!exec_live_locked(exec) || !graph_live_locked(graph)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (g->n != e->n) {
        result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    } else {
        for (size_t i = 0; i < g->n; i++)
            if (g->ops[i]->kind != e->ops[i]->kind)
                result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
    }
    if (rc == CUDA_SUCCESS && result == CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        ops = ops_clone(g->ops, g->n);
        if (ops == NULL) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            for (size_t i = 0; i < e->n; i++)
                op_free(e->ops[i]);
            free(e->ops);
            e->ops = ops;
            e->src = g;
        }
    }
    pthread_mutex_unlock(&lock);
    if (result != CU_GRAPH_EXEC_UPDATE_SUCCESS)
        rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    if (info != NULL) {
        memset(info, 0, sizeof(*info));
        info->result = result;
    }
    return rc;
}

/* The driver's four-argument form (CUDA 10.2 to 12.x headers), still exported. */
RECAP_API CUresult cuGraphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphNode *error_node,
                                     CUgraphExecUpdateResult *result)
{
    CUgraphExecUpdateResultInfo info;
    CUresult rc = cuGraphExecUpdate_v2(exec, graph, &info);

    if (error_node != NULL)
        *error_node = info.errorNode;
    if (result != NULL)
        *result = info.result;
    return rc;
}

RECAP_API CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec exec, CUgraphNode node, CUgraph child)
{
    double_exec_t *e = (double_exec_t *)exec;
    CUresult rc = CUDA_SUCCESS;
    long at = -1;

    NEED_INIT();
    pthread_mutex_lock(&lock);
    if (!exec_live_locked(exec) || !graph_live_locked(child) || !graph_live_locked((CUgraph)e->src) ||
        (at = index_locked(e->src, node)) < 0 || (size_t)at >= e->n ||
        e->ops[at]->kind != OP_CHILD) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        double_graph_t *g = embed_locked((double_graph_t *)child);
        if (g == NULL) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            graph_free_locked(e->ops[at]->body[0]);
            e->ops[at]->body[0] = g;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}
