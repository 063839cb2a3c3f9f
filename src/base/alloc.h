/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation of counted things: every count that becomes a size goes through these, so a count
 * whose byte size does not fit a size_t fails like an allocation that ran out of memory (NULL)
 * instead of wrapping to a small block that is then written past.
 */
#ifndef RECAP_BASE_ALLOC_H
#define RECAP_BASE_ALLOC_H

#include <stdint.h>
#include <stdlib.h>

/* a + b, or SIZE_MAX when that does not fit (every allocation of SIZE_MAX elements fails). */
static inline size_t recap__count_add(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/* *bytes_p = header + n * size; 0 when that does not fit a size_t. */
static inline int recap__bytes(size_t header, size_t n, size_t size, size_t *bytes_p)
{
    if (size != 0 && n > (SIZE_MAX - header) / size)
        return 0;
    *bytes_p = header + n * size;
    return 1;
}

/* malloc of n elements of `size` bytes after `header` bytes. */
static inline void *recap__alloc_flex(size_t header, size_t n, size_t size)
{
    size_t bytes;

    return recap__bytes(header, n, size, &bytes) ? malloc(bytes) : NULL;
}

/* calloc of the same, zeroed. */
static inline void *recap__zalloc_flex(size_t header, size_t n, size_t size)
{
    size_t bytes;

    return recap__bytes(header, n, size, &bytes) ? calloc(1, bytes) : NULL;
}

/* malloc and realloc of n elements of `size` bytes. */
static inline void *recap__alloc_n(size_t n, size_t size)
{
    return recap__alloc_flex(0, n, size);
}

static inline void *recap__realloc_n(void *p, size_t n, size_t size)
{
    size_t bytes;

    return recap__bytes(0, n, size, &bytes) ? realloc(p, bytes) : NULL;
}

#endif
