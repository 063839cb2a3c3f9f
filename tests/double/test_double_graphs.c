/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double against the driver's rules: graphs: instantiation, clones, upload, launches
 * into captures, accounting, edges read node by node. */
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

typedef struct {
    CUgraphNode from, to;
} edge_t;

static int edge_cmp(const void *a, const void *b)
{
    const edge_t *x = a, *y = b;
    uintptr_t p = (uintptr_t)x->from, q = (uintptr_t)y->from;

    if (p == q) {
        p = (uintptr_t)x->to;
        q = (uintptr_t)y->to;
    }
    return p < q ? -1 : p > q;
}

/* Graph g's edges read node by node (each node's dependents, through both versions, with room
 * for a few more than there are) are its edges read at once (cuGraphGetEdges_v2): each found
 * once, the counts theirs. */
static void dependents_are_the_edges(CUgraph g)
{
    size_t count = 0, ne = 0, i, k = 0, extra = 1 + tu_rand_below(3);
    CUgraphNode *nodes, *from, *to, *deps;
    CUgraphEdgeData *data;
    edge_t *all, *per;

    OK(p_cuGraphGetNodes(g, NULL, &count));
    OK(p_cuGraphGetEdges_v2(g, NULL, NULL, NULL, &ne));
    nodes = calloc(count + 1, sizeof(*nodes));
    from = calloc(ne + 1, sizeof(*from));
    to = calloc(ne + 1, sizeof(*to));
    deps = calloc(ne + extra, sizeof(*deps));
    data = calloc(ne + extra, sizeof(*data));
    all = calloc(ne + 1, sizeof(*all));
    per = calloc(ne + 1, sizeof(*per));
    ck_assert(nodes && from && to && deps && data && all && per);
    if (count > 0)
        OK(p_cuGraphGetNodes(g, nodes, &count));
    if (ne > 0)
        OK(p_cuGraphGetEdges_v2(g, from, to, NULL, &ne));
    for (i = 0; i < ne; i++) {
        all[i].from = from[i];
        all[i].to = to[i];
    }
    for (i = 0; i < count; i++) {
        size_t n = SIZE_MAX, n1 = SIZE_MAX, want, j;

        OK(p_cuGraphNodeGetDependentNodes_v2(nodes[i], NULL, NULL, &n));
        OK(p_cuGraphNodeGetDependentNodes(nodes[i], NULL, &n1));
        ck_assert_uint_eq(n, n1);
        ck_assert_uint_le(k + n, ne);
        want = n;
        n += extra;
        memset(data, 0xff, n * sizeof(*data));
        OK(p_cuGraphNodeGetDependentNodes_v2(nodes[i], deps, data, &n));
        ck_assert_uint_eq(n, want);
        for (j = 0; j < want + extra; j++) { /* the rest of the array: NULL, as documented */
            ck_assert(j < want ? deps[j] != NULL : deps[j] == NULL);
            ck_assert_int_eq(data[j].type, CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
            ck_assert_int_eq(data[j].from_port, 0);
        }
        for (j = 0; j < want; j++) {
            per[k + j].from = nodes[i];
            per[k + j].to = deps[j];
        }
        n1 = want + extra;
        OK(p_cuGraphNodeGetDependentNodes(nodes[i], deps, &n1));
        ck_assert_uint_eq(n1, want);
        for (j = 0; j < want; j++)
            ck_assert_ptr_eq(deps[j], per[k + j].to);
        k += want;
    }
    ck_assert_uint_eq(k, ne);
    qsort(all, ne, sizeof(*all), edge_cmp);
    qsort(per, ne, sizeof(*per), edge_cmp);
    for (i = 0; i < ne; i++) {
        ck_assert_ptr_eq(all[i].from, per[i].from);
        ck_assert_ptr_eq(all[i].to, per[i].to);
    }
    free(nodes);
    free(from);
    free(to);
    free(deps);
    free(data);
    free(all);
    free(per);
}

/* Random graphs of empty nodes and child graph nodes (a child with edges of its own), edges to
 * earlier nodes, then more edges added: node by node, the edges found are the graph's, in the
 * graph, its clone, a child's embedded graph and a captured graph. */
START_TEST(dependent_nodes_are_the_graphs_edges)
{
    CUstream s = new_stream(CU_STREAM_NON_BLOCKING);
    int round;

    for (round = 0; round < 8; round++) {
        size_t n = 1 + tu_rand_below(60), i, j, nd;
        CUgraphNode *node = calloc(n, sizeof(*node)), *d = calloc(n, sizeof(*d)), c3[3], last;
        unsigned char *edge = calloc(n * n, 1); /* edge[i * n + j]: i -> j */
        CUgraph g, child, clone, embedded, captured;

        ck_assert(node && d && edge);
        OK(p_cuGraphCreate(&child, 0));
        for (i = 0; i < 3; i++)
            OK(p_cuGraphAddEmptyNode(&c3[i], child, i > 0 ? &c3[0] : NULL, i > 0));
        OK(p_cuGraphAddDependencies(child, &c3[1], &c3[2], 1));
        OK(p_cuGraphCreate(&g, 0));
        for (i = 0; i < n; i++) {
            for (j = 0, nd = 0; j < i; j++)
                if (tu_rand_below(4) == 0 && nd < 8) {
                    d[nd++] = node[j];
                    edge[j * n + i] = 1;
                }
            if (tu_rand_below(2))
                OK(p_cuGraphAddEmptyNode(&node[i], g, d, nd));
            else
                OK(p_cuGraphAddChildGraphNode(&node[i], g, d, nd, child));
        }
        dependents_are_the_edges(g);
        for (i = 0; n > 1 && i < 2 * n; i++) { /* new edges (forward, each once) after a query */
            size_t a = tu_rand_below(n - 1), b = a + 1 + tu_rand_below(n - a - 1);
            if (!edge[a * n + b]) {
                OK(p_cuGraphAddDependencies(g, &node[a], &node[b], 1));
                edge[a * n + b] = 1;
            }
        }
        dependents_are_the_edges(g);
        OK(p_cuGraphAddEmptyNode(&last, g, node, n)); /* and a node after all */
        dependents_are_the_edges(g);
        OK(p_cuGraphClone(&clone, g));
        dependents_are_the_edges(clone);
        for (i = 0; i < n; i++) /* the first child graph node's graph */
            if (p_cuGraphChildGraphNodeGetGraph(node[i], &embedded) == CUDA_SUCCESS) {
                dependents_are_the_edges(embedded);
                break;
            }
        OK(p_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (i = 0; i < 1 + (size_t)round % 3; i++)
            OK(fill(s, buf_a, 1, 0));
        OK(p_cuStreamEndCapture(s, &captured));
        dependents_are_the_edges(captured);
        OK(p_cuGraphDestroy(captured));
        OK(p_cuGraphDestroy(clone));
        OK(p_cuGraphDestroy(g));
        OK(p_cuGraphDestroy(child));
        free(node);
        free(d);
        free(edge);
    }
    OK(p_cuStreamDestroy_v2(s));
    check_no_leaks();
}
END_TEST

/* The driver's argument checks: a NULL count, an array with a count of 0 (the H200's 580 driver
 * refuses it, as it does for cuGraphGetEdges and cuGraphGetNodes), edge data without the node
 * array (documented); on the double, a node of no live graph too. */
START_TEST(dependent_nodes_argument_checks)
{
    CUgraphNode a, b, out[2];
    CUgraphEdgeData data[2];
    CUgraph g;
    size_t n;

    OK(p_cuGraphCreate(&g, 0));
    OK(p_cuGraphAddEmptyNode(&a, g, NULL, 0));
    OK(p_cuGraphAddEmptyNode(&b, g, &a, 1));
    CK(p_cuGraphNodeGetDependentNodes_v2(a, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuGraphNodeGetDependentNodes(a, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    n = 0;
    CK(p_cuGraphNodeGetDependentNodes_v2(a, out, NULL, &n), CUDA_ERROR_INVALID_VALUE);
    n = 0;
    CK(p_cuGraphNodeGetDependentNodes_v2(b, out, data, &n), CUDA_ERROR_INVALID_VALUE);
    n = 0;
    CK(p_cuGraphNodeGetDependentNodes(b, out, &n), CUDA_ERROR_INVALID_VALUE);
    n = 2;
    CK(p_cuGraphNodeGetDependentNodes_v2(a, NULL, data, &n), CUDA_ERROR_INVALID_VALUE);
    n = 2;
    OK(p_cuGraphNodeGetDependentNodes_v2(a, out, data, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_ptr_eq(out[0], b);
    ck_assert_ptr_null(out[1]);
    n = 7;
    OK(p_cuGraphNodeGetDependentNodes(b, NULL, &n)); /* none: the count only */
    ck_assert_uint_eq(n, 0);
    OK(p_cuGraphDestroy(g));
    if (!is_double())
        return; /* a real driver may crash on a destroyed handle */
    n = 2;
    CK(p_cuGraphNodeGetDependentNodes_v2(a, NULL, NULL, &n), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuGraphNodeGetDependentNodes(b, out, &n), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuGraphNodeGetDependentNodes_v2(NULL, NULL, NULL, &n), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuGraphNodeGetDependentNodes_v2((CUgraphNode)&n, NULL, NULL, &n), CUDA_ERROR_INVALID_VALUE);
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
    tcase_add_test(tc, dependent_nodes_are_the_graphs_edges);
    tcase_add_test(tc, dependent_nodes_argument_checks);
}
