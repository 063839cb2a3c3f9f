// SPDX-License-Identifier: Apache-2.0
// Ceiling probes for bench/fill: what the fill's store pattern alone, and its Philox alone, cost
// on this device. Not recap's kernel; anchors that show where the fill's time goes.
#pragma once
#include "recap/philox.h"

// Ceiling probes: the same grid-stride store pattern with no Philox (STORE_ONLY), or Philox with
// the store kept only when an impossible value shows up (COMPUTE_ONLY); CS picks streaming stores.
template <int MODE, bool CS>
__global__ void fill_probe(uint64_t dst, uint64_t n, uint64_t seed, uint64_t offset)
{
    const uint64_t nthreads = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t nunits = n / 4;
    const uint32_t k[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; b < nunits; b += nthreads) {
        float4 v;
        if (MODE == 0) { // store only
            v = make_float4(b, b, b, b);
        } else {
            uint64_t c = (offset >> 2) + (b >> 16);
            uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), (uint32_t)(b & 0xffff), 0}, w[4];
            recap_philox4x32_10(ctr, k, w);
            v = make_float4(recap_philox_uniform(w[0]), recap_philox_uniform(w[1]),
                            recap_philox_uniform(w[2]), recap_philox_uniform(w[3]));
            if (MODE == 2 && v.x != 2.0f) // compute only: never stores
                continue;
        }
        if (CS)
            __stcs((float4 *)(dst + 16 * b), v);
        else
            *(float4 *)(dst + 16 * b) = v;
    }
}

