/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What regions and checkpoints share: checking the engine's operations, validating and copying a
 * call, and stashing its inputs through the engine's saved-buffer operations.
 */
#include "config.h"

#include <string.h>

#include "base/error.h"
#include "base/handle.h"
#include "region/region.h"
#include "tracker/tracker.h"

#define HAS(op) (p->ops->op != NULL)

static recap_status_t check_ops(const recap_region_params_t *p, uint32_t need)
{
    if (!HAS(alloc_like) || !HAS(free_buffer))
        return recap__fail(RECAP_ERR_INVALID_ARG, "engine ops lack alloc_like or free_buffer");
    if ((need & RECAP__NEED_RELEASE) && (!HAS(free_storage) || !HAS(share_storage)))
        return recap__fail(RECAP_ERR_INVALID_ARG,
                           "engine ops lack free_storage or share_storage (needed to release)");
    if ((need & RECAP__NEED_DISTRIBUTE) && (!HAS(distribute) || !HAS(all_gather)))
        return recap__fail(RECAP_ERR_INVALID_ARG,
                           "RECAP_CHECKPOINT_DISTRIBUTE needs the distribute and all_gather ops");
    if (HAS(save) != HAS(load) || HAS(save) != HAS(drop))
        return recap__fail(RECAP_ERR_INVALID_ARG, "engine ops give some of save/load/drop only");
    if (HAS(context_enter) != HAS(context_exit))
        return recap__fail(RECAP_ERR_INVALID_ARG,
                           "engine ops give one of context_enter/context_exit only");
    if (HAS(add_trigger) != HAS(remove_trigger))
        return recap__fail(RECAP_ERR_INVALID_ARG,
                           "engine ops give one of add_trigger/remove_trigger only");
    return RECAP_OK;
}

recap_status_t recap__rec_init(recap__rec_t *r, const recap_region_params_t *p, uint32_t need)
{
    recap_status_t st;

    RECAP_CHECK_ARG(p != NULL && p->ops != NULL, "params or params->ops is NULL");
    RECAP_CHECK_ARG(p->tracker == NULL || recap__handle_live(p->tracker, RECAP_MAGIC_TRACKER),
                    "params.tracker %p is not a live tracker", (void *)p->tracker);
    st = check_ops(p, need);
    if (st == RECAP_OK)
        st = recap__engine_check(p->ops, p->host);
    if (st == RECAP_OK)
        st = recap__engine_use(p->host, 1);
    if (st != RECAP_OK)
        return st;
    memset(r, 0, sizeof(*r));
    r->ops = p->ops;
    r->engine = p->host;
    r->tracker = p->tracker;
    if (r->tracker != NULL)
        recap__tracker_use(r->tracker, 1);
    r->flags = p->flags;
    return RECAP_OK;
}

static recap_status_t check_call(recap_signature_h sig, recap_func_t fn,
                                 const recap_value_t *args, size_t nargs)
{
    uint32_t i;

    RECAP_CHECK_ARG(sig != NULL, "signature is NULL");
    RECAP_CHECK_ARG(fn != NULL, "function is NULL");
    if (nargs > RECAP_MAX_ARGS)
        return recap__fail(RECAP_ERR_INVALID_ARG, "%zu arguments (at most %d)", nargs,
                           RECAP_MAX_ARGS);
    if (nargs != sig->nargs)
        return recap__fail(RECAP_ERR_INVALID_ARG, "%zu arguments for a signature of %u", nargs,
                           sig->nargs);
    RECAP_CHECK_ARG(nargs == 0 || args != NULL, "args is NULL");
    for (i = 0; i < sig->nargs; i++)
        if ((sig->types[i] == RECAP_TYPE_BUFFER || sig->types[i] == RECAP_TYPE_BUFFER_OUT) &&
            args[i].buf == NULL)
            return recap__fail(RECAP_ERR_INVALID_ARG, "argument %u: NULL buffer", i);
    return RECAP_OK;
}

recap_status_t recap__rec_prepare(recap__rec_t *r, recap_signature_h sig, recap_func_t fn,
                                  const recap_value_t *args, size_t nargs)
{
    recap_status_t st = check_call(sig, fn, args, nargs);
    unsigned k;

    if (st != RECAP_OK)
        return st;
    recap__signature_ref(sig);
    r->sig = sig;
    r->fn = fn;
    memcpy(r->args, args, nargs * sizeof(args[0]));
    r->plain = 1;
    for (k = 0; k < sig->nin && r->plain; k++)
        if (r->ops->needs_grad == NULL || r->ops->needs_grad(r->engine, args[sig->in[k]].buf))
            r->plain = 0;
    return RECAP_OK;
}

void recap__rec_unprepare(recap__rec_t *r)
{
    if (r->sig != NULL)
        recap__signature_unref(r->sig);
    r->sig = NULL;
}

void recap__rec_buffers(const recap__rec_t *r, recap_buffer_t *bufs)
{
    unsigned k;

    for (k = 0; k < r->sig->nin; k++)
        bufs[r->sig->in[k]] = r->args[r->sig->in[k]].buf;
    for (k = 0; k < r->sig->nout; k++)
        bufs[r->sig->out[k]] = r->args[r->sig->out[k]].buf;
}

recap_status_t recap__rec_save(recap__rec_t *r, const recap_buffer_t *bufs)
{
    recap_status_t st;
    unsigned k;

    for (k = 0; k < r->sig->nin; k++) {
        if (r->ops->save == NULL) {
            r->saved[k] = bufs[r->sig->in[k]];
        } else if ((st = r->ops->save(r->engine, bufs[r->sig->in[k]], &r->saved[k])) != RECAP_OK) {
            st = recap__engine_fail(st, "save", r->sig->in[k]);
            recap__rec_drop(r);
            return st;
        }
        r->nsaved = (int)k + 1;
    }
    return RECAP_OK;
}

recap_status_t recap__rec_load(recap__rec_t *r, recap_buffer_t *bufs)
{
    recap_status_t st;
    unsigned k;

    for (k = 0; k < r->sig->nin; k++) {
        if (r->ops->load == NULL) {
            bufs[r->sig->in[k]] = r->saved[k];
            continue;
        }
        st = r->ops->load(r->engine, r->saved[k], &bufs[r->sig->in[k]]);
        if (st != RECAP_OK || bufs[r->sig->in[k]] == NULL)
            return recap__engine_fail(st, "load", r->sig->in[k]);
    }
    return RECAP_OK;
}

/* A failing drop leaves nothing to undo; the engine has its message logged through its own
 * means, and recap carries on dropping the rest. */
void recap__rec_drop(recap__rec_t *r)
{
    int k;

    for (k = 0; k < r->nsaved; k++)
        if (r->ops->drop != NULL)
            r->ops->drop(r->engine, r->saved[k]);
    r->nsaved = 0;
    if (r->own_slice != NULL) {
        r->ops->free_buffer(r->engine, r->own_slice);
        r->own_slice = NULL;
    }
}

void recap__rec_fini(recap__rec_t *r)
{
    recap__rec_drop(r);
    recap__rec_unprepare(r);
    if (r->fwd != NULL)
        recap__snap_put(r->fwd);
    r->fwd = NULL;
    if (r->tracker != NULL)
        recap__tracker_use(r->tracker, -1);
    r->tracker = NULL;
    if (r->ops != NULL)
        recap__engine_use(r->engine, -1);
    r->ops = NULL;
}
