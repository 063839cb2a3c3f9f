/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Conditional nodes' bodies (internal, for the graph walk): what recap_graph_conditional_added
 * reported, kept until the graph holding the node is destroyed (recap__compose_graph_forget).
 */
#ifndef RECAP_CAPTURE_CONDITIONAL_H
#define RECAP_CAPTURE_CONDITIONAL_H

#include <cuda.h>
#include <stddef.h>

#include "base/atfork.h"

/* Conditional node -> its body graphs, as the hooks (or the host) reported them: the driver has
 * no call that gives a conditional node's bodies back. */
typedef struct {
    CUgraph owner; /* the graph holding the node: its destroy drops the record */
    size_t n;
    CUgraph body[];
} recap__bodies_t;

/* A copy of the bodies of conditional node `node` (NULL when unknown, or out of memory: *nomem
 * says); the caller frees it. */
recap__bodies_t *recap__conditional_bodies(CUgraphNode node, int *nomem);
void recap__conditional_atfork(recap__atfork_t when);

#endif
