/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/atfork.h"
#include "base/error.h"
#include "base/lock.h"
#include "base/log.h"
#include "base/ptrmap.h"
#include "capture/capture.h"
#include "capture/order.h"
#include "driver/driver.h"
#include "kernels/capture_body.h"
#include "kernels/fill_body.h"

/*
 * Graph composition: what an executable draws per launch, read from the graph itself.
 *
 * Every captured graph that draws ends in recap's advance node, which names each generator slot
 * the graph drew from and by how much. The driver copies that node wherever the graph goes: into
 * a parent as a child graph node (at any depth), into clones, into the graph an exec is updated
 * from. So at instantiate (and at exec update) recap walks the graph, child graphs included, sums
 * the advance nodes per slot, and gives the exec that record: each launch then advances the
 * generators exactly as the children would, whoever built the parent and however.
 *
 * A child's kernels read its generator's slot at run time and its advance node moves the slot on,
 * so two parts of a graph that draw from one generator are exact only when one runs entirely
 * before the other. The walk checks that order with the graph's edges and refuses (a failed
 * call, a warning through the hooks) where it is missing. What recap cannot make exact it refuses
 * the same way: a conditional node whose body draws (the host reserves offsets at launch and
 * cannot know how often the body runs) and an exec instantiated for device-side launch (its
 * device launches are invisible to the host). Refused execs still advance the generators by one
 * run of everything they draw, so later eager draws at least stay clear of a plain launch.
 */

typedef struct {
    uint64_t slot, inc;
} draw_t;

typedef struct {
    draw_t *d;
    size_t n, cap;
} draws_t;

static int draws_add(draws_t *ds, uint64_t slot, uint64_t inc)
{
    size_t i;

    for (i = 0; i < ds->n; i++)
        if (ds->d[i].slot == slot) {
            ds->d[i].inc += inc;
            return 1;
        }
    if (ds->n == ds->cap) {
        size_t cap = ds->cap ? 2 * ds->cap : 8;
        draw_t *d = recap__realloc_n(ds->d, cap, sizeof(*d));
        if (d == NULL)
            return 0;
        ds->d = d;
        ds->cap = cap;
    }
    ds->d[ds->n].slot = slot;
    ds->d[ds->n].inc = inc;
    ds->n++;
    return 1;
}

static int draws_merge(draws_t *into, const draws_t *from)
{
    size_t i;

    for (i = 0; i < from->n; i++)
        if (!draws_add(into, from->d[i].slot, from->d[i].inc))
            return 0;
    return 1;
}

static int draws_has(const draws_t *ds, uint64_t slot)
{
    size_t i;

    for (i = 0; i < ds->n; i++)
        if (ds->d[i].slot == slot)
            return 1;
    return 0;
}

static int draws_share(const draws_t *a, const draws_t *b)
{
    size_t i;

    for (i = 0; i < a->n; i++)
        if (draws_has(b, a->d[i].slot))
            return 1;
    return 0;
}

static void draws_free(draws_t *ds)
{
    free(ds->d);
    memset(ds, 0, sizeof(*ds));
}

/* ------------------------------------------------------------------ conditional bodies */

/* Conditional node -> its body graphs, as the hooks (or the host) reported them: the driver has
 * no call that gives a conditional node's bodies back. */
typedef struct {
    CUgraph owner; /* the graph holding the node: its destroy drops the record */
    size_t n;
    CUgraph body[];
} bodies_t;

static pthread_mutex_t compose_lock = PTHREAD_MUTEX_INITIALIZER;
static recap__ptrmap_t conditionals; /* CUgraphNode -> bodies_t */
static recap__ptrmap_t plans;        /* CUgraphExec -> plan_t (execs whose graph has child nodes) */

void recap__compose_atfork(recap__atfork_t when)
{
    recap__atfork_mutex(&compose_lock, when);
}

recap_status_t recap_graph_conditional_added(recap_graph_t graph, recap_graph_node_t node,
                                             const recap_graph_t *bodies, size_t nbodies)
{
    bodies_t *b;
    int failed = 0;

    RECAP_CHECK_ARG(graph != NULL && node != NULL && (bodies != NULL || nbodies == 0),
                    "NULL graph, node or bodies");
    /* (CUDA_CONDITIONAL_NODE_PARAMS counts bodies in an unsigned int; the check on the byte size
     * stays for where size_t is as narrow) */
    RECAP_CHECK_ARG(nbodies <= UINT_MAX && nbodies <= (SIZE_MAX - sizeof(*b)) / sizeof(CUgraph),
                    "%zu bodies: more than a conditional node can have (%u)", nbodies, UINT_MAX);
    b = recap__alloc_flex(sizeof(*b), nbodies, sizeof(CUgraph));
    if (b == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "conditional node record");
    b->owner = (CUgraph)graph;
    b->n = nbodies;
    memcpy(b->body, bodies, nbodies * sizeof(CUgraph));
    pthread_mutex_lock(&compose_lock);
    free(recap__ptrmap_put(&conditionals, node, b, &failed));
    pthread_mutex_unlock(&compose_lock);
    if (failed) {
        free(b);
        return recap__fail(RECAP_ERR_NO_MEMORY, "conditional node map");
    }
    return RECAP_OK;
}

static int owned_by(void *val, void *graph)
{
    bodies_t *b = val;

    if (b->owner != (CUgraph)graph)
        return 0;
    free(b);
    return 1;
}

void recap__compose_graph_forget(CUgraph graph)
{
    pthread_mutex_lock(&compose_lock);
    if (conditionals.live > 0)
        recap__ptrmap_drop_if(&conditionals, owned_by, graph);
    pthread_mutex_unlock(&compose_lock);
}

/* A copy of the bodies of conditional node `node` (NULL when unknown, or out of memory: *nomem
 * says); the caller frees it. */
static bodies_t *bodies_of(CUgraphNode node, int *nomem)
{
    bodies_t *b, *copy = NULL;

    pthread_mutex_lock(&compose_lock);
    b = recap__ptrmap_get(&conditionals, node);
    if (b != NULL && (copy = recap__alloc_flex(sizeof(*b), b->n, sizeof(CUgraph))) != NULL)
        memcpy(copy, b, sizeof(*b) + b->n * sizeof(CUgraph));
    *nomem = b != NULL && copy == NULL;
    pthread_mutex_unlock(&compose_lock);
    return copy;
}

/* ------------------------------------------------------------------ the walk */

enum unit_kind { UNIT_ADVANCE, UNIT_CHILD };

/* What one level of a graph draws, part by part: recap's advance nodes and child graph nodes. */
typedef struct {
    size_t node; /* index into the level's nodes */
    enum unit_kind kind;
    draws_t draws;
} unit_t;

/* What an exec keeps for cuGraphExecChildGraphNodeSetParams: the top level's parts that draw (all
 * its child graph nodes, drawing or not) and its order, so a changed child's order with every
 * other part is read when it changes, from what each part draws then. */
typedef struct {
    size_t count;        /* the top level's nodes */
    CUgraphNode *sorted; /* (node, index) pairs sorted by node */
    recap__order_t order;
    size_t *kernels, nkernels; /* the kernel nodes (captured work ends before its advance node) */
    unit_t *units;
    size_t nunits, nchildren;
    size_t *unit_of; /* node index -> unit index + 1 (0: not a unit) */
    draws_t total;
    char refused[320]; /* why this exec is refused ("" when it is exact) */
} plan_t;

typedef struct {
    const recap__driver_t *drv;
    CUgraph top;
    char why[320];
    int failed; /* a driver call failed: the walk says nothing */
    int nomem;  /* ... or memory ran out */
    size_t graphs, nodes, edges, steps; /* what the walk cost (the debug log says) */
} walk_t;

/* One level of the walk, on the walk's own stack (no recursion: nesting has no depth limit). */
enum { WAIT_NONE, WAIT_CHILD, WAIT_BODY };
typedef struct {
    CUgraph g;
    CUgraphNode *nodes;
    CUgraphNodeType *types;
    unit_t *units;
    size_t count, nunits, i;
    draws_t fills;  /* slots recap's captured fill kernels of this level read */
    draws_t result; /* what one run of the level draws */
    plan_t *plan;   /* the top level: what the exec keeps */
    bodies_t *cond; /* node i is a conditional node whose bodies are being walked */
    size_t body;
    int waiting; /* what the level below walks for: units[nunits] or cond->body[body] */
} level_t;

static void refuse(walk_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(walk_t *w, const char *fmt, ...)
{
    va_list ap;

    if (w->why[0] != '\0')
        return;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof(w->why), fmt, ap);
    va_end(ap);
}

static void out_of_memory(walk_t *w)
{
    w->failed = 1;
    w->nomem = 1;
}

/* calloc of count + extra elements, none when that many cannot be counted. */
static void *calloc_n(size_t count, size_t extra, size_t size)
{
    return count > SIZE_MAX - extra ? NULL : calloc(count + extra, size);
}

static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const CUgraphNode *)a)[0], y = (uintptr_t)((const CUgraphNode *)b)[0];

    return x < y ? -1 : x > y;
}

/* (node, index) pairs of `nodes`, sorted by node, for index_of. */
static CUgraphNode *sorted_of(const CUgraphNode *nodes, size_t count)
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
static long index_of(const CUgraphNode *sorted, size_t count, CUgraphNode n)
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

/* The graph's edges read at once (cuGraphGetEdges), as edges_of returns them. */
static int edges_at_once(walk_t *w, CUgraph g, const CUgraphNode *sorted, size_t count,
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
    from = calloc_n(n, 1, sizeof(*from));
    to = calloc_n(n, 1, sizeof(*to));
    data = calloc_n(n, 1, sizeof(*data));
    *from_p = calloc_n(n, 1, sizeof(size_t));
    *to_p = calloc_n(n, 1, sizeof(size_t));
    if (from == NULL || to == NULL || data == NULL || *from_p == NULL || *to_p == NULL) {
        out_of_memory(w);
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
        long a = index_of(sorted, count, from[i]), b = index_of(sorted, count, to[i]);
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

/* The graph's edges read node by node (each node's dependents), as edges_of returns them: each
 * node's count first, then the edges of those that have any, into arrays sized once (a node's
 * dependents go through one buffer, as large as the most any node has). */
static int edges_by_node(walk_t *w, const CUgraphNode *nodes, const CUgraphNode *sorted,
                         size_t count, size_t **from_p, size_t **to_p, size_t *nedges_p)
{
    size_t *deg = calloc_n(count, 1, sizeof(*deg)), total = 0, most = 0, i, j, k = 0;
    CUgraphNode *deps = NULL;
    CUgraphEdgeData *data = NULL;
    int ok = 0;

    *from_p = *to_p = NULL;
    if (deg == NULL) {
        out_of_memory(w);
        return 0;
    }
    for (i = 0; i < count; i++) {
        if (dependents(w->drv, nodes[i], NULL, NULL, &deg[i]) != CUDA_SUCCESS)
            goto out;
        total = recap__count_add(total, deg[i]);
        most = deg[i] > most ? deg[i] : most;
    }
    *from_p = calloc_n(total, 1, sizeof(size_t));
    *to_p = calloc_n(total, 1, sizeof(size_t));
    deps = calloc_n(most, 1, sizeof(*deps));
    data = calloc_n(most, 1, sizeof(*data));
    if (*from_p == NULL || *to_p == NULL || deps == NULL || data == NULL) {
        out_of_memory(w);
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
            long b = index_of(sorted, count, deps[j]);
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
 * The edges between the level's nodes `nodes` (count of them; `sorted`: the same, sorted_of) as
 * index pairs (*from, *to), *nedges of them. 0 on failure (a driver call failed, or memory ran
 * out: w says).
 *
 * Node by node where the driver can: the driver's whole-graph query is not linear. Measured on
 * an H100 with driver 580 (bench_compose, 2026-12-07): cuGraphGetEdges of a parent of 8,000 /
 * 64,000 chained child graph nodes took 8.8 / 461 ms, cuGraphNodeGetDependentNodes of every node
 * 0.24 / 6.0 ms; the walk of 64,000 children that draw nothing went from 493 to 65 ms (the
 * driver's own instantiate: 161 ms). The edges come grouped by node; what the walk checks with
 * them (which parts reach which) does not depend on their order.
 */
static int edges_of(walk_t *w, CUgraph g, const CUgraphNode *nodes, const CUgraphNode *sorted,
                    size_t count, size_t **from_p, size_t **to_p, size_t *nedges_p)
{
    if (w->drv->cuGraphNodeGetDependentNodes != NULL ||
        w->drv->cuGraphNodeGetDependentNodes_v1 != NULL)
        return edges_by_node(w, nodes, sorted, count, from_p, to_p, nedges_p);
    return edges_at_once(w, g, sorted, count, from_p, to_p, nedges_p);
}

/* A kernel node: recap's advance node becomes a unit; recap's captured fill kernels are noted so
 * a graph that holds them without their advance node is refused. */
static void walk_kernel(walk_t *w, level_t *l)
{
    CUDA_KERNEL_NODE_PARAMS p;
    int id;

    memset(&p, 0, sizeof(p));
    if (w->drv->cuGraphKernelNodeGetParams(l->nodes[l->i], &p) != CUDA_SUCCESS) {
        w->failed = 1;
        return;
    }
    id = recap__device_kernel_id(p.func);
    if (id < 0 || p.kernelParams == NULL || p.kernelParams[0] == NULL)
        return;
    if (id == RECAP_K_ADVANCE) {
        const recap__advance_params_t *ap = p.kernelParams[0];
        unit_t *u = &l->units[l->nunits++];
        uint32_t k;

        u->node = l->i;
        u->kind = UNIT_ADVANCE;
        if (ap->count > RECAP_SLOTS_PER_LAUNCH) /* recap writes at most that many */
            refuse(w, "graph %p holds a recap advance node naming %u generator slots (at most %u "
                   "exist): its parameters were overwritten, so what it draws cannot be known",
                   (void *)w->top, (unsigned)ap->count, (unsigned)RECAP_SLOTS_PER_LAUNCH);
        for (k = 0; k < ap->count && k < RECAP_SLOTS_PER_LAUNCH; k++)
            if (!draws_add(&u->draws, ap->slot[k], ap->inc[k]))
                out_of_memory(w);
    } else if (id == RECAP_K_FILL_U32_CAPTURED || id == RECAP_K_FILL_F32_CAPTURED ||
               id == RECAP_K_FILL_F64_CAPTURED) {
        const recap__fill_params_t *fp = p.kernelParams[0];
        if (fp->philox.captured && !draws_add(&l->fills, (uint64_t)(uintptr_t)fp->philox.seed_ptr, 0))
            out_of_memory(w);
    }
}

/* Moves level l on to its next node that holds a graph to walk and returns that graph (l->waiting
 * says what for), or NULL when the level is done. */
static CUgraph level_step(walk_t *w, level_t *l)
{
    for (;;) {
        if (l->cond != NULL) {
            while (l->body < l->cond->n && l->cond->body[l->body] == NULL)
                l->body++;
            if (l->body < l->cond->n) {
                l->waiting = WAIT_BODY;
                return l->cond->body[l->body];
            }
            free(l->cond);
            l->cond = NULL;
            l->i++;
        } else if (l->waiting == WAIT_CHILD) {
            l->i++;
        }
        l->waiting = WAIT_NONE;
        if (l->i >= l->count || w->failed)
            return NULL;
        w->nodes++;
        if (w->drv->cuGraphNodeGetType(l->nodes[l->i], &l->types[l->i]) != CUDA_SUCCESS) {
            w->failed = 1;
            return NULL;
        }
        if (l->types[l->i] == CU_GRAPH_NODE_TYPE_KERNEL) {
            walk_kernel(w, l);
        } else if (l->types[l->i] == CU_GRAPH_NODE_TYPE_GRAPH) {
            CUgraph child = NULL;
            unit_t *u = &l->units[l->nunits];

            if (w->drv->cuGraphChildGraphNodeGetGraph == NULL ||
                w->drv->cuGraphChildGraphNodeGetGraph(l->nodes[l->i], &child) != CUDA_SUCCESS) {
                w->failed = 1;
                return NULL;
            }
            u->node = l->i;
            u->kind = UNIT_CHILD;
            l->waiting = WAIT_CHILD;
            return child;
        } else if (l->types[l->i] == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            int nomem = 0;

            l->cond = bodies_of(l->nodes[l->i], &nomem);
            l->body = 0;
            if (nomem)
                out_of_memory(w);
            if (l->cond != NULL)
                continue; /* its bodies, one by one */
        }
        l->i++;
    }
}

static void units_free(unit_t *units, size_t n)
{
    size_t i;

    for (i = 0; units != NULL && i < n; i++)
        draws_free(&units[i].draws);
    free(units);
}

static void level_free(level_t *l)
{
    units_free(l->units, l->nunits);
    free(l->types);
    free(l->nodes);
    free(l->cond);
    draws_free(&l->fills);
    draws_free(&l->result);
    memset(l, 0, sizeof(*l));
}

/* Reads graph g's nodes into a new level. 0 when that failed. */
static int level_open(walk_t *w, level_t *l, CUgraph g, plan_t *plan)
{
    size_t count = 0;

    memset(l, 0, sizeof(*l));
    l->g = g;
    l->plan = plan;
    w->graphs++;
    if (w->drv->cuGraphGetNodes(g, NULL, &count) != CUDA_SUCCESS) {
        w->failed = 1;
        return 0;
    }
    l->nodes = calloc_n(count, 1, sizeof(*l->nodes));
    l->types = calloc_n(count, 1, sizeof(*l->types));
    l->units = calloc_n(count, 1, sizeof(*l->units));
    if (l->nodes == NULL || l->types == NULL || l->units == NULL) {
        out_of_memory(w);
        return 0;
    }
    /* (an empty graph: the real driver refuses arrays with a count of 0) */
    if (count > 0 && w->drv->cuGraphGetNodes(g, l->nodes, &count) != CUDA_SUCCESS) {
        w->failed = 1;
        return 0;
    }
    l->count = count;
    return 1;
}

/* What the units of a level draw, one (slot, unit) pair per draw, sorted by slot. */
typedef struct {
    uint64_t slot;
    size_t pos, unit; /* the unit's node's topological position (once known), the unit */
} use_t;

static int use_cmp(const void *a, const void *b)
{
    const use_t *x = a, *y = b;

    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static const char *unit_name(const unit_t *u)
{
    return u->kind == UNIT_CHILD ? "a child graph node" : "captured work";
}

static void refuse_unordered(walk_t *w, const unit_t *a, const unit_t *b)
{
    refuse(w, "graph %p: two parts of it draw from the same generator without an order between "
           "them (%s and %s), so they would draw the same numbers. Make one depend on the other "
           "(a child graph node after the captured work's last node, or between the child graph "
           "nodes)", (void *)w->top, unit_name(a), unit_name(b));
}

/* Whether every kernel node of the level runs after node c (it runs before all captured work). */
static int before_all_kernels(recap__order_t *o, size_t c, const size_t *kernels, size_t nkernels)
{
    size_t k;

    recap__order_mark(o, c, 0);
    for (k = 0; k < nkernels; k++)
        if (!recap__order_marked(o, kernels[k]))
            return 0;
    o->steps += nkernels;
    return 1;
}

/*
 * The units of one level drawing from one generator (uses[0 .. n), in topological order) must run
 * one entirely before the other. A child graph node is one step; an advance node stands for the
 * captured work of its level, which runs before it: a child is ordered with it when it runs after
 * the advance node, or before every kernel node of the level. Two advance nodes of one generator
 * on one level are never taken as ordered (their kernels cannot be told apart).
 *
 * Children in topological order are all ordered exactly when each reaches the next, and each of
 * those walks stays between the two: one walk of the level in all. Children after the advance
 * node are a suffix of that chain; of the others only the last must run before all kernels.
 */
static void check_slot(walk_t *w, const unit_t *units, const use_t *uses, size_t n,
                       recap__order_t *o, const size_t *kernels, size_t nkernels)
{
    const unit_t *adv = NULL, *last = NULL, *before = NULL;
    size_t i;

    for (i = 0; i < n; i++) {
        const unit_t *u = &units[uses[i].unit];

        if (u->kind == UNIT_ADVANCE) {
            if (adv != NULL)
                refuse_unordered(w, adv, u);
            adv = u;
            continue;
        }
        if (last != NULL && !recap__order_reaches(o, last->node, u->node))
            refuse_unordered(w, last, u);
        last = u;
    }
    if (adv == NULL || w->why[0] != '\0')
        return;
    recap__order_mark(o, adv->node, 0);
    for (i = 0; i < n; i++)
        if (units[uses[i].unit].kind == UNIT_CHILD && !recap__order_marked(o, units[uses[i].unit].node))
            before = &units[uses[i].unit];
    if (before != NULL && !before_all_kernels(o, before->node, kernels, nkernels))
        refuse_unordered(w, before, adv);
}

/* The fills of a level need their advance node there too. */
static void check_fills(walk_t *w, const level_t *l)
{
    draws_t adv = {0};
    size_t i;

    for (i = 0; i < l->nunits; i++)
        if (l->units[i].kind == UNIT_ADVANCE && !draws_merge(&adv, &l->units[i].draws))
            out_of_memory(w);
    for (i = 0; i < l->fills.n && !w->failed; i++)
        if (!draws_has(&adv, l->fills.d[i].slot))
            refuse(w, "graph %p holds recap kernel nodes that draw from a generator (slot %#llx) "
                   "without the advance node of the graph they were copied from: launches would "
                   "reuse numbers. Add the captured graph as a child graph node instead of "
                   "copying its kernel nodes", (void *)w->top,
                   (unsigned long long)l->fills.d[i].slot);
    draws_free(&adv);
}

/* The units of level l that share a generator must be ordered; the top level's plan keeps the
 * level's order for later child graph node updates. */
static void check_level(walk_t *w, level_t *l)
{
    size_t *from = NULL, *to = NULL, *kernels = NULL, nedges = 0, nuses = 0, nkernels = 0, i, j;
    CUgraphNode *sorted = NULL;
    recap__order_t order;
    use_t *uses = NULL;
    int shared = 0, children = 0, rc;

    memset(&order, 0, sizeof(order));
    check_fills(w, l);
    for (i = 0; i < l->nunits; i++) {
        nuses += l->units[i].draws.n;
        children |= l->units[i].kind == UNIT_CHILD;
    }
    if (nuses > 0 && (uses = calloc_n(nuses, 0, sizeof(*uses))) == NULL) {
        out_of_memory(w);
        return;
    }
    for (i = 0, nuses = 0; i < l->nunits; i++)
        for (j = 0; j < l->units[i].draws.n; j++) {
            uses[nuses].slot = l->units[i].draws.d[j].slot;
            uses[nuses++].unit = i;
        }
    if (nuses > 1)
        qsort(uses, nuses, sizeof(*uses), use_cmp);
    for (i = 1; i < nuses && !shared; i++)
        shared = uses[i].slot == uses[i - 1].slot;
    w->steps += nuses;
    /* The edges are read only where a generator is shared, or the exec keeps the order. */
    if (!shared && (l->plan == NULL || !children))
        goto out;
    if ((sorted = sorted_of(l->nodes, l->count)) == NULL ||
        (kernels = calloc_n(l->count, 1, sizeof(*kernels))) == NULL) {
        out_of_memory(w);
        goto out;
    }
    if (!edges_of(w, l->g, l->nodes, sorted, l->count, &from, &to, &nedges)) {
        if (!w->nomem)
            refuse(w, "graph %p: parts of it draw from one generator and recap cannot read the "
                   "graph's edges to check that they run one after the other", (void *)w->top);
        goto out;
    }
    rc = recap__order_init(&order, l->count, from, to, nedges);
    if (rc == 0) {
        out_of_memory(w);
        goto out;
    }
    if (rc < 0) {
        refuse(w, "graph %p: its edges make a cycle, so no order of its parts exists",
               (void *)w->top);
        goto out;
    }
    for (i = 0; i < l->count; i++)
        if (l->types[i] == CU_GRAPH_NODE_TYPE_KERNEL)
            kernels[nkernels++] = i;
    for (i = 0; i < nuses; i++)
        uses[i].pos = order.pos[l->units[uses[i].unit].node];
    for (i = 0; i < nuses; i = j) { /* each generator's units, in topological order */
        for (j = i + 1; j < nuses && uses[j].slot == uses[i].slot; j++)
            ;
        if (j - i > 1) {
            qsort(uses + i, j - i, sizeof(*uses), use_cmp);
            check_slot(w, l->units, uses + i, j - i, &order, kernels, nkernels);
        }
    }
    w->steps += order.steps + l->count + nedges;
    if (l->plan != NULL) { /* the plan takes the level's order and parts */
        plan_t *p = l->plan;

        p->count = l->count;
        p->sorted = sorted;
        p->order = order;
        p->kernels = kernels;
        p->nkernels = nkernels;
        sorted = NULL;
        kernels = NULL;
        memset(&order, 0, sizeof(order));
    }
out:
    recap__order_free(&order);
    free(uses);
    free(kernels);
    free(sorted);
    free(from);
    free(to);
}

/* Level l is walked: checked, and what it draws summed into l->result. */
static void level_close(walk_t *w, level_t *l)
{
    plan_t *p = l->plan;
    size_t i;

    if (!w->failed)
        check_level(w, l);
    for (i = 0; i < l->nunits && !w->failed; i++)
        if (!draws_merge(&l->result, &l->units[i].draws))
            out_of_memory(w);
    if (p == NULL || w->failed)
        return;
    p->unit_of = calloc_n(l->count, 1, sizeof(size_t));
    if (p->unit_of == NULL) {
        out_of_memory(w);
        return;
    }
    for (i = 0; i < l->nunits; i++) {
        p->unit_of[l->units[i].node] = i + 1;
        p->nchildren += l->units[i].kind == UNIT_CHILD;
    }
    p->units = l->units; /* the plan keeps the parts and what each draws */
    p->nunits = l->nunits;
    l->units = NULL;
    l->nunits = 0;
}

/* The level below l (waited for) is done and drew `below`: it counts as l's unit or body. */
static void level_resume(walk_t *w, level_t *l, draws_t *below)
{
    if (l->waiting == WAIT_CHILD) {
        unit_t *u = &l->units[l->nunits];

        u->draws = *below;
        memset(below, 0, sizeof(*below));
        if (u->draws.n > 0 || l->plan != NULL)
            l->nunits++; /* the top level keeps every child: it may be updated to draw */
        else
            draws_free(&u->draws);
    } else if (l->waiting == WAIT_BODY) {
        if (below->n > 0) {
            refuse(w, "graph %p: the body of a conditional node (IF/WHILE/SWITCH) draws random "
                   "numbers; recap reserves a graph's offsets on the host at launch and cannot "
                   "know how often the body runs, so launches could not equal eager runs. Draw "
                   "outside the conditional body", (void *)w->top);
            if (!draws_merge(&l->result, below))
                out_of_memory(w);
        }
        draws_free(below);
        l->body++;
    }
}

/* Walks graph g, child graphs and conditional bodies to any depth: adds to *out what one run of
 * it draws, per slot. With `plan` (the top level), keeps its order and parts for later child
 * updates. Returns 0 when a driver call failed or memory ran out. */
static int walk(walk_t *w, CUgraph g, draws_t *out, plan_t *plan)
{
    recap__ptrmap_t path = {0}; /* the graphs of the stack: one that holds itself is refused */
    level_t *stack = NULL;
    size_t depth = 0, cap = 0;
    CUgraph next = g;
    int nomem = 0;

    while (!w->failed) {
        level_t *l;

        if (next != NULL && recap__ptrmap_get(&path, next) != NULL) {
            /* only conditional bodies reported wrongly can do that: the driver copies children */
            refuse(w, "graph %p holds itself (graph %p is reported as a conditional body inside "
                   "itself): what it draws has no bound", (void *)w->top, (void *)next);
            next = NULL;
            level_resume(w, &stack[depth - 1], &(draws_t){0});
            continue;
        }
        if (next != NULL && (recap__ptrmap_put(&path, next, next, &nomem), nomem)) {
            out_of_memory(w);
            break;
        }
        if (next != NULL) { /* one level down */
            if (depth == cap) {
                size_t ncap = cap ? 2 * cap : 16;
                level_t *s = ncap <= SIZE_MAX / sizeof(*s) ? realloc(stack, ncap * sizeof(*s)) : NULL;
                if (s == NULL) {
                    out_of_memory(w);
                    break;
                }
                stack = s;
                cap = ncap;
            }
            l = &stack[depth];
            if (!level_open(w, l, next, depth++ == 0 ? plan : NULL))
                break;
        }
        l = &stack[depth - 1];
        if ((next = level_step(w, l)) != NULL || w->failed)
            continue;
        level_close(w, l); /* done: its draws go up */
        if (depth == 1) {
            if (!w->failed && !draws_merge(out, &l->result))
                out_of_memory(w);
            break;
        }
        level_resume(w, &stack[depth - 2], &l->result);
        recap__ptrmap_del(&path, l->g);
        level_free(l);
        depth--;
    }
    while (depth > 0)
        level_free(&stack[--depth]);
    free(stack);
    recap__ptrmap_free(&path);
    return !w->failed;
}

static void plan_free(plan_t *p)
{
    if (p == NULL)
        return;
    units_free(p->units, p->nunits);
    free(p->unit_of);
    free(p->sorted);
    free(p->kernels);
    recap__order_free(&p->order);
    draws_free(&p->total);
    free(p);
}

/* The record of `draws`: each slot's generator state and increment (NULL when nothing is drawn).
 * A slot that belongs to no live state is left out, with *st saying so. */
static recap__rng_record_t *record_of(const draws_t *draws, const void *handle, recap_status_t *st)
{
    recap__genstate_t **gs = calloc(draws->n + 1, sizeof(*gs));
    recap__rng_record_t *rec = NULL;
    size_t i, n = 0;

    *st = RECAP_OK;
    if (gs == NULL) {
        *st = recap__fail(RECAP_ERR_NO_MEMORY, "graph RNG record");
        return NULL;
    }
    for (i = 0; i < draws->n; i++) {
        if (draws->d[i].inc == 0)
            continue;
        gs[i] = recap__slots_state_of(draws->d[i].slot);
        if (gs[i] == NULL)
            *st = recap__fail(RECAP_ERR_UNSUPPORTED, "graph %p draws from a generator state "
                              "that no longer exists (slot %#llx): that part of its launches "
                              "cannot be advanced", handle,
                              (unsigned long long)draws->d[i].slot);
        else
            n++;
    }
    if (n > 0) {
        for (i = 0; i < draws->n && gs[i] == NULL; i++)
            ;
        rec = recap__record_new(gs[i]->device, n);
        if (rec == NULL)
            *st = recap__fail(RECAP_ERR_NO_MEMORY, "graph RNG record");
    }
    for (i = 0, n = 0; i < draws->n; i++) {
        if (gs[i] == NULL)
            continue;
        if (rec != NULL)
            recap__record_set(rec, n++, gs[i], draws->d[i].inc);
        recap__genstate_unref(gs[i]); /* the record holds its own reference */
    }
    free(gs);
    return rec;
}

/* Walks `graph` for exec `exec`; *plan_p gets the plan (NULL when the driver cannot walk). */
static recap_status_t plan_graph(CUgraph graph, CUgraphExec exec, plan_t **plan_p)
{
    const recap__driver_t *drv;
    plan_t *plan;
    walk_t w;

    *plan_p = NULL;
    if (recap__driver_get(&drv) != RECAP_OK || drv->cuGraphGetNodes == NULL ||
        drv->cuGraphNodeGetType == NULL || drv->cuGraphKernelNodeGetParams == NULL)
        return RECAP_OK;
    plan = calloc(1, sizeof(*plan));
    if (plan == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "graph plan");
    memset(&w, 0, sizeof(w));
    w.drv = drv;
    w.top = graph;
    if (!walk(&w, graph, &plan->total, plan)) {
        plan_free(plan);
        if (w.nomem)
            return recap__fail(RECAP_ERR_NO_MEMORY, "walking graph %p", (void *)graph);
        recap__log(RECAP_LOG_DEBUG, "graph %p: cannot walk it; using its capture record", graph);
        return RECAP_OK;
    }
    /* the cost of the walk, which tests read: linear in what it walked */
    recap__log(RECAP_LOG_DEBUG, "graph %p: walked %zu graphs, %zu nodes, %zu edges in %zu steps",
               (void *)graph, w.graphs, w.nodes, w.edges, w.steps + w.nodes);
    if (w.why[0] == '\0' && plan->total.n > 0 && exec != NULL && drv->cuGraphExecGetFlags != NULL) {
        cuuint64_t flags = 0;
        if (drv->cuGraphExecGetFlags(exec, &flags) == CUDA_SUCCESS &&
            (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
            refuse(&w, "exec %p of graph %p was instantiated for device-side launch and draws "
                   "random numbers: launches made from the device are invisible to the host, "
                   "which reserves each launch's offsets, so they would reuse numbers. "
                   "Instantiate it without cudaGraphInstantiateFlagDeviceLaunch, or draw outside "
                   "it", (void *)exec, (void *)graph);
    }
    snprintf(plan->refused, sizeof(plan->refused), "%s", w.why);
    *plan_p = plan;
    return RECAP_OK;
}

/* Installs plan's record for exec and keeps the plan when SetParams may need it. */
static recap_status_t install(CUgraphExec exec, plan_t *plan)
{
    recap__rng_record_t *rec;
    recap_status_t st, rst;
    int failed = 0;
    plan_t *old;

    rec = record_of(&plan->total, exec, &rst);
    st = recap__exec_record_set(exec, rec);
    if (st == RECAP_OK && rst != RECAP_OK)
        st = rst;
    pthread_mutex_lock(&compose_lock);
    old = recap__ptrmap_del(&plans, exec);
    if (plan->nchildren > 0 || plan->refused[0] != '\0')
        recap__ptrmap_put(&plans, exec, plan, &failed);
    else
        failed = 1; /* nothing to keep */
    pthread_mutex_unlock(&compose_lock);
    plan_free(old);
    if (failed)
        plan_free(plan);
    return st;
}

static recap_status_t refused(const char *why)
{
    recap__log(RECAP_LOG_WARN, "%s", why);
    return recap__fail(RECAP_ERR_UNSUPPORTED, "%s", why);
}

recap_status_t recap__compose_instantiated(CUgraph graph, CUgraphExec exec, int *done_p)
{
    recap_status_t st;
    plan_t *plan;
    char why[sizeof(plan->refused)];

    *done_p = 0;
    st = plan_graph(graph, exec, &plan);
    if (st != RECAP_OK || plan == NULL)
        return st;
    *done_p = 1;
    snprintf(why, sizeof(why), "%s", plan->refused);
    st = install(exec, plan);
    return why[0] != '\0' ? refused(why) : st;
}

void recap__compose_exec_forget(CUgraphExec exec)
{
    plan_t *p;

    pthread_mutex_lock(&compose_lock);
    p = recap__ptrmap_del(&plans, exec);
    pthread_mutex_unlock(&compose_lock);
    plan_free(p);
}

recap_status_t recap_graph_exec_updated(recap_graph_exec_t exec, recap_graph_t graph)
{
    recap_status_t st;
    plan_t *plan;
    char why[sizeof(plan->refused)];

    RECAP_CHECK_ARG(exec != NULL && graph != NULL, "NULL exec or graph");
    st = recap__events_check_caller("recap_graph_exec_updated");
    if (st != RECAP_OK)
        return st;
    st = plan_graph((CUgraph)graph, (CUgraphExec)exec, &plan);
    if (st != RECAP_OK)
        return st;
    if (plan == NULL) /* no walk: the update's graph is what its capture drew */
        return recap__exec_record_from_graph(exec, graph);
    snprintf(why, sizeof(why), "%s", plan->refused);
    st = install((CUgraphExec)exec, plan);
    return why[0] != '\0' ? refused(why) : st;
}

/* Child c of plan p now draws `now`: every other part drawing from one of those generators must
 * be ordered with it, by what each draws now (after its own updates). Two walks of the top
 * level: what runs before c and what runs after it. 1 when one is not, -1 out of memory. */
static int check_changed(plan_t *p, const unit_t *c, const draws_t *now)
{
    unsigned char *side = calloc_n(p->nunits, 1, 1); /* 1: runs before c, 2: after it */
    int all_after = 0, unordered = 0;
    size_t i;

    if (side == NULL)
        return -1;
    recap__order_mark(&p->order, c->node, 1);
    for (i = 0; i < p->nunits; i++)
        side[i] |= recap__order_marked(&p->order, p->units[i].node);
    recap__order_mark(&p->order, c->node, 0);
    for (i = 0; i < p->nunits; i++)
        side[i] |= recap__order_marked(&p->order, p->units[i].node) << 1;
    for (i = 0; i < p->nunits; i++) {
        const unit_t *u = &p->units[i];

        if (u == c || !draws_share(now, &u->draws))
            continue;
        if (u->kind == UNIT_ADVANCE && !(side[i] & 1) && !all_after)
            all_after = before_all_kernels(&p->order, c->node, p->kernels, p->nkernels) ? 1 : -1;
        if (u->kind == UNIT_CHILD ? side[i] == 0 : !(side[i] & 1) && all_after != 1)
            unordered = 1;
    }
    free(side);
    return unordered;
}

recap_status_t recap_graph_exec_child_updated(recap_graph_exec_t exec, recap_graph_node_t node,
                                              recap_graph_t child)
{
    const recap__driver_t *drv;
    draws_t now = {0};
    recap__rng_record_t *rec = NULL;
    recap_status_t st, rst = RECAP_OK;
    unit_t *c = NULL;
    plan_t *p;
    walk_t w;
    long at = -1;
    int unordered;
    size_t i;

    RECAP_CHECK_ARG(exec != NULL && node != NULL && child != NULL, "NULL exec, node or child");
    st = recap__events_check_caller("recap_graph_exec_child_updated");
    if (st != RECAP_OK)
        return st;
    if (recap__driver_get(&drv) != RECAP_OK || drv->cuGraphGetNodes == NULL ||
        drv->cuGraphNodeGetType == NULL || drv->cuGraphKernelNodeGetParams == NULL)
        return recap__fail(RECAP_ERR_UNSUPPORTED, "the driver cannot list a graph's nodes");
    memset(&w, 0, sizeof(w));
    w.drv = drv;
    w.top = child;
    if (!walk(&w, (CUgraph)child, &now, NULL)) {
        draws_free(&now);
        if (w.nomem)
            return recap__fail(RECAP_ERR_NO_MEMORY, "walking graph %p", child);
        return recap__fail(RECAP_ERR_CUDA, "graph %p: cannot list its nodes", child);
    }
    pthread_mutex_lock(&compose_lock);
    p = recap__ptrmap_get(&plans, exec);
    if (p != NULL && p->sorted != NULL)
        at = index_of(p->sorted, p->count, (CUgraphNode)node);
    if (at >= 0 && p->unit_of[at] > 0 && p->units[p->unit_of[at] - 1].kind == UNIT_CHILD)
        c = &p->units[p->unit_of[at] - 1];
    if (c == NULL && now.n > 0)
        refuse(&w, "exec %p: child graph node %p now runs graph %p, which draws random numbers, "
               "but recap did not see the node at instantiate: re-instantiate the exec",
               exec, node, child);
    if (c != NULL && now.n > 0 && (unordered = check_changed(p, c, &now)) != 0)
        refuse(&w, "exec %p: child graph node %p now draws from a generator that another part of "
               "the graph, not ordered with it, also draws from: they would draw the same "
               "numbers%s", exec, node, unordered < 0 ? " (or memory ran out checking it)" : "");
    if (c != NULL) { /* total = total - old + now */
        for (i = 0; i < c->draws.n; i++)
            draws_add(&p->total, c->draws.d[i].slot, (uint64_t)0 - c->draws.d[i].inc);
        if (!draws_merge(&p->total, &now))
            rst = recap__fail(RECAP_ERR_NO_MEMORY, "graph RNG record");
        draws_free(&c->draws);
        c->draws = now;
        memset(&now, 0, sizeof(now));
        if (rst == RECAP_OK)
            rec = record_of(&p->total, exec, &rst);
    }
    if (w.why[0] != '\0' && p != NULL)
        snprintf(p->refused, sizeof(p->refused), "%s", w.why);
    pthread_mutex_unlock(&compose_lock);
    draws_free(&now);
    if (c != NULL) {
        st = recap__exec_record_set(exec, rec);
        if (st == RECAP_OK)
            st = rst;
    }
    return w.why[0] != '\0' ? refused(w.why) : st;
}

/* ------------------------------------------------------------------ ordering across streams */

/*
 * Launches that draw from one generator read and advance its one device slot, so they must not
 * overlap. On one stream they cannot. When a launch comes on another stream than the state's
 * last launch, recap orders it after that launch: it waits on the event recorded after the last
 * launch (recorded only for states that have moved between streams: nothing in steady state on
 * one stream), or, the first time (no event yet) and where the driver has no events, it waits
 * for the device. Either way the launch is exact.
 */
__thread int recap__launch_needs_events __attribute__((tls_model("initial-exec")));

recap_status_t recap__compose_order(recap__genstate_t *gs, CUstream stream)
{
    const recap__driver_t *drv;
    const recap__device_t *dev;
    recap_status_t st;
    CUresult rc = CUDA_SUCCESS;
    int pushed;

    st = recap__device_enter(gs->device, &dev, &drv, &pushed);
    if (st != RECAP_OK)
        return st;
    if (__atomic_load_n(&gs->event_valid, __ATOMIC_ACQUIRE) && drv->cuStreamWaitEvent != NULL) {
        rc = drv->cuStreamWaitEvent(stream, (CUevent)__atomic_load_n(&gs->launch_event,
                                                                     __ATOMIC_ACQUIRE), 0);
    } else if (drv->cuCtxSynchronize != NULL) {
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        if (drv->has_graphs)
            drv->cuThreadExchangeStreamCaptureMode(&mode);
        rc = drv->cuCtxSynchronize();
        if (drv->has_graphs)
            drv->cuThreadExchangeStreamCaptureMode(&mode);
        if (!__atomic_load_n(&gs->multi_stream, __ATOMIC_RELAXED))
            recap__log(RECAP_LOG_INFO, "generator state %p: graph launches on streams %p and %p; "
                       "ordered by recap from now on", (void *)gs,
                       __atomic_load_n(&gs->launch_stream, __ATOMIC_RELAXED), (void *)stream);
    }
    recap__ctx_leave(pushed);
    __atomic_store_n(&gs->multi_stream, 1, __ATOMIC_RELAXED);
    return rc == CUDA_SUCCESS ? RECAP_OK
                              : recap__cuda_fail(rc, "ordering a graph launch after the last one "
                                                     "on another stream");
}

recap_status_t recap__compose_record_after(recap__genstate_t *gs, CUstream stream)
{
    const recap__driver_t *drv;
    const recap__device_t *dev;
    recap_status_t st;
    CUresult rc;
    int pushed;

    recap__driver_get(&drv);
    if (drv->cuEventCreate == NULL || drv->cuEventRecord == NULL || drv->cuStreamWaitEvent == NULL)
        return RECAP_OK; /* the next switch waits for the device instead */
    st = recap__device_enter(gs->device, &dev, &drv, &pushed);
    if (st != RECAP_OK)
        return st;
    rc = CUDA_SUCCESS;
    recap__lock(&gs->slot_lock); /* one event per state, created once */
    if (gs->launch_event == NULL) {
        CUevent ev = NULL;
        rc = drv->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
        __atomic_store_n(&gs->launch_event, (void *)ev, __ATOMIC_RELEASE);
    }
    if (rc == CUDA_SUCCESS)
        rc = drv->cuEventRecord((CUevent)gs->launch_event, stream);
    recap__unlock(&gs->slot_lock);
    recap__ctx_leave(pushed);
    __atomic_store_n(&gs->event_valid, rc == CUDA_SUCCESS, __ATOMIC_RELEASE);
    return rc == CUDA_SUCCESS ? RECAP_OK : recap__cuda_fail(rc, "recording a graph launch's event");
}

void recap__compose_state_gone(recap__genstate_t *gs)
{
    const recap__driver_t *drv;

    if (gs->launch_event != NULL && recap__driver_get(&drv) == RECAP_OK &&
        drv->cuEventDestroy != NULL)
        drv->cuEventDestroy((CUevent)gs->launch_event);
    gs->launch_event = NULL;
}
