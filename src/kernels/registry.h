/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every kernel recap launches: its name, its one by-value parameter type and its per-thread body.
 * The driver layer loads them by name; the CUDA test double runs the bodies on the host with
 * parameters of the listed size.
 */
#ifndef RECAP_KERNELS_REGISTRY_H
#define RECAP_KERNELS_REGISTRY_H

#include "kernels/capture_body.h"
#include "kernels/fill_body.h"

/* X(id, name, params type, body) */
#define RECAP_KERNELS(X)                                                                      \
    X(RECAP_K_FILL_U32, RECAP_KERNEL_FILL_U32, recap__fill_params_t, recap__fill_u32_thread)    \
    X(RECAP_K_FILL_F32, RECAP_KERNEL_FILL_F32, recap__fill_params_t, recap__fill_f32_thread)    \
    X(RECAP_K_FILL_F64, RECAP_KERNEL_FILL_F64, recap__fill_params_t, recap__fill_f64_thread)    \
    X(RECAP_K_FILL_U32_CAPTURED, RECAP_KERNEL_FILL_U32_CAPTURED, recap__fill_params_t,          \
      recap__fill_u32_captured_thread)                                                         \
    X(RECAP_K_FILL_F32_CAPTURED, RECAP_KERNEL_FILL_F32_CAPTURED, recap__fill_params_t,          \
      recap__fill_f32_captured_thread)                                                         \
    X(RECAP_K_FILL_F64_CAPTURED, RECAP_KERNEL_FILL_F64_CAPTURED, recap__fill_params_t,          \
      recap__fill_f64_captured_thread)                                                         \
    X(RECAP_K_ADVANCE, RECAP_KERNEL_ADVANCE, recap__advance_params_t, recap__capture_advance_thread) \
    X(RECAP_K_SLOT_WRITE, RECAP_KERNEL_SLOT_WRITE, recap__slot_write_params_t, recap__slot_write_thread)

#define RECAP_KERNEL_ENUM(id, name, type, body) id,
typedef enum { RECAP_KERNELS(RECAP_KERNEL_ENUM) RECAP_K_COUNT } recap__kernel_id_t;
#undef RECAP_KERNEL_ENUM

#endif
