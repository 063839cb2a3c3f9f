/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Conditional nodes' bodies as the hooks (or the host) report them
 * (recap_graph_conditional_added), for the graph walk, which checks that no body draws.
 */
#include "config.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/ptrmap.h"
#include "capture/capture.h"
#include "capture/conditional.h"
#include "capture/internal.h"

static pthread_mutex_t conditional_lock = PTHREAD_MUTEX_INITIALIZER;
static recap__ptrmap_t conditionals; /* CUgraphNode -> recap__bodies_t */

void recap__conditional_atfork(recap__atfork_t when)
{
    recap__atfork_mutex(&conditional_lock, when);
}

recap_status_t recap_graph_conditional_added(recap_graph_t graph, recap_graph_node_t node,
                                             const recap_graph_t *bodies, size_t nbodies)
{
    recap__bodies_t *b;
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
    pthread_mutex_lock(&conditional_lock);
    free(recap__ptrmap_put(&conditionals, node, b, &failed));
    pthread_mutex_unlock(&conditional_lock);
    if (failed) {
        free(b);
        return recap__fail(RECAP_ERR_NO_MEMORY, "conditional node map");
    }
    return RECAP_OK;
}

static int owned_by(void *val, void *graph)
{
    recap__bodies_t *b = val;

    if (b->owner != (CUgraph)graph)
        return 0;
    free(b);
    return 1;
}

void recap__compose_graph_forget(CUgraph graph)
{
    pthread_mutex_lock(&conditional_lock);
    if (conditionals.live > 0)
        recap__ptrmap_drop_if(&conditionals, owned_by, graph);
    pthread_mutex_unlock(&conditional_lock);
}

recap__bodies_t *recap__conditional_bodies(CUgraphNode node, int *nomem)
{
    recap__bodies_t *b, *copy = NULL;

    pthread_mutex_lock(&conditional_lock);
    b = recap__ptrmap_get(&conditionals, node);
    if (b != NULL && (copy = recap__alloc_flex(sizeof(*b), b->n, sizeof(CUgraph))) != NULL)
        memcpy(copy, b, sizeof(*b) + b->n * sizeof(CUgraph));
    *nomem = b != NULL && copy == NULL;
    pthread_mutex_unlock(&conditional_lock);
    return copy;
}
