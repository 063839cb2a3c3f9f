/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The capture module (internal): one event stream in (capture will begin / began / will end /
 * ended, graph instantiated / cloned / destroyed, exec destroyed, graph will launch), fed by the
 * public recap_capture_* calls and by the hook front ends; and the answers to the RNG layer's
 * questions when it hands out Philox arguments, which rng/ reaches through the port capture/
 * installs (rng/port.h, capture/port.c). What the other folders use; the folder's own plumbing
 * between its files is capture/internal.h.
 */
#ifndef RECAP_CAPTURE_CAPTURE_H
#define RECAP_CAPTURE_CAPTURE_H

#include <cuda.h>
#include <stdint.h>

#include "base/atfork.h"
#include "recap.h"
#include "rng/generator.h"
#include "rng/port.h"

/* ---- captures (capture.c) */

typedef struct recap__capture recap__capture_t;

/* The capture the calling thread reported (began) and has not ended, or NULL. */
recap__capture_t *recap__capture_of_thread(void);

/* ---- graphs (graphs.c) */

/* Records what a finished capture drew: each state and its increment per launch. */
typedef struct recap__rng_record recap__rng_record_t;
void recap__record_unref(recap__rng_record_t *rec);
/* Destroys: the record of a graph (exec = 0) or executable (exec = 1) comes out of recap's map
 * before the driver's destroy (NULL when there is none), and is put back when the driver refused
 * (the handle lives on and may launch) or dropped once it succeeded. Out of the map meanwhile, so
 * a handle value the driver hands out again at once cannot lose its new record. */
recap__rng_record_t *recap__record_take(const void *handle, int exec);
void recap__record_put_back(void *handle, int exec, recap__rng_record_t *rec);

/* ---- composition (compose.c, launch_order.c) */

void recap__compose_exec_forget(CUgraphExec exec);
/* Set by a launch that drew from a state launched on several streams: recap_graph_launched has
 * events to record after it. */
extern __thread int recap__launch_needs_events __attribute__((tls_model("initial-exec")));

/* ---- subscribers (subscribers.c) */

/* Delivers an event to the subscribers whose mask has it. Inline so that with nobody subscribed
 * an event is one load and a branch. */
extern int recap__nsubs;
void recap__events_deliver(recap_capture_event_t event, recap_stream_t stream,
                           recap_capture_mode_t mode, recap_graph_t graph, recap_graph_exec_t exec);
static inline void recap__events_emit(recap_capture_event_t event, recap_stream_t stream,
                                      recap_capture_mode_t mode, recap_graph_t graph,
                                      recap_graph_exec_t exec)
{
    if (__builtin_expect(__atomic_load_n(&recap__nsubs, __ATOMIC_ACQUIRE) != 0, 0))
        recap__events_deliver(event, stream, mode, graph, exec);
}
/* Drops recap's record of a handle without an event (a destroy the front end reported twice). */
void recap__graph_forget(const void *handle, int exec);
/* Sets which front end reports the calling thread's current call; returns the previous value. */
recap_hooks_t recap__events_source_set(recap_hooks_t source);
/* Subscriptions made in this process (RECAP_REPORT). */
uint64_t recap__events_subscribed(void);

/* ---- fork handlers (called by src/process/atfork.c) */
void recap__capture_probe_atfork(recap__atfork_t when); /* probe.c */
void recap__slots_atfork(recap__atfork_t when);    /* slots.c: the slot pools */
void recap__capture_atfork(recap__atfork_t when);
void recap__graphs_atfork(recap__atfork_t when);
void recap__compose_atfork(recap__atfork_t when);       /* compose.c */
void recap__events_atfork(recap__atfork_t when);        /* subscribers.c */
/* In the child, once every lock is released: drops the captures of the threads that are gone. */
void recap__capture_atfork_child(void);

#endif
