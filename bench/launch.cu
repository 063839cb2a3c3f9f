// SPDX-License-Identifier: Apache-2.0
// bench/launch: host cost recap adds to a CUDA graph launch, with 1, 4 and 16 generators drawing
// inside the graph, against a graph without RNG with as many kernel nodes (G writers plus one in
// place of recap's advance node), in one run.
// Per-launch host time = median over batches of (time to enqueue 200 launches) / 200, measured
// with the host clock around the launch calls only (the stream is drained between batches).
// Also reports recap_graph_will_launch alone (the bookkeeping) and how many launches needed
// device work (slot writes) in steady state. A second table does the same for a parent graph
// whose G child graph nodes are captured graphs drawing from one generator each, chained in
// order (graph composition, issue 17), against the same parent built from plain children.
#include <algorithm>
#include <chrono>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#include "recap.h"
#include "../tests/gpu/gpu_check.h"


// The anchor's nodes: plain kernels writing the same buffers, no random numbers.
__global__ void write_words(uint32_t *p, size_t n)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        p[i] = (uint32_t)i;
}

static double now_us()
{
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F> static double per_launch_us(F launch, cudaStream_t s)
{
    const int batches = 31, per = 200;
    std::vector<double> t;
    for (int i = 0; i < 20; i++)
        launch();
    CK(cudaStreamSynchronize(s));
    for (int b = 0; b < batches; b++) {
        double t0 = now_us();
        for (int i = 0; i < per; i++)
            launch();
        double t1 = now_us();
        CK(cudaStreamSynchronize(s));
        t.push_back((t1 - t0) / per);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// One table row: the anchor exec `pe` and recap's exec `re`, each launched on s.
static void print_row(int G, cudaGraphExec_t pe, recap_graph_exec_t re, cudaStream_t s)
{
    double plain = per_launch_us([&] { CK(cudaGraphLaunch(pe, s)); }, s);
    recap_capture_stats_t a, b;
    CR(recap_graph_launch(re, s)); // first launch writes the slots
    CR(recap_capture_stats(&a));
    double withrng = per_launch_us([&] { CR(recap_graph_launch(re, s)); }, s);
    CR(recap_capture_stats(&b));
    // The bookkeeping alone, without the driver's launch (offsets move on; nothing runs).
    double hook = per_launch_us([&] { CR(recap_graph_will_launch(re, s)); }, s);
    printf("| %d | %.3f | %.3f | %+.3f | %.3f | %llu of %llu |\n", G, plain, withrng,
           withrng - plain, hook, (unsigned long long)(b.slot_writes - a.slot_writes),
           (unsigned long long)(b.launches - a.launches));
}

int main()
{
    cudaStream_t s;
    CK(cudaSetDevice(0));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *buf;
    const size_t words = 1024;
    CK(cudaMalloc(&buf, 16 * words * 4));
    printf("| generators in graph | plain graph launch (us) | recap graph launch (us) | added (us) | recap_graph_will_launch alone (us) | slot writes in steady state |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int G : {1, 4, 16}) {
        // The anchor: G + 1 kernel nodes, as in recap's graph (G fills + the advance node).
        cudaGraph_t pg;
        cudaGraphExec_t pe;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        for (int i = 0; i <= G; i++) {
            write_words<<<2, 256, 0, s>>>((uint32_t *)buf + (i % G) * words, words);
            CK(cudaGetLastError());
        }
        CK(cudaStreamEndCapture(s, &pg));
        CK(cudaGraphInstantiate(&pe, pg, 0));

        std::vector<recap_generator_h> gens(G);
        for (int i = 0; i < G; i++) {
            CR(recap_generator_create(0, &gens[i]));
            CR(recap_generator_manual_seed(gens[i], 1000 + i));
        }
        recap_graph_t rg;
        recap_graph_exec_t re;
        CR(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
        for (int i = 0; i < G; i++)
            CR(recap_generator_fill_u32(gens[i], s, (uint32_t *)buf + i * words, words));
        CR(recap_stream_end_capture(s, &rg));
        CR(recap_graph_instantiate(rg, &re));

        print_row(G, pe, re, s);
        CR(recap_graph_exec_destroy(re));
        CR(recap_graph_destroy(rg));
        for (auto g : gens)
            CR(recap_generator_destroy(g));
        CK(cudaGraphExecDestroy(pe));
        CK(cudaGraphDestroy(pg));
    }
    printf("\n| child graphs (one generator each) | plain parent launch (us) | recap parent launch (us) | added (us) | recap_graph_will_launch alone (us) | slot writes in steady state |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int G : {1, 4, 16}) {
        std::vector<recap_generator_h> gens(G);
        std::vector<cudaGraph_t> plain_kids(G), rng_kids(G);
        cudaGraph_t pp, rp;
        cudaGraphExec_t pe;
        recap_graph_exec_t re;
        for (int i = 0; i < G; i++) {
            CR(recap_generator_create(0, &gens[i]));
            CR(recap_generator_manual_seed(gens[i], 2000 + i));
            // a plain child: as many kernel nodes as the recap child (its fill + advance node)
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
            for (int k = 0; k < 2; k++) {
                write_words<<<2, 256, 0, s>>>((uint32_t *)buf + i * words, words);
                CK(cudaGetLastError());
            }
            CK(cudaStreamEndCapture(s, &plain_kids[i]));
            CR(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
            CR(recap_generator_fill_u32(gens[i], s, (uint32_t *)buf + i * words, words));
            CR(recap_stream_end_capture(s, (recap_graph_t *)&rng_kids[i]));
        }
        CK(cudaGraphCreate(&pp, 0));
        CK(cudaGraphCreate(&rp, 0));
        cudaGraphNode_t plast = nullptr, rlast = nullptr;
        for (int i = 0; i < G; i++) {
            CK(cudaGraphAddChildGraphNode(&plast, pp, plast ? &plast : nullptr, plast ? 1 : 0,
                                          plain_kids[i]));
            CK(cudaGraphAddChildGraphNode(&rlast, rp, rlast ? &rlast : nullptr, rlast ? 1 : 0,
                                          rng_kids[i]));
        }
        CK(cudaGraphInstantiate(&pe, pp, 0));
        CR(recap_graph_instantiate(rp, &re)); // recap walks the children: the exec draws G states

        print_row(G, pe, re, s);
        CR(recap_graph_exec_destroy(re));
        CK(cudaGraphExecDestroy(pe));
        CK(cudaGraphDestroy(pp));
        CR(recap_graph_destroy(rp));
        for (int i = 0; i < G; i++) {
            CK(cudaGraphDestroy(plain_kids[i]));
            CR(recap_graph_destroy(rng_kids[i]));
            CR(recap_generator_destroy(gens[i]));
        }
    }
    CK(cudaFree(buf));
    printf("\nbench_launch: done\n");
    return 0;
}
