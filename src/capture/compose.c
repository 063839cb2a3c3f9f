/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atfork.h"
#include "base/error.h"
#include "base/lock.h"
#include "base/log.h"
#include "base/ptrmap.h"
#include "capture/capture.h"
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
        draw_t *d = realloc(ds->d, cap * sizeof(*d));
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
    b = malloc(sizeof(*b) + nbodies * sizeof(CUgraph));
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

/* A copy of the bodies of conditional node `node` (NULL when unknown); the caller frees it. */
static bodies_t *bodies_of(CUgraphNode node)
{
    bodies_t *b, *copy = NULL;

    pthread_mutex_lock(&compose_lock);
    b = recap__ptrmap_get(&conditionals, node);
    if (b != NULL && (copy = malloc(sizeof(*b) + b->n * sizeof(CUgraph))) != NULL)
        memcpy(copy, b, sizeof(*b) + b->n * sizeof(CUgraph));
    pthread_mutex_unlock(&compose_lock);
    return copy;
}

/* ------------------------------------------------------------------ the walk */

/* What an exec keeps for cuGraphExecChildGraphNodeSetParams: per top-level child graph node,
 * what it draws and what the parts of the graph it is not ordered with draw. */
typedef struct {
    CUgraphNode node;
    draws_t draws;
    draws_t unordered; /* what the captured work not ordered with it draws */
    size_t *sibs, nsibs; /* the child nodes not ordered with it (indices in the plan): their
                          * draws are read when it changes, as they may have changed too */
} child_t;

typedef struct {
    size_t n;
    child_t *c;
    draws_t total;
    char refused[320]; /* why this exec is refused ("" when it is exact) */
} plan_t;

typedef struct {
    const recap__driver_t *drv;
    CUgraph top;
    char why[320];
    int failed; /* a driver call failed: the walk says nothing */
} walk_t;

enum unit_kind { UNIT_ADVANCE, UNIT_CHILD };

typedef struct {
    size_t node; /* index into the level's nodes */
    enum unit_kind kind;
    draws_t draws;
} unit_t;

#define MAX_DEPTH 32

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

static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const CUgraphNode *)a)[0], y = (uintptr_t)((const CUgraphNode *)b)[0];

    return x < y ? -1 : x > y;
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

/* The graph's edges as index pairs (*from, *to), *nedges of them. 0 on failure. */
static int edges_of(walk_t *w, CUgraph g, CUgraphNode *nodes, size_t count, size_t **from_p,
                    size_t **to_p, size_t *nedges_p)
{
    CUgraphNode *from = NULL, *to = NULL, *sorted = NULL;
    CUgraphEdgeData *data = NULL;
    size_t n = 0, i, k = 0;
    CUresult rc;
    int ok = 0;

    if (w->drv->cuGraphGetEdges != NULL)
        rc = w->drv->cuGraphGetEdges(g, NULL, NULL, NULL, &n);
    else if (w->drv->cuGraphGetEdges_v1 != NULL)
        rc = w->drv->cuGraphGetEdges_v1(g, NULL, NULL, &n);
    else
        rc = CUDA_ERROR_NOT_SUPPORTED;
    if (rc != CUDA_SUCCESS)
        return 0;
    if (n == 0) { /* the real driver refuses arrays with a count of 0 (CUDA_ERROR_INVALID_VALUE) */
        *from_p = calloc(1, sizeof(size_t));
        *to_p = calloc(1, sizeof(size_t));
        *nedges_p = 0;
        if (*from_p != NULL && *to_p != NULL)
            return 1;
        free(*from_p);
        free(*to_p);
        *from_p = *to_p = NULL;
        return 0;
    }
    from = calloc(n + 1, sizeof(*from));
    to = calloc(n + 1, sizeof(*to));
    data = calloc(n + 1, sizeof(*data));
    sorted = calloc(2 * count + 1, sizeof(*sorted));
    *from_p = calloc(n + 1, sizeof(size_t));
    *to_p = calloc(n + 1, sizeof(size_t));
    if (from == NULL || to == NULL || data == NULL || sorted == NULL || *from_p == NULL ||
        *to_p == NULL)
        goto out;
    if (w->drv->cuGraphGetEdges != NULL)
        rc = w->drv->cuGraphGetEdges(g, from, to, data, &n);
    else
        rc = w->drv->cuGraphGetEdges_v1(g, from, to, &n);
    if (rc != CUDA_SUCCESS)
        goto out;
    for (i = 0; i < count; i++) {
        sorted[2 * i] = nodes[i];
        sorted[2 * i + 1] = (CUgraphNode)(uintptr_t)i;
    }
    qsort(sorted, count, 2 * sizeof(*sorted), ptr_cmp);
    for (i = 0; i < n; i++) {
        long a = index_of(sorted, count, from[i]), b = index_of(sorted, count, to[i]);
        if (a >= 0 && b >= 0) {
            (*from_p)[k] = (size_t)a;
            (*to_p)[k] = (size_t)b;
            k++;
        }
    }
    *nedges_p = k;
    ok = 1;
out:
    free(from);
    free(to);
    free(data);
    free(sorted);
    if (!ok) {
        free(*from_p);
        free(*to_p);
        *from_p = *to_p = NULL;
    }
    return ok;
}

/* reach[u * count + x]: node x runs after unit u's node (a path of edges from it). */
static unsigned char *reachability(const unit_t *units, size_t nunits, size_t count,
                                   const size_t *from, const size_t *to, size_t nedges)
{
    unsigned char *reach = calloc(nunits * count + 1, 1);
    size_t *queue = malloc((count + 1) * sizeof(size_t));
    size_t *first = calloc(count + 2, sizeof(size_t)), *adj = malloc((nedges + 1) * sizeof(size_t));
    size_t u, e, x;

    if (reach == NULL || queue == NULL || first == NULL || adj == NULL) {
        free(reach);
        reach = NULL;
        goto out;
    }
    for (e = 0; e < nedges; e++) /* successors of x: adj[first[x] .. first[x + 1]) */
        first[from[e] + 2]++;
    for (x = 0; x < count; x++)
        first[x + 2] += first[x + 1];
    for (e = 0; e < nedges; e++)
        adj[first[from[e] + 1]++] = to[e];
    for (u = 0; u < nunits; u++) {
        unsigned char *r = reach + u * count;
        size_t head = 0, tail = 0;

        queue[tail++] = units[u].node;
        while (head < tail) {
            x = queue[head++];
            for (e = first[x]; e < first[x + 1]; e++)
                if (!r[adj[e]]) {
                    r[adj[e]] = 1;
                    queue[tail++] = adj[e];
                }
        }
    }
out:
    free(queue);
    free(first);
    free(adj);
    return reach;
}

/* Whether units a and b of one level run one entirely before the other. A child graph node is
 * one step; an advance node stands for the captured work of its level, which runs before it: a
 * child is ordered with it when it runs after the advance node, or before every kernel node of
 * the level. Two advance nodes of one generator on one level are never taken as ordered (their
 * kernels cannot be told apart). */
static int ordered(const unit_t *units, size_t a, size_t b, const unsigned char *reach,
                   const CUgraphNodeType *types, size_t count)
{
    size_t c, v, x;

    if (units[a].kind == UNIT_ADVANCE && units[b].kind == UNIT_ADVANCE)
        return 0;
    if (units[a].kind == UNIT_CHILD && units[b].kind == UNIT_CHILD)
        return reach[a * count + units[b].node] || reach[b * count + units[a].node];
    c = units[a].kind == UNIT_CHILD ? a : b; /* the child */
    v = c == a ? b : a;                      /* the advance node */
    if (reach[v * count + units[c].node])
        return 1;
    for (x = 0; x < count; x++)
        if (types[x] == CU_GRAPH_NODE_TYPE_KERNEL && !reach[c * count + x])
            return 0;
    return 1;
}

static int walk(walk_t *w, CUgraph g, int depth, draws_t *out, plan_t *plan);

/* A kernel node: recap's advance node becomes a unit; recap's captured fill kernels are noted so
 * a graph that holds them without their advance node is refused. */
static void walk_kernel(walk_t *w, CUgraphNode node, size_t i, unit_t *units, size_t *nunits,
                        draws_t *fills)
{
    CUDA_KERNEL_NODE_PARAMS p;
    int id;

    memset(&p, 0, sizeof(p));
    if (w->drv->cuGraphKernelNodeGetParams(node, &p) != CUDA_SUCCESS) {
        w->failed = 1;
        return;
    }
    id = recap__device_kernel_id(p.func);
    if (id < 0 || p.kernelParams == NULL || p.kernelParams[0] == NULL)
        return;
    if (id == RECAP_K_ADVANCE) {
        const recap__advance_params_t *ap = p.kernelParams[0];
        unit_t *u = &units[(*nunits)++];
        uint32_t k;

        u->node = i;
        u->kind = UNIT_ADVANCE;
        for (k = 0; k < ap->count && k < RECAP_SLOTS_PER_LAUNCH; k++)
            if (!draws_add(&u->draws, ap->slot[k], ap->inc[k]))
                w->failed = 1;
    } else if (id == RECAP_K_FILL_U32_CAPTURED || id == RECAP_K_FILL_F32_CAPTURED ||
               id == RECAP_K_FILL_F64_CAPTURED) {
        const recap__fill_params_t *fp = p.kernelParams[0];
        if (fp->philox.captured && !draws_add(fills, (uint64_t)(uintptr_t)fp->philox.seed_ptr, 0))
            w->failed = 1;
    }
}

/* A conditional node: its bodies must not draw. */
static void walk_conditional(walk_t *w, CUgraphNode node, int depth, draws_t *out)
{
    bodies_t *b = bodies_of(node);
    size_t i;

    if (b == NULL)
        return; /* not reported: recap cannot see inside (include/recap.h says so) */
    for (i = 0; i < b->n && !w->failed; i++) {
        draws_t body = {0};
        if (b->body[i] != NULL && walk(w, b->body[i], depth + 1, &body, NULL) && body.n > 0) {
            refuse(w, "graph %p: the body of a conditional node (IF/WHILE/SWITCH) draws random "
                   "numbers; recap reserves a graph's offsets on the host at launch and cannot "
                   "know how often the body runs, so launches could not equal eager runs. Draw "
                   "outside the conditional body", (void *)w->top);
            draws_merge(out, &body);
        }
        draws_free(&body);
    }
    free(b);
}

/* The units of one level that share a generator must be ordered; fills need their advance. */
static void check_level(walk_t *w, CUgraph g, unit_t *units, size_t nunits, const draws_t *fills,
                        const CUgraphNodeType *types, CUgraphNode *nodes, size_t count,
                        plan_t *plan)
{
    size_t *from = NULL, *to = NULL, *cidx = NULL, nedges = 0, a, b, i, nplan = 0;
    unsigned char *reach = NULL;
    int need = 0;

    for (i = 0; i < fills->n; i++) {
        int covered = 0;
        for (a = 0; a < nunits; a++)
            covered |= units[a].kind == UNIT_ADVANCE && draws_has(&units[a].draws, fills->d[i].slot);
        if (!covered)
            refuse(w, "graph %p holds recap kernel nodes that draw from a generator (slot %#llx) "
                   "without the advance node of the graph they were copied from: launches would "
                   "reuse numbers. Add the captured graph as a child graph node instead of "
                   "copying its kernel nodes", (void *)w->top,
                   (unsigned long long)fills->d[i].slot);
    }
    /* The edges are read only where a generator is shared, or child nodes need a plan. */
    for (a = 0; a < nunits && !need; a++) {
        need = plan != NULL && units[a].kind == UNIT_CHILD;
        for (b = a + 1; b < nunits && !need; b++)
            need = draws_share(&units[a].draws, &units[b].draws);
    }
    if (!need)
        return;
    if (!edges_of(w, g, nodes, count, &from, &to, &nedges) ||
        (reach = reachability(units, nunits, count, from, to, nedges)) == NULL) {
        refuse(w, "graph %p: parts of it draw from one generator and recap cannot read the "
               "graph's edges to check that they run one after the other", (void *)w->top);
        goto out;
    }
    if (plan != NULL) {
        cidx = calloc(nunits + 1, sizeof(*cidx)); /* unit -> its index in the plan */
        for (a = 0; cidx != NULL && a < nunits; a++)
            if (units[a].kind == UNIT_CHILD)
                cidx[a] = nplan++;
        plan->c = calloc(nplan + 1, sizeof(child_t));
        if (plan->c == NULL || cidx == NULL) {
            w->failed = 1;
            goto out;
        }
    }
    for (a = 0; a < nunits; a++) {
        child_t *c = NULL;

        if (plan != NULL && units[a].kind == UNIT_CHILD) {
            c = &plan->c[plan->n++];
            c->node = nodes[units[a].node];
            c->sibs = calloc(nunits, sizeof(*c->sibs));
            if (c->sibs == NULL || !draws_merge(&c->draws, &units[a].draws))
                w->failed = 1;
        }
        for (b = 0; b < nunits; b++) {
            if (b == a || ordered(units, a, b, reach, types, count))
                continue;
            if (c != NULL && c->sibs != NULL && units[b].kind == UNIT_CHILD)
                c->sibs[c->nsibs++] = cidx[b];
            else if (c != NULL && !draws_merge(&c->unordered, &units[b].draws))
                w->failed = 1;
            if (b > a && draws_share(&units[a].draws, &units[b].draws))
                refuse(w, "graph %p: two parts of it draw from the same generator without an "
                       "order between them (%s and %s), so they would draw the same numbers. "
                       "Make one depend on the other (a child graph node after the captured "
                       "work's last node, or between the child graph nodes)", (void *)w->top,
                       units[a].kind == UNIT_CHILD ? "a child graph node" : "captured work",
                       units[b].kind == UNIT_CHILD ? "a child graph node" : "captured work");
        }
    }
out:
    free(cidx);
    free(reach);
    free(from);
    free(to);
}

/* Walks graph g: adds to *out what one run of it draws, per slot. With `plan` (the top level),
 * records its child graph nodes for later SetParams. Returns 0 when a driver call failed. */
static int walk(walk_t *w, CUgraph g, int depth, draws_t *out, plan_t *plan)
{
    CUgraphNode *nodes = NULL;
    CUgraphNodeType *types = NULL;
    unit_t *units = NULL;
    draws_t fills = {0};
    size_t count = 0, nunits = 0, i;

    if (depth > MAX_DEPTH || w->drv->cuGraphGetNodes(g, NULL, &count) != CUDA_SUCCESS) {
        w->failed = 1;
        return 0;
    }
    nodes = calloc(count + 1, sizeof(*nodes));
    types = calloc(count + 1, sizeof(*types));
    units = calloc(count + 1, sizeof(*units));
    /* (an empty graph: the real driver refuses arrays with a count of 0) */
    if (nodes == NULL || types == NULL || units == NULL ||
        (count > 0 && w->drv->cuGraphGetNodes(g, nodes, &count) != CUDA_SUCCESS))
        w->failed = 1;
    for (i = 0; i < count && !w->failed; i++) {
        if (w->drv->cuGraphNodeGetType(nodes[i], &types[i]) != CUDA_SUCCESS) {
            w->failed = 1;
            break;
        }
        if (types[i] == CU_GRAPH_NODE_TYPE_KERNEL) {
            walk_kernel(w, nodes[i], i, units, &nunits, &fills);
        } else if (types[i] == CU_GRAPH_NODE_TYPE_GRAPH) {
            CUgraph child = NULL;
            unit_t *u = &units[nunits];

            if (w->drv->cuGraphChildGraphNodeGetGraph == NULL ||
                w->drv->cuGraphChildGraphNodeGetGraph(nodes[i], &child) != CUDA_SUCCESS) {
                w->failed = 1;
                break;
            }
            u->node = i;
            u->kind = UNIT_CHILD;
            walk(w, child, depth + 1, &u->draws, NULL);
            if (u->draws.n > 0 || plan != NULL)
                nunits++;
            else
                draws_free(&u->draws);
        } else if (types[i] == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            walk_conditional(w, nodes[i], depth, out);
        }
    }
    if (!w->failed)
        check_level(w, g, units, nunits, &fills, types, nodes, count, plan);
    for (i = 0; i < nunits; i++) {
        if (!draws_merge(out, &units[i].draws))
            w->failed = 1;
        draws_free(&units[i].draws);
    }
    draws_free(&fills);
    free(units);
    free(types);
    free(nodes);
    return !w->failed;
}

static void plan_free(plan_t *p)
{
    size_t i;

    if (p == NULL)
        return;
    for (i = 0; i < p->n; i++) {
        draws_free(&p->c[i].draws);
        draws_free(&p->c[i].unordered);
        free(p->c[i].sibs);
    }
    free(p->c);
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
    if (!walk(&w, graph, 0, &plan->total, plan)) {
        recap__log(RECAP_LOG_DEBUG, "graph %p: cannot walk it; using its capture record", graph);
        plan_free(plan);
        return RECAP_OK;
    }
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
    if (plan->n > 0 || plan->refused[0] != '\0')
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

/* Whether a child node not ordered with c draws from slot now (after its own updates). */
static int sibling_draws(const plan_t *p, const child_t *c, uint64_t slot)
{
    size_t i;

    for (i = 0; i < c->nsibs; i++)
        if (draws_has(&p->c[c->sibs[i]].draws, slot))
            return 1;
    return 0;
}

recap_status_t recap_graph_exec_child_updated(recap_graph_exec_t exec, recap_graph_node_t node,
                                              recap_graph_t child)
{
    const recap__driver_t *drv;
    draws_t now = {0};
    recap__rng_record_t *rec;
    recap_status_t st, rst;
    child_t *c = NULL;
    plan_t *p;
    walk_t w;
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
    if (!walk(&w, (CUgraph)child, 1, &now, NULL)) {
        draws_free(&now);
        return recap__fail(RECAP_ERR_CUDA, "graph %p: cannot list its nodes", child);
    }
    pthread_mutex_lock(&compose_lock);
    p = recap__ptrmap_get(&plans, exec);
    for (i = 0; p != NULL && i < p->n; i++)
        if (p->c[i].node == (CUgraphNode)node)
            c = &p->c[i];
    if (c == NULL && now.n > 0)
        refuse(&w, "exec %p: child graph node %p now runs graph %p, which draws random numbers, "
               "but recap did not see the node at instantiate: re-instantiate the exec",
               exec, node, child);
    for (i = 0; c != NULL && i < now.n; i++)
        if (draws_has(&c->unordered, now.d[i].slot) || sibling_draws(p, c, now.d[i].slot))
            refuse(&w, "exec %p: child graph node %p now draws from a generator that another part "
                   "of the graph, not ordered with it, also draws from: they would draw the same "
                   "numbers", exec, node);
    if (c != NULL) { /* total = total - old + now */
        for (i = 0; i < c->draws.n; i++)
            draws_add(&p->total, c->draws.d[i].slot, (uint64_t)0 - c->draws.d[i].inc);
        draws_merge(&p->total, &now);
        draws_free(&c->draws);
        c->draws = now;
        now.d = NULL;
        rec = record_of(&p->total, exec, &rst);
    } else {
        rec = NULL;
        rst = RECAP_OK;
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
