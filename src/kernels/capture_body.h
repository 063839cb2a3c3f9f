/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernels of the capture module, compiled by nvcc into the embedded fatbin and, for the CUDA test
 * double, by the C compiler.
 *
 * A device generator state that takes part in graphs owns a 16-byte device slot {seed, offset}:
 * captured kernels read their Philox base from it (recap_philox_args_t.seed_ptr/offset_ptr).
 *  - recap_capture_advance is captured as the last node of every graph that draws random
 *    numbers: it adds the graph's increment to each slot it used, so the next launch finds a
 *    fresh base without any host-issued device work (steady state: zero device operations).
 *  - recap_slot_write runs before a launch only when a slot is stale (eager draws or a reseed
 *    happened since the last launch): it writes the host's (seed, offset) into the slots.
 */
#ifndef RECAP_KERNELS_CAPTURE_BODY_H
#define RECAP_KERNELS_CAPTURE_BODY_H

#include <stdint.h>

#if defined(__CUDACC__)
#define RECAP_CKFN static __device__ __forceinline__
#else
#define RECAP_CKFN static inline
#endif

#define RECAP_KERNEL_ADVANCE "recap_capture_advance"
#define RECAP_KERNEL_SLOT_WRITE "recap_slot_write"

/* Entries per launch; more slots take more launches. Keeps parameters well under 4 KiB. */
#define RECAP_SLOTS_PER_LAUNCH 64

typedef struct recap__advance_params {
    uint64_t slot[RECAP_SLOTS_PER_LAUNCH]; /* device address of {seed, offset} */
    uint64_t inc[RECAP_SLOTS_PER_LAUNCH];
    uint32_t count;
    uint32_t reserved;
} recap__advance_params_t;

typedef struct recap__slot_write_params {
    uint64_t slot[RECAP_SLOTS_PER_LAUNCH];
    uint64_t seed[RECAP_SLOTS_PER_LAUNCH];
    uint64_t offset[RECAP_SLOTS_PER_LAUNCH];
    uint32_t count;
    uint32_t reserved;
} recap__slot_write_params_t;

/* Both run with one block of RECAP_SLOTS_PER_LAUNCH threads; thread i owns entry i. */
RECAP_CKFN void recap__capture_advance_thread(const recap__advance_params_t *p, uint64_t tid,
                                             uint64_t nthreads)
{
    (void)nthreads;
    if (tid < p->count)
        ((uint64_t *)(uintptr_t)p->slot[tid])[1] += p->inc[tid];
}

RECAP_CKFN void recap__slot_write_thread(const recap__slot_write_params_t *p, uint64_t tid,
                                        uint64_t nthreads)
{
    (void)nthreads;
    if (tid < p->count) {
        uint64_t *s = (uint64_t *)(uintptr_t)p->slot[tid];
        s[0] = p->seed[tid];
        s[1] = p->offset[tid];
    }
}

#endif
