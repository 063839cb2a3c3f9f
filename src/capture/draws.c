/* SPDX-License-Identifier: Apache-2.0 */
/* Draw sets: what a part of a graph draws, per generator slot (draws.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "capture/draws.h"

int recap__draws_add(recap__draws_t *ds, uint64_t slot, uint64_t inc)
{
    size_t i;

    for (i = 0; i < ds->n; i++)
        if (ds->d[i].slot == slot) {
            ds->d[i].inc += inc;
            return 1;
        }
    if (ds->n == ds->cap) {
        size_t cap = ds->cap ? 2 * ds->cap : 8;
        recap__draw_t *d = recap__realloc_n(ds->d, cap, sizeof(*d));
        if (d == NULL)
            return 0;
        ds->d = d;
        ds->cap = cap;
    }
    ds->d[ds->n].slot = slot;
    ds->d[ds->n].inc = inc;
    ds->n++;
    return 1;
}

int recap__draws_merge(recap__draws_t *into, const recap__draws_t *from)
{
    size_t i;

    for (i = 0; i < from->n; i++)
        if (!recap__draws_add(into, from->d[i].slot, from->d[i].inc))
            return 0;
    return 1;
}

int recap__draws_has(const recap__draws_t *ds, uint64_t slot)
{
    size_t i;

    for (i = 0; i < ds->n; i++)
        if (ds->d[i].slot == slot)
            return 1;
    return 0;
}

int recap__draws_share(const recap__draws_t *a, const recap__draws_t *b)
{
    size_t i;

    for (i = 0; i < a->n; i++)
        if (recap__draws_has(b, a->d[i].slot))
            return 1;
    return 0;
}

void recap__draws_free(recap__draws_t *ds)
{
    free(ds->d);
    memset(ds, 0, sizeof(*ds));
}
