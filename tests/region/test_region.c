/* SPDX-License-Identifier: Apache-2.0 */
/* Regions without output on plain engine buffers: the lifecycle, release and rebuild, triggers,
 * stashed inputs, the recompute context, aliasing and the plain-call case. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "test_region_util.h"

/* What a recorded function saw on each run. */
typedef struct {
    int recording, checkpointing, ctx_depth, ctx_pass;
} seen_t;

static seen_t seen[8];
static int nseen;
static recap_plain_engine_h probe_host;

/* y = 2x + 1, noting the conditions of the run. */
static void probe_fn(const float *x, float *y, uint64_t n)
{
    recap_plain_stats_t s;
    uint64_t i;

    if (nseen < 8) {
        recap_plain_is_recording(&seen[nseen].recording);
        recap_is_checkpointing(&seen[nseen].checkpointing);
        recap_plain_engine_stats(probe_host, &s);
        seen[nseen].ctx_depth = s.context_depth;
        seen[nseen].ctx_pass = s.context_pass;
    }
    nseen++;
    for (i = 0; i < n; i++)
        y[i] = 2.0f * x[i] + 1.0f;
}

static recap_signature_h probe_sig(void)
{
    static const recap_type_t t[] = {RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT, RECAP_TYPE_UINT64};
    recap_signature_h s;

    ck_assert_ok(recap_signature_create(RECAP_TYPE_VOID, t, 3, &s));
    return s;
}

/* A probe region over fresh buffers x (input) and y (output) of n floats. */
typedef struct {
    rr_rig_t rig;
    recap_signature_h sig;
    recap_region_h r;
    recap_buffer_t x, y;
    size_t n;
    recap_value_t v[3];
} probe_t;

static void probe_init(probe_t *p, uint32_t flags, int x_needs_grad)
{
    rr_rig_init(&p->rig, 0, 1 + (int64_t)tu_rand_below(1u << 30));
    probe_host = p->rig.engine;
    nseen = 0;
    p->n = 1 + tu_rand_below(5000);
    p->sig = probe_sig();
    p->x = rr_fbuf(&p->rig, p->n, x_needs_grad, 1);
    p->y = rr_fbuf(&p->rig, p->n, 1, 0);
    p->rig.params.flags = flags;
    ck_assert_ok(recap_region_create(&p->rig.params, &p->r));
    p->v[0].buf = p->x;
    p->v[1].buf = p->y;
    p->v[2].u64 = p->n;
}

static void probe_record(probe_t *p)
{
    ck_assert_ok(recap_region_record(p->r, p->sig, (recap_func_t)probe_fn, p->v, 3));
}

static void probe_free(probe_t *p)
{
    ck_assert_ok(recap_region_destroy(p->r));
    ck_assert_ok(recap_signature_destroy(p->sig));
    ck_assert_ok(recap_plain_buffer_destroy(p->x));
    ck_assert_ok(recap_plain_buffer_destroy(p->y));
    rr_rig_free(&p->rig);
}

static void assert_probe_output(probe_t *p)
{
    float *x = rr_data(p->x), *y = rr_data(p->y);
    size_t i;

    ck_assert_ptr_nonnull(y);
    for (i = 0; i < p->n; i++)
        ck_assert_float_eq(y[i], 2.0f * x[i] + 1.0f);
}

static void assert_state(recap_region_h r, recap_region_state_t want)
{
    recap_region_state_t s;

    ck_assert_ok(recap_region_state(r, &s));
    ck_assert_int_eq(s, want);
}

/* A function calling back into its own region's lifecycle: record, release, rebuild, finish and
 * destroy from inside get RECAP_ERR_STATE and change nothing; the outer call completes (issue 20,
 * defect 7: the nested record was accepted, saved the inputs twice and leaked; a destroy from
 * inside was a use-after-free). */
static probe_t *reenter_probe;
static recap_status_t reenter_st[5];
static int reenter_runs;

static void reenter_fn(const float *x, float *y, uint64_t n)
{
    probe_t *p = reenter_probe;

    reenter_runs++;
    reenter_st[0] = recap_region_record(p->r, p->sig, (recap_func_t)probe_fn, p->v, 3);
    reenter_st[1] = recap_region_release(p->r, NULL);
    reenter_st[2] = recap_region_rebuild(p->r);
    reenter_st[3] = recap_region_finish(p->r);
    reenter_st[4] = recap_region_destroy(p->r);
    probe_fn(x, y, n);
}

static void assert_reentry_refused(void)
{
    int k;

    for (k = 0; k < 5; k++) {
        ck_assert_msg(reenter_st[k] == RECAP_ERR_STATE, "call %d from inside returned %d", k,
                      reenter_st[k]);
        reenter_st[k] = RECAP_OK;
    }
}

START_TEST(lifecycle_calls_from_inside_the_function_are_refused)
{
    probe_t p;

    probe_init(&p, 0, 1);
    reenter_probe = &p;
    ck_assert_ok(recap_region_record(p.r, p.sig, (recap_func_t)reenter_fn, p.v, 3));
    ck_assert_int_eq(reenter_runs, 1);
    ck_assert_int_eq(nseen, 1); /* the nested record ran nothing */
    assert_reentry_refused();
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "inside its own function"));
    assert_state(p.r, RECAP_REGION_RECORDED);
    ck_assert_uint_eq(rr_stats(&p.rig).saves, 1);
    assert_probe_output(&p);

    ck_assert_ok(recap_region_release(p.r, NULL));
    ck_assert_ptr_null(rr_data(p.y));
    ck_assert_ok(recap_region_rebuild(p.r));
    ck_assert_int_eq(reenter_runs, 2);
    assert_reentry_refused();
    assert_state(p.r, RECAP_REGION_REBUILT);
    ck_assert_uint_eq(rr_stats(&p.rig).loads, 1);
    assert_probe_output(&p);
    ck_assert_ok(recap_region_finish(p.r));
    probe_free(&p); /* no leak: rr_rig_free checks */
}
END_TEST

/* recap's plain engine operations with an engine that is not a live plain engine (NULL, or one
 * destroyed) are refused at creation: every operation would dereference it (issue 20, defect 8:
 * accepted, then record crashed). */
START_TEST(plain_host_operations_need_a_live_plain_host)
{
    rr_rig_t rig;
    recap_region_params_t p;
    recap_region_h r = NULL;
    recap_manager_h m = NULL;
    recap_plain_engine_h gone;

    rr_rig_init(&rig, 0, 7);
    p = rig.params;
    p.host = NULL;
    ck_assert_status(recap_region_create(&p, &r), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "plain engine"));
    ck_assert_ptr_null(r);
    ck_assert_status(recap_manager_create(rig.ops, NULL, &m), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_null(m);
    {
        recap_signature_h sig = probe_sig();
        recap_checkpoint_h c = NULL;
        recap_value_t v[3];

        v[0].buf = rr_fbuf(&rig, 4, 1, 1);
        v[1].buf = rr_fbuf(&rig, 4, 1, 0);
        v[2].u64 = 4;
        nseen = 0;
        ck_assert_status(recap_checkpoint_run(&p, sig, (recap_func_t)probe_fn, v, 3, &c),
                         RECAP_ERR_INVALID_ARG);
        ck_assert_ptr_nonnull(strstr(recap_last_error(), "plain engine"));
        ck_assert_ptr_null(c);
        ck_assert_int_eq(nseen, 0);
        ck_assert_ok(recap_plain_buffer_destroy(v[0].buf));
        ck_assert_ok(recap_plain_buffer_destroy(v[1].buf));
        ck_assert_ok(recap_signature_destroy(sig));
    }
    ck_assert_ok(recap_plain_engine_create(RECAP_DEVICE_HOST, 0, &gone));
    ck_assert_ok(recap_plain_engine_destroy(gone));
    p.host = gone;
    ck_assert_status(recap_region_create(&p, &r), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_manager_create(rig.ops, gone, &m), RECAP_ERR_INVALID_ARG);
    /* The live host works. */
    ck_assert_ok(recap_region_create(&rig.params, &r));
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_ok(recap_manager_create(rig.ops, rig.engine, &m));
    ck_assert_ok(recap_manager_destroy(m));
    rr_rig_free(&rig);
}
END_TEST

START_TEST(record_runs_once_without_recording_and_stashes_inputs)
{
    probe_t p;
    int flag = -1;

    probe_init(&p, 0, 1);
    probe_record(&p);
    ck_assert_int_eq(nseen, 1);
    ck_assert_int_eq(seen[0].recording, 0);
    ck_assert_int_eq(seen[0].checkpointing, 1);
    ck_assert_int_eq(seen[0].ctx_depth, 1);
    ck_assert_int_eq(seen[0].ctx_pass, RECAP_PASS_FIRST);
    ck_assert_ok(recap_plain_is_recording(&flag));
    ck_assert_int_eq(flag, 1); /* the engine's mode is back */
    ck_assert_ok(recap_is_checkpointing(&flag));
    ck_assert_int_eq(flag, 0);
    assert_probe_output(&p);
    assert_state(p.r, RECAP_REGION_RECORDED);
    ck_assert_uint_eq(rr_stats(&p.rig).saves, 1);
    ck_assert_uint_eq(rr_stats(&p.rig).loads, 0);
    ck_assert_uint_eq(rr_stats(&p.rig).context_first, 1);
    ck_assert_uint_eq(rr_stats(&p.rig).context_depth, 0);
    probe_free(&p);
}
END_TEST

START_TEST(release_frees_output_storage_and_keeps_the_handle)
{
    probe_t p;
    recap_plain_stats_t before, after;
    size_t bytes = 0;

    probe_init(&p, 0, 1);
    probe_record(&p);
    before = rr_stats(&p.rig);
    ck_assert_ok(recap_region_release(p.r, NULL));
    after = rr_stats(&p.rig);
    assert_state(p.r, RECAP_REGION_RELEASED);
    ck_assert_ptr_null(rr_data(p.y));
    ck_assert_ok(recap_plain_buffer_bytes(p.y, &bytes));
    ck_assert_uint_eq(bytes, p.n * sizeof(float));
    ck_assert_uint_eq(before.live_bytes - after.live_bytes, p.n * sizeof(float));
    ck_assert_uint_eq(after.storage_frees, 1);
    ck_assert_ptr_nonnull(rr_data(p.x)); /* the input is the engine's */
    probe_free(&p);
}
END_TEST

START_TEST(rebuild_reruns_with_recording_in_the_recompute_context)
{
    probe_t p;
    recap_plain_stats_t s;

    probe_init(&p, 0, 1);
    probe_record(&p);
    ck_assert_ok(recap_region_release(p.r, NULL));
    ck_assert_ok(recap_region_rebuild(p.r));
    assert_state(p.r, RECAP_REGION_REBUILT);
    ck_assert_int_eq(nseen, 2);
    ck_assert_int_eq(seen[1].recording, 1);
    ck_assert_int_eq(seen[1].checkpointing, 1);
    ck_assert_int_eq(seen[1].ctx_depth, 1);
    ck_assert_int_eq(seen[1].ctx_pass, RECAP_PASS_RECOMPUTE);
    assert_probe_output(&p);
    s = rr_stats(&p.rig);
    ck_assert_uint_eq(s.context_first, 1);
    ck_assert_uint_eq(s.context_recompute, 1);
    ck_assert_uint_eq(s.shares, 1);
    ck_assert_ok(recap_region_finish(p.r));
    assert_state(p.r, RECAP_REGION_DONE);
    probe_free(&p);
}
END_TEST

START_TEST(opting_out_of_the_context_skips_it_in_both_passes)
{
    probe_t p;

    probe_init(&p, RECAP_REGION_NO_CONTEXT, 1);
    probe_record(&p);
    ck_assert_ok(recap_region_release(p.r, NULL));
    ck_assert_ok(recap_region_rebuild(p.r));
    ck_assert_int_eq(seen[0].ctx_depth, 0);
    ck_assert_int_eq(seen[1].ctx_depth, 0);
    ck_assert_uint_eq(rr_stats(&p.rig).context_first, 0);
    ck_assert_uint_eq(rr_stats(&p.rig).context_recompute, 0);
    assert_probe_output(&p);
    probe_free(&p);
}
END_TEST

START_TEST(inputs_are_read_back_exactly_once)
{
    probe_t p;
    recap_buffer_t trig;
    int k;

    probe_init(&p, 0, 1);
    trig = rr_fbuf(&p.rig, 1, 1, 0);
    probe_record(&p);
    ck_assert_ok(recap_region_release(p.r, trig));
    ck_assert_uint_eq(rr_stats(&p.rig).loads, 0);
    for (k = 0; k < 3; k++)
        ck_assert_ok(recap_plain_buffer_fire(trig));
    ck_assert_uint_eq(rr_stats(&p.rig).saves, 1);
    ck_assert_uint_eq(rr_stats(&p.rig).loads, 1);
    ck_assert_uint_eq(rr_stats(&p.rig).drops, 1);
    ck_assert_ok(recap_region_finish(p.r));
    ck_assert_uint_eq(rr_stats(&p.rig).loads, 1);
    ck_assert_ok(recap_plain_buffer_destroy(trig));
    probe_free(&p);
}
END_TEST

START_TEST(the_first_trigger_rebuilds_and_later_ones_do_nothing)
{
    probe_t p;
    recap_buffer_t trig;

    probe_init(&p, 0, 1);
    trig = rr_fbuf(&p.rig, 4, 1, 0);
    probe_record(&p);
    ck_assert_ok(recap_region_release(p.r, trig));
    ck_assert_uint_eq(rr_stats(&p.rig).triggers_armed, 1);
    ck_assert_int_eq(nseen, 1);
    ck_assert_ok(recap_plain_buffer_fire(trig));
    assert_state(p.r, RECAP_REGION_REBUILT);
    ck_assert_int_eq(nseen, 2);
    assert_probe_output(&p);
    ck_assert_ok(recap_plain_buffer_fire(trig));
    ck_assert_int_eq(nseen, 2);
    ck_assert_ok(recap_region_finish(p.r));
    ck_assert_ok(recap_plain_buffer_fire(trig)); /* removed at finish */
    ck_assert_uint_eq(rr_stats(&p.rig).triggers_fired, 2);
    ck_assert_int_eq(nseen, 2);
    ck_assert_ok(recap_plain_buffer_destroy(trig));
    probe_free(&p);
}
END_TEST

START_TEST(a_trigger_buffer_without_gradient_arms_nothing)
{
    probe_t p;
    recap_buffer_t trig;

    probe_init(&p, 0, 1);
    trig = rr_fbuf(&p.rig, 4, 0, 0);
    probe_record(&p);
    ck_assert_ok(recap_region_release(p.r, trig));
    ck_assert_uint_eq(rr_stats(&p.rig).triggers_armed, 0);
    ck_assert_ok(recap_plain_buffer_fire(trig));
    assert_state(p.r, RECAP_REGION_RELEASED);
    ck_assert_ok(recap_plain_buffer_destroy(trig));
    probe_free(&p);
}
END_TEST

START_TEST(a_host_without_triggers_is_rebuilt_explicitly)
{
    probe_t p;
    recap_engine_ops_t ops;
    recap_buffer_t trig;

    probe_init(&p, 0, 1);
    ops = *p.rig.ops;
    ops.add_trigger = NULL;
    ops.remove_trigger = NULL;
    ck_assert_ok(recap_region_destroy(p.r));
    p.rig.params.ops = &ops;
    ck_assert_ok(recap_region_create(&p.rig.params, &p.r));
    trig = rr_fbuf(&p.rig, 1, 1, 0);
    probe_record(&p);
    ck_assert_status(recap_region_release(p.r, trig), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "add_trigger"));
    assert_state(p.r, RECAP_REGION_RECORDED);
    ck_assert_ptr_nonnull(rr_data(p.y)); /* nothing released */
    ck_assert_ok(recap_region_release(p.r, NULL));
    ck_assert_ok(recap_region_rebuild(p.r));
    assert_probe_output(&p);
    ops.remove_trigger = p.rig.ops->remove_trigger; /* one of the pair only */
    ck_assert_status(recap_region_create(&p.rig.params, &p.r), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_plain_buffer_destroy(trig));
    probe_free(&p);
}
END_TEST

/* Every step but the next one is refused, with a message, and changes nothing. */
static void assert_refused(probe_t *p, recap_region_state_t at, int record, int release,
                           int rebuild, int finish)
{
    if (record) {
        ck_assert_status(recap_region_record(p->r, p->sig, (recap_func_t)probe_fn, p->v, 3),
                         RECAP_ERR_STATE);
        ck_assert_ptr_nonnull(strstr(recap_last_error(), "record of a"));
    }
    if (release)
        ck_assert_status(recap_region_release(p->r, NULL), RECAP_ERR_STATE);
    if (rebuild)
        ck_assert_status(recap_region_rebuild(p->r), RECAP_ERR_STATE);
    if (finish) {
        ck_assert_status(recap_region_finish(p->r), RECAP_ERR_STATE);
        ck_assert_ptr_nonnull(strstr(recap_last_error(), "needs REBUILT"));
    }
    assert_state(p->r, at);
}

START_TEST(the_lifecycle_only_moves_forward_one_step_at_a_time)
{
    probe_t p;

    probe_init(&p, 0, 1);
    assert_refused(&p, RECAP_REGION_NEW, 0, 1, 1, 1);
    probe_record(&p);
    assert_refused(&p, RECAP_REGION_RECORDED, 1, 0, 1, 1);
    ck_assert_ok(recap_region_release(p.r, NULL));
    assert_refused(&p, RECAP_REGION_RELEASED, 1, 1, 0, 1);
    ck_assert_ok(recap_region_rebuild(p.r));
    assert_refused(&p, RECAP_REGION_REBUILT, 1, 1, 1, 0);
    ck_assert_ok(recap_region_finish(p.r));
    assert_refused(&p, RECAP_REGION_DONE, 1, 1, 1, 1);
    ck_assert_int_eq(nseen, 2);
    ck_assert_uint_eq(rr_stats(&p.rig).loads, 1);
    probe_free(&p);
}
END_TEST

START_TEST(destroy_without_rebuild_frees_everything)
{
    probe_t p;
    recap_plain_stats_t s;

    probe_init(&p, 0, 1);
    probe_record(&p);
    ck_assert_ok(recap_region_release(p.r, NULL));
    /* The engine lets go of its input: the stash still holds its storage. */
    ck_assert_ok(recap_plain_buffer_destroy(p.x));
    s = rr_stats(&p.rig);
    ck_assert_uint_eq(s.live_bytes, p.n * sizeof(float));
    ck_assert_ok(recap_region_destroy(p.r));
    s = rr_stats(&p.rig);
    ck_assert_uint_eq(s.live_bytes, 0);
    ck_assert_uint_eq(s.drops, 1);
    ck_assert_uint_eq(s.loads, 0);
    ck_assert_uint_eq(s.frees, 2); /* the input (at the drop) and the released output */
    ck_assert_ok(recap_plain_buffer_destroy(p.y));
    ck_assert_ok(recap_signature_destroy(p.sig));
    ck_assert_int_eq(nseen, 1);
    rr_rig_free(&p.rig);
}
END_TEST

START_TEST(a_region_without_gradient_is_a_plain_call)
{
    probe_t p;
    recap_plain_stats_t s;
    uint32_t before[RR_DRAW_WORDS(4)], after[RR_DRAW_WORDS(4)];
    recap_snapshot_h snap;
    int plain = -1;

    probe_init(&p, 0, 0);
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_snapshot_take(p.rig.tracker, snap));
    ck_assert_status(recap_region_is_plain(p.r, &plain), RECAP_ERR_STATE);
    probe_record(&p);
    ck_assert_ok(recap_region_is_plain(p.r, &plain));
    ck_assert_int_eq(plain, 1);
    ck_assert_int_eq(seen[0].recording, 1); /* the engine's mode, untouched */
    ck_assert_ok(recap_region_release(p.r, p.y));
    assert_probe_output(&p); /* nothing released */
    ck_assert_ok(recap_region_rebuild(p.r));
    ck_assert_ok(recap_region_finish(p.r));
    ck_assert_int_eq(nseen, 1);
    s = rr_stats(&p.rig);
    ck_assert_uint_eq(s.saves + s.loads + s.storage_frees + s.shares + s.triggers_armed, 0);
    /* It took no snapshot and left the RNG alone. */
    rr_draw_all(&p.rig, after, 4);
    ck_assert_ok(recap_snapshot_restore(p.rig.tracker, snap));
    rr_draw_all(&p.rig, before, 4);
    ck_assert_mem_eq(before, after, sizeof(before));
    ck_assert_ok(recap_snapshot_destroy(snap));
    probe_free(&p);
}
END_TEST

/* A dropout layer: the rebuild redraws the forward's mask, and the RNG goes on from where it
 * was before the rebuild. */
/* The end of a dropout-region test: what it made besides its regions and snapshots. */
static void dropout_done(rr_rig_t *rig, recap_signature_h sig, float *fwd, recap_buffer_t x,
                         recap_buffer_t y)
{
    free(fwd);
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ck_assert_ok(recap_plain_buffer_destroy(y));
    rr_rig_free(rig);
}

START_TEST(rebuild_redraws_the_forward_dropout_bit_for_bit)
{
    rr_rig_t rig;
    recap_signature_h sig = rr_dropout_sig();
    size_t n = 1 + tu_rand_below(20000), k = 1 + tu_rand_below(64);
    uint32_t expect[RR_DRAW_WORDS(8)], got[RR_DRAW_WORDS(8)];
    recap_snapshot_h mid;
    recap_buffer_t x, y;
    recap_region_h r;
    recap_value_t v[6];
    float *fwd;

    rr_rig_init(&rig, _i ? RECAP_TRACKER_GRAPH_SAFE : 0, 1 + (int64_t)tu_rand_below(1u << 30));
    x = rr_fbuf(&rig, n, 1, 1);
    y = rr_fbuf(&rig, n, 1, 0);
    rr_draw_all(&rig, got, k % 8 + 1); /* some earlier draws */
    rr_dropout_args(v, x, y, n, 1.5f, -0.25f, rig.tracker);
    ck_assert_ok(recap_region_create(&rig.params, &r));
    ck_assert_ok(recap_region_record(r, sig, (recap_func_t)rr_dropout_fn, v, 6));
    fwd = rr_copy(y, n);
    ck_assert_ok(recap_region_release(r, NULL));
    rr_draw_all(&rig, got, 8); /* the rest of the step draws on */
    ck_assert_ok(recap_snapshot_create(&mid));
    ck_assert_ok(recap_snapshot_take(rig.tracker, mid));
    ck_assert_ok(recap_region_rebuild(r));
    ck_assert_mem_eq(rr_data(y), fwd, n * sizeof(float));
    rr_draw_all(&rig, got, 8);
    ck_assert_ok(recap_snapshot_restore(rig.tracker, mid));
    rr_draw_all(&rig, expect, 8);
    ck_assert_mem_eq(got, expect, sizeof(got));
    ck_assert_ok(recap_snapshot_destroy(mid));
    ck_assert_ok(recap_region_destroy(r));
    dropout_done(&rig, sig, fwd, x, y);
}
END_TEST

/* Recorded inside fork(model-parallel) and rebuilt outside it or inside another fork (or the
 * other way round): the recompute runs in the fork its first run ran in, so its nested fork of
 * the same name draws as the first did; the forks open around the rebuild see nothing of it.
 * A graph-safe tracker cannot restore outside-fork work inside a fork: RECAP_ERR_STATE, nothing
 * changed (include/recap.h, recap_snapshot_restore). */
START_TEST(rebuild_runs_in_the_fork_the_first_run_ran_in)
{
    int graph_safe = _i & 1, recorded_in_fork = !(_i & 2), rebuilt_in_fork = !recorded_in_fork ||
                     tu_rand_below(2);
    rr_rig_t rig;
    recap_signature_h sig = rr_dropout_sig();
    size_t n = 1 + tu_rand_below(5000);
    uint32_t expect[RR_DRAW_WORDS(8)], got[RR_DRAW_WORDS(8)];
    recap_fork_token_t tok;
    recap_snapshot_h mid;
    recap_buffer_t x, y;
    recap_region_h r;
    recap_value_t v[6];
    recap_status_t st;
    float *fwd;

    rr_rig_init(&rig, graph_safe ? RECAP_TRACKER_GRAPH_SAFE : 0,
                1 + (int64_t)tu_rand_below(1u << 30));
    x = rr_fbuf(&rig, n, 1, 1);
    y = rr_fbuf(&rig, n, 1, 0);
    rr_draw_all(&rig, got, 1 + tu_rand_below(8));
    rr_dropout_args(v, x, y, n, 1.5f, -0.25f, rig.tracker);
    ck_assert_ok(recap_region_create(&rig.params, &r));
    if (recorded_in_fork)
        ck_assert_ok(recap_tracker_fork(rig.tracker, RECAP_RNG_MODEL_PARALLEL, &tok));
    ck_assert_ok(recap_region_record(r, sig, (recap_func_t)rr_dropout_fn, v, 6));
    if (recorded_in_fork)
        ck_assert_ok(recap_tracker_unfork(rig.tracker, tok));
    fwd = rr_copy(y, n);
    ck_assert_ok(recap_region_release(r, NULL));
    rr_draw_all(&rig, got, 8);
    ck_assert_ok(recap_snapshot_create(&mid));
    ck_assert_ok(recap_snapshot_take(rig.tracker, mid));
    if (rebuilt_in_fork)
        ck_assert_ok(recap_tracker_fork(rig.tracker, RECAP_RNG_EXPERT_PARALLEL, &tok));
    st = recap_region_rebuild(r);
    if (graph_safe && !recorded_in_fork) {
        ck_assert_status(st, RECAP_ERR_STATE);
    } else {
        ck_assert_ok(st);
        ck_assert_mem_eq(rr_data(y), fwd, n * sizeof(float));
    }
    rr_draw_all(&rig, got, 8); /* inside the rebuild's fork, if any, and after it */
    if (rebuilt_in_fork)
        ck_assert_ok(recap_tracker_unfork(rig.tracker, tok));
    rr_draw_all(&rig, got + RR_DRAW_WORDS(4), 4);
    ck_assert_ok(recap_snapshot_restore(rig.tracker, mid)); /* the same without the rebuild */
    if (rebuilt_in_fork)
        ck_assert_ok(recap_tracker_fork(rig.tracker, RECAP_RNG_EXPERT_PARALLEL, &tok));
    rr_draw_all(&rig, expect, 8);
    if (rebuilt_in_fork)
        ck_assert_ok(recap_tracker_unfork(rig.tracker, tok));
    rr_draw_all(&rig, expect + RR_DRAW_WORDS(4), 4);
    ck_assert_mem_eq(got, expect, sizeof(got));
    ck_assert_ok(recap_snapshot_destroy(mid));
    ck_assert_ok(recap_region_destroy(r));
    dropout_done(&rig, sig, fwd, x, y);
}
END_TEST

/* A region or checkpoint keeps its tracker: destroying the tracker (or replacing the default
 * one) while they live is RECAP_ERR_STATE and changes nothing; the rebuild still works after. */
START_TEST(a_tracker_in_use_by_regions_is_not_destroyed)
{
    rr_rig_t rig;
    recap_signature_h sig = rr_dropout_sig();
    size_t n = 1 + tu_rand_below(3000);
    recap_tracker_params_t dp = {.device = RECAP_DEVICE_HOST};
    recap_tracker_h dflt, again;
    recap_checkpoint_h ck;
    recap_buffer_t x, y, y2;
    recap_region_h r;
    recap_value_t v[6];
    float *fwd;

    rr_rig_init(&rig, _i ? RECAP_TRACKER_GRAPH_SAFE : 0, 1 + (int64_t)tu_rand_below(1u << 30));
    x = rr_fbuf(&rig, n, 1, 1);
    y = rr_fbuf(&rig, n, 1, 0);
    y2 = rr_fbuf(&rig, n, 1, 0);
    rr_dropout_args(v, x, y, n, 0.5f, 0.25f, rig.tracker);
    ck_assert_ok(recap_region_create(&rig.params, &r));
    ck_assert_ok(recap_region_record(r, sig, (recap_func_t)rr_dropout_fn, v, 6));
    rr_dropout_args(v, x, y2, n, 0.5f, 0.25f, rig.tracker);
    ck_assert_ok(recap_checkpoint_run(&rig.params, sig, (recap_func_t)rr_dropout_fn, v, 6, &ck));
    fwd = rr_copy(y, n);
    ck_assert_ok(recap_region_release(r, NULL));
    ck_assert_status(recap_tracker_destroy(rig.tracker), RECAP_ERR_STATE);
    ck_assert_msg(strstr(recap_last_error(), "2 recompute region(s)") != NULL, "%s",
                  recap_last_error());
    ck_assert_ok(recap_region_rebuild(r)); /* the tracker is intact */
    ck_assert_mem_eq(rr_data(y), fwd, n * sizeof(float));
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_status(recap_tracker_destroy(rig.tracker), RECAP_ERR_STATE);
    ck_assert_ok(recap_checkpoint_destroy(ck));
    /* the default tracker: force_reset refuses while a region holds it, and keeps it */
    ck_assert_ok(recap_default_tracker_initialize(&dp, 0, &dflt));
    rig.params.tracker = dflt;
    ck_assert_ok(recap_region_create(&rig.params, &r));
    ck_assert_status(recap_default_tracker_initialize(&dp, 1, &again), RECAP_ERR_STATE);
    ck_assert_ok(recap_default_tracker_get(&again));
    ck_assert_ptr_eq(again, dflt);
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_ok(recap_default_tracker_initialize(&dp, 1, &again));
    ck_assert_ok(recap_plain_buffer_destroy(y2));
    dropout_done(&rig, sig, fwd, x, y);
}
END_TEST

/* in-out: x is input 0 and also handed back as output 1 (unchanged); z = 2x + 1 is output 2. */
static int alias_runs;
static void alias_fn(const float *x, float *x_again, float *z, uint64_t n)
{
    uint64_t i;

    alias_runs++;
    for (i = 0; i < n; i++)
        z[i] = 2.0f * x[i] + 1.0f;
}

static recap_region_h alias_region(rr_rig_t *rig, uint32_t flags, recap_buffer_t x,
                                   recap_buffer_t z, size_t n)
{
    static const recap_type_t t[] = {RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT,
                                     RECAP_TYPE_BUFFER_OUT, RECAP_TYPE_UINT64};
    recap_value_t v[4] = {{.buf = x}, {.buf = x}, {.buf = z}, {.u64 = n}};
    recap_signature_h sig;
    recap_region_h r;

    ck_assert_ok(recap_signature_create(RECAP_TYPE_VOID, t, 4, &sig));
    rig->params.flags = flags;
    ck_assert_ok(recap_region_create(&rig->params, &r));
    ck_assert_ok(recap_region_record(r, sig, (recap_func_t)alias_fn, v, 4));
    ck_assert_ok(recap_signature_destroy(sig)); /* the region keeps its own reference */
    return r;
}

START_TEST(retained_inputs_keep_outputs_that_alias_them)
{
    rr_rig_t rig;
    size_t n = 1 + tu_rand_below(4000);
    recap_buffer_t x, z;
    recap_region_h r;
    float *x0, *z0;

    rr_rig_init(&rig, 0, 5);
    x = rr_fbuf(&rig, n, 1, 1);
    z = rr_fbuf(&rig, n, 1, 0);
    alias_runs = 0;
    r = alias_region(&rig, RECAP_REGION_RETAIN_INPUTS, x, z, n);
    x0 = rr_copy(x, n);
    z0 = rr_copy(z, n);
    ck_assert_ok(recap_region_release(r, NULL));
    ck_assert_ptr_nonnull(rr_data(x));
    ck_assert_ptr_null(rr_data(z));
    ck_assert_uint_eq(rr_stats(&rig).storage_frees, 1);
    ck_assert_ok(recap_region_rebuild(r));
    ck_assert_int_eq(alias_runs, 2);
    ck_assert_mem_eq(rr_data(x), x0, n * sizeof(float));
    ck_assert_mem_eq(rr_data(z), z0, n * sizeof(float));
    ck_assert_uint_eq(rr_stats(&rig).shares, 1);
    free(x0);
    free(z0);
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ck_assert_ok(recap_plain_buffer_destroy(z));
    rr_rig_free(&rig);
}
END_TEST

START_TEST(without_retain_an_aliasing_output_is_released_with_its_input)
{
    rr_rig_t rig;
    size_t n = 1 + tu_rand_below(4000);
    recap_buffer_t x, z;
    recap_region_h r;

    rr_rig_init(&rig, 0, 6);
    x = rr_fbuf(&rig, n, 1, 1);
    z = rr_fbuf(&rig, n, 1, 0);
    alias_runs = 0;
    r = alias_region(&rig, 0, x, z, n);
    ck_assert_ok(recap_region_release(r, NULL));
    ck_assert_ptr_null(rr_data(x));
    ck_assert_ptr_null(rr_data(z));
    ck_assert_uint_eq(rr_stats(&rig).storage_frees, 2);
    /* The input went with it: the rebuild says so instead of reading freed memory. */
    ck_assert_status(recap_region_rebuild(r), RECAP_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "buffer_arg (argument 0)"));
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "no storage"));
    ck_assert_int_eq(alias_runs, 1);
    assert_state(r, RECAP_REGION_RELEASED);
    ck_assert_uint_eq(rr_stats(&rig).live_buffers, 3); /* x, z and the stash: nothing leaked */
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ck_assert_ok(recap_plain_buffer_destroy(z));
    rr_rig_free(&rig);
}
END_TEST

/* A host whose alloc_like fails on demand. */
static recap_engine_ops_t failing_ops;
static int fail_alloc;
static recap_status_t failing_alloc_like(void *engine, recap_buffer_t like, recap_buffer_t *buf_p)
{
    const recap_engine_ops_t *plain;

    if (fail_alloc)
        return RECAP_ERR_NO_MEMORY;
    recap_plain_engine_ops(&plain);
    return plain->alloc_like(engine, like, buf_p);
}

START_TEST(a_failing_host_operation_leaves_the_region_released_for_a_retry)
{
    probe_t p;
    const recap_engine_ops_t *plain;

    ck_assert_ok(recap_plain_engine_ops(&plain));
    failing_ops = *plain;
    failing_ops.alloc_like = failing_alloc_like;
    probe_init(&p, 0, 1);
    ck_assert_ok(recap_region_destroy(p.r));
    p.rig.params.ops = &failing_ops;
    ck_assert_ok(recap_region_create(&p.rig.params, &p.r));
    probe_record(&p);
    ck_assert_ok(recap_region_release(p.r, NULL));
    fail_alloc = 1;
    ck_assert_status(recap_region_rebuild(p.r), RECAP_ERR_NO_MEMORY);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "alloc_like (argument 1)"));
    assert_state(p.r, RECAP_REGION_RELEASED);
    ck_assert_int_eq(nseen, 1);
    fail_alloc = 0;
    ck_assert_ok(recap_region_rebuild(p.r));
    assert_probe_output(&p);
    ck_assert_uint_eq(rr_stats(&p.rig).drops, 1);
    probe_free(&p);
}
END_TEST

/* The plain engine's pool: kept storage goes to the next allocation of exactly its size, every
 * other size gets new memory, and the held bytes account for what is kept. */
START_TEST(reuse_freed_hands_kept_storage_to_the_next_allocation_of_its_size)
{
    recap_plain_engine_h keep, reuse;
    recap_buffer_t a, b, c, d;
    recap_plain_stats_t st;
    size_t n = 1 + tu_rand_below(1 << 16);
    void *pa, *pb, *pc, *pd;

    ck_assert_status(recap_plain_engine_create(RECAP_DEVICE_HOST, 1u << 5, &reuse),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_plain_engine_create(RECAP_DEVICE_HOST, RECAP_PLAIN_REUSE_FREED, &reuse));
    ck_assert_ok(recap_plain_buffer_create(reuse, n, 1, &a));
    ck_assert_ok(recap_plain_buffer_data(a, &pa));
    ck_assert_ok(recap_plain_buffer_destroy(a));
    ck_assert_ok(recap_plain_engine_stats(reuse, &st));
    ck_assert_uint_eq(st.live_bytes, 0);
    ck_assert_uint_eq(st.held_bytes, n);
    ck_assert_ok(recap_plain_buffer_create(reuse, n + 1, 1, &c)); /* another size: new memory */
    ck_assert_ok(recap_plain_buffer_data(c, &pc));
    ck_assert_ptr_ne(pc, pa);
    ck_assert_ok(recap_plain_buffer_create(reuse, n, 1, &b));
    ck_assert_ok(recap_plain_buffer_data(b, &pb));
    ck_assert_ptr_eq(pb, pa);
    ck_assert_ok(recap_plain_engine_stats(reuse, &st));
    ck_assert_uint_eq(st.live_bytes, 2 * n + 1);
    ck_assert_uint_eq(st.held_bytes, 0);
    ck_assert_uint_eq(st.allocs, 3);
    ck_assert_ok(recap_plain_buffer_destroy(b));
    ck_assert_ok(recap_plain_buffer_destroy(c));
    ck_assert_ok(recap_plain_engine_stats(reuse, &st));
    ck_assert_uint_eq(st.held_bytes, 2 * n + 1);
    ck_assert_ok(recap_plain_engine_destroy(reuse)); /* gives the kept memory back (valgrind) */

    ck_assert_ok(recap_plain_engine_create(RECAP_DEVICE_HOST, RECAP_PLAIN_KEEP_FREED, &keep));
    ck_assert_ok(recap_plain_buffer_create(keep, n, 1, &a));
    ck_assert_ok(recap_plain_buffer_data(a, &pa));
    ck_assert_ok(recap_plain_buffer_destroy(a));
    ck_assert_ok(recap_plain_buffer_create(keep, n, 1, &d)); /* kept, never reused */
    ck_assert_ok(recap_plain_buffer_data(d, &pd));
    ck_assert_ptr_ne(pd, pa);
    ck_assert_ok(recap_plain_engine_stats(keep, &st));
    ck_assert_uint_eq(st.held_bytes, n);
    ck_assert_uint_eq(st.live_bytes, n);
    ck_assert_ok(recap_plain_buffer_destroy(d));
    ck_assert_ok(recap_plain_engine_destroy(keep));
}
END_TEST

START_TEST(bad_arguments_are_rejected_with_a_message)
{
    probe_t p;
    recap_region_params_t bad;
    recap_engine_ops_t ops;
    recap_region_h r = NULL;
    recap_region_state_t s;
    recap_buffer_t buf;

    probe_init(&p, 0, 1);
    ck_assert_status(recap_region_create(NULL, &r), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_region_create(&p.rig.params, NULL), RECAP_ERR_INVALID_ARG);
    bad = p.rig.params;
    bad.ops = NULL;
    ck_assert_status(recap_region_create(&bad, &r), RECAP_ERR_INVALID_ARG);
    bad = p.rig.params;
    bad.flags = RECAP_CHECKPOINT_DISTRIBUTE;
    ck_assert_status(recap_region_create(&bad, &r), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "flags"));
    ops = *p.rig.ops;
    ops.share_storage = NULL;
    bad = p.rig.params;
    bad.ops = &ops;
    ck_assert_status(recap_region_create(&bad, &r), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "share_storage"));
    ops = *p.rig.ops;
    ops.drop = NULL;
    ck_assert_status(recap_region_create(&bad, &r), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_null(r);
    ck_assert_status(recap_region_record(NULL, p.sig, (recap_func_t)probe_fn, p.v, 3),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_region_release(NULL, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_region_rebuild(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_region_finish(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_region_state(NULL, &s), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_region_destroy(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_plain_buffer_fire(p.r), RECAP_ERR_INVALID_ARG); /* not a buffer */
    ck_assert_status(recap_plain_buffer_create(p.rig.engine, 0, 1, &buf), RECAP_ERR_INVALID_ARG);
    probe_free(&p);
}
END_TEST

/* A region recorded inside another region's function: the flag stays up until the outer run
 * ends. */
static int inner_seen, outer_after_inner;
static recap_region_params_t nest_params;
static recap_signature_h nest_sig;

static void inner_fn(const float *x, float *y, uint64_t n)
{
    recap_is_checkpointing(&inner_seen);
    memcpy(y, x, n * sizeof(float));
}

static void outer_fn(const float *x, float *y, uint64_t n)
{
    recap_value_t v[3] = {{.ptr = NULL}, {.ptr = NULL}, {.u64 = n}};
    recap_plain_engine_h h = nest_params.host;
    recap_buffer_t bx, by;
    recap_region_h inner;
    void *d;

    recap_plain_buffer_create(h, n * sizeof(float), 1, &bx);
    recap_plain_buffer_create(h, n * sizeof(float), 1, &by);
    recap_plain_buffer_data(bx, &d);
    memcpy(d, x, n * sizeof(float));
    v[0].buf = bx;
    v[1].buf = by;
    recap_region_create(&nest_params, &inner);
    recap_region_record(inner, nest_sig, (recap_func_t)inner_fn, v, 3);
    recap_is_checkpointing(&outer_after_inner);
    recap_plain_buffer_data(by, &d);
    memcpy(y, d, n * sizeof(float));
    recap_region_destroy(inner);
    recap_plain_buffer_destroy(bx);
    recap_plain_buffer_destroy(by);
}

START_TEST(is_checkpointing_is_true_inside_nested_regions_only)
{
    probe_t p;
    int flag = -1;

    probe_init(&p, 0, 1);
    nest_params = p.rig.params;
    nest_sig = p.sig;
    inner_seen = outer_after_inner = 0;
    ck_assert_ok(recap_is_checkpointing(&flag));
    ck_assert_int_eq(flag, 0);
    ck_assert_ok(recap_region_record(p.r, p.sig, (recap_func_t)outer_fn, p.v, 3));
    ck_assert_int_eq(inner_seen, 1);
    ck_assert_int_eq(outer_after_inner, 1);
    ck_assert_ok(recap_is_checkpointing(&flag));
    ck_assert_int_eq(flag, 0);
    ck_assert_mem_eq(rr_data(p.y), rr_data(p.x), p.n * sizeof(float));
    ck_assert_status(recap_is_checkpointing(NULL), RECAP_ERR_INVALID_ARG);
    probe_free(&p);
}
END_TEST

/* The same handle passed as two outputs is released and rebuilt once. */
static void twice_fn(const float *x, float *y1, float *y2, uint64_t n)
{
    uint64_t i;

    for (i = 0; i < n; i++)
        y1[i] = x[i] * 3.0f;
    (void)y2;
}

START_TEST(an_output_passed_twice_is_released_and_rebuilt_once)
{
    static const recap_type_t t[] = {RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT,
                                     RECAP_TYPE_BUFFER_OUT, RECAP_TYPE_UINT64};
    rr_rig_t rig;
    size_t n = 1 + tu_rand_below(1000);
    recap_buffer_t x, y;
    recap_signature_h sig;
    recap_region_h r;
    recap_value_t v[4];
    float *y0;

    rr_rig_init(&rig, 0, 8);
    x = rr_fbuf(&rig, n, 1, 1);
    y = rr_fbuf(&rig, n, 1, 0);
    v[0].buf = x;
    v[1].buf = y;
    v[2].buf = y;
    v[3].u64 = n;
    ck_assert_ok(recap_signature_create(RECAP_TYPE_VOID, t, 4, &sig));
    ck_assert_ok(recap_region_create(&rig.params, &r));
    ck_assert_ok(recap_region_record(r, sig, (recap_func_t)twice_fn, v, 4));
    y0 = rr_copy(y, n);
    ck_assert_ok(recap_region_release(r, NULL));
    ck_assert_uint_eq(rr_stats(&rig).storage_frees, 1);
    ck_assert_ok(recap_region_rebuild(r));
    ck_assert_uint_eq(rr_stats(&rig).shares, 1);
    ck_assert_mem_eq(rr_data(y), y0, n * sizeof(float));
    free(y0);
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ck_assert_ok(recap_plain_buffer_destroy(y));
    rr_rig_free(&rig);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("region");
    TCase *tc = tcase_create("region");

    tcase_add_test(tc, record_runs_once_without_recording_and_stashes_inputs);
    tcase_add_test(tc, release_frees_output_storage_and_keeps_the_handle);
    tcase_add_test(tc, rebuild_reruns_with_recording_in_the_recompute_context);
    tcase_add_test(tc, opting_out_of_the_context_skips_it_in_both_passes);
    tcase_add_test(tc, inputs_are_read_back_exactly_once);
    tcase_add_test(tc, the_first_trigger_rebuilds_and_later_ones_do_nothing);
    tcase_add_test(tc, a_trigger_buffer_without_gradient_arms_nothing);
    tcase_add_test(tc, a_host_without_triggers_is_rebuilt_explicitly);
    tcase_add_test(tc, the_lifecycle_only_moves_forward_one_step_at_a_time);
    tcase_add_test(tc, destroy_without_rebuild_frees_everything);
    tcase_add_test(tc, a_region_without_gradient_is_a_plain_call);
    tcase_add_loop_test(tc, rebuild_redraws_the_forward_dropout_bit_for_bit, 0, 2);
    tcase_add_loop_test(tc, rebuild_runs_in_the_fork_the_first_run_ran_in, 0, 4);
    tcase_add_loop_test(tc, a_tracker_in_use_by_regions_is_not_destroyed, 0, 2);
    tcase_add_test(tc, retained_inputs_keep_outputs_that_alias_them);
    tcase_add_test(tc, without_retain_an_aliasing_output_is_released_with_its_input);
    tcase_add_test(tc, a_failing_host_operation_leaves_the_region_released_for_a_retry);
    tcase_add_test(tc, bad_arguments_are_rejected_with_a_message);
    tcase_add_test(tc, reuse_freed_hands_kept_storage_to_the_next_allocation_of_its_size);
    tcase_add_test(tc, is_checkpointing_is_true_inside_nested_regions_only);
    tcase_add_test(tc, an_output_passed_twice_is_released_and_rebuilt_once);
    tcase_add_test(tc, lifecycle_calls_from_inside_the_function_are_refused);
    tcase_add_test(tc, plain_host_operations_need_a_live_plain_host);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
