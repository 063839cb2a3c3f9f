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
#include <stdlib.h>

#include "region/region.h"

#define CACHE_MAX 32

typedef struct {
    recap_snapshot_h s[CACHE_MAX];
    int n;
} cache_t;

/* Allocated at the thread's first put: thread-local storage holds one pointer (librecap's TLS is
 * static TLS, kept to a few words: src/base/error.c says why). */
static __thread cache_t *cache __attribute__((tls_model("initial-exec")));
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int have_key;

/* Threads other than the main one give their cached snapshots back when they end. */
static void cache_free(void *arg)
{
    cache_t *c = arg;

    cache = NULL;
    while (c->n > 0)
        recap_snapshot_destroy(c->s[--c->n]);
    free(c);
}

static void key_create(void)
{
    have_key = pthread_key_create(&key, cache_free) == 0;
}

recap_status_t recap__snap_get(recap_snapshot_h *snap_p)
{
    if (cache != NULL && cache->n > 0) {
        *snap_p = cache->s[--cache->n];
        return RECAP_OK;
    }
    return recap_snapshot_create(snap_p);
}

void recap__snap_put(recap_snapshot_h snap)
{
    if (cache == NULL) {
        pthread_once(&key_once, key_create);
        cache = have_key ? malloc(sizeof(*cache)) : NULL;
        if (cache != NULL) {
            cache->n = 0;
            pthread_setspecific(key, cache);
        }
    }
    if (cache == NULL || cache->n == CACHE_MAX) {
        recap_snapshot_destroy(snap);
        return;
    }
    cache->s[cache->n++] = snap;
}
