/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double against the driver's rules: graphs: instantiation, clones, upload, launches
 * into captures, accounting. */
#include "test_double.h"

static CUDA_KERNEL_NODE_PARAMS fill_node(recap__fill_params_t *p, void **args, CUdeviceptr dst)
{
    CUDA_KERNEL_NODE_PARAMS kp;

    memset(p, 0, sizeof(*p));
    p->dst = dst;
    p->n = NWORDS;
    p->philox.seed = 99;
    recap__fill_keys(99, &p->keys);
    args[0] = p;
    memset(&kp, 0, sizeof(kp));
    kp.func = k_fill;
    kp.gridDimX = 2;
    kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 64;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    return kp;
}

START_TEST(instantiate_takes_a_snapshot)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e;
    CUgraphNode node;
    recap__fill_params_t fp;
    void *args[1];
    CUDA_KERNEL_NODE_PARAMS kp = fill_node(&fp, args, buf_b);

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(advance(s, 3));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    OK(p_cuGraphAddKernelNode_v2(&node, g, NULL, 0, &kp));
    ck_assert_uint_eq(node_count(g), 2);
    if (d_node_count != NULL)
        ck_assert_uint_eq(d_node_count((CUgraph)e), 1);
    OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    ck_assert_uint_eq(slot_offset(), 3);
    ck_assert(all_zero(buf_b)); /* the node added later is not in the executable */
    /* the executable outlives its graph */
    OK(p_cuGraphDestroy(g));
    OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    ck_assert_uint_eq(slot_offset(), 6);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(clone_is_a_deep_copy)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g, c;
    CUgraphExec e;
    CUgraphNode node;
    recap__fill_params_t fp;
    void *args[1];
    CUDA_KERNEL_NODE_PARAMS kp = fill_node(&fp, args, buf_b);
    uint32_t want[NWORDS], got[NWORDS];

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 11, 8));
    OK(advance(s, 1));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphClone(&c, g));
    ck_assert_uint_eq(node_count(c), 2);
    OK(p_cuGraphAddKernelNode_v2(&node, g, NULL, 0, &kp)); /* the original changes, not the clone */
    ck_assert_uint_eq(node_count(g), 3);
    ck_assert_uint_eq(node_count(c), 2);
    OK(p_cuGraphDestroy(g));
    OK(p_cuGraphInstantiateWithFlags(&e, c, 0));
    OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    ck_assert_uint_eq(slot_offset(), 1);
    ck_assert(all_zero(buf_b));
    read_words(buf_a, got, NWORDS);
    OK(fill(s, buf_b, 11, 8));
    OK(p_cuStreamSynchronize(s));
    read_words(buf_b, want, NWORDS);
    ck_assert_mem_eq(got, want, sizeof(got));
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(c));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(instantiate_variants_and_upload)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e1, e2, e3, e4;
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    CUgraphNode err = NULL;
    char log[32] = "x";

    OK(p_cuGraphCreate(&g, 0));
    ck_assert_uint_eq(node_count(g), 0);
    OK(p_cuGraphDestroy(g));
    CK(p_cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(advance(s, 5));
    OK(p_cuStreamEndCapture(s, &g));
    memset(&ip, 0, sizeof(ip));
    ip.result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
    OK(p_cuGraphInstantiateWithParams(&e1, g, &ip));
    ck_assert_int_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
    OK(p_cuGraphInstantiate(&e2, g, &err, log, sizeof(log)));
    OK(p_cuGraphInstantiate_v2(&e3, g, &err, log, sizeof(log)));
    OK(p_cuGraphInstantiateWithFlags(&e4, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    OK(p_cuGraphUpload(e1, s));
    OK(p_cuGraphLaunch(e1, s));
    OK(p_cuGraphLaunch(e2, s));
    OK(p_cuGraphLaunch_ptsz(e3, s));
    OK(p_cuStreamSynchronize(s)); /* the legacy stream does not wait for a non-blocking one */
    OK(p_cuGraphLaunch(e4, NULL));
    OK(p_cuStreamSynchronize(NULL));
    ck_assert_uint_eq(slot_offset(), 20);
    OK(p_cuGraphExecDestroy(e1));
    OK(p_cuGraphExecDestroy(e2));
    OK(p_cuGraphExecDestroy(e3));
    OK(p_cuGraphExecDestroy(e4));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(graph_launch_into_a_capture_is_unsupported)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(advance(s, 1));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuGraphLaunch(e, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CK(p_cuGraphLaunch(e, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); /* not ..._INVALIDATED */
    end_invalidated(s);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(p_cuGraphLaunch(e, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); /* whatever the mode */
    end_invalidated(s);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuGraphUpload(e, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated(s);
    ck_assert_uint_eq(slot_offset(), 0);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(instantiate_and_exec_destroy_are_potentially_unsafe)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING), o = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g, g2, c, live;
    CUgraphExec e, e2 = NULL;
    CUstreamCaptureStatus st;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(advance(s, 1));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    /* in a GLOBAL capture: instantiating (any graph) and destroying an executable are refused */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuGraphInstantiateWithFlags(&e2, g, 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated(s);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(p_cuGraphExecDestroy(e), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated(s);
    /* other graph and stream calls are not */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuGraphCreate(&g2, 0));
    OK(p_cuGraphClone(&c, g));
    OK(p_cuGraphDestroy(c));
    OK(p_cuGraphDestroy(g2));
    OK(p_cuGraphLaunch(e, o));
    OK(p_cuGraphUpload(e, o));
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(p_cuStreamEndCapture(s, &c));
    OK(p_cuGraphDestroy(c));
    /* in a RELAXED capture even the graph being captured can be instantiated */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(advance(s, 1));
    OK(p_cuStreamGetCaptureInfo_v2(s, &st, NULL, &live, NULL, NULL));
    OK(p_cuGraphInstantiateWithFlags(&e2, live, 0));
    OK(p_cuGraphExecDestroy(e2));
    OK(p_cuStreamEndCapture(s, &c));
    OK(p_cuGraphDestroy(c));
    OK(p_cuStreamSynchronize(o));
    ck_assert_uint_eq(slot_offset(), 1);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    OK(p_cuStreamDestroy_v2(o));
    check_no_leaks();
}
END_TEST

/* Captured memory operations are not checked when captured: memsets at instantiation, stream
 * writes when a launch reaches them (the nodes before have run then). */
START_TEST(memory_operation_nodes_are_checked_at_instantiate_or_launch)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e = NULL;

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuMemsetD32Async(slot, 1, 1000, s)); /* 4000 bytes into 16 */
    OK(p_cuStreamEndCapture(s, &g));
    CK(p_cuGraphInstantiateWithFlags(&e, g, 0), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuGraphDestroy(g));
    CK(p_cuMemsetD32Async(slot, 1, 1000, s), CUDA_ERROR_INVALID_VALUE);

    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(advance(s, 1));
    OK(p_cuStreamWriteValue64_v2(s, (CUdeviceptr)0x10, 7, 0));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    CK(p_cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuStreamSynchronize(s));
    ck_assert_uint_eq(slot_offset(), 1);
    CK(p_cuStreamWriteValue64_v2(s, (CUdeviceptr)0x10, 7, 0), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuStreamWriteValue64_v2(s, slot + 4, 7, 0), CUDA_ERROR_INVALID_VALUE); /* misaligned */
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(destroyed_handles_are_accounted_and_refused)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g, c, empty;
    CUgraphExec e;

    if (!is_double())
        return; /* a real driver may crash on a destroyed handle */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ck_assert_int_eq(d_live_graphs(), base_graphs + 1); /* the graph being captured */
    OK(fill(s, buf_a, 1, 0));
    OK(p_cuStreamEndCapture(s, &g));
    OK(p_cuGraphClone(&c, g));
    OK(p_cuGraphCreate(&empty, 0));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    ck_assert_int_eq(d_live_graphs(), base_graphs + 3);
    ck_assert_int_eq(d_live_execs(), base_execs + 1);
    OK(p_cuGraphDestroy(g));
    OK(p_cuGraphDestroy(c));
    OK(p_cuGraphDestroy(empty));
    OK(p_cuGraphExecDestroy(e));
    check_no_leaks();
    CK(p_cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuGraphExecDestroy(e), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuGraphInstantiateWithFlags(&e, g, 0), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuGraphClone(&c, (CUgraph)&c), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(d_node_count(g), 0);
    /* an invalidated capture's graph goes with it */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fill(s, buf_a, 1, 0));
    CK(p_cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated(s);
    /* as does the graph of a capture ended with no graph pointer, or whose stream is destroyed */
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamEndCapture(s, NULL));
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

void double_add_graphs_tests(TCase *tc)
{
    tcase_add_test(tc, instantiate_takes_a_snapshot);
    tcase_add_test(tc, clone_is_a_deep_copy);
    tcase_add_test(tc, instantiate_variants_and_upload);
    tcase_add_test(tc, graph_launch_into_a_capture_is_unsupported);
    tcase_add_test(tc, instantiate_and_exec_destroy_are_potentially_unsafe);
    tcase_add_test(tc, memory_operation_nodes_are_checked_at_instantiate_or_launch);
    tcase_add_test(tc, destroyed_handles_are_accounted_and_refused);
}
