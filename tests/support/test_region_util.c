/* SPDX-License-Identifier: Apache-2.0 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_region_util.h"

void rr_rig_init(rr_rig_t *rig, uint32_t tracker_flags, int64_t seed)
{
    recap_tracker_params_t tp = {.flags = tracker_flags, .device = RECAP_DEVICE_HOST};
    recap_parallel_ranks_t ranks = {0, 2, 0, 1, 0, 1, 1, 2, 0, 1};

    memset(rig, 0, sizeof(*rig));
    ck_assert_ok(recap_plain_engine_create(RECAP_DEVICE_HOST, 0, &rig->engine));
    ck_assert_ok(recap_plain_engine_ops(&rig->ops));
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &rig->host_gen));
    ck_assert_ok(recap_generator_manual_seed(rig->host_gen, (uint64_t)seed * 31 + 7));
    tp.host_generator = rig->host_gen;
    ck_assert_ok(recap_tracker_create(&tp, &rig->tracker));
    ck_assert_ok(recap_tracker_seed_parallel(rig->tracker, seed, &ranks));
    rig->params = (recap_region_params_t){rig->ops, rig->engine, rig->tracker, NULL, 0};
}

recap_plain_stats_t rr_stats(rr_rig_t *rig)
{
    recap_plain_stats_t s;

    ck_assert_ok(recap_plain_engine_stats(rig->engine, &s));
    return s;
}

void rr_rig_free(rr_rig_t *rig)
{
    recap_plain_stats_t s = rr_stats(rig);

    ck_assert_uint_eq(s.live_buffers, 0);
    ck_assert_uint_eq(s.live_bytes, 0);
    ck_assert_uint_eq(s.allocs, s.frees);
    ck_assert_ok(recap_plain_engine_destroy(rig->engine));
    ck_assert_ok(recap_tracker_destroy(rig->tracker));
    ck_assert_ok(recap_generator_destroy(rig->host_gen));
}

recap_buffer_t rr_fbuf(rr_rig_t *rig, size_t n, int needs_grad, int fill)
{
    recap_buffer_t b;
    float *d;
    size_t i;

    ck_assert_ok(recap_plain_buffer_create(rig->engine, n * sizeof(float), needs_grad, &b));
    d = rr_data(b);
    for (i = 0; fill && i < n; i++)
        d[i] = (float)((double)(tu_rand() >> 11) / 9007199254740992.0 * 4.0 - 2.0);
    return b;
}

float *rr_data(recap_buffer_t buf)
{
    void *d;

    ck_assert_ok(recap_plain_buffer_data(buf, &d));
    return d;
}

float *rr_copy(recap_buffer_t buf, size_t n)
{
    float *c = malloc(n * sizeof(float));

    ck_assert_ptr_nonnull(rr_data(buf));
    memcpy(c, rr_data(buf), n * sizeof(float));
    return c;
}

void rr_draw_all(rr_rig_t *rig, uint32_t *w, size_t per)
{
    recap_generator_h g;
    recap_states_h s;
    const char *name;
    size_t i, n;

    memset(w, 0, RR_DRAW_WORDS(per) * sizeof(*w));
    ck_assert_ok(recap_generator_fill_u32(rig->host_gen, NULL, w, per));
    ck_assert_ok(recap_tracker_generator(rig->tracker, &g));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, w + per, per));
    ck_assert_ok(recap_tracker_get_states(rig->tracker, &s));
    ck_assert_ok(recap_states_count(s, &n));
    ck_assert_uint_le(n, 8);
    for (i = 0; i < n; i++) {
        ck_assert_ok(recap_states_name(s, i, &name));
        tu_fork_draw(rig->tracker, name, w + (2 + i) * per, per);
    }
    ck_assert_ok(recap_states_free(s));
}

int rr_dropout_runs;

/* Runs inside recap: no Check assertions here (a failing one would unwind through libffi);
 * failures leave NaNs that the test's comparisons catch. */
void rr_dropout_fn(const float *x, float *y, uint64_t n, float a, float b, recap_tracker_h t)
{
    float *mask = malloc(n * sizeof(float)), jitter[4];
    recap_fork_token_t tok;
    recap_generator_h g;
    uint64_t i;

    __atomic_add_fetch(&rr_dropout_runs, 1, __ATOMIC_RELAXED); /* rank threads of test_nccl too */
    if (mask == NULL || recap_tracker_generator(t, &g) != RECAP_OK ||
        recap_generator_fill_uniform(g, NULL, jitter, 4) != RECAP_OK ||
        recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok) != RECAP_OK ||
        recap_generator_fill_uniform(g, NULL, mask, n) != RECAP_OK ||
        recap_tracker_unfork(t, tok) != RECAP_OK) {
        for (i = 0; i < n; i++)
            y[i] = NAN;
        free(mask);
        return;
    }
    for (i = 0; i < n; i++) {
        float h = a * x[i] + b + jitter[i % 4] * 1e-3f;
        float gelu = h / (1.0f + expf(-1.702f * h));

        y[i] = mask[i] < 0.1f ? 0.0f : gelu / 0.9f;
    }
    free(mask);
}

recap_signature_h rr_dropout_sig(void)
{
    static const recap_type_t types[] = {RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT,
                                         RECAP_TYPE_UINT64, RECAP_TYPE_FLOAT,
                                         RECAP_TYPE_FLOAT,  RECAP_TYPE_POINTER};
    recap_signature_h s;

    ck_assert_ok(recap_signature_create(RECAP_TYPE_VOID, types, 6, &s));
    return s;
}

void rr_dropout_args(recap_value_t *v, recap_buffer_t x, recap_buffer_t y, size_t n, float a,
                     float b, recap_tracker_h t)
{
    v[0].buf = x;
    v[1].buf = y;
    v[2].u64 = n;
    v[3].f32 = a;
    v[4].f32 = b;
    v[5].ptr = t;
}
