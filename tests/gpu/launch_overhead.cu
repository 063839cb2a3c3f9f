// 10^6 non-graph launches of an empty kernel (cudaLaunchKernel through nvcc's static cudart),
// timed with the host clock; run with and without LD_PRELOAD=librecap.so (and with the CUPTI
// front end installed: --cupti) to show what recap's hooks cost calls they do not care about.
// 10^6 launches per process in 5 timed runs of 2 x 10^5; prints the median ns per launch.
#include <algorithm>
#include <chrono>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "recap.h"

__global__ void empty() {}

int main(int argc, char **argv)
{
    int cupti = argc > 1 && strcmp(argv[1], "--cupti") == 0;
    if (cupti && recap_hooks_install_cupti() != RECAP_OK) {
        fprintf(stderr, "cupti: %s\n", recap_last_error());
        return 2;
    }
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        return 2;
    for (int i = 0; i < 10000; i++)
        empty<<<1, 32, 0, s>>>();
    cudaStreamSynchronize(s);
    std::vector<double> t;
    for (int rep = 0; rep < 5; rep++) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 200000; i++)
            empty<<<1, 32, 0, s>>>();
        cudaStreamSynchronize(s);
        auto t1 = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 2e5);
    }
    if (cudaGetLastError() != cudaSuccess)
        return 2;
    std::sort(t.begin(), t.end());
    recap_hooks_t h;
    recap_hooks_active(&h);
    printf("launch_overhead: %s: %.1f ns per launch (median of 5 x 2*10^5)\n",
           argc > 1 ? argv[1] : (getenv("LD_PRELOAD") ? "LD_PRELOAD" : "plain"), t[2]);
    (void)h;
    return 0;
}
