/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "base/ptrmap.h"

/* A removed key: keeps probe chains intact until the next rehash. */
static char tombstone_byte;
#define TOMBSTONE ((void *)&tombstone_byte)

static size_t hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;

    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static size_t find_slot(const recap__ptrmap_t *m, const void *key)
{
    size_t mask = m->cap - 1, i = hash(key) & mask;

    while (m->keys[i] != NULL && m->keys[i] != key)
        i = (i + 1) & mask;
    return i;
}

void *recap__ptrmap_get(const recap__ptrmap_t *m, const void *key)
{
    size_t i;

    if (m->cap == 0 || key == NULL)
        return NULL;
    i = find_slot(m, key);
    return m->keys[i] == key ? m->vals[i] : NULL;
}

static int rehash(recap__ptrmap_t *m, size_t cap)
{
    recap__ptrmap_t n = {calloc(cap, sizeof(void *)), calloc(cap, sizeof(void *)), cap, 0, 0};
    size_t i;

    if (n.keys == NULL || n.vals == NULL) {
        free(n.keys);
        free(n.vals);
        return -1;
    }
    for (i = 0; i < m->cap; i++)
        if (m->keys[i] != NULL && m->keys[i] != TOMBSTONE) {
            size_t j = find_slot(&n, m->keys[i]);
            n.keys[j] = m->keys[i];
            n.vals[j] = m->vals[i];
            n.used++;
            n.live++;
        }
    free(m->keys);
    free(m->vals);
    *m = n;
    return 0;
}

void *recap__ptrmap_put(recap__ptrmap_t *m, void *key, void *val, int *failed)
{
    size_t i;
    void *old;

    *failed = 0;
    if ((m->used + 1) * 2 > m->cap &&
        rehash(m, m->live * 4 > 16 ? (size_t)1 << (64 - __builtin_clzll(m->live * 4)) : 16) != 0) {
        *failed = 1;
        return NULL;
    }
    i = find_slot(m, key);
    if (m->keys[i] == key) {
        old = m->vals[i];
        m->vals[i] = val;
        return old;
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->used++;
    m->live++;
    return NULL;
}

void *recap__ptrmap_del(recap__ptrmap_t *m, const void *key)
{
    size_t i;
    void *old;

    if (m->cap == 0 || key == NULL)
        return NULL;
    i = find_slot(m, key);
    if (m->keys[i] != key)
        return NULL;
    old = m->vals[i];
    m->keys[i] = TOMBSTONE;
    m->vals[i] = NULL;
    m->live--;
    return old;
}

void recap__ptrmap_drop_if(recap__ptrmap_t *m, int (*drop)(void *val, void *arg), void *arg)
{
    size_t i;

    for (i = 0; i < m->cap; i++) {
        if (m->keys[i] == NULL || m->keys[i] == TOMBSTONE || !drop(m->vals[i], arg))
            continue;
        m->keys[i] = TOMBSTONE;
        m->vals[i] = NULL;
        m->live--;
    }
}

void recap__ptrmap_free(recap__ptrmap_t *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = m->vals = NULL;
    m->cap = m->used = m->live = 0;
}
