// SPDX-License-Identifier: Apache-2.0
// All of recap's kernels in one translation unit, so nvcc emits one fatbin to embed.
#include "fill.cu"
#include "capture.cu"
