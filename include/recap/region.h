/* SPDX-License-Identifier: Apache-2.0 */
/* recap's public API, part: activation recompute: regions, checkpoints, the engine table, the manager.
 * <recap.h> includes this file after the status, log and CUDA environment it builds on. */
#ifndef RECAP_REGION_H
#define RECAP_REGION_H

#ifndef RECAP_H
#error "include <recap.h>, which includes <recap/region.h>"
#endif

/* ---------------------------------------------------------------- recompute regions */

/*
 * Activation recomputation (Megatron-Core's checkpoint, CheckpointWithoutOutput and its
 * manager) through a C ABI. The engine's "tensors" are buffers it owns, seen by recap as opaque
 * handles (recap_buffer_t); recap never reads their contents: everything it needs from the engine
 * (storage, recording mode, gradients' triggers, saved buffers, the recompute context) goes
 * through a table of engine operations. What a region re-runs is a recorded call: a function
 * pointer, its signature and its argument values, copied at record time. Buffer arguments are
 * marked by position in the signature: RECAP_TYPE_BUFFER for inputs (stashed through the engine's
 * saved-buffer operations, read back once at rebuild), RECAP_TYPE_BUFFER_OUT for outputs the
 * function writes (released and rebuilt).
 *
 * Random numbers: a region snapshots its tracker's whole RNG state (recap_snapshot_take) before
 * the first run and restores it for the recompute, so the recompute draws exactly what the first
 * run drew; the state current before the recompute is restored afterwards. Inside a capture on a
 * graph-safe tracker the snapshots are capture-relative, so the recompute redraws the forward's
 * numbers on every replay. Release and rebuild inside a capture call the engine's storage
 * operations there, so its allocator must be capture-safe: memory a captured kernel writes must
 * outlive the graph (PyTorch's graph pools do this; the plain engine does with
 * RECAP_PLAIN_KEEP_FREED) and allocating there must be allowed (for the plain engine's device
 * buffers: a capture in relaxed mode).
 *
 * Thread safety: a region, checkpoint or manager is used from one thread at a time; signatures
 * are immutable once created and may be shared between threads.
 */

typedef void *recap_buffer_t;          /* an engine's buffer (its handle, never dereferenced) */
typedef void (*recap_func_t)(void);    /* any function, cast; its signature says how to call it */
typedef struct recap_signature *recap_signature_h;
typedef struct recap_region *recap_region_h;
typedef struct recap_manager *recap_manager_h;
typedef struct recap_checkpoint *recap_checkpoint_h;

/* Type codes of a recorded call's arguments and return value. */
typedef enum recap_type {
    RECAP_TYPE_VOID = 0,      /* return type only */
    RECAP_TYPE_INT32 = 1,
    RECAP_TYPE_INT64 = 2,
    RECAP_TYPE_UINT32 = 3,
    RECAP_TYPE_UINT64 = 4,
    RECAP_TYPE_FLOAT = 5,
    RECAP_TYPE_DOUBLE = 6,
    RECAP_TYPE_POINTER = 7,   /* kept as a value: what it points to is not saved */
    RECAP_TYPE_BUFFER = 8,    /* input buffer; the function receives the engine's buffer_arg */
    RECAP_TYPE_BUFFER_OUT = 9 /* output buffer the function writes; likewise */
} recap_type_t;

/* Most arguments a recorded call may have. */
#define RECAP_MAX_ARGS 32

/* An argument or return value; buffers go in `buf`. */
typedef union recap_value {
    int32_t i32;
    int64_t i64;
    uint32_t u32;
    uint64_t u64;
    float f32;
    double f64;
    void *ptr;
    recap_buffer_t buf;
} recap_value_t;

/* Which run of a region's function the recompute context is entered for. */
typedef enum recap_pass {
    RECAP_PASS_FIRST = 0,    /* the forward run */
    RECAP_PASS_RECOMPUTE = 1 /* the rebuild or backward run */
} recap_pass_t;

/* A trigger: recap's callback the engine calls when a buffer's gradient is being computed. */
typedef recap_status_t (*recap_trigger_func_t)(void *arg);

/*
 * What recap needs from the engine. `engine` (the params' user pointer, `host`) is passed to every
 * operation. Operations report failure with a status (anything but RECAP_OK); recap returns it.
 * The table must outlive every region, checkpoint and manager using it.
 */
typedef struct recap_engine_ops {
    /* What the function receives for a buffer argument (its data pointer, say); fails for a
     * buffer without storage. NULL: the handle itself. */
    recap_status_t (*buffer_arg)(void *engine, recap_buffer_t buf, void **arg_p);
    /* Whether the buffer needs a gradient. NULL: every buffer does. */
    int (*needs_grad)(void *engine, recap_buffer_t buf);
    /* A new buffer like `like` (same size, device, kind), with storage of its own; `like` may
     * be without storage. Required. */
    recap_status_t (*alloc_like)(void *engine, recap_buffer_t like, recap_buffer_t *buf_p);
    /* Frees a buffer recap obtained from alloc_like, load or the distribution ops. Required. */
    recap_status_t (*free_buffer)(void *engine, recap_buffer_t buf);
    /* Frees the buffer's storage; the handle (and views of it) stay valid, without storage.
     * Required for regions without output. */
    recap_status_t (*free_storage)(void *engine, recap_buffer_t buf);
    /* Makes dst (and its views) use src's storage, without copying. recap frees src right after
     * with free_buffer, which must leave the storage dst now uses alone. Required for regions
     * without output. */
    recap_status_t (*share_storage)(void *engine, recap_buffer_t dst, recap_buffer_t src);
    /* Whether two buffers use the same storage. NULL: the same handle. */
    int (*same_storage)(void *engine, recap_buffer_t a, recap_buffer_t b);
    /* Switches recording (autograd) on or off for the calling thread, giving back the previous
     * setting. NULL: the engine does not record. */
    recap_status_t (*set_recording)(void *engine, int enable, int *previous_p);
    /* Arranges for fn(arg) to be called when buf's gradient is being computed; *handle_p
     * identifies it for remove_trigger. Required to release with a trigger buffer. */
    recap_status_t (*add_trigger)(void *engine, recap_buffer_t buf, recap_trigger_func_t fn,
                                  void *arg, void **handle_p);
    recap_status_t (*remove_trigger)(void *engine, void *handle);
    /* The engine's saved-buffer mechanism (its hooks, e.g. offloading, see what recap keeps):
     * save keeps buf's contents reachable (the caller may free the handle meanwhile), load gives
     * back a buffer with them, valid until drop. All three or none; none: recap keeps the
     * handles themselves. */
    recap_status_t (*save)(void *engine, recap_buffer_t buf, void **saved_p);
    recap_status_t (*load)(void *engine, void *saved, recap_buffer_t *buf_p);
    recap_status_t (*drop)(void *engine, void *saved);
    /* Optional recompute context (e.g. FP8 scaling state), entered around every run of a
     * region's function with the pass it is: both or none. */
    recap_status_t (*context_enter)(void *engine, recap_pass_t pass, void **ctx_p);
    recap_status_t (*context_exit)(void *engine, void *ctx);
    /* Optional, for checkpoints with RECAP_CHECKPOINT_DISTRIBUTE: a new buffer holding this
     * rank's slice of buf across the tensor-parallel group, and a new buffer holding every
     * rank's slices of `slice` gathered back into the whole (the engine knows the shape). */
    recap_status_t (*distribute)(void *engine, recap_buffer_t buf, recap_buffer_t *slice_p);
    recap_status_t (*all_gather)(void *engine, recap_buffer_t slice, recap_buffer_t *full_p);
} recap_engine_ops_t;

enum {
    /* Release keeps outputs that share storage with an input (retain_input_tensors). */
    RECAP_REGION_RETAIN_INPUTS = 1u << 0,
    /* Runs without entering the engine's recompute context (it is entered by default). */
    RECAP_REGION_NO_CONTEXT = 1u << 1,
    /* Checkpoints: keep only this rank's slice of the first input buffer, all-gathered again
     * before the recompute (distribute_saved_activations). */
    RECAP_CHECKPOINT_DISTRIBUTE = 1u << 2
};

typedef struct recap_region_params {
    const recap_engine_ops_t *ops;
    void *host;               /* the engine: passed to every engine operation (the field keeps
                               * the name it had before ABI 1.5, so initializers still compile) */
    /* The tracker whose whole RNG state (recap_snapshot_take) is restored for the recompute;
     * NULL: random numbers are not managed. */
    recap_tracker_h tracker;
    /* Regions without output: the manager the region registers with at creation (or NULL).
     * Must be NULL for checkpoints. */
    recap_manager_h manager;
    uint32_t flags;           /* RECAP_REGION_*, RECAP_CHECKPOINT_* */
} recap_region_params_t;

/* A call signature: return type and argument types, prepared once for libffi and shareable by
 * any number of regions (each holds a reference; destroy drops the caller's). Rejected with
 * RECAP_ERR_INVALID_ARG: unknown type codes, VOID or a buffer as an argument, a buffer as the
 * return type, more than RECAP_MAX_ARGS arguments. */
RECAP_API recap_status_t recap_signature_create(recap_type_t ret, const recap_type_t *args,
                                                size_t nargs, recap_signature_h *sig_p);
RECAP_API recap_status_t recap_signature_destroy(recap_signature_h sig);

/*
 * A region without output (CheckpointWithoutOutput). Its lifecycle only moves forward, one step
 * at a time: NEW -> RECORDED -> RELEASED -> REBUILT -> DONE; any other call is RECAP_ERR_STATE
 * with a message, and changes nothing. Destroy is allowed in every state.
 *
 * When no input buffer needs a gradient the region is a plain call: record runs the function
 * once (in the recompute context, as a first pass) and keeps nothing; release and rebuild do
 * nothing and succeed.
 */
typedef enum recap_region_state {
    RECAP_REGION_NEW = 0,
    RECAP_REGION_RECORDED = 1,
    RECAP_REGION_RELEASED = 2,
    RECAP_REGION_REBUILT = 3,
    RECAP_REGION_DONE = 4
} recap_region_state_t;

RECAP_API recap_status_t recap_region_create(const recap_region_params_t *params,
                                             recap_region_h *region_p);
/* Frees what the region holds in any state: a region released and never rebuilt drops its
 * stashed inputs here; removes its trigger and leaves its manager. While a lifecycle call runs the
 * region's function or an engine operation for it (record's needs_grad and save, release's
 * add_trigger and free_storage, rebuild, finish's remove_trigger), or its manager releases or
 * rebuilds, the lifecycle calls on that region (destroy, record, release, rebuild, finish, its
 * manager's add, release, rebuild and destroy) return RECAP_ERR_STATE and change nothing. So do
 * region and checkpoint creation and destruction from inside a framework generator's operation
 * (they join or leave the tracker, whose lock recap holds there). */
RECAP_API recap_status_t recap_region_destroy(recap_region_h region);
/* NEW -> RECORDED: snapshots the RNG state, runs fn(args) once without recording (the engine's
 * set_recording) with recap_is_checkpointing true, then stashes the input buffers through the
 * engine's save. The argument values are copied; nargs must equal the signature's count and fn
 * must not be NULL (RECAP_ERR_INVALID_ARG, nothing run). The output buffers' handles are kept,
 * not saved: they must stay valid while the region lives (release frees their storage, rebuild
 * gives them new storage). */
RECAP_API recap_status_t recap_region_record(recap_region_h region, recap_signature_h sig,
                                             recap_func_t fn, const recap_value_t *args,
                                             size_t nargs);
/* RECORDED -> RELEASED: frees the storage of the output buffers (their handles stay valid);
 * with RECAP_REGION_RETAIN_INPUTS outputs sharing storage with an input are kept. With a
 * trigger buffer that needs a gradient, arms a trigger on it that rebuilds the region (NULL: no
 * trigger; rebuild explicitly). Regions of a manager are released through it. */
RECAP_API recap_status_t recap_region_release(recap_region_h region, recap_buffer_t trigger);
/* RELEASED -> REBUILT: reads the stashed inputs back (once), restores the RNG snapshot,
 * re-runs the function with recording on into new buffers, makes each released output share the
 * new storage (no copy), and restores the RNG state current before. The trigger calls it; a
 * trigger firing in any later state does nothing. */
RECAP_API recap_status_t recap_region_rebuild(recap_region_h region);
/* REBUILT -> DONE: the engine has back-propagated through the outputs; removes the trigger. */
RECAP_API recap_status_t recap_region_finish(recap_region_h region);
RECAP_API recap_status_t recap_region_state(recap_region_h region, recap_region_state_t *state_p);
/* Whether the region is a plain call (no input needed a gradient); RECAP_ERR_STATE before
 * record. */
RECAP_API recap_status_t recap_region_is_plain(recap_region_h region, int *plain_p);
/* The value the function returned in its latest run (zero for VOID). */
RECAP_API recap_status_t recap_region_return_value(recap_region_h region, recap_value_t *value_p);

/*
 * A manager (CheckpointWithoutOutputManager) coordinates regions whose outputs feed each other:
 * one call releases all of them and arms one trigger that rebuilds them in the order they were
 * added (forward order). Its regions use its ops and host. After a rebuild the manager is empty
 * and collects the next regions.
 */
RECAP_API recap_status_t recap_manager_create(const recap_engine_ops_t *ops, void *engine,
                                              recap_manager_h *mgr_p);
/* Regions still registered are let go (they stay valid). RECAP_ERR_STATE, nothing changed, from
 * inside the manager's own release or rebuild, or while one of its regions runs a lifecycle call
 * (from a region's function or an engine operation, say); likewise its add, release and
 * rebuild. */
RECAP_API recap_status_t recap_manager_destroy(recap_manager_h mgr);
/* Registers a region (regions created with params.manager are registered already). Rejected:
 * NULL (RECAP_ERR_INVALID_ARG), a region of this manager (RECAP_ERR_EXISTS) or another one, or
 * of another host (RECAP_ERR_INVALID_ARG), a region already released or a manager awaiting its
 * rebuild (RECAP_ERR_STATE). */
RECAP_API recap_status_t recap_manager_add(recap_manager_h mgr, recap_region_h region);
RECAP_API recap_status_t recap_manager_count(recap_manager_h mgr, size_t *count_p);
/* Releases every region (all must be RECORDED, else RECAP_ERR_STATE and nothing is released)
 * and, with a trigger buffer that needs a gradient, arms one trigger that calls
 * recap_manager_rebuild. */
RECAP_API recap_status_t recap_manager_release(recap_manager_h mgr, recap_buffer_t trigger);
/* Rebuilds every region in forward order (RECAP_ERR_STATE unless released); on an error the
 * regions rebuilt so far stay rebuilt and a second call carries on with the rest. */
RECAP_API recap_status_t recap_manager_rebuild(recap_manager_h mgr);

/*
 * Full recompute (checkpoint): snapshots the RNG state, runs fn(args) without recording and
 * keeps the input buffers (through the engine's save); the outputs the function wrote are the
 * caller's as usual. At backward the engine calls recap_checkpoint_backward when the outputs'
 * gradient arrives: recap restores the snapshot, re-runs with recording into new output buffers
 * and hands them back to back-propagate through, then restores the RNG state current before.
 * With RECAP_CHECKPOINT_DISTRIBUTE only this rank's slice of the first input buffer is kept
 * (the engine's distribute) and all-gathered before the recompute. When no input needs a
 * gradient the run is a plain call and backward is RECAP_ERR_STATE.
 */
RECAP_API recap_status_t recap_checkpoint_run(const recap_region_params_t *params,
                                              recap_signature_h sig, recap_func_t fn,
                                              const recap_value_t *args, size_t nargs,
                                              recap_checkpoint_h *ckpt_p);
/* Once: outputs[i] receives the recomputed i-th output buffer (in argument order; n must be
 * the number of RECAP_TYPE_BUFFER_OUT arguments), a buffer from alloc_like that the engine now
 * owns. The output handles given to run must still be valid (alloc_like takes them as templates;
 * their storage may be gone). A second call is RECAP_ERR_STATE. */
RECAP_API recap_status_t recap_checkpoint_backward(recap_checkpoint_h ckpt,
                                                   recap_buffer_t *outputs, size_t n);
RECAP_API recap_status_t recap_checkpoint_return_value(recap_checkpoint_h ckpt,
                                                       recap_value_t *value_p);
/* Drops the stashed inputs if backward never ran. RECAP_ERR_STATE, nothing changed, from inside
 * its own backward (its function or an engine operation), as a second backward is. */
RECAP_API recap_status_t recap_checkpoint_destroy(recap_checkpoint_h ckpt);

/* 1 on the calling thread while a region's or checkpoint's function runs or is recomputed
 * (nested regions included), else 0. */
RECAP_API recap_status_t recap_is_checkpointing(int *checkpointing_p);

/* Names before ABI 1.5, which called the engine "the host" (deprecated; existing programs
 * compile, and the library still exports the old functions for existing binaries). */
typedef recap_engine_ops_t recap_host_ops_t;
#define recap_host_ops recap_engine_ops

#endif /* RECAP_REGION_H */
