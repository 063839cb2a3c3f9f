// SPDX-License-Identifier: Apache-2.0
// GPU-only checks against cuRAND on the device (run by scripts/gpu-check; needs a GPU):
//  1. a kernel calling curand_init(seed, subsequence, offset) + curand() and a kernel using
//     recap/philox.h with the same triples draw the same words (random triples per thread);
//  2. recap's device fills equal curandGenerate / curandGenerateUniform /
//     curandGenerateUniformDouble of cuRAND's *device* generator (PHILOX4_32_10, generator
//     offset 65536 * offset), for random seeds, offsets and sizes;
//  3. a kernel reading recap_philox_args_t through recap_philox_unpack, by value and through
//     device pointers, draws what the by-value triple draws.
// Prints one line per check and "curand_device: N/N passed" last; exit status 0 when all pass.
#include <cuda_runtime.h>
#include <curand.h>
#include <curand_kernel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include "recap.h"
#include "gpu_check.h"

#define CKR(x)                                                                             \
    do {                                                                                   \
        curandStatus_t e_ = (x);                                                           \
        if (e_ != CURAND_STATUS_SUCCESS) {                                                 \
            fprintf(stderr, "%s:%d %s: curand status %d\n", __FILE__, __LINE__, #x, (int)e_); \
            exit(2);                                                                       \
        }                                                                                  \
    } while (0)

static uint64_t rng = 0;
static uint64_t rnd(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

struct triple {
    unsigned long long seed, subsequence, offset;
};

__global__ void draw_curand(const triple *t, uint32_t *out, int n, int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    curandStatePhilox4_32_10_t st;
    curand_init(t[i].seed, t[i].subsequence, t[i].offset, &st);
    for (int j = 0; j < k; j++)
        out[(size_t)i * k + j] = curand(&st);
}

__global__ void draw_recap(const triple *t, uint32_t *out, int n, int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    recap_philox_stream_t st;
    recap_philox_init(t[i].seed, t[i].subsequence, t[i].offset, &st);
    for (int j = 0; j < k; j++)
        out[(size_t)i * k + j] = recap_philox_next(&st);
}

// What a framework kernel does with reserved arguments: unpack, then curand_init(seed, tid, off).
__global__ void draw_args(recap_philox_args_t a, uint32_t *out, int n, int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint64_t seed, offset;
    recap_philox_unpack(&a, &seed, &offset);
    curandStatePhilox4_32_10_t st;
    curand_init(seed, i, offset, &st);
    for (int j = 0; j < k; j++)
        out[(size_t)i * k + j] = curand(&st);
}

static int passed, total;
// RECAP_GPU_QUICK: fewer and smaller cases, for runs under compute-sanitizer.
static int quick(void)
{
    return getenv("RECAP_GPU_QUICK") != NULL;
}
static void report(bool ok, const char *what)
{
    total++;
    passed += ok;
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
}

static void check_curand_init(void)
{
    const int n = quick() ? 1 << 10 : 1 << 16, k = 11;
    std::vector<triple> t(n);
    for (int i = 0; i < n; i++) {
        t[i].seed = rnd();
        t[i].subsequence = (i % 3 == 0) ? rnd() : rnd() % 65536;
        t[i].offset = (i % 5 == 0) ? rnd() : rnd() % 100000; // offsets not multiples of 4 too
    }
    triple *dt;
    uint32_t *a, *b;
    CK(cudaMalloc(&dt, n * sizeof(triple)));
    CK(cudaMalloc(&a, (size_t)n * k * 4));
    CK(cudaMalloc(&b, (size_t)n * k * 4));
    CK(cudaMemcpy(dt, t.data(), n * sizeof(triple), cudaMemcpyHostToDevice));
    draw_curand<<<(n + 255) / 256, 256>>>(dt, a, n, k);
    CK(cudaGetLastError());
    draw_recap<<<(n + 255) / 256, 256>>>(dt, b, n, k);
    CK(cudaGetLastError());
    std::vector<uint32_t> ha((size_t)n * k), hb((size_t)n * k);
    CK(cudaMemcpy(ha.data(), a, ha.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), b, hb.size() * 4, cudaMemcpyDeviceToHost));
    char msg[160];
    snprintf(msg, sizeof msg, "curand_init(seed, subsequence, offset) == recap_philox_init: %d random triples x %d words", n, k);
    report(ha == hb, msg);
    CK(cudaFree(dt));
    CK(cudaFree(a));
    CK(cudaFree(b));
}

static void check_fills(void)
{
    recap_generator_h g;
    curandGenerator_t cg;
    CR(recap_generator_create(0, &g));
    CKR(curandCreateGenerator(&cg, CURAND_RNG_PSEUDO_PHILOX4_32_10));
    int bad = 0, trials = 0;
    for (int trial = 0; trial < (quick() ? 4 : 30); trial++) {
        static const size_t edges[] = {1, 3, 4, 5, 262143, 262145, 1000003, 4u << 20};
        size_t n = trial % 3 == 0 ? edges[rnd() % 8] : 1 + rnd() % (quick() ? 300000 : 3000000);
        uint64_t seed = rnd(), off = trial % 2 ? 4 * (rnd() % 100000) : 4 * (rnd() >> 24);
        int kind = trial % 3;
        size_t es = kind == 2 ? 8 : 4;
        uint8_t st[16];
        for (int i = 0; i < 8; i++) {
            st[i] = (uint8_t)(seed >> (8 * i));
            st[8 + i] = (uint8_t)(off >> (8 * i));
        }
        CR(recap_generator_set_state(g, st));
        void *x, *y;
        CK(cudaMalloc(&x, n * es));
        CK(cudaMalloc(&y, n * es));
        CKR(curandSetPseudoRandomGeneratorSeed(cg, seed));
        CKR(curandSetGeneratorOffset(cg, 65536ULL * off));
        if (kind == 0) {
            CR(recap_generator_fill_u32(g, NULL, (uint32_t *)x, n));
            CKR(curandGenerate(cg, (unsigned *)y, n));
        } else if (kind == 1) {
            CR(recap_generator_fill_uniform(g, NULL, (float *)x, n));
            CKR(curandGenerateUniform(cg, (float *)y, n));
        } else {
            CR(recap_generator_fill_uniform_double(g, NULL, (double *)x, n));
            CKR(curandGenerateUniformDouble(cg, (double *)y, n));
        }
        CK(cudaDeviceSynchronize());
        std::vector<uint8_t> hx(n * es), hy(n * es);
        CK(cudaMemcpy(hx.data(), x, n * es, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hy.data(), y, n * es, cudaMemcpyDeviceToHost));
        if (hx != hy) {
            bad++;
            fprintf(stderr, "fill kind %d n %zu seed %llu offset %llu differs from cuRAND\n", kind, n,
                    (unsigned long long)seed, (unsigned long long)off);
        }
        trials++;
        CK(cudaFree(x));
        CK(cudaFree(y));
    }
    char msg[160];
    snprintf(msg, sizeof msg, "device fills (u32, uniform, uniform double) == cuRAND device generator: %d/%d random cases", trials - bad, trials);
    report(bad == 0, msg);
    CKR(curandDestroyGenerator(cg));
    CR(recap_generator_destroy(g));
}

static void check_unpack(void)
{
    const int n = 4096, k = 9;
    recap_generator_h g;
    recap_philox_args_t a;
    CR(recap_generator_create(0, &g));
    CR(recap_generator_manual_seed(g, rnd()));
    CR(recap_generator_reserve(g, NULL, 64, &a));
    CR(recap_generator_reserve(g, NULL, k, &a));
    uint32_t *x, *y;
    uint64_t *dvals;
    CK(cudaMalloc(&x, (size_t)n * k * 4));
    CK(cudaMalloc(&y, (size_t)n * k * 4));
    CK(cudaMalloc(&dvals, 16));
    draw_args<<<(n + 255) / 256, 256>>>(a, x, n, k);
    CK(cudaGetLastError());
    // The captured form: seed and base offset in device memory, plus an intragraph offset.
    uint64_t base = a.offset - 16, vals[2] = {a.seed, base};
    CK(cudaMemcpy(dvals, vals, 16, cudaMemcpyHostToDevice));
    recap_philox_args_t c = {};
    c.captured = 1;
    c.seed_ptr = dvals;
    c.offset_ptr = dvals + 1;
    c.offset_intragraph = 16;
    draw_args<<<(n + 255) / 256, 256>>>(c, y, n, k);
    CK(cudaGetLastError());
    std::vector<uint32_t> hx((size_t)n * k), hy((size_t)n * k);
    CK(cudaMemcpy(hx.data(), x, hx.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hy.data(), y, hy.size() * 4, cudaMemcpyDeviceToHost));
    bool ok = hx == hy && a.offset == 64;
    report(ok, "recap_philox_unpack: by-value and device-pointer arguments draw the same words");
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(dvals));
    CR(recap_generator_destroy(g));
}

int main(void)
{
    const char *s = getenv("RECAP_TEST_SEED");
    rng = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
    printf("RECAP_TEST_SEED=%llu\n", (unsigned long long)rng);
    CK(cudaSetDevice(0));
    CK(cudaFree(0)); // create the primary context as a cudart host would
    check_curand_init();
    check_fills();
    check_unpack();
    printf("curand_device: %d/%d passed\n", passed, total);
    return passed == total ? 0 : 1;
}
