// SPDX-License-Identifier: Apache-2.0
// The kernel the GPU-only interception and composition programs draw with (hooked_capture.cu,
// cupti_under_tool.cu, compose.cu): a dropout-style consumer, curand_init(seed, thread, offset)
// layout through recap/philox.h, `k` words a thread.
#pragma once
#include <stdint.h>

#include "recap.h"

__global__ void draw(recap_philox_args_t a, uint32_t *out, int n, int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint64_t seed, offset;
    recap_philox_unpack(&a, &seed, &offset);
    recap_philox_stream_t st;
    recap_philox_init(seed, i, offset, &st);
    for (int j = 0; j < k; j++)
        out[(size_t)i * k + j] = recap_philox_next(&st);
}
