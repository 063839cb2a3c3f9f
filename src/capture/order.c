/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture/order.h"

/* Adjacency lists of the edges (key[i] -> val[i]): list of x is out[first[x] .. first[x + 1]). */
static int lists(size_t n, const size_t *key, const size_t *val, size_t nedges, size_t **first_p,
                 size_t **out_p)
{
    size_t *first = calloc(n + 2, sizeof(*first)), *out = calloc(nedges + 1, sizeof(*out));
    size_t e, x;

    *first_p = first;
    *out_p = out;
    if (first == NULL || out == NULL)
        return 0;
    for (e = 0; e < nedges; e++)
        first[key[e] + 2]++;
    for (x = 0; x < n; x++)
        first[x + 2] += first[x + 1];
    for (e = 0; e < nedges; e++)
        out[first[key[e] + 1]++] = val[e];
    return 1;
}

int recap__order_init(recap__order_t *o, size_t n, const size_t *from, const size_t *to,
                      size_t nedges)
{
    size_t *indeg, head = 0, tail = 0, x, e;

    memset(o, 0, sizeof(*o));
    if (n > SIZE_MAX / sizeof(size_t) - 2 || nedges > SIZE_MAX / sizeof(size_t) - 1)
        return 0;
    o->n = n;
    o->pos = calloc(n + 1, sizeof(size_t));
    o->seen = calloc(n + 1, sizeof(size_t));
    o->queue = calloc(n + 1, sizeof(size_t));
    indeg = calloc(n + 1, sizeof(size_t));
    if (o->pos == NULL || o->seen == NULL || o->queue == NULL || indeg == NULL ||
        !lists(n, from, to, nedges, &o->succ_first, &o->succ) ||
        !lists(n, to, from, nedges, &o->pred_first, &o->pred)) {
        free(indeg);
        recap__order_free(o);
        return 0;
    }
    /* Kahn's order: a node's position is after every predecessor's */
    for (e = 0; e < nedges; e++)
        indeg[to[e]]++;
    for (x = 0; x < n; x++)
        if (indeg[x] == 0)
            o->queue[tail++] = x;
    while (head < tail) {
        x = o->queue[head];
        o->pos[x] = head++;
        for (e = o->succ_first[x]; e < o->succ_first[x + 1]; e++)
            if (--indeg[o->succ[e]] == 0)
                o->queue[tail++] = o->succ[e];
    }
    free(indeg);
    if (tail < n) {
        recap__order_free(o);
        return -1;
    }
    return 1;
}

void recap__order_free(recap__order_t *o)
{
    free(o->succ_first);
    free(o->succ);
    free(o->pred_first);
    free(o->pred);
    free(o->pos);
    free(o->seen);
    free(o->queue);
    memset(o, 0, sizeof(*o));
}

/* A walk from a along successors (or predecessors), not past topological position `bound`
 * (successors) or before it (predecessors); stops at `stop` when it is reached. */
static int visit(recap__order_t *o, size_t a, int backward, size_t bound, size_t stop)
{
    const size_t *first = backward ? o->pred_first : o->succ_first;
    const size_t *adj = backward ? o->pred : o->succ;
    size_t head = 0, tail = 0, x, e;

    o->stamp++;
    o->seen[a] = o->stamp;
    o->queue[tail++] = a;
    while (head < tail) {
        x = o->queue[head++];
        o->steps++;
        if (x == stop)
            return 1;
        for (e = first[x]; e < first[x + 1]; e++) {
            size_t y = adj[e];
            o->steps++;
            if (o->seen[y] == o->stamp || (backward ? o->pos[y] < bound : o->pos[y] > bound))
                continue;
            o->seen[y] = o->stamp;
            o->queue[tail++] = y;
        }
    }
    return 0;
}

int recap__order_reaches(recap__order_t *o, size_t a, size_t b)
{
    if (a == b || o->pos[a] > o->pos[b])
        return a == b;
    /* nothing after b's position can lead back to b: the walk stays between a and b */
    return visit(o, a, 0, o->pos[b], b);
}

void recap__order_mark(recap__order_t *o, size_t a, int backward)
{
    visit(o, a, backward, backward ? 0 : o->n, SIZE_MAX);
}
