/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Distributed checkpoint inputs over NCCL, in CI: tests/double/fake_nccl.c stands in for libnccl.so.2
 * (RECAP_NCCL_LIB) with communicators whose ranks are threads of this process, and the CUDA test
 * double provides the devices (rank r on device r % 2). What is proved: loading and argument
 * errors; slices pad and gather back to exactly the whole's bytes for every size and group; a
 * checkpoint with a distributed input keeps only this rank's slice (the plain engine's live bytes)
 * and recomputes bit for bit what the undistributed checkpoint does; engines without save; NCCL
 * failures. The real thing on two GPUs is tests/gpu/nccl_two_ranks.cu.
 *
 * The data checks read device memory directly, which only the double allows: against a real
 * driver (scripts/gpu-check) they are skipped.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_region_util.h"

#define MAX_RANKS 4

static int (*fake_group_create)(int, const int *, void **);
static void (*fake_comm_destroy)(void *);
static void (*fake_fail_next)(int, int);
static void (*fake_in_progress_next)(int);
/* RECAP_NCCL_LIB names any path: one longer than a fixed buffer must load as named, not cut to
 * the name of another file. A link to the fake NCCL at the end of random nested folders (whole
 * path 300 to 3,000 bytes). */
START_TEST(a_long_nccl_path_is_loaded_whole)
{
    char path[4096 + 16], dir[4096];
    size_t want, len, base;
    int v;

    tu_rand_init();
    want = 301 + (size_t)tu_rand_below(2700);
    len = (size_t)snprintf(dir, sizeof(dir), "/tmp/recap-nccl-%ld", (long)getpid());
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    base = len;
    /* folders until "/libnccl.so.2" (13 bytes) makes the path want - 1 or want bytes long */
    while (len + 14 < want) {
        size_t n = 1 + (size_t)tu_rand_below(200);

        if (len + 1 + n + 13 > want)
            n = want - len - 14;
        dir[len++] = '/';
        memset(dir + len, 'a' + (int)tu_rand_below(26), n);
        len += n;
        dir[len] = '\0';
        ck_assert_msg(mkdir(dir, 0700) == 0, "mkdir (%zu bytes): %s", len, strerror(errno));
    }
    snprintf(path, sizeof(path), "%s/libnccl.so.2", dir);
    ck_assert_int_eq(symlink(RECAP_FAKE_NCCL, path), 0);
    setenv("RECAP_NCCL_LIB", path, 1);
    ck_assert_status(recap_nccl_version(&v), RECAP_OK);
    ck_assert_int_gt(v, 0);
    ck_assert_uint_ge(strlen(path) + 1, want);
    unlink(path);
    while (rmdir(dir) == 0 && strlen(dir) > base)
        *strrchr(dir, '/') = '\0';
}
END_TEST

/* A missing library named by a long path: the message names it whole, or says it was cut. */
START_TEST(a_long_missing_nccl_path_is_named_whole_or_marked)
{
    tu_long_missing_path("RECAP_NCCL_LIB", recap_nccl_version, RECAP_ERR_UNSUPPORTED);
}
END_TEST

static unsigned long (*fake_allgathers)(void);

/* Points recap at the fake NCCL and finds its test exports (each test runs in its own process:
 * recap loads NCCL once per process). */
static void use_fake(void)
{
    void *lib;

    setenv("RECAP_NCCL_LIB", RECAP_FAKE_NCCL, 1);
    lib = dlopen(RECAP_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "dlopen(%s): %s", RECAP_FAKE_NCCL, dlerror());
    *(void **)&fake_group_create = dlsym(lib, "fake_nccl_group_create");
    *(void **)&fake_comm_destroy = dlsym(lib, "fake_nccl_comm_destroy");
    *(void **)&fake_fail_next = dlsym(lib, "fake_nccl_fail_next");
    *(void **)&fake_in_progress_next = dlsym(lib, "fake_nccl_in_progress_next");
    *(void **)&fake_allgathers = dlsym(lib, "fake_nccl_allgathers");
    ck_assert(fake_group_create && fake_comm_destroy && fake_fail_next &&
              fake_in_progress_next && fake_allgathers);
}

/* Whether device memory is host memory here (the CUDA test double). */
static int on_double(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    void *lib;

    if (path == NULL || *path == '\0')
        return 0;
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    return lib != NULL && dlsym(lib, "recap_double_launch_count") != NULL;
}

#define NEEDS_DOUBLE()                                                                         \
    do {                                                                                       \
        if (!on_double()) {                                                                    \
            fprintf(stderr, "%s: skipped (reads device memory; needs the CUDA test double)\n", \
                    __func__);                                                                 \
            return;                                                                            \
        }                                                                                      \
    } while (0)

/* ---------------------------------------------------------------- one rank */

typedef struct rank {
    int rank, nranks, device;
    void *comm;
    recap_plain_engine_h engine;
    const recap_engine_ops_t *plain_ops;
    recap_nccl_h nccl;
    const recap_engine_ops_t *ops; /* the wrapper's */
    void *whost;
    recap_stream_t stream;
    /* per test */
    size_t n;          /* floats, or bytes for the slicing test */
    const void *input; /* the replicated whole */
    void *result;      /* what the rank hands back to the main thread */
    uint64_t stash_plain, stash_dist;
    uint64_t padded; /* gathers that needed padding so far */
    void (*body)(struct rank *);
} rank_t;

static void ranks_init(rank_t *rk, int nranks, const recap_engine_ops_t *host_ops)
{
    const recap_nccl_buffer_ops_t *bops;
    void *comms[MAX_RANKS];
    int devices[MAX_RANKS], r;

    for (r = 0; r < nranks; r++)
        devices[r] = r % 2;
    ck_assert_int_eq(fake_group_create(nranks, devices, comms), 0);
    ck_assert_ok(recap_nccl_plain_buffer_ops(&bops));
    for (r = 0; r < nranks; r++) {
        recap_nccl_params_t p;

        memset(&rk[r], 0, sizeof(rk[r]));
        rk[r].rank = r;
        rk[r].nranks = nranks;
        rk[r].device = devices[r];
        rk[r].comm = comms[r];
        ck_assert_ok(recap_plain_engine_create(devices[r], 0, &rk[r].engine));
        ck_assert_ok(recap_plain_engine_ops(&rk[r].plain_ops));
        ck_assert_ok(recap_stream_create(devices[r], &rk[r].stream));
        p = (recap_nccl_params_t){comms[r], r, nranks, rk[r].stream,
                                  host_ops != NULL ? host_ops : rk[r].plain_ops, rk[r].engine,
                                  bops};
        ck_assert_ok(recap_nccl_ops_create(&p, &rk[r].nccl));
        ck_assert_ok(recap_nccl_engine_ops(rk[r].nccl, &rk[r].ops, &rk[r].whost));
        ck_assert_ptr_eq(rk[r].whost, rk[r].nccl);
    }
}

static recap_plain_stats_t pstats(rank_t *rk)
{
    recap_plain_stats_t s;

    ck_assert_ok(recap_plain_engine_stats(rk->engine, &s));
    return s;
}

static recap_nccl_stats_t nstats(rank_t *rk)
{
    recap_nccl_stats_t s;

    ck_assert_ok(recap_nccl_stats(rk->nccl, &s));
    return s;
}

static void ranks_free(rank_t *rk, int nranks)
{
    int r;

    for (r = 0; r < nranks; r++) {
        recap_nccl_stats_t s = nstats(&rk[r]);

        ck_assert_uint_eq(s.live_slices, 0);
        ck_assert_uint_eq(s.live_saved, 0);
        ck_assert_uint_eq(pstats(&rk[r]).live_bytes, 0);
        ck_assert_uint_eq(pstats(&rk[r]).live_buffers, 0);
        ck_assert_ok(recap_nccl_ops_destroy(rk[r].nccl));
        ck_assert_ok(recap_stream_destroy(rk[r].stream));
        ck_assert_ok(recap_plain_engine_destroy(rk[r].engine));
        fake_comm_destroy(rk[r].comm);
    }
}

static void *rank_main(void *arg)
{
    rank_t *rk = arg;

    rk->body(rk);
    return NULL;
}

/* Runs body on every rank, one thread each, as the processes of a group would. A failed
 * assertion in any thread ends the test's process (Check runs each test forked). */
static void run_ranks(rank_t *rk, int nranks, void (*body)(rank_t *))
{
    pthread_t t[MAX_RANKS];
    int r;

    for (r = 0; r < nranks; r++) {
        rk[r].body = body;
        ck_assert_int_eq(pthread_create(&t[r], NULL, rank_main, &rk[r]), 0);
    }
    for (r = 0; r < nranks; r++)
        ck_assert_int_eq(pthread_join(t[r], NULL), 0);
}

static size_t slice_of(size_t whole, int nranks)
{
    size_t s = (whole + (size_t)nranks - 1) / (size_t)nranks;

    return (s + RECAP_NCCL_SLICE_ALIGN - 1) / RECAP_NCCL_SLICE_ALIGN * RECAP_NCCL_SLICE_ALIGN;
}

static recap_buffer_t dev_buffer(rank_t *rk, size_t bytes, int needs_grad, const void *init)
{
    recap_buffer_t b;
    void *d;

    ck_assert_ok(recap_plain_buffer_create(rk->engine, bytes, needs_grad, &b));
    ck_assert_ok(recap_plain_buffer_data(b, &d));
    if (init != NULL)
        ck_assert_ok(recap_memcpy_to_device(rk->device, d, init, bytes));
    return b;
}

/* A malloc'd copy of a device buffer's bytes. */
static void *dev_copy(rank_t *rk, recap_buffer_t b, size_t bytes)
{
    void *d, *h = malloc(bytes);

    ck_assert_ptr_nonnull(h);
    ck_assert_ok(recap_plain_buffer_data(b, &d));
    ck_assert_ptr_nonnull(d);
    ck_assert_ok(recap_memcpy_to_host(rk->device, h, d, bytes));
    return h;
}

static size_t buffer_bytes(recap_buffer_t b)
{
    size_t n;

    ck_assert_ok(recap_plain_buffer_bytes(b, &n));
    return n;
}

/* ---------------------------------------------------------------- loading and arguments */

static void free_form_stub(void *engine, void *form)
{
}

START_TEST(missing_nccl_is_unsupported_and_named)
{
    const recap_nccl_buffer_ops_t *bops;
    const recap_engine_ops_t *ops;
    recap_nccl_params_t p;
    recap_nccl_h w = NULL;
    int dummy, v;

    setenv("RECAP_NCCL_LIB", "/nonexistent", 1);
    ck_assert_ok(recap_plain_engine_ops(&ops));
    ck_assert_ok(recap_nccl_plain_buffer_ops(&bops));
    p = (recap_nccl_params_t){&dummy, 0, 2, NULL, ops, NULL, bops};
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "libnccl.so.2"));
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "/nonexistent"));
    ck_assert_ptr_null(w);
    ck_assert_status(recap_nccl_version(&v), RECAP_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "libnccl.so.2"));
    /* Bad arguments are told apart from a missing NCCL: checked first. */
    p.comm = NULL;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    const recap_nccl_buffer_ops_t *bops;
    const recap_engine_ops_t *ops;
    recap_nccl_buffer_ops_t bad_bops;
    recap_engine_ops_t bad_ops;
    recap_nccl_params_t good, p;
    recap_nccl_h w = NULL;
    void *comms[2];
    int devices[2] = {0, 1}, v = 0;
    uint64_t not_comm[8] = {0}; /* as large as the fake's communicator header it reads */

    use_fake();
    ck_assert_ok(recap_nccl_version(&v));
    ck_assert_int_eq(v, 22800);
    ck_assert_int_eq(fake_group_create(2, devices, comms), 0);
    ck_assert_ok(recap_plain_engine_ops(&ops));
    ck_assert_ok(recap_nccl_plain_buffer_ops(&bops));
    good = (recap_nccl_params_t){comms[1], 1, 2, NULL, ops, NULL, bops};
    ck_assert_status(recap_nccl_ops_create(NULL, &w), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_nccl_ops_create(&good, NULL), RECAP_ERR_INVALID_ARG);
    p = good, p.comm = NULL;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    p = good, p.nranks = 0, p.rank = 0;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    p = good, p.rank = 2;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    p = good, p.rank = -1;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    p = good, p.ops = NULL;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    bad_ops = *ops, bad_ops.free_buffer = NULL;
    p = good, p.ops = &bad_ops;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    bad_ops = *ops, bad_ops.drop = NULL;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    p = good, p.buffers = NULL;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    bad_bops = *bops, bad_bops.data = NULL;
    p = good, p.buffers = &bad_bops;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    bad_bops = *bops, bad_bops.free_form = free_form_stub;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    /* The group recap is told of must be the communicator's. */
    p = good, p.rank = 0;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "rank 1 of 2"));
    p = good, p.nranks = 3;
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    p = good, p.comm = not_comm; /* not a communicator: NCCL's own check answers */
    ck_assert_status(recap_nccl_ops_create(&p, &w), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "ncclCommCount"));
    ck_assert_ptr_null(w);
    ck_assert_ok(recap_nccl_ops_create(&good, &w));
    ck_assert_status(recap_nccl_engine_ops(w, NULL, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_nccl_stats(NULL, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_nccl_set_stream(NULL, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_nccl_set_stream(w, NULL));
    ck_assert_ok(recap_nccl_ops_destroy(w));
    ck_assert_status(recap_nccl_ops_destroy(NULL), RECAP_ERR_INVALID_ARG);
    fake_comm_destroy(comms[0]);
    fake_comm_destroy(comms[1]);
}
END_TEST

/* ---------------------------------------------------------------- slicing and gathering */

static const size_t slice_sizes[] = {1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49, 95, 96, 97,
                                     1000, 4096, 4099, 65536 + 5};
#define NSIZES (sizeof(slice_sizes) / sizeof(slice_sizes[0]))

/* For every size: distribute keeps this rank's bytes in a slice of S bytes, and all_gather
 * gives back exactly the whole (its size and its bytes), padded or not. */
static void slice_body(rank_t *rk)
{
    size_t i;

    for (i = 0; i < NSIZES; i++) {
        size_t whole = slice_sizes[i], s = slice_of(whole, rk->nranks), start, mine;
        recap_buffer_t x, slice, full;
        unsigned char *got;

        x = dev_buffer(rk, whole, 1, rk->input);
        ck_assert_ok(rk->ops->distribute(rk->whost, x, &slice));
        ck_assert_uint_eq(buffer_bytes(slice), s);
        start = s * (size_t)rk->rank;
        mine = start >= whole ? 0 : (whole - start < s ? whole - start : s);
        got = dev_copy(rk, slice, s);
        ck_assert_mem_eq(got, (const unsigned char *)rk->input + start, mine);
        free(got);
        ck_assert_ok(recap_plain_buffer_destroy(x)); /* the slice stands alone */
        ck_assert_uint_eq(pstats(rk).live_bytes, s);
        ck_assert_uint_eq(nstats(rk).live_slice_bytes, s);
        ck_assert_ok(rk->ops->all_gather(rk->whost, slice, &full));
        ck_assert_uint_eq(buffer_bytes(full), whole);
        got = dev_copy(rk, full, whole);
        ck_assert_mem_eq(got, rk->input, whole);
        free(got);
        ck_assert_ok(rk->ops->free_buffer(rk->whost, full));
        ck_assert_ok(rk->ops->free_buffer(rk->whost, slice));
        ck_assert_uint_eq(nstats(rk).live_slices, 0);
        rk->padded += s * (size_t)rk->nranks != whole;
        ck_assert_uint_eq(nstats(rk).padded_gathers, rk->padded);
    }
}

START_TEST(slices_pad_and_gather_back_exactly)
{
    rank_t rk[MAX_RANKS];
    int nranks = 1 + _i, r;
    unsigned char *input = malloc(slice_sizes[NSIZES - 1]);
    size_t i;

    NEEDS_DOUBLE();
    use_fake();
    for (i = 0; i < slice_sizes[NSIZES - 1]; i++)
        input[i] = (unsigned char)tu_rand();
    ranks_init(rk, nranks, NULL);
    for (r = 0; r < nranks; r++)
        rk[r].input = input;
    run_ranks(rk, nranks, slice_body);
    for (r = 0; r < nranks; r++) {
        ck_assert_uint_eq(nstats(&rk[r]).distributes, NSIZES);
        ck_assert_uint_eq(nstats(&rk[r]).gathers, NSIZES);
        /* No DtoD copy in the double: copies go through host memory (not on a GPU). */
        ck_assert_uint_gt(nstats(&rk[r]).staged_copies, 0);
    }
    ck_assert_uint_eq(fake_allgathers(), NSIZES * (size_t)nranks);
    ranks_free(rk, nranks);
    free(input);
}
END_TEST

START_TEST(foreign_and_misplaced_buffers_are_refused)
{
    rank_t rk[1];
    recap_plain_engine_h other, mem;
    recap_buffer_t x, y, slice, full = NULL;
    unsigned char bytes[64] = {1, 2, 3};

    NEEDS_DOUBLE();
    use_fake();
    ranks_init(rk, 1, NULL); /* device 0 */
    x = dev_buffer(rk, sizeof(bytes), 1, bytes);
    ck_assert_status(rk->ops->all_gather(rk->whost, x, &full), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "not a slice"));
    ck_assert_status(rk->ops->distribute(rk->whost, NULL, &slice), RECAP_ERR_INVALID_ARG);
    /* Host memory, and memory of another device than the communicator's: the wrapper's host
     * pointer stays the plain engine, so buffers of other engines reach it only by mistake. */
    ck_assert_ok(recap_plain_engine_create(RECAP_DEVICE_HOST, 0, &mem));
    ck_assert_ok(recap_plain_buffer_create(mem, 64, 1, &y));
    ck_assert_status(rk->ops->distribute(rk->whost, y, &slice), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "not CUDA device memory"));
    ck_assert_ok(recap_plain_buffer_destroy(y));
    ck_assert_ok(recap_plain_engine_destroy(mem));
    ck_assert_ok(recap_plain_engine_create(1, 0, &other));
    ck_assert_ok(recap_plain_buffer_create(other, 64, 1, &y));
    ck_assert_status(rk->ops->distribute(rk->whost, y, &slice), RECAP_ERR_WRONG_DEVICE);
    ck_assert_ok(recap_plain_buffer_destroy(y));
    ck_assert_ok(recap_plain_engine_destroy(other));
    ck_assert_uint_eq(pstats(rk).live_bytes, sizeof(bytes)); /* nothing left behind */
    /* A slice held (here, not freed) keeps the wrapper alive. */
    ck_assert_ok(rk->ops->distribute(rk->whost, x, &slice));
    ck_assert_status(recap_nccl_ops_destroy(rk->nccl), RECAP_ERR_STATE);
    ck_assert_ok(rk->ops->free_buffer(rk->whost, slice));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ranks_free(rk, 1);
}
END_TEST

/* ---------------------------------------------------------------- checkpoints */

static int64_t seed_base;

/* Megatron's per-rank seeding on an engine tracker: this rank's tensor-parallel rank. */
static void rank_rig(rank_t *rk, rr_rig_t *rig)
{
    recap_parallel_ranks_t ranks = {rk->rank, rk->nranks, 0, 1, 0, 1, 0, 1, 0, 1};

    rr_rig_init(rig, 0, seed_base);
    ck_assert_ok(recap_tracker_seed_parallel(rig->tracker, seed_base, &ranks));
}

/* One checkpointed dropout layer on x (n floats): the forward's output, what the engine keeps
 * across the forward (live bytes beyond the output once the engine dropped x) and the backward's
 * recomputed output. */
static void one_checkpoint(rank_t *rk, rr_rig_t *rig, int distribute, float **fwd_p,
                           uint64_t *stash_p, float **out_p)
{
    size_t bytes = rk->n * sizeof(float);
    recap_signature_h sig = rr_dropout_sig();
    recap_region_params_t p = rig->params;
    recap_buffer_t x, y, out;
    recap_checkpoint_h ck;
    recap_value_t v[6];
    uint64_t before = pstats(rk).live_bytes;

    p.ops = distribute ? rk->ops : rk->plain_ops;
    p.host = distribute ? rk->whost : (void *)rk->engine;
    p.flags = distribute ? RECAP_CHECKPOINT_DISTRIBUTE : 0;
    x = dev_buffer(rk, bytes, 1, rk->input);
    y = dev_buffer(rk, bytes, 0, NULL);
    rr_dropout_args(v, x, y, rk->n, 1.25f, 0.125f, rig->tracker);
    ck_assert_ok(recap_checkpoint_run(&p, sig, (recap_func_t)rr_dropout_fn, v, 6, &ck));
    *fwd_p = dev_copy(rk, y, bytes);
    ck_assert_ok(recap_plain_buffer_destroy(x)); /* the engine drops its whole input */
    *stash_p = pstats(rk).live_bytes - before - bytes;
    ck_assert_ok(recap_checkpoint_backward(ck, &out, 1));
    ck_assert_uint_eq(buffer_bytes(out), bytes);
    *out_p = dev_copy(rk, out, bytes);
    ck_assert_ok(recap_checkpoint_destroy(ck));
    ck_assert_ok(recap_plain_buffer_destroy(out));
    ck_assert_ok(recap_plain_buffer_destroy(y));
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_uint_eq(pstats(rk).live_bytes, before);
}

/* The same layer from the same RNG state, undistributed then distributed: forward and backward
 * agree bit for bit, and the distributed one kept only this rank's slice. */
static void checkpoint_body(rank_t *rk)
{
    size_t bytes = rk->n * sizeof(float);
    float *fwd_u, *out_u, *fwd_d, *out_d;
    recap_snapshot_h s0;
    rr_rig_t rig;

    rank_rig(rk, &rig);
    ck_assert_ok(recap_snapshot_create(&s0));
    ck_assert_ok(recap_snapshot_take(rig.tracker, s0));
    one_checkpoint(rk, &rig, 0, &fwd_u, &rk->stash_plain, &out_u);
    ck_assert_ok(recap_snapshot_restore(rig.tracker, s0));
    one_checkpoint(rk, &rig, 1, &fwd_d, &rk->stash_dist, &out_d);
    ck_assert_mem_eq(out_u, fwd_u, bytes);
    ck_assert_mem_eq(fwd_d, fwd_u, bytes);
    ck_assert_mem_eq(out_d, out_u, bytes);
    ck_assert_uint_eq(nstats(rk).distributes, 1);
    ck_assert_uint_eq(nstats(rk).gathers, 1);
    free(fwd_u);
    free(out_u);
    free(fwd_d);
    rk->result = out_d;
    ck_assert_ok(recap_snapshot_destroy(s0));
    rr_rig_free(&rig);
}

START_TEST(a_distributed_checkpoint_recomputes_like_an_undistributed_one)
{
    rank_t rk[2];
    size_t n, bytes, i;
    float *x0;
    int r;

    NEEDS_DOUBLE();
    use_fake();
    seed_base = 1 + (int64_t)tu_rand_below(1u << 30);
    /* _i 0: a whole that halves exactly (n * 4 a multiple of 2 * 16); 1: any size. */
    n = _i == 0 ? 8 * (1 + tu_rand_below(4000)) : 1 + tu_rand_below(30000);
    bytes = n * sizeof(float);
    x0 = malloc(bytes);
    for (i = 0; i < n; i++)
        x0[i] = (float)((double)(tu_rand() >> 11) / 9007199254740992.0 * 4.0 - 2.0);
    ranks_init(rk, 2, NULL);
    for (r = 0; r < 2; r++) {
        rk[r].n = n;
        rk[r].input = x0; /* the layer input is replicated across the tensor-parallel group */
    }
    run_ranks(rk, 2, checkpoint_body);
    for (r = 0; r < 2; r++) {
        ck_assert_uint_eq(rk[r].stash_plain, bytes);
        ck_assert_uint_eq(rk[r].stash_dist, slice_of(bytes, 2));
        if (_i == 0)
            ck_assert_uint_eq(2 * rk[r].stash_dist, rk[r].stash_plain); /* halved */
    }
    /* Distinct tensor-parallel seeds: the ranks' dropout masks differ. */
    ck_assert_int_ne(memcmp(rk[0].result, rk[1].result, bytes), 0);
    free(rk[0].result);
    free(rk[1].result);
    ranks_free(rk, 2);
    free(x0);
}
END_TEST

/* Per-rank seeding as the two-GPU test checks it: the data-parallel state draws the same on
 * both ranks, the model-parallel one differently, on each rank's device. */
static void seeding_body(rank_t *rk)
{
    recap_tracker_params_t tp = {0, NULL, rk->device, NULL};
    recap_parallel_ranks_t ranks = {rk->rank, rk->nranks, 0, 1, 0, 1, 0, 1, 0, 1};
    recap_fork_token_t tok;
    recap_tracker_h t;
    recap_generator_h g;
    recap_buffer_t b;
    uint32_t *w;
    void *d;

    ck_assert_ok(recap_tracker_create(&tp, &t));
    ck_assert_ok(recap_tracker_seed_parallel(t, seed_base, &ranks));
    ck_assert_ok(recap_tracker_generator(t, &g));
    b = dev_buffer(rk, 2 * rk->n * sizeof(uint32_t), 0, NULL);
    ck_assert_ok(recap_plain_buffer_data(b, &d));
    ck_assert_ok(recap_tracker_fork(t, RECAP_RNG_DATA_PARALLEL, &tok));
    ck_assert_ok(recap_generator_fill_u32(g, rk->stream, d, rk->n));
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok));
    ck_assert_ok(recap_generator_fill_u32(g, rk->stream, (uint32_t *)d + rk->n, rk->n));
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_stream_synchronize(rk->stream));
    w = dev_copy(rk, b, 2 * rk->n * sizeof(uint32_t));
    rk->result = w;
    ck_assert_ok(recap_plain_buffer_destroy(b));
    ck_assert_ok(recap_tracker_destroy(t));
}

START_TEST(per_rank_seeding_agrees_on_data_parallel_draws_only)
{
    rank_t rk[2];
    size_t n = 64 + tu_rand_below(4096);
    uint32_t *w0, *w1;
    int r;

    NEEDS_DOUBLE();
    use_fake();
    seed_base = 1 + (int64_t)tu_rand_below(1u << 30);
    ranks_init(rk, 2, NULL);
    for (r = 0; r < 2; r++)
        rk[r].n = n;
    run_ranks(rk, 2, seeding_body);
    w0 = rk[0].result;
    w1 = rk[1].result;
    ck_assert_mem_eq(w0, w1, n * sizeof(uint32_t));
    ck_assert_int_ne(memcmp(w0 + n, w1 + n, n * sizeof(uint32_t)), 0);
    free(w0);
    free(w1);
    ranks_free(rk, 2);
}
END_TEST

/* A host without saved-buffer operations: recap keeps the handles themselves, so the slice's
 * handle is its saved copy and is freed at the drop, not when recap lets go of it. */
static void nosave_body(rank_t *rk)
{
    float *fwd, *out;
    uint64_t stash;
    rr_rig_t rig;

    rank_rig(rk, &rig);
    one_checkpoint(rk, &rig, 1, &fwd, &stash, &out);
    ck_assert_uint_eq(stash, slice_of(rk->n * sizeof(float), rk->nranks));
    ck_assert_mem_eq(out, fwd, rk->n * sizeof(float));
    ck_assert_uint_eq(pstats(rk).saves, 0);
    free(fwd);
    free(out);
    rr_rig_free(&rig);
}

START_TEST(a_host_without_save_keeps_the_slice_until_the_drop)
{
    const recap_engine_ops_t *plain;
    recap_engine_ops_t ops;
    rank_t rk[2];
    float x[1001];
    int r;

    NEEDS_DOUBLE();
    use_fake();
    seed_base = 77;
    for (r = 0; r < 1001; r++)
        x[r] = (float)r / 7.0f;
    ck_assert_ok(recap_plain_engine_ops(&plain));
    ops = *plain;
    ops.save = NULL;
    ops.load = NULL;
    ops.drop = NULL;
    ranks_init(rk, 2, &ops);
    for (r = 0; r < 2; r++) {
        rk[r].n = 1001;
        rk[r].input = x;
    }
    run_ranks(rk, 2, nosave_body);
    ranks_free(rk, 2);
}
END_TEST

/* NCCL failures reach the caller with NCCL's text; a non-blocking communicator's ncclInProgress
 * is waited out. One rank, so a failed collective leaves no peer waiting. */
START_TEST(nccl_failures_are_reported)
{
    rank_t rk[1];
    recap_signature_h sig;
    recap_region_params_t p;
    recap_buffer_t x, y, out = NULL;
    recap_checkpoint_h ck;
    recap_value_t v[6];
    float in[40];
    rr_rig_t rig;
    int i;

    NEEDS_DOUBLE();
    use_fake();
    seed_base = 5;
    for (i = 0; i < 40; i++)
        in[i] = (float)i;
    ranks_init(rk, 1, NULL);
    rk->n = 40;
    rank_rig(rk, &rig);
    sig = rr_dropout_sig();
    p = rig.params;
    p.ops = rk->ops;
    p.host = rk->whost;
    p.flags = RECAP_CHECKPOINT_DISTRIBUTE;
    x = dev_buffer(rk, sizeof(in), 1, in);
    y = dev_buffer(rk, sizeof(in), 0, NULL);
    rr_dropout_args(v, x, y, 40, 1.0f, 0.0f, rig.tracker);
    ck_assert_ok(recap_checkpoint_run(&p, sig, (recap_func_t)rr_dropout_fn, v, 6, &ck));
    fake_fail_next(2 /* ncclSystemError */, 1);
    ck_assert_status(recap_checkpoint_backward(ck, &out, 1), RECAP_ERR_CUDA);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "ncclAllGather"));
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "fake system error"));
    ck_assert_uint_eq(pstats(rk).live_bytes, 2 * sizeof(in) + slice_of(sizeof(in), 1));
    fake_fail_next(5 /* ncclInvalidUsage */, 1);
    ck_assert_status(recap_checkpoint_backward(ck, &out, 1), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "fake invalid usage"));
    fake_in_progress_next(3);
    ck_assert_ok(recap_checkpoint_backward(ck, &out, 1));
    ck_assert_uint_eq(nstats(rk).gathers, 1);
    ck_assert_ok(recap_checkpoint_destroy(ck));
    ck_assert_ok(recap_plain_buffer_destroy(out));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ck_assert_ok(recap_plain_buffer_destroy(y));
    ck_assert_ok(recap_signature_destroy(sig));
    rr_rig_free(&rig);
    ranks_free(rk, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nccl");
    TCase *tc = tcase_create("nccl");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, missing_nccl_is_unsupported_and_named);
    tcase_add_test(tc, a_long_nccl_path_is_loaded_whole);
    tcase_add_test(tc, a_long_missing_nccl_path_is_named_whole_or_marked);
    tcase_add_test(tc, bad_arguments_are_refused);
    tcase_add_loop_test(tc, slices_pad_and_gather_back_exactly, 0, 3);
    tcase_add_test(tc, foreign_and_misplaced_buffers_are_refused);
    tcase_add_loop_test(tc, a_distributed_checkpoint_recomputes_like_an_undistributed_one, 0, 2);
    tcase_add_test(tc, per_rank_seeding_agrees_on_data_parallel_draws_only);
    tcase_add_test(tc, a_host_without_save_keeps_the_slice_until_the_drop);
    tcase_add_test(tc, nccl_failures_are_reported);
    suite_add_tcase(s, tc);
    /* Forked always: recap loads NCCL once per process, and the tests load different ones; a
     * failed assertion in a rank's thread ends the forked process cleanly. */
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    tu_rand_init();
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
