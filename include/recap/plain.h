/* SPDX-License-Identifier: Apache-2.0 */
/* recap add-on: the plain engine, recap's reference framework for regions.
 * Part of the one public API: <recap.h> includes this file. */
#ifndef RECAP_PLAIN_H
#define RECAP_PLAIN_H

#ifndef RECAP_H
#error "include <recap.h>, which includes <recap/plain.h>"
#endif

/*
 * The plain engine: engine operations for frameworks whose buffers are raw memory. A plain engine
 * allocates host memory (malloc) or device memory of one device (recap_device_alloc) and
 * accounts for it; its buffers are handles over reference-counted storage, so saved inputs and
 * views see a release and a rebuild. Functions receive the data pointer of each buffer.
 * "Needs a gradient" is a flag on the buffer; triggers are called when the engine calls
 * recap_plain_buffer_fire; recording is a per-thread flag (on by default); the recompute context
 * only counts passes. Saves keep a reference to the storage (so the caller may free its
 * handle); load and drop are counted, for tests.
 */
typedef struct recap_plain_engine *recap_plain_engine_h;

enum {
    /* Storage freed (by a release or a buffer's last handle) is kept, not given back, until the
     * host is destroyed: graphs captured with device buffers may still write to it, as
     * PyTorch's graph memory pools. */
    RECAP_PLAIN_KEEP_FREED = 1u << 0,
    /* Kept storage (implies KEEP_FREED) is handed to the next allocation of exactly its size,
     * as a CUDA graph's memory pool reuses freed blocks: right when the engine's work on these
     * buffers is ordered on one stream, so a reuse runs after the last use before the free. */
    RECAP_PLAIN_REUSE_FREED = 1u << 1
};

typedef struct recap_plain_stats {
    uint64_t live_bytes;      /* storage allocated and not freed (kept storage not included) */
    uint64_t peak_bytes;      /* highest live_bytes since creation or reset_peak */
    uint64_t live_buffers;    /* handles: the engine's, recap's and saved ones */
    uint64_t allocs, frees;   /* storage allocations and frees (kept storage counts as freed) */
    uint64_t storage_frees;   /* free_storage calls that freed a buffer's storage */
    uint64_t shares;          /* share_storage calls */
    uint64_t saves, loads, drops;
    uint64_t triggers_armed, triggers_fired;
    uint64_t context_first, context_recompute; /* recompute-context entries per pass */
    int context_depth;        /* entries not yet exited */
    int context_pass;         /* the innermost entered pass (-1 outside) */
    uint64_t held_bytes;      /* storage kept (RECAP_PLAIN_KEEP_FREED) and not live: with
                               * live_bytes, the memory the engine holds */
} recap_plain_stats_t;

/* device: a CUDA device or RECAP_DEVICE_HOST; flags: RECAP_PLAIN_*. */
RECAP_API recap_status_t recap_plain_engine_create(int device, uint32_t flags,
                                                 recap_plain_engine_h *engine_p);
/* RECAP_ERR_STATE (nothing freed) while buffers are live, or while regions, checkpoints,
 * managers or NCCL wrappers made with the engine live. */
RECAP_API recap_status_t recap_plain_engine_destroy(recap_plain_engine_h engine);
/* The operations; pass the plain engine as params.host (region, checkpoint and manager creation
 * with these operations and anything but a live plain engine: RECAP_ERR_INVALID_ARG). They
 * refuse a buffer of another plain engine (RECAP_ERR_INVALID_ARG; needs_grad answers 1, so the
 * call that takes it refuses it): a region's buffers are its engine's. */
RECAP_API recap_status_t recap_plain_engine_ops(const recap_engine_ops_t **ops_p);
RECAP_API recap_status_t recap_plain_engine_stats(recap_plain_engine_h engine,
                                                recap_plain_stats_t *stats_p);
/* Sets peak_bytes to live_bytes. */
RECAP_API recap_status_t recap_plain_engine_reset_peak(recap_plain_engine_h engine);
/* The calling thread's recording flag, as the plain set_recording leaves it. */
RECAP_API recap_status_t recap_plain_is_recording(int *recording_p);

RECAP_API recap_status_t recap_plain_buffer_create(recap_plain_engine_h engine, size_t bytes,
                                                   int needs_grad, recap_buffer_t *buf_p);
/* Frees the handle, and the storage once nothing else (views, saved inputs) uses it. */
RECAP_API recap_status_t recap_plain_buffer_destroy(recap_buffer_t buf);
/* The data pointer (host or device memory), NULL while the storage is released. */
RECAP_API recap_status_t recap_plain_buffer_data(recap_buffer_t buf, void **data_p);
RECAP_API recap_status_t recap_plain_buffer_bytes(recap_buffer_t buf, size_t *bytes_p);
RECAP_API recap_status_t recap_plain_buffer_set_needs_grad(recap_buffer_t buf, int needs_grad);
/* Calls the triggers armed on buf, in the order they were armed; stops at the first error and
 * returns it. */
RECAP_API recap_status_t recap_plain_buffer_fire(recap_buffer_t buf);

/* Names before ABI 1.5, which called the plain engine "the plain host" (deprecated; the library
 * still exports the old functions). */
typedef recap_plain_engine_h recap_plain_host_h;
#define recap_plain_host recap_plain_engine
#define recap_plain_host_create recap_plain_engine_create
#define recap_plain_host_destroy recap_plain_engine_destroy
#define recap_plain_host_ops recap_plain_engine_ops
#define recap_plain_host_stats recap_plain_engine_stats
#define recap_plain_host_reset_peak recap_plain_engine_reset_peak

#endif /* RECAP_PLAIN_H */
