/* SPDX-License-Identifier: Apache-2.0 */
/* A small open-addressing map from pointers to pointers (graph and exec handles to records).
 * Not thread-safe: callers hold their own lock. */
#ifndef RECAP_BASE_PTRMAP_H
#define RECAP_BASE_PTRMAP_H

#include <stddef.h>

typedef struct {
    void **keys;
    void **vals;
    size_t cap;   /* power of two, or 0 */
    size_t used;  /* live + tombstones */
    size_t live;
} recap__ptrmap_t;

void *recap__ptrmap_get(const recap__ptrmap_t *m, const void *key);
/* Inserts or replaces; returns the previous value (NULL if none), or sets *failed on OOM. */
void *recap__ptrmap_put(recap__ptrmap_t *m, void *key, void *val, int *failed);
/* Removes and returns the value (NULL if absent). */
void *recap__ptrmap_del(recap__ptrmap_t *m, const void *key);
/* Removes every entry whose value `drop` says yes to (drop frees what it drops). */
void recap__ptrmap_drop_if(recap__ptrmap_t *m, int (*drop)(void *val, void *arg), void *arg);
void recap__ptrmap_free(recap__ptrmap_t *m);

#endif
