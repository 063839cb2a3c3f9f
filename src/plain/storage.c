/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Plain buffers' memory: handles, storage objects and blocks with their reference counts, and
 * the accounting that examples and tests read (live and peak bytes).
 */
#include "config.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/error.h"
#include "plain/plain.h"

/* RECAP_PLAIN_REUSE_FREED: a kept storage of exactly `bytes` (the list searched from its end,
 * where the latest are), taken off the list; NULL when none. The caller holds the lock. */
static void *reuse_locked(struct recap_plain_engine *h, size_t bytes)
{
    size_t i = h->nkept;
    void *data;

    if (!(h->flags & RECAP_PLAIN_REUSE_FREED))
        return NULL;
    while (i-- > 0)
        if (h->kept[i].bytes == bytes) {
            data = h->kept[i].data;
            h->kept[i] = h->kept[--h->nkept];
            h->stats.held_bytes -= bytes;
            return data;
        }
    return NULL;
}

static recap_status_t memory_alloc(struct recap_plain_engine *h, size_t bytes, void **data_p)
{
    recap_status_t st;

    recap__lock(&h->lock);
    *data_p = reuse_locked(h, bytes);
    recap__unlock(&h->lock);
    if (*data_p == NULL && h->device == RECAP_DEVICE_HOST) {
        *data_p = malloc(bytes);
        if (*data_p == NULL)
            return recap__fail(RECAP_ERR_NO_MEMORY, "plain buffer of %zu bytes", bytes);
    } else if (*data_p == NULL) {
        st = recap_device_alloc(h->device, bytes, data_p);
        if (st != RECAP_OK)
            return st;
    }
    recap__lock(&h->lock);
    h->stats.allocs++;
    h->stats.live_bytes += bytes;
    if (h->stats.live_bytes > h->stats.peak_bytes)
        h->stats.peak_bytes = h->stats.live_bytes;
    recap__unlock(&h->lock);
    return RECAP_OK;
}

/* Keeping memory must not fail half-way through a release: if the list cannot grow, the memory
 * is given back after all (only graphs still writing to it would notice). */
static int keep(struct recap_plain_engine *h, void *data, size_t bytes)
{
    struct recap__kept *k;

    if (h->nkept == h->kept_cap) {
        k = recap__realloc_n(h->kept, h->kept_cap ? recap__count_add(h->kept_cap, h->kept_cap) : 16, sizeof(*k));
        if (k == NULL)
            return 0;
        h->kept = k;
        h->kept_cap = h->kept_cap ? 2 * h->kept_cap : 16;
    }
    h->kept[h->nkept++] = (struct recap__kept){data, bytes};
    h->stats.held_bytes += bytes;
    return 1;
}

void recap__plain_memory_free(struct recap_plain_engine *h, void *data, size_t bytes)
{
    int kept = 0;

    recap__lock(&h->lock);
    h->stats.frees++;
    h->stats.live_bytes -= bytes;
    if (h->flags & RECAP_PLAIN_KEEP_FREED)
        kept = keep(h, data, bytes);
    recap__unlock(&h->lock);
    if (kept)
        return;
    if (h->device == RECAP_DEVICE_HOST)
        free(data);
    else
        recap_device_free(h->device, data); /* nothing to report to: the memory is ours */
}

/* Drops one storage object's reference to its block; the caller holds the lock. Returns the
 * block to free (unlocked) or NULL. */
static recap__block_t *block_unref_locked(recap__block_t *blk)
{
    return blk != NULL && --blk->refs == 0 ? blk : NULL;
}

static void block_free(struct recap_plain_engine *h, recap__block_t *blk)
{
    if (blk == NULL)
        return;
    recap__plain_memory_free(h, blk->data, blk->bytes);
    free(blk);
}

recap_status_t recap__pbuf_alloc(struct recap_plain_engine *h, size_t bytes, int needs_grad,
                                 recap__pbuf_t **buf_p)
{
    recap__pbuf_t *b = calloc(1, sizeof(*b));
    recap__storage_t *st = calloc(1, sizeof(*st));
    recap__block_t *blk = calloc(1, sizeof(*blk));
    recap_status_t rc;

    if (b == NULL || st == NULL || blk == NULL) {
        rc = recap__fail(RECAP_ERR_NO_MEMORY, "plain buffer handle");
        goto fail;
    }
    rc = memory_alloc(h, bytes, &blk->data);
    if (rc != RECAP_OK)
        goto fail;
    blk->refs = 1;
    blk->bytes = bytes;
    st->refs = 1;
    st->block = blk;
    *b = (recap__pbuf_t){RECAP__PBUF_MAGIC, h, st, bytes, needs_grad != 0};
    recap__lock(&h->lock);
    h->stats.live_buffers++;
    recap__unlock(&h->lock);
    *buf_p = b;
    return RECAP_OK;
fail:
    free(blk);
    free(st);
    free(b);
    return rc;
}

recap_status_t recap__pbuf_view(recap__pbuf_t *b, recap__pbuf_t **view_p)
{
    recap__pbuf_t *v = malloc(sizeof(*v));

    if (v == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "plain buffer view");
    *v = *b;
    recap__lock(&b->engine->lock);
    b->st->refs++;
    b->engine->stats.live_buffers++;
    recap__unlock(&b->engine->lock);
    *view_p = v;
    return RECAP_OK;
}

void recap__pbuf_free(recap__pbuf_t *b)
{
    struct recap_plain_engine *h = b->engine;
    recap__storage_t *st = b->st;
    recap__block_t *dead = NULL;
    int last;

    recap__lock(&h->lock);
    recap__ptrigger_orphan_locked(b);
    last = --st->refs == 0;
    if (last)
        dead = block_unref_locked(st->block);
    h->stats.live_buffers--;
    recap__unlock(&h->lock);
    block_free(h, dead);
    if (last)
        free(st);
    b->magic = 0; /* a later use of the freed handle is caught while the memory is ours */
    free(b);
}

recap_status_t recap__pbuf_check(recap_buffer_t buf, recap__pbuf_t **b_p)
{
    recap__pbuf_t *b = buf;

    RECAP_CHECK_ARG(b != NULL, "buffer is NULL");
    RECAP_CHECK_ARG(b->magic == RECAP__PBUF_MAGIC, "%p is not a live plain buffer", buf);
    *b_p = b;
    return RECAP_OK;
}

recap_status_t recap__pbuf_free_storage(recap__pbuf_t *b)
{
    struct recap_plain_engine *h = b->engine;
    recap__block_t *dead;

    recap__lock(&h->lock);
    dead = block_unref_locked(b->st->block);
    if (b->st->block != NULL)
        h->stats.storage_frees++;
    b->st->block = NULL;
    recap__unlock(&h->lock);
    block_free(h, dead);
    return RECAP_OK;
}

recap_status_t recap__pbuf_share(recap__pbuf_t *dst, recap__pbuf_t *src)
{
    struct recap_plain_engine *h = dst->engine;
    recap__block_t *dead;

    RECAP_CHECK_ARG(src->engine == h, "buffers of two plain engines");
    recap__lock(&h->lock);
    if (src->st->block == NULL || src->st->block->bytes < dst->bytes) {
        recap__unlock(&h->lock);
        return recap__fail(RECAP_ERR_INVALID_ARG, "share_storage: source has %s storage",
                           src->st->block == NULL ? "no" : "too small a");
    }
    if (src->st->block == dst->st->block) {
        recap__unlock(&h->lock);
        return RECAP_OK;
    }
    dead = block_unref_locked(dst->st->block);
    dst->st->block = src->st->block;
    dst->st->block->refs++;
    h->stats.shares++;
    recap__unlock(&h->lock);
    block_free(h, dead);
    return RECAP_OK;
}
