// SPDX-License-Identifier: Apache-2.0
// bench/fill: recap's device fill of 1 GiB of uniform float32 against curandGenerateUniform
// (PHILOX4_32_10) and against the device's write bandwidth (cudaMemsetAsync of the same buffer),
// in one run: medians of event-timed repetitions after a warm-up. Also times launch variants of
// the same kernel body (threads per block x blocks per SM) that chose recap's launch shape, and
// two ceiling probes (the store pattern alone, the Philox alone).
// Prints a Markdown table; the summary line goes last.
#include <algorithm>
#include <cuda_runtime.h>
#include <curand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string>
#include <vector>

#include "recap.h"
#include "../tests/gpu/gpu_check.h"
#include "event_median.cuh"
#include "../src/kernels/fill_body.h"
#include "fill_probes.cuh"


__global__ void variant_f32(const __grid_constant__ recap__fill_params_t p)
{
    recap__fill_f32_thread(&p, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
                          (uint64_t)gridDim.x * blockDim.x);
}

// The library's eager kernel exactly (src/kernels/fill.cu: the same launch bounds), for the
// blocks-per-SM rounds below.
__global__ void __launch_bounds__(1024, 2) library_f32(const __grid_constant__ recap__fill_params_t p)
{
    recap__fill_f32_thread(&p, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
                          (uint64_t)gridDim.x * blockDim.x);
}


int main(int argc, char **argv)
{
    const size_t bytes = (size_t)1 << 30, n = bytes / 4;
    const int reps = argc > 1 ? atoi(argv[1]) : 31;
    float *buf;
    cudaDeviceProp prop;
    CK(cudaSetDevice(0));
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaMalloc(&buf, bytes));

    recap_generator_h g;
    if (recap_generator_create(0, &g) != RECAP_OK) {
        fprintf(stderr, "recap_generator_create: %s\n", recap_last_error());
        return 2;
    }
    curandGenerator_t cg;
    if (curandCreateGenerator(&cg, CURAND_RNG_PSEUDO_PHILOX4_32_10) != CURAND_STATUS_SUCCESS)
        return 2;
    curandSetPseudoRandomGeneratorSeed(cg, 1234);

    double t_memset = median_ms([&] { CK(cudaMemsetAsync(buf, 0x5a, bytes)); }, reps);
    double t_recap = median_ms([&] {
        if (recap_generator_fill_uniform(g, NULL, buf, n) != RECAP_OK) {
            fprintf(stderr, "fill: %s\n", recap_last_error());
            exit(2);
        }
    }, reps);
    double t_curand = median_ms([&] {
        if (curandGenerateUniform(cg, buf, n) != CURAND_STATUS_SUCCESS)
            exit(2);
    }, reps);
    // Second memset pass: the spread between the two is the noise floor of this run.
    double t_memset2 = median_ms([&] { CK(cudaMemsetAsync(buf, 0x5a, bytes)); }, reps);

    printf("device: %s, %d SMs; buffer 1 GiB float32; medians of %d event-timed runs\n\n",
           prop.name, prop.multiProcessorCount, reps);
    printf("| launch variant (threads x blocks/SM) | ms | GB/s |\n|---|---|---|\n");
    const int threads[] = {256, 512, 1024};
    const int per_sm[] = {1, 2, 4, 8, 0};
    for (int t : threads)
        for (int b : per_sm) {
            recap__fill_params_t p = {};
            p.dst = (uint64_t)(uintptr_t)buf;
            p.n = n;
            p.philox.seed = 99;
            recap__fill_keys(99, &p.keys);
            uint64_t units = (n + 3) / 4;
            unsigned grid = b ? (unsigned)(prop.multiProcessorCount * b)
                              : (unsigned)((units + t - 1) / t);
            double ms = median_ms([&] { variant_f32<<<grid, t>>>(p); CK(cudaGetLastError()); }, reps);
            printf("| %d x %s | %.4f | %.0f |\n", t, b ? std::to_string(b).c_str() : "one unit per thread", ms,
                   bytes / ms / 1e6);
        }

    // Ceiling probes: the fill's grid-stride store pattern with no Philox, and its Philox with no
    // stores (512 threads x 4 blocks per SM).
    unsigned pgrid = prop.multiProcessorCount * 4;
    uint64_t pdst = (uint64_t)(uintptr_t)buf;
    double t_store = median_ms([&] { fill_probe<0, true><<<pgrid, 512>>>(pdst, n, 7, 0); CK(cudaGetLastError()); }, reps);
    double t_philox = median_ms([&] { fill_probe<2, true><<<pgrid, 512>>>(pdst, n, 7, 0); CK(cudaGetLastError()); }, reps);

    double bw_memset = bytes / t_memset / 1e6, bw_recap = bytes / t_recap / 1e6,
           bw_curand = bytes / t_curand / 1e6, bw_memset2 = bytes / t_memset2 / 1e6;
    printf("\n| fill of 1 GiB float32 | ms | GB/s | recap / this |\n|---|---|---|---|\n");
    printf("| recap_generator_fill_uniform | %.4f | %.0f | 1.00 |\n", t_recap, bw_recap);
    printf("| curandGenerateUniform (PHILOX4_32_10) | %.4f | %.0f | %.3f |\n", t_curand, bw_curand,
           bw_recap / bw_curand);
    printf("| cudaMemsetAsync (write ceiling) | %.4f | %.0f | %.3f |\n", t_memset, bw_memset,
           bw_recap / bw_memset);
    printf("| cudaMemsetAsync, second pass (noise) | %.4f | %.0f | %.3f |\n", t_memset2, bw_memset2,
           bw_recap / bw_memset2);
    printf("| probe: same store pattern, no Philox | %.4f | %.0f | %.3f |\n", t_store,
           bytes / t_store / 1e6, t_store / t_recap);
    printf("| probe: same Philox, no stores | %.4f | (%.0f) | %.3f |\n", t_philox,
           bytes / t_philox / 1e6, t_philox / t_recap);

    // Back to back: 10 calls per timed sample, so the host's cost of each call (recap's checks
    // and launch, cuRAND's, the memset's) overlaps the device work; and recap's fill captured
    // in a graph and replayed (the captured kernel, reading its state from device memory).
    recap_stream_t cs;
    recap_graph_t graph;
    recap_graph_exec_t exec;
    CR(recap_stream_create(0, &cs));
    CR(recap_stream_begin_capture(cs, RECAP_CAPTURE_GLOBAL));
    CR(recap_generator_fill_uniform(g, cs, buf, n));
    CR(recap_stream_end_capture(cs, &graph));
    CR(recap_graph_instantiate(graph, &exec));
    const int bb = 10;
    double b_memset = median_ms([&] { CK(cudaMemsetAsync(buf, 0x5a, bytes)); }, reps, bb);
    double b_recap = median_ms([&] { CR(recap_generator_fill_uniform(g, NULL, buf, n)); }, reps, bb);
    double b_curand = median_ms([&] {
        if (curandGenerateUniform(cg, buf, n) != CURAND_STATUS_SUCCESS)
            exit(2);
    }, reps, bb);
    double b_graph = median_ms([&] { CR(recap_graph_launch(exec, NULL)); }, reps, bb);
    printf("\n| back to back (%d calls per sample) | ms per call | GB/s | recap / this |\n|---|---|---|---|\n", bb);
    printf("| recap_generator_fill_uniform | %.4f | %.0f | 1.00 |\n", b_recap, bytes / b_recap / 1e6);
    printf("| recap fill captured in a graph, replayed | %.4f | %.0f | %.3f |\n", b_graph,
           bytes / b_graph / 1e6, b_graph / b_recap);
    printf("| curandGenerateUniform (PHILOX4_32_10) | %.4f | %.0f | %.3f |\n", b_curand,
           bytes / b_curand / 1e6, b_curand / b_recap);
    printf("| cudaMemsetAsync (write ceiling) | %.4f | %.0f | %.3f |\n", b_memset,
           bytes / b_memset / 1e6, b_memset / b_recap);
    CR(recap_graph_exec_destroy(exec));
    CR(recap_graph_destroy(graph));
    CR(recap_stream_destroy(cs));

    // Blocks per SM for the library's eager kernel (1024 threads, 2 resident per SM): rounds
    // alternate between two 1 GiB buffers (physical placement moves the figure between runs),
    // each row against the memset of its own round.
    float *buf2;
    CK(cudaMalloc(&buf2, bytes));
    const int shapes[] = {2, 4, 6, 8, 12, 16};
    printf("\n| library kernel, blocks per SM | round 1 | round 2 (other buffer) | round 3 | round 4 (other buffer) |\n|---|---|---|---|---|\n");
    double ratio[4][6];
    for (int r = 0; r < 4; r++) {
        float *b = r % 2 ? buf2 : buf;
        recap__fill_params_t p = {};
        p.dst = (uint64_t)(uintptr_t)b;
        p.n = n;
        p.philox.seed = 99;
        recap__fill_keys(99, &p.keys);
        double m = median_ms([&] { CK(cudaMemsetAsync(b, 0x5a, bytes)); }, reps);
        for (int i = 0; i < 6; i++) {
            unsigned grid = (unsigned)(prop.multiProcessorCount * shapes[i]);
            ratio[r][i] = m / median_ms([&] { library_f32<<<grid, 1024>>>(p); CK(cudaGetLastError()); }, reps);
        }
    }
    for (int i = 0; i < 6; i++)
        printf("| %d | %.3f | %.3f | %.3f | %.3f |\n", shapes[i], ratio[0][i], ratio[1][i],
               ratio[2][i], ratio[3][i]);
    CK(cudaFree(buf2));

    printf("\nbench_fill: recap %.0f GB/s = %.3f x memset, %.3f x cuRAND; back to back %.3f x memset, "
           "%.3f x cuRAND\n", bw_recap,
           bw_recap / bw_memset, bw_recap / bw_curand, b_memset / b_recap, b_curand / b_recap);
    curandDestroyGenerator(cg);
    recap_generator_destroy(g);
    CK(cudaFree(buf));
    return 0;
}
