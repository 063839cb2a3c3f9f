/* SPDX-License-Identifier: Apache-2.0 */
/* Generators and their state objects (internal). */
#ifndef RECAP_RNG_GENERATOR_H
#define RECAP_RNG_GENERATOR_H

#include <stdint.h>

#include "base/lock.h"
#include "recap.h"

/* PyTorch's default seed, so a fresh recap generator matches a fresh torch generator. */
#define RECAP_DEFAULT_SEED 67280421310721ULL

/*
 * A generator's state: (seed, offset). It is an object of its own, reference counted, because
 * graph-safe trackers share one state between a named slot and the generator it is installed
 * in (PyTorch's graphsafe_set_state): draws through the generator advance the named state, and
 * graphs hold the states they drew from.
 *
 * A device state also owns a device slot once primed (capture/slots.c): 16 bytes {seed, base
 * offset} that captured kernels read. slot_seed/slot_offset are what the slot will hold once the
 * work launched so far has run; a launch rewrites the slot only when they differ from the host
 * values.
 *
 * seed and offset are read and written with atomic operations: draws through a generator hold
 * the generator's lock (which also fixes which state is installed), graph launches add their
 * increments with an atomic add, so neither needs a lock of the state. slot_lock serializes the
 * launches' slot bookkeeping only.
 */
typedef struct recap_genstate {
    int refs;
    int device;
    uint64_t seed;
    uint64_t offset;
    uint64_t slot; /* device address, 0 until primed; set once, read with acquire */
    recap_lock_t slot_lock;
    uint64_t slot_seed, slot_offset;
    int slot_valid;
    struct recap_genstate *reg_prev, *reg_next; /* registry of device states (priming) */
} recap_genstate_t;

/* `lock` protects which state is installed and orders draws through this generator. */
struct recap_generator {
    int device;
    recap_lock_t lock;
    recap_genstate_t *state;
};

recap_genstate_t *recap__genstate_new(int device, uint64_t seed, uint64_t offset);
void recap__genstate_ref(recap_genstate_t *s);
void recap__genstate_unref(recap_genstate_t *s);

/* Value access. While the state takes part in a running capture (whichever thread asks: a
 * framework's backward runs on worker threads), the offset seen and set is the virtual one (the
 * host offset plus the offset relative to the capture), so snapshots and forks inside a capture
 * save and restore capture-relative offsets; a seed change there cannot be replayed and marks
 * the capture as failed (recap_capture_ended reports it). */
void recap__genstate_get_value(recap_genstate_t *gs, uint64_t *seed, uint64_t *offset);
void recap__genstate_set_value(recap_genstate_t *gs, uint64_t seed, uint64_t offset);
void recap__generator_get_value(recap_generator_h gen, uint64_t *seed, uint64_t *offset);
void recap__generator_set_value(recap_generator_h gen, uint64_t seed, uint64_t offset);
/* Installs (*seed, *offset) and returns the previous value in them, under one lock acquisition:
 * a tracker fork/unfork is exactly this, on every layer of a training step. */
void recap__generator_exchange_value(recap_generator_h gen, uint64_t *seed, uint64_t *offset);

/* Graph-safe access: returns the installed state object with a reference the caller owns /
 * installs `s` (taking a reference) and returns the previous one (its reference moves to the
 * caller). */
recap_genstate_t *recap__generator_get_genstate(recap_generator_h gen);
recap_genstate_t *recap__generator_swap_genstate(recap_generator_h gen, recap_genstate_t *s);
/* Like swap, but takes over the caller's reference to `s` instead of taking one: a fork frame
 * giving its saved state back needs no reference count traffic. */
recap_genstate_t *recap__generator_install_genstate(recap_generator_h gen, recap_genstate_t *s);

/* Validates a 16-byte state and decodes it. */
recap_status_t recap__state_decode(const uint8_t state[RECAP_STATE_BYTES], uint64_t *seed,
                                   uint64_t *offset);
void recap__state_encode(uint64_t seed, uint64_t offset, uint8_t state[RECAP_STATE_BYTES]);

/* Draws `inc` values per thread (a multiple of 4) for work on `stream`: by value outside a
 * capture (the offset advances; RECAP_ERR_INVALID_ARG when it would wrap), pointer-based inside
 * one (the capture-relative offset advances). */
recap_status_t recap__generator_draw(recap_generator_h gen, recap_stream_t stream, uint64_t inc,
                                     recap_philox_args_t *args);

#endif
