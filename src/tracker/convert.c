/* SPDX-License-Identifier: Apache-2.0 */
/* Megatron's convert_cuda_rng_state: a state's value form and its graph-safe (object) form. */
#include "config.h"

#include "base/error.h"
#include "base/handle.h"
#include "tracker/tracker.h"

/* A fresh generator rather than the tracker's: converting must not disturb the current one. */
recap_status_t recap_state_to_graph_safe(recap_tracker_h tracker,
                                         const uint8_t state[RECAP_STATE_BYTES],
                                         recap_generator_h *gen_p)
{
    recap_generator_h gen;
    uint64_t seed, offset;
    recap_status_t st;

    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_ARG(state != NULL && gen_p != NULL, "NULL argument");
    st = recap__state_decode(state, &seed, &offset);
    if (st != RECAP_OK)
        return st;
    st = recap_generator_create(tracker->device, &gen);
    if (st != RECAP_OK)
        return st;
    recap__generator_set_value(gen, seed, offset); /* recap's own: cannot fail */
    *gen_p = gen;
    return RECAP_OK;
}

recap_status_t recap_state_from_graph_safe(recap_generator_h gen, uint8_t state[RECAP_STATE_BYTES])
{
    RECAP_CHECK_ARG(gen != NULL && state != NULL, "NULL argument");
    return recap_generator_get_state(gen, state);
}
