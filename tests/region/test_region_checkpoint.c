/* SPDX-License-Identifier: Apache-2.0 */
/* Full recompute (checkpoint): the backward's recomputed outputs equal the forward's, the RNG
 * goes on as before, the distributed first input, and the calls that are refused. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "test_region_util.h"

static int seen_recording[2], seen_checkpointing[2], seen_pass[2], nseen;
static recap_plain_engine_h probe_host;

static void probe_dropout(const float *x, float *y, uint64_t n, float a, float b,
                          recap_tracker_h t)
{
    recap_plain_stats_t s;

    if (nseen < 2) {
        recap_plain_is_recording(&seen_recording[nseen]);
        recap_is_checkpointing(&seen_checkpointing[nseen]);
        recap_plain_engine_stats(probe_host, &s);
        seen_pass[nseen] = s.context_depth == 1 ? s.context_pass : -1;
    }
    nseen++;
    rr_dropout_fn(x, y, n, a, b, t);
}

START_TEST(backward_recomputes_the_forward_outputs_bit_for_bit)
{
    rr_rig_t rig;
    recap_signature_h sig = rr_dropout_sig();
    size_t n = 1 + tu_rand_below(20000);
    uint32_t expect[RR_DRAW_WORDS(4)], got[RR_DRAW_WORDS(4)];
    recap_buffer_t x, y, out = NULL;
    recap_checkpoint_h ck;
    recap_snapshot_h mid;
    recap_value_t v[6];
    float *fwd;

    rr_rig_init(&rig, _i ? RECAP_TRACKER_GRAPH_SAFE : 0, 1 + (int64_t)tu_rand_below(1u << 30));
    probe_host = rig.engine;
    nseen = 0;
    x = rr_fbuf(&rig, n, 1, 1);
    y = rr_fbuf(&rig, n, 1, 0);
    rr_dropout_args(v, x, y, n, 0.75f, 0.5f, rig.tracker);
    ck_assert_ok(recap_checkpoint_run(&rig.params, sig, (recap_func_t)probe_dropout, v, 6, &ck));
    fwd = rr_copy(y, n);
    ck_assert_uint_eq(rr_stats(&rig).saves, 1);
    rr_draw_all(&rig, got, 4);
    ck_assert_ok(recap_snapshot_create(&mid));
    ck_assert_ok(recap_snapshot_take(rig.tracker, mid));
    ck_assert_ok(recap_checkpoint_backward(ck, &out, 1));
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_ne(out, y); /* a new buffer for the engine to back-propagate through */
    ck_assert_mem_eq(rr_data(out), fwd, n * sizeof(float));
    ck_assert_mem_eq(rr_data(y), fwd, n * sizeof(float)); /* the caller's output untouched */
    ck_assert_int_eq(nseen, 2);
    ck_assert_int_eq(seen_recording[0], 0);
    ck_assert_int_eq(seen_recording[1], 1);
    ck_assert_int_eq(seen_checkpointing[0] + seen_checkpointing[1], 2);
    ck_assert_int_eq(seen_pass[0], RECAP_PASS_FIRST);
    ck_assert_int_eq(seen_pass[1], RECAP_PASS_RECOMPUTE);
    ck_assert_uint_eq(rr_stats(&rig).loads, 1);
    ck_assert_uint_eq(rr_stats(&rig).drops, 1);
    rr_draw_all(&rig, got, 4);
    ck_assert_ok(recap_snapshot_restore(rig.tracker, mid));
    rr_draw_all(&rig, expect, 4);
    ck_assert_mem_eq(got, expect, sizeof(got));
    ck_assert_status(recap_checkpoint_backward(ck, &out, 1), RECAP_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "already ran"));
    free(fwd);
    ck_assert_ok(recap_snapshot_destroy(mid));
    ck_assert_ok(recap_checkpoint_destroy(ck));
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_ok(recap_plain_buffer_destroy(out));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ck_assert_ok(recap_plain_buffer_destroy(y));
    rr_rig_free(&rig);
}
END_TEST

START_TEST(destroy_without_backward_drops_the_inputs)
{
    rr_rig_t rig;
    recap_signature_h sig = rr_dropout_sig();
    size_t n = 1 + tu_rand_below(1000);
    recap_buffer_t x, y;
    recap_checkpoint_h ck;
    recap_value_t v[6];

    rr_rig_init(&rig, 0, 21);
    x = rr_fbuf(&rig, n, 1, 1);
    y = rr_fbuf(&rig, n, 1, 0);
    rr_dropout_args(v, x, y, n, 1.0f, 0.0f, rig.tracker);
    ck_assert_ok(recap_checkpoint_run(&rig.params, sig, (recap_func_t)rr_dropout_fn, v, 6, &ck));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ck_assert_uint_eq(rr_stats(&rig).live_bytes, 2 * n * sizeof(float)); /* y and the stash */
    ck_assert_ok(recap_checkpoint_destroy(ck));
    ck_assert_uint_eq(rr_stats(&rig).live_bytes, n * sizeof(float));
    ck_assert_uint_eq(rr_stats(&rig).drops, 1);
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_ok(recap_plain_buffer_destroy(y));
    rr_rig_free(&rig);
}
END_TEST

START_TEST(refused_checkpoints_and_backwards)
{
    rr_rig_t rig;
    recap_signature_h sig = rr_dropout_sig();
    recap_region_params_t p;
    recap_engine_ops_t ops;
    recap_buffer_t x, y, outs[2];
    recap_checkpoint_h ck = NULL;
    recap_manager_h m;
    recap_value_t v[6];
    int runs;

    rr_rig_init(&rig, 0, 22);
    x = rr_fbuf(&rig, 8, 1, 1);
    y = rr_fbuf(&rig, 8, 1, 0);
    rr_dropout_args(v, x, y, 8, 1.0f, 0.0f, rig.tracker);
    runs = rr_dropout_runs;
    ck_assert_ok(recap_manager_create(rig.ops, rig.engine, &m));
    p = rig.params;
    p.manager = m;
    ck_assert_status(recap_checkpoint_run(&p, sig, (recap_func_t)rr_dropout_fn, v, 6, &ck),
                     RECAP_ERR_INVALID_ARG);
    p = rig.params;
    p.flags = RECAP_REGION_RETAIN_INPUTS;
    ck_assert_status(recap_checkpoint_run(&p, sig, (recap_func_t)rr_dropout_fn, v, 6, &ck),
                     RECAP_ERR_INVALID_ARG);
    p.flags = RECAP_CHECKPOINT_DISTRIBUTE; /* the plain engine cannot distribute */
    ck_assert_status(recap_checkpoint_run(&p, sig, (recap_func_t)rr_dropout_fn, v, 6, &ck),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "all_gather"));
    ops = *rig.ops;
    ops.alloc_like = NULL;
    p = rig.params;
    p.ops = &ops;
    ck_assert_status(recap_checkpoint_run(&p, sig, (recap_func_t)rr_dropout_fn, v, 6, &ck),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_checkpoint_run(&rig.params, sig, NULL, v, 6, &ck),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_checkpoint_run(&rig.params, sig, (recap_func_t)rr_dropout_fn, v, 4,
                                          &ck), RECAP_ERR_INVALID_ARG);
    ck_assert_int_eq(rr_dropout_runs, runs);
    ck_assert_ptr_null(ck);
    ck_assert_ok(recap_checkpoint_run(&rig.params, sig, (recap_func_t)rr_dropout_fn, v, 6, &ck));
    ck_assert_status(recap_checkpoint_backward(ck, outs, 2), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_checkpoint_backward(ck, NULL, 1), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_checkpoint_backward(NULL, outs, 1), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_checkpoint_destroy(ck));
    /* No input needs a gradient: a plain call without a backward. */
    ck_assert_ok(recap_plain_buffer_set_needs_grad(x, 0));
    ck_assert_ok(recap_checkpoint_run(&rig.params, sig, (recap_func_t)rr_dropout_fn, v, 6, &ck));
    ck_assert_uint_eq(rr_stats(&rig).saves, 1);
    ck_assert_status(recap_checkpoint_backward(ck, outs, 1), RECAP_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "plain call"));
    ck_assert_ok(recap_checkpoint_destroy(ck));
    ck_assert_status(recap_checkpoint_destroy(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_manager_destroy(m));
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ck_assert_ok(recap_plain_buffer_destroy(y));
    rr_rig_free(&rig);
}
END_TEST

/*
 * Distribution across a tensor-parallel group of two ranks, simulated in one process: each
 * rank has its own plain engine; distribute keeps this rank's half of the input; all_gather puts
 * the halves back together from this rank's slice and the other rank's, which that rank keeps
 * (here: a copy in `held`, as the other process would hold it).
 */
#define TP 2
static recap_plain_engine_h rank_host[TP];
static float *held[TP];
static size_t held_n;

static int rank_of(void *engine)
{
    return engine == rank_host[0] ? 0 : 1;
}

static recap_status_t tp_distribute(void *engine, recap_buffer_t buf, recap_buffer_t *slice_p)
{
    int r = rank_of(engine);
    size_t bytes;
    void *src, *dst;
    recap_status_t st;

    recap_plain_buffer_bytes(buf, &bytes);
    held_n = bytes / sizeof(float) / TP;
    st = recap_plain_buffer_create(engine, held_n * sizeof(float), 0, slice_p);
    if (st != RECAP_OK)
        return st;
    recap_plain_buffer_data(buf, &src);
    recap_plain_buffer_data(*slice_p, &dst);
    memcpy(dst, (float *)src + (size_t)r * held_n, held_n * sizeof(float));
    held[r] = realloc(held[r], held_n * sizeof(float));
    memcpy(held[r], dst, held_n * sizeof(float));
    return RECAP_OK;
}

static recap_status_t tp_all_gather(void *engine, recap_buffer_t slice, recap_buffer_t *full_p)
{
    int r = rank_of(engine), k;
    recap_status_t st;
    void *mine, *dst;

    st = recap_plain_buffer_create(engine, TP * held_n * sizeof(float), 1, full_p);
    if (st != RECAP_OK)
        return st;
    recap_plain_buffer_data(slice, &mine);
    recap_plain_buffer_data(*full_p, &dst);
    for (k = 0; k < TP; k++)
        memcpy((float *)dst + (size_t)k * held_n, k == r ? mine : held[k],
               held_n * sizeof(float));
    return RECAP_OK;
}

START_TEST(a_distributed_input_keeps_one_slice_and_recomputes_exactly)
{
    rr_rig_t rig[TP];
    recap_engine_ops_t ops;
    recap_signature_h sig = rr_dropout_sig();
    size_t n = TP * (1 + tu_rand_below(5000));
    recap_buffer_t x[TP], y[TP], out[TP];
    recap_checkpoint_h ck[TP];
    recap_value_t v[6];
    float *fwd[TP], *x0 = NULL;
    int r;

    for (r = 0; r < TP; r++) {
        rr_rig_init(&rig[r], 0, 1000 + r); /* ranks draw different masks */
        rank_host[r] = rig[r].engine;
        ops = *rig[r].ops;
        ops.distribute = tp_distribute;
        ops.all_gather = tp_all_gather;
        if (_i == 1) { /* an engine without saved-buffer hooks: the slice handle itself is kept */
            ops.save = NULL;
            ops.load = NULL;
            ops.drop = NULL;
        }
        x[r] = rr_fbuf(&rig[r], n, 1, r == 0);
        if (r == 0)
            x0 = rr_copy(x[0], n);
        memcpy(rr_data(x[r]), x0, n * sizeof(float)); /* the layer input is replicated */
        y[r] = rr_fbuf(&rig[r], n, 1, 0);
    }
    for (r = 0; r < TP; r++) { /* forward on every rank */
        rig[r].params.ops = &ops;
        rig[r].params.flags = RECAP_CHECKPOINT_DISTRIBUTE;
        rr_dropout_args(v, x[r], y[r], n, 1.25f, 0.0f, rig[r].tracker);
        ck_assert_ok(recap_checkpoint_run(&rig[r].params, sig, (recap_func_t)rr_dropout_fn, v,
                                          6, &ck[r]));
        fwd[r] = rr_copy(y[r], n);
        ck_assert_ok(recap_plain_buffer_destroy(x[r])); /* the engine drops its full input */
        ck_assert_uint_eq(rr_stats(&rig[r]).live_bytes, (n + n / TP) * sizeof(float));
    }
    for (r = 0; r < TP; r++) { /* backward on every rank */
        ck_assert_ok(recap_checkpoint_backward(ck[r], &out[r], 1));
        ck_assert_mem_eq(rr_data(out[r]), fwd[r], n * sizeof(float));
        ck_assert_ok(recap_checkpoint_destroy(ck[r]));
        ck_assert_ok(recap_plain_buffer_destroy(out[r]));
        ck_assert_ok(recap_plain_buffer_destroy(y[r]));
        ck_assert_uint_eq(rr_stats(&rig[r]).loads, _i == 1 ? 0 : 1);
        ck_assert_uint_eq(rr_stats(&rig[r]).live_bytes, 0); /* nothing leaked, slice included */
        rr_rig_free(&rig[r]);
        free(fwd[r]);
    }
    for (r = 0; r < TP; r++) {
        free(held[r]);
        held[r] = NULL;
    }
    free(x0);
    ck_assert_ok(recap_signature_destroy(sig));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("region_checkpoint");
    TCase *tc = tcase_create("region_checkpoint");

    tcase_add_loop_test(tc, backward_recomputes_the_forward_outputs_bit_for_bit, 0, 2);
    tcase_add_test(tc, destroy_without_backward_drops_the_inputs);
    tcase_add_test(tc, refused_checkpoints_and_backwards);
    tcase_add_loop_test(tc, a_distributed_input_keeps_one_slice_and_recomputes_exactly, 0, 2);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
