/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The order of one graph level's nodes (internal, for the walk: walk.c, compose.c): its edges as
 * adjacency lists both ways and a topological position per node, and reachability questions
 * answered by walks bounded to the part of the graph between two nodes, so checking a chain of k
 * nodes costs one walk of the level, not k. Nothing here is quadratic in the level's nodes or edges.
 */
#ifndef RECAP_CAPTURE_ORDER_H
#define RECAP_CAPTURE_ORDER_H

#include <stddef.h>

typedef struct {
    size_t n;                 /* nodes */
    size_t *succ_first, *succ; /* successors of x: succ[succ_first[x] .. succ_first[x + 1]) */
    size_t *pred_first, *pred; /* predecessors of x, the same way */
    size_t *pos;              /* topological position of each node */
    size_t *seen, stamp;      /* seen[x] == stamp: x visited by the current walk */
    size_t *queue;
    size_t steps;             /* nodes and edges visited by walks (the work, for the log) */
} recap__order_t;

/* Builds the order of n nodes and the edges (from[i], to[i]) (indices below n). Returns 1, 0 when
 * out of memory, -1 when the edges make a cycle (no order exists). */
int recap__order_init(recap__order_t *o, size_t n, const size_t *from, const size_t *to,
                      size_t nedges);
void recap__order_free(recap__order_t *o);
/* Whether b runs after a: a path of edges leads from a to b. */
int recap__order_reaches(recap__order_t *o, size_t a, size_t b);
/* Marks every node reachable from a (backward: every node from which a is reachable), a itself
 * included; recap__order_marked says which, until the next walk. */
void recap__order_mark(recap__order_t *o, size_t a, int backward);
static inline int recap__order_marked(const recap__order_t *o, size_t x)
{
    return o->seen[x] == o->stamp;
}

#endif
