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

double_graph_t *graph_new_locked(void)
{
    double_graph_t *g = calloc(1, sizeof(*g));

    if (g == NULL)
        return NULL;
    g->next = graphs;
    graphs = g;
    return g;
}

int graph_live_locked(CUgraph h)
{
    for (double_graph_t *g = graphs; g != NULL; g = g->next)
        if (g == (double_graph_t *)h)
            return 1;
    return 0;
}

void graph_free_locked(double_graph_t *g)
{
    double_graph_t **pp;

    for (pp = &graphs; *pp != NULL; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            break;
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
