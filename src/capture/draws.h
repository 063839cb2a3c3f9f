/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Draw sets (internal, for the graph walk and compose.c): what a part of a graph draws per run,
 * one (generator slot, increment) pair per slot.
 */
#ifndef RECAP_CAPTURE_DRAWS_H
#define RECAP_CAPTURE_DRAWS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t slot, inc;
} recap__draw_t;

typedef struct {
    recap__draw_t *d;
    size_t n, cap;
} recap__draws_t;

/* Adds inc to slot's increment (a new pair when slot is not there yet). 0 when out of memory. */
int recap__draws_add(recap__draws_t *ds, uint64_t slot, uint64_t inc);
/* Adds every pair of `from` into `into`. 0 when out of memory. */
int recap__draws_merge(recap__draws_t *into, const recap__draws_t *from);
/* Whether ds holds slot; whether a and b hold a slot in common. */
int recap__draws_has(const recap__draws_t *ds, uint64_t slot);
int recap__draws_share(const recap__draws_t *a, const recap__draws_t *b);
void recap__draws_free(recap__draws_t *ds);

#endif
