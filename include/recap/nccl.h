/* SPDX-License-Identifier: Apache-2.0 */
/* recap add-on: checkpoint inputs distributed over the framework's NCCL.
 * Part of the one public API: <recap.h> includes this file. */
#ifndef RECAP_NCCL_H
#define RECAP_NCCL_H

#ifndef RECAP_H
#error "include <recap.h>, which includes <recap/nccl.h>"
#endif

/* ---------------------------------------------------------------- NCCL: distributed saved inputs */

/*
 * recap's own distribute and all_gather for checkpoints with RECAP_CHECKPOINT_DISTRIBUTE, over the
 * engine's NCCL communicator (its tensor-parallel group) and CUDA device buffers.
 *
 * NCCL is resolved at run time, never linked: the libnccl.so.2 the process has loaded already
 * (dlopen with RTLD_NOLOAD), so the engine's communicator is used by the NCCL that made it, else a
 * plain dlopen("libnccl.so.2"). Without it recap_nccl_ops_create is RECAP_ERR_UNSUPPORTED and the
 * message names libnccl.so.2. A communicator from an NCCL linked statically into the engine cannot
 * be used. (RECAP_NCCL_LIB=path loads that library instead: test-only, like RECAP_CUDA_DRIVER.)
 *
 * A recap_nccl object wraps the engine: the table recap_nccl_engine_ops gives forwards every
 * operation to the engine's own table with the engine's own pointer, adds distribute and
 * all_gather, and takes over save/load/drop (wrapping the engine's saved handles) and
 * free_buffer, so a slice carries what its gather needs (the whole's byte count and form) through
 * the engine's saved-buffer mechanism; an engine without save/load/drop gets recap's default (the
 * handle is kept) from it. Put that table and pointer in the region params (or a manager) in
 * place of the engine's. One object per rank and communicator; its operations may be called from
 * any thread.
 *
 * Slicing: the bytes of a whole of T bytes are split among the n ranks in slices of
 * S = ceil(T / n) rounded up to RECAP_NCCL_SLICE_ALIGN bytes (so slices start on an element of
 * any type and NCCL gets aligned buffers); rank r keeps bytes [r*S, min((r+1)*S, T)) in a buffer
 * of S bytes, the rest of it padding. all_gather runs ncclAllGather of S bytes (ncclUint8) per
 * rank: into the result directly when n*S == T, else into a scratch buffer of n*S bytes whose
 * first T are copied into the result. The result has exactly T bytes (and the whole's form).
 *
 * Ordering: the copies and the collective are enqueued on the object's stream, asynchronously,
 * in order with the engine's work there. all_gather is a collective: every rank must call it the
 * same number of times in the same order (back-propagate the same checkpoints in the same order,
 * as tensor-parallel ranks do). Buffers recap frees go back to the engine as soon as their work is
 * enqueued: the engine's allocator must order their reuse after the stream's work (stream-ordered
 * allocators such as PyTorch's do; the plain engine's cuMemFree waits for the device).
 *
 * Errors: an NCCL call that fails is RECAP_ERR_CUDA (RECAP_ERR_INVALID_ARG for NCCL's invalid
 * argument or usage) with the call and ncclGetErrorString's text; a buffer that is not device
 * memory is RECAP_ERR_INVALID_ARG, one on another device than the communicator's
 * RECAP_ERR_WRONG_DEVICE.
 */
typedef struct recap_nccl *recap_nccl_h;

#define RECAP_NCCL_SLICE_ALIGN 16

/* What recap needs to know of the engine's buffers to slice and gather them. `engine` is the
 * engine's own pointer (recap_nccl_params_t.host). */
typedef struct recap_nccl_buffer_ops {
    /* The byte count of a buffer's data and the device pointer to it. Required. */
    recap_status_t (*bytes)(void *engine, recap_buffer_t buf, size_t *bytes_p);
    recap_status_t (*data)(void *engine, recap_buffer_t buf, void **ptr_p);
    /* A new buffer with storage of `bytes` bytes on like's device, which recap frees with the
     * engine's free_buffer. For a slice (or the gather's scratch) needs_grad is 0 and form NULL;
     * for the gathered whole like is the slice, needs_grad tells whether the whole needed a
     * gradient and form is what keep_form kept (the engine gives the buffer that shape and type).
     * Required. */
    recap_status_t (*alloc)(void *engine, recap_buffer_t like, size_t bytes, int needs_grad,
                            void *form, recap_buffer_t *buf_p);
    /* Both or none: at distribute, whatever the engine needs to give the gathered whole the
     * original's form (shape, element type); freed with free_form when the slice is dropped.
     * None: the whole is just T bytes. */
    recap_status_t (*keep_form)(void *engine, recap_buffer_t whole, void **form_p);
    void (*free_form)(void *engine, void *form);
} recap_nccl_buffer_ops_t;

typedef struct recap_nccl_params {
    void *comm;                 /* the engine's ncclComm_t (not owned) */
    int rank, nranks;           /* this rank and the group's size: must be NCCL's */
    recap_stream_t stream;      /* where copies and collectives run (recap_nccl_set_stream) */
    const recap_engine_ops_t *ops; /* the engine's own operations and pointer, wrapped */
    void *host;                 /* (the name before ABI 1.5, kept so initializers compile) */
    const recap_nccl_buffer_ops_t *buffers; /* recap_nccl_plain_buffer_ops for a plain engine */
} recap_nccl_params_t;

typedef struct recap_nccl_stats {
    uint64_t distributes, gathers; /* successful calls */
    uint64_t padded_gathers;      /* gathers through a scratch buffer (n*S > T) */
    uint64_t live_slices;         /* slices distributed and not yet dropped or freed */
    uint64_t live_slice_bytes;    /* their bytes (S each) */
    uint64_t live_saved;          /* saved handles given out and not dropped */
    uint64_t staged_copies;       /* copies staged through host memory (a driver without
                                   * cuMemcpyDtoDAsync: the CUDA test double) */
} recap_nccl_stats_t;

/* Loads NCCL (see above) and checks params: comm, 0 <= rank < nranks matching NCCL's
 * ncclCommUserRank and ncclCommCount, the engine's alloc_like and free_buffer, the buffer ops.
 * Bad params are RECAP_ERR_INVALID_ARG, checked before NCCL is loaded. */
RECAP_API recap_status_t recap_nccl_ops_create(const recap_nccl_params_t *params,
                                               recap_nccl_h *nccl_p);
/* RECAP_ERR_STATE (nothing freed) while checkpoints still hold saved handles or slices, or while
 * regions, checkpoints or managers made with its table live. */
RECAP_API recap_status_t recap_nccl_ops_destroy(recap_nccl_h nccl);
/* The wrapping table and its engine pointer (valid until destroy): use them in place of the
 * engine's in recap_region_params_t (with RECAP_CHECKPOINT_DISTRIBUTE) or recap_manager_create. */
RECAP_API recap_status_t recap_nccl_engine_ops(recap_nccl_h nccl, const recap_engine_ops_t **ops_p,
                                             void **engine_p);
/* The stream later copies and collectives run on (the engine's current stream may change). */
RECAP_API recap_status_t recap_nccl_set_stream(recap_nccl_h nccl, recap_stream_t stream);
RECAP_API recap_status_t recap_nccl_stats(recap_nccl_h nccl, recap_nccl_stats_t *stats_p);
/* Buffer operations for a plain engine of a CUDA device (params.host is the
 * recap_plain_engine_h). */
RECAP_API recap_status_t recap_nccl_plain_buffer_ops(const recap_nccl_buffer_ops_t **ops_p);
/* NCCL_VERSION_CODE of the NCCL recap uses (loading it); RECAP_ERR_UNSUPPORTED without one. */
RECAP_API recap_status_t recap_nccl_version(int *version_p);

/* The name before ABI 1.5 (deprecated; the library still exports it). */
#define recap_nccl_host_ops recap_nccl_engine_ops

#endif /* RECAP_NCCL_H */
