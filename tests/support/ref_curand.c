/* SPDX-License-Identifier: Apache-2.0 */
/* cuRAND's host generator as the external reference for recap's fills. It runs on the CPU, so
 * CI (no GPU) checks bit-exactness too. */
#include <curand.h>

#include "testutil.h"

static curandGenerator_t make(uint64_t seed, uint64_t offset)
{
    curandGenerator_t g;

    if (curandCreateGeneratorHost(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10) != CURAND_STATUS_SUCCESS)
        return NULL;
    if (curandSetPseudoRandomGeneratorSeed(g, seed) != CURAND_STATUS_SUCCESS ||
        curandSetGeneratorOffset(g, 65536ULL * offset) != CURAND_STATUS_SUCCESS) {
        curandDestroyGenerator(g);
        return NULL;
    }
    return g;
}

/* One generator per reference call: each starts from (seed, offset) as recap's fill does. */
#define REF_CURAND(name, type, generate)                              \
    int name(uint64_t seed, uint64_t offset, type *out, size_t n)     \
    {                                                                 \
        curandGenerator_t g = make(seed, offset);                     \
        int rc;                                                       \
        if (g == NULL)                                                \
            return -1;                                                \
        rc = generate(g, out, n) == CURAND_STATUS_SUCCESS ? 0 : -1;   \
        curandDestroyGenerator(g);                                    \
        return rc;                                                    \
    }

REF_CURAND(ref_curand_u32, uint32_t, curandGenerate)
REF_CURAND(ref_curand_uniform, float, curandGenerateUniform)
REF_CURAND(ref_curand_uniform_double, double, curandGenerateUniformDouble)
