/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The capture folder's own plumbing (internal to src/capture/, included only by its files): what
 * one of its files asks of another. What the folders above use is capture/capture.h.
 */
#ifndef RECAP_CAPTURE_INTERNAL_H
#define RECAP_CAPTURE_INTERNAL_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "capture/capture.h"
#include "recap.h"
#include "rng/generator.h"

/* ---- device slots (slots.c) */

/* Gives every registered state of `device` a slot, allocating under the relaxed capture mode
 * for this thread so no capture in progress is disturbed. */
recap_status_t recap__slots_prime(int device);
/* The live device state whose slot is `slot`, referenced (NULL when none). */
recap__genstate_t *recap__slots_state_of(uint64_t slot);

/* ---- graphs (graphs.c) */

recap_status_t recap__graphs_attach(CUgraph graph, recap__rng_record_t *rec);
recap__rng_record_t *recap__record_new(int device, size_t n);
/* The device of a graph or exec recap holds a record for, else -1. */
int recap__graph_device(const void *graph_or_exec);
void recap__record_set(recap__rng_record_t *rec, size_t i, recap__genstate_t *gs, uint64_t inc);

/* An exec's record: what `graph` drew at capture (its own record), or `rec` (taken over; NULL
 * drops the exec's record). */
recap_status_t recap__exec_record_from_graph(recap_graph_exec_t exec, recap_graph_t graph);
recap_status_t recap__exec_record_set(CUgraphExec exec, recap__rng_record_t *rec);

/* ---- counters (graphs.c) */
typedef enum {
    RECAP_STAT_CAPTURES,
    RECAP_STAT_GRAPHS_WITH_RNG,
    RECAP_STAT_LAUNCHES,
    RECAP_STAT_SLOT_WRITES,
    RECAP_STAT_STATES_PRIMED,
    RECAP_STAT_COUNT
} recap__stat_t;
void recap__stat_add(recap__stat_t which, uint64_t n);

/* ---- composition (compose.c, conditional.c, launch_order.c) */

/* Gives exec the record of everything `graph` draws, child graphs included, checking that the
 * parts drawing from one generator are ordered. *walked_p = 0 when the driver cannot list a
 * graph's nodes (the caller falls back on the capture's record). RECAP_ERR_UNSUPPORTED, with the
 * reason, for a composition recap cannot make exact. */
recap_status_t recap__compose_instantiated(CUgraph graph, CUgraphExec exec, int *walked_p);
/* An exec's record after its instantiate or update from `graph` (graphs.c): what the walk found,
 * else (no walk, or a walk that found none of the draws the capture recorded) the capture's. */
recap_status_t recap__exec_record_for(recap_graph_t graph, recap_graph_exec_t exec);
/* A destroyed graph's conditional nodes: their recorded bodies go. */
void recap__compose_graph_forget(CUgraph graph);
/* Orders a launch on `stream` after gs's last launch on another stream; records gs's event after
 * a launch; releases gs's event. */
recap_status_t recap__compose_order(recap__genstate_t *gs, CUstream stream);
recap_status_t recap__compose_record_after(recap__genstate_t *gs, CUstream stream);
void recap__compose_state_gone(recap__genstate_t *gs);

/* ---- subscribers (subscribers.c) */

/* RECAP_ERR_STATE when a subscriber's callback makes the host's own capture calls. */
recap_status_t recap__events_check_caller(const char *what);

#endif
