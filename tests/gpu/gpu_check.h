/* SPDX-License-Identifier: Apache-2.0 */
// Error checks shared by the GPU-only programs (tests/gpu, bench): a failed CUDA, cuRAND or
// recap call prints where and why and exits 2, so no measurement or comparison runs on a
// half-done setup.
#pragma once
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "recap.h"

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));  \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)

#define CR(x)                                                                                   \
    do {                                                                                        \
        recap_status_t s_ = (x);                                                                \
        if (s_ != RECAP_OK) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s: %s\n", __FILE__, __LINE__, #x, recap_strerror(s_),   \
                    recap_last_error());                                                        \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)
