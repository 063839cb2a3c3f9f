/* SPDX-License-Identifier: Apache-2.0 */
/* Recorded calls, regions, checkpoints and managers (internal). */
#ifndef RECAP_REGION_REGION_H
#define RECAP_REGION_REGION_H

#include <ffi.h>
#include <stdint.h>

#include "recap.h"

/* A prepared libffi signature. Positions of the buffer arguments are listed once here so a
 * run walks only them. Reference counted: regions keep theirs alive. */
struct recap_signature {
    int refs;
    ffi_cif cif;
    ffi_type *atypes[RECAP_MAX_ARGS];
    recap_type_t ret;
    recap_type_t types[RECAP_MAX_ARGS];
    uint32_t nargs;
    uint8_t in[RECAP_MAX_ARGS], nin;   /* RECAP_TYPE_BUFFER positions */
    uint8_t out[RECAP_MAX_ARGS], nout; /* RECAP_TYPE_BUFFER_OUT positions */
};

void recap__signature_ref(recap_signature_h sig);
void recap__signature_unref(recap_signature_h sig);

/* What a region and a checkpoint share: the engine, the recorded call, the RNG snapshots and the
 * stashed inputs. */
typedef struct recap__rec {
    const recap_engine_ops_t *ops;
    void *engine;
    recap_tracker_h tracker;
    uint32_t flags;
    recap_signature_h sig; /* NULL until recorded */
    recap_func_t fn;
    recap_value_t args[RECAP_MAX_ARGS];
    recap_value_t ret; /* of the latest run */
    int plain;         /* no input needs a gradient: a plain call */
    recap_snapshot_h fwd; /* the RNG state before the first run */
    void *saved[RECAP_MAX_ARGS]; /* the engine's saved cookies, by input index */
    int nsaved;
    /* A distributed slice kept as the saved handle itself (an engine without save): recap owns it
     * and frees it when the saved inputs are dropped. */
    recap_buffer_t own_slice;
} recap__rec_t;

/* Which engine operations a user of recap__rec_init needs beyond the always-required ones. */
#define RECAP__NEED_RELEASE 1u    /* free_storage, share_storage */
#define RECAP__NEED_DISTRIBUTE 2u /* distribute, all_gather */

recap_status_t recap__rec_init(recap__rec_t *r, const recap_region_params_t *p, uint32_t need);
/* Validates and copies the call; decides whether it is a plain call. Runs nothing. */
recap_status_t recap__rec_prepare(recap__rec_t *r, recap_signature_h sig, recap_func_t fn,
                                  const recap_value_t *args, size_t nargs);
/* Forgets the prepared call (after a failed record). */
void recap__rec_unprepare(recap__rec_t *r);
/* The first run: snapshot, then the function without recording (a plain call keeps the engine's
 * recording mode and takes no snapshot). */
recap_status_t recap__rec_first(recap__rec_t *r);
/* Stashes bufs[position] for every input through the engine's save; all or nothing. */
recap_status_t recap__rec_save(recap__rec_t *r, const recap_buffer_t *bufs);
/* Reads every stashed input back into bufs[position]. */
recap_status_t recap__rec_load(recap__rec_t *r, recap_buffer_t *bufs);
/* Restores the snapshot, runs with recording on bufs, restores the state current before. */
recap_status_t recap__rec_recompute(recap__rec_t *r, const recap_buffer_t *bufs);
/* Drops the stashed inputs. */
void recap__rec_drop(recap__rec_t *r);
void recap__rec_fini(recap__rec_t *r);
/* The recorded call's buffers (bufs[position] = args[position].buf). */
void recap__rec_buffers(const recap__rec_t *r, recap_buffer_t *bufs);

/* One run of the function on bufs, in the recompute context (unless opted out), with the
 * engine's recording set to `recording` (-1: left alone) and recap_is_checkpointing true. */
recap_status_t recap__run(recap__rec_t *r, recap_pass_t pass, int recording,
                          const recap_buffer_t *bufs);
/* ffi_call of the recorded function with bufs mapped through the engine's buffer_arg. */
recap_status_t recap__call_invoke(recap__rec_t *r, const recap_buffer_t *bufs);

/* Snapshot objects from a per-thread cache (created when it is empty), and back to it. */
recap_status_t recap__snap_get(recap_snapshot_h *snap_p);
void recap__snap_put(recap_snapshot_h snap);

void recap__checkpointing_enter(void);
void recap__checkpointing_leave(void);

/* Wraps a failed engine operation's status with what recap was doing (keeping the engine's own
 * message, if it left one). */
recap_status_t recap__engine_fail(recap_status_t st, const char *op, int arg);

struct recap_region {
    uint32_t magic; /* RECAP_MAGIC_REGION while live (base/handle.h) */
    recap__rec_t rec;
    recap_region_state_t state;
    recap_manager_h manager;
    void *trigger;     /* the engine's trigger handle, or NULL */
    uint32_t released; /* bit j: output j's storage was freed */
    /* Noted at record, while every handle is surely valid: bit j, output j shares storage with
     * an input; dup[j], the earlier output with output j's handle (-1: none). */
    uint32_t aliased;
    int8_t dup[RECAP_MAX_ARGS];
    /* Set while a lifecycle call runs the region's function or the engine's operations for it:
     * the function, an operation (or a trigger either fires) calling back into the region's
     * lifecycle, or its manager's, gets RECAP_ERR_STATE. */
    int running;
};

/* RECAP_ERR_STATE naming `what` while r runs its function. */
recap_status_t recap__region_not_running(recap_region_h r, const char *what);

/* RECAP_ERR_STATE naming the states unless r is in `want`: lifecycle steps are one at a time
 * and forward only. */
recap_status_t recap__region_expect(recap_region_h r, recap_region_state_t want,
                                    const char *what);
/* Notes which outputs alias an input or repeat an earlier output. */
void recap__region_note_outputs(recap_region_h r);
/* The transitions without the checks that only the public calls make (managed or not). */
recap_status_t recap__region_release(recap_region_h r);
recap_status_t recap__region_rebuild(recap_region_h r);

/* Arms fn(arg) on the trigger buffer when it needs a gradient (*handle_p stays NULL when it does
 * not), and removes an armed trigger. */
recap_status_t recap__trigger_arm(const recap_engine_ops_t *ops, void *engine,
                                  recap_buffer_t trigger, recap_trigger_func_t fn, void *arg,
                                  void **handle_p);
void recap__trigger_disarm(const recap_engine_ops_t *ops, void *engine, void **handle_p);

struct recap_checkpoint {
    uint32_t magic; /* RECAP_MAGIC_CHECKPOINT while live */
    recap__rec_t rec;
    int done;    /* backward ran */
    int running; /* backward runs: destroy and a second backward are refused meanwhile */
};

/* The position of the input kept distributed, or -1. */
int recap__checkpoint_dist_pos(const recap__rec_t *r);

struct recap_manager {
    uint32_t magic; /* RECAP_MAGIC_MANAGER while live */
    const recap_engine_ops_t *ops;
    void *engine;
    recap_region_h *regions; /* forward order */
    size_t n, cap;
    int released; /* released, awaiting the rebuild */
    void *trigger;
    /* Set while release or rebuild runs (the regions' functions, the engine's operations): a
     * call back into the manager's destroy, add, release or rebuild gets RECAP_ERR_STATE. */
    int busy;
};

recap_status_t recap__manager_add(recap_manager_h m, recap_region_h r);
/* The region is being destroyed. */
void recap__manager_forget(recap_manager_h m, recap_region_h r);

/* The region core asks whether an engine pointer is valid for its operations (users.c):
 * RECAP_ERR_INVALID_ARG when ops are those of an engine recap ships and engine is not a live
 * engine of that kind, NULL included. An engine recap ships names its operations, how to tell a
 * live engine and their names (for the message) before it hands its operations out
 * (src/plain/ops.c), so the core answers without calling up into the engines. */
recap_status_t recap__engine_check(const recap_engine_ops_t *ops, const void *engine);
void recap__engine_kind(const recap_engine_ops_t *ops, int (*live)(const void *engine),
                        const char *name, const char *handle_type);

/* Regions, checkpoints, managers and wrappers using an engine pointer (users.c): the engines recap
 * ships refuse destroy while any does. */
recap_status_t recap__engine_use(const void *engine, int delta);
size_t recap__engine_users(const void *engine);

#endif
