/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host benchmarks' timing: median nanoseconds per operation over REPS timed batches of BATCH
 * operations, after one untimed warm-up batch, with CLOCK_MONOTONIC; or alternated with an
 * anchor's batches (median_ratio). Included after the benchmark defines REPS, BATCH, bench_ctx_t
 * and batch_fn (void (*)(bench_ctx_t *)).
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

/* fn's batches alternated with anchor's, REPS rounds after a warm-up of each: the median ns per
 * operation of each (*ns_p, *anchor_p) and, returned, the median of the rounds' ratios, so a
 * clock or a neighbour that changes speed between two rows does not show in the ratio. */
static __attribute__((unused)) double median_ratio(batch_fn fn, batch_fn anchor, bench_ctx_t *c,
                                                   double *ns_p, double *anchor_p)
{
    double t[REPS], a[REPS], q[REPS];
    int r;

    fn(c);
    anchor(c);
    for (r = 0; r < REPS; r++) {
        double t0 = now_ns(), t1, t2;
        anchor(c);
        t1 = now_ns();
        fn(c);
        t2 = now_ns();
        a[r] = (t1 - t0) / BATCH;
        t[r] = (t2 - t1) / BATCH;
        q[r] = t[r] / a[r];
    }
    qsort(t, REPS, sizeof(t[0]), cmp_double);
    qsort(a, REPS, sizeof(a[0]), cmp_double);
    qsort(q, REPS, sizeof(q[0]), cmp_double);
    *ns_p = t[REPS / 2];
    *anchor_p = a[REPS / 2];
    return q[REPS / 2];
}

#endif
