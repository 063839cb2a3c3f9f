// SPDX-License-Identifier: Apache-2.0
// recap's bulk-fill kernels, compiled by nvcc into the fatbin embedded in librecap and loaded
// through the driver API (cuModuleLoadData). extern "C" keeps the names unmangled for
// cuModuleGetFunction. The parameter is __grid_constant__: the eager bodies read the round keys
// through its address, which then stays in the constant bank instead of a per-thread copy.
// Eager fills and captured fills are separate kernels (fill_body.h says why).
#include "fill_body.h"

// Two 1024-thread blocks resident per SM (src/rng/fill.c's launch shape), where an SM holds
// 2048 threads; Turing's (sm_75) holds 1024, so there the hint asks for one (ptxas would
// ignore 2 with a warning).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 750
#define RECAP_FILL_MIN_BLOCKS 1
#else
#define RECAP_FILL_MIN_BLOCKS 2
#endif

#define RECAP_FILL_KERNEL(name)                                                                \
    extern "C" __global__ void __launch_bounds__(1024, RECAP_FILL_MIN_BLOCKS)                  \
        recap_fill_##name(const __grid_constant__ recap__fill_params_t p)                       \
    {                                                                                          \
        recap__fill_##name##_thread(&p, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,        \
                                   (uint64_t)gridDim.x * blockDim.x);                          \
    }

RECAP_FILL_KERNEL(u32)
RECAP_FILL_KERNEL(f32)
RECAP_FILL_KERNEL(f64)
RECAP_FILL_KERNEL(u32_captured)
RECAP_FILL_KERNEL(f32_captured)
RECAP_FILL_KERNEL(f64_captured)
