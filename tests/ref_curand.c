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

int ref_curand_u32(uint64_t seed, uint64_t offset, uint32_t *out, size_t n)
{
    curandGenerator_t g = make(seed, offset);
    int rc;

    if (g == NULL)
        return -1;
    rc = curandGenerate(g, out, n) == CURAND_STATUS_SUCCESS ? 0 : -1;
    curandDestroyGenerator(g);
    return rc;
}

int ref_curand_uniform(uint64_t seed, uint64_t offset, float *out, size_t n)
{
    curandGenerator_t g = make(seed, offset);
    int rc;

    if (g == NULL)
        return -1;
    rc = curandGenerateUniform(g, out, n) == CURAND_STATUS_SUCCESS ? 0 : -1;
    curandDestroyGenerator(g);
    return rc;
}

int ref_curand_uniform_double(uint64_t seed, uint64_t offset, double *out, size_t n)
{
    curandGenerator_t g = make(seed, offset);
    int rc;

    if (g == NULL)
        return -1;
    rc = curandGenerateUniformDouble(g, out, n) == CURAND_STATUS_SUCCESS ? 0 : -1;
    curandDestroyGenerator(g);
    return rc;
}
