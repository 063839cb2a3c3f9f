/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "base/error.h"
#include "base/handle.h"
#include "driver/driver.h"
#include "kernels/fill_body.h"
#include "rng/generator.h"

/* What one kind of fill needs: its eager and captured kernels, and its host body. Every kernel
 * works in units of 4 elements spread over 65536 subsequences; a unit takes `counters_per_unit`
 * Philox counters. */
typedef struct {
    recap__kernel_id_t kernel, kernel_captured;
    unsigned counters_per_unit;
    size_t elem_size;
    void (*host_body)(const recap__fill_params_t *, uint64_t, uint64_t);
    const char *what;
} fill_kind_t;

static const fill_kind_t fill_u32 = {RECAP_K_FILL_U32, RECAP_K_FILL_U32_CAPTURED, 1, 4,
                                     recap__fill_u32_thread, "fill_u32"};
static const fill_kind_t fill_f32 = {RECAP_K_FILL_F32, RECAP_K_FILL_F32_CAPTURED, 1, 4,
                                     recap__fill_f32_thread, "fill_uniform"};
static const fill_kind_t fill_f64 = {RECAP_K_FILL_F64, RECAP_K_FILL_F64_CAPTURED, 2, 8,
                                     recap__fill_f64_thread, "fill_uniform_double"};

/* Launch shapes, the fastest bench/fill and bench/fill_explore found (bench/RESULTS.md, "Bulk
 * fill"): 1024 threads per block (two resident per SM); eager fills 8 blocks per SM, four waves
 * (ahead of 4 blocks and of one wave, and less sensitive to where the buffer lies); captured
 * fills 2 (one wave). */
#define FILL_THREADS 1024
#define FILL_BLOCKS_PER_SM 8
#define FILL_BLOCKS_PER_SM_CAPTURED 2

/* No buffer is larger than the largest 64-bit Linux address space (57 bits, 5-level paging): a
 * longer fill is a wrong count, which on the host would write past the buffer. */
#define FILL_MAX_BYTES ((uint64_t)1 << 57)

/* cuRAND's layout spreads a fill over 65536 subsequences, so each subsequence's counter (offset
 * / 4) moves by counters_per_unit per 65536 units. */
static uint64_t fill_increment(const fill_kind_t *k, uint64_t nunits)
{
    return 4 * k->counters_per_unit *
           ((nunits + RECAP_FILL_SUBSEQUENCES - 1) / RECAP_FILL_SUBSEQUENCES);
}

/* The device buffer must be device memory of the generator's device. */
static recap_status_t check_device_buffer(const recap__driver_t *drv, int device, const void *buf)
{
    int ordinal = recap__pointer_device(drv, buf);

    if (ordinal < 0)
        return recap__fail(RECAP_ERR_INVALID_ARG, "buffer %p is not CUDA memory known to the "
                           "driver (a device generator fills device memory)", buf);
    if (ordinal != device)
        return recap__fail(RECAP_ERR_WRONG_DEVICE, "buffer %p is on device %d, the generator on "
                           "device %d", buf, ordinal, device);
    return RECAP_OK;
}

static recap_status_t launch_fill(recap_generator_h gen, recap_stream_t stream,
                                  const fill_kind_t *k, recap__fill_params_t *p)
{
    const recap__device_t *dev;
    const recap__driver_t *drv;
    recap_status_t st;
    uint64_t nunits = (p->n + 3) / 4;
    uint64_t grid = (nunits + FILL_THREADS - 1) / FILL_THREADS;
    void *args[1] = {p};
    int pushed;
    CUresult rc;

    st = recap__device_enter(gen->device, &dev, &drv, &pushed);
    if (st != RECAP_OK)
        return st;
    st = check_device_buffer(drv, gen->device, (const void *)(uintptr_t)p->dst);
    if (st == RECAP_OK)
        st = recap__generator_draw(gen, stream, fill_increment(k, nunits), &p->philox);
    if (st == RECAP_OK) {
        uint64_t per_sm = p->philox.captured ? FILL_BLOCKS_PER_SM_CAPTURED : FILL_BLOCKS_PER_SM;
        uint64_t max_grid = (uint64_t)dev->sm_count * per_sm;

        if (grid > max_grid)
            grid = max_grid;
        if (!p->philox.captured)
            recap__fill_keys(p->philox.seed, &p->keys);
        rc = drv->cuLaunchKernel(dev->fn[p->philox.captured ? k->kernel_captured : k->kernel],
                                 (unsigned)grid, 1, 1, FILL_THREADS, 1, 1, 0, (CUstream)stream,
                                 args, NULL);
        if (rc != CUDA_SUCCESS)
            st = recap__cuda_fail(rc, k->what);
    }
    recap__ctx_leave(pushed);
    return st;
}

static recap_status_t fill(recap_generator_h gen, recap_stream_t stream, void *buf, size_t n,
                           const fill_kind_t *k)
{
    recap__fill_params_t p = {0};
    recap_status_t st;

    RECAP_CHECK_ARG(gen != NULL, "%s: generator is NULL", k->what);
    RECAP_CHECK_ARG(gen->magic == RECAP_MAGIC_GENERATOR, "%s: generator handle %p is not live "
                    "(destroyed, or never created)", k->what, (void *)gen);
    RECAP_CHECK_ARG(buf != NULL, "%s: buffer is NULL", k->what);
    RECAP_CHECK_ARG(n > 0, "%s: zero-length fill", k->what);
    RECAP_CHECK_ARG(n <= FILL_MAX_BYTES / k->elem_size, "%s: %zu elements (%s) cannot be a "
                    "buffer: more than any address space holds", k->what, n,
                    k->elem_size == 8 ? "doubles" : "4-byte words");
    RECAP_CHECK_ARG(((uintptr_t)buf % k->elem_size) == 0, "%s: buffer %p is not aligned to its "
                    "element size", k->what, buf);
    p.dst = (uint64_t)(uintptr_t)buf;
    p.n = n;
    if (gen->device != RECAP_DEVICE_HOST)
        return launch_fill(gen, stream, k, &p);

    RECAP_CHECK_ARG(stream == NULL, "%s: a host generator takes no stream", k->what);
    st = recap__generator_draw(gen, NULL, fill_increment(k, (n + 3) / 4), &p.philox);
    if (st != RECAP_OK)
        return st;
    recap__fill_keys(p.philox.seed, &p.keys);
    k->host_body(&p, 0, 1);
    return RECAP_OK;
}

recap_status_t recap_generator_fill_u32(recap_generator_h gen, recap_stream_t stream,
                                        uint32_t *buf, size_t n)
{
    return fill(gen, stream, buf, n, &fill_u32);
}

recap_status_t recap_generator_fill_uniform(recap_generator_h gen, recap_stream_t stream,
                                            float *buf, size_t n)
{
    return fill(gen, stream, buf, n, &fill_f32);
}

recap_status_t recap_generator_fill_uniform_double(recap_generator_h gen, recap_stream_t stream,
                                                   double *buf, size_t n)
{
    return fill(gen, stream, buf, n, &fill_f64);
}
