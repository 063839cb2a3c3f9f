// SPDX-License-Identifier: Apache-2.0
// Two ranks, two processes, two GPUs, one NCCL communicator: the real counterpart of
// tests/nccl/test_nccl.c (which runs on the CUDA test double with a fake NCCL). Run it with
// tests/gpu/nccl_two_ranks.sh on a machine with two GPUs (it builds this file and exports
// NCCL_NVLS_ENABLE=0: no NVLink multicast).
//
// The parent forks one process per GPU before touching CUDA; rank 0 makes the NCCL unique id
// and hands it to rank 1 through a pipe; each rank then, on its own GPU and its own stream:
//   1. per-rank seeding (Megatron's model_parallel_cuda_manual_seed through
//      recap_tracker_seed_parallel, tp_rank = rank): the data-parallel state draws the same words
//      on both ranks, the model-parallel state different ones, and each equals recap's host
//      generator with the seed Megatron derives (the draws are exchanged with ncclAllGather);
//   2. a checkpointed block y = dropout(gelu(a x + b)) (its mask from the model-parallel state),
//      run undistributed and with RECAP_CHECKPOINT_DISTRIBUTE (recap_nccl_ops_create over the
//      communicator) from the same RNG state: the recomputed outputs equal the forward's and the
//      input gradients dx = dy * dy/dx of the two runs are bit-identical, for a whole that
//      halves exactly and for one that needs padding;
//   3. the saved-input memory per rank, measured twice (the plain engine's live bytes and the
//      device's free memory, cudaMemGetInfo): halved with distribution.
// Exit status 0 when both ranks pass, 1 when a check fails, 2 on a setup error.
#include <cuda_runtime.h>
#include <nccl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "gpu_check.h"
#include "recap.h"

#define NC(x)                                                                                 \
    do {                                                                                      \
        ncclResult_t r_ = (x);                                                                \
        if (r_ != ncclSuccess) {                                                              \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); \
            exit(2);                                                                          \
        }                                                                                     \
    } while (0)

static int g_rank, g_failed;

#define EXPECT(cond, ...)                                                                     \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "rank %d FAIL %s:%d: %s: ", g_rank, __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
            g_failed = 1;                                                                     \
        }                                                                                     \
    } while (0)

static const int64_t kSeed = 1234; // Megatron passes seed + 100 * pp_rank: one stage here
static const float kDrop = 0.1f;

// ---------------------------------------------------------------- 1. per-rank seeding

static void draw(recap_tracker_h t, const char *name, uint32_t *d, size_t n, cudaStream_t s)
{
    recap_generator_h g;
    recap_fork_token_t tok;

    CR(recap_tracker_generator(t, &g));
    CR(recap_tracker_fork(t, name, &tok));
    CR(recap_generator_fill_u32(g, (recap_stream_t)s, d, n));
    CR(recap_tracker_unfork(t, tok));
}

static std::vector<uint32_t> host_draw(uint64_t seed, size_t n)
{
    std::vector<uint32_t> w(n);
    recap_generator_h g;

    CR(recap_generator_create(RECAP_DEVICE_HOST, &g));
    CR(recap_generator_manual_seed(g, seed));
    CR(recap_generator_fill_u32(g, NULL, w.data(), n));
    CR(recap_generator_destroy(g));
    return w;
}

static void check_seeding(ncclComm_t comm, cudaStream_t s, recap_tracker_h t)
{
    const size_t n = 1 << 16;
    uint32_t *mine, *all;
    std::vector<uint32_t> h(4 * n);

    CK(cudaMalloc(&mine, 2 * n * 4));
    CK(cudaMalloc(&all, 4 * n * 4));
    draw(t, RECAP_RNG_DATA_PARALLEL, mine, n, s);
    draw(t, RECAP_RNG_MODEL_PARALLEL, mine + n, n, s);
    NC(ncclAllGather(mine, all, 2 * n, ncclUint32, comm, s));
    CK(cudaMemcpyAsync(h.data(), all, 4 * n * 4, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    // rank r's words: h[2 n r .. 2 n r + n) data parallel, then n model parallel.
    const uint32_t *dp0 = &h[0], *mp0 = &h[n], *dp1 = &h[2 * n], *mp1 = &h[3 * n];
    EXPECT(memcmp(dp0, dp1, n * 4) == 0, "data-parallel draws differ across ranks");
    EXPECT(memcmp(mp0, mp1, n * 4) != 0, "tensor-parallel draws equal across ranks");
    std::vector<uint32_t> ref_dp = host_draw(kSeed, n), ref_mp0 = host_draw(kSeed + 2718, n),
                          ref_mp1 = host_draw(kSeed + 2718 + 1, n);
    EXPECT(memcmp(dp0, ref_dp.data(), n * 4) == 0, "data-parallel != host generator(seed)");
    EXPECT(memcmp(mp0, ref_mp0.data(), n * 4) == 0, "rank 0 model-parallel != seed + 2718");
    EXPECT(memcmp(mp1, ref_mp1.data(), n * 4) == 0, "rank 1 model-parallel != seed + 2719");
    CK(cudaFree(mine));
    CK(cudaFree(all));
    printf("rank %d: seeding: data-parallel draws equal, tensor-parallel distinct, both equal "
           "the host generator (%zu words)\n", g_rank, n);
}

// ---------------------------------------------------------------- 2. the checkpointed block

__global__ void block_kernel(const float *x, float *y, float *jac, uint64_t n, float a, float b,
                             float p)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        float h = a * x[i] + b, sg = 1.0f / (1.0f + expf(-1.702f * h));
        float gelu = h * sg, dgelu = sg + 1.702f * h * sg * (1.0f - sg);
        float keep = jac[i] >= p ? 1.0f / (1.0f - p) : 0.0f; // jac holds the uniforms on entry
        y[i] = gelu * keep;
        jac[i] = a * dgelu * keep;
    }
}

__global__ void grad_kernel(const float *jac, float *dx, uint64_t n)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        dx[i] = (1.0f + 0.001f * (float)(i % 1000)) * jac[i]; // dy * dy/dx
}

// The recorded function (libffi calls it): the mask's uniforms from the model-parallel state.
// No error exits here (recap is on the stack): a failed draw leaves NaNs the checks catch.
extern "C" void block_fn(const float *x, float *y, float *jac, uint64_t n, float a, float b,
                         recap_tracker_h t, recap_stream_t s)
{
    recap_generator_h g;
    recap_fork_token_t tok;

    if (recap_tracker_generator(t, &g) != RECAP_OK ||
        recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok) != RECAP_OK)
        return;
    if (recap_generator_fill_uniform(g, s, jac, n) != RECAP_OK)
        cudaMemsetAsync(jac, 0xff, n * 4, (cudaStream_t)s);
    recap_tracker_unfork(t, tok);
    block_kernel<<<264, 256, 0, (cudaStream_t)s>>>(x, y, jac, n, a, b, kDrop);
}

struct run_result {
    std::vector<float> y_fwd, y_re, dx;
    uint64_t saved_host_bytes;   // the plain engine's live bytes kept across the forward
    long long saved_device_bytes; // the device's free memory lost across the forward
};

static size_t device_used(void)
{
    size_t free_b, total;

    CK(cudaDeviceSynchronize());
    CK(cudaMemGetInfo(&free_b, &total));
    return total - free_b;
}

static run_result run_block(recap_plain_engine_h engine, const recap_engine_ops_t *ops,
                            void *ops_host, uint32_t flags, recap_tracker_h t, recap_stream_t s,
                            const std::vector<float> &x0)
{
    static const recap_type_t types[] = {RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT,
                                         RECAP_TYPE_BUFFER_OUT, RECAP_TYPE_UINT64,
                                         RECAP_TYPE_FLOAT, RECAP_TYPE_FLOAT, RECAP_TYPE_POINTER,
                                         RECAP_TYPE_POINTER};
    const size_t n = x0.size(), bytes = n * 4;
    recap_region_params_t p = {ops, ops_host, t, NULL, flags};
    recap_signature_h sig;
    recap_buffer_t x, y, jac, outs[2];
    recap_checkpoint_h ck;
    recap_value_t v[8];
    recap_plain_stats_t st0, st1;
    run_result r;
    void *xd, *yd, *jd;
    float *dx;

    CR(recap_signature_create(RECAP_TYPE_VOID, types, 8, &sig));
    CR(recap_plain_engine_stats(engine, &st0));
    size_t used0 = device_used();
    CR(recap_plain_buffer_create(engine, bytes, 1, &x));
    CR(recap_plain_buffer_create(engine, bytes, 0, &y));
    CR(recap_plain_buffer_create(engine, bytes, 0, &jac));
    CR(recap_plain_buffer_data(x, &xd));
    CR(recap_plain_buffer_data(y, &yd));
    CR(recap_plain_buffer_data(jac, &jd));
    CK(cudaMemcpy(xd, x0.data(), bytes, cudaMemcpyHostToDevice));
    v[0].buf = x, v[1].buf = y, v[2].buf = jac, v[3].u64 = n, v[4].f32 = 1.25f, v[5].f32 = 0.125f;
    v[6].ptr = t, v[7].ptr = s;
    CR(recap_checkpoint_run(&p, sig, (recap_func_t)block_fn, v, 8, &ck));
    r.y_fwd.resize(n);
    CK(cudaMemcpyAsync(r.y_fwd.data(), yd, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)s));
    CR(recap_stream_synchronize(s));
    // the engine drops its whole input: recap keeps what it saved
    CR(recap_plain_buffer_destroy(x));
    CR(recap_plain_engine_stats(engine, &st1));
    r.saved_host_bytes = st1.live_bytes - st0.live_bytes - 2 * bytes; /* beyond y and jac */
    r.saved_device_bytes = (long long)device_used() - (long long)used0 - 2 * (long long)bytes;
    CR(recap_checkpoint_backward(ck, outs, 2)); // y, jac recomputed
    r.y_re.resize(n);
    r.dx.resize(n);
    CR(recap_plain_buffer_data(outs[0], &yd));
    CR(recap_plain_buffer_data(outs[1], &jd));
    CK(cudaMalloc((void **)&dx, bytes));
    grad_kernel<<<264, 256, 0, (cudaStream_t)s>>>((const float *)jd, dx, n);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(r.y_re.data(), yd, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)s));
    CK(cudaMemcpyAsync(r.dx.data(), dx, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)s));
    CR(recap_stream_synchronize(s));
    CK(cudaFree(dx));
    CR(recap_checkpoint_destroy(ck));
    CR(recap_plain_buffer_destroy(outs[0]));
    CR(recap_plain_buffer_destroy(outs[1]));
    CR(recap_plain_buffer_destroy(y));
    CR(recap_plain_buffer_destroy(jac));
    CR(recap_signature_destroy(sig));
    return r;
}

static int all_finite(const std::vector<float> &v)
{
    for (float f : v)
        if (!isfinite(f))
            return 0;
    return 1;
}

static void check_block(ncclComm_t comm, recap_stream_t s, recap_tracker_h t, size_t n,
                        int measure)
{
    const recap_nccl_buffer_ops_t *bops;
    const recap_engine_ops_t *plain_ops, *ops;
    recap_plain_engine_h engine;
    recap_nccl_h nccl;
    recap_snapshot_h snap;
    void *whost;
    std::vector<float> x0(n);

    // The layer input, replicated across the tensor-parallel group (same values on each rank).
    for (size_t i = 0; i < n; i++)
        x0[i] = (float)((i * 2654435761u) % 4001) / 1000.0f - 2.0f;
    CR(recap_plain_engine_create(g_rank, 0, &engine));
    CR(recap_plain_engine_ops(&plain_ops));
    CR(recap_nccl_plain_buffer_ops(&bops));
    recap_nccl_params_t np = {(void *)comm, g_rank, 2, s, plain_ops, engine, bops};
    CR(recap_nccl_ops_create(&np, &nccl));
    CR(recap_nccl_engine_ops(nccl, &ops, &whost));
    CR(recap_snapshot_create(&snap));
    CR(recap_snapshot_take(t, snap));
    run_result u = run_block(engine, plain_ops, engine, 0, t, s, x0);
    CR(recap_snapshot_restore(t, snap));
    run_result d = run_block(engine, ops, whost, RECAP_CHECKPOINT_DISTRIBUTE, t, s, x0);
    // recap.h's slicing: ceil(T / 2) rounded up to RECAP_NCCL_SLICE_ALIGN.
    const size_t bytes = n * 4, a = RECAP_NCCL_SLICE_ALIGN;
    const size_t slice = ((bytes + 1) / 2 + a - 1) / a * a;

    EXPECT(all_finite(u.y_fwd) && all_finite(u.dx), "NaN/inf in the undistributed run");
    EXPECT(memcmp(u.y_re.data(), u.y_fwd.data(), bytes) == 0, "undistributed recompute != forward");
    EXPECT(memcmp(d.y_fwd.data(), u.y_fwd.data(), bytes) == 0, "distributed forward != undistributed");
    EXPECT(memcmp(d.y_re.data(), d.y_fwd.data(), bytes) == 0, "distributed recompute != forward");
    EXPECT(memcmp(d.dx.data(), u.dx.data(), bytes) == 0, "gradients differ (n = %zu)", n);
    EXPECT(u.saved_host_bytes == bytes, "undistributed keeps %llu bytes, %zu expected",
           (unsigned long long)u.saved_host_bytes, bytes);
    EXPECT(d.saved_host_bytes == slice, "distributed keeps %llu bytes, %zu expected",
           (unsigned long long)d.saved_host_bytes, slice);
    if (measure) {
        // Device memory comes in 2 MiB pages: allow one page either way.
        long long half = u.saved_device_bytes / 2, slack = 2 << 20;
        EXPECT(2 * slice == bytes, "the measured size must halve exactly");
        EXPECT(llabs(u.saved_device_bytes - (long long)bytes) <= slack,
               "undistributed device bytes %lld, %zu expected", u.saved_device_bytes, bytes);
        EXPECT(llabs(d.saved_device_bytes - half) <= slack,
               "distributed device bytes %lld, half of %lld expected", d.saved_device_bytes,
               u.saved_device_bytes);
    }
    recap_nccl_stats_t ns;
    CR(recap_nccl_stats(nccl, &ns));
    EXPECT(ns.distributes == 1 && ns.gathers == 1 && ns.live_slices == 0 && ns.live_saved == 0,
           "nccl stats: %llu distributes, %llu gathers, %llu live slices",
           (unsigned long long)ns.distributes, (unsigned long long)ns.gathers,
           (unsigned long long)ns.live_slices);
    EXPECT(ns.staged_copies == 0, "copies staged through host memory on a real driver");
    printf("rank %d: checkpoint n=%zu (%s): gradients %s; saved input per rank: plain engine %llu "
           "-> %llu bytes, device %lld -> %lld bytes; %llu padded gathers\n",
           g_rank, n, 2 * slice != bytes ? "padded" : "halves exactly",
           memcmp(d.dx.data(), u.dx.data(), bytes) == 0 ? "bit-identical" : "DIFFER",
           (unsigned long long)u.saved_host_bytes, (unsigned long long)d.saved_host_bytes,
           u.saved_device_bytes, d.saved_device_bytes, (unsigned long long)ns.padded_gathers);
    CR(recap_snapshot_destroy(snap));
    CR(recap_nccl_ops_destroy(nccl));
    CR(recap_plain_engine_destroy(engine));
}

// ---------------------------------------------------------------- the ranks

static int rank_main(int rank, int fd_read, int fd_write)
{
    ncclUniqueId id;
    ncclComm_t comm;
    int count = 0, version = 0;
    recap_stream_t s;
    recap_tracker_h t;

    g_rank = rank;
    CK(cudaGetDeviceCount(&count));
    if (count < 2) {
        fprintf(stderr, "rank %d: %d GPU(s); this test needs 2\n", rank, count);
        return 2;
    }
    CK(cudaSetDevice(rank));
    if (rank == 0) {
        NC(ncclGetUniqueId(&id));
        if (write(fd_write, &id, sizeof(id)) != (ssize_t)sizeof(id))
            return 2;
    } else if (read(fd_read, &id, sizeof(id)) != (ssize_t)sizeof(id)) {
        return 2;
    }
    NC(ncclCommInitRank(&comm, 2, id, rank));
    CR(recap_nccl_version(&version));
    printf("rank %d: GPU %d, NCCL %d (recap uses the process's), NCCL_NVLS_ENABLE=%s\n", rank,
           rank, version, getenv("NCCL_NVLS_ENABLE"));
    CR(recap_stream_create(rank, &s)); // this rank's own stream
    recap_tracker_params_t tp = {0, NULL, rank, NULL};
    recap_parallel_ranks_t ranks = {rank, 2, 0, 1, 0, 1, 0, 1, 0, 1};
    CR(recap_tracker_create(&tp, &t));
    CR(recap_tracker_seed_parallel(t, kSeed, &ranks));
    check_seeding(comm, (cudaStream_t)s, t);
    check_block(comm, s, t, (size_t)16 << 20, 1); // 64 MiB: halves exactly; memory measured
    check_block(comm, s, t, 1000003, 0);          // 4000012 bytes: the last slice padded
    CR(recap_tracker_destroy(t));
    CR(recap_stream_destroy(s));
    NC(ncclCommDestroy(comm));
    printf("rank %d: %s\n", rank, g_failed ? "FAILED" : "passed");
    return g_failed;
}

int main(void)
{
    int fds[2], status[2] = {2, 2}, worst = 0;
    pid_t pid[2];

    setenv("NCCL_NVLS_ENABLE", "0", 1); // NVLink multicast stays off (the launcher exports it too)
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pipe(fds) != 0) {
        perror("pipe");
        return 2;
    }
    // No CUDA before the fork: a CUDA context does not survive into a child.
    for (int r = 0; r < 2; r++) {
        pid[r] = fork();
        if (pid[r] < 0) {
            perror("fork");
            return 2;
        }
        if (pid[r] == 0)
            _exit(rank_main(r, fds[0], fds[1]));
    }
    close(fds[0]);
    close(fds[1]);
    for (int r = 0; r < 2; r++) {
        int st = 0;

        if (waitpid(pid[r], &st, 0) == pid[r])
            status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 2;
        if (status[r] > worst)
            worst = status[r];
    }
    printf("nccl_two_ranks: rank 0 %s, rank 1 %s\n", status[0] ? "FAILED" : "passed",
           status[1] ? "FAILED" : "passed");
    return worst;
}
