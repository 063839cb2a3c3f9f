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

/* The live graphs, also in an open-addressing set, so a graph is found in constant time however
 * many live (graphs of tens of thousands of child graph nodes embed as many graphs). */
static double_graph_t **live;
static size_t live_cap, live_used; /* used: live entries and tombstones */
#define TOMBSTONE ((double_graph_t *)1)

static size_t live_slot(const double_graph_t *g, size_t cap)
{
    return (size_t)(((uintptr_t)g >> 4) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

static int live_add(double_graph_t *g)
{
    size_t i;

    if (2 * (live_used + 1) > live_cap) {
        size_t cap = 256, nlive = 1, j;
        double_graph_t **n;

        for (j = 0; j < live_cap; j++)
            nlive += live[j] != NULL && live[j] != TOMBSTONE;
        while (cap < 4 * nlive) /* (tombstones are dropped: churn does not grow it) */
            cap *= 2;
        if ((n = calloc(cap, sizeof(*n))) == NULL)
            return 0;
        live_used = 0;
        for (j = 0; j < live_cap; j++)
            if (live[j] != NULL && live[j] != TOMBSTONE) {
                for (i = live_slot(live[j], cap); n[i] != NULL; i = (i + 1) & (cap - 1))
                    ;
                n[i] = live[j];
                live_used++;
            }
        free(live);
        live = n;
        live_cap = cap;
    }
    for (i = live_slot(g, live_cap); live[i] != NULL && live[i] != TOMBSTONE; i = (i + 1) & (live_cap - 1))
        ;
    live_used += live[i] == NULL;
    live[i] = g;
    return 1;
}

static size_t live_find(const double_graph_t *g)
{
    size_t i;

    if (live_cap == 0 || g == NULL || g == TOMBSTONE)
        return SIZE_MAX;
    for (i = live_slot(g, live_cap); live[i] != NULL; i = (i + 1) & (live_cap - 1))
        if (live[i] == g)
            return i;
    return SIZE_MAX;
}

double_graph_t *graph_new_locked(void)
{
    double_graph_t *g = calloc(1, sizeof(*g));

    if (g == NULL)
        return NULL;
    if (!live_add(g)) {
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
    return live_find((const double_graph_t *)h) != SIZE_MAX;
}

void graph_free_locked(double_graph_t *g)
{
    size_t at = live_find(g);

    if (at != SIZE_MAX) {
        live[at] = TOMBSTONE;
        *g->prevp = g->next;
        if (g->next != NULL)
            g->next->prevp = g->prevp;
    }
    for (size_t i = 0; i < g->n; i++)
        op_free(g->ops[i]);
    free(g->ops);
    free(g->efrom);
    free(g->eto);
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
    /* captured nodes form a chain (the double's captures are linear) */
    if (g->capturing && g->n > 0 && double_graph_edge_locked(g, g->n - 1, g->n) != CUDA_SUCCESS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->ops[g->n++] = op;
    return CUDA_SUCCESS;
}

int exec_live_locked(CUgraphExec h)
{
    for (double_exec_t *e = execs; e != NULL; e = e->next)
        if (e == (double_exec_t *)h)
            return 1;
    return 0;
}
