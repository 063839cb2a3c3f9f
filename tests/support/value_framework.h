/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The smallest framework generator recap takes: the value form only, its state a buffer of
 * RECAP_STATE_BYTES the caller owns. For the programs that only need framework generators to
 * exist with given names (tests/base/json_client.c, the fuzzer's tests/fuzz/ops_output.c).
 */
#ifndef RECAP_TESTS_VALUE_FRAMEWORK_H
#define RECAP_TESTS_VALUE_FRAMEWORK_H

#include <string.h>

#include "recap.h"

static inline recap_status_t vf_get_state(void *fw, uint8_t state[RECAP_STATE_BYTES])
{
    memcpy(state, fw, RECAP_STATE_BYTES);
    return RECAP_OK;
}

static inline recap_status_t vf_set_state(void *fw, const uint8_t state[RECAP_STATE_BYTES])
{
    memcpy(fw, state, RECAP_STATE_BYTES);
    return RECAP_OK;
}

/* The ops table, named `name`. */
static inline recap_framework_ops_t vf_ops(const char *name)
{
    recap_framework_ops_t ops = {.version = RECAP_FRAMEWORK_OPS_VERSION, .name = name,
                                 .get_state = vf_get_state, .set_state = vf_set_state};

    return ops;
}

#endif
