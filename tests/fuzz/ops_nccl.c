/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL wrapper (recap_nccl_*) over the fake NCCL of tests/double (RECAP_NCCL_LIB, set by
 * LLVMFuzzerInitialize) and a plain engine on device 0 of the test double: creation with good and
 * bad parameters, streams, stats, and the wrapper's table under regions, managers and
 * checkpoints (RECAP_CHECKPOINT_DISTRIBUTE included, ops_region.c). Gathers only ever run in
 * groups of one rank: a rank of a larger group would wait for ranks this thread is not.
 */
#include "tests/fuzz/fuzz.h"

#include <dlfcn.h>

static struct {
    recap_nccl_h h;
    void *comms[2];
    int ncomms; /* the group's size; 0 when there is none */
} nc;
static int (*group_create)(int, const int *, void **);
static void (*comm_destroy)(void *);

static int fake_loaded(void)
{
#ifdef RECAP_FUZZ_NCCL
    static void *lib;

    if (lib == NULL && (lib = dlopen(RECAP_FUZZ_NCCL, RTLD_NOW | RTLD_LOCAL)) != NULL) {
        *(void **)&group_create = dlsym(lib, "fake_nccl_group_create");
        *(void **)&comm_destroy = dlsym(lib, "fake_nccl_comm_destroy");
    }
#endif
    return group_create != NULL && comm_destroy != NULL;
}

/* Whether a region, manager or checkpoint of the input uses the wrapper's table. */
static int wrapper_in_use(void)
{
    int i;

    for (i = 0; i < NREG; i++)
        if (rw.reg[i].h != NULL && rw.reg[i].eng)
            return 1;
    for (i = 0; i < NMGR; i++)
        if (rw.mgr[i].h != NULL && rw.mgr[i].eng)
            return 1;
    for (i = 0; i < NCKPT; i++)
        if (rw.ck[i].h != NULL && rw.ck[i].eng)
            return 1;
    return 0;
}

static void nccl_create(input_t *in)
{
    static const int devices[2] = {0, 1};
    const recap_nccl_buffer_ops_t *bops;
    recap_engine_ops_t broken;
    recap_nccl_params_t p;
    recap_nccl_h h = (recap_nccl_h)0x1;
    recap_plain_engine_h eng = fz_engine(1, in);
    uint8_t k = u8(in);

    if (eng == NULL || !fake_loaded())
        return;
    if (nc.ncomms == 0) {
        nc.ncomms = u8(in) % 4 == 0 ? 2 : 1;
        REQUIRE(group_create(nc.ncomms, devices, nc.comms) == 0);
    }
    REQUIRE(CALL(recap_nccl_plain_buffer_ops(&bops)) == RECAP_OK);
    memset(&p, 0, sizeof(p));
    p.comm = k % 16 == 1 ? NULL : nc.comms[0];
    p.rank = k % 16 == 2 ? (int)(u8(in) % 4) - 1 : 0;
    p.nranks = k % 16 == 3 ? (int)(u8(in) % 4) - 1 : nc.ncomms;
    p.stream = w.stream[u8(in) % NSTREAM];
    p.ops = rw.plain_ops;
    p.host = eng;
    p.buffers = k % 16 == 4 ? NULL : bops;
    if (k % 16 == 5) {
        broken = *rw.plain_ops;
        broken.alloc_like = NULL;
        p.ops = &broken; /* refused: the table is not kept */
    } else if (k % 16 == 6) {
        p.ops = NULL;
    }
    if (CALL(recap_nccl_ops_create(&p, &h)) != RECAP_OK) {
        REQUIRE(h == (recap_nccl_h)0x1);
        return;
    }
    REQUIRE(k % 16 < 1 || k % 16 > 6 || (k % 16 == 2 && p.rank == 0) ||
            (k % 16 == 3 && p.nranks == nc.ncomms));
    if (nc.ncomms > 1) { /* no gathers in a group this thread cannot complete */
        REQUIRE(CALL(recap_nccl_ops_destroy(h)) == RECAP_OK);
        return;
    }
    nc.h = h;
    REQUIRE(CALL(recap_nccl_engine_ops(h, &rw.nccl_ops, &rw.nccl_engine)) == RECAP_OK);
    REQUIRE(rw.nccl_engine == (void *)h);
}

void op_nccl(input_t *in)
{
    recap_nccl_stats_t st;
    int v;

    if (nc.h == NULL) {
        nccl_create(in);
        return;
    }
    switch (u8(in) % 5) {
    case 0:
        CALL(recap_nccl_set_stream(nc.h, u8(in) % 4 ? w.stream[u8(in) % NSTREAM] : NULL));
        break;
    case 1:
        REQUIRE(CALL(recap_nccl_stats(nc.h, &st)) == RECAP_OK);
        REQUIRE(st.padded_gathers <= st.gathers && st.live_slice_bytes % RECAP_NCCL_SLICE_ALIGN == 0);
        break;
    case 2:
        REQUIRE(CALL(recap_nccl_version(&v)) == RECAP_OK && v > 0);
        break;
    default: /* refused while checkpoints hold its slices or saved handles */
        if (wrapper_in_use())
            return;
        REQUIRE(CALL(recap_nccl_stats(nc.h, &st)) == RECAP_OK);
        REQUIRE(st.live_slices == 0 && st.live_saved == 0);
        REQUIRE(CALL(recap_nccl_ops_destroy(nc.h)) == RECAP_OK);
        nc.h = NULL;
        rw.nccl_ops = NULL;
        rw.nccl_engine = NULL;
        break;
    }
}

void fz_nccl_teardown(void)
{
    int i;

    if (nc.h != NULL)
        REQUIRE(CALL(recap_nccl_ops_destroy(nc.h)) == RECAP_OK);
    for (i = 0; i < nc.ncomms; i++)
        comm_destroy(nc.comms[i]);
    memset(&nc, 0, sizeof(nc));
}
