/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The walk of a graph (internal, for compose.c): what one run of it draws, child graphs and
 * conditional bodies included, level by level (walk.c), the edges of a level (edges.c), and the
 * plan an exec keeps for later child graph node updates.
 */
#ifndef RECAP_CAPTURE_WALK_H
#define RECAP_CAPTURE_WALK_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "capture/draws.h"
#include "capture/order.h"
#include "driver/driver.h"

enum recap__unit_kind { RECAP_UNIT_ADVANCE, RECAP_UNIT_CHILD };

/* What one level of a graph draws, part by part: recap's advance nodes and child graph nodes. */
typedef struct {
    size_t node; /* index into the level's nodes */
    enum recap__unit_kind kind;
    recap__draws_t draws;
} recap__unit_t;

/* What an exec keeps for cuGraphExecChildGraphNodeSetParams: the top level's parts that draw (all
 * its child graph nodes, drawing or not) and its order, so a changed child's order with every
 * other part is read when it changes, from what each part draws then. */
typedef struct {
    size_t count;        /* the top level's nodes */
    CUgraphNode *sorted; /* (node, index) pairs sorted by node */
    recap__order_t order;
    size_t *kernels, nkernels; /* the kernel nodes (captured work ends before its advance node) */
    recap__unit_t *units;
    size_t nunits, nchildren;
    size_t *unit_of; /* node index -> unit index + 1 (0: not a unit) */
    recap__draws_t total;
    char refused[320]; /* why this exec is refused ("" when it is exact) */
} recap__plan_t;

typedef struct {
    const recap__driver_t *drv;
    CUgraph top;
    char why[320];
    int failed; /* a driver call failed: the walk says nothing */
    int nomem;  /* ... or memory ran out */
    size_t graphs, nodes, edges, steps; /* what the walk cost (the debug log says) */
} recap__walk_t;

/* Keeps the first reason the walk refuses the graph (w->why). */
void recap__refuse(recap__walk_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Memory ran out: the walk failed. */
void recap__nomem(recap__walk_t *w);
/* calloc of count + extra elements, none when that many cannot be counted. */
static inline void *recap__calloc_n(size_t count, size_t extra, size_t size)
{
    return count > SIZE_MAX - extra ? NULL : calloc(count + extra, size);
}

/* Walks graph g, child graphs and conditional bodies to any depth: adds to *out what one run of
 * it draws, per slot. With `plan` (the top level), keeps its order and parts for later child
 * updates. Returns 0 when a driver call failed or memory ran out. */
int recap__walk(recap__walk_t *w, CUgraph g, recap__draws_t *out, recap__plan_t *plan);
void recap__plan_free(recap__plan_t *p);
/* Whether every kernel node of the level runs after node c (it runs before all captured work). */
int recap__before_all_kernels(recap__order_t *o, size_t c, const size_t *kernels, size_t nkernels);

/* ---- edges (edges.c) */

/* (node, index) pairs of `nodes`, sorted by node, for recap__index_of. */
CUgraphNode *recap__sorted_of(const CUgraphNode *nodes, size_t count);
/* Index of node `n` in the sorted copy `sorted` (pairs node, index), or -1. */
long recap__index_of(const CUgraphNode *sorted, size_t count, CUgraphNode n);
/* The edges between the level's nodes `nodes` (count of them; `sorted`: the same,
 * recap__sorted_of) as index pairs (*from, *to), *nedges of them. 0 on failure (a driver call
 * failed, or memory ran out: w says). */
int recap__edges_of(recap__walk_t *w, CUgraph g, const CUgraphNode *nodes,
                    const CUgraphNode *sorted, size_t count, size_t **from_p, size_t **to_p,
                    size_t *nedges_p);

#endif
