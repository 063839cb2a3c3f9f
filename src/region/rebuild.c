/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rebuilding a released region: its inputs read back from the engine's saved buffers, the
 * function re-run with the forward's random numbers into new buffers, whose storage the released
 * outputs then share (no copy: views and saved references of the outputs see it too).
 */
#include "config.h"

#include "base/error.h"
#include "base/handle.h"
#include "base/nvtx.h"
#include "region/region.h"

/* New buffers for the released outputs; a repeated output gets its first occurrence's. */
static recap_status_t alloc_fresh(recap_region_h r, recap_buffer_t *bufs, recap_buffer_t *fresh)
{
    recap_signature_h s = r->rec.sig;
    recap_status_t st;
    unsigned j;

    for (j = 0; j < s->nout; j++) {
        if (r->dup[j] >= 0) {
            bufs[s->out[j]] = bufs[s->out[r->dup[j]]];
            continue;
        }
        if (!(r->released & (1u << j)))
            continue;
        st = r->rec.ops->alloc_like(r->rec.engine, r->rec.args[s->out[j]].buf, &fresh[j]);
        if (st != RECAP_OK || fresh[j] == NULL) {
            fresh[j] = NULL;
            return recap__engine_fail(st, "alloc_like", s->out[j]);
        }
        bufs[s->out[j]] = fresh[j];
    }
    return RECAP_OK;
}

/* Shares each new buffer's storage into its output (when `share`) and frees the new handles. */
static recap_status_t settle_fresh(recap_region_h r, recap_buffer_t *fresh, int share)
{
    recap_signature_h s = r->rec.sig;
    recap_status_t st = RECAP_OK, st2;
    unsigned j;

    for (j = 0; j < s->nout; j++) {
        if (fresh[j] == NULL)
            continue;
        if (share && st == RECAP_OK) {
            st2 = r->rec.ops->share_storage(r->rec.engine, r->rec.args[s->out[j]].buf, fresh[j]);
            if (st2 != RECAP_OK)
                st = recap__engine_fail(st2, "share_storage", s->out[j]);
        }
        r->rec.ops->free_buffer(r->rec.engine, fresh[j]);
    }
    return st;
}

static recap_status_t rebuild_outputs(recap_region_h r)
{
    recap_buffer_t bufs[RECAP_MAX_ARGS], fresh[RECAP_MAX_ARGS] = {NULL};
    recap_status_t st;

    if (r->rec.plain) {
        r->state = RECAP_REGION_REBUILT;
        return RECAP_OK;
    }
    recap__rec_buffers(&r->rec, bufs);
    st = recap__rec_load(&r->rec, bufs);
    if (st == RECAP_OK)
        st = alloc_fresh(r, bufs, fresh);
    if (st == RECAP_OK)
        st = recap__rec_recompute(&r->rec, bufs);
    st = st == RECAP_OK ? settle_fresh(r, fresh, 1) : (settle_fresh(r, fresh, 0), st);
    if (st != RECAP_OK)
        return st; /* still RELEASED: the engine may fix the cause and rebuild again */
    recap__rec_drop(&r->rec);
    r->released = 0;
    r->state = RECAP_REGION_REBUILT;
    return RECAP_OK;
}

recap_status_t recap__region_rebuild(recap_region_h r)
{
    recap_status_t st = recap__region_not_running(r, "rebuild");

    if (st != RECAP_OK)
        return st;
    recap__nvtx_push(RECAP_NVTX_REBUILD);
    r->running = 1;
    st = rebuild_outputs(r);
    r->running = 0;
    recap__nvtx_pop();
    return st;
}

recap_status_t recap_region_rebuild(recap_region_h region)
{
    recap_status_t st;

    RECAP_CHECK_HANDLE(region, RECAP_MAGIC_REGION, "region");
    if (region->manager != NULL)
        return recap__fail(RECAP_ERR_STATE, "region belongs to a manager: rebuild it through "
                                            "recap_manager_rebuild or the manager's trigger");
    st = recap__region_expect(region, RECAP_REGION_RELEASED, "rebuild");
    return st == RECAP_OK ? recap__region_rebuild(region) : st;
}
