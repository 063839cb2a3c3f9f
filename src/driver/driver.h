/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA driver, resolved at run time. librecap never links libcuda or cudart: it dlopens
 * "libcuda.so.1" (or $RECAP_CUDA_DRIVER, the test-only override that points the suites at the
 * CUDA test double), so it loads on machines with no GPU and never drags a second cudart into
 * the host process.
 */
#ifndef RECAP_DRIVER_DRIVER_H
#define RECAP_DRIVER_DRIVER_H

#include <cuda.h>

#include "base/atfork.h"
#include "driver/entry_points.h"
#include "kernels/registry.h"
#include "recap.h"

typedef struct recap__driver {
#define RECAP__DRIVER_FIELD(kind, field, symbol, params) CUresult(*field) params;
    RECAP__DRIVER_ENTRY_POINTS(RECAP__DRIVER_FIELD)
#undef RECAP__DRIVER_FIELD
    int has_graphs; /* every GRAPHS entry point resolved */
} recap__driver_t;

/* The driver, when it has the capture and graph API; RECAP_ERR_UNSUPPORTED otherwise. */
recap_status_t recap__driver_graphs(const recap__driver_t **drv_p);

/* Loads and initializes the driver once per process; later calls return the cached outcome.
 * RECAP_ERR_NO_DRIVER (with a message) when it is absent or cuInit fails. */
recap_status_t recap__driver_get(const recap__driver_t **drv_p);

/* The dlopen handle of the driver library (NULL when it could not be loaded): the hooks resolve
 * the real entry points they interpose from it. */
void *recap__driver_lib(void);

/* Turns a failed driver call into RECAP_ERR_CUDA with "what: CUDA_ERROR_NAME". */
recap_status_t recap__cuda_fail(CUresult rc, const char *what);

/* The ordinal of the device that owns `ptr` when the driver knows the pointer (device, managed
 * or registered host memory), -1 when it does not (plain host memory, garbage). Asked with
 * cuPointerGetAttributes, which answers CUDA_SUCCESS for unknown pointers: cuPointerGetAttribute
 * would fail the call, and compute-sanitizer and API tracers in the host job would report that
 * failure as an error of the user's program. */
int recap__pointer_device(const recap__driver_t *drv, const void *ptr);

/* Kernels recap launches on a device (kernels/registry.h), loaded once per device in its primary
 * context. */

typedef struct recap__device {
    CUdevice dev;
    CUcontext ctx;   /* the device's primary context, retained for the process lifetime */
    int sm_count;
    CUfunction fn[RECAP_K_COUNT];
} recap__device_t;

/* The device's context and kernels, set up on first use. RECAP_ERR_NO_DEVICE for a bad index. */
recap_status_t recap__device_get(int ordinal, const recap__device_t **dev_p);
recap_status_t recap__device_count(int *count_p);
/* Which of recap's kernels `fn` is (a recap__kernel_id_t) on any device set up so far, else -1:
 * how a graph walk recognises recap's own kernel nodes. */
int recap__device_kernel_id(CUfunction fn);

/* Makes the device's primary context current for the calling thread when it is not already;
 * *pushed_p tells recap__ctx_leave whether to pop. */
recap_status_t recap__ctx_enter(const recap__device_t *dev, int *pushed_p);
void recap__ctx_leave(int pushed);
/* What work on `device` needs: the device (its context made current, as recap__ctx_enter) and
 * the driver. Pair with recap__ctx_leave(*pushed_p). */
recap_status_t recap__device_enter(int device, const recap__device_t **dev_p,
                                   const recap__driver_t **drv_p, int *pushed_p);

/* Runs one driver call in the primary context of `device`; a failure returns from the calling
 * function with a status naming `what`. */
#define RECAP_IN_DEVICE(device, what, call)                           \
    do {                                                              \
        const recap__device_t *dev_;                                   \
        recap_status_t st_ = recap__device_get((device), &dev_);      \
        CUresult rc_;                                                 \
        int pushed_;                                                  \
        if (st_ != RECAP_OK)                                          \
            return st_;                                               \
        st_ = recap__ctx_enter(dev_, &pushed_);                       \
        if (st_ != RECAP_OK)                                          \
            return st_;                                               \
        rc_ = (call);                                                 \
        recap__ctx_leave(pushed_);                                    \
        if (rc_ != CUDA_SUCCESS)                                      \
            return recap__cuda_fail(rc_, (what));                     \
    } while (0)

/* Streams (stream.c). */
/* The device a stream belongs to (NULL stream: the current context's device, else 0). */
recap_status_t recap__stream_device(CUstream stream, int *device_p);
/* RECAP_ERR_WRONG_DEVICE when `stream` belongs to another device than `device`; the legacy and
 * per-thread streams, and a stream the driver cannot place, pass. */
recap_status_t recap__stream_check_device(CUstream stream, int device);

/* Fork handler (called by src/process/atfork.c). */
void recap__device_atfork(recap__atfork_t when);

#endif
