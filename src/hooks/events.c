/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <cuda.h>

#include "capture/capture.h"
#include "hooks/events.h"

void recap__hook_begin(recap__hook_call_t *c)
{
    c->taken = NULL;
    c->report = recap__hooks_enter() == 0 && recap__hooks_reporting(RECAP_HOOKS_PRELOAD);
    c->source = recap__events_source_set(c->report ? RECAP_HOOKS_PRELOAD : RECAP_HOOKS_NONE);
}

void recap__hook_end(recap__hook_call_t *c)
{
    recap__events_source_set(c->source);
    recap__hooks_leave();
}

#define REPORT(c, where, call)                         \
    do {                                               \
        if ((c)->report) {                             \
            recap_status_t st_ = (call);               \
            if (st_ != RECAP_OK)                       \
                recap__hooks_event_failed(where, st_); \
        }                                              \
    } while (0)

void recap__ev_before_begin_capture(recap__hook_call_t *c, void *stream, int mode)
{
    REPORT(c, "priming before capture", recap_capture_will_begin(stream, (recap_capture_mode_t)mode));
}

void recap__ev_after_begin_capture(recap__hook_call_t *c, void *stream, int ok)
{
    if (ok)
        REPORT(c, "capture began", recap_capture_began(stream));
}

void recap__ev_before_end_capture(recap__hook_call_t *c, void *stream)
{
    REPORT(c, "capture will end", recap_capture_will_end(stream));
}

void recap__ev_after_end_capture(recap__hook_call_t *c, void *stream, int ok, void *graph)
{
    REPORT(c, "capture ended", recap_capture_ended(stream, ok ? graph : NULL));
}

void recap__ev_instantiated(recap__hook_call_t *c, int ok, void *graph, void *exec)
{
    if (ok)
        REPORT(c, "graph instantiated", recap_graph_instantiated(graph, exec));
}

void recap__ev_cloned(recap__hook_call_t *c, int ok, void *orig, void *clone)
{
    if (ok)
        REPORT(c, "graph cloned", recap_graph_cloned(orig, clone));
}

void recap__ev_destroy_graph(recap__hook_call_t *c, void *graph)
{
    if (c->report)
        c->taken = recap__record_take(graph, 0);
}

void recap__ev_destroy_exec(recap__hook_call_t *c, void *exec)
{
    if (c->report)
        c->taken = recap__record_take(exec, 1);
}

void recap__ev_destroy_done(recap__hook_call_t *c, void *handle, int exec, int ok)
{
    if (ok)
        recap__record_unref(c->taken);
    else
        recap__record_put_back(handle, exec, c->taken);
    c->taken = NULL;
    if (ok && exec)
        recap__compose_exec_forget(handle);
    if (ok && c->report)
        recap__events_emit(exec ? RECAP_EVENT_GRAPH_EXEC_DESTROYED : RECAP_EVENT_GRAPH_DESTROYED,
                           NULL, RECAP_CAPTURE_GLOBAL, exec ? NULL : handle, exec ? handle : NULL);
}

void recap__ev_before_launch(recap__hook_call_t *c, void *exec, void *stream)
{
    REPORT(c, "graph launch", recap_graph_will_launch(exec, stream));
}

void recap__ev_after_launch(recap__hook_call_t *c, void *exec, int ok)
{
    if (!ok)
        REPORT(c, "graph launch failed", recap_graph_launch_failed(exec));
}

void recap__ev_launched(recap__hook_call_t *c, void *exec, void *stream, int ok)
{
    if (ok && recap__launch_needs_events)
        REPORT(c, "graph launched", recap_graph_launched(exec, stream));
}

void recap__ev_exec_updated(recap__hook_call_t *c, int ok, void *exec, void *graph)
{
    if (ok)
        REPORT(c, "graph exec updated", recap_graph_exec_updated(exec, graph));
}

void recap__ev_exec_child_updated(recap__hook_call_t *c, int ok, void *exec, void *node,
                                  void *child)
{
    if (ok)
        REPORT(c, "graph exec child graph updated",
               recap_graph_exec_child_updated(exec, node, child));
}

void recap__ev_node_added(recap__hook_call_t *c, int ok, void *graph, void *node,
                          const void *params)
{
    const CUgraphNodeParams *p = params;

    if (ok && c->report && p != NULL && node != NULL && p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL &&
        p->conditional.phGraph_out != NULL)
        REPORT(c, "conditional node added",
               recap_graph_conditional_added(graph, node,
                                             (const recap_graph_t *)p->conditional.phGraph_out,
                                             p->conditional.size));
}
