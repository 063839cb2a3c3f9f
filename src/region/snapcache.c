/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A per-thread cache of snapshot objects for regions. Every region needs two snapshots (the
 * forward's, and the state to go back to after the recompute); creating them per region would
 * allocate their arrays each time (glibc consolidates its fast bins on such allocations: a
 * quarter of a region's cost in bench/region.c). Cached snapshots keep their arrays, and one
 * that last held the same tracker's names copies values only.
 */
#include "config.h"

#include <pthread.h>

#include "region/region.h"

#define CACHE_MAX 32

typedef struct {
    recap_snapshot_h s[CACHE_MAX];
    int n;
    int registered;
} cache_t;

static _Thread_local cache_t cache;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* Threads other than the main one give their cached snapshots back when they end. */
static void cache_free(void *arg)
{
    cache_t *c = arg;

    while (c->n > 0)
        recap_snapshot_destroy(c->s[--c->n]);
}

static void key_create(void)
{
    pthread_key_create(&key, cache_free);
}

recap_status_t recap__snap_get(recap_snapshot_h *snap_p)
{
    if (cache.n > 0) {
        *snap_p = cache.s[--cache.n];
        return RECAP_OK;
    }
    return recap_snapshot_create(snap_p);
}

void recap__snap_put(recap_snapshot_h snap)
{
    if (cache.n == CACHE_MAX) {
        recap_snapshot_destroy(snap);
        return;
    }
    if (!cache.registered) {
        pthread_once(&key_once, key_create);
        pthread_setspecific(key, &cache);
        cache.registered = 1;
    }
    cache.s[cache.n++] = snap;
}
