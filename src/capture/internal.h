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

#include "base/lock.h"
#include "capture/capture.h"
#include "recap.h"
#include "rng/generator.h"

/* ---- a device state's capture part (rng/generator.h's `capture`), made when a capture primes
 * the state (slots.c) and gone with the state (port.c's state_gone). `slot` is the device
 * address of its 16 bytes {seed, base offset} that captured kernels read; slot_seed/slot_offset
 * are what the slot will hold once the work launched so far has run, so a launch rewrites the
 * slot only when they differ from the host values. slot_lock serializes the launches' slot
 * bookkeeping only. Launch ordering across streams (launch_order.c): the stream of the last
 * launch that drew from the state; once launches moved between streams, an event recorded after
 * each. */
typedef struct recap__genstate_capture {
    uint64_t slot;
    recap__lock_t slot_lock;
    uint64_t slot_seed, slot_offset;
    int slot_valid;
    void *launch_stream;
    void *launch_event;
    int launched, multi_stream, event_valid;
} recap__genstate_capture_t;

/* gs's capture part, NULL until primed. */
static inline recap__genstate_capture_t *recap__capture_part(const recap__genstate_t *gs)
{
    return __atomic_load_n(&gs->capture, __ATOMIC_ACQUIRE);
}

/* ---- the RNG layer's questions (capture.c), answered through the port (port.c) */

/* The recap capture recording `stream`: *cap_p = NULL when the stream is not capturing.
 * RECAP_ERR_NOT_REGISTERED when it captures but recap was never told of that capture. */
recap_status_t recap__capture_of_stream(CUstream stream, recap__capture_t **cap_p);
/* Hands out captured Philox arguments for `inc` values per thread from gs (locked by caller):
 * RECAP_ERR_NOT_REGISTERED when gs was not primed. */
recap_status_t recap__capture_draw(recap__capture_t *cap, recap__genstate_t *gs, uint64_t inc,
                                   recap_philox_args_t *args);
/* gs's offset relative to the running capture it takes part in (the calling thread's first, then
 * any other thread's): snapshots and forks inside a capture save and restore capture-relative
 * offsets, also from a framework's backward worker threads. Returns 1 and sets *rel when gs is
 * in a running capture. */
int recap__capture_rel_get(recap__genstate_t *gs, uint64_t *rel);
/* Sets gs's capture-relative offset in the capture it takes part in (or the calling thread's,
 * creating its entry when gs is primed). A seed change cannot be replayed, nor an offset below
 * the launch's base (`before`: rel is negative): either marks that capture as failed, with the
 * reason recap_capture_ended reports. Returns 1 when handled, 0 when no capture applies. */
int recap__capture_rel_set(recap__genstate_t *gs, uint64_t rel, int seed_changed, int before);
/* Whether gs's value was set inside the running capture it takes part in: from then on its
 * value is the capture's, which an eager draw (a stream not capturing) cannot follow. */
int recap__capture_moved(recap__genstate_t *gs);

/* ---- device slots (slots.c) */

/* Gives every registered state of `device` a slot, allocating under the relaxed capture mode
 * for this thread so no capture in progress is disturbed. */
recap_status_t recap__slots_prime(int device);
/* The live device state whose slot is `slot`, referenced (NULL when none). */
recap__genstate_t *recap__slots_state_of(uint64_t slot);
/* A released state's capture part goes: its event, its slot back to the pool. */
void recap__slots_state_gone(recap__genstate_t *gs);

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
