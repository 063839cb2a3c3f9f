/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double against the driver's rules: capture basics: nodes, launches, capture ids,
 * errors, per-thread streams. */
#include "test_double.h"

START_TEST(capture_records_kernel_nodes_without_running_them)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    unsigned long launches = is_double() ? d_launch_count() : 0;
    CUgraph g = NULL;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(fill(s, buf_a, 1, 0));
    OK(fill(s, buf_a, 2, 0));
    OK(advance(s, 4));
    ck_assert(all_zero(buf_a)); /* recorded, not run */
    if (is_double())
        ck_assert_uint_eq(d_launch_count(), launches);
    OK(p_cuStreamEndCapture(s, &g));
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    ck_assert_uint_eq(node_count(g), 3);
    ck_assert(all_zero(buf_a));
    ck_assert_uint_eq(slot_offset(), 0);
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(graph_launch_writes_what_eager_launch_writes)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e;
    uint32_t eager[NWORDS], graph[NWORDS];
    uint64_t seed = tu_rand(), offset = tu_rand_offset();

    OK(fill(s, buf_a, seed, offset));
    OK(p_cuStreamSynchronize(s));
    read_words(buf_a, eager, NWORDS);

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_b, seed, offset));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    ck_assert(all_zero(buf_b));
    OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    read_words(buf_b, graph, NWORDS);
    ck_assert_mem_eq(eager, graph, sizeof(eager));
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(k_graph_launches_run_the_nodes_k_times)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e;
    unsigned long launches;
    const int K = 7;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 5, 0));
    OK(advance(s, 12));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    launches = is_double() ? d_launch_count() : 0;
    for (int i = 0; i < K; i++)
        OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    ck_assert_uint_eq(slot_offset(), 12u * K);
    if (is_double())
        ck_assert_uint_eq(d_launch_count() - launches, 2u * K);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
}
END_TEST

START_TEST(capture_ids_are_unique_and_increasing)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING), t = new_stream(CU_STREAM_NON_BLOCKING);
    CUstreamCaptureStatus st;
    cuuint64_t id1 = 0, id2 = 0, id3 = 0, id_v2 = 0;
    CUgraph g, cg = NULL;
    const CUgraphNode *deps = NULL;
    size_t ndeps = 99;
    const char *fork_env = getenv("CK_FORK");

    id1 = 777;
    OK(p_cuStreamGetCaptureInfo(s, &st, &id1));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamGetCaptureInfo(s, &st, &id1));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    ck_assert_uint_ge(id1, 1);
    if (is_double() && (fork_env == NULL || strcmp(fork_env, "no") != 0))
        ck_assert_uint_eq(id1, 1); /* a fresh process: the first capture */
    OK(p_cuStreamGetCaptureInfo_v2(s, &st, &id_v2, &cg, &deps, &ndeps));
    ck_assert_uint_eq(id_v2, id1);
    ck_assert_ptr_nonnull(cg);
    ck_assert_uint_eq(ndeps, 0);
    OK(fill(s, buf_a, 1, 0));
    OK(p_cuStreamGetCaptureInfo_v2(s, &st, NULL, NULL, NULL, &ndeps));
    ck_assert_uint_eq(ndeps, 1);
    OK(p_cuStreamBeginCapture_v2(t, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamGetCaptureInfo(t, &st, &id2));
    ck_assert_uint_eq(id2, id1 + 1);
    OK(p_cuStreamEndCapture(t, &g));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamGetCaptureInfo(s, &st, &id3));
    ck_assert_uint_eq(id3, id2 + 1);
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    OK(p_cuStreamDestroy_v2(t));
    check_no_leaks();
}
END_TEST

START_TEST(begin_and_end_capture_errors)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g = (CUgraph)0x1;

    CK(p_cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(p_cuStreamBeginCapture_v2(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_RELAXED),
       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(p_cuStreamBeginCapture_v2(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    CK(p_cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    ck_assert_ptr_null(g);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_ERROR_ILLEGAL_STATE);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(p_cuStreamEndCapture(s, &g));
    ck_assert_uint_eq(node_count(g), 0);
    OK(p_cuGraphDestroy(g));
    /* a NULL graph pointer ends the capture, discarding the graph */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 1, 0));
    OK(p_cuStreamEndCapture(s, NULL));
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(per_thread_stream_variants_capture_the_per_thread_stream)
{
    CUgraph g = NULL;
    recap__fill_params_t p;
    void *args[] = {&p};

    memset(&p, 0, sizeof(p));
    p.dst = buf_a;
    p.n = NWORDS;
    OK(p_cuStreamBeginCapture_v2_ptsz(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(capture_status(CU_STREAM_PER_THREAD), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    /* the per-thread stream is blocking: the legacy stream would depend on it */
    {
        CUstreamCaptureStatus st;
        CK(p_cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    }
    OK(p_cuLaunchKernel_ptsz(k_fill, 2, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    OK(p_cuStreamEndCapture_ptsz(NULL, &g));
    ck_assert_uint_eq(node_count(g), 1);
    ck_assert(all_zero(buf_a));
    OK(p_cuGraphDestroy(g));
    check_no_leaks();
}
END_TEST

void double_add_capture_tests(TCase *tc)
{
    tcase_add_test(tc, capture_records_kernel_nodes_without_running_them);
    tcase_add_test(tc, graph_launch_writes_what_eager_launch_writes);
    tcase_add_test(tc, k_graph_launches_run_the_nodes_k_times);
    tcase_add_test(tc, capture_ids_are_unique_and_increasing);
    tcase_add_test(tc, begin_and_end_capture_errors);
    tcase_add_test(tc, per_thread_stream_variants_capture_the_per_thread_stream);
}
