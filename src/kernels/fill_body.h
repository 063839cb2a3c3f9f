/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bulk-fill kernels' bodies, written once and compiled twice: by nvcc into recap's embedded
 * fatbin (src/kernels/fill.cu), and by the C compiler into the host fill path and the CUDA test
 * double, which runs recap's kernels on the host thread by thread.
 *
 * Layout (cuRAND's PHILOX4_32_10 generator, default ordering, generator offset 65536 * offset):
 * 32-bit word w lies in Philox block b = w / 4, drawn with counter (c lo, c hi, s, 0) where
 * c = b / 65536 + offset / 4 and s = b mod 65536, key = seed. Doubles: see recap__fill_f64_thread.
 */
#ifndef RECAP_KERNELS_FILL_BODY_H
#define RECAP_KERNELS_FILL_BODY_H

#include <stdint.h>

#include "recap/philox.h"

#if defined(__CUDACC__)
#define RECAP_KFN static __device__ __forceinline__
#define RECAP_KFN_HD static __host__ __device__ __forceinline__ /* also for CUDA host code */
#else
#define RECAP_KFN_HD static inline
#include <string.h>
#define RECAP_KFN static inline
#endif

/* Names the driver looks the kernels up by; the test double knows the same names. */
#define RECAP_KERNEL_FILL_U32 "recap_fill_u32"
#define RECAP_KERNEL_FILL_F32 "recap_fill_f32"
#define RECAP_KERNEL_FILL_F64 "recap_fill_f64"
#define RECAP_KERNEL_FILL_U32_CAPTURED "recap_fill_u32_captured"
#define RECAP_KERNEL_FILL_F32_CAPTURED "recap_fill_f32_captured"
#define RECAP_KERNEL_FILL_F64_CAPTURED "recap_fill_f64_captured"

/* Philox round keys: seed + r * (W0, W1) for rounds r = 0..9. */
typedef struct {
    uint32_t k0[10], k1[10];
} recap__fill_keys_t;

/* The one by-value argument of every fill kernel. Outside a capture the host computes the round
 * keys into it: the kernel's XORs then read them from the constant bank (uniform registers on
 * sm_90), which frees the 20 registers per thread that keys computed in the kernel take, and the
 * fill gets faster (bench/RESULTS.md, "Bulk fill": Keys). Inside a capture the
 * seed is only known on the device: the _captured kernels compute them. */
typedef struct recap__fill_params {
    uint64_t dst; /* address of the first element */
    uint64_t n;   /* elements to write */
    recap_philox_args_t philox;
    recap__fill_keys_t keys; /* valid when !philox.captured */
} recap__fill_params_t;

/* Philox blocks per subsequence stride: cuRAND's generator spreads blocks over 65536 streams. */
#define RECAP_FILL_SUBSEQUENCES 65536u

/* The round keys of a seed; in a kernel (the captured path) pinned in registers, which measured
 * faster than letting the compiler re-derive them with adds in the loop. */
RECAP_KFN_HD void recap__fill_keys(uint64_t seed, recap__fill_keys_t *k)
{
    int r;

    k->k0[0] = (uint32_t)seed;
    k->k1[0] = (uint32_t)(seed >> 32);
    for (r = 1; r < 10; r++) {
        k->k0[r] = k->k0[r - 1] + RECAP_PHILOX_W0;
        k->k1[r] = k->k1[r - 1] + RECAP_PHILOX_W1;
    }
#if defined(__CUDA_ARCH__)
    for (r = 0; r < 10; r++)
        asm volatile("" : "+r"(k->k0[r]), "+r"(k->k1[r]));
#endif
}

/* Philox4x32-10 of counter (c lo, c hi, s, 0) with precomputed keys; equal to
 * recap_philox4x32_10 (the tests compare them). 64-bit products compile to one wide multiply. */
RECAP_KFN void recap__fill_philox(const recap__fill_keys_t *k, uint64_t c, uint32_t s, uint32_t out[4])
{
    uint32_t x0 = (uint32_t)c, x1 = (uint32_t)(c >> 32), x2 = s, x3 = 0;
    int r;

    for (r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)RECAP_PHILOX_M0 * x0, p1 = (uint64_t)RECAP_PHILOX_M1 * x2;
        x0 = (uint32_t)(p1 >> 32) ^ x1 ^ k->k0[r];
        x1 = (uint32_t)p1;
        x2 = (uint32_t)(p0 >> 32) ^ x3 ^ k->k1[r];
        x3 = (uint32_t)p0;
    }
    out[0] = x0;
    out[1] = x1;
    out[2] = x2;
    out[3] = x3;
}

/* 16-byte stores when aligned; the device path uses streaming stores (the data is not re-read
 * by this kernel, so it should not evict others' lines from L2). */
#if defined(__CUDACC__)
RECAP_KFN void recap__store_u4(uint64_t addr, const uint32_t w[4])
{
    __stcs((uint4 *)addr, make_uint4(w[0], w[1], w[2], w[3]));
}
RECAP_KFN void recap__store_f4(uint64_t addr, float a, float b, float c, float d)
{
    __stcs((float4 *)addr, make_float4(a, b, c, d));
}
RECAP_KFN void recap__store_d2(uint64_t addr, double a, double b)
{
    __stcs((double2 *)addr, make_double2(a, b));
}
#else
RECAP_KFN void recap__store_u4(uint64_t addr, const uint32_t w[4])
{
    memcpy((void *)(uintptr_t)addr, w, 16);
}
RECAP_KFN void recap__store_f4(uint64_t addr, float a, float b, float c, float d)
{
    float v[4] = {a, b, c, d};
    memcpy((void *)(uintptr_t)addr, v, 16);
}
RECAP_KFN void recap__store_d2(uint64_t addr, double a, double b)
{
    double v[2] = {a, b};
    memcpy((void *)(uintptr_t)addr, v, 16);
}
#endif

enum { RECAP_FILL_KIND_U32, RECAP_FILL_KIND_F32, RECAP_FILL_KIND_F64 };

/* The words of unit q (4 elements): one counter for u32/f32 (block q of cuRAND's layout), two
 * consecutive counters of one subsequence for f64 (curandGenerateUniformDouble's layout: unit q
 * uses subsequence q mod 65536, counters base + 2 (q / 65536) + 0, 1). */
RECAP_KFN void recap__fill_unit_words(int kind, const recap__fill_keys_t *k, uint64_t base,
                                     uint64_t q, uint32_t w[8])
{
    if (kind == RECAP_FILL_KIND_F64) {
        uint64_t c = base + 2 * (q >> 16);
        recap__fill_philox(k, c, (uint32_t)(q & 0xffffu), w);
        recap__fill_philox(k, c + 1, (uint32_t)(q & 0xffffu), w + 4);
    } else {
        recap__fill_philox(k, base + (q >> 16), (uint32_t)(q & 0xffffu), w);
    }
}

/* Writes unit q: one 16-byte store (two for doubles) when `whole` (the caller knows the unit is
 * 16-byte aligned and all inside the buffer), else element-wise up to n. */
RECAP_KFN void recap__fill_unit_store(int kind, const recap__fill_params_t *p, int whole,
                                     uint64_t q, const uint32_t w[8])
{
    uint64_t i, first = 4 * q;

    if (kind == RECAP_FILL_KIND_U32) {
        if (whole) {
            recap__store_u4(p->dst + 16 * q, w);
        } else {
            for (i = 0; i < 4 && first + i < p->n; i++)
                ((uint32_t *)(uintptr_t)p->dst)[first + i] = w[i];
        }
    } else if (kind == RECAP_FILL_KIND_F32) {
        if (whole) {
            recap__store_f4(p->dst + 16 * q, recap_philox_uniform(w[0]), recap_philox_uniform(w[1]),
                           recap_philox_uniform(w[2]), recap_philox_uniform(w[3]));
        } else {
            for (i = 0; i < 4 && first + i < p->n; i++)
                ((float *)(uintptr_t)p->dst)[first + i] = recap_philox_uniform(w[i]);
        }
    } else {
        double d[4];
        for (i = 0; i < 4; i++)
            d[i] = recap_philox_uniform_double(w[2 * i], w[2 * i + 1]);
        if (whole) {
            recap__store_d2(p->dst + 32 * q, d[0], d[1]);
            recap__store_d2(p->dst + 32 * q + 16, d[2], d[3]);
        } else {
            for (i = 0; i < 4 && first + i < p->n; i++)
                ((double *)(uintptr_t)p->dst)[first + i] = d[i];
        }
    }
}

/*
 * One thread's share of a fill outside a capture: units tid, tid + nthreads, ..., one per step,
 * the round keys read from the parameters (the host computed them). Its own kernel: with one
 * kernel for both paths the library fill measured as slow as the captured body alone (0.925 x
 * memset against 0.947-0.950 with separate kernels, bench/RESULTS.md).
 */
RECAP_KFN void recap__fill_thread(int kind, const recap__fill_params_t *p, uint64_t tid,
                                 uint64_t nthreads)
{
    uint64_t q, nunits = (p->n + 3) / 4, base = p->philox.offset >> 2;
    /* Units below nwhole are whole and aligned: one compare per unit. Measured against the
     * alternatives (the full alignment-and-length test per unit; whole units in a loop of their
     * own with the rest in a second one or by one thread), this shape was the fastest
     * (bench/fill_explore; bench/RESULTS.md, "Bulk fill"). */
    uint64_t nwhole = (p->dst & 15u) == 0 ? p->n / 4 : 0;

    for (q = tid; q < nunits; q += nthreads) {
        uint32_t w[8];

        recap__fill_unit_words(kind, &p->keys, base, q, w);
        recap__fill_unit_store(kind, p, q < nwhole, q, w);
    }
}

/*
 * The same inside a capture, where the seed and offset are read from device memory at run time:
 * the keys are computed here, and each thread takes two units per step so two independent Philox
 * chains are in flight (the fastest shape measured for keys in registers).
 */
RECAP_KFN void recap__fill_thread_captured(int kind, const recap__fill_params_t *p, uint64_t tid,
                                          uint64_t nthreads)
{
    uint64_t seed, offset, q, nunits = (p->n + 3) / 4;
    int aligned = (p->dst & 15u) == 0;
    recap__fill_keys_t k;

    recap_philox_unpack(&p->philox, &seed, &offset);
    recap__fill_keys(seed, &k);
    for (q = tid; q < nunits; q += 2 * nthreads) {
        uint64_t q2 = q + nthreads;
        uint32_t w[8], w2[8];

        recap__fill_unit_words(kind, &k, offset >> 2, q, w);
        if (q2 < nunits)
            recap__fill_unit_words(kind, &k, offset >> 2, q2, w2);
        recap__fill_unit_store(kind, p, aligned && 4 * q + 4 <= p->n, q, w);
        if (q2 < nunits)
            recap__fill_unit_store(kind, p, aligned && 4 * q2 + 4 <= p->n, q2, w2);
    }
}

#define RECAP_FILL_THREAD_FNS(name, kind)                                                       \
    RECAP_KFN void recap__fill_##name##_thread(const recap__fill_params_t *p, uint64_t tid,      \
                                              uint64_t nthreads)                               \
    {                                                                                          \
        recap__fill_thread(kind, p, tid, nthreads);                                             \
    }                                                                                          \
    RECAP_KFN void recap__fill_##name##_captured_thread(const recap__fill_params_t *p,           \
                                                       uint64_t tid, uint64_t nthreads)        \
    {                                                                                          \
        recap__fill_thread_captured(kind, p, tid, nthreads);                                    \
    }
RECAP_FILL_THREAD_FNS(u32, RECAP_FILL_KIND_U32)
RECAP_FILL_THREAD_FNS(f32, RECAP_FILL_KIND_F32)
RECAP_FILL_THREAD_FNS(f64, RECAP_FILL_KIND_F64)

#endif
