/*
 * recap.h — the whole public C ABI of recap.
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

#ifdef __cplusplus
extern "C" {
#endif

/* librecap is built with hidden visibility; only RECAP_API functions are exported (and the
 * linker version script gives them the RECAP_1.0 version). */
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

/* (major << 16) | minor of the ABI this library implements. */
RECAP_API int recap_abi_version(void);
RECAP_API const char *recap_version_string(void);
/* Text for a status; never NULL. */
RECAP_API const char *recap_strerror(recap_status_t status);
/* The message of the calling thread's last failed call ("" when none). */
RECAP_API const char *recap_last_error(void);

/* ---------------------------------------------------------------- CUDA environment */

/* Loads the CUDA driver if it is not loaded yet. RECAP_ERR_NO_DRIVER when there is none. */
RECAP_API recap_status_t recap_driver_version(int *version_p);
RECAP_API recap_status_t recap_device_count(int *count_p);
/* Name, compute capability and total memory of a device. */
RECAP_API recap_status_t recap_device_info(int device, char *name, size_t name_len, int *cc_major_p,
                                 int *cc_minor_p, size_t *total_mem_p);

/* Device memory through the driver, in the device's primary context: for hosts without an
 * allocator of their own (the plain-C host operations), tools and tests. Copies are
 * synchronous. */
RECAP_API recap_status_t recap_device_alloc(int device, size_t bytes, void **ptr_p);
RECAP_API recap_status_t recap_device_free(int device, void *ptr);
RECAP_API recap_status_t recap_memcpy_to_device(int device, void *dst, const void *src, size_t bytes);
RECAP_API recap_status_t recap_memcpy_to_host(int device, void *dst, const void *src, size_t bytes);

/* ---------------------------------------------------------------- generators */

typedef struct recap_generator *recap_generator_h;
/* A CUDA stream (a CUstream or cudaStream_t; NULL is the legacy default stream). */
typedef void *recap_stream_t;

#define RECAP_DEVICE_HOST (-1)
/* Generator state bytes: seed then offset, both little-endian uint64 (torch.cuda.get_rng_state). */
#define RECAP_STATE_BYTES 16

/* Creates a generator for a CUDA device (0..count-1) or the host (RECAP_DEVICE_HOST), seeded
 * with 67280421310721 (PyTorch's default seed) at offset 0. */
RECAP_API recap_status_t recap_generator_create(int device, recap_generator_h *gen_p);
RECAP_API recap_status_t recap_generator_destroy(recap_generator_h gen);
RECAP_API recap_status_t recap_generator_device(recap_generator_h gen, int *device_p);
/* Seeds the generator and resets its offset to 0. */
RECAP_API recap_status_t recap_generator_manual_seed(recap_generator_h gen, uint64_t seed);
RECAP_API recap_status_t recap_generator_seed(recap_generator_h gen, uint64_t *seed_p);
RECAP_API recap_status_t recap_generator_offset(recap_generator_h gen, uint64_t *offset_p);
RECAP_API recap_status_t recap_generator_get_state(recap_generator_h gen, uint8_t state[RECAP_STATE_BYTES]);
/* RECAP_ERR_MISALIGNED when the offset is not a multiple of 4; the generator is unchanged. */
RECAP_API recap_status_t recap_generator_set_state(recap_generator_h gen,
                                         const uint8_t state[RECAP_STATE_BYTES]);
/* Reserves n values per thread for a kernel about to run on `stream` (NULL for host
 * generators): fills *args with the arguments to draw with (curand_init(seed, thread, offset)
 * layout; pass them to recap_philox_unpack in the kernel) and advances the offset by
 * round_up(n, 4). When `stream` is capturing, the arguments point at the generator's device
 * slot and the offset relative to the capture advances instead. RECAP_ERR_NOT_REGISTERED when
 * the stream captures but recap was not told of the capture or the generator was not primed. */
RECAP_API recap_status_t recap_generator_reserve(recap_generator_h gen, recap_stream_t stream,
                                                 uint64_t n, recap_philox_args_t *args_p);

/*
 * Bulk fills. The words equal cuRAND's curandGenerate (PHILOX4_32_10, default ordering) with the
 * generator's seed and generator offset 65536 * offset; floats equal curandGenerateUniform and
 * doubles curandGenerateUniformDouble. The offset advances by 4 * ceil(words / 262144).
 * Host generators fill host memory (stream ignored, must be NULL); device generators fill device
 * memory of their device, asynchronously on `stream`. n = 0 is an error.
 */
RECAP_API recap_status_t recap_generator_fill_u32(recap_generator_h gen, recap_stream_t stream,
                                        uint32_t *buf, size_t n);
RECAP_API recap_status_t recap_generator_fill_uniform(recap_generator_h gen, recap_stream_t stream,
                                            float *buf, size_t n);
RECAP_API recap_status_t recap_generator_fill_uniform_double(recap_generator_h gen, recap_stream_t stream,
                                                   double *buf, size_t n);

/* ---------------------------------------------------------------- graph-safe RNG: captures */

/*
 * Inside a CUDA-graph capture, device generators hand out pointer-based Philox arguments (a
 * device slot holding seed and base offset, plus an offset relative to the capture), and each
 * launch of the resulting graph gets a fresh base: every replay draws new numbers, replays never
 * overlap eager draws, and K launches draw exactly what K eager runs of the same work would.
 *
 * recap learns of captures through events. Its hooks (LD_PRELOAD, CUPTI, CUDA injection) report
 * them for unmodified hosts; a host may also report its own (the recap_capture_* and
 * recap_graph_* calls below, in the order shown), or let recap drive the driver
 * (recap_stream_begin_capture ... recap_graph_launch).
 *
 * Rules: graphs drawing from one generator must launch in stream order (not concurrently on
 * different streams), as with PyTorch's registered generators.
 */
typedef void *recap_graph_t;      /* a CUgraph / cudaGraph_t */
typedef void *recap_graph_exec_t; /* a CUgraphExec / cudaGraphExec_t */
typedef enum recap_capture_mode {  /* the values of CUstreamCaptureMode */
    RECAP_CAPTURE_GLOBAL = 0,
    RECAP_CAPTURE_THREAD_LOCAL = 1,
    RECAP_CAPTURE_RELAXED = 2
} recap_capture_mode_t;

/* Before the host begins a capture on `stream`: primes every device generator state of the
 * stream's device (device slots allocated now, outside the capture). */
RECAP_API recap_status_t recap_capture_will_begin(recap_stream_t stream, recap_capture_mode_t mode);
/* After the capture began: binds it to the calling thread (draws on this thread, and draws on
 * `stream`, are captured). */
RECAP_API recap_status_t recap_capture_began(recap_stream_t stream);
/* Before the host ends the capture: captures the node that advances the generators' device
 * copies at the end of each launch. */
RECAP_API recap_status_t recap_capture_will_end(recap_stream_t stream);
/* After the capture ended with `graph` (NULL if it failed): attaches what the capture drew.
 * RECAP_ERR_UNSUPPORTED when something inside the capture made a correct replay impossible
 * (the message says what), e.g. a value-mode tracker fork changing the seed. */
RECAP_API recap_status_t recap_capture_ended(recap_stream_t stream, recap_graph_t graph);
RECAP_API recap_status_t recap_graph_instantiated(recap_graph_t graph, recap_graph_exec_t exec);
RECAP_API recap_status_t recap_graph_cloned(recap_graph_t original, recap_graph_t clone);
RECAP_API recap_status_t recap_graph_destroyed(recap_graph_t graph);
RECAP_API recap_status_t recap_graph_exec_destroyed(recap_graph_exec_t exec);
/* Before each launch of `exec` on `stream`: advances its generators; in steady state it issues
 * no device work. */
RECAP_API recap_status_t recap_graph_will_launch(recap_graph_exec_t exec, recap_stream_t stream);
/* When the launch announced by recap_graph_will_launch did not happen. */
RECAP_API recap_status_t recap_graph_launch_failed(recap_graph_exec_t exec);
/* For hosts without hooks, as the first thing inside a capture on `stream`: primes the device's
 * generator states (allocating under the relaxed capture mode) and reports the capture as begun.
 * Does nothing when the stream is not capturing. */
RECAP_API recap_status_t recap_capture_prime(recap_stream_t stream);
/* Whether this process needs explicit registration: captures a draw on a generator nobody
 * registered, on a private stream, and reports whether it was rejected (1: no hook is active,
 * report captures or call recap_capture_prime; 0: recap's hooks register automatically).
 * Needs a CUDA device; the result is cached. */
RECAP_API recap_status_t recap_capture_needs_registration(int *needs_p);

/* What the capture module has seen in this process (for recap-probe --run, tests and logs). */
typedef struct recap_capture_stats {
    uint64_t captures;        /* captures reported as begun */
    uint64_t graphs_with_rng; /* captures that ended with a graph drawing random numbers */
    uint64_t launches;        /* launches of graphs that draw random numbers */
    uint64_t slot_writes;     /* launches that had to rewrite stale device slots (device work) */
    uint64_t states_primed;   /* generator states given a device slot */
    uint64_t live_records;    /* graphs + execs recap holds RNG records for */
} recap_capture_stats_t;
RECAP_API recap_status_t recap_capture_stats(recap_capture_stats_t *stats_p);

/* recap drives the driver and reports the events itself (for C hosts, tools and tests). */
RECAP_API recap_status_t recap_stream_create(int device, recap_stream_t *stream_p);
RECAP_API recap_status_t recap_stream_destroy(recap_stream_t stream);
RECAP_API recap_status_t recap_stream_synchronize(recap_stream_t stream);
RECAP_API recap_status_t recap_stream_begin_capture(recap_stream_t stream, recap_capture_mode_t mode);
RECAP_API recap_status_t recap_stream_end_capture(recap_stream_t stream, recap_graph_t *graph_p);
RECAP_API recap_status_t recap_graph_instantiate(recap_graph_t graph, recap_graph_exec_t *exec_p);
RECAP_API recap_status_t recap_graph_clone(recap_graph_t graph, recap_graph_t *clone_p);
RECAP_API recap_status_t recap_graph_launch(recap_graph_exec_t exec, recap_stream_t stream);
RECAP_API recap_status_t recap_graph_destroy(recap_graph_t graph);
RECAP_API recap_status_t recap_graph_exec_destroy(recap_graph_exec_t exec);

/* ---------------------------------------------------------------- RNG state tracker */

/*
 * Megatron-Core's CudaRNGStatesTracker. Thread safety: each tracker has its own lock, so trackers
 * used from different threads never contend, and calls on one tracker from several threads are
 * serialized. Forks on one tracker must still end in reverse order across all its threads: an
 * unfork whose token is not the innermost open fork is refused (RECAP_ERR_STATE) and changes
 * nothing; the caller may retry once the forks opened after it have ended. States objects and
 * snapshots are plain values without a lock of their own: use each from one thread at a time.
 */

typedef struct recap_tracker *recap_tracker_h;
typedef struct recap_states *recap_states_h;
typedef struct recap_snapshot *recap_snapshot_h;
/* Returned by fork, given back to unfork: identifies one fork so nesting is checked. */
typedef uint64_t recap_fork_token_t;

#define RECAP_RNG_DEFAULT "default-rng"
#define RECAP_RNG_MODEL_PARALLEL "model-parallel-rng"
#define RECAP_RNG_EXPERT_PARALLEL "expert-parallel-rng"
#define RECAP_RNG_DATA_PARALLEL "data-parallel-rng"
#define RECAP_RNG_GTP_REMAT "gtp-remat-rng"
#define RECAP_RNG_EGTP_REMAT "egtp-remat-rng"
/* Longest state name, in bytes, without the terminating NUL. */
#define RECAP_NAME_MAX 127

enum {
    /* Named states are generator-state objects that stay valid inside a capture. */
    RECAP_TRACKER_GRAPH_SAFE = 1u << 0,
    /* add and set_states do nothing (the tracker stays uninitialized); fork of any name is a
     * pass-through that installs nothing but still returns a token checked by unfork. */
    RECAP_TRACKER_INFERENCE = 1u << 1
};

typedef struct recap_tracker_params {
    uint32_t flags;                   /* RECAP_TRACKER_* */
    /* The generator the tracker drives (the framework's default generator). NULL: the tracker
     * creates and owns one for `device`. */
    recap_generator_h generator;
    int device;                       /* used when generator is NULL; RECAP_DEVICE_HOST allowed */
    /* Optional host (CPU) generator included in whole-state snapshots. */
    recap_generator_h host_generator;
} recap_tracker_params_t;

RECAP_API recap_status_t recap_tracker_create(const recap_tracker_params_t *params, recap_tracker_h *tracker_p);
/* RECAP_ERR_STATE while forks are open (the tracker's generator would keep a named state). An
 * owned generator (params.generator NULL) is destroyed with the tracker. */
RECAP_API recap_status_t recap_tracker_destroy(recap_tracker_h tracker);
/* Empties the states and used seeds, marks the tracker uninitialized, current = default.
 * RECAP_ERR_STATE while forks are open. */
RECAP_API recap_status_t recap_tracker_reset(recap_tracker_h tracker);
RECAP_API recap_status_t recap_tracker_is_initialized(recap_tracker_h tracker, int *initialized_p);
RECAP_API recap_status_t recap_tracker_is_graph_safe(recap_tracker_h tracker, int *graph_safe_p);
/* Adds a state equal to a generator freshly seeded with `seed` (offset 0) and marks the tracker
 * initialized; does not disturb the current generator. Names are 1..RECAP_NAME_MAX bytes and not
 * RECAP_RNG_DEFAULT. Errors: RECAP_ERR_DUPLICATE_SEED (checked first), RECAP_ERR_EXISTS; a failed
 * add records nothing (Megatron would keep the seed of an add that failed on its name). */
RECAP_API recap_status_t recap_tracker_add(recap_tracker_h tracker, const char *name, uint64_t seed);
/* Installs the named state in the tracker's generator until the matching unfork; an outer
 * fork's progress is kept, and nested forks (A, B, A again) draw exactly what the same forks
 * one after the other would. RECAP_ERR_NOT_FOUND for a name never added. Value mode copies
 * 16-byte values; graph-safe mode installs the state object itself. */
RECAP_API recap_status_t recap_tracker_fork(recap_tracker_h tracker, const char *name,
                                  recap_fork_token_t *token_p);
/* Ends the innermost fork: the advanced state goes back under its name and the outer state is
 * reinstalled. RECAP_ERR_STATE (nothing changed) when `token` is not the innermost open fork of
 * this tracker, or no fork is open. */
RECAP_API recap_status_t recap_tracker_unfork(recap_tracker_h tracker, recap_fork_token_t token);
/* The generator the tracker drives (the one forks install states into). Not owned by caller. */
RECAP_API recap_status_t recap_tracker_generator(recap_tracker_h tracker, recap_generator_h *gen_p);
/* Name of the current state (RECAP_RNG_DEFAULT outside forks, and always for an inference
 * tracker); valid until the next fork/unfork. */
RECAP_API recap_status_t recap_tracker_current_name(recap_tracker_h tracker, const char **name_p);
/* Copy of the whole name -> state map, by value, in insertion order. */
RECAP_API recap_status_t recap_tracker_get_states(recap_tracker_h tracker, recap_states_h *states_p);
/* Replaces the map with a copy of `states`; marks the tracker initialized; leaves the used seeds
 * as they are (as Megatron does). Graph-safe trackers keep the state object of every name that
 * stays, writing the new value into it, so graphs referring to it stay valid. RECAP_ERR_STATE
 * while forks are open. */
RECAP_API recap_status_t recap_tracker_set_states(recap_tracker_h tracker, recap_states_h states);

RECAP_API recap_status_t recap_states_copy(recap_states_h states, recap_states_h *copy_p);
RECAP_API recap_status_t recap_states_free(recap_states_h states);
RECAP_API recap_status_t recap_states_count(recap_states_h states, size_t *count_p);
/* The i-th name in insertion order; valid while `states` lives. */
RECAP_API recap_status_t recap_states_name(recap_states_h states, size_t index, const char **name_p);
/* RECAP_ERR_NOT_FOUND for a name not in `states`. */
RECAP_API recap_status_t recap_states_lookup(recap_states_h states, const char *name,
                                   uint8_t state[RECAP_STATE_BYTES]);

/* Converts a state's value form (16 bytes) to its graph-safe form (a generator object on the
 * tracker's device with that state; the caller destroys it) and back. The current generator is
 * not disturbed and the converted state continues the same sequence. */
RECAP_API recap_status_t recap_state_to_graph_safe(recap_tracker_h tracker,
                                         const uint8_t state[RECAP_STATE_BYTES],
                                         recap_generator_h *gen_p);
RECAP_API recap_status_t recap_state_from_graph_safe(recap_generator_h gen, uint8_t state[RECAP_STATE_BYTES]);

/* Process-wide default tracker. initialize creates it (or, with force_reset, replaces it: the
 * old one is destroyed and its handle becomes invalid; RECAP_ERR_STATE, keeping it, while it has
 * forks open). Initialize again with the same params returns the existing tracker; with
 * different params RECAP_ERR_OPTIONS_DIFFER, keeping the existing one (Megatron silently keeps
 * it). get returns RECAP_ERR_STATE before initialize. */
RECAP_API recap_status_t recap_default_tracker_initialize(const recap_tracker_params_t *params,
                                                int force_reset, recap_tracker_h *tracker_p);
RECAP_API recap_status_t recap_default_tracker_get(recap_tracker_h *tracker_p);

/* ---------------------------------------------------------------- per-rank seeding */

typedef struct recap_parallel_ranks {
    int tp_rank, tp_size;                 /* tensor parallel */
    int ep_rank, ep_size;                 /* expert parallel */
    int etp_rank, etp_size;               /* expert tensor parallel */
    int gtp_remat_rank, gtp_remat_size;   /* GTP rematerialization (state added when size > 1) */
    int egtp_remat_rank, egtp_remat_size; /* expert GTP remat (state added when size > 1) */
} recap_parallel_ranks_t;

/* Megatron's model_parallel_cuda_manual_seed: resets the tracker, seeds its generator with
 * `seed` and adds, in this order, data-parallel-rng = seed, model-parallel-rng = seed + 2718 +
 * tp_rank, expert-parallel-rng = seed + 1024 + 100 * ep_rank + etp_rank, and when
 * gtp_remat_size > 1 gtp-remat-rng = model seed + 65536 * (1 + gtp_remat_rank), when
 * egtp_remat_size > 1 egtp-remat-rng = expert seed + 32768 + 65536 * (1 + egtp_remat_rank).
 * seed must be > 0, sizes >= 1 and 0 <= rank < size, and the derived seeds distinct; otherwise
 * RECAP_ERR_INVALID_ARG and the tracker is untouched. RECAP_ERR_STATE while forks are open.
 * Graph-safe trackers keep the state objects of the names (see set_states). */
RECAP_API recap_status_t recap_tracker_seed_parallel(recap_tracker_h tracker, int64_t seed,
                                           const recap_parallel_ranks_t *ranks);

/* ---------------------------------------------------------------- whole-state snapshots */

/* A snapshot holds values: the host generator (params.host_generator, if any), the tracker's
 * generator, every named state and the initialized flag; not the current name or open forks.
 * Taking and restoring copy values: no allocation once the snapshot's arrays are large enough,
 * no device work. */
RECAP_API recap_status_t recap_snapshot_create(recap_snapshot_h *snap_p);
RECAP_API recap_status_t recap_snapshot_destroy(recap_snapshot_h snap);
/* Copies the tracker's whole RNG state into snap (no allocation once snap is large enough). */
RECAP_API recap_status_t recap_snapshot_take(recap_tracker_h tracker, recap_snapshot_h snap);
/* Restores exactly what take saw. All or nothing: on error the live state is untouched. When
 * the tracker has the snapshot's names in the same order, values are written in place (inside
 * forks too; graph-safe trackers write into their existing state objects); otherwise the map is
 * replaced wholesale (keeping the objects of names that stay), which is RECAP_ERR_STATE while
 * forks are open. RECAP_ERR_STATE for a snapshot never taken or deserialized;
 * RECAP_ERR_INVALID_ARG when exactly one of snapshot and tracker has a host generator. */
RECAP_API recap_status_t recap_snapshot_restore(recap_tracker_h tracker, recap_snapshot_h snap);
/* Versioned little-endian byte form for training checkpoints ("RCAP", format version, flags,
 * counts, the states, an FNV-1a-64 checksum; src/tracker/serialize.c has the layout). With buf
 * NULL or too small, *len_p receives the size needed and RECAP_ERR_INVALID_ARG is returned when
 * buf is too small. */
RECAP_API recap_status_t recap_snapshot_serialize(recap_snapshot_h snap, void *buf, size_t cap,
                                        size_t *len_p);
/* Parses and validates a whole blob into snap; RECAP_ERR_VERSION for another format version,
 * RECAP_ERR_CORRUPT for damaged or truncated data (bad magic, length, checksum, names, offsets
 * not multiples of 4), and snap is left unchanged on any error. Restore it to apply it. */
RECAP_API recap_status_t recap_snapshot_deserialize(const void *buf, size_t len, recap_snapshot_h snap);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_H */
