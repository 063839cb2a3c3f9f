/*
 * The bulk-fill kernels' bodies, written once and compiled twice: by nvcc into recap's embedded
 * fatbin (src/kernels/fill.cu), and by the C compiler into the host fill path and the CUDA test
 * double, which runs recap's kernels on the host thread by thread.
 *
 * Layout (cuRAND's PHILOX4_32_10 generator, default ordering, generator offset 65536 * offset):
 * 32-bit word w lies in Philox block b = w / 4, drawn with counter (c lo, c hi, s, 0) where
 * c = b / 65536 + offset / 4 and s = b mod 65536, key = seed. Doubles: see recap_fill_f64_thread.
 */
#ifndef RECAP_KERNELS_FILL_BODY_H
#define RECAP_KERNELS_FILL_BODY_H

#include <stdint.h>

#include "recap/philox.h"

#if defined(__CUDACC__)
#define RECAP_KFN static __device__ __forceinline__
#else
#include <string.h>
#define RECAP_KFN static inline
#endif

/* Names the driver looks the kernels up by; the test double knows the same names. */
#define RECAP_KERNEL_FILL_U32 "recap_fill_u32"
#define RECAP_KERNEL_FILL_F32 "recap_fill_f32"
#define RECAP_KERNEL_FILL_F64 "recap_fill_f64"

/* The one by-value argument of every fill kernel. */
typedef struct recap_fill_params {
    uint64_t dst; /* address of the first element */
    uint64_t n;   /* elements to write */
    recap_philox_args_t philox;
} recap_fill_params_t;

/* Philox blocks per subsequence stride: cuRAND's generator spreads blocks over 65536 streams. */
#define RECAP_FILL_SUBSEQUENCES 65536u

RECAP_KFN void recap_fill_block(uint64_t seed, uint64_t base_ctr, uint64_t b, uint32_t out[4])
{
    uint64_t c = base_ctr + (b >> 16);
    uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), (uint32_t)(b & 0xffffu), 0u};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};

    recap_philox4x32_10(ctr, key, out);
}

/* 16-byte stores when aligned; the device path uses streaming stores (the data is not re-read
 * by this kernel, so it should not evict others' lines from L2). */
#if defined(__CUDACC__)
RECAP_KFN void recap_store_u4(uint64_t addr, const uint32_t w[4])
{
    __stcs((uint4 *)addr, make_uint4(w[0], w[1], w[2], w[3]));
}
RECAP_KFN void recap_store_f4(uint64_t addr, float a, float b, float c, float d)
{
    __stcs((float4 *)addr, make_float4(a, b, c, d));
}
RECAP_KFN void recap_store_d2(uint64_t addr, double a, double b)
{
    __stcs((double2 *)addr, make_double2(a, b));
}
#else
RECAP_KFN void recap_store_u4(uint64_t addr, const uint32_t w[4])
{
    memcpy((void *)(uintptr_t)addr, w, 16);
}
RECAP_KFN void recap_store_f4(uint64_t addr, float a, float b, float c, float d)
{
    float v[4] = {a, b, c, d};
    memcpy((void *)(uintptr_t)addr, v, 16);
}
RECAP_KFN void recap_store_d2(uint64_t addr, double a, double b)
{
    double v[2] = {a, b};
    memcpy((void *)(uintptr_t)addr, v, 16);
}
#endif

/*
 * One thread's share of a fill: Philox blocks tid, tid + nthreads, ... Each block yields 4 words
 * (4 u32, 4 floats or 2 doubles). A block that runs past n, or an unaligned destination, takes
 * the scalar path.
 */
RECAP_KFN void recap_fill_u32_thread(const recap_fill_params_t *p, uint64_t tid, uint64_t nthreads)
{
    uint64_t seed, offset, b, nblocks = (p->n + 3) / 4;
    int aligned = (p->dst & 15u) == 0;
    uint32_t *dst = (uint32_t *)(uintptr_t)p->dst;

    recap_philox_unpack(&p->philox, &seed, &offset);
    for (b = tid; b < nblocks; b += nthreads) {
        uint32_t w[4];
        recap_fill_block(seed, offset >> 2, b, w);
        if (aligned && 4 * b + 4 <= p->n) {
            recap_store_u4(p->dst + 16 * b, w);
        } else {
            uint64_t i;
            for (i = 0; i < 4 && 4 * b + i < p->n; i++)
                dst[4 * b + i] = w[i];
        }
    }
}

RECAP_KFN void recap_fill_f32_thread(const recap_fill_params_t *p, uint64_t tid, uint64_t nthreads)
{
    uint64_t seed, offset, b, nblocks = (p->n + 3) / 4;
    int aligned = (p->dst & 15u) == 0;
    float *dst = (float *)(uintptr_t)p->dst;

    recap_philox_unpack(&p->philox, &seed, &offset);
    for (b = tid; b < nblocks; b += nthreads) {
        uint32_t w[4];
        recap_fill_block(seed, offset >> 2, b, w);
        if (aligned && 4 * b + 4 <= p->n) {
            recap_store_f4(p->dst + 16 * b, recap_philox_uniform(w[0]), recap_philox_uniform(w[1]),
                           recap_philox_uniform(w[2]), recap_philox_uniform(w[3]));
        } else {
            uint64_t i;
            for (i = 0; i < 4 && 4 * b + i < p->n; i++)
                dst[4 * b + i] = recap_philox_uniform(w[i]);
        }
    }
}

/* Doubles follow cuRAND's curandGenerateUniformDouble: a unit of 4 doubles takes two consecutive
 * counters of one subsequence (unit q: s = q mod 65536, counters base + 2 (q / 65536) + 0, 1),
 * each counter's block giving two doubles from words (0, 1) and (2, 3). */
RECAP_KFN void recap_fill_f64_thread(const recap_fill_params_t *p, uint64_t tid, uint64_t nthreads)
{
    uint64_t seed, offset, q, nunits = (p->n + 3) / 4;
    int aligned = (p->dst & 15u) == 0;
    double *dst = (double *)(uintptr_t)p->dst;

    recap_philox_unpack(&p->philox, &seed, &offset);
    for (q = tid; q < nunits; q += nthreads) {
        uint64_t base = (offset >> 2) + 2 * (q >> 16), i;
        uint32_t w[8];
        double d[4];

        recap_fill_block(seed, base, q & 0xffffu, w);
        recap_fill_block(seed, base + 1, q & 0xffffu, w + 4);
        for (i = 0; i < 4; i++)
            d[i] = recap_philox_uniform_double(w[2 * i], w[2 * i + 1]);
        if (aligned && 4 * q + 4 <= p->n) {
            recap_store_d2(p->dst + 32 * q, d[0], d[1]);
            recap_store_d2(p->dst + 32 * q + 16, d[2], d[3]);
        } else {
            for (i = 0; i < 4 && 4 * q + i < p->n; i++)
                dst[4 * q + i] = d[i];
        }
    }
}

#endif
