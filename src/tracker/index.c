/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hash indexes that find a tracker's names and seeds (and a states object's names) in
 * constant expected time: with a scan, adding n states or forking each of them once cost n^2 / 2
 * comparisons (issue 47: 100,000 states took 40 s to add).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "tracker/tracker.h"

/* An entry's 32-bit hash stays in its cell and is its home bucket too, so a rehash never reads
 * the names again; 2^31 entries keep every table within 2^32 cells. */
#define MAX_ENTRIES ((size_t)1 << 31)
#define MIN_CELLS 16

static uint64_t word_at(const char *p)
{
    uint64_t w;

    memcpy(&w, p, sizeof(w));
    return w;
}

/* A multiply-xor round per 8 bytes, a last word overlapping the one before (only bytes of the
 * name are read: callers' names end anywhere) and murmur3's finalizer to bring every byte's
 * effect down to the low 32 bits used. */
uint32_t recap__name_hash(const char *name, size_t len)
{
    const uint64_t m = 0x9E3779B97F4A7C15ULL;
    uint64_t h = (uint64_t)len * m, w = 0;
    size_t k;

    if (len < sizeof(w)) {
        for (k = 0; k < len; k++)
            w |= (uint64_t)(unsigned char)name[k] << (8 * k);
        h = (h ^ w) * m;
    } else {
        for (k = 0; k + sizeof(w) < len; k += sizeof(w)) {
            h = (h ^ word_at(name + k)) * m;
            h ^= h >> 29;
        }
        h = (h ^ word_at(name + len - sizeof(w))) * m;
    }
    return recap__seed_hash(h);
}

uint32_t recap__seed_hash(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

static void put_cell(uint64_t *cells, size_t cap, uint64_t cell)
{
    size_t i = (size_t)(cell >> 32) & (cap - 1);

    while (cells[i] != 0)
        i = (i + 1) & (cap - 1);
    cells[i] = cell;
}

recap_status_t recap__index_reserve(recap__index_t *x, size_t n)
{
    size_t cap = x->cap ? x->cap : MIN_CELLS, i;
    uint64_t *cells;

    /* At most half full: a lookup then reads 1.5 cells on average for a name present, 2.5 for
     * one absent (linear probing). An empty index stays unallocated (a reset's). */
    if (n <= x->cap / 2)
        return RECAP_OK;
    if (n > MAX_ENTRIES)
        return recap__fail(RECAP_ERR_NO_MEMORY, "index of %zu states", n);
    while (cap < 2 * n)
        cap *= 2;
    cells = calloc(cap, sizeof(*cells));
    if (cells == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "index of %zu states", n);
    for (i = 0; i < x->cap; i++)
        if (x->cells[i] != 0)
            put_cell(cells, cap, x->cells[i]);
    free(x->cells);
    x->cells = cells;
    x->cap = cap;
    return RECAP_OK;
}

void recap__index_put(recap__index_t *x, uint32_t hash, size_t pos)
{
    put_cell(x->cells, x->cap, (uint64_t)hash << 32 | (uint64_t)(pos + 1));
    x->n++;
}

void recap__index_clear(recap__index_t *x)
{
    if (x->cap != 0)
        memset(x->cells, 0, x->cap * sizeof(*x->cells));
    x->n = 0;
}

void recap__index_free(recap__index_t *x)
{
    free(x->cells);
    x->cells = NULL;
    x->cap = x->n = 0;
}

int recap__index_find_name(const recap__index_t *x, recap__slot_t *const *slots,
                           const char *name, size_t len, uint32_t hash)
{
    size_t i, p;

    if (x->cap == 0)
        return -1;
    i = hash & (x->cap - 1);
    while ((p = recap__index_next(x, hash, &i)) != 0) {
        const recap__entry_t *e = &slots[p - 1]->e;
        if (e->len == len && memcmp(e->name, name, len) == 0)
            return (int)(p - 1);
    }
    return -1;
}

int recap__tracker_lookup(recap_tracker_h t, const char *name)
{
    size_t len = strnlen(name, RECAP_NAME_MAX + 1);
    int i;

    if (len > RECAP_NAME_MAX) /* no such name was added */
        return -1;
    i = recap__index_find_name(&t->names, t->slots, name, len, recap__name_hash(name, len));
    if (i >= 0)
        t->hint = (size_t)i;
    return i;
}

int recap__tracker_has_seed(const struct recap_tracker *t, uint64_t seed)
{
    uint32_t hash = recap__seed_hash(seed);
    size_t i, p;

    if (t->seed_index.cap == 0)
        return 0;
    i = hash & (t->seed_index.cap - 1);
    while ((p = recap__index_next(&t->seed_index, hash, &i)) != 0)
        if (t->seeds[p - 1] == seed)
            return 1;
    return 0;
}
