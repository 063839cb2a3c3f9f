/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Full recompute (Megatron's checkpoint): the function runs once without recording and keeps
 * only its inputs; at backward it runs again, with recording and the forward's random numbers,
 * into new output buffers handed to the engine to back-propagate through. With distribution only
 * this rank's slice of the first input is kept, and gathered back before the recompute.
 */
#include "config.h"

#include <stdlib.h>

#include "base/error.h"
#include "base/handle.h"
#include "region/region.h"
#include "rng/generator.h" /* RECAP_CHECK_NOT_IN_FRAMEWORK_OP */

static recap_status_t check_params(const recap_region_params_t *p)
{
    RECAP_CHECK_ARG(p != NULL, "params is NULL");
    RECAP_CHECK_ARG(p->manager == NULL, "checkpoints have no manager (it is for regions)");
    RECAP_CHECK_ARG((p->flags & ~(uint32_t)(RECAP_REGION_NO_CONTEXT |
                                            RECAP_CHECKPOINT_DISTRIBUTE)) == 0,
                    "flags 0x%x: checkpoints take RECAP_REGION_NO_CONTEXT and "
                    "RECAP_CHECKPOINT_DISTRIBUTE only", p->flags);
    return RECAP_OK;
}

/* Saves the inputs, the first one as this rank's slice when distributing. A engine's save keeps the
 * slice's contents, so its handle is freed at once; without save the handle is what is kept, and
 * it is freed with the saved inputs. */
static recap_status_t stash(recap__rec_t *r)
{
    recap_buffer_t bufs[RECAP_MAX_ARGS], slice = NULL;
    recap_status_t st;
    int p = recap__checkpoint_dist_pos(r);

    recap__rec_buffers(r, bufs);
    if (p >= 0) {
        st = r->ops->distribute(r->engine, bufs[p], &slice);
        if (st != RECAP_OK || slice == NULL)
            return recap__engine_fail(st, "distribute", p);
        bufs[p] = slice;
    }
    st = recap__rec_save(r, bufs);
    if (slice != NULL && (st != RECAP_OK || r->ops->save != NULL))
        r->ops->free_buffer(r->engine, slice);
    else if (slice != NULL)
        r->own_slice = slice;
    return st;
}

static recap_status_t prepare(recap_checkpoint_h c, const recap_region_params_t *params,
                              recap_signature_h sig, recap_func_t fn, const recap_value_t *args,
                              size_t nargs)
{
    uint32_t need = params->flags & RECAP_CHECKPOINT_DISTRIBUTE ? RECAP__NEED_DISTRIBUTE : 0;
    recap_status_t st = recap__rec_init(&c->rec, params, need);

    if (st == RECAP_OK)
        st = recap__rec_prepare(&c->rec, sig, fn, args, nargs);
    if (st == RECAP_OK && need && sig->nin == 0) {
        recap__rec_unprepare(&c->rec);
        st = recap__fail(RECAP_ERR_INVALID_ARG, "RECAP_CHECKPOINT_DISTRIBUTE without an input "
                                                "buffer to distribute");
    }
    return st;
}

recap_status_t recap_checkpoint_run(const recap_region_params_t *params, recap_signature_h sig,
                                    recap_func_t fn, const recap_value_t *args, size_t nargs,
                                    recap_checkpoint_h *ckpt_p)
{
    recap_checkpoint_h c;
    recap_status_t st;

    RECAP_CHECK_ARG(ckpt_p != NULL, "ckpt_p is NULL");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_checkpoint_run"); /* it joins its tracker */
    st = check_params(params);
    if (st != RECAP_OK)
        return st;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "checkpoint");
    st = prepare(c, params, sig, fn, args, nargs);
    if (st == RECAP_OK)
        st = recap__rec_first(&c->rec);
    if (st == RECAP_OK && !c->rec.plain)
        st = stash(&c->rec);
    if (st == RECAP_OK)
        st = recap__handle_register(c, RECAP_MAGIC_CHECKPOINT);
    if (st != RECAP_OK) {
        recap__rec_fini(&c->rec);
        free(c);
        return st;
    }
    c->magic = RECAP_MAGIC_CHECKPOINT;
    *ckpt_p = c;
    return RECAP_OK;
}
