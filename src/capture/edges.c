/* SPDX-License-Identifier: Apache-2.0 */
/* The edges of one graph level, read from the driver as index pairs for the walk (walk.h). */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "capture/walk.h"

static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const CUgraphNode *)a)[0], y = (uintptr_t)((const CUgraphNode *)b)[0];

    return x < y ? -1 : x > y;
}

/* (node, index) pairs of `nodes`, sorted by node, for recap__index_of. */
CUgraphNode *recap__sorted_of(const CUgraphNode *nodes, size_t count)
{
    CUgraphNode *sorted = count <= SIZE_MAX / 2 - 1 ? calloc(2 * count + 2, sizeof(*sorted)) : NULL;
    size_t i;

    if (sorted == NULL)
        return NULL;
    for (i = 0; i < count; i++) {
        sorted[2 * i] = nodes[i];
        sorted[2 * i + 1] = (CUgraphNode)(uintptr_t)i;
    }
    qsort(sorted, count, 2 * sizeof(*sorted), ptr_cmp);
    return sorted;
}

/* Index of node `n` in the sorted copy `sorted` (pairs node, index), or -1. */
long recap__index_of(const CUgraphNode *sorted, size_t count, CUgraphNode n)
{
    size_t lo = 0, hi = count;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sorted[2 * mid] == n)
            return (long)(uintptr_t)sorted[2 * mid + 1];
        if ((uintptr_t)sorted[2 * mid] < (uintptr_t)n)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* The graph's edges read at once (cuGraphGetEdges), as recap__edges_of returns them. */
static int edges_at_once(recap__walk_t *w, CUgraph g, const CUgraphNode *sorted, size_t count,
                         size_t **from_p, size_t **to_p, size_t *nedges_p)
{
    CUgraphNode *from = NULL, *to = NULL;
    CUgraphEdgeData *data = NULL;
    size_t n = 0, i, k = 0;
    CUresult rc;
    int ok = 0;

    *from_p = *to_p = NULL;
    if (w->drv->cuGraphGetEdges != NULL)
        rc = w->drv->cuGraphGetEdges(g, NULL, NULL, NULL, &n);
    else if (w->drv->cuGraphGetEdges_v1 != NULL)
        rc = w->drv->cuGraphGetEdges_v1(g, NULL, NULL, &n);
    else
        rc = CUDA_ERROR_NOT_SUPPORTED;
    if (rc != CUDA_SUCCESS)
        return 0;
    from = recap__calloc_n(n, 1, sizeof(*from));
    to = recap__calloc_n(n, 1, sizeof(*to));
    data = recap__calloc_n(n, 1, sizeof(*data));
    *from_p = recap__calloc_n(n, 1, sizeof(size_t));
    *to_p = recap__calloc_n(n, 1, sizeof(size_t));
    if (from == NULL || to == NULL || data == NULL || *from_p == NULL || *to_p == NULL) {
        recap__nomem(w);
        goto out;
    }
    /* (none: the real driver refuses arrays with a count of 0, CUDA_ERROR_INVALID_VALUE) */
    if (n > 0 && w->drv->cuGraphGetEdges != NULL)
        rc = w->drv->cuGraphGetEdges(g, from, to, data, &n);
    else if (n > 0)
        rc = w->drv->cuGraphGetEdges_v1(g, from, to, &n);
    if (rc != CUDA_SUCCESS)
        goto out;
    for (i = 0; i < n; i++) {
        long a = recap__index_of(sorted, count, from[i]), b = recap__index_of(sorted, count, to[i]);
        if (a >= 0 && b >= 0) {
            (*from_p)[k] = (size_t)a;
            (*to_p)[k] = (size_t)b;
            k++;
        }
    }
    *nedges_p = k;
    w->edges += k;
    ok = 1;
out:
    free(from);
    free(to);
    free(data);
    if (!ok) {
        free(*from_p);
        free(*to_p);
        *from_p = *to_p = NULL;
    }
    return ok;
}

static CUresult dependents(const recap__driver_t *drv, CUgraphNode node, CUgraphNode *deps,
                           CUgraphEdgeData *data, size_t *n)
{
    if (drv->cuGraphNodeGetDependentNodes != NULL)
        return drv->cuGraphNodeGetDependentNodes(node, deps, data, n);
    return drv->cuGraphNodeGetDependentNodes_v1(node, deps, n);
}

/* The graph's edges read node by node (each node's dependents), as recap__edges_of returns them:
 * each node's count first, then the edges of those that have any, into arrays sized once (a
 * node's dependents go through one buffer, as large as the most any node has). */
static int edges_by_node(recap__walk_t *w, const CUgraphNode *nodes, const CUgraphNode *sorted,
                         size_t count, size_t **from_p, size_t **to_p, size_t *nedges_p)
{
    size_t *deg = recap__calloc_n(count, 1, sizeof(*deg)), total = 0, most = 0, i, j, k = 0;
    CUgraphNode *deps = NULL;
    CUgraphEdgeData *data = NULL;
    int ok = 0;

    *from_p = *to_p = NULL;
    if (deg == NULL) {
        recap__nomem(w);
        return 0;
    }
    for (i = 0; i < count; i++) {
        if (dependents(w->drv, nodes[i], NULL, NULL, &deg[i]) != CUDA_SUCCESS)
            goto out;
        total = recap__count_add(total, deg[i]);
        most = deg[i] > most ? deg[i] : most;
    }
    *from_p = recap__calloc_n(total, 1, sizeof(size_t));
    *to_p = recap__calloc_n(total, 1, sizeof(size_t));
    deps = recap__calloc_n(most, 1, sizeof(*deps));
    data = recap__calloc_n(most, 1, sizeof(*data));
    if (*from_p == NULL || *to_p == NULL || deps == NULL || data == NULL) {
        recap__nomem(w);
        goto out;
    }
    for (i = 0; i < count; i++) {
        size_t n = deg[i];

        /* (none: the real driver refuses arrays with a count of 0, CUDA_ERROR_INVALID_VALUE) */
        if (n == 0)
            continue;
        if (dependents(w->drv, nodes[i], deps, data, &n) != CUDA_SUCCESS)
            goto out;
        for (j = 0; j < n && j < deg[i]; j++) {
            long b = recap__index_of(sorted, count, deps[j]);
            if (b >= 0) {
                (*from_p)[k] = i;
                (*to_p)[k] = (size_t)b;
                k++;
            }
        }
    }
    *nedges_p = k;
    w->edges += k;
    ok = 1;
out:
    free(deg);
    free(deps);
    free(data);
    if (!ok) {
        free(*from_p);
        free(*to_p);
        *from_p = *to_p = NULL;
    }
    return ok;
}

/*
 * The edges of a level (walk.h says what it returns).
 *
 * Node by node where the driver can: the driver's whole-graph query is not linear in the number
 * of nodes, the per-node query is (bench/compose.c; the figures are in bench/results/host.md,
 * "Composition walk at instantiate"). The edges come grouped by node; what the walk checks with
 * them (which parts reach which) does not depend on their order.
 */
int recap__edges_of(recap__walk_t *w, CUgraph g, const CUgraphNode *nodes,
                    const CUgraphNode *sorted, size_t count, size_t **from_p, size_t **to_p,
                    size_t *nedges_p)
{
    if (w->drv->cuGraphNodeGetDependentNodes != NULL ||
        w->drv->cuGraphNodeGetDependentNodes_v1 != NULL)
        return edges_by_node(w, nodes, sorted, count, from_p, to_p, nedges_p);
    return edges_at_once(w, g, sorted, count, from_p, to_p, nedges_p);
}

