// SPDX-License-Identifier: Apache-2.0
// bench/fill_explore: where the bulk fill's last few percent go. Store paths and unit-to-thread
// mappings for the float32 fill of 1 GiB, each timed beside a memset of the same buffer in the
// same run (medians of event-timed runs after a warm-up), and each full variant checked word for
// word against recap_generator_fill_uniform with the same state. Store-only probes write an
// integer pattern (no conversion) with the same mapping, to separate the store path's ceiling
// from the Philox work. Prints a Markdown table.
//
// Mappings: "gs" is recap's grid stride (thread t takes units t, t + T, ... two per step);
// "chunk" gives each block one contiguous run of the buffer; "tma-block" and "tma-warp" compute
// a tile into shared memory and hand it to the bulk copy engine (cp.async.bulk, sm_90), one
// issuing thread per block or per warp, double-buffered.
#include <algorithm>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "recap.h"
#include "../tests/gpu/gpu_check.h"
#include "event_median.cuh"
#include "../src/kernels/fill_body.h"

enum { DATA_PHILOX, DATA_PATTERN, DATA_PK };
enum { ST_PLAIN, ST_CS };

struct P {
    uint64_t dst, nunits, seed, base;
};

// Round keys precomputed on the host and passed in the kernel parameters: the XORs read them
// from the constant bank, which frees the 20 registers the library's pinned keys take.
struct PK {
    P p;
    uint32_t k0[10], k1[10];
};

__device__ __forceinline__ uint4 unit_pk(const PK &pk, uint64_t q)
{
    uint64_t c = pk.p.base + (q >> 16);
    uint32_t x0 = (uint32_t)c, x1 = (uint32_t)(c >> 32), x2 = (uint32_t)(q & 0xffffu), x3 = 0;
#pragma unroll
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)RECAP_PHILOX_M0 * x0, p1 = (uint64_t)RECAP_PHILOX_M1 * x2;
        x0 = (uint32_t)(p1 >> 32) ^ x1 ^ pk.k0[r];
        x1 = (uint32_t)p1;
        x2 = (uint32_t)(p0 >> 32) ^ x3 ^ pk.k1[r];
        x3 = (uint32_t)p0;
    }
    float4 f = make_float4(recap_philox_uniform(x0), recap_philox_uniform(x1),
                           recap_philox_uniform(x2), recap_philox_uniform(x3));
    return *(uint4 *)&f;
}


template <int DATA> __device__ __forceinline__ uint4 unit(const recap__fill_keys_t &k, const PK &pk, uint64_t q)
{
    const P &p = pk.p;
    if (DATA == DATA_PK)
        return unit_pk(pk, q);
    if (DATA == DATA_PATTERN) {
        uint32_t x = (uint32_t)q;
        return make_uint4(x, x ^ 1u, x ^ 2u, x ^ 3u);
    }
    uint32_t w[4];
    recap__fill_philox(&k, p.base + (q >> 16), (uint32_t)(q & 0xffffu), w);
    float4 f = make_float4(recap_philox_uniform(w[0]), recap_philox_uniform(w[1]),
                           recap_philox_uniform(w[2]), recap_philox_uniform(w[3]));
    return *(uint4 *)&f;
}

template <int ST> __device__ __forceinline__ void put(const P &p, uint64_t q, uint4 v)
{
    if (ST == ST_CS)
        __stcs((uint4 *)(p.dst + 16 * q), v);
    else
        *(uint4 *)(p.dst + 16 * q) = v;
}

// recap's mapping: grid stride, two units per thread per step.
template <int DATA, int ST> __global__ void __launch_bounds__(1024, 2) k_gs(const __grid_constant__ PK pk)
{
    const P &p = pk.p;
    recap__fill_keys_t k;
    if (DATA != DATA_PK)
        recap__fill_keys(p.seed, &k);
    const uint64_t T = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t q = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; q < p.nunits; q += 2 * T) {
        uint64_t q2 = q + T;
        uint4 a = unit<DATA>(k, pk, q), b;
        if (q2 < p.nunits)
            b = unit<DATA>(k, pk, q2);
        put<ST>(p, q, a);
        if (q2 < p.nunits)
            put<ST>(p, q2, b);
    }
}

// Each block one contiguous run; inside it, block stride, two units per thread per step.
template <int DATA, int ST> __global__ void __launch_bounds__(1024, 2) k_chunk(const __grid_constant__ PK pk)
{
    const P &p = pk.p;
    recap__fill_keys_t k;
    if (DATA != DATA_PK)
        recap__fill_keys(p.seed, &k);
    const uint64_t per = (p.nunits + gridDim.x - 1) / gridDim.x;
    const uint64_t lo = blockIdx.x * per, hi = min(lo + per, p.nunits), B = blockDim.x;
    for (uint64_t q = lo + threadIdx.x; q < hi; q += 2 * B) {
        uint64_t q2 = q + B;
        uint4 a = unit<DATA>(k, pk, q), b;
        if (q2 < hi)
            b = unit<DATA>(k, pk, q2);
        put<ST>(p, q, a);
        if (q2 < hi)
            put<ST>(p, q2, b);
    }
}

// Grid stride, U units per thread per step, keys from the parameters.
template <int U> __global__ void __launch_bounds__(1024, 2) k_gs_pk(const __grid_constant__ PK pk)
{
    const uint64_t T = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t q = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; q < pk.p.nunits; q += U * T) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (q + u * T < pk.p.nunits)
                v[u] = unit_pk(pk, q + u * T);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (q + u * T < pk.p.nunits)
                __stcs((uint4 *)(pk.p.dst + 16 * (q + u * T)), v[u]);
    }
}

// Non-persistent: block b covers units [b U B, (b + 1) U B), thread t its units t + u B; the
// block scheduler hands out blocks in order, so the grid's writes advance through the buffer
// together (what a memset's grid does).
template <int DATA, int U> __global__ void k_np(const __grid_constant__ PK pk)
{
    const P &p = pk.p;
    recap__fill_keys_t k;
    if (DATA != DATA_PK)
        recap__fill_keys(p.seed, &k);
    const uint64_t q0 = (uint64_t)blockIdx.x * U * blockDim.x + threadIdx.x;
#pragma unroll
    for (int u = 0; u < U; u++) {
        uint64_t q = q0 + (uint64_t)u * blockDim.x;
        if (q < p.nunits)
            put<ST_CS>(p, q, unit<DATA>(k, pk, q));
    }
}

__device__ __forceinline__ void bulk_store(uint64_t gdst, const void *smem, uint32_t bytes)
{
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gdst), "r"(s),
                 "r"(bytes)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
__device__ __forceinline__ void bulk_wait_read_1() { asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Block tiles of 2 x blockDim units (whole tiles only: the bench size is a multiple), double
// buffered in dynamic shared memory; thread 0 issues each tile's bulk store.
template <int DATA> __global__ void k_tma_block(const __grid_constant__ PK pk)
{
    const P &p = pk.p;
    extern __shared__ uint4 tile[];
    recap__fill_keys_t k;
    if (DATA != DATA_PK)
        recap__fill_keys(p.seed, &k);
    const uint32_t B = blockDim.x, TU = 2 * B;
    const uint64_t ntiles = p.nunits / TU;
    int s = 0;
    for (uint64_t t = blockIdx.x; t < ntiles; t += gridDim.x, s ^= 1) {
        uint4 *buf = tile + s * TU;
        uint64_t q = t * TU + threadIdx.x;
        uint4 a = unit<DATA>(k, pk, q), b = unit<DATA>(k, pk, q + B);
        if (threadIdx.x == 0)
            bulk_wait_read_1(); // the store issued from this buffer two tiles ago has read it
        __syncthreads();
        buf[threadIdx.x] = a;
        buf[threadIdx.x + B] = b;
        fence_async_shared();
        __syncthreads();
        if (threadIdx.x == 0)
            bulk_store(p.dst + 16 * t * TU, buf, TU * 16);
    }
    if (threadIdx.x == 0)
        bulk_wait_all();
}

// Warp tiles of 32 x U units, double buffered; lane 0 issues each tile's bulk store.
template <int DATA, int U, int MINB> __global__ void __launch_bounds__(1024, MINB) k_tma_warp(const __grid_constant__ PK pk)
{
    const P &p = pk.p;
    extern __shared__ uint4 tile[];
    recap__fill_keys_t k;
    if (DATA != DATA_PK)
        recap__fill_keys(p.seed, &k);
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, TU = 32 * U;
    const uint64_t nwarps = (uint64_t)gridDim.x * (blockDim.x >> 5);
    const uint64_t ntiles = p.nunits / TU;
    uint4 *mine = tile + warp * 2 * TU;
    int s = 0;
    for (uint64_t t = (uint64_t)blockIdx.x * (blockDim.x >> 5) + warp; t < ntiles; t += nwarps, s ^= 1) {
        uint4 *buf = mine + s * TU;
        if (lane == 0)
            bulk_wait_read_1(); // the store issued from this buffer two tiles ago has read it
        __syncwarp();
#pragma unroll
        for (int u = 0; u < U; u++)
            buf[lane + 32 * u] = unit<DATA>(k, pk, t * TU + lane + 32 * u);
        fence_async_shared();
        __syncwarp();
        if (lane == 0)
            bulk_store(p.dst + 16 * t * TU, buf, TU * 16);
    }
    if (lane == 0)
        bulk_wait_all();
}


int main(int argc, char **argv)
{
    const size_t bytes = (size_t)1 << 30, n = bytes / 4;
    const int reps = argc > 1 ? atoi(argv[1]) : 31;
    cudaDeviceProp prop;
    CK(cudaSetDevice(0));
    CK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    void *buf;
    CK(cudaMalloc(&buf, bytes));
    std::vector<uint32_t> ref(n), got(n);

    // The reference: recap's library fill from state (99, 0).
    recap_generator_h g;
    CR(recap_generator_create(0, &g));
    CR(recap_generator_manual_seed(g, 99));
    CR(recap_generator_fill_uniform(g, NULL, (float *)buf, n));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(ref.data(), buf, bytes, cudaMemcpyDeviceToHost));
    P p = {(uint64_t)(uintptr_t)buf, n / 4, 99, 0};

    struct Row {
        const char *name;
        int full; // a full fill, checked against the reference
        double ms;
        int exact;
    };
    std::vector<Row> rows;
    double t_memset = median_ms([&] { CK(cudaMemsetAsync(buf, 0x5a, bytes)); }, reps);
    auto run = [&](const char *name, int full, auto launch) {
        if (full) {
            CR(recap_generator_manual_seed(g, 99)); // the library row draws from state (99, 0)
            CK(cudaMemset(buf, 0, bytes));
            launch();
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(got.data(), buf, bytes, cudaMemcpyDeviceToHost));
        }
        double ms = median_ms([&] { launch(); CK(cudaGetLastError()); }, reps);
        rows.push_back({name, full, ms, full ? memcmp(got.data(), ref.data(), bytes) == 0 : -1});
    };
    const int shm_block_1024 = 2 * 2 * 1024 * 16, shm_warp2 = 32 * 2 * 2 * 32 * 16,
              shm_warp4 = 32 * 2 * 4 * 32 * 16;
    CK(cudaFuncSetAttribute(k_tma_block<DATA_PHILOX>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm_block_1024));
    CK(cudaFuncSetAttribute(k_tma_block<DATA_PATTERN>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm_block_1024));
    CK(cudaFuncSetAttribute(k_tma_warp<DATA_PHILOX, 2, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm_warp2));
    CK(cudaFuncSetAttribute(k_tma_warp<DATA_PATTERN, 2, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm_warp2));
    CK(cudaFuncSetAttribute(k_tma_warp<DATA_PHILOX, 2, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm_warp2));
    CK(cudaFuncSetAttribute(k_tma_warp<DATA_PHILOX, 4, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm_warp4));

    PK pk;
    pk.p = p;
    {
        recap__fill_keys_t hk;
        recap__fill_keys(p.seed, &hk);
        memcpy(pk.k0, hk.k0, sizeof pk.k0);
        memcpy(pk.k1, hk.k1, sizeof pk.k1);
    }
    run("library: recap_generator_fill_uniform", 1, [&] { CR(recap_generator_fill_uniform(g, NULL, (float *)buf, n)); });
    run("gs, streaming stores (library body), 1024 x 2", 1, [&] { k_gs<DATA_PHILOX, ST_CS><<<2 * sms, 1024>>>(pk); });
    run("gs, plain stores, 1024 x 2", 1, [&] { k_gs<DATA_PHILOX, ST_PLAIN><<<2 * sms, 1024>>>(pk); });
    run("chunk, streaming stores, 1024 x 2", 1, [&] { k_chunk<DATA_PHILOX, ST_CS><<<2 * sms, 1024>>>(pk); });
    run("chunk, plain stores, 1024 x 2", 1, [&] { k_chunk<DATA_PHILOX, ST_PLAIN><<<2 * sms, 1024>>>(pk); });
    run("chunk, plain stores, 1024 x 8", 1, [&] { k_chunk<DATA_PHILOX, ST_PLAIN><<<8 * sms, 1024>>>(pk); });
    run("tma-block, 1024 x 2 (tile 32 KB)", 1, [&] { k_tma_block<DATA_PHILOX><<<2 * sms, 1024, shm_block_1024>>>(pk); });
    run("tma-block, 512 x 4 (tile 16 KB)", 1, [&] { k_tma_block<DATA_PHILOX><<<4 * sms, 512, shm_block_1024 / 2>>>(pk); });
    run("tma-warp, 2 units/lane (1 KB), 1024 x 2", 1, [&] { k_tma_warp<DATA_PHILOX, 2, 2><<<2 * sms, 1024, shm_warp2>>>(pk); });
    run("tma-warp, 4 units/lane (2 KB), 1024 x 1", 1, [&] { k_tma_warp<DATA_PHILOX, 4, 1><<<sms, 1024, shm_warp4>>>(pk); });
    run("gs, keys in parameters, 2 units/step, 1024 x 2", 1, [&] { k_gs_pk<2><<<2 * sms, 1024>>>(pk); });
    run("gs, keys in parameters, 4 units/step, 1024 x 2", 1, [&] { k_gs_pk<4><<<2 * sms, 1024>>>(pk); });
    run("gs, keys in parameters, 1 unit/step, 1024 x 2", 1, [&] { k_gs_pk<1><<<2 * sms, 1024>>>(pk); });
    run("tma-warp, 2 units/lane, 46 regs, 1024 x 2 (1 resident)", 1, [&] { k_tma_warp<DATA_PHILOX, 2, 1><<<2 * sms, 1024, shm_warp2>>>(pk); });
    CK(cudaFuncSetAttribute(k_tma_warp<DATA_PK, 2, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm_warp2));
    CK(cudaFuncSetAttribute(k_tma_warp<DATA_PK, 4, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm_warp4));
    CK(cudaFuncSetAttribute(k_tma_block<DATA_PK>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm_block_1024));
    run("tma-block, keys in parameters, 1024 x 2", 1, [&] { k_tma_block<DATA_PK><<<2 * sms, 1024, shm_block_1024>>>(pk); });
    run("tma-warp, keys in parameters, 2 units/lane, 1024 x 2", 1, [&] { k_tma_warp<DATA_PK, 2, 2><<<2 * sms, 1024, shm_warp2>>>(pk); });
    run("tma-warp, keys in parameters, 4 units/lane, 1024 x 2", 1, [&] { k_tma_warp<DATA_PK, 4, 2><<<2 * sms, 1024, shm_warp4>>>(pk); });
    const uint64_t units = n / 4;
    auto npgrid = [&](int u, int b) { return (unsigned)((units + (uint64_t)u * b - 1) / ((uint64_t)u * b)); };
    run("np, keys in parameters, 4 units/thread, 256", 1, [&] { k_np<DATA_PK, 4><<<npgrid(4, 256), 256>>>(pk); });
    run("np, keys in parameters, 16 units/thread, 256", 1, [&] { k_np<DATA_PK, 16><<<npgrid(16, 256), 256>>>(pk); });
    run("np, keys in parameters, 8 units/thread, 512", 1, [&] { k_np<DATA_PK, 8><<<npgrid(8, 512), 512>>>(pk); });
    run("np, keys in parameters, 4 units/thread, 1024", 1, [&] { k_np<DATA_PK, 4><<<npgrid(4, 1024), 1024>>>(pk); });
    run("np, keys in parameters, 1 unit/thread, 256", 1, [&] { k_np<DATA_PK, 1><<<npgrid(1, 256), 256>>>(pk); });
    run("gs, keys in parameters, 1 unit/step, 1024 x 1", 1, [&] { k_gs_pk<1><<<sms, 1024>>>(pk); });
    run("gs, keys in parameters, 1 unit/step, 512 x 4", 1, [&] { k_gs_pk<1><<<4 * sms, 512>>>(pk); });
    run("gs, keys in parameters, 1 unit/step, 256 x 8", 1, [&] { k_gs_pk<1><<<8 * sms, 256>>>(pk); });
    run("gs, keys in parameters, 1 unit/step, 1024 x 4 (2 waves)", 1, [&] { k_gs_pk<1><<<4 * sms, 1024>>>(pk); });
    run("gs, keys in parameters, 1 unit/step, 1024 x 16 (8 waves)", 1, [&] { k_gs_pk<1><<<16 * sms, 1024>>>(pk); });
    run("store only: np, 4 units/thread, 256", 0, [&] { k_np<DATA_PATTERN, 4><<<npgrid(4, 256), 256>>>(pk); });
    run("store only: np, 16 units/thread, 256", 0, [&] { k_np<DATA_PATTERN, 16><<<npgrid(16, 256), 256>>>(pk); });
    run("store only: np, 1 unit/thread, 256", 0, [&] { k_np<DATA_PATTERN, 1><<<npgrid(1, 256), 256>>>(pk); });
    run("store only: gs, streaming, 1024 x 2", 0, [&] { k_gs<DATA_PATTERN, ST_CS><<<2 * sms, 1024>>>(pk); });
    run("store only: gs, plain, 1024 x 2", 0, [&] { k_gs<DATA_PATTERN, ST_PLAIN><<<2 * sms, 1024>>>(pk); });
    run("store only: chunk, plain, 1024 x 2", 0, [&] { k_chunk<DATA_PATTERN, ST_PLAIN><<<2 * sms, 1024>>>(pk); });
    run("store only: tma-block, 1024 x 2", 0, [&] { k_tma_block<DATA_PATTERN><<<2 * sms, 1024, shm_block_1024>>>(pk); });
    run("store only: tma-warp 2, 1024 x 2", 0, [&] { k_tma_warp<DATA_PATTERN, 2, 2><<<2 * sms, 1024, shm_warp2>>>(pk); });
    double t_memset2 = median_ms([&] { CK(cudaMemsetAsync(buf, 0x5a, bytes)); }, reps);

    printf("device: %s, %d SMs; 1 GiB float32; medians of %d event-timed runs; memset %.4f / %.4f ms "
           "(%.0f / %.0f GB/s)\n\n", prop.name, sms, reps, t_memset, t_memset2, bytes / t_memset / 1e6,
           bytes / t_memset2 / 1e6);
    printf("| variant | ms | GB/s | x memset | bit-exact |\n|---|---|---|---|---|\n");
    for (auto &r : rows)
        printf("| %s | %.4f | %.0f | %.3f | %s |\n", r.name, r.ms, bytes / r.ms / 1e6, t_memset / r.ms,
               r.exact < 0 ? "-" : r.exact ? "yes" : "NO");
    recap_generator_destroy(g);
    CK(cudaFree(buf));
    return 0;
}
