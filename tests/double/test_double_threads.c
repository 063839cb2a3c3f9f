/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double against the driver's rules: threads capturing and launching at once. */
#include "test_double.h"

#define NTHREADS 6
#define NLAUNCH 25

typedef struct {
    int index;
    CUresult rc;
    size_t nodes;
    uint64_t offset;
} worker_t;

/* Each thread captures its own stream (THREAD_LOCAL, so the others' captures do not matter),
 * allocates a slot in RELAXED mode mid-capture, and runs its graph NLAUNCH times. */
static void *worker(void *arg)
{
    worker_t *w = arg;
    CUstream s = NULL;
    CUdeviceptr my_slot = 0;
    CUgraph g = NULL;
    CUgraphExec e = NULL;
    recap__advance_params_t p;
    void *args[] = {&p};
    uint64_t v[2] = {0, 0};
    CUstreamCaptureMode m;

#define TRY(expr)                                 \
    if ((w->rc = (expr)) != CUDA_SUCCESS)         \
        return NULL;
    TRY(p_cuCtxSetCurrent(ctx));
    m = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    TRY(p_cuThreadExchangeStreamCaptureMode(&m));
    TRY(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    TRY(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    m = CU_STREAM_CAPTURE_MODE_RELAXED;
    TRY(p_cuThreadExchangeStreamCaptureMode(&m));
    TRY(p_cuMemAlloc_v2(&my_slot, 16));
    TRY(p_cuThreadExchangeStreamCaptureMode(&m));
    TRY(p_cuMemcpyHtoD_v2(my_slot, v, sizeof(v)));
    memset(&p, 0, sizeof(p));
    p.slot[0] = my_slot;
    p.inc[0] = (uint64_t)w->index + 1;
    p.count = 1;
    for (int i = 0; i < 3; i++)
        TRY(p_cuLaunchKernel(k_advance, 1, 1, 1, RECAP_SLOTS_PER_LAUNCH, 1, 1, 0, s, args, NULL));
    TRY(p_cuStreamEndCapture(s, &g));
    TRY(p_cuGraphGetNodes(g, NULL, &w->nodes));
    TRY(p_cuGraphInstantiateWithFlags(&e, g, 0));
    for (int i = 0; i < NLAUNCH; i++)
        TRY(p_cuGraphLaunch(e, s));
    TRY(p_cuStreamSynchronize(s));
    TRY(p_cuMemcpyDtoH_v2(v, my_slot, sizeof(v)));
    w->offset = v[1];
    TRY(p_cuGraphExecDestroy(e));
    TRY(p_cuGraphDestroy(g));
    TRY(p_cuMemFree_v2(my_slot));
    TRY(p_cuStreamDestroy_v2(s));
#undef TRY
    return NULL;
}

START_TEST(threads_capture_and_launch_concurrently)
{
    pthread_t t[NTHREADS];
    worker_t w[NTHREADS];

    for (int i = 0; i < NTHREADS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].index = i;
        ck_assert_int_eq(pthread_create(&t[i], NULL, worker, &w[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        CK(w[i].rc, CUDA_SUCCESS);
        ck_assert_uint_eq(w[i].nodes, 3);
        ck_assert_uint_eq(w[i].offset, 3u * NLAUNCH * (uint64_t)(i + 1));
    }
    check_no_leaks();
}
END_TEST

void double_add_threads_tests(TCase *tc)
{
    tcase_add_test(tc, threads_capture_and_launch_concurrently);
}
