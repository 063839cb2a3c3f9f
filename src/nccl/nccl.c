/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL wrapper of an engine: a table of engine operations that forwards to the engine's own,
 * adds distribute and all_gather over the engine's communicator (slice.c) and wraps
 * save/load/drop so a slice's saved copy carries what its gather needs. Regions call every operation with the
 * table's one engine pointer, so the wrapper is that pointer and keeps the engine's.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "nccl/nccl.h"
#include "region/region.h" /* recap__engine_use */

#define W(h) ((struct recap_nccl *)(h))

/* Forwarders: the engine's operation with the engine's own pointer. */
static recap_status_t fw_buffer_arg(void *h, recap_buffer_t buf, void **arg_p)
{
    return W(h)->ops->buffer_arg(W(h)->engine, buf, arg_p);
}

static int fw_needs_grad(void *h, recap_buffer_t buf)
{
    return W(h)->ops->needs_grad(W(h)->engine, buf);
}

static recap_status_t fw_alloc_like(void *h, recap_buffer_t like, recap_buffer_t *buf_p)
{
    return W(h)->ops->alloc_like(W(h)->engine, like, buf_p);
}

static recap_status_t fw_free_storage(void *h, recap_buffer_t buf)
{
    return W(h)->ops->free_storage(W(h)->engine, buf);
}

static recap_status_t fw_share_storage(void *h, recap_buffer_t dst, recap_buffer_t src)
{
    return W(h)->ops->share_storage(W(h)->engine, dst, src);
}

static int fw_same_storage(void *h, recap_buffer_t a, recap_buffer_t b)
{
    return W(h)->ops->same_storage(W(h)->engine, a, b);
}

static recap_status_t fw_set_recording(void *h, int enable, int *previous_p)
{
    return W(h)->ops->set_recording(W(h)->engine, enable, previous_p);
}

static recap_status_t fw_add_trigger(void *h, recap_buffer_t buf, recap_trigger_func_t fn,
                                     void *arg, void **handle_p)
{
    return W(h)->ops->add_trigger(W(h)->engine, buf, fn, arg, handle_p);
}

static recap_status_t fw_remove_trigger(void *h, void *handle)
{
    return W(h)->ops->remove_trigger(W(h)->engine, handle);
}

static recap_status_t fw_context_enter(void *h, recap_pass_t pass, void **ctx_p)
{
    return W(h)->ops->context_enter(W(h)->engine, pass, ctx_p);
}

static recap_status_t fw_context_exit(void *h, void *ctx)
{
    return W(h)->ops->context_exit(W(h)->engine, ctx);
}

/* An optional operation the engine lacks stays NULL: NULL has a meaning of its own (every buffer
 * needs a gradient, the engine does not record, ...). */
#define FORWARD(op) w->table.op = w->ops->op != NULL ? fw_##op : NULL

static void build_table(struct recap_nccl *w)
{
    memset(&w->table, 0, sizeof(w->table));
    FORWARD(buffer_arg);
    FORWARD(needs_grad);
    FORWARD(alloc_like);
    FORWARD(free_storage);
    FORWARD(share_storage);
    FORWARD(same_storage);
    FORWARD(set_recording);
    FORWARD(add_trigger);
    FORWARD(remove_trigger);
    FORWARD(context_enter);
    FORWARD(context_exit);
    w->table.free_buffer = recap__nccl_free_buffer;
    w->table.save = recap__nccl_save;
    w->table.load = recap__nccl_load;
    w->table.drop = recap__nccl_drop;
    w->table.distribute = recap__nccl_distribute;
    w->table.all_gather = recap__nccl_all_gather;
}

static recap_status_t check_params(const recap_nccl_params_t *p)
{
    const recap_nccl_buffer_ops_t *b;

    RECAP_CHECK_ARG(p != NULL, "params is NULL");
    RECAP_CHECK_ARG(p->comm != NULL, "comm (the engine's ncclComm_t) is NULL");
    RECAP_CHECK_ARG(p->nranks >= 1, "nranks %d: a group has at least one rank", p->nranks);
    RECAP_CHECK_ARG(p->rank >= 0 && p->rank < p->nranks, "rank %d outside 0..%d", p->rank,
                    p->nranks - 1);
    RECAP_CHECK_ARG(p->ops != NULL, "ops (the engine's operations) is NULL");
    RECAP_CHECK_ARG(p->ops->alloc_like != NULL && p->ops->free_buffer != NULL,
                    "engine ops lack alloc_like or free_buffer");
    RECAP_CHECK_ARG((p->ops->save != NULL) == (p->ops->load != NULL) &&
                        (p->ops->save != NULL) == (p->ops->drop != NULL),
                    "engine ops give some of save/load/drop only");
    b = p->buffers;
    RECAP_CHECK_ARG(b != NULL, "buffers (the buffer operations) is NULL");
    RECAP_CHECK_ARG(b->bytes != NULL && b->data != NULL && b->alloc != NULL,
                    "buffer ops lack bytes, data or alloc");
    RECAP_CHECK_ARG((b->keep_form != NULL) == (b->free_form != NULL),
                    "buffer ops give one of keep_form/free_form only");
    return RECAP_OK;
}

/* The group recap was told of must be the communicator's: a wrong rank would keep another
 * rank's slice and gather garbage without any error. */
static recap_status_t check_comm(const recap__nccl_lib_t *lib, const recap_nccl_params_t *p,
                                 int *device_p)
{
    int count = -1, rank = -1;
    recap_status_t st;

    st = recap__nccl_result(lib, p->comm, lib->CommCount(p->comm, &count), "ncclCommCount");
    if (st == RECAP_OK)
        st = recap__nccl_result(lib, p->comm, lib->CommUserRank(p->comm, &rank),
                                "ncclCommUserRank");
    if (st == RECAP_OK)
        st = recap__nccl_result(lib, p->comm, lib->CommCuDevice(p->comm, device_p),
                                "ncclCommCuDevice");
    if (st != RECAP_OK)
        return st;
    if (count != p->nranks || rank != p->rank)
        return recap__fail(RECAP_ERR_INVALID_ARG, "rank %d of %d given, the communicator is "
                           "rank %d of %d", p->rank, p->nranks, rank, count);
    return RECAP_OK;
}

recap_status_t recap_nccl_ops_create(const recap_nccl_params_t *params, recap_nccl_h *nccl_p)
{
    const recap__nccl_lib_t *lib;
    struct recap_nccl *w;
    recap_status_t st;
    int device = -1;

    RECAP_CHECK_ARG(nccl_p != NULL, "nccl_p is NULL");
    st = check_params(params);
    if (st == RECAP_OK)
        st = recap__nccl_lib_get(&lib);
    if (st == RECAP_OK)
        st = check_comm(lib, params, &device);
    if (st != RECAP_OK)
        return st;
    w = calloc(1, sizeof(*w));
    if (w == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "NCCL wrapper");
    w->ops = params->ops;
    w->engine = params->host;
    w->bops = *params->buffers;
    w->lib = lib;
    w->comm = params->comm;
    w->rank = params->rank;
    w->nranks = params->nranks;
    w->device = device;
    w->stream = params->stream;
    st = recap__engine_use(w->engine, 1); /* the engine it wraps stays while it lives */
    if (st != RECAP_OK) {
        free(w);
        return st;
    }
    build_table(w);
    *nccl_p = w;
    return RECAP_OK;
}

recap_status_t recap_nccl_ops_destroy(recap_nccl_h nccl)
{
    uint64_t saved, slices;
    size_t users;

    RECAP_CHECK_ARG(nccl != NULL, "nccl is NULL");
    users = recap__engine_users(nccl);
    if (users != 0)
        return recap__fail(RECAP_ERR_STATE, "NCCL wrapper destroyed while %zu region(s), "
                           "checkpoint(s) or manager(s) use it: destroy them first (nothing "
                           "changed)", users);
    recap__lock(&nccl->lock);
    saved = nccl->stats.live_saved;
    slices = nccl->stats.live_slices;
    recap__unlock(&nccl->lock);
    if (saved != 0 || slices != 0)
        return recap__fail(RECAP_ERR_STATE, "%llu saved handles and %llu slices are still held "
                           "(destroy the checkpoints and regions using them first)",
                           (unsigned long long)saved, (unsigned long long)slices);
    recap__engine_use(nccl->engine, -1);
    free(nccl);
    return RECAP_OK;
}

recap_status_t recap_nccl_engine_ops(recap_nccl_h nccl, const recap_engine_ops_t **ops_p,
                                   void **host_p)
{
    RECAP_CHECK_ARG(nccl != NULL && ops_p != NULL && host_p != NULL, "NULL argument");
    *ops_p = &nccl->table;
    *host_p = nccl;
    return RECAP_OK;
}

recap_status_t recap_nccl_set_stream(recap_nccl_h nccl, recap_stream_t stream)
{
    RECAP_CHECK_ARG(nccl != NULL, "nccl is NULL");
    recap__lock(&nccl->lock);
    nccl->stream = stream;
    recap__unlock(&nccl->lock);
    return RECAP_OK;
}

recap_status_t recap_nccl_stats(recap_nccl_h nccl, recap_nccl_stats_t *stats_p)
{
    RECAP_CHECK_ARG(nccl != NULL && stats_p != NULL, "NULL argument");
    recap__lock(&nccl->lock);
    *stats_p = nccl->stats;
    recap__unlock(&nccl->lock);
    return RECAP_OK;
}

/* ---------------------------------------------------------------- the plain engine's buffers */

static recap_status_t plain_bytes(void *engine, recap_buffer_t buf, size_t *bytes_p)
{
    return recap_plain_buffer_bytes(buf, bytes_p);
}

static recap_status_t plain_data(void *engine, recap_buffer_t buf, void **ptr_p)
{
    recap_status_t st = recap_plain_buffer_data(buf, ptr_p);

    if (st == RECAP_OK && *ptr_p == NULL)
        return recap__fail(RECAP_ERR_STATE, "plain buffer %p has no storage (released)", buf);
    return st;
}

/* Plain buffers have no form beyond their bytes; `like` is of the same engine, so the same
 * device. */
static recap_status_t plain_alloc(void *engine, recap_buffer_t like, size_t bytes, int needs_grad,
                                  void *form, recap_buffer_t *buf_p)
{
    return recap_plain_buffer_create(engine, bytes, needs_grad, buf_p);
}

static const recap_nccl_buffer_ops_t plain_buffer_ops = {
    .bytes = plain_bytes,
    .data = plain_data,
    .alloc = plain_alloc,
};

recap_status_t recap_nccl_plain_buffer_ops(const recap_nccl_buffer_ops_t **ops_p)
{
    RECAP_CHECK_ARG(ops_p != NULL, "ops_p is NULL");
    *ops_p = &plain_buffer_ops;
    return RECAP_OK;
}
