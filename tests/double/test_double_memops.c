/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double against the driver's rules: stream memory operations, async copies and
 * memsets in captures; the double's fault injection. */
#include "test_double.h"

START_TEST(stream_write_value_in_capture_becomes_a_node)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e;
    uint64_t v[2];
    unsigned long ops;
    int attr = 0;

    OK(p_cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 0));
    ck_assert_int_eq(attr, 1);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuStreamWriteValue64_v2(s, slot, 0x1122334455667788ull, 0));
    OK(p_cuStreamWriteValue32_v2(s, slot + 8, 0xabcdef01u, 0));
    OK(p_cuStreamEndCapture(s, &g));
    ck_assert_uint_eq(node_count(g), 2);
    OK(p_cuMemcpyDtoH_v2(v, slot, sizeof(v)));
    ck_assert_uint_eq(v[0], 0);
    ck_assert_uint_eq(v[1], 0);
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    ops = is_double() ? d_stream_ops() : 0;
    OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    if (is_double())
        ck_assert_uint_eq(d_stream_ops() - ops, 2);
    OK(p_cuMemcpyDtoH_v2(v, slot, sizeof(v)));
    ck_assert_uint_eq(v[0], 0x1122334455667788ull);
    ck_assert_uint_eq(v[1], 0xabcdef01u);
    /* outside a capture the write happens on the stream at once */
    OK(p_cuStreamWriteValue64_v2(s, slot, 5, 0));
    OK(p_cuStreamSynchronize(s));
    OK(p_cuMemcpyDtoH_v2(v, slot, sizeof(v)));
    ck_assert_uint_eq(v[0], 5);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

START_TEST(async_copies_and_memsets_in_capture_become_nodes)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec e;
    static uint32_t in[64], out[64];
    uint32_t w[64];
    unsigned long ops;

    for (int i = 0; i < 64; i++)
        in[i] = 1000u + (uint32_t)i;
    memset(out, 0, sizeof(out));
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(p_cuMemsetD32Async(buf_a, 0x5a5a5a5au, 64, s));
    OK(p_cuMemcpyHtoDAsync_v2(buf_b, in, sizeof(in), s));
    OK(p_cuMemcpyDtoHAsync_v2(out, buf_a, sizeof(out), s));
    OK(p_cuStreamEndCapture(s, &g));
    ck_assert_uint_eq(node_count(g), 3);
    ck_assert(all_zero(buf_a));
    ck_assert(all_zero(buf_b));
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    in[0] = 7; /* copies read host memory when they run */
    ops = is_double() ? d_stream_ops() : 0;
    OK(p_cuGraphLaunch(e, s));
    OK(p_cuStreamSynchronize(s));
    if (is_double())
        ck_assert_uint_eq(d_stream_ops() - ops, 3);
    for (int i = 0; i < 64; i++)
        ck_assert_uint_eq(out[i], 0x5a5a5a5au);
    read_words(buf_b, w, 64);
    ck_assert_uint_eq(w[0], 7);
    ck_assert_uint_eq(w[63], 1063);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

/* ------------------------------------------------------------------ the double's own knobs */

START_TEST(fault_injection_fails_the_next_calls)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr p = 0;
    CUgraph g;
    CUgraphExec e;

    if (!is_double())
        return;
    d_fail_next("cuMemAlloc_v2", 2);
    CK(p_cuMemAlloc_v2(&p, 64), CUDA_ERROR_OUT_OF_MEMORY);
    CK(p_cuMemAlloc_v2(&p, 64), CUDA_ERROR_OUT_OF_MEMORY);
    OK(p_cuMemAlloc_v2(&p, 64));
    OK(p_cuMemFree_v2(p));
    d_fail_next("cuStreamBeginCapture_v2", 1);
    CK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_UNKNOWN);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(advance(s, 1));
    d_fail_next("cuStreamEndCapture", 1);
    CK(p_cuStreamEndCapture(s, &g), CUDA_ERROR_UNKNOWN);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE); /* untouched */
    OK(p_cuStreamEndCapture(s, &g));
    d_fail_next("cuGraphInstantiateWithFlags", 1);
    CK(p_cuGraphInstantiateWithFlags(&e, g, 0), CUDA_ERROR_UNKNOWN);
    OK(p_cuGraphInstantiateWithFlags(&e, g, 0));
    d_fail_next("cuGraphLaunch", 3);
    d_fail_next("cuGraphLaunch", 1); /* re-arming replaces the count */
    CK(p_cuGraphLaunch(e, s), CUDA_ERROR_UNKNOWN);
    OK(p_cuGraphLaunch(e, s));
    ck_assert_uint_eq(slot_offset(), 1); /* the failed launch ran nothing */
    d_fail_next("cuLaunchKernel", 1);
    d_fail_next("cuLaunchKernel", 0); /* disarmed */
    OK(advance(s, 1));
    /* each export counts on its own: the _ptsz variant is another function */
    d_fail_next("cuGraphLaunch_ptsz", 1);
    OK(p_cuGraphLaunch(e, s));
    CK(p_cuGraphLaunch_ptsz(e, s), CUDA_ERROR_UNKNOWN);
    ck_assert_uint_eq(slot_offset(), 3);
    OK(p_cuGraphExecDestroy(e));
    OK(p_cuGraphDestroy(g));
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

void double_add_memops_tests(TCase *tc)
{
    tcase_add_test(tc, stream_write_value_in_capture_becomes_a_node);
    tcase_add_test(tc, async_copies_and_memsets_in_capture_become_nodes);
    tcase_add_test(tc, fault_injection_fails_the_next_calls);
}
