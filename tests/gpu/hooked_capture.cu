// SPDX-License-Identifier: Apache-2.0
// A CUDA program built with nvcc's default static cudart that captures and replays a graph whose
// kernel draws from a recap generator, without telling recap anything about the capture:
// recap must learn of it through a hook (LD_PRELOAD, CUPTI or CUDA injection).
//   hooked_capture expect-hooked [--cupti]   every replay equals an eager run; exit 0
//   hooked_capture expect-unhooked           the captured draw is refused (NOT_REGISTERED); exit 0
// Prints one line "hooked_capture: ..." and the front end recap reports.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "recap.h"
#include "draw.cuh"
#include "gpu_check.h"

static recap_status_t step(recap_generator_h g, cudaStream_t s, uint32_t *buf, int n, int k)
{
    recap_philox_args_t a;
    recap_status_t st = recap_generator_reserve(g, s, k, &a);
    if (st != RECAP_OK)
        return st;
    draw<<<(n + 255) / 256, 256, 0, s>>>(a, buf, n, k);
    return cudaGetLastError() == cudaSuccess ? RECAP_OK : RECAP_ERR_CUDA;
}

int main(int argc, char **argv)
{
    const int n = 1 << 16, k = 7, K = 5;
    int expect_hooked = argc > 1 && strcmp(argv[1], "expect-hooked") == 0;
    cudaStream_t s;
    uint32_t *a, *b;
    recap_generator_h g, twin;
    recap_hooks_t hooks;

    if (argc > 2 && strcmp(argv[2], "--cupti") == 0)
        CR(recap_hooks_install_cupti());
    CK(cudaSetDevice(0));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMalloc(&a, (size_t)n * k * 4));
    CK(cudaMalloc(&b, (size_t)n * k * 4));
    CR(recap_generator_create(0, &g));
    CR(recap_generator_create(0, &twin));
    CR(recap_generator_manual_seed(g, 20261202));
    CR(recap_generator_manual_seed(twin, 20261202));

    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    recap_status_t st = step(g, s, a, n, k);
    cudaError_t ec = cudaStreamEndCapture(s, &graph);
    CR(recap_hooks_active(&hooks));
    if (!expect_hooked) {
        int ok = st == RECAP_ERR_NOT_REGISTERED;
        printf("hooked_capture: front end %s; captured draw %s\n", recap_hooks_name(hooks),
               ok ? "refused with NOT_REGISTERED, as expected without hooks" : "NOT refused");
        return ok ? 0 : 1;
    }
    if (st != RECAP_OK || ec != cudaSuccess) {
        printf("hooked_capture: FAIL: captured draw: %s (%s)\n", recap_strerror(st), recap_last_error());
        return 1;
    }
    CK(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<uint32_t> ha((size_t)n * k), hb((size_t)n * k), prev((size_t)n * k, 0);
    int bad = 0, repeats = 0;
    for (int r = 0; r < K; r++) {
        CK(cudaGraphLaunch(exec, s));
        CR(step(twin, s, b, n, k));
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(ha.data(), a, ha.size() * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hb.data(), b, hb.size() * 4, cudaMemcpyDeviceToHost));
        bad += ha != hb;
        repeats += ha == prev;
        prev = ha;
    }
    recap_capture_stats_t cs;
    CR(recap_capture_stats(&cs));
    printf("hooked_capture: front end %s; %d replays: %d differ from eager, %d repeated; recap saw "
           "%llu captures, %llu launches\n", recap_hooks_name(hooks), K, bad, repeats,
           (unsigned long long)cs.captures, (unsigned long long)cs.launches);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    return bad == 0 && repeats == 0 && cs.launches == (unsigned long long)K ? 0 : 1;
}
