/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every interposed entry point does around the real call, written once for the runtime and
 * driver wrappers (cudaStream_t and CUstream, cudaGraph_t and CUgraph... are the same pointers).
 * Each returns nothing: a hook that cannot report logs once and the host call goes on.
 * `outer` is nonzero for the outermost interposed call of the thread; only it reports, so a
 * runtime call and the driver call cudart makes underneath report one event.
 */
#ifndef RECAP_HOOKS_EVENTS_H
#define RECAP_HOOKS_EVENTS_H

#include "hooks/hooks.h"

typedef struct {
    int report;  /* this call reports events */
    void *taken; /* a destroy's record, until the real call says whether the handle went */
    recap_hooks_t source; /* the thread's event source before this call */
} recap__hook_call_t;

/* Starts an interposed call: decides whether it reports. Pair with recap__hook_end. */
RECAP_PRIVATE_API void recap__hook_begin(recap__hook_call_t *c);
RECAP_PRIVATE_API void recap__hook_end(recap__hook_call_t *c);

RECAP_PRIVATE_API void recap__ev_before_begin_capture(recap__hook_call_t *c, void *stream,
                                                      int mode);
RECAP_PRIVATE_API void recap__ev_after_begin_capture(recap__hook_call_t *c, void *stream, int ok);
RECAP_PRIVATE_API void recap__ev_before_end_capture(recap__hook_call_t *c, void *stream);
RECAP_PRIVATE_API void recap__ev_after_end_capture(recap__hook_call_t *c, void *stream, int ok,
                                                   void *graph);
RECAP_PRIVATE_API void recap__ev_instantiated(recap__hook_call_t *c, int ok, void *graph,
                                              void *exec);
RECAP_PRIVATE_API void recap__ev_cloned(recap__hook_call_t *c, int ok, void *orig, void *clone);
/* Around a destroy: the record leaves recap's map before the real call and is dropped after it,
 * or put back when the driver refused (the handle lives on and may launch). */
RECAP_PRIVATE_API void recap__ev_destroy_graph(recap__hook_call_t *c, void *graph);
RECAP_PRIVATE_API void recap__ev_destroy_exec(recap__hook_call_t *c, void *exec);
RECAP_PRIVATE_API void recap__ev_destroy_done(recap__hook_call_t *c, void *handle, int exec,
                                              int ok);
RECAP_PRIVATE_API void recap__ev_before_launch(recap__hook_call_t *c, void *exec, void *stream);
RECAP_PRIVATE_API void recap__ev_after_launch(recap__hook_call_t *c, void *exec, int ok);
/* Composition (capture/compose.c, launch_order.c, conditional.c): after a launch (events for
 * multi-stream ordering), an exec update, a child graph node's update in an exec, a node added
 * (conditional nodes' bodies; `params` is a CUgraphNodeParams, which cudaGraphNodeParams
 * mirrors). */
RECAP_PRIVATE_API void recap__ev_launched(recap__hook_call_t *c, void *exec, void *stream, int ok);
RECAP_PRIVATE_API void recap__ev_exec_updated(recap__hook_call_t *c, int ok, void *exec,
                                              void *graph);
RECAP_PRIVATE_API void recap__ev_exec_child_updated(recap__hook_call_t *c, int ok, void *exec,
                                                    void *node, void *child);
RECAP_PRIVATE_API void recap__ev_node_added(recap__hook_call_t *c, int ok, void *graph,
                                            void *node, const void *params);

#endif
