/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL-backed distribution of checkpoint inputs (internal). recap never includes nccl.h: the
 * few types it needs are declared here with NCCL's ABI values (nccl.h of NCCL 2.x), and every
 * entry point is resolved from the library at run time.
 */
#ifndef RECAP_NCCL_NCCL_H
#define RECAP_NCCL_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "base/lock.h"
#include "recap.h"

/* ncclResult_t and the values recap looks at. */
typedef int recap__nccl_result_t;
#define RECAP__NCCL_SUCCESS 0
#define RECAP__NCCL_INVALID_ARGUMENT 4
#define RECAP__NCCL_INVALID_USAGE 5
#define RECAP__NCCL_IN_PROGRESS 7 /* non-blocking communicators */
/* ncclDataType_t ncclUint8: slices move as bytes. */
#define RECAP__NCCL_UINT8 1

typedef struct recap__nccl_lib {
    const char *path; /* the name it was loaded by */
    int version;      /* NCCL_VERSION_CODE, 0 when the library does not say */
    recap__nccl_result_t (*AllGather)(const void *send, void *recv, size_t sendcount,
                                      int datatype, void *comm, void *stream);
    const char *(*GetErrorString)(recap__nccl_result_t result);
    recap__nccl_result_t (*CommCount)(const void *comm, int *count);
    recap__nccl_result_t (*CommUserRank)(const void *comm, int *rank);
    recap__nccl_result_t (*CommCuDevice)(const void *comm, int *device);
    /* Optional: polls a non-blocking communicator's pending call. */
    recap__nccl_result_t (*CommGetAsyncError)(void *comm, recap__nccl_result_t *result);
} recap__nccl_lib_t;

/* Loads NCCL once per process; RECAP_ERR_UNSUPPORTED with a message naming libnccl.so.2 when
 * it cannot be loaded or lacks an entry point. */
recap_status_t recap__nccl_lib_get(const recap__nccl_lib_t **lib_p);
/* Completes an NCCL call's result (waiting out ncclInProgress on a non-blocking communicator)
 * and turns a failure into a status naming `what`. */
recap_status_t recap__nccl_result(const recap__nccl_lib_t *lib, void *comm,
                                  recap__nccl_result_t rc, const char *what);

/* Device memory: the device a pointer belongs to (RECAP_ERR_INVALID_ARG when it is not device
 * memory), and a device-to-device copy enqueued on `stream` (*staged_p set when the driver had
 * no cuMemcpyDtoDAsync and the copy went through host memory, synchronously). */
recap_status_t recap__nccl_ptr_device(int device, const void *ptr, int *owner_p);
recap_status_t recap__nccl_copy(int device, void *dst, const void *src, size_t bytes,
                                recap_stream_t stream, int *staged_p);

/* What recap saves for one input of a region or checkpoint through the wrapper: the engine's
 * saved handle, and for a slice what its gather needs. Slices are linked in their object's list
 * from distribute until they are dropped (or freed unsaved). */
typedef struct recap__nsaved {
    uint64_t magic;
    struct recap__nsaved *prev, *next; /* slices only */
    void *inner;            /* the engine's saved handle; the buffer itself without engine save */
    int is_slice;
    int saved;              /* a slice: saved (else distributed and not saved yet) */
    int handle_gone;        /* a slice: recap freed the handle distribute gave */
    int free_at_drop;       /* a slice of an engine without save: its handle is the saved copy */
    recap_buffer_t handle;  /* a slice: as distribute gave it */
    recap_buffer_t loaded;  /* a slice: as load gave it back (NULL before) */
    size_t whole, slice;    /* T and S in bytes */
    int needs_grad;         /* whether the whole needed a gradient */
    void *form;             /* from keep_form */
} recap__nsaved_t;

#define RECAP__NSAVED_MAGIC 0x7265636170736176ULL /* "recapsav" */

struct recap_nccl {
    recap_engine_ops_t table;       /* what recap_nccl_engine_ops gives: forwards, adds, wraps */
    const recap_engine_ops_t *ops;  /* the engine's own */
    void *engine;
    recap_nccl_buffer_ops_t bops;
    const recap__nccl_lib_t *lib;
    void *comm;
    int rank, nranks, device;     /* device: the communicator's (ncclCommCuDevice) */
    recap__lock_t lock;            /* the slice list, the stream and the stats */
    recap_stream_t stream;
    recap__nsaved_t *slices;
    recap_nccl_stats_t stats;
};

/* S for a whole of `whole` bytes among n ranks, and the bytes rank r keeps of it. */
size_t recap__nccl_slice_bytes(size_t whole, int nranks);
size_t recap__nccl_rank_bytes(size_t whole, size_t slice, int rank);

/* The operations the wrapper adds or takes over (slice.c). */
recap_status_t recap__nccl_distribute(void *engine, recap_buffer_t buf, recap_buffer_t *slice_p);
recap_status_t recap__nccl_all_gather(void *engine, recap_buffer_t slice, recap_buffer_t *full_p);
recap_status_t recap__nccl_save(void *engine, recap_buffer_t buf, void **saved_p);
recap_status_t recap__nccl_load(void *engine, void *saved, recap_buffer_t *buf_p);
recap_status_t recap__nccl_drop(void *engine, void *saved);
recap_status_t recap__nccl_free_buffer(void *engine, recap_buffer_t buf);

#endif
