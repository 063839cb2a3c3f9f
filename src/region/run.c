/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running a region's function: the first run and the recompute, with what surrounds each (the
 * recompute context, the engine's recording mode, the per-thread "is checkpointing" flag) and the
 * RNG snapshots that make the recompute draw what the first run drew.
 */
#include "config.h"

#include "base/error.h"
#include "region/region.h"
#include "tracker/tracker.h"

static recap_status_t set_recording(recap__rec_t *r, int enable, int *prev_p)
{
    recap_status_t st = r->ops->set_recording(r->engine, enable, prev_p);

    return st == RECAP_OK ? st : recap__engine_fail(st, "set_recording", -1);
}

recap_status_t recap__run(recap__rec_t *r, recap_pass_t pass, int recording,
                          const recap_buffer_t *bufs)
{
    int use_ctx = r->ops->context_enter != NULL && !(r->flags & RECAP_REGION_NO_CONTEXT);
    int set = recording >= 0 && r->ops->set_recording != NULL;
    recap_status_t st = RECAP_OK, st2;
    void *ctx = NULL;
    int prev = 0, ignored;

    if (use_ctx) {
        st = r->ops->context_enter(r->engine, pass, &ctx);
        if (st != RECAP_OK)
            return recap__engine_fail(st, "context_enter", -1);
    }
    if (set)
        st = set_recording(r, recording, &prev);
    if (st == RECAP_OK) {
        recap__checkpointing_enter();
        st = recap__call_invoke(r, bufs);
        recap__checkpointing_leave();
        if (set && (st2 = set_recording(r, prev, &ignored)) != RECAP_OK && st == RECAP_OK)
            st = st2;
    }
    if (use_ctx && (st2 = r->ops->context_exit(r->engine, ctx)) != RECAP_OK && st == RECAP_OK)
        st = recap__engine_fail(st2, "context_exit", -1);
    return st;
}

recap_status_t recap__rec_first(recap__rec_t *r)
{
    recap_buffer_t bufs[RECAP_MAX_ARGS];
    recap_status_t st;

    recap__rec_buffers(r, bufs);
    if (r->plain)
        return recap__run(r, RECAP_PASS_FIRST, -1, bufs);
    if (r->tracker != NULL) {
        st = r->fwd != NULL ? RECAP_OK : recap__snap_get(&r->fwd);
        if (st == RECAP_OK)
            st = recap_snapshot_take(r->tracker, r->fwd);
        if (st != RECAP_OK)
            return st;
    }
    return recap__run(r, RECAP_PASS_FIRST, 0, bufs);
}

/* The recompute runs in the fork the first run ran in: recorded inside fork(x) and rebuilt
 * outside it (or inside another), x is forked around it, so a nested fork of x by the function
 * goes on drawing x as the first run's did; "now" is restored after that fork has ended. */
recap_status_t recap__rec_recompute(recap__rec_t *r, const recap_buffer_t *bufs)
{
    char name[RECAP_NAME_MAX + 1];
    recap_fork_token_t tok = 0;
    recap_snapshot_h now;
    recap_status_t st, st2;
    int forked = 0, changed;

    if (r->tracker == NULL)
        return recap__run(r, RECAP_PASS_RECOMPUTE, 1, bufs);
    st = recap__snap_get(&now);
    if (st != RECAP_OK)
        return st;
    st = recap_snapshot_take(r->tracker, now);
    if (st == RECAP_OK && recap__snapshot_fork_of(r->tracker, r->fwd, name) != NULL) {
        st = recap_tracker_fork(r->tracker, name, &tok);
        forked = st == RECAP_OK;
    }
    if (st == RECAP_OK)
        st = recap_snapshot_restore(r->tracker, r->fwd);
    changed = forked || st == RECAP_OK; /* (a failed restore changed nothing) */
    if (st == RECAP_OK)
        st = recap__run(r, RECAP_PASS_RECOMPUTE, 1, bufs);
    if (forked && (st2 = recap_tracker_unfork(r->tracker, tok)) != RECAP_OK && st == RECAP_OK)
        st = st2;
    if (changed) {
        st2 = recap_snapshot_restore(r->tracker, now);
        st = st != RECAP_OK ? st : st2;
    }
    recap__snap_put(now);
    return st;
}
