// recap's bulk-fill kernels, compiled by nvcc into the fatbin embedded in librecap and loaded
// through the driver API (cuModuleLoadData). extern "C" keeps the names unmangled for
// cuModuleGetFunction. The parameter is __grid_constant__: the body reads the round keys through
// its address, which then stays in the constant bank instead of a per-thread copy.
#include "fill_body.h"

extern "C" __global__ void __launch_bounds__(1024, 2) recap_fill_u32(const __grid_constant__ recap_fill_params_t p)
{
    recap_fill_u32_thread(&p, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
                          (uint64_t)gridDim.x * blockDim.x);
}

extern "C" __global__ void __launch_bounds__(1024, 2) recap_fill_f32(const __grid_constant__ recap_fill_params_t p)
{
    recap_fill_f32_thread(&p, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
                          (uint64_t)gridDim.x * blockDim.x);
}

extern "C" __global__ void __launch_bounds__(1024, 2) recap_fill_f64(const __grid_constant__ recap_fill_params_t p)
{
    recap_fill_f64_thread(&p, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
                          (uint64_t)gridDim.x * blockDim.x);
}
