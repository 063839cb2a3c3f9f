/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The value operations of recap's framework table for torch's CUDA generators, in C.
 *
 * recap.torch's table is Python: every get or set of a generator's (seed, offset) is a ctypes
 * callback, about 4 us each, and an exact-capture scope over 8 tracker states makes some twenty
 * of them. Here the same reads and writes call torch's own accessors directly
 * (at::CUDAGeneratorImpl::current_seed, philox_offset_per_thread and
 * set_philox_offset_per_thread, exported by libtorch_cuda; recap.torch passes their addresses and
 * checks them against torch's Python API before it uses them), so they cost nanoseconds.
 *
 * Only calls that cannot throw are made here: a C++ exception must never reach these C frames.
 * set_philox_offset_per_thread throws only for an offset that is not a multiple of 4, refused
 * before the call (RECAP_ERR_MISALIGNED, as recap.h asks of set_state). A write that changes the
 * seed needs set_current_seed, which throws inside a capture: it goes to the Python table, which
 * turns torch's error into a status. Writing the same seed back skips set_current_seed, whose
 * only other effect is to flag cuDNN's RNN dropout state for a reset.
 */
#include <stdint.h>
#include <string.h>

#include "recap.h"

#define EXPORT __attribute__((visibility("default")))

typedef uint64_t (*getter_t)(const void *impl);
typedef void (*setter_t)(void *impl, uint64_t value);

/* What recap.torch passes as the table's `framework` pointer (mirrored in recap/torch.py). */
typedef struct recap_torch_ctx {
    const recap_framework_ops_t *slow; /* the Python table, for what is not done here */
    void *impl;                        /* the default generator's at::CUDAGeneratorImpl */
} recap_torch_ctx_t;

static getter_t seed_of;
static getter_t offset_of;
static setter_t set_offset;

/* torch's accessors, found by recap.torch in libtorch_cuda. 0, or -1 for a missing one. */
EXPORT int recap_torch_bind(void *current_seed, void *philox_offset_per_thread,
                            void *set_philox_offset_per_thread)
{
    if (current_seed == NULL || philox_offset_per_thread == NULL ||
        set_philox_offset_per_thread == NULL)
        return -1;
    seed_of = (getter_t)current_seed;
    offset_of = (getter_t)philox_offset_per_thread;
    set_offset = (setter_t)set_philox_offset_per_thread;
    return 0;
}

static void put(uint8_t state[RECAP_STATE_BYTES], uint64_t seed, uint64_t offset)
{
    memcpy(state, &seed, sizeof(seed));
    memcpy(state + sizeof(seed), &offset, sizeof(offset));
}

static recap_status_t load(const void *impl, uint8_t state[RECAP_STATE_BYTES])
{
    put(state, seed_of(impl), offset_of(impl));
    return RECAP_OK;
}

/* 1 when written here, 0 when the Python table must do it, or a refusal. */
static int store(void *impl, const uint8_t state[RECAP_STATE_BYTES], recap_status_t *st)
{
    uint64_t seed, offset;

    memcpy(&seed, state, sizeof(seed));
    memcpy(&offset, state + sizeof(seed), sizeof(offset));
    if (offset % 4 != 0) {
        *st = RECAP_ERR_MISALIGNED;
        return 1;
    }
    if (seed != seed_of(impl))
        return 0;
    set_offset(impl, offset);
    *st = RECAP_OK;
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
