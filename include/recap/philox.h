/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap/philox.h — Philox4x32-10 and Philox-argument unpacking, for CUDA kernels of any
 * project and for host C. Header-only; no dependency on the rest of recap.
 *
 * Layouts (bit-exact contracts, see DESIGN.md):
 *  - recap_philox4x32_10() is Random123's Philox4x32 with 10 rounds.
 *  - recap_philox_init(seed, subsequence, offset) followed by recap_philox_next() draws the
 *    words cuRAND's device API draws after curand_init(seed, subsequence, offset, &st) and
 *    curand(&st): counter = (offset/4 lo, hi, subsequence lo, hi) + carries, key = seed.
 *  - A kernel that receives recap_philox_args_t calls recap_philox_unpack() to learn its seed
 *    and offset: by value outside a CUDA-graph capture, read from device memory inside one.
 */
#ifndef RECAP_PHILOX_H
#define RECAP_PHILOX_H

#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define RECAP_PHILOX_FN static __host__ __device__ __forceinline__
#else
#define RECAP_PHILOX_FN static inline
#endif

#define RECAP_PHILOX_M0 0xD2511F53u
#define RECAP_PHILOX_M1 0xCD9E8D57u
#define RECAP_PHILOX_W0 0x9E3779B9u
#define RECAP_PHILOX_W1 0xBB67AE85u

/*
 * Philox arguments handed to a kernel by value. Outside a capture `seed`/`offset` hold the
 * values. Inside a capture `seed_ptr`/`offset_ptr` point to device memory that recap fills
 * before each graph launch, and `offset_intragraph` is this draw's offset relative to the
 * start of the graph; `captured` says which form applies.
 */
typedef struct recap_philox_args {
    uint64_t seed;
    uint64_t offset;
    const uint64_t *seed_ptr;
    const uint64_t *offset_ptr;
    uint64_t offset_intragraph;
    uint32_t captured;
    uint32_t reserved;
} recap_philox_args_t;

/* A cuRAND-compatible Philox stream (the state of curandStatePhilox4_32_10_t). */
typedef struct recap_philox_stream {
    uint32_t ctr[4];
    uint32_t key[2];
    uint32_t out[4];
    uint32_t idx; /* next word of out[] to return */
} recap_philox_stream_t;

RECAP_PHILOX_FN void recap_philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
#if defined(__CUDA_ARCH__)
    *hi = __umulhi(a, b);
    *lo = a * b;
#else
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
#endif
}

/* out = Philox4x32-10(ctr, key). out may alias ctr. */
RECAP_PHILOX_FN void recap_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                         uint32_t out[4])
{
    uint32_t x0 = ctr[0], x1 = ctr[1], x2 = ctr[2], x3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    int r;
    for (r = 0; r < 10; r++) {
        uint32_t hi0, lo0, hi1, lo1;
        recap_philox_mulhilo(RECAP_PHILOX_M0, x0, &hi0, &lo0);
        recap_philox_mulhilo(RECAP_PHILOX_M1, x2, &hi1, &lo1);
        x0 = hi1 ^ x1 ^ k0;
        x1 = lo1;
        x2 = hi0 ^ x3 ^ k1;
        x3 = lo0;
        k0 += RECAP_PHILOX_W0;
        k1 += RECAP_PHILOX_W1;
    }
    out[0] = x0;
    out[1] = x1;
    out[2] = x2;
    out[3] = x3;
}

/* Adds n to the low 64 bits of the 128-bit counter, carrying into the high half. */
RECAP_PHILOX_FN void recap_philox_ctr_add(uint32_t ctr[4], uint64_t n)
{
    uint64_t lo = ((uint64_t)ctr[1] << 32 | ctr[0]);
    uint64_t sum = lo + n;
    ctr[0] = (uint32_t)sum;
    ctr[1] = (uint32_t)(sum >> 32);
    if (sum < lo) {
        uint64_t hi = ((uint64_t)ctr[3] << 32 | ctr[2]) + 1;
        ctr[2] = (uint32_t)hi;
        ctr[3] = (uint32_t)(hi >> 32);
    }
}

/* Equivalent of curand_init(seed, subsequence, offset, &state). */
RECAP_PHILOX_FN void recap_philox_init(uint64_t seed, uint64_t subsequence, uint64_t offset,
                                       recap_philox_stream_t *st)
{
    st->key[0] = (uint32_t)seed;
    st->key[1] = (uint32_t)(seed >> 32);
    st->ctr[0] = 0;
    st->ctr[1] = 0;
    st->ctr[2] = (uint32_t)subsequence;
    st->ctr[3] = (uint32_t)(subsequence >> 32);
    st->idx = (uint32_t)(offset & 3u);
    recap_philox_ctr_add(st->ctr, offset >> 2);
    recap_philox4x32_10(st->ctr, st->key, st->out);
}

/* Equivalent of curand(&state). */
RECAP_PHILOX_FN uint32_t recap_philox_next(recap_philox_stream_t *st)
{
    uint32_t v = st->out[st->idx++];
    if (st->idx == 4) {
        st->idx = 0;
        recap_philox_ctr_add(st->ctr, 1);
        recap_philox4x32_10(st->ctr, st->key, st->out);
    }
    return v;
}

/* cuRAND's uniform float in (0, 1]: word * 2^-32 + 2^-33, one rounding. */
RECAP_PHILOX_FN float recap_philox_uniform(uint32_t w)
{
    return (float)w * 2.3283064365386963e-10f + 1.16415321826934814e-10f;
}

/* cuRAND's double-precision uniform from two words (curandGenerateUniformDouble layout). */
RECAP_PHILOX_FN double recap_philox_uniform_double(uint32_t lo, uint32_t hi)
{
    uint64_t z = (uint64_t)lo ^ ((uint64_t)hi << 21);
    return (double)z * 1.1102230246251565e-16 + 5.5511151231257827e-17;
}

/* The seed and offset a kernel must use. Inside a captured graph they are read from device
 * memory that each launch of the graph refreshes. */
RECAP_PHILOX_FN void recap_philox_unpack(const recap_philox_args_t *a, uint64_t *seed,
                                         uint64_t *offset)
{
    if (a->captured) {
        *seed = *a->seed_ptr;
        *offset = *a->offset_ptr + a->offset_intragraph;
    } else {
        *seed = a->seed;
        *offset = a->offset;
    }
}

#endif /* RECAP_PHILOX_H */
