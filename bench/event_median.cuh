// The GPU benchmarks' timing: the median milliseconds of REPS event-timed calls of f (each between
// two events on the legacy stream) after three untimed warm-up calls and a drain.
#pragma once
#include <algorithm>
#include <cuda_runtime.h>
#include <vector>

#include "../tests/gpu/gpu_check.h"

template <typename F> static double median_ms(F f, int reps)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++)
        f(); // warm-up: module load, clocks
    CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a));
        f();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return t[t.size() / 2];
}
