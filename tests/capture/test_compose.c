/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Graph composition: captured graphs embedded as child graph nodes (nested, twice in one parent,
 * in two parents, the parent cloned), exec updates, child graph node updates in an exec, graphs
 * built node by node, upload, launches on two streams: K launches draw exactly what K eager runs
 * draw, and the generator's host offset ends where K eager runs leave it. What recap cannot make
 * exact is refused with RECAP_ERR_UNSUPPORTED: unordered parts drawing from one generator,
 * recap kernels copied without their advance node, a conditional body that draws, device-launch
 * execs. Runs against the CUDA test double in CI and the real driver on the GPU machine; the
 * driver calls recap does not make (building graphs) go to the same driver directly.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "testutil.h"

static struct {
    CUresult (*ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_release)(CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*graph_create)(CUgraph *, unsigned);
    CUresult (*add_child)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph);
    CUresult (*add_deps)(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t);
    CUresult (*get_nodes)(CUgraph, CUgraphNode *, size_t *);
    CUresult (*get_edges)(CUgraph, CUgraphNode *, CUgraphNode *, CUgraphEdgeData *, size_t *);
    CUresult (*kernel_params)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
    CUresult (*add_kernel)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                           const CUDA_KERNEL_NODE_PARAMS *);
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*exec_update)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
    CUresult (*exec_child)(CUgraphExec, CUgraphNode, CUgraph);
    CUresult (*cond_create)(CUgraphConditionalHandle *, CUgraph, CUcontext, unsigned, unsigned);
    CUresult (*add_node)(CUgraphNode *, CUgraph, const CUgraphNode *, const CUgraphEdgeData *,
                         size_t, CUgraphNodeParams *);
    CUresult (*upload)(CUgraphExec, CUstream);
    CUresult (*exec_destroy)(CUgraphExec);
    CUresult (*graph_destroy)(CUgraph);
    CUcontext ctx;
} cu;

static void setup(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    void *lib = dlopen(path != NULL && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int i;

    ck_assert_ptr_nonnull(lib);
#define SYM(f, name) *(void **)&cu.f = dlsym(lib, name)
    SYM(ctx_retain, "cuDevicePrimaryCtxRetain");
    SYM(ctx_release, "cuDevicePrimaryCtxRelease_v2");
    SYM(ctx_set, "cuCtxSetCurrent");
    SYM(graph_create, "cuGraphCreate");
    SYM(add_child, "cuGraphAddChildGraphNode");
    SYM(add_deps, "cuGraphAddDependencies");
    SYM(get_nodes, "cuGraphGetNodes");
    SYM(get_edges, "cuGraphGetEdges_v2");
    SYM(kernel_params, "cuGraphKernelNodeGetParams_v2");
    SYM(add_kernel, "cuGraphAddKernelNode_v2");
    SYM(instantiate, "cuGraphInstantiateWithFlags");
    SYM(exec_update, "cuGraphExecUpdate_v2");
    SYM(exec_child, "cuGraphExecChildGraphNodeSetParams");
    SYM(cond_create, "cuGraphConditionalHandleCreate");
    SYM(add_node, "cuGraphAddNode_v2");
    SYM(upload, "cuGraphUpload");
    SYM(exec_destroy, "cuGraphExecDestroy");
    SYM(graph_destroy, "cuGraphDestroy");
#undef SYM
    for (i = 0; i < (int)(sizeof(cu) / sizeof(void *)) - 1; i++)
        ck_assert_msg(((void **)&cu)[i] != NULL, "driver entry point %d missing", i);
    void *probe = NULL;

    /* recap loads the driver and sets device 0 up (the same library this test talks to) */
    ck_assert_ok(recap_device_alloc(0, 16, &probe));
    ck_assert_ok(recap_device_free(0, probe));
    ck_assert_int_eq(cu.ctx_retain(&cu.ctx, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cu.ctx_set(cu.ctx), CUDA_SUCCESS);
}

static void teardown(void)
{
    cu.ctx_set(NULL);
    cu.ctx_release(0);
}

#define CU_OK(call) ck_assert_int_eq((call), CUDA_SUCCESS)

/* `raw`, the driver's exec of `g`, reported to recap: refused (RECAP_ERR_UNSUPPORTED) with a
 * reason that says `why`; then destroyed. */
static void refused_exec(CUgraph g, CUgraphExec raw, const char *why)
{
    ck_assert_status(recap_graph_instantiated(g, raw), RECAP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(recap_last_error(), why) != NULL, "refused, but not for \"%s\": %s", why,
                  recap_last_error());
    ck_assert_ok(recap_graph_exec_destroyed(raw));
    CU_OK(cu.exec_destroy(raw));
}

/* One generator and its eager twin (same state), a buffer each, and the stream. */
typedef struct {
    recap_generator_h g, twin;
    size_t n;
    uint32_t *buf, *tbuf;
    recap_stream_t s;
} rig_t;

static void rig_init(rig_t *r, size_t n)
{
    uint8_t st[RECAP_STATE_BYTES];

    ck_assert_ok(recap_stream_create(0, &r->s));
    ck_assert_ok(recap_generator_create(0, &r->g));
    ck_assert_ok(recap_generator_create(0, &r->twin));
    ck_assert_ok(recap_generator_manual_seed(r->g, tu_rand()));
    ck_assert_ok(recap_generator_get_state(r->g, st));
    ck_assert_ok(recap_generator_set_state(r->twin, st));
    r->n = n;
    ck_assert_ok(recap_device_alloc(0, 4 * 2 * n, (void **)&r->buf));
    ck_assert_ok(recap_device_alloc(0, 4 * 2 * n, (void **)&r->tbuf));
}

static void rig_free(rig_t *r)
{
    ck_assert_ok(recap_device_free(0, r->buf));
    ck_assert_ok(recap_device_free(0, r->tbuf));
    ck_assert_ok(recap_generator_destroy(r->g));
    ck_assert_ok(recap_generator_destroy(r->twin));
    ck_assert_ok(recap_stream_destroy(r->s));
}

/* A captured graph filling `n` words of buf from gen. */
static CUgraph capture_fill(recap_generator_h gen, recap_stream_t s, uint32_t *buf, size_t n)
{
    recap_graph_t g = NULL;

    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_generator_fill_u32(gen, s, buf, n));
    ck_assert_ok(recap_stream_end_capture(s, &g));
    ck_assert_ptr_nonnull(g);
    return (CUgraph)g;
}

static uint32_t *read_back(recap_stream_t s, const uint32_t *dev, size_t n)
{
    uint32_t *h = malloc(4 * n + 4);

    ck_assert_ptr_nonnull(h);
    ck_assert_ok(recap_stream_synchronize(s));
    ck_assert_ok(recap_memcpy_to_host(0, h, dev, 4 * n));
    return h;
}

/* After a launch that ran `runs` fills of n words each into r->buf: the buffer holds what the
 * last of `runs` eager fills of the twin writes, and every eager run happened on the twin. */
static void expect_eager(rig_t *r, size_t n, int runs, const char *what, int k)
{
    uint32_t *got = read_back(r->s, r->buf, n), *want;
    int i;

    for (i = 0; i < runs; i++)
        ck_assert_ok(recap_generator_fill_u32(r->twin, r->s, r->tbuf, n));
    want = read_back(r->s, r->tbuf, n);
    ck_assert_msg(memcmp(got, want, 4 * n) == 0, "%s: launch %d differs from eager run", what, k);
    free(got);
    free(want);
}

/* The generator's state equals its twin's: the launches advanced it exactly. */
static void expect_same_state(rig_t *r)
{
    uint8_t a[RECAP_STATE_BYTES], b[RECAP_STATE_BYTES];

    ck_assert_ok(recap_generator_get_state(r->g, a));
    ck_assert_ok(recap_generator_get_state(r->twin, b));
    ck_assert_mem_eq(a, b, RECAP_STATE_BYTES);
}

static CUgraphNode add_child(CUgraph parent, CUgraph child, const CUgraphNode *deps, size_t nd)
{
    CUgraphNode n = NULL;

    CU_OK(cu.add_child(&n, parent, deps, nd, child));
    return n;
}

/* Launches exec K times, each checked against `runs` eager fills of n words. */
static void launch_k(rig_t *r, recap_graph_exec_t e, size_t n, int runs, const char *what)
{
    int k, K = 2 + (int)tu_rand_below(3);

    for (k = 0; k < K; k++) {
        ck_assert_ok(recap_graph_launch(e, r->s));
        expect_eager(r, n, runs, what, k);
    }
    expect_same_state(r);
}

/* Instantiates graph g through recap, checks its launches against eager runs, destroys it. */
static void exact_k(rig_t *r, CUgraph g, int runs, const char *what)
{
    recap_graph_exec_t e;

    ck_assert_ok(recap_graph_instantiate(g, &e));
    launch_k(r, e, r->n, runs, what);
    ck_assert_ok(recap_graph_exec_destroy(e));
}

START_TEST(child_graph_node_launches_equal_eager_runs)
{
    recap_capture_stats_t before, after;
    recap_graph_exec_t e;
    CUgraph c, p;
    rig_t r;

    rig_init(&r, 1 + tu_rand_below(5000));
    c = capture_fill(r.g, r.s, r.buf, r.n);
    CU_OK(cu.graph_create(&p, 0));
    add_child(p, c, NULL, 0);
    ck_assert_ok(recap_graph_instantiate(p, &e));
    ck_assert_ok(recap_capture_stats(&before));
    launch_k(&r, e, r.n, 1, "parent");
    ck_assert_ok(recap_capture_stats(&after));
    ck_assert_uint_gt(after.launches, before.launches); /* the bug: parents were not seen */
    /* eager draws after the launches continue where K eager runs would */
    ck_assert_ok(recap_generator_fill_u32(r.g, r.s, r.buf, r.n));
    expect_eager(&r, r.n, 1, "eager after", 0);
    ck_assert_ok(recap_graph_exec_destroy(e));
    CU_OK(cu.graph_destroy(p));
    CU_OK(cu.graph_destroy(c));
    rig_free(&r);
}
END_TEST

START_TEST(child_in_child_and_child_twice_in_order)
{
    CUgraph c, mid, p;
    CUgraphNode a;
    rig_t r;

    rig_init(&r, 1 + tu_rand_below(5000));
    c = capture_fill(r.g, r.s, r.buf, r.n);
    CU_OK(cu.graph_create(&mid, 0));
    add_child(mid, c, NULL, 0);
    CU_OK(cu.graph_create(&p, 0));
    a = add_child(p, mid, NULL, 0); /* a child in a child */
    add_child(p, c, &a, 1);         /* the same child again, after it */
    exact_k(&r, p, 2, "nested and twice");
    CU_OK(cu.graph_destroy(p));
    CU_OK(cu.graph_destroy(mid));
    CU_OK(cu.graph_destroy(c));
    rig_free(&r);
}
END_TEST

/* `c` wrapped in `depth` levels of parents, each holding the level below as its one child graph
 * node; the caller destroys the returned graph (the parents hold copies). A driver that refuses
 * to nest that deep stops it sooner (said on stderr), past 32 levels at least. */
static CUgraph nest(CUgraph c, int depth)
{
    CUgraph g = c, p;
    CUgraphNode n;
    int i;

    for (i = 0; i < depth; i++) {
        CUresult rc;

        CU_OK(cu.graph_create(&p, 0));
        if ((rc = cu.add_child(&n, p, NULL, 0, g)) != CUDA_SUCCESS) {
            fprintf(stderr, "the driver nests %d levels, not %d (CUresult %d)\n", i, depth, rc);
            ck_assert_int_gt(i, 32);
            CU_OK(cu.graph_destroy(p));
            break;
        }
        if (g != c)
            CU_OK(cu.graph_destroy(g));
        g = p;
    }
    return g;
}

/* Nesting has no limit: a captured graph at any depth (random, past 32 and well beyond) advances
 * its generator on every launch; at depths of 32 and more it used to be silently left out, and
 * every launch reused the same numbers. */
START_TEST(child_graphs_nested_at_any_depth)
{
    int depths[3], i;
    CUgraph c, p;
    rig_t r;

    depths[0] = 1 + (int)tu_rand_below(32);
    depths[1] = 33 + (int)tu_rand_below(40);
    depths[2] = 100 + (int)tu_rand_below(400);
    rig_init(&r, 1 + tu_rand_below(2000));
    c = capture_fill(r.g, r.s, r.buf, r.n);
    for (i = 0; i < 3; i++) {
        char what[64];

        snprintf(what, sizeof(what), "nested %d deep", depths[i]);
        p = nest(c, depths[i]);
        exact_k(&r, p, 1, what);
        CU_OK(cu.graph_destroy(p));
    }
    CU_OK(cu.graph_destroy(c));
    rig_free(&r);
}
END_TEST

/* A conditional IF node in g: its node (its body graph in *body_p). */
static CUgraphNode add_conditional(CUgraph g, CUgraph *body_p)
{
    CUgraphConditionalHandle h;
    CUgraphNodeParams np;
    CUgraphNode node;

    CU_OK(cu.cond_create(&h, g, cu.ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    memset(&np, 0, sizeof(np));
    np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np.conditional.handle = h;
    np.conditional.type = CU_GRAPH_COND_TYPE_IF;
    np.conditional.size = 1;
    np.conditional.ctx = cu.ctx;
    CU_OK(cu.add_node(&node, g, NULL, NULL, 0, &np));
    *body_p = np.conditional.phGraph_out[0];
    return node;
}

/* A conditional body that draws, deep in child graphs: refused at any depth. */
START_TEST(conditional_body_deep_down_is_refused)
{
    CUgraphNode node;
    CUgraphExec raw;
    CUgraph c, cond, deep, body;
    rig_t r;

    rig_init(&r, 1 + tu_rand_below(500));
    c = capture_fill(r.g, r.s, r.buf, r.n);
    CU_OK(cu.graph_create(&cond, 0));
    node = add_conditional(cond, &body);
    deep = nest(c, 33 + (int)tu_rand_below(40));
    add_child(body, deep, NULL, 0);
    ck_assert_ok(recap_graph_conditional_added(cond, node, (recap_graph_t *)&body, 1));
    CU_OK(cu.instantiate(&raw, cond, 0));
    refused_exec(cond, raw, "conditional");
    CU_OK(cu.graph_destroy(deep));
    CU_OK(cu.graph_destroy(cond));
    CU_OK(cu.graph_destroy(c));
    rig_free(&r);
}
END_TEST

START_TEST(one_child_in_two_parents_and_a_clone)
{
    recap_graph_exec_t e1, e2, e3;
    recap_graph_t clone;
    CUgraph c, p1, p2;
    rig_t r;
    int k;

    rig_init(&r, 1 + tu_rand_below(5000));
    c = capture_fill(r.g, r.s, r.buf, r.n);
    CU_OK(cu.graph_create(&p1, 0));
    CU_OK(cu.graph_create(&p2, 0));
    add_child(p1, c, NULL, 0);
    add_child(p2, c, NULL, 0);
    ck_assert_ok(recap_graph_clone(p1, &clone));
    CU_OK(cu.graph_destroy(c)); /* the parents hold their own copies */
    ck_assert_ok(recap_graph_instantiate(p1, &e1));
    ck_assert_ok(recap_graph_instantiate(p2, &e2));
    ck_assert_ok(recap_graph_instantiate(clone, &e3));
    for (k = 0; k < 6; k++) {
        recap_graph_exec_t e = k % 3 == 0 ? e1 : k % 3 == 1 ? e2 : e3;
        ck_assert_ok(recap_graph_launch(e, r.s));
        expect_eager(&r, r.n, 1, "two parents and a clone", k);
    }
    expect_same_state(&r);
    ck_assert_ok(recap_graph_exec_destroy(e1));
    ck_assert_ok(recap_graph_exec_destroy(e2));
    ck_assert_ok(recap_graph_exec_destroy(e3));
    CU_OK(cu.graph_destroy(p1));
    CU_OK(cu.graph_destroy(p2));
    ck_assert_ok(recap_graph_destroy(clone));
    rig_free(&r);
}
END_TEST

/* The leaves of a graph (nodes nothing depends on): where appended work must depend. */
static size_t leaves(CUgraph g, CUgraphNode *out, size_t max)
{
    CUgraphNode nodes[64], from[64], to[64];
    CUgraphEdgeData data[64];
    size_t n = 64, ne = 64, i, j, k = 0;

    CU_OK(cu.get_nodes(g, nodes, &n));
    CU_OK(cu.get_edges(g, from, to, data, &ne));
    for (i = 0; i < n; i++) {
        int leaf = 1;
        for (j = 0; j < ne; j++)
            leaf &= from[j] != nodes[i];
        if (leaf && k < max)
            out[k++] = nodes[i];
    }
    return k;
}

START_TEST(child_after_captured_work_is_exact_unordered_is_refused)
{
    CUgraphNode leaf[8];
    CUgraphExec raw;
    CUgraph c, p, q;
    rig_t r;
    size_t nl;

    rig_init(&r, 1 + tu_rand_below(5000));
    c = capture_fill(r.g, r.s, r.buf, r.n);
    p = capture_fill(r.g, r.s, r.buf, r.n);
    nl = leaves(p, leaf, 8);
    ck_assert_uint_gt(nl, 0);
    add_child(p, c, leaf, nl); /* after the captured work: its own fill, then the child's */
    exact_k(&r, p, 2, "captured work then a child");
    /* a child drawing from the same generator with no order: refused, with the reason */
    q = capture_fill(r.g, r.s, r.buf, r.n);
    add_child(q, c, NULL, 0);
    CU_OK(cu.instantiate(&raw, q, 0));
    refused_exec(q, raw, "without an order");
    CU_OK(cu.graph_destroy(p));
    CU_OK(cu.graph_destroy(q));
    CU_OK(cu.graph_destroy(c));
    rig_free(&r);
}
END_TEST

START_TEST(two_unordered_children_of_one_generator_are_refused)
{
    CUgraphNode a;
    CUgraphExec raw;
    recap_graph_exec_t e;
    CUgraph c, p;
    rig_t r;

    rig_init(&r, 1 + tu_rand_below(500));
    c = capture_fill(r.g, r.s, r.buf, r.n);
    CU_OK(cu.graph_create(&p, 0));
    a = add_child(p, c, NULL, 0);
    add_child(p, c, NULL, 0);
    CU_OK(cu.instantiate(&raw, p, 0));
    refused_exec(p, raw, "without an order");
    /* recap's own instantiate refuses too, and leaves no exec behind */
    ck_assert_status(recap_graph_instantiate(p, &e), RECAP_ERR_UNSUPPORTED);
    CU_OK(cu.graph_destroy(p));
    CU_OK(cu.graph_destroy(c));
    rig_free(&r);
    (void)a;
}
END_TEST

START_TEST(exec_update_follows_the_new_graph)
{
    recap_generator_h h;
    recap_graph_exec_t e;
    CUgraphExecUpdateResultInfo info;
    CUgraph a, more, fewer, other;
    rig_t r;

    rig_init(&r, 2 + tu_rand_below(5000));
    ck_assert_ok(recap_generator_create(0, &h));
    a = capture_fill(r.g, r.s, r.buf, r.n);
    more = capture_fill(r.g, r.s, r.buf, 2 * r.n);
    fewer = capture_fill(r.g, r.s, r.buf, r.n / 2);
    other = capture_fill(h, r.s, r.buf, r.n); /* draws nothing from g */
    ck_assert_ok(recap_graph_instantiate(a, &e));
    launch_k(&r, e, r.n, 1, "before update");
    CU_OK(cu.exec_update(e, more, &info));
    ck_assert_ok(recap_graph_exec_updated(e, more));
    launch_k(&r, e, 2 * r.n, 1, "updated: more");
    CU_OK(cu.exec_update(e, fewer, &info));
    ck_assert_ok(recap_graph_exec_updated(e, fewer));
    launch_k(&r, e, r.n / 2, 1, "updated: fewer");
    CU_OK(cu.exec_update(e, other, &info));
    ck_assert_ok(recap_graph_exec_updated(e, other));
    ck_assert_ok(recap_graph_launch(e, r.s));
    ck_assert_ok(recap_stream_synchronize(r.s));
    expect_same_state(&r); /* g untouched */
    ck_assert_ok(recap_graph_exec_destroy(e));
    CU_OK(cu.graph_destroy(a));
    CU_OK(cu.graph_destroy(more));
    CU_OK(cu.graph_destroy(fewer));
    CU_OK(cu.graph_destroy(other));
    ck_assert_ok(recap_generator_destroy(h));
    rig_free(&r);
}
END_TEST

START_TEST(child_graph_node_update_in_an_exec)
{
    recap_graph_exec_t e;
    CUgraph c, c2, p;
    CUgraphNode node;
    rig_t r;

    rig_init(&r, 1 + tu_rand_below(5000));
    c = capture_fill(r.g, r.s, r.buf, r.n);
    c2 = capture_fill(r.g, r.s, r.buf, 2 * r.n);
    CU_OK(cu.graph_create(&p, 0));
    node = add_child(p, c, NULL, 0);
    ck_assert_ok(recap_graph_instantiate(p, &e));
    launch_k(&r, e, r.n, 1, "before SetParams");
    CU_OK(cu.exec_child(e, node, c2));
    ck_assert_ok(recap_graph_exec_child_updated(e, node, c2));
    launch_k(&r, e, 2 * r.n, 1, "after SetParams");
    ck_assert_ok(recap_graph_exec_destroy(e));
    CU_OK(cu.graph_destroy(p));
    CU_OK(cu.graph_destroy(c));
    CU_OK(cu.graph_destroy(c2));
    rig_free(&r);
}
END_TEST

/* Two unordered child nodes of other generators, then updated one after the other to draw from
 * one generator: the second update is refused, though the sibling drew another one at
 * instantiate (the plan reads the siblings' draws as they are now). */
START_TEST(unordered_children_updated_to_one_generator_are_refused)
{
    recap_generator_h h;
    recap_graph_exec_t e;
    CUgraph ca, cb, ch1, ch2, p;
    CUgraphNode na, nb;
    rig_t r;

    rig_init(&r, 1 + tu_rand_below(5000));
    ck_assert_ok(recap_generator_create(0, &h));
    ca = capture_fill(r.g, r.s, r.buf, r.n);
    cb = capture_fill(r.twin, r.s, r.tbuf, r.n);
    ch1 = capture_fill(h, r.s, r.buf, r.n);
    ch2 = capture_fill(h, r.s, r.tbuf, r.n);
    CU_OK(cu.graph_create(&p, 0));
    na = add_child(p, ca, NULL, 0);
    nb = add_child(p, cb, NULL, 0);
    ck_assert_ok(recap_graph_instantiate(p, &e));
    CU_OK(cu.exec_child(e, na, ch1));
    ck_assert_ok(recap_graph_exec_child_updated(e, na, ch1));
    CU_OK(cu.exec_child(e, nb, ch2));
    ck_assert_status(recap_graph_exec_child_updated(e, nb, ch2), RECAP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(recap_last_error(), "not ordered with it") != NULL, "%s",
                  recap_last_error());
    ck_assert_ok(recap_graph_exec_destroy(e));
    CU_OK(cu.graph_destroy(p));
    CU_OK(cu.graph_destroy(ca));
    CU_OK(cu.graph_destroy(cb));
    CU_OK(cu.graph_destroy(ch1));
    CU_OK(cu.graph_destroy(ch2));
    ck_assert_ok(recap_generator_destroy(h));
    rig_free(&r);
}
END_TEST

/* The kernel nodes of a captured graph, in dependency order (fill first, advance last). */
static size_t kernel_nodes(CUgraph g, CUgraphNode *out)
{
    CUgraphNode leaf[4], nodes[16];
    size_t n = 16, i, k = 0;

    CU_OK(cu.get_nodes(g, nodes, &n));
    ck_assert_uint_eq(leaves(g, leaf, 4), 1);
    for (i = 0; i < n; i++)
        if (nodes[i] != leaf[0])
            out[k++] = nodes[i];
    out[k++] = leaf[0];
    return k;
}

START_TEST(graph_built_node_by_node)
{
    CUDA_KERNEL_NODE_PARAMS kp;
    CUgraphNode src[8], fill, adv;
    CUgraphExec raw;
    CUgraph c, bare, full;
    rig_t r;

    rig_init(&r, 1 + tu_rand_below(5000));
    c = capture_fill(r.g, r.s, r.buf, r.n);
    ck_assert_uint_eq(kernel_nodes(c, src), 2);
    /* the captured fill copied alone: recap sees its own kernel without the advance node */
    CU_OK(cu.graph_create(&bare, 0));
    CU_OK(cu.kernel_params(src[0], &kp));
    CU_OK(cu.add_kernel(&fill, bare, NULL, 0, &kp));
    CU_OK(cu.instantiate(&raw, bare, 0));
    refused_exec(bare, raw, "advance node");
    /* the fill and the advance node copied, in order: exact */
    CU_OK(cu.graph_create(&full, 0));
    CU_OK(cu.kernel_params(src[0], &kp));
    CU_OK(cu.add_kernel(&fill, full, NULL, 0, &kp));
    CU_OK(cu.kernel_params(src[1], &kp));
    CU_OK(cu.add_kernel(&adv, full, &fill, 1, &kp));
    exact_k(&r, full, 1, "copied nodes");
    CU_OK(cu.graph_destroy(bare));
    CU_OK(cu.graph_destroy(full));
    CU_OK(cu.graph_destroy(c));
    rig_free(&r);
}
END_TEST

/* Random graphs of up to 10 parts drawing from one generator: child graph nodes, some before a
 * copy of captured work (its fill and advance nodes), some after, random edges between them.
 * Exact exactly when every two parts are ordered (a child runs after the advance node or before
 * all the captured work), by a transitive closure computed here; refused otherwise. */
START_TEST(random_orders_are_exact_or_refused)
{
    int round;

    for (round = 0; round < 12; round++) {
        CUDA_KERNEL_NODE_PARAMS kp;
        CUgraphNode src[8], node[12], deps[12];
        int reach[12][12], isk[12], n = 0, nb, na, work, i, j, k, exact = 1;
        CUgraph c, p;
        CUgraphExec raw;
        rig_t r;

        rig_init(&r, 1 + tu_rand_below(300));
        c = capture_fill(r.g, r.s, r.buf, r.n);
        ck_assert_uint_eq(kernel_nodes(c, src), 2);
        CU_OK(cu.graph_create(&p, 0));
        memset(reach, 0, sizeof(reach));
        work = (int)tu_rand_below(2);
        nb = (int)tu_rand_below(4);
        na = (work ? 0 : 1) + (int)tu_rand_below(4);
        for (i = 0; i < nb + 2 * work + na; i++) {
            int kernel = work && (i == nb || i == nb + 1), nd = 0;

            for (j = 0; j < n; j++) /* edges from earlier nodes only: insertion order is an order */
                if ((kernel && i == nb + 1 && j == nb) || tu_rand_below(3) == 0) {
                    deps[nd++] = node[j];
                    reach[j][n] = 1;
                }
            if (kernel) {
                CU_OK(cu.kernel_params(src[i - nb], &kp));
                CU_OK(cu.add_kernel(&node[n], p, deps, nd, &kp));
            } else {
                node[n] = add_child(p, c, deps, nd);
            }
            isk[n++] = kernel;
        }
        for (k = 0; k < n; k++) /* the transitive closure */
            for (i = 0; i < n; i++)
                for (j = 0; j < n; j++)
                    reach[i][j] |= reach[i][k] && reach[k][j];
        for (i = 0; i < n; i++)
            for (j = i + 1; j < n; j++) {
                if (isk[i] && isk[j])
                    continue;
                if (!isk[i] && !isk[j])
                    exact &= reach[i][j];
                else if (isk[j]) /* child i: after the advance node (nb + 1) or before both kernels */
                    exact &= reach[i][nb] && reach[i][nb + 1];
                else
                    exact &= reach[nb + 1][j] || (reach[j][nb] && reach[j][nb + 1]);
            }
        if (exact) {
            exact_k(&r, p, nb + work + na, "random order");
        } else {
            CU_OK(cu.instantiate(&raw, p, 0));
            refused_exec(p, raw, "without an order");
        }
        CU_OK(cu.graph_destroy(p));
        CU_OK(cu.graph_destroy(c));
        rig_free(&r);
    }
}
END_TEST

START_TEST(conditional_body_that_draws_is_refused)
{
    CUgraphNode node;
    CUgraphExec raw;
    CUgraph c, p, body;
    rig_t r;

    rig_init(&r, 1 + tu_rand_below(500));
    c = capture_fill(r.g, r.s, r.buf, r.n);
    CU_OK(cu.graph_create(&p, 0));
    node = add_conditional(p, &body);
    ck_assert_ok(recap_graph_conditional_added(p, node, (recap_graph_t *)&body, 1));
    add_child(body, c, NULL, 0);
    CU_OK(cu.instantiate(&raw, p, 0));
    refused_exec(p, raw, "conditional");
    CU_OK(cu.graph_destroy(p));
    CU_OK(cu.graph_destroy(c));
    rig_free(&r);
}
END_TEST

/* Bodies reported wrongly (a ring of k graphs, each reported as the conditional body of the one
 * before it) make no walk without end: refused, with the reason. */
START_TEST(graph_reported_inside_itself_is_refused)
{
    CUgraph g[16], body;
    CUgraphNode node[16];
    CUgraphExec raw;
    int k = 1 + (int)tu_rand_below(16), i;

    for (i = 0; i < k; i++) {
        CU_OK(cu.graph_create(&g[i], 0));
        node[i] = add_conditional(g[i], &body);
    }
    for (i = 0; i < k; i++) {
        recap_graph_t next = (recap_graph_t)g[(i + 1) % k];
        ck_assert_ok(recap_graph_conditional_added(g[i], node[i], &next, 1));
    }
    CU_OK(cu.instantiate(&raw, g[0], 0));
    refused_exec(g[0], raw, "holds itself");
    for (i = 0; i < k; i++)
        CU_OK(cu.graph_destroy(g[i]));
}
END_TEST

/* A body count whose byte size wraps around (to a small block) is refused, never copied: random
 * counts just past the wrap, and the largest counts. */
START_TEST(conditional_body_count_that_wraps_is_refused)
{
    recap_graph_t bodies[4] = {NULL, NULL, NULL, NULL};
    size_t counts[6];
    CUgraphNode node;
    CUgraph p;
    int i;

    counts[0] = SIZE_MAX / sizeof(CUgraph) + 1 + tu_rand_below(64);
    counts[1] = SIZE_MAX / sizeof(CUgraph) - tu_rand_below(2); /* with the record's header */
    counts[2] = SIZE_MAX - tu_rand_below(1u << 20);
    counts[3] = SIZE_MAX;
    counts[4] = ((size_t)1 << 61) + tu_rand_below(1u << 20);
    counts[5] = (size_t)tu_rand() | ((size_t)1 << 63);
    CU_OK(cu.graph_create(&p, 0));
    CU_OK(cu.graph_create((CUgraph *)&bodies[0], 0));
    node = add_child(p, (CUgraph)bodies[0], NULL, 0);
    for (i = 0; i < 6; i++) {
        ck_assert_status(recap_graph_conditional_added(p, node, bodies, counts[i]),
                         RECAP_ERR_INVALID_ARG);
        ck_assert_msg(strstr(recap_last_error(), "bodies") != NULL, "%s", recap_last_error());
    }
    ck_assert_ok(recap_graph_conditional_added(p, node, bodies, 1 + tu_rand_below(4)));
    CU_OK(cu.graph_destroy(p));
    CU_OK(cu.graph_destroy((CUgraph)bodies[0]));
}
END_TEST

START_TEST(device_launch_exec_that_draws_is_refused)
{
    CUgraphExec raw;
    CUgraph c;
    rig_t r;

    rig_init(&r, 1 + tu_rand_below(500));
    c = capture_fill(r.g, r.s, r.buf, r.n);
    /* a driver may refuse such a graph for device launch itself: nothing to refuse then */
    if (cu.instantiate(&raw, c, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) == CUDA_SUCCESS) {
        refused_exec(c, raw, "device-side launch");
    }
    CU_OK(cu.graph_destroy(c));
    rig_free(&r);
}
END_TEST

START_TEST(upload_before_the_first_launch)
{
    recap_graph_exec_t e;
    CUgraph c;
    rig_t r;

    rig_init(&r, 1 + tu_rand_below(5000));
    c = capture_fill(r.g, r.s, r.buf, r.n);
    ck_assert_ok(recap_graph_instantiate(c, &e));
    CU_OK(cu.upload((CUgraphExec)e, (CUstream)r.s));
    launch_k(&r, e, r.n, 1, "uploaded");
    ck_assert_ok(recap_graph_exec_destroy(e));
    CU_OK(cu.graph_destroy(c));
    rig_free(&r);
}
END_TEST

START_TEST(execs_sharing_a_generator_on_two_streams)
{
    recap_graph_exec_t e1, e2;
    recap_stream_t s2;
    CUgraph c1, c2;
    rig_t r;
    int k;

    rig_init(&r, 1 + tu_rand_below(300000));
    ck_assert_ok(recap_stream_create(0, &s2));
    c1 = capture_fill(r.g, r.s, r.buf, r.n);
    c2 = capture_fill(r.g, s2, r.buf + r.n, r.n);
    ck_assert_ok(recap_graph_instantiate(c1, &e1));
    ck_assert_ok(recap_graph_instantiate(c2, &e2));
    for (k = 0; k < 6; k++) {
        uint32_t *got1, *got2, *want;

        ck_assert_ok(recap_graph_launch(e1, r.s));
        ck_assert_ok(recap_graph_launch(e2, s2)); /* no host sync between: recap orders them */
        ck_assert_ok(recap_stream_synchronize(s2));
        got1 = read_back(r.s, r.buf, r.n);
        got2 = read_back(s2, r.buf + r.n, r.n);
        ck_assert_ok(recap_generator_fill_u32(r.twin, r.s, r.tbuf, r.n));
        want = read_back(r.s, r.tbuf, r.n);
        ck_assert_msg(memcmp(got1, want, 4 * r.n) == 0, "stream 1, round %d", k);
        free(want);
        ck_assert_ok(recap_generator_fill_u32(r.twin, r.s, r.tbuf, r.n));
        want = read_back(r.s, r.tbuf, r.n);
        ck_assert_msg(memcmp(got2, want, 4 * r.n) == 0, "stream 2, round %d", k);
        free(want);
        free(got1);
        free(got2);
    }
    expect_same_state(&r);
    ck_assert_ok(recap_graph_exec_destroy(e1));
    ck_assert_ok(recap_graph_exec_destroy(e2));
    CU_OK(cu.graph_destroy(c1));
    CU_OK(cu.graph_destroy(c2));
    ck_assert_ok(recap_stream_destroy(s2));
    rig_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("compose");
    TCase *tc = tcase_create("compose");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, child_graph_node_launches_equal_eager_runs);
    tcase_add_test(tc, child_in_child_and_child_twice_in_order);
    tcase_add_test(tc, one_child_in_two_parents_and_a_clone);
    tcase_add_test(tc, child_graphs_nested_at_any_depth);
    tcase_add_test(tc, conditional_body_deep_down_is_refused);
    tcase_add_test(tc, child_after_captured_work_is_exact_unordered_is_refused);
    tcase_add_test(tc, two_unordered_children_of_one_generator_are_refused);
    tcase_add_test(tc, exec_update_follows_the_new_graph);
    tcase_add_test(tc, child_graph_node_update_in_an_exec);
    tcase_add_test(tc, unordered_children_updated_to_one_generator_are_refused);
    tcase_add_test(tc, graph_built_node_by_node);
    tcase_add_test(tc, random_orders_are_exact_or_refused);
    tcase_add_test(tc, conditional_body_that_draws_is_refused);
    tcase_add_test(tc, graph_reported_inside_itself_is_refused);
    tcase_add_test(tc, conditional_body_count_that_wraps_is_refused);
    tcase_add_test(tc, device_launch_exec_that_draws_is_refused);
    tcase_add_test(tc, upload_before_the_first_launch);
    tcase_add_test(tc, execs_sharing_a_generator_on_two_streams);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
