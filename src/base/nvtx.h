/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NVTX ranges for what recap does on the host's timeline (Nsight Systems shows them in a "recap"
 * domain): priming generator states before a capture, a launch's generator advance and the slot
 * writes it issues, and the region work a checkpoint adds (release, rebuild, recompute).
 *
 * NVTX3 is header-only: the first call looks for a tool (NVTX_INJECTION64_PATH, which nsys sets)
 * and, with none, every later call is an indirect call to an empty function. Without the NVTX3
 * headers at build time (HAVE_NVTX3 unset) the calls compile to nothing.
 */
#ifndef RECAP_BASE_NVTX_H
#define RECAP_BASE_NVTX_H

typedef enum {
    RECAP_NVTX_PRIME,      /* generator states get device slots before a capture begins */
    RECAP_NVTX_LAUNCH,     /* a graph launch advances the generators it draws from */
    RECAP_NVTX_SLOT_WRITE, /* ... and rewrites stale device slots (device work) */
    RECAP_NVTX_RELEASE,    /* a region's outputs released */
    RECAP_NVTX_REBUILD,    /* a region recomputed and its outputs rebuilt */
    RECAP_NVTX_RECOMPUTE,  /* a checkpoint recomputed at backward */
    RECAP_NVTX_COUNT
} recap__nvtx_t;

#ifdef HAVE_NVTX3
/* A range on the calling thread; every push is matched by a pop on the same thread. */
void recap__nvtx_push(recap__nvtx_t what);
void recap__nvtx_pop(void);
#else
static inline void recap__nvtx_push(recap__nvtx_t what)
{
    (void)what;
}
static inline void recap__nvtx_pop(void)
{
}
#endif

#endif
