// SPDX-License-Identifier: Apache-2.0
// The GPU benchmarks' timing: the median milliseconds per call of f over REPS event-timed samples
// (each sample BATCH calls between two events on the legacy stream; 1 by default) after three
// untimed warm-up calls and a drain. With BATCH > 1 the host's cost of each call overlaps the
// previous call's device work, so the figure is the device's throughput alone.
#pragma once
#include <algorithm>
#include <cuda_runtime.h>
#include <vector>

#include "../tests/gpu/gpu_check.h"

template <typename F> static double median_ms(F f, int reps, int batch = 1)
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
        for (int j = 0; j < batch; j++)
            f();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms / batch);
    }
    std::sort(t.begin(), t.end());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return t[t.size() / 2];
}
