/* SPDX-License-Identifier: Apache-2.0 */
/* recap's public API, part: the RNG state tracker: named states, forks, exact-capture scopes, per-rank seeding, whole-state snapshots.
 * <recap.h> includes this file after the status, log and CUDA environment it builds on. */
#ifndef RECAP_TRACKER_H
#define RECAP_TRACKER_H

#ifndef RECAP_H
#error "include <recap.h>, which includes <recap/tracker.h>"
#endif

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
/* RECAP_ERR_STATE while forks are open (the tracker's generator would keep a named state), while
 * recompute regions or checkpoints made with it live (they restore its states when they
 * rebuild), and for the default tracker (replace it with recap_default_tracker_initialize and
 * force_reset, which refuses the same way).
 * An owned generator (params.generator NULL) is destroyed with the tracker. */
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
 * 16-byte values; graph-safe mode installs the state object itself.
 * Trackers may share a generator (params.generator) one after the other, not interleaved: while
 * one tracker has a fork open on the generator, another tracker's fork returns RECAP_ERR_STATE
 * and changes nothing (its unfork would put the wrong state back). */
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
/* An empty states object, and setting a name's value in one (added at the end when new): a map
 * built by the host for recap_tracker_set_states (a framework's set_states of its own values).
 * RECAP_ERR_MISALIGNED for an offset not a multiple of 4; names as recap_tracker_add's. */
RECAP_API recap_status_t recap_states_create(recap_states_h *states_p);
RECAP_API recap_status_t recap_states_put(recap_states_h states, const char *name,
                                          const uint8_t state[RECAP_STATE_BYTES]);
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

/* The framework's state object behind a named state of a graph-safe tracker on a framework
 * generator (what the framework registers with its graphs: torch's register_generator_state),
 * lent: valid while the state stays in the tracker. RECAP_ERR_NOT_FOUND for an unknown name,
 * RECAP_ERR_INVALID_ARG for another kind of tracker. */
RECAP_API recap_status_t recap_tracker_state_object(recap_tracker_h tracker, const char *name,
                                                    void **obj_p);

/* Process-wide default tracker. initialize creates it (or, with force_reset, replaces it: the
 * old one is destroyed and its handle becomes invalid; RECAP_ERR_STATE, keeping it, while it has
 * forks open). Initialize again with the same params returns the existing tracker; with
 * different params RECAP_ERR_OPTIONS_DIFFER, keeping the existing one (Megatron silently keeps
 * it). get returns RECAP_ERR_STATE before initialize. */
RECAP_API recap_status_t recap_default_tracker_initialize(const recap_tracker_params_t *params,
                                                int force_reset, recap_tracker_h *tracker_p);
RECAP_API recap_status_t recap_default_tracker_get(recap_tracker_h *tracker_p);

/* ---------------------------------------------------------------- exact-capture scope */

/*
 * Graphs on = graphs off (ABI 1.4). Frameworks warm a step up eagerly before capturing it
 * (torch.cuda.make_graphed_callables runs it 3 times; Megatron's create_cudagraphs more), and the
 * warm-up and the capture advance every generator, so the first replay draws what the 4th eager
 * step would: a graphed run differs from the eager one from step 1. Entering this scope takes a
 * snapshot of every tracker (its generator and every named state, value or graph-safe) and of
 * every framework generator alive; leaving restores them all, so warm-ups and captures inside the
 * scope leave the generators where they were and the first replay after it draws exactly what
 * the first eager step would have (graph launches take the generators' offsets at launch time).
 *
 * Scopes nest (each restores what it saw at its entry; leave them in reverse order). A scope is
 * process-wide: it restores every tracker, also ones another thread used meanwhile, so enter it
 * while no other thread draws. Objects created inside a scope are left as they are; ones destroyed
 * inside it are skipped. recap's own generators outside trackers are not included. Enter and leave
 * outside captures of the calling thread (RECAP_ERR_STATE). RECAP_EXACT_CAPTURE=0 turns every
 * scope into one that restores nothing (today's behaviour). leave restores what it can when one
 * restore fails and returns the first failure; the scope is freed either way.
 */
typedef struct recap_exact_scope *recap_exact_scope_h;
RECAP_API recap_status_t recap_exact_capture_enter(recap_exact_scope_h *scope_p);
RECAP_API recap_status_t recap_exact_capture_leave(recap_exact_scope_h scope);

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
 * forks too; graph-safe trackers write into their existing state objects). The generator's value
 * is the progress of the state it drew at take (the default outside forks, else the forked one),
 * and that state is current again after the restore, as the map and the generator are apart in
 * Megatron's module: restored inside fork(x) when taken outside forks, the generator draws the
 * snapshot's default value, a nested fork(x) x's restored value, and the fork's unfork stores
 * what the generator drew into x. A graph-safe tracker's generator holds the forked state's
 * object, so there a restore inside a fork of a snapshot taken outside it (or in another fork) is
 * RECAP_ERR_STATE; outside forks any snapshot restores. Otherwise the map is
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
/* Parses and validates a whole blob into snap; RECAP_ERR_CORRUPT for damaged or truncated data
 * (bad magic, length, checksum, names, offsets not multiples of 4; checked before the version,
 * so a damaged version field is corrupt too), RECAP_ERR_VERSION for an intact blob of another
 * format version, and snap is left unchanged on any error. Restore it to apply it. */
RECAP_API recap_status_t recap_snapshot_deserialize(const void *buf, size_t len, recap_snapshot_h snap);

#endif /* RECAP_TRACKER_H */
