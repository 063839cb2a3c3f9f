/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plain engine's operations table: what regions and checkpoints call for plain buffers. The
 * `engine` pointer they receive is the recap_plain_engine_h.
 */
#include "config.h"

#include <stdint.h>

#include "base/error.h"
#include "base/handle.h"
#include "plain/plain.h"
#include "region/region.h" /* recap__engine_kind */

/* Recording is per thread, as autograd's grad mode is; stored inverted so it starts on. */
static _Thread_local int not_recording;

/* A live buffer of this engine. One of another plain engine is refused: its storage, accounts
 * and triggers live in that engine, and a trigger armed there but removed here would be unlinked
 * from the wrong list (found by the fuzzer: a manager's trigger on another engine's buffer). */
static recap_status_t own_buffer(void *engine, recap_buffer_t buf, recap__pbuf_t **b_p)
{
    recap_status_t st = recap__pbuf_check(buf, b_p);

    if (st == RECAP_OK && (void *)(*b_p)->engine != engine)
        return recap__fail(RECAP_ERR_INVALID_ARG, "plain buffer %p belongs to plain engine %p, "
                           "not to %p", buf, (void *)(*b_p)->engine, engine);
    return st;
}

#define PBUF(buf, b)                                                \
    do {                                                            \
        recap_status_t st_ = own_buffer(engine, (buf), &(b));       \
        if (st_ != RECAP_OK)                                        \
            return st_;                                             \
    } while (0)

static recap_status_t buffer_arg(void *engine, recap_buffer_t buf, void **arg_p)
{
    recap__pbuf_t *b;

    PBUF(buf, b);
    recap__lock(&b->engine->lock);
    *arg_p = b->st->block != NULL ? b->st->block->data : NULL;
    recap__unlock(&b->engine->lock);
    if (*arg_p == NULL)
        return recap__fail(RECAP_ERR_STATE, "plain buffer %p has no storage (released)", buf);
    return RECAP_OK;
}

static int needs_grad(void *engine, recap_buffer_t buf)
{
    recap__pbuf_t *b = buf;

    if (recap__pbuf_check(buf, &b) != RECAP_OK)
        return 0;
    /* Another engine's buffer "needs" one, so that the operation that takes it next (the
     * trigger, the saved input) refuses it rather than the region skipping it quietly. */
    return (void *)b->engine != engine || b->needs_grad;
}

static recap_status_t alloc_like(void *engine, recap_buffer_t like, recap_buffer_t *buf_p)
{
    recap__pbuf_t *b, *nb;
    recap_status_t st;

    PBUF(like, b);
    st = recap__pbuf_alloc(b->engine, b->bytes, b->needs_grad, &nb);
    if (st == RECAP_OK)
        *buf_p = nb;
    return st;
}

static recap_status_t free_buffer(void *engine, recap_buffer_t buf)
{
    recap__pbuf_t *b;

    PBUF(buf, b);
    return recap_plain_buffer_destroy(buf);
}

static recap_status_t free_storage(void *engine, recap_buffer_t buf)
{
    recap__pbuf_t *b;

    PBUF(buf, b);
    return recap__pbuf_free_storage(b);
}

static recap_status_t share_storage(void *engine, recap_buffer_t dst, recap_buffer_t src)
{
    recap__pbuf_t *d, *s;

    PBUF(dst, d);
    PBUF(src, s);
    return recap__pbuf_share(d, s);
}

static int same_storage(void *engine, recap_buffer_t a, recap_buffer_t b)
{
    recap__pbuf_t *x, *y;

    if (own_buffer(engine, a, &x) != RECAP_OK || own_buffer(engine, b, &y) != RECAP_OK)
        return a == b;
    return x->st == y->st || (x->st->block != NULL && x->st->block == y->st->block);
}

static recap_status_t set_recording(void *engine, int enable, int *previous_p)
{
    *previous_p = !not_recording;
    not_recording = !enable;
    return RECAP_OK;
}

recap_status_t recap_plain_is_recording(int *recording_p)
{
    RECAP_CHECK_ARG(recording_p != NULL, "recording_p is NULL");
    *recording_p = !not_recording;
    return RECAP_OK;
}

static recap_status_t add_trigger(void *engine, recap_buffer_t buf, recap_trigger_func_t fn,
                                  void *arg, void **handle_p)
{
    recap__pbuf_t *b;

    PBUF(buf, b);
    return recap__ptrigger_add(b, fn, arg, handle_p);
}

static recap_status_t remove_trigger(void *engine, void *handle)
{
    return recap__ptrigger_remove(engine, handle);
}

/* A saved input is a view of the buffer's storage: it keeps the storage object alive after
 * the caller frees its handle, and sees a release and a rebuild of it (a chained region's
 * input is the previous region's output). */
static recap_status_t save(void *engine, recap_buffer_t buf, void **saved_p)
{
    recap__pbuf_t *b, *v;
    recap_status_t st;

    PBUF(buf, b);
    st = recap__pbuf_view(b, &v);
    if (st != RECAP_OK)
        return st;
    recap__lock(&b->engine->lock);
    b->engine->stats.saves++;
    recap__unlock(&b->engine->lock);
    *saved_p = v;
    return RECAP_OK;
}

static recap_status_t load(void *engine, void *saved, recap_buffer_t *buf_p)
{
    recap__pbuf_t *v;

    PBUF(saved, v);
    recap__lock(&v->engine->lock);
    v->engine->stats.loads++;
    recap__unlock(&v->engine->lock);
    *buf_p = v;
    return RECAP_OK;
}

static recap_status_t drop(void *engine, void *saved)
{
    recap__pbuf_t *v;

    PBUF(saved, v);
    recap__lock(&v->engine->lock);
    v->engine->stats.drops++;
    recap__unlock(&v->engine->lock);
    recap__pbuf_free(v);
    return RECAP_OK;
}

/* The context's cookie is the pass it interrupts, so nested entries unwind exactly. */
static recap_status_t context_enter(void *engine, recap_pass_t pass, void **ctx_p)
{
    struct recap_plain_engine *h = engine;

    recap__lock(&h->lock);
    *ctx_p = (void *)(intptr_t)(h->stats.context_pass + 1);
    if (pass == RECAP_PASS_FIRST)
        h->stats.context_first++;
    else
        h->stats.context_recompute++;
    h->stats.context_depth++;
    h->stats.context_pass = (int)pass;
    recap__unlock(&h->lock);
    return RECAP_OK;
}

static recap_status_t context_exit(void *engine, void *ctx)
{
    struct recap_plain_engine *h = engine;

    recap__lock(&h->lock);
    h->stats.context_depth--;
    h->stats.context_pass = (int)(intptr_t)ctx - 1;
    recap__unlock(&h->lock);
    return RECAP_OK;
}

static const recap_engine_ops_t plain_ops = {
    .buffer_arg = buffer_arg,
    .needs_grad = needs_grad,
    .alloc_like = alloc_like,
    .free_buffer = free_buffer,
    .free_storage = free_storage,
    .share_storage = share_storage,
    .same_storage = same_storage,
    .set_recording = set_recording,
    .add_trigger = add_trigger,
    .remove_trigger = remove_trigger,
    .save = save,
    .load = load,
    .drop = drop,
    .context_enter = context_enter,
    .context_exit = context_exit,
};

static int engine_live(const void *engine)
{
    return recap__handle_live(engine, RECAP_MAGIC_PLAIN_ENGINE);
}

recap_status_t recap_plain_engine_ops(const recap_engine_ops_t **ops_p)
{
    RECAP_CHECK_ARG(ops_p != NULL, "ops_p is NULL");
    /* Before the operations can reach a region: the region core checks engines by this. */
    recap__engine_kind(&plain_ops, engine_live, "plain engine", "recap_plain_engine_h");
    *ops_p = &plain_ops;
    return RECAP_OK;
}
