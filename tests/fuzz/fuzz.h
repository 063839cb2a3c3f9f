/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for recap's public ABI: each input is decoded into a sequence of operations on
 * generators (host and device 0 of the CUDA test double), trackers (value, graph-safe, inference,
 * the default one), states objects, snapshots and their blobs (serialized ones and fuzz bytes, with
 * and without a valid checksum), reservations and fills, per-rank seeding, captures, graphs and
 * executables, and signatures; with names and seeds of any bytes, and wrong kinds, orders and
 * tokens (a host generator where a device one belongs, an unfork of a token that is not the
 * innermost, a capture ended that never began); recompute regions, managers and checkpoints over
 * plain engines (host and device), the NCCL wrapper over the fake NCCL, and the probe API.
 * Handles are only ever ones this harness created and has not destroyed (anything else is
 * undefined by contract).
 *
 * What must hold: no crash, leak or undefined behaviour (AddressSanitizer, LeakSanitizer,
 * UndefinedBehaviorSanitizer), every failing call leaves a message in recap_last_error(),
 * statuses are known ones, failed calls leave their outputs and the objects they were given as
 * they were, and each input leaves recap as it found it (no capture records left, plain engines
 * empty). RNG state: after any sequence a draw equals include/recap/philox.h's words for the
 * (seed, offset) recap reports, a fork installs the state the tracker reports for the name, and a
 * region's or checkpoint's recompute draws and writes bit for bit what its first run did.
 *
 * Built by `make tests/fuzz/fuzz_api` (clang, -fsanitize=fuzzer): scripts/fuzz runs it,
 * scripts/ci-sanitize runs it for two minutes in CI.
 *
 * The harness's files: fuzz_api.c (one input: setup, the operation table, teardown),
 * input.c (reading the input, checking each call, the objects it created), and the operations
 * by topic: ops_generator.c, ops_tracker.c, ops_snapshot.c, ops_graph.c, ops_region.c,
 * ops_nccl.c, ops_probe.c, ops_rng.c, ops_output.c (hostile names and sinks).
 * RECAP_FUZZ_TRACE=1 prints each call and its status.
 */
#ifndef RECAP_TESTS_FUZZ_FUZZ_H
#define RECAP_TESTS_FUZZ_FUZZ_H

#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" /* recap__fail, to clear the calling thread's message between calls */
#include "recap.h"

#define NGEN 6
#define NTRK 4 /* slot NTRK - 1 holds the default tracker when the input initializes it */
#define DEFAULT_SLOT (NTRK - 1)
#define NSTATES 3
#define NSNAP 3
#define NSTREAM 2
#define NGRAPH 3
#define NEXEC 3
#define NSIG 2
#define NFORKS 16
#define DBUF_WORDS 8192 /* device buffers for fills (u32 words) */
#define HBUF_WORDS 4096
#define MAX_OPS 400

typedef struct {
    const uint8_t *p;
    size_t n;
} input_t;
typedef struct {
    recap_generator_h h;
    int device;
    int users; /* trackers created with it: it must outlive them */
} gen_slot_t;
typedef struct {
    recap_tracker_h h;
    int inference; /* 1, 0, or -1 when not known (a default tracker fetched) */
    int gen, host_gen; /* slots of the generators given at creation, or -1 */
    recap_fork_token_t forks[NFORKS];
    int nforks;
    int regions; /* regions and checkpoints made with it (ops_region.c): recap refuses its destroy */
    int args;    /* ... and those whose function draws from it: it must outlive them */
} trk_slot_t;

typedef struct {
    gen_slot_t gen[NGEN];
    trk_slot_t trk[NTRK];
    recap_states_h states[NSTATES];
    recap_snapshot_h snap[NSNAP];
    recap_stream_t stream[NSTREAM];
    int capturing[NSTREAM];
    recap_graph_t graph[NGRAPH];
    recap_graph_exec_t exec[NEXEC];
    recap_signature_h sig[NSIG];
    void *dbuf[2];
    uint32_t hbuf[HBUF_WORDS];
    int have_device;
} world_t;
extern world_t w;

/* Every recap call of the harness goes through CALL: clear, call, check. */
#define CALL(expr) (clear_error(), checked((expr), #expr))
#define REQUIRE(cond)                                                              \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "%s:%d: %s (%s)\n", __FILE__, __LINE__, #cond,         \
                    recap_last_error());                                           \
            abort();                                                               \
        }                                                                          \
    } while (0)

uint8_t u8(input_t *in);
uint64_t num(input_t *in);
const char *name(input_t *in, char *buf, size_t cap);
void clear_error(void);
recap_status_t checked(recap_status_t st, const char *what);
int pick(input_t *in, int n);
recap_generator_h gen_of(int slot);
int free_gen_slot(void);
void op_gen_create(input_t *in);
void op_gen_destroy(input_t *in);
void op_gen_state(input_t *in);
void op_reserve(input_t *in);
void op_fill(input_t *in);
void op_tracker_create(input_t *in);
void op_tracker_destroy(input_t *in);
void op_default_tracker(input_t *in);
trk_slot_t *any_tracker(input_t *in);
void op_tracker_query(input_t *in);
void op_tracker_add(input_t *in);
void op_tracker_fork(input_t *in);
void op_tracker_unfork(input_t *in);
void op_tracker_reset_or_seed(input_t *in);
void op_states(input_t *in);
void op_convert(input_t *in);
void op_snapshot(input_t *in);
void op_capture(input_t *in);
void op_graph(input_t *in);
void op_nest(input_t *in);
void op_output(input_t *in);
void op_signature(input_t *in);
void op_misc(input_t *in);

/* Regions, managers, checkpoints and the plain engine (ops_region.c), the NCCL wrapper
 * (ops_nccl.c), the probe API (ops_probe.c), RNG-state checks (ops_rng.c). */
#define NBUF 6
#define NREG 4
#define NMGR 2
#define NCKPT 2
#define NLOG (NREG + NCKPT)
#define MAXWORDS 96
typedef struct {
    recap_plain_engine_h eng[2]; /* host memory; device 0 (under the NCCL wrapper) */
    const recap_engine_ops_t *plain_ops;
    struct {
        recap_buffer_t h;
        int eng;
        unsigned gen; /* bumped at each new buffer in the slot */
    } buf[NBUF];
    struct {
        recap_region_h h;
        int eng, trk, arg_trk, plain, checked, ys, same;
        int yslot; /* the output's buffer slot (-1 before record): it must outlive the region */
        unsigned ygen;
        uint64_t n;
    } reg[NREG];
    struct {
        recap_manager_h h;
        int eng;
    } mgr[NMGR];
    struct {
        recap_checkpoint_h h;
        int eng, trk, arg_trk;
        int yslot, done; /* the output's buffer slot: it must outlive the backward */
        uint64_t n;
    } ck[NCKPT];
    int managed[NLOG]; /* the function drew through the region's own tracker */
    recap_signature_h sig;
    const recap_engine_ops_t *nccl_ops; /* the NCCL wrapper's table and engine, when one lives */
    void *nccl_engine;
} region_world_t;
extern region_world_t rw;

void op_plain(input_t *in);
void op_region(input_t *in);
void op_manager(input_t *in);
void op_checkpoint(input_t *in);
void op_nccl(input_t *in);
void op_probe(input_t *in);
/* Forks and re-entry from inside framework and subscriber callbacks (ops_callbacks.c). */
void op_callbacks(input_t *in);
void fz_callbacks_reset(void);
void op_rng_check(input_t *in);
void fz_rng_check_all(void);
recap_plain_engine_h fz_engine(int e, input_t *in);
void fz_adopt(recap_buffer_t b, int e);
void fz_set_pass(int pass);
void fz_regions_check(void);
void fz_regions_teardown(void);
void fz_nccl_teardown(void);

#endif
