/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double: graph nodes and graphs as the double keeps them. */
#include "tests/double/double.h"

void op_free(op_t *op)
{
    if (op == NULL)
        return;
    double_op_free_bodies(op);
    free(op->params);
    free(op);
}

op_t *op_clone(const op_t *src)
{
    op_t *op = malloc(sizeof(*op));

    if (op == NULL)
        return NULL;
    *op = *src;
    op->params = NULL;
    op->owner = NULL; /* a copy is in no graph until one takes it (graph_take_ops_locked) */
    if (double_op_compound(src->kind)) {
        if (double_op_clone_bodies(op, src) != CUDA_SUCCESS) {
            free(op);
            return NULL;
        }
    } else if (src->kind == OP_KERNEL) {
        op->params = malloc(src->fn->params_size);
        if (op->params == NULL) {
            free(op);
            return NULL;
        }
        memcpy(op->params, src->params, src->fn->params_size);
    }
    return op;
}

/* A deep copy of a node list (NULL when out of memory; an empty list gives a 1-entry array). */
op_t **ops_clone(op_t *const *ops, size_t n)
{
    op_t **out = calloc(n > 0 ? n : 1, sizeof(*out));

    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        out[i] = op_clone(ops[i]);
        if (out[i] == NULL) {
            while (i-- > 0)
                op_free(out[i]);
            free(out);
            return NULL;
        }
    }
    return out;
}

/* Sets of live pointers (graphs, graph nodes): open addressing, so one is found in constant time
 * however many live (graphs of tens of thousands of child graph nodes embed as many graphs and
 * hold as many nodes). */
typedef struct {
    const void **slot;
    size_t cap, used; /* used: live entries and tombstones */
} ptrset_t;
#define TOMBSTONE ((const void *)1)

static ptrset_t live_graphs, live_nodes;

static size_t set_slot(const void *p, size_t cap)
{
    return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

static int set_add(ptrset_t *s, const void *p)
{
    size_t i;

    if (2 * (s->used + 1) > s->cap) {
        size_t cap = 256, nlive = 1, j;
        const void **n;

        for (j = 0; j < s->cap; j++)
            nlive += s->slot[j] != NULL && s->slot[j] != TOMBSTONE;
        while (cap < 4 * nlive) /* (tombstones are dropped: churn does not grow it) */
            cap *= 2;
        if ((n = calloc(cap, sizeof(*n))) == NULL)
            return 0;
        s->used = 0;
        for (j = 0; j < s->cap; j++)
            if (s->slot[j] != NULL && s->slot[j] != TOMBSTONE) {
                for (i = set_slot(s->slot[j], cap); n[i] != NULL; i = (i + 1) & (cap - 1))
                    ;
                n[i] = s->slot[j];
                s->used++;
            }
        free(s->slot);
        s->slot = n;
        s->cap = cap;
    }
    for (i = set_slot(p, s->cap); s->slot[i] != NULL && s->slot[i] != TOMBSTONE;
         i = (i + 1) & (s->cap - 1))
        ;
    s->used += s->slot[i] == NULL;
    s->slot[i] = p;
    return 1;
}

/* Where p is in s, or SIZE_MAX. */
static size_t set_find(const ptrset_t *s, const void *p)
{
    size_t i;

    if (s->cap == 0 || p == NULL || p == TOMBSTONE)
        return SIZE_MAX;
    for (i = set_slot(p, s->cap); s->slot[i] != NULL; i = (i + 1) & (s->cap - 1))
        if (s->slot[i] == p)
            return i;
    return SIZE_MAX;
}

static void set_del(ptrset_t *s, const void *p)
{
    size_t at = set_find(s, p);

    if (at != SIZE_MAX)
        s->slot[at] = TOMBSTONE;
}

double_graph_t *graph_new_locked(void)
{
    double_graph_t *g = calloc(1, sizeof(*g));

    if (g == NULL)
        return NULL;
    if (!set_add(&live_graphs, g)) {
        free(g);
        return NULL;
    }
    g->next = graphs;
    if (graphs != NULL)
        graphs->prevp = &g->next;
    g->prevp = &graphs;
    graphs = g;
    return g;
}

int graph_live_locked(CUgraph h)
{
    return set_find(&live_graphs, h) != SIZE_MAX;
}

/* Node h as a node of a live graph (its owner), or NULL: found without reading h, which may be
 * a node freed with its graph, or anything else. */
op_t *node_live_locked(CUgraphNode h)
{
    return set_find(&live_nodes, h) != SIZE_MAX ? (op_t *)h : NULL;
}

/* op becomes node `index` of g (the caller puts it there): 0 when out of memory. */
static int node_enter_locked(double_graph_t *g, op_t *op, size_t index)
{
    if (!set_add(&live_nodes, op))
        return 0;
    op->owner = g;
    op->index = index;
    return 1;
}

void graph_free_locked(double_graph_t *g)
{
    size_t at = set_find(&live_graphs, g);

    if (at != SIZE_MAX) {
        live_graphs.slot[at] = TOMBSTONE;
        *g->prevp = g->next;
        if (g->next != NULL)
            g->next->prevp = g->prevp;
    }
    for (size_t i = 0; i < g->n; i++) {
        if (g->ops[i]->owner == g)
            set_del(&live_nodes, g->ops[i]);
        op_free(g->ops[i]);
    }
    free(g->ops);
    free(g->efrom);
    free(g->eto);
    free(g->dep_first);
    free(g->dep);
    free(g);
}

/* Appends an owned node. */
CUresult graph_append_locked(double_graph_t *g, op_t *op)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 8;
        op_t **ops = realloc(g->ops, cap * sizeof(*ops));
        if (ops == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        g->ops = ops;
        g->cap = cap;
    }
    if (!node_enter_locked(g, op, g->n))
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* captured nodes form a chain (the double's captures are linear) */
    if (g->capturing && g->n > 0 && double_graph_edge_locked(g, g->n - 1, g->n) != CUDA_SUCCESS) {
        set_del(&live_nodes, op);
        op->owner = NULL;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g->ops[g->n++] = op;
    g->dep_valid = 0;
    return CUDA_SUCCESS;
}

/* g takes ops (n nodes, a copy made for it: ops_clone) as its nodes. On failure g holds them
 * all the same (graph_free_locked frees them). */
CUresult graph_take_ops_locked(double_graph_t *g, op_t **ops, size_t n)
{
    g->ops = ops;
    g->n = g->cap = n;
    g->dep_valid = 0;
    for (size_t i = 0; i < n; i++)
        if (!node_enter_locked(g, ops[i], i))
            return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

/* Drops the nodes and edges added after g had n nodes and ne edges (a failed addition; the
 * caller frees the nodes). */
void graph_truncate_locked(double_graph_t *g, size_t n, size_t ne)
{
    while (g->n > n) {
        op_t *op = g->ops[--g->n];
        set_del(&live_nodes, op);
        op->owner = NULL;
    }
    if (g->ne > ne)
        g->ne = ne;
    g->dep_valid = 0;
}

int exec_live_locked(CUgraphExec h)
{
    for (double_exec_t *e = execs; e != NULL; e = e->next)
        if (e == (double_exec_t *)h)
            return 1;
    return 0;
}
