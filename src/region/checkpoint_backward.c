/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A checkpoint's backward: the inputs read back (the distributed one gathered whole again), the
 * function re-run with the forward's random numbers into new output buffers, which the engine
 * then owns and back-propagates through.
 */
#include "config.h"

#include <stdlib.h>

#include "base/error.h"
#include "base/handle.h"
#include "base/nvtx.h"
#include "region/region.h"
#include "rng/generator.h" /* RECAP_CHECK_NOT_IN_FRAMEWORK_OP */

int recap__checkpoint_dist_pos(const recap__rec_t *r)
{
    return (r->flags & RECAP_CHECKPOINT_DISTRIBUTE) ? r->sig->in[0] : -1;
}

static recap_status_t check(recap_checkpoint_h c, recap_buffer_t *outputs, size_t n)
{
    RECAP_CHECK_HANDLE(c, RECAP_MAGIC_CHECKPOINT, "checkpoint");
    if (c->done)
        return recap__fail(RECAP_ERR_STATE, "checkpoint backward already ran");
    if (c->rec.plain)
        return recap__fail(RECAP_ERR_STATE, "checkpoint of a plain call (no input needed a "
                                            "gradient) has no backward");
    if (n != c->rec.sig->nout)
        return recap__fail(RECAP_ERR_INVALID_ARG, "%zu outputs asked, the function has %u", n,
                           (unsigned)c->rec.sig->nout);
    RECAP_CHECK_ARG(n == 0 || outputs != NULL, "outputs is NULL");
    return RECAP_OK;
}

/* New buffers for every output (each written by the function), and the whole distributed
 * input. `owned` collects what to free on failure. */
static recap_status_t gather_and_alloc(recap__rec_t *r, recap_buffer_t *bufs,
                                       recap_buffer_t *owned, int *nowned)
{
    recap_status_t st;
    int p = recap__checkpoint_dist_pos(r);
    unsigned j;

    if (p >= 0) {
        st = r->ops->all_gather(r->engine, bufs[p], &bufs[p]);
        if (st != RECAP_OK || bufs[p] == NULL)
            return recap__engine_fail(st, "all_gather", p);
        owned[(*nowned)++] = bufs[p];
    }
    for (j = 0; j < r->sig->nout; j++) {
        recap_buffer_t like = r->args[r->sig->out[j]].buf;

        st = r->ops->alloc_like(r->engine, like, &bufs[r->sig->out[j]]);
        if (st != RECAP_OK || bufs[r->sig->out[j]] == NULL)
            return recap__engine_fail(st, "alloc_like", r->sig->out[j]);
        owned[(*nowned)++] = bufs[r->sig->out[j]];
    }
    return RECAP_OK;
}

static recap_status_t backward(recap_checkpoint_h ckpt, recap_buffer_t *outputs, size_t n)
{
    recap_buffer_t bufs[RECAP_MAX_ARGS], owned[RECAP_MAX_ARGS + 1];
    recap_status_t st = check(ckpt, outputs, n);
    int nowned = 0, p, i;
    unsigned j;

    if (st != RECAP_OK)
        return st;
    recap__rec_buffers(&ckpt->rec, bufs);
    st = recap__rec_load(&ckpt->rec, bufs);
    if (st == RECAP_OK)
        st = gather_and_alloc(&ckpt->rec, bufs, owned, &nowned);
    if (st == RECAP_OK)
        st = recap__rec_recompute(&ckpt->rec, bufs);
    p = recap__checkpoint_dist_pos(&ckpt->rec);
    if (st != RECAP_OK) {
        for (i = 0; i < nowned; i++)
            ckpt->rec.ops->free_buffer(ckpt->rec.engine, owned[i]);
        return st;
    }
    if (p >= 0)
        ckpt->rec.ops->free_buffer(ckpt->rec.engine, bufs[p]);
    for (j = 0; j < n; j++)
        outputs[j] = bufs[ckpt->rec.sig->out[j]];
    recap__rec_drop(&ckpt->rec);
    ckpt->done = 1;
    return RECAP_OK;
}

recap_status_t recap_checkpoint_backward(recap_checkpoint_h ckpt, recap_buffer_t *outputs,
                                         size_t n)
{
    recap_status_t st;

    RECAP_CHECK_HANDLE(ckpt, RECAP_MAGIC_CHECKPOINT, "checkpoint");
    if (ckpt->running)
        return recap__fail(RECAP_ERR_STATE, "checkpoint backward from inside its own backward "
                           "(its function or an engine operation it called)");
    recap__nvtx_push(RECAP_NVTX_RECOMPUTE);
    ckpt->running = 1;
    st = backward(ckpt, outputs, n);
    ckpt->running = 0;
    recap__nvtx_pop();
    return st;
}

recap_status_t recap_checkpoint_return_value(recap_checkpoint_h ckpt, recap_value_t *value_p)
{
    RECAP_CHECK_HANDLE(ckpt, RECAP_MAGIC_CHECKPOINT, "checkpoint");
    RECAP_CHECK_ARG(value_p != NULL, "NULL argument");
    *value_p = ckpt->rec.ret;
    return RECAP_OK;
}

recap_status_t recap_checkpoint_destroy(recap_checkpoint_h ckpt)
{
    RECAP_CHECK_ARG(ckpt != NULL, "checkpoint is NULL");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_checkpoint_destroy"); /* it leaves its tracker */
    if (recap__handle_live(ckpt, RECAP_MAGIC_CHECKPOINT) && ckpt->running)
        return recap__fail(RECAP_ERR_STATE, "checkpoint destroyed from inside its own backward "
                           "(nothing changed)");
    RECAP_CHECK_ARG(recap__handle_unregister(ckpt, RECAP_MAGIC_CHECKPOINT),
                    "checkpoint handle %p is not live (destroyed already, or never created)",
                    (void *)ckpt);
    ckpt->magic = RECAP_MAGIC_DEAD;
    recap__rec_fini(&ckpt->rec);
    free(ckpt);
    return RECAP_OK;
}
