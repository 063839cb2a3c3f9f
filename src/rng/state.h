/* SPDX-License-Identifier: Apache-2.0 */
/* A generator's state object (internal): recap's own (seed, offset) or a wrapper of a framework's
 * object, reference counted, and its 16-byte form. */
#ifndef RECAP_RNG_STATE_H
#define RECAP_RNG_STATE_H

#include <stdint.h>

#include "recap.h"
#include "rng/port.h"

/*
 * A generator's state: (seed, offset). It is an object of its own, reference counted, because
 * graph-safe trackers share one state between a named slot and the generator it is installed
 * in (PyTorch's graphsafe_set_state): draws through the generator advance the named state, and
 * graphs hold the states they drew from.
 *
 * A device state that takes part in captures has a capture part, which capture/ owns (its device
 * slot, the launches' bookkeeping: capture/internal.h): NULL until a capture primes the state,
 * set once and read with acquire; rng never looks inside it, and hands it to capture/ through the
 * port (rng/port.h) when the state is released.
 *
 * seed and offset are read and written with atomic operations: draws through a generator hold
 * the generator's lock (which also fixes which state is installed), graph launches add their
 * increments with an atomic add, so neither needs a lock of the state.
 */
struct recap__fw;
struct recap__genstate_capture;

typedef struct recap__genstate {
    int refs;
    int device;
    /* A framework's state object (fw != NULL): its value lives in the framework and is read and
     * written through fw's operations; it takes no part in recap's capture bookkeeping. */
    const struct recap__fw *fw;
    void *fobj;
    uint64_t seed;
    uint64_t offset;
    struct recap__genstate_capture *capture; /* capture/'s part, opaque here */
    struct recap__genstate *reg_prev, *reg_next; /* live device states (rng/registry.c) */
} recap__genstate_t;

recap__genstate_t *recap__genstate_new(int device, uint64_t seed, uint64_t offset);

/* Whether the state's offset is virtual now: a recap device state while some capture runs (a
 * capture it takes part in may be another thread's: backward passes run on worker threads). One
 * load while no capture runs anywhere in the process. */
static inline int recap__genstate_in_capture(const recap__genstate_t *gs)
{
    return gs->device >= 0 && gs->fw == NULL && recap__captures_running();
}
void recap__genstate_ref(recap__genstate_t *s);
void recap__genstate_unref(recap__genstate_t *s);

/* Value access. While the state takes part in a running capture (whichever thread asks: a
 * framework's backward runs on worker threads), the offset seen and set is the virtual one (the
 * host offset plus the offset relative to the capture), so snapshots and forks inside a capture
 * save and restore capture-relative offsets; a seed change there cannot be replayed and marks
 * the capture as failed (recap_capture_ended reports it). They fail only for framework states
 * (the framework's operation failed); outputs are written on success only. */
recap_status_t recap__genstate_get_value(recap__genstate_t *gs, uint64_t *seed, uint64_t *offset);
recap_status_t recap__genstate_set_value(recap__genstate_t *gs, uint64_t seed, uint64_t offset);

/* Validates a 16-byte state and decodes it. */
recap_status_t recap__state_decode(const uint8_t state[RECAP_STATE_BYTES], uint64_t *seed,
                                   uint64_t *offset);
void recap__state_encode(uint64_t seed, uint64_t offset, uint8_t state[RECAP_STATE_BYTES]);

#endif
