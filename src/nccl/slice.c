/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Slicing and gathering a checkpoint's first input over NCCL, and the saved handles that carry a
 * slice's bookkeeping from the forward (distribute, then save) to the backward (load, then
 * all_gather): the region code hands all_gather only the loaded slice, and the exact byte count
 * of the whole cannot be told from the slice's size alone once it was padded.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "nccl/nccl.h"
#include "region/region.h"

size_t recap__nccl_slice_bytes(size_t whole, int nranks)
{
    size_t n = (size_t)nranks, s = whole / n + (whole % n != 0);

    return (s + RECAP_NCCL_SLICE_ALIGN - 1) / RECAP_NCCL_SLICE_ALIGN * RECAP_NCCL_SLICE_ALIGN;
}

size_t recap__nccl_rank_bytes(size_t whole, size_t slice, int rank)
{
    size_t start = slice * (size_t)rank;

    if (start >= whole)
        return 0;
    return whole - start < slice ? whole - start : slice;
}

/* The device pointer of a buffer, checked to be memory of the communicator's device. */
static recap_status_t device_data(struct recap_nccl *w, recap_buffer_t buf, size_t want,
                                  void **ptr_p)
{
    recap_status_t st;
    size_t bytes;
    int owner;

    st = w->bops.bytes(w->engine, buf, &bytes);
    if (st != RECAP_OK)
        return recap__engine_fail(st, "bytes", -1);
    if (bytes != want)
        return recap__fail(RECAP_ERR_INVALID_ARG, "buffer %p has %zu bytes, %zu expected", buf,
                           bytes, want);
    st = w->bops.data(w->engine, buf, ptr_p);
    if (st != RECAP_OK || *ptr_p == NULL)
        return recap__engine_fail(st, "data", -1);
    st = recap__nccl_ptr_device(w->device, *ptr_p, &owner);
    if (st == RECAP_OK && owner != w->device)
        return recap__fail(RECAP_ERR_WRONG_DEVICE, "buffer %p is on device %d, the "
                           "communicator on device %d", buf, owner, w->device);
    return st;
}

static recap_status_t host_alloc(struct recap_nccl *w, recap_buffer_t like, size_t bytes,
                                 int needs_grad, void *form, recap_buffer_t *buf_p)
{
    recap_status_t st;

    *buf_p = NULL;
    st = w->bops.alloc(w->engine, like, bytes, needs_grad, form, buf_p);
    if (st != RECAP_OK || *buf_p == NULL) {
        *buf_p = NULL;
        return recap__engine_fail(st, "alloc", -1);
    }
    return RECAP_OK;
}

static recap_status_t copy(struct recap_nccl *w, void *dst, const void *src, size_t bytes,
                           recap_stream_t stream)
{
    int staged;
    recap_status_t st = recap__nccl_copy(w->device, dst, src, bytes, stream, &staged);

    if (st == RECAP_OK && staged) {
        recap__lock(&w->lock);
        w->stats.staged_copies++;
        recap__unlock(&w->lock);
    }
    return st;
}

static recap_stream_t current_stream(struct recap_nccl *w)
{
    recap_stream_t s;

    recap__lock(&w->lock);
    s = w->stream;
    recap__unlock(&w->lock);
    return s;
}

static void free_form(struct recap_nccl *w, void *form)
{
    if (form != NULL && w->bops.free_form != NULL)
        w->bops.free_form(w->engine, form);
}

static void link_slice_locked(struct recap_nccl *w, recap__nsaved_t *r)
{
    r->prev = NULL;
    r->next = w->slices;
    if (w->slices != NULL)
        w->slices->prev = r;
    w->slices = r;
    w->stats.live_slices++;
    w->stats.live_slice_bytes += r->slice;
}

static void unlink_slice_locked(struct recap_nccl *w, recap__nsaved_t *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        w->slices = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    w->stats.live_slices--;
    w->stats.live_slice_bytes -= r->slice;
}

/* Records the slice (and what gathering it needs) for the save that follows. */
static recap_status_t note_slice(struct recap_nccl *w, recap_buffer_t whole, recap_buffer_t slice,
                                 size_t bytes, size_t s)
{
    recap__nsaved_t *r = calloc(1, sizeof(*r));
    recap_status_t st;

    if (r == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "slice record");
    r->magic = RECAP__NSAVED_MAGIC;
    r->is_slice = 1;
    r->handle = slice;
    r->whole = bytes;
    r->slice = s;
    r->needs_grad = w->ops->needs_grad == NULL || w->ops->needs_grad(w->engine, whole);
    if (w->bops.keep_form != NULL) {
        st = w->bops.keep_form(w->engine, whole, &r->form);
        if (st != RECAP_OK) {
            free(r);
            return recap__engine_fail(st, "keep_form", -1);
        }
    }
    recap__lock(&w->lock);
    link_slice_locked(w, r);
    w->stats.distributes++;
    recap__unlock(&w->lock);
    return RECAP_OK;
}

recap_status_t recap__nccl_distribute(void *engine, recap_buffer_t buf, recap_buffer_t *slice_p)
{
    struct recap_nccl *w = engine;
    recap_buffer_t slice;
    size_t bytes, s;
    void *src, *dst;
    recap_status_t st;

    RECAP_CHECK_ARG(buf != NULL && slice_p != NULL, "NULL argument");
    st = w->bops.bytes(w->engine, buf, &bytes);
    if (st != RECAP_OK)
        return recap__engine_fail(st, "bytes", -1);
    RECAP_CHECK_ARG(bytes > 0, "distribute: buffer %p has no bytes to split", buf);
    s = recap__nccl_slice_bytes(bytes, w->nranks);
    RECAP_CHECK_ARG(s >= bytes / (size_t)w->nranks && s <= SIZE_MAX / (size_t)w->nranks,
                    "distribute: %zu bytes among %d ranks overflow", bytes, w->nranks);
    st = device_data(w, buf, bytes, &src);
    if (st != RECAP_OK)
        return st;
    st = host_alloc(w, buf, s, 0, NULL, &slice);
    if (st != RECAP_OK)
        return st;
    st = device_data(w, slice, s, &dst);
    if (st == RECAP_OK)
        st = copy(w, dst, (const char *)src + s * (size_t)w->rank,
                  recap__nccl_rank_bytes(bytes, s, w->rank), current_stream(w));
    if (st == RECAP_OK)
        st = note_slice(w, buf, slice, bytes, s);
    if (st != RECAP_OK) {
        w->ops->free_buffer(w->engine, slice);
        return st;
    }
    *slice_p = slice;
    return RECAP_OK;
}

/* The slice record of a loaded saved copy, or of a slice distribute gave that is still alive
 * (an engine calling the operations directly). */
static recap_status_t find_slice(struct recap_nccl *w, recap_buffer_t slice, recap__nsaved_t *copy_p)
{
    recap__nsaved_t *r;

    recap__lock(&w->lock);
    for (r = w->slices; r != NULL; r = r->next)
        if ((r->saved && r->loaded == slice) || (!r->handle_gone && r->handle == slice))
            break;
    if (r != NULL)
        *copy_p = *r;
    recap__unlock(&w->lock);
    if (r == NULL)
        return recap__fail(RECAP_ERR_INVALID_ARG, "all_gather: %p is not a slice this NCCL "
                           "wrapper distributed (or its saved copy as load gave it back)", slice);
    return RECAP_OK;
}

static recap_status_t gather(struct recap_nccl *w, const void *src, void *dst, size_t s,
                             recap_stream_t stream)
{
    return recap__nccl_result(w->lib, w->comm,
                              w->lib->AllGather(src, dst, s, RECAP__NCCL_UINT8, w->comm, stream),
                              "ncclAllGather");
}

recap_status_t recap__nccl_all_gather(void *engine, recap_buffer_t slice, recap_buffer_t *full_p)
{
    struct recap_nccl *w = engine;
    recap_buffer_t full = NULL, scratch = NULL;
    recap_stream_t stream = current_stream(w);
    recap__nsaved_t r = {0};
    void *src, *dst, *tmp = NULL;
    size_t total;
    recap_status_t st;

    RECAP_CHECK_ARG(slice != NULL && full_p != NULL, "NULL argument");
    st = find_slice(w, slice, &r);
    if (st == RECAP_OK)
        st = device_data(w, slice, r.slice, &src);
    if (st != RECAP_OK)
        return st;
    total = r.slice * (size_t)w->nranks;
    /* Everything is allocated before the collective: a rank failing afterwards would leave the
     * others' collective complete and its own buffers half-made. */
    st = host_alloc(w, slice, r.whole, r.needs_grad, r.form, &full);
    if (st == RECAP_OK)
        st = device_data(w, full, r.whole, &dst);
    if (st == RECAP_OK && total != r.whole) {
        st = host_alloc(w, slice, total, 0, NULL, &scratch);
        if (st == RECAP_OK)
            st = device_data(w, scratch, total, &tmp);
    }
    if (st == RECAP_OK)
        st = gather(w, src, scratch != NULL ? tmp : dst, r.slice, stream);
    if (st == RECAP_OK && scratch != NULL)
        st = copy(w, dst, tmp, r.whole, stream); /* the padding stays behind */
    if (scratch != NULL)
        w->ops->free_buffer(w->engine, scratch);
    if (st != RECAP_OK) {
        if (full != NULL)
            w->ops->free_buffer(w->engine, full);
        return st;
    }
    recap__lock(&w->lock);
    w->stats.gathers++;
    w->stats.padded_gathers += scratch != NULL;
    recap__unlock(&w->lock);
    *full_p = full;
    return RECAP_OK;
}

/* ---------------------------------------------------------------- saved handles */

static recap_status_t check_saved(void *saved, recap__nsaved_t **r_p)
{
    recap__nsaved_t *r = saved;

    RECAP_CHECK_ARG(r != NULL && r->magic == RECAP__NSAVED_MAGIC,
                    "%p is not a saved handle of an NCCL wrapper", saved);
    *r_p = r;
    return RECAP_OK;
}

/* A slice distribute gave and nobody saved yet takes the saved copy's place in the record; any
 * other buffer gets a record of its own. */
recap_status_t recap__nccl_save(void *engine, recap_buffer_t buf, void **saved_p)
{
    struct recap_nccl *w = engine;
    recap__nsaved_t *r, *mine = NULL;
    void *inner = buf;
    recap_status_t st;

    if (w->ops->save != NULL) {
        st = w->ops->save(w->engine, buf, &inner);
        if (st != RECAP_OK)
            return st;
    }
    recap__lock(&w->lock);
    for (r = w->slices; r != NULL; r = r->next)
        if (!r->saved && !r->handle_gone && r->handle == buf)
            break;
    if (r != NULL) {
        r->saved = 1;
        r->inner = inner;
        r->free_at_drop = w->ops->save == NULL; /* its handle is the saved copy itself */
        mine = r;
    }
    recap__unlock(&w->lock);
    if (mine == NULL) {
        mine = calloc(1, sizeof(*mine));
        if (mine == NULL) {
            if (w->ops->drop != NULL)
                w->ops->drop(w->engine, inner);
            return recap__fail(RECAP_ERR_NO_MEMORY, "saved handle");
        }
        mine->magic = RECAP__NSAVED_MAGIC;
        mine->inner = inner;
    }
    recap__lock(&w->lock);
    w->stats.live_saved++;
    recap__unlock(&w->lock);
    *saved_p = mine;
    return RECAP_OK;
}

recap_status_t recap__nccl_load(void *engine, void *saved, recap_buffer_t *buf_p)
{
    struct recap_nccl *w = engine;
    recap_buffer_t buf = NULL;
    recap__nsaved_t *r = NULL;
    recap_status_t st = check_saved(saved, &r);

    if (st != RECAP_OK)
        return st;
    if (w->ops->load != NULL) {
        st = w->ops->load(w->engine, r->inner, &buf);
        if (st != RECAP_OK)
            return st;
    } else {
        buf = r->inner;
    }
    if (r->is_slice) {
        recap__lock(&w->lock);
        r->loaded = buf;
        recap__unlock(&w->lock);
    }
    *buf_p = buf;
    return RECAP_OK;
}

recap_status_t recap__nccl_drop(void *engine, void *saved)
{
    struct recap_nccl *w = engine;
    recap__nsaved_t *r = NULL;
    recap_status_t st = check_saved(saved, &r), dst = RECAP_OK;
    int free_handle;

    if (st != RECAP_OK)
        return st;
    if (w->ops->drop != NULL)
        dst = w->ops->drop(w->engine, r->inner);
    recap__lock(&w->lock);
    w->stats.live_saved--;
    if (r->is_slice)
        unlink_slice_locked(w, r);
    free_handle = r->is_slice && r->free_at_drop && r->handle_gone;
    recap__unlock(&w->lock);
    if (free_handle)
        st = w->ops->free_buffer(w->engine, r->handle);
    free_form(w, r->form);
    r->magic = 0;
    free(r);
    return dst != RECAP_OK ? dst : st;
}

/* recap frees a slice right after saving it. The engine's save keeps its contents; without one the
 * handle is the saved copy, so freeing it waits for the drop. An unsaved slice is forgotten. */
recap_status_t recap__nccl_free_buffer(void *engine, recap_buffer_t buf)
{
    struct recap_nccl *w = engine;
    recap__nsaved_t *r, *forget = NULL;
    int defer = 0;

    recap__lock(&w->lock);
    for (r = w->slices; r != NULL; r = r->next)
        if (!r->handle_gone && r->handle == buf)
            break;
    if (r != NULL) {
        r->handle_gone = 1;
        defer = r->saved && r->free_at_drop;
        if (!r->saved) {
            unlink_slice_locked(w, r);
            forget = r;
        }
    }
    recap__unlock(&w->lock);
    if (forget != NULL) {
        free_form(w, forget->form);
        free(forget);
    }
    return defer ? RECAP_OK : w->ops->free_buffer(w->engine, buf);
}
