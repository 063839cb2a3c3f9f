/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plain engine (internal): buffers over raw host or device memory for engines without a
 * framework of their own. Three levels, as in PyTorch: a handle (recap__pbuf_t: size, gradient
 * flag) uses a storage object shared with its views and saved copies, which holds a memory block
 * or nothing once released. free_storage empties the storage object, so every handle using it
 * sees the release; share_storage points it at another block, so they all see the rebuild.
 */
#ifndef RECAP_PLAIN_PLAIN_H
#define RECAP_PLAIN_PLAIN_H

#include <stddef.h>
#include <stdint.h>

#include "base/lock.h"
#include "recap.h"

/* Tells plain buffers from other handles passed by mistake. */
#define RECAP__PBUF_MAGIC 0x7265636170627566ULL /* "recapbuf" */

typedef struct recap__block {
    int refs; /* storage objects pointing at it */
    void *data;
    size_t bytes;
} recap__block_t;

typedef struct recap__storage {
    int refs; /* handles using it */
    recap__block_t *block; /* NULL while released */
} recap__storage_t;

typedef struct recap__pbuf {
    uint64_t magic;
    struct recap_plain_engine *engine;
    recap__storage_t *st;
    size_t bytes;
    int needs_grad;
} recap__pbuf_t;

typedef struct recap__ptrigger {
    struct recap__ptrigger *prev, *next;
    recap__pbuf_t *buf; /* NULL once the buffer is destroyed */
    recap_trigger_func_t fn;
    void *arg;
    int removed; /* removed while triggers were firing: unlinked when they are done */
} recap__ptrigger_t;

struct recap_plain_engine {
    uint32_t magic; /* RECAP_MAGIC_PLAIN_ENGINE while live (base/handle.h) */
    recap__lock_t lock; /* stats, reference counts, the trigger list */
    int device;
    uint32_t flags;
    recap_plain_stats_t stats;
    recap__ptrigger_t *head, *tail;
    int firing;
    struct recap__kept {
        void *data;
        size_t bytes;
    } *kept; /* RECAP_PLAIN_KEEP_FREED / REUSE_FREED: memory given back at destroy */
    size_t nkept, kept_cap;
};

/* A new handle with fresh storage of `bytes`. */
recap_status_t recap__pbuf_alloc(struct recap_plain_engine *h, size_t bytes, int needs_grad,
                                 recap__pbuf_t **buf_p);
/* A new handle on b's storage object (a view or a saved copy). */
recap_status_t recap__pbuf_view(recap__pbuf_t *b, recap__pbuf_t **view_p);
void recap__pbuf_free(recap__pbuf_t *b);
/* RECAP_ERR_INVALID_ARG unless buf is a live plain buffer. */
recap_status_t recap__pbuf_check(recap_buffer_t buf, recap__pbuf_t **b_p);

/* Storage operations behind the ops table. */
recap_status_t recap__pbuf_free_storage(recap__pbuf_t *b);
recap_status_t recap__pbuf_share(recap__pbuf_t *dst, recap__pbuf_t *src);

/* Gives a block's memory back (or keeps it) and accounts for it; called without the lock. */
void recap__plain_memory_free(struct recap_plain_engine *h, void *data, size_t bytes);

/* Triggers. */
recap_status_t recap__ptrigger_add(recap__pbuf_t *b, recap_trigger_func_t fn, void *arg,
                                   void **handle_p);
recap_status_t recap__ptrigger_remove(struct recap_plain_engine *h, void *handle);
/* The buffer is going away: its triggers stay allocated (their handles valid) but never fire. */
void recap__ptrigger_orphan_locked(recap__pbuf_t *b);
void recap__ptrigger_free_all(struct recap_plain_engine *h);

#endif
