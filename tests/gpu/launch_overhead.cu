// SPDX-License-Identifier: Apache-2.0
// 10^6 non-graph launches of an empty kernel (cudaLaunchKernel through nvcc's static cudart);
// run with and without LD_PRELOAD=librecap-preload.so (and with the CUPTI front end installed: --cupti)
// to show what recap's hooks cost calls they do not care about. The host time of the launch
// calls alone is measured: 5000 batches of 200 launches, each batch timed around its launch loop
// and drained (untimed) before the next, so a full launch queue never turns the figure into the
// GPU's kernel rate. Prints the median and the 10th percentile ns per launch over the batches,
// and where the driver entry point the runtime launches through lives (library and offset): the
// same with and without recap preloaded means recap adds no code to the launch path.
#include <algorithm>
#include <chrono>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "recap.h"

__global__ void empty() {}

int main(int argc, char **argv)
{
    // The program does not link librecap: the plain run must not have it loaded at all. The
    // CUPTI run dlopens it, as a framework plugin would (path in argv[2]).
    if (argc > 2 && strcmp(argv[1], "--cupti") == 0) {
        void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        typedef recap_status_t (*install_fn)(void);
        typedef const char *(*error_fn)(void);
        install_fn install = lib ? (install_fn)dlsym(lib, "recap_hooks_install_cupti") : NULL;
        if (install == NULL || install() != RECAP_OK) {
            fprintf(stderr, "cupti: %s\n", lib ? ((error_fn)dlsym(lib, "recap_last_error"))() : dlerror());
            return 2;
        }
    }
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        return 2;
    for (int i = 0; i < 10000; i++)
        empty<<<1, 32, 0, s>>>();
    cudaStreamSynchronize(s);
    std::vector<double> t;
    for (int batch = 0; batch < 5000; batch++) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 200; i++)
            empty<<<1, 32, 0, s>>>();
        auto t1 = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 200);
        if (cudaStreamSynchronize(s) != cudaSuccess)
            return 2;
    }
    if (cudaGetLastError() != cudaSuccess)
        return 2;
    std::sort(t.begin(), t.end());
    void *entry = NULL;
    cudaDriverEntryPointQueryResult q;
    Dl_info info = {};
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &entry, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        entry == NULL || dladdr(entry, &info) == 0)
        return 2;
    const char *base = strrchr(info.dli_fname, '/');
    printf("launch_overhead: %s: %.1f ns per launch (median of 5000 batches of 200), p10 %.1f ns; "
           "cuLaunchKernel at %s+0x%lx\n",
           argc > 1 ? argv[1] : (getenv("LD_PRELOAD") ? "LD_PRELOAD" : "plain"), t[t.size() / 2],
           t[t.size() / 10], base ? base + 1 : info.dli_fname,
           (unsigned long)((char *)entry - (char *)info.dli_fbase));
    return 0;
}
