/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host benchmarks' timing: median nanoseconds per operation over REPS timed batches of BATCH
 * operations, after one untimed warm-up batch, with CLOCK_MONOTONIC. Included after the
 * benchmark defines REPS, BATCH, bench_ctx_t and batch_fn (void (*)(bench_ctx_t *)).
 */
#ifndef RECAP_BENCH_MEDIAN_H
#define RECAP_BENCH_MEDIAN_H

#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median_ns(batch_fn fn, bench_ctx_t *c)
{
    double t[REPS];
    int r;

    fn(c);
    for (r = 0; r < REPS; r++) {
        double t0 = now_ns();
        fn(c);
        t[r] = (now_ns() - t0) / BATCH;
    }
    qsort(t, REPS, sizeof(t[0]), cmp_double);
    return t[REPS / 2];
}

#endif
