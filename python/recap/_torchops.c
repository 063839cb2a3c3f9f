/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The value operations of recap's framework table for torch's CUDA generators, in C.
 *
 * recap.torch's table is Python: every get or set of a generator's (seed, offset) is a ctypes
 * callback, several microseconds each, and an exact-capture scope over 8 tracker states makes
 * some thirty of them. torch's own C++ accessors are no faster: philox_offset_per_thread() asks
 * the driver whether the current stream captures (and throws if it does) on every call. So this
 * file reads and writes the two fields themselves: an at::CUDAGeneratorImpl holds its state as
 * an intrusive pointer to an at::CUDAGeneratorState, whose seed_ and philox_offset_per_thread_
 * are plain 64-bit fields. Where they lie is not taken from torch's headers: recap.torch finds
 * them on the running torch (generator views that share one state, and values set through
 * torch's API) and checks reads and writes against torch's get_state/set_state before it binds
 * them here; on any doubt it keeps the Python table.
 *
 * Nothing here calls torch, so nothing can throw into these C frames. An offset that is not a
 * multiple of 4 is refused (RECAP_ERR_MISALIGNED, as recap.h asks of set_state). A write that
 * changes the seed goes to the Python table: torch's set_current_seed also resets state that
 * only it knows (cuDNN's RNN dropout state) and refuses inside a capture. Writing the same seed
 * back only writes the offset, as torch's set_state does after its set_current_seed.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "recap.h"

#define EXPORT __attribute__((visibility("default")))

/* What recap.torch passes as the table's `framework` pointer (mirrored in recap/torch.py). */
typedef struct recap_torch_ctx {
    const recap_framework_ops_t *slow; /* the Python table, for what is not done here */
    void *impl;                        /* the default generator's at::CUDAGeneratorImpl */
} recap_torch_ctx_t;

static size_t state_at;  /* the state pointer's place in an at::CUDAGeneratorImpl */
static size_t seed_at;   /* seed_'s place in an at::CUDAGeneratorState */
static size_t offset_at; /* philox_offset_per_thread_'s */

/* The places recap.torch found (bytes, each a multiple of 8). 0, or -1 when refused. */
EXPORT int recap_torch_bind(size_t state_offset, size_t seed_offset, size_t offset_offset)
{
    if (state_offset % 8 || seed_offset % 8 || offset_offset % 8 || seed_offset == offset_offset)
        return -1;
    state_at = state_offset;
    seed_at = seed_offset;
    offset_at = offset_offset;
    return 0;
}

static uint8_t *state_of(const void *impl)
{
    uint8_t *st;

    memcpy(&st, (const uint8_t *)impl + state_at, sizeof(st));
    return st;
}

static uint64_t field(const uint8_t *st, size_t at)
{
    uint64_t v;

    memcpy(&v, st + at, sizeof(v));
    return v;
}

static recap_status_t load(const void *impl, uint8_t state[RECAP_STATE_BYTES])
{
    const uint8_t *st = state_of(impl);
    uint64_t seed = field(st, seed_at), offset = field(st, offset_at);

    memcpy(state, &seed, sizeof(seed));
    memcpy(state + sizeof(seed), &offset, sizeof(offset));
    return RECAP_OK;
}

/* 1 when written here, 0 when the Python table must do it, or a refusal. */
static int store(void *impl, const uint8_t state[RECAP_STATE_BYTES], recap_status_t *status)
{
    uint8_t *st = state_of(impl);
    uint64_t seed, offset;

    memcpy(&seed, state, sizeof(seed));
    memcpy(&offset, state + sizeof(seed), sizeof(offset));
    if (offset % 4 != 0) {
        *status = RECAP_ERR_MISALIGNED;
        return 1;
    }
    if (seed != field(st, seed_at))
        return 0;
    memcpy(st + offset_at, &offset, sizeof(offset));
    *status = RECAP_OK;
    return 1;
}

/* Every function below takes the table's own argument types, so recap calls them directly. */
EXPORT recap_status_t recap_torch_get_state(void *fw, uint8_t state[RECAP_STATE_BYTES])
{
    return load(((recap_torch_ctx_t *)fw)->impl, state);
}

EXPORT recap_status_t recap_torch_set_state(void *fw, const uint8_t state[RECAP_STATE_BYTES])
{
    recap_torch_ctx_t *c = fw;
    recap_status_t st;

    return store(c->impl, state, &st) ? st : c->slow->set_state(fw, state);
}

/* State objects are at::CUDAGeneratorImpl pointers: recap.torch hands them out as handles. */
EXPORT recap_status_t recap_torch_state_get(void *fw, void *obj,
                                            uint8_t state[RECAP_STATE_BYTES])
{
    (void)fw;
    return load(obj, state);
}

EXPORT recap_status_t recap_torch_state_set(void *fw, void *obj,
                                            const uint8_t state[RECAP_STATE_BYTES])
{
    recap_torch_ctx_t *c = fw;
    recap_status_t st;

    return store(obj, state, &st) ? st : c->slow->state_set(fw, obj, state);
}
