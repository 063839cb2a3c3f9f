/* SPDX-License-Identifier: Apache-2.0 */
/* A generator's state object and its 16-byte form (rng/state.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "rng/framework.h"
#include "rng/port.h"
#include "rng/registry.h"
#include "rng/state.h"

recap__genstate_t *recap__genstate_new(int device, uint64_t seed, uint64_t offset)
{
    recap__genstate_t *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return NULL;
    s->refs = 1;
    s->device = device;
    s->seed = seed;
    s->offset = offset;
    if (device >= 0)
        recap__genstates_add(s);
    return s;
}

void recap__genstate_ref(recap__genstate_t *s)
{
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
}

void recap__genstate_unref(recap__genstate_t *s)
{
    if (s != NULL && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        if (s->fw != NULL) {
            recap__fw_state_release(s);
        } else if (s->device >= 0) {
            recap__genstates_remove(s); /* first: priming and slot lookups no longer find it */
            if (__atomic_load_n(&s->capture, __ATOMIC_ACQUIRE) != NULL)
                recap__port->state_gone(s);
        }
        free(s);
    }
}

static uint64_t load64(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void store64(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

recap_status_t recap__genstate_get_value(recap__genstate_t *gs, uint64_t *seed, uint64_t *offset)
{
    uint64_t rel;

    if (gs->fw != NULL)
        return recap__fw_state_get(gs, seed, offset);
    *seed = load64(&gs->seed);
    *offset = load64(&gs->offset);
    if (recap__genstate_in_capture(gs) && recap__port->rel_get(gs, &rel))
        *offset += rel;
    return RECAP_OK;
}

recap_status_t recap__genstate_set_value(recap__genstate_t *gs, uint64_t seed, uint64_t offset)
{
    if (gs->fw != NULL)
        return recap__fw_state_set(gs, seed, offset);
    if (recap__genstate_in_capture(gs)) {
        uint64_t base = load64(&gs->offset);
        if (recap__port->rel_set(gs, offset - base, seed != load64(&gs->seed), offset < base))
            return RECAP_OK;
    }
    store64(&gs->seed, seed);
    store64(&gs->offset, offset);
    return RECAP_OK;
}

/* A framework generator's fork converts four states: on little-endian hosts (all CUDA hosts)
 * these are plain 8-byte copies (the byte loops showed in bench_tracker's framework fork). */
static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&v, p, sizeof(v));
#else
    int i;

    for (i = 7; i >= 0; i--)
        v = v << 8 | p[i];
#endif
    return v;
}

static void store_le64(uint8_t *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, sizeof(v));
#else
    int i;

    for (i = 0; i < 8; i++, v >>= 8)
        p[i] = (uint8_t)v;
#endif
}

recap_status_t recap__state_decode(const uint8_t state[RECAP_STATE_BYTES], uint64_t *seed,
                                   uint64_t *offset)
{
    uint64_t off = load_le64(state + 8);

    if (off % 4 != 0)
        return recap__fail(RECAP_ERR_MISALIGNED, "offset %llu is not a multiple of 4 (a Philox "
                           "block is four words)", (unsigned long long)off);
    *seed = load_le64(state);
    *offset = off;
    return RECAP_OK;
}

void recap__state_encode(uint64_t seed, uint64_t offset, uint8_t state[RECAP_STATE_BYTES])
{
    store_le64(state, seed);
    store_le64(state + 8, offset);
}
