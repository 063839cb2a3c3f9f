/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap.h — the whole public C ABI of recap: this file (status, errors, log, the CUDA
 * environment) and the parts it includes from recap/: generator.h, capture.h, tracker.h and
 * region.h (the core), philox.h (device code), version.h, and the add-ons probe.h, plain.h and
 * nccl.h. Include this file only; the parts refuse to be included alone.
 *
 * Conventions: every call returns recap_status_t (RECAP_OK = 0, errors negative); outputs come
 * last and are written only on success; on failure recap_last_error() holds a message for the
 * calling thread. Handles are opaque.
 */
#ifndef RECAP_H
#define RECAP_H

#include <stddef.h>
#include <stdint.h>

#include "recap/philox.h"
#include "recap/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* librecap is built with hidden visibility; only RECAP_API functions are exported (the linker
 * version script, src/librecap.map, gives each the version that added it). The one export macro:
 * the interposed CUDA entry points and the test doubles use it too. */
#define RECAP_API __attribute__((visibility("default")))

/* ---------------------------------------------------------------- status, version, errors */

typedef enum recap_status {
    RECAP_OK = 0,
    RECAP_ERR_INVALID_ARG = -1,      /* NULL handle or pointer, bad value */
    RECAP_ERR_NO_MEMORY = -2,        /* host or device allocation failed */
    RECAP_ERR_NO_DRIVER = -3,        /* no CUDA driver could be loaded */
    RECAP_ERR_NO_DEVICE = -4,        /* no such CUDA device */
    RECAP_ERR_WRONG_DEVICE = -5,     /* buffer or stream belongs to another device */
    RECAP_ERR_CUDA = -6,             /* a CUDA driver call failed (message names it) */
    RECAP_ERR_MISALIGNED = -7,       /* Philox offset not a multiple of 4 */
    RECAP_ERR_NOT_FOUND = -8,        /* unknown name */
    RECAP_ERR_EXISTS = -9,           /* name already present */
    RECAP_ERR_DUPLICATE_SEED = -10,  /* seed already used by this tracker */
    RECAP_ERR_STATE = -11,           /* call not allowed in the object's current state/order */
    RECAP_ERR_NOT_REGISTERED = -12,  /* generator not primed for the running capture */
    RECAP_ERR_CORRUPT = -13,         /* serialized data damaged or truncated */
    RECAP_ERR_VERSION = -14,         /* serialized data of an unknown format version */
    RECAP_ERR_OPTIONS_DIFFER = -15,  /* already initialized with other options */
    RECAP_ERR_UNSUPPORTED = -16,     /* not supported by this build, driver or device */
    RECAP_ERR_BUSY = -17             /* resource held by someone else (e.g. CUPTI) */
} recap_status_t;

/* Handles: a generator, tracker, snapshot, states object, plain host, region, manager or
 * checkpoint handed to a call after it was destroyed (a double destroy included), or one that
 * never came from recap, gets RECAP_ERR_INVALID_ARG wherever recap can tell (its memory not yet
 * reused by a new object of the same kind); destroy tells without reading the object. */

/* (major << 16) | minor of the ABI this library implements. recap_version_string() is the
 * library's RECAP_VERSION_STRING (recap/version.h has the headers' own). */
RECAP_API int recap_abi_version(void);
RECAP_API const char *recap_version_string(void);
/* Text for a status; never NULL. */
RECAP_API const char *recap_strerror(recap_status_t status);
/* The message of the calling thread's last failed call ("" when none). */
RECAP_API const char *recap_last_error(void);

/* ---------------------------------------------------------------- log */

/*
 * recap's log, for a host's own lines too (ABI 1.6), so that a job has one log: the Python
 * package writes its lines through it. RECAP_LOG=warn|info|debug chooses the levels written
 * (none by default); lines go to stderr, or to RECAP_LOG_FILE ("%h": host name, "%p": pid),
 * each one write, as
 *     [TIME ]HOST:PID:TID [RANK] recap LEVEL message
 * with TIME (UTC, ISO 8601) under RECAP_LOG_TIME=1 and RANK when a launcher set one (RANK,
 * OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK).
 */
typedef enum recap_log_level {
    RECAP_LOG_WARN = 1,
    RECAP_LOG_INFO = 2,
    RECAP_LOG_DEBUG = 3,
    /* A warning written also when RECAP_LOG is not set (RECAP_LOG=off or 0 silences it): for
     * the few mistakes a user must hear of without asking. */
    RECAP_LOG_WARN_UNLESS_OFF = 4
} recap_log_level_t;

/* Writes `message` as one line of recap's log at `level`: RECAP_OK, writing nothing, when
 * RECAP_LOG leaves that level out. A message is always one line: its control characters are
 * written escaped (newline as \n, carriage return \r, tab \t, any other as \xNN), so no caller
 * can add lines of its own; a line longer than 1 KiB is cut. RECAP_ERR_INVALID_ARG for a level
 * that is not one of the four or a NULL message. */
RECAP_API recap_status_t recap_log_write(recap_log_level_t level, const char *message);

/* ---------------------------------------------------------------- CUDA environment */

/* Loads the CUDA driver if it is not loaded yet. RECAP_ERR_NO_DRIVER when there is none. */
RECAP_API recap_status_t recap_driver_version(int *version_p);
RECAP_API recap_status_t recap_device_count(int *count_p);
/* Name, compute capability and total memory of a device. */
RECAP_API recap_status_t recap_device_info(int device, char *name, size_t name_len, int *cc_major_p,
                                 int *cc_minor_p, size_t *total_mem_p);

/* A CUDA stream (a CUstream or cudaStream_t; NULL is the legacy default stream). */
typedef void *recap_stream_t;

/* Device memory through the driver, in the device's primary context: for hosts without an
 * allocator of their own (the plain-C host operations), tools and tests. Copies are synchronous
 * and complete when they return: the bytes are in place for any work launched afterwards, on
 * recap's streams (non-blocking) too; a copy to the device from pageable memory is not left
 * running behind the call as a plain cuMemcpyHtoD may be. They start after the legacy stream's
 * earlier work, not after earlier work on non-blocking streams: synchronize the stream that
 * produced or still reads the memory first. */
RECAP_API recap_status_t recap_device_alloc(int device, size_t bytes, void **ptr_p);
RECAP_API recap_status_t recap_device_free(int device, void *ptr);
RECAP_API recap_status_t recap_memcpy_to_device(int device, void *dst, const void *src, size_t bytes);
RECAP_API recap_status_t recap_memcpy_to_host(int device, void *dst, const void *src, size_t bytes);

/* Stream-ordered host work, for hosts whose buffers are raw device memory and whose steps run in
 * CUDA graphs: inside a capture each call becomes a graph node (a copy or a host node), replayed
 * with every launch. The host side of an asynchronous copy must be pinned memory
 * (recap_host_alloc), and a host function must not call CUDA (a CUDA rule for host nodes).
 * RECAP_ERR_UNSUPPORTED when the driver lacks the entry point. */
RECAP_API recap_status_t recap_host_alloc(int device, size_t bytes, void **ptr_p);
RECAP_API recap_status_t recap_host_free(int device, void *ptr);
RECAP_API recap_status_t recap_memcpy_to_device_async(int device, void *dst, const void *src,
                                                      size_t bytes, recap_stream_t stream);
RECAP_API recap_status_t recap_memcpy_to_host_async(int device, void *dst, const void *src,
                                                    size_t bytes, recap_stream_t stream);
RECAP_API recap_status_t recap_stream_host_func(int device, recap_stream_t stream,
                                                void (*fn)(void *data), void *data);

/* The core, part by part (each part is only included from here). */
#include "recap/generator.h"
#include "recap/capture.h"
#include "recap/tracker.h"
#include "recap/region.h"

/* The add-ons, each beside the core it builds on: recap-probe's checks, the plain engine
 * (regions over raw memory), and checkpoint inputs distributed over NCCL. */
#include "recap/probe.h"
#include "recap/plain.h"
#include "recap/nccl.h"

#ifdef __cplusplus
}
#endif

#endif /* RECAP_H */
