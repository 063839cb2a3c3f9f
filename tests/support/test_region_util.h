/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the region suites: a plain engine with a tracker, buffers of floats, and
 * recorded functions that draw dropout masks the way a training step does. */
#ifndef RECAP_TEST_REGION_UTIL_H
#define RECAP_TEST_REGION_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "testutil.h"

/* A plain engine over malloc, a value-mode or graph-safe host tracker (with a host generator and
 * Megatron's per-rank states), and region params for them. */
typedef struct {
    recap_plain_engine_h engine;
    const recap_engine_ops_t *ops;
    recap_generator_h host_gen;
    recap_tracker_h tracker;
    recap_region_params_t params;
} rr_rig_t;

void rr_rig_init(rr_rig_t *rig, uint32_t tracker_flags, int64_t seed);
/* Checks that nothing leaked: no live buffers or bytes, every allocation freed. */
void rr_rig_free(rr_rig_t *rig);
recap_plain_stats_t rr_stats(rr_rig_t *rig);

/* A plain buffer of n floats: values from tu_rand when `fill`. */
recap_buffer_t rr_fbuf(rr_rig_t *rig, size_t n, int needs_grad, int fill);
float *rr_data(recap_buffer_t buf); /* NULL while released */
/* A malloc'd copy of n floats of buf. */
float *rr_copy(recap_buffer_t buf, size_t n);

/* The whole RNG state a snapshot covers, as words drawn from it: equal draws, equal states. */
void rr_draw_all(rr_rig_t *rig, uint32_t *w, size_t per_state);
#define RR_DRAW_WORDS(per) ((2 + 8) * (per))

/* A dropout layer as a checkpointed function: y = dropout_p(gelu(a * x + b)), the mask drawn
 * from the tracker's model-parallel state (forked inside the function) and a jitter from the
 * tracker's current (default) generator, as Megatron's layers do. Counts its runs. */
void rr_dropout_fn(const float *x, float *y, uint64_t n, float a, float b,
                   recap_tracker_h tracker);
extern int rr_dropout_runs;
recap_signature_h rr_dropout_sig(void);
/* The argument values for rr_dropout_fn. */
void rr_dropout_args(recap_value_t *v, recap_buffer_t x, recap_buffer_t y, size_t n, float a,
                     float b, recap_tracker_h t);

#endif
