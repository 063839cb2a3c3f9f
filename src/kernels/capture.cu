// SPDX-License-Identifier: Apache-2.0
// The capture module's kernels (see capture_body.h), compiled into the same fatbin as the fills.
#include "capture_body.h"

extern "C" __global__ void recap_capture_advance(recap__advance_params_t p)
{
    recap__capture_advance_thread(&p, threadIdx.x, blockDim.x);
}

extern "C" __global__ void recap_slot_write(recap__slot_write_params_t p)
{
    recap__slot_write_thread(&p, threadIdx.x, blockDim.x);
}
