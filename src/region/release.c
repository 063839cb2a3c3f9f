/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Releasing a region's outputs: their storage is freed through the engine while the handles (and
 * every view of them) stay valid, and a trigger is armed to rebuild them. Outputs sharing storage
 * with an input are kept when the region retains its inputs (Megatron's retain_input_tensors):
 * freeing them would free the input that the rebuild reads.
 */
#include "config.h"

#include "base/error.h"
#include "base/handle.h"
#include "base/nvtx.h"
#include "region/region.h"

static int same(recap__rec_t *r, recap_buffer_t a, recap_buffer_t b)
{
    if (a == b)
        return 1;
    return r->ops->same_storage != NULL && r->ops->same_storage(r->engine, a, b);
}

void recap__region_note_outputs(recap_region_h r)
{
    recap_signature_h s = r->rec.sig;
    unsigned j, k;

    r->aliased = 0;
    for (j = 0; j < s->nout; j++) {
        recap_buffer_t out = r->rec.args[s->out[j]].buf;

        r->dup[j] = -1;
        for (k = 0; k < j && r->dup[j] < 0; k++)
            if (r->rec.args[s->out[k]].buf == out)
                r->dup[j] = (int8_t)k;
        for (k = 0; k < s->nin; k++)
            if (same(&r->rec, r->rec.args[s->in[k]].buf, out))
                r->aliased |= 1u << j;
    }
}

static recap_status_t release_outputs(recap_region_h r)
{
    recap_signature_h s = r->rec.sig;
    recap_status_t st;
    unsigned j;

    r->state = RECAP_REGION_RELEASED; /* also after a failure: what was freed needs the rebuild */
    if (r->rec.plain)
        return RECAP_OK;
    for (j = 0; j < s->nout; j++) {
        if (r->dup[j] >= 0)
            continue;
        if ((r->rec.flags & RECAP_REGION_RETAIN_INPUTS) && (r->aliased & (1u << j)))
            continue;
        st = r->rec.ops->free_storage(r->rec.engine, r->rec.args[s->out[j]].buf);
        if (st != RECAP_OK)
            return recap__engine_fail(st, "free_storage", s->out[j]);
        r->released |= 1u << j;
    }
    return RECAP_OK;
}

recap_status_t recap__region_release(recap_region_h r)
{
    recap_status_t st = recap__region_not_running(r, "release");

    if (st != RECAP_OK)
        return st;
    recap__nvtx_push(RECAP_NVTX_RELEASE);
    r->running = 1;
    st = release_outputs(r);
    r->running = 0;
    recap__nvtx_pop();
    return st;
}

static recap_status_t on_trigger(void *arg)
{
    recap_region_h r = arg;

    /* Rebuild once, at the first trigger; later ones find it rebuilt and do nothing. */
    return r->state == RECAP_REGION_RELEASED ? recap__region_rebuild(r) : RECAP_OK;
}

recap_status_t recap_region_release(recap_region_h region, recap_buffer_t trigger)
{
    recap_status_t st;

    RECAP_CHECK_HANDLE(region, RECAP_MAGIC_REGION, "region");
    if (region->manager != NULL)
        return recap__fail(RECAP_ERR_STATE, "region belongs to a manager: release it through "
                                            "recap_manager_release");
    st = recap__region_expect(region, RECAP_REGION_RECORDED, "release");
    if (st != RECAP_OK)
        return st;
    if (!region->rec.plain) {
        region->running = 1; /* the engine's add_trigger may call back */
        st = recap__trigger_arm(region->rec.ops, region->rec.engine, trigger, on_trigger, region,
                                &region->trigger);
        region->running = 0;
        if (st != RECAP_OK)
            return st;
    }
    return recap__region_release(region);
}
