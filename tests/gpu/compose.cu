// SPDX-License-Identifier: Apache-2.0
// Graph composition on the real driver, through the CUDA runtime as a user writes it: a captured
// graph whose kernel draws from a recap generator, embedded with cudaGraphAddChildGraphNode (in a
// parent, nested and twice, in two parents, the parent cloned), exec updates
// (cudaGraphExecUpdate, cudaGraphExecChildGraphNodeSetParams), upload before the first launch,
// two execs sharing the generator launched on two streams without host synchronization; each K
// launches checked word for word against K eager runs of a twin generator, and the generator's
// state after them. And the refusals: two unordered child nodes drawing from one generator, a
// conditional body that draws, a device-launch exec that draws (recap_last_error names why).
//   compose hooked [--cupti]   recap learns everything through its front end (LD_PRELOAD,
//                              CUDA_INJECTION64_PATH, or CUPTI with --cupti)
//   compose explicit           no front end: the program reports each event itself
// Prints "compose: <case>: ..." per case and "compose: N passed, M failed"; exit 0 when all pass.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "recap.h"
#include "draw.cuh"
#include "gpu_check.h"

static int explicit_mode, passed, failed;
static const int N = 1 << 18, KW = 4; // words per launch: N * KW

static void result(const char *what, bool ok, const char *detail)
{
    printf("compose: %s: %s%s%s\n", what, ok ? "ok" : "FAIL", detail[0] ? " - " : "", detail);
    if (ok)
        passed++;
    else
        failed++;
}

static void draw_into(recap_generator_h g, cudaStream_t s, uint32_t *buf, int n)
{
    recap_philox_args_t a;
    CR(recap_generator_reserve(g, s, KW, &a));
    draw<<<(n + 255) / 256, 256, 0, s>>>(a, buf, n, KW);
    CK(cudaGetLastError());
}

static cudaGraph_t capture(recap_generator_h g, cudaStream_t s, uint32_t *buf, int n)
{
    cudaGraph_t graph;
    if (explicit_mode)
        CR(recap_capture_will_begin(s, RECAP_CAPTURE_GLOBAL));
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    if (explicit_mode)
        CR(recap_capture_began(s));
    draw_into(g, s, buf, n);
    if (explicit_mode)
        CR(recap_capture_will_end(s));
    CK(cudaStreamEndCapture(s, &graph));
    if (explicit_mode)
        CR(recap_capture_ended(s, graph));
    return graph;
}

// The thread's last recap error, overwritten with a known one (a call recap refuses at once):
// after a host call, a refusal the front end reported on this thread shows there.
static void clear_last_error()
{
    recap_capture_stats(NULL);
}

static bool refused_here()
{
    const char *m = recap_last_error();
    return strstr(m, "without an order") || strstr(m, "conditional node") ||
           strstr(m, "device-side launch") || strstr(m, "advance node");
}

// Instantiates; returns recap's verdict (explicit: its status; hooked: whether the front end's
// call left a refusal in this thread's last error).
static recap_status_t instantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags)
{
    recap_status_t st = RECAP_OK;
    clear_last_error();
    CK(cudaGraphInstantiate(e, g, flags));
    if (explicit_mode)
        st = recap_graph_instantiated(g, *e);
    else if (refused_here())
        st = RECAP_ERR_UNSUPPORTED;
    return st;
}

static void launch(cudaGraphExec_t e, cudaStream_t s)
{
    if (explicit_mode)
        CR(recap_graph_will_launch(e, s));
    CK(cudaGraphLaunch(e, s));
    if (explicit_mode)
        CR(recap_graph_launched(e, s));
}

static void destroy_exec(cudaGraphExec_t e)
{
    if (explicit_mode)
        CR(recap_graph_exec_destroyed(e));
    CK(cudaGraphExecDestroy(e));
}

struct rig {
    recap_generator_h g, twin;
    cudaStream_t s;
    uint32_t *buf, *tbuf;
    std::vector<uint32_t> got, want;
};

static void rig_init(rig &r, uint64_t seed)
{
    CK(cudaStreamCreateWithFlags(&r.s, cudaStreamNonBlocking));
    CK(cudaMalloc(&r.buf, (size_t)2 * N * KW * 4));
    CK(cudaMalloc(&r.tbuf, (size_t)2 * N * KW * 4));
    CR(recap_generator_create(0, &r.g));
    CR(recap_generator_create(0, &r.twin));
    CR(recap_generator_manual_seed(r.g, seed));
    CR(recap_generator_manual_seed(r.twin, seed));
    r.got.resize((size_t)2 * N * KW);
    r.want.resize((size_t)2 * N * KW);
}

static void rig_free(rig &r)
{
    CR(recap_generator_destroy(r.g));
    CR(recap_generator_destroy(r.twin));
    CK(cudaFree(r.buf));
    CK(cudaFree(r.tbuf));
    CK(cudaStreamDestroy(r.s));
}

// Whether buf (n threads' words at `at`) equals the last of `runs` eager draws of the twin.
static bool matches_eager(rig &r, size_t at, int n, int runs)
{
    size_t words = (size_t)n * KW;
    CK(cudaStreamSynchronize(r.s));
    CK(cudaMemcpy(r.got.data(), r.buf + at, words * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < runs; i++)
        draw_into(r.twin, r.s, r.tbuf, n);
    CK(cudaStreamSynchronize(r.s));
    CK(cudaMemcpy(r.want.data(), r.tbuf, words * 4, cudaMemcpyDeviceToHost));
    return memcmp(r.got.data(), r.want.data(), words * 4) == 0;
}

static bool same_state(rig &r)
{
    uint8_t a[RECAP_STATE_BYTES], b[RECAP_STATE_BYTES];
    CR(recap_generator_get_state(r.g, a));
    CR(recap_generator_get_state(r.twin, b));
    return memcmp(a, b, sizeof(a)) == 0;
}

static bool launch_k(rig &r, cudaGraphExec_t e, int n, int runs, int K)
{
    bool ok = true;
    for (int k = 0; k < K; k++) {
        launch(e, r.s);
        ok &= matches_eager(r, 0, n, runs);
    }
    return ok && same_state(r);
}

static void case_child(rig &r)
{
    cudaGraph_t c = capture(r.g, r.s, r.buf, N), p, mid, p2, clone;
    cudaGraphNode_t a, b;
    cudaGraphExec_t e;
    CK(cudaGraphCreate(&p, 0));
    CK(cudaGraphAddChildGraphNode(&a, p, NULL, 0, c));
    if (instantiate(&e, p, 0) != RECAP_OK) {
        result("child graph node", false, recap_last_error());
        return;
    }
    result("child graph node, 5 launches = 5 eager runs", launch_k(r, e, N, 1, 5), "");
    destroy_exec(e);
    // a child in a child, then the same child again after it
    CK(cudaGraphCreate(&mid, 0));
    CK(cudaGraphAddChildGraphNode(&a, mid, NULL, 0, c));
    CK(cudaGraphCreate(&p2, 0));
    CK(cudaGraphAddChildGraphNode(&a, p2, NULL, 0, mid));
    CK(cudaGraphAddChildGraphNode(&b, p2, &a, 1, c));
    CR(instantiate(&e, p2, 0));
    result("child in a child, and the child twice in order", launch_k(r, e, N, 2, 4), "");
    destroy_exec(e);
    // the parent cloned, the original child destroyed
    CK(cudaGraphClone(&clone, p));
    if (explicit_mode)
        CR(recap_graph_cloned(p, clone));
    cudaGraphExec_t e1, e2;
    CR(instantiate(&e1, p, 0));
    CR(instantiate(&e2, clone, 0));
    bool ok = true;
    for (int k = 0; k < 6; k++) {
        launch(k % 2 ? e2 : e1, r.s);
        ok &= matches_eager(r, 0, N, 1);
    }
    result("one child in a parent and its clone, alternating", ok && same_state(r), "");
    destroy_exec(e1);
    destroy_exec(e2);
    // unordered children of one generator: refused
    cudaGraph_t bad;
    CK(cudaGraphCreate(&bad, 0));
    CK(cudaGraphAddChildGraphNode(&a, bad, NULL, 0, c));
    CK(cudaGraphAddChildGraphNode(&b, bad, NULL, 0, c));
    recap_status_t st = instantiate(&e, bad, 0);
    result("two unordered child nodes of one generator are refused", st == RECAP_ERR_UNSUPPORTED,
           recap_last_error());
    destroy_exec(e);
    for (cudaGraph_t g : {p, mid, p2, clone, bad, c})
        CK(cudaGraphDestroy(g));
}

static void case_update(rig &r)
{
    recap_generator_h h;
    CR(recap_generator_create(0, &h));
    CR(recap_generator_manual_seed(h, 77));
    cudaGraph_t a = capture(r.g, r.s, r.buf, N), more = capture(r.g, r.s, r.buf, 2 * N),
                fewer = capture(r.g, r.s, r.buf, N / 2), other = capture(h, r.s, r.buf, N);
    cudaGraphExec_t e;
    cudaGraphExecUpdateResultInfo info;
    CR(instantiate(&e, a, 0));
    bool ok = launch_k(r, e, N, 1, 3);
    CK(cudaGraphExecUpdate(e, more, &info));
    if (explicit_mode)
        CR(recap_graph_exec_updated(e, more));
    ok &= launch_k(r, e, 2 * N, 1, 3);
    CK(cudaGraphExecUpdate(e, fewer, &info));
    if (explicit_mode)
        CR(recap_graph_exec_updated(e, fewer));
    ok &= launch_k(r, e, N / 2, 1, 3);
    CK(cudaGraphExecUpdate(e, other, &info));
    if (explicit_mode)
        CR(recap_graph_exec_updated(e, other));
    launch(e, r.s);
    CK(cudaStreamSynchronize(r.s));
    ok &= same_state(r);
    result("cudaGraphExecUpdate to more, fewer, no draws of the generator", ok, "");
    destroy_exec(e);
    // a child graph node's update in the exec
    cudaGraph_t p;
    cudaGraphNode_t node;
    CK(cudaGraphCreate(&p, 0));
    CK(cudaGraphAddChildGraphNode(&node, p, NULL, 0, a));
    CR(instantiate(&e, p, 0));
    ok = launch_k(r, e, N, 1, 2);
    CK(cudaGraphExecChildGraphNodeSetParams(e, node, more));
    if (explicit_mode)
        CR(recap_graph_exec_child_updated(e, node, more));
    ok &= launch_k(r, e, 2 * N, 1, 3);
    result("cudaGraphExecChildGraphNodeSetParams", ok, "");
    destroy_exec(e);
    for (cudaGraph_t g : {p, a, more, fewer, other})
        CK(cudaGraphDestroy(g));
    CR(recap_generator_destroy(h));
}

static void case_upload_and_streams(rig &r)
{
    cudaGraph_t c1 = capture(r.g, r.s, r.buf, N);
    cudaGraphExec_t e1, e2;
    CR(instantiate(&e1, c1, 0));
    CK(cudaGraphUpload(e1, r.s));
    result("cudaGraphUpload before the first launch", launch_k(r, e1, N, 1, 3), "");
    // two execs sharing the generator on two streams, no host synchronization between launches
    cudaStream_t s2;
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaGraph_t c2 = capture(r.g, s2, r.buf + (size_t)N * KW, N);
    CR(instantiate(&e2, c2, 0));
    const int R = 8;
    std::vector<uint32_t> all((size_t)R * 2 * N * KW);
    cudaEvent_t copied;
    CK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
    for (int k = 0; k < R; k++) {
        launch(e1, r.s); // recap orders it after the last e2 (and e2 after it)
        launch(e2, s2);
        CK(cudaMemcpyAsync(&all[(size_t)k * 2 * N * KW], r.buf, (size_t)2 * N * KW * 4,
                           cudaMemcpyDeviceToHost, s2));
        // the copy is the program's own work: the next e1 must not overwrite buf under it
        CK(cudaEventRecord(copied, s2));
        CK(cudaStreamWaitEvent(r.s, copied, 0));
    }
    CK(cudaStreamSynchronize(s2));
    CK(cudaStreamSynchronize(r.s));
    CK(cudaEventDestroy(copied));
    bool ok = true;
    for (int k = 0; k < R; k++)
        for (int half = 0; half < 2; half++) {
            draw_into(r.twin, r.s, r.tbuf, N);
            CK(cudaStreamSynchronize(r.s));
            CK(cudaMemcpy(r.want.data(), r.tbuf, (size_t)N * KW * 4, cudaMemcpyDeviceToHost));
            ok &= memcmp(&all[((size_t)k * 2 + half) * N * KW], r.want.data(), (size_t)N * KW * 4) == 0;
        }
    result("two execs of one generator on two streams", ok && same_state(r), "");
    destroy_exec(e1);
    destroy_exec(e2);
    CK(cudaGraphDestroy(c1));
    CK(cudaGraphDestroy(c2));
    CK(cudaStreamDestroy(s2));
}

static void case_refusals(rig &r)
{
    cudaGraph_t c = capture(r.g, r.s, r.buf, N), p;
    cudaGraphExec_t e;
    // a conditional body that draws
    cudaGraphConditionalHandle h;
    CK(cudaGraphCreate(&p, 0));
    CK(cudaGraphConditionalHandleCreate(&h, p, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams np = {}; // value-initialized: every reserved byte zero
    np.type = cudaGraphNodeTypeConditional;
    np.conditional.handle = h;
    np.conditional.type = cudaGraphCondTypeIf;
    np.conditional.size = 1;
    cudaGraphNode_t node, inner;
    CK(cudaGraphAddNode(&node, p, NULL, NULL, 0, &np));
    if (explicit_mode)
        CR(recap_graph_conditional_added(p, node, (recap_graph_t *)np.conditional.phGraph_out, 1));
    CK(cudaGraphAddChildGraphNode(&inner, np.conditional.phGraph_out[0], NULL, 0, c));
    recap_status_t st = instantiate(&e, p, 0);
    result("a conditional body that draws is refused", st == RECAP_ERR_UNSUPPORTED, recap_last_error());
    destroy_exec(e);
    CK(cudaGraphDestroy(p));
    // a device-launch exec that draws
    clear_last_error();
    cudaError_t rc = cudaGraphInstantiate(&e, c, cudaGraphInstantiateFlagDeviceLaunch);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        result("a device-launch exec that draws is refused", true,
               "the driver itself refuses to instantiate it for device launch");
    } else {
        st = explicit_mode ? recap_graph_instantiated(c, e)
                           : refused_here() ? RECAP_ERR_UNSUPPORTED : RECAP_OK;
        result("a device-launch exec that draws is refused", st == RECAP_ERR_UNSUPPORTED,
               recap_last_error());
        destroy_exec(e);
    }
    CK(cudaGraphDestroy(c));
}

int main(int argc, char **argv)
{
    explicit_mode = argc > 1 && strcmp(argv[1], "explicit") == 0;
    if (argc > 2 && strcmp(argv[2], "--cupti") == 0)
        CR(recap_hooks_install_cupti());
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    recap_hooks_t hooks;
    CR(recap_hooks_active(&hooks));
    printf("compose: front end %s (%s)\n", recap_hooks_name(hooks),
           explicit_mode ? "events reported by the program" : "events from the front end");
    if (explicit_mode != (hooks == RECAP_HOOKS_NONE)) {
        printf("compose: FAIL - expected %s\n", explicit_mode ? "no front end" : "a front end");
        return 1;
    }
    rig r;
    rig_init(r, 20261717);
    case_child(r);
    case_update(r);
    case_upload_and_streams(r);
    case_refusals(r);
    rig_free(r);
    printf("compose: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
