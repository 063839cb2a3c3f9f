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
 * in (PyTorch's graphsafe_set_state): draws through the generator advance the named state.
 * The values are protected by the lock of the generator the state is installed in.
 */
typedef struct recap_genstate {
    int refs;
    int device;
    uint64_t seed;
    uint64_t offset;
} recap_genstate_t;

struct recap_generator {
    int device;
    recap_lock_t lock;
    recap_genstate_t *state;
};

recap_genstate_t *recap__genstate_new(int device, uint64_t seed, uint64_t offset);
void recap__genstate_ref(recap_genstate_t *s);
void recap__genstate_unref(recap_genstate_t *s);

/* Value access under the generator's lock. */
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

/* Advances the offset by `inc` (a multiple of 4) and returns the offset before; RECAP_ERR_...
 * when the offset would wrap. */
recap_status_t recap__generator_advance(recap_generator_h gen, uint64_t inc, uint64_t *seed_p,
                                        uint64_t *offset_p);

#endif
