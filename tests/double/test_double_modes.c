/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double against the driver's rules: capture interaction modes: which calls a
 * capture prohibits, and for whom. */
#include "test_double.h"

START_TEST(global_mode_unsafe_call_fails_and_invalidates)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING), o = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = 0;
    CUstreamCaptureStatus st;
    cuuint64_t id = 777;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 1, 0));
    CK(p_cuMemAlloc_v2(&p, 256), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    OK(p_cuStreamGetCaptureInfo(s, &st, &id));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    ck_assert_uint_eq(id, 777); /* no id for an invalidated capture */
    CK(fill(s, buf_a, 1, 0), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(p_cuStreamWriteValue64_v2(s, slot, 1, 0), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(p_cuMemsetD32Async(buf_a, 1, 4, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* an invalidated capture still prohibits, until it ends */
    CK(p_cuMemFree_v2(buf_b), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(p_cuStreamSynchronize(o), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    OK(fill(o, buf_b, 3, 0)); /* other streams run as usual */
    end_invalidated(s);
    ck_assert(all_zero(buf_a));
    OK(p_cuMemAlloc_v2(&p, 256));
    OK(p_cuMemFree_v2(p));
    OK(p_cuStreamDestroy_v2(s));
    OK(p_cuStreamDestroy_v2(o));
    check_no_leaks();
}
END_TEST

START_TEST(global_capture_is_invalidated_by_other_threads_unsafe_call)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    job_t j;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 1, 0));
    j = on_other_thread(JOB_MEMALLOC, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
    ck_assert_int_eq(j.initial_mode, CU_STREAM_CAPTURE_MODE_GLOBAL); /* the default */
    CK(j.rc, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_invalidated(s);
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(relaxed_thread_may_allocate_during_global_capture)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = 0;
    CUgraph g;
    job_t j;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 1, 0));
    j = on_other_thread(JOB_MEMALLOC, CU_STREAM_CAPTURE_MODE_RELAXED, NULL);
    OK(j.rc);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    /* a THREAD_LOCAL thread ignores other threads' captures too */
    j = on_other_thread(JOB_MEMALLOC, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, NULL);
    OK(j.rc);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    /* and the capturing thread itself, once relaxed */
    ck_assert_int_eq(set_mode(CU_STREAM_CAPTURE_MODE_RELAXED), CU_STREAM_CAPTURE_MODE_GLOBAL);
    OK(p_cuMemAlloc_v2(&p, 256));
    OK(p_cuMemFree_v2(p));
    ck_assert_int_eq(set_mode(CU_STREAM_CAPTURE_MODE_GLOBAL), CU_STREAM_CAPTURE_MODE_RELAXED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(p_cuStreamEndCapture(s, &g));
    ck_assert_uint_eq(node_count(g), 1);
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(thread_local_capture_only_prohibits_its_own_thread)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = 0;
    CUgraph g;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    OK(on_other_thread(JOB_MEMALLOC, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL).rc);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphDestroy(g));

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CK(p_cuMemAlloc_v2(&p, 256), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_invalidated(s);

    /* this thread in THREAD_LOCAL mode: its own capture still prohibits */
    set_mode(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuMemAlloc_v2(&p, 256), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated(s);
    set_mode(CU_STREAM_CAPTURE_MODE_GLOBAL);
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(relaxed_capture_prohibits_no_call_but_context_sync)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING), o = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = 0;
    CUgraph g;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(p_cuMemAlloc_v2(&p, 256));
    OK(p_cuMemFree_v2(p));
    OK(p_cuStreamSynchronize(o));
    OK(on_other_thread(JOB_MEMALLOC, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL).rc);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphDestroy(g));
    /* synchronizing the context would wait for the capturing stream: refused in every mode */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(on_other_thread(JOB_CTX_SYNC, CU_STREAM_CAPTURE_MODE_RELAXED, NULL).rc,
       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_invalidated(s);
    OK(p_cuStreamDestroy_v2(s));
    OK(p_cuStreamDestroy_v2(o));
    check_no_leaks();
}
END_TEST

START_TEST(synchronizing_a_capturing_stream_invalidates_it)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);

    set_mode(CU_STREAM_CAPTURE_MODE_RELAXED);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(p_cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_invalidated(s);
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(legacy_stream_work_during_blocking_capture_is_implicit)
{
    CUstream b = new_stream(0), nb = new_stream(CU_STREAM_NON_BLOCKING);
    CUstreamCaptureStatus st;
    uint32_t w[16] = {0};
    CUgraph g;

    /* a blocking stream: the legacy stream would wait for it */
    OK(p_cuStreamBeginCapture_v2(b, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(p_cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    ck_assert_int_eq(capture_status(b), CU_STREAM_CAPTURE_STATUS_ACTIVE); /* a query: no harm */
    CK(fill(NULL, buf_a, 1, 0), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    ck_assert_int_eq(capture_status(b), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_invalidated(b);
    OK(p_cuStreamBeginCapture_v2(b, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuMemcpyHtoD_v2(buf_a, w, sizeof(w)), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    end_invalidated(b);
    ck_assert(all_zero(buf_a));
    /* a non-blocking one: synchronous copies and legacy-stream work go on, in any mode */
    OK(p_cuStreamBeginCapture_v2(nb, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamIsCapturing(NULL, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    OK(p_cuMemcpyHtoD_v2(buf_a, w, sizeof(w)));
    OK(p_cuMemcpyDtoH_v2(w, buf_a, sizeof(w)));
    OK(p_cuMemsetD8_v2(buf_a, 0, 64));
    OK(fill(NULL, buf_b, 1, 0));
    ck_assert_int_eq(capture_status(nb), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(p_cuStreamEndCapture(nb, &g));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(b));
    OK(p_cuStreamDestroy_v2(nb));
    check_no_leaks();
}
END_TEST

START_TEST(end_capture_from_wrong_thread)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUstreamCaptureMode strict[] = {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL};
    CUgraph g = (CUgraph)0x1;
    job_t j;

    for (int i = 0; i < 2; i++) {
        OK(p_cuStreamBeginCapture_v2(s, strict[i]));
        OK(fill(s, buf_a, 1, 0));
        j = on_other_thread(JOB_END_CAPTURE, CU_STREAM_CAPTURE_MODE_GLOBAL, s);
        CK(j.rc, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
        ck_assert_ptr_null(j.graph);
        /* the driver ends the capture all the same, keeping no graph */
        ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
        CK(p_cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
        check_no_leaks();
    }
    /* a RELAXED capture may end anywhere */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(on_other_thread(JOB_LAUNCH, CU_STREAM_CAPTURE_MODE_GLOBAL, s).rc);
    j = on_other_thread(JOB_END_CAPTURE, CU_STREAM_CAPTURE_MODE_GLOBAL, s);
    OK(j.rc);
    ck_assert_uint_eq(node_count(j.graph), 1);
    OK(p_cuGraphDestroy(j.graph));
    ck_assert(all_zero(buf_b));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(capture_mode_is_per_thread_and_exchanged)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;

    OK(p_cuThreadExchangeStreamCaptureMode(&m));
    ck_assert_int_eq(m, CU_STREAM_CAPTURE_MODE_GLOBAL);
    ck_assert_int_eq(on_other_thread(JOB_MEMALLOC, CU_STREAM_CAPTURE_MODE_RELAXED, NULL).initial_mode,
                     CU_STREAM_CAPTURE_MODE_GLOBAL);
    m = CU_STREAM_CAPTURE_MODE_RELAXED;
    OK(p_cuThreadExchangeStreamCaptureMode(&m));
    ck_assert_int_eq(m, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    /* the driver takes any value (and crashes on NULL) */
    m = (CUstreamCaptureMode)9;
    OK(p_cuThreadExchangeStreamCaptureMode(&m));
    ck_assert_int_eq(m, CU_STREAM_CAPTURE_MODE_RELAXED);
    m = CU_STREAM_CAPTURE_MODE_GLOBAL;
    OK(p_cuThreadExchangeStreamCaptureMode(&m));
    ck_assert_int_eq(m, 9);
}
END_TEST

void double_add_modes_tests(TCase *tc)
{
    tcase_add_test(tc, global_mode_unsafe_call_fails_and_invalidates);
    tcase_add_test(tc, global_capture_is_invalidated_by_other_threads_unsafe_call);
    tcase_add_test(tc, relaxed_thread_may_allocate_during_global_capture);
    tcase_add_test(tc, thread_local_capture_only_prohibits_its_own_thread);
    tcase_add_test(tc, relaxed_capture_prohibits_no_call_but_context_sync);
    tcase_add_test(tc, synchronizing_a_capturing_stream_invalidates_it);
    tcase_add_test(tc, legacy_stream_work_during_blocking_capture_is_implicit);
    tcase_add_test(tc, end_capture_from_wrong_thread);
    tcase_add_test(tc, capture_mode_is_per_thread_and_exchanged);
}
