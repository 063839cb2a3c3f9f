/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the composition walk costs at instantiate, never timed: the work it reports (its debug
 * log line: graphs, nodes and edges walked, and the steps taken) stays within a constant of the
 * nodes and edges, for random graphs of thousands of child graph nodes that draw nothing and of
 * child graph nodes drawing from a few generators in random orders; and instantiating thousands
 * of child graph nodes does not grow the process's peak memory by more than a few megabytes (an
 * N x N matrix and per-child sibling arrays took 128 MB at 4,000). The suite re-runs itself with
 * RECAP_LOG=debug and RECAP_LOG_FILE set, as recap reads them at load.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cuda.h>

#include "testutil.h"

static struct {
    CUresult (*ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_release)(CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*graph_create)(CUgraph *, unsigned);
    CUresult (*add_child)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph);
    CUresult (*graph_destroy)(CUgraph);
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*exec_destroy)(CUgraphExec);
    CUcontext ctx;
} cu;

#define CU_OK(call) ck_assert_int_eq((call), CUDA_SUCCESS)

static void setup(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    void *lib = dlopen(path != NULL && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *probe = NULL;

    ck_assert_ptr_nonnull(lib);
#define SYM(f, name) *(void **)&cu.f = dlsym(lib, name); ck_assert_ptr_nonnull(cu.f)
    SYM(ctx_retain, "cuDevicePrimaryCtxRetain");
    SYM(ctx_release, "cuDevicePrimaryCtxRelease_v2");
    SYM(ctx_set, "cuCtxSetCurrent");
    SYM(graph_create, "cuGraphCreate");
    SYM(add_child, "cuGraphAddChildGraphNode");
    SYM(graph_destroy, "cuGraphDestroy");
    SYM(instantiate, "cuGraphInstantiateWithFlags");
    SYM(exec_destroy, "cuGraphExecDestroy");
#undef SYM
    ck_assert_ok(recap_device_alloc(0, 16, &probe));
    ck_assert_ok(recap_device_free(0, probe));
    CU_OK(cu.ctx_retain(&cu.ctx, 0));
    CU_OK(cu.ctx_set(cu.ctx));
}

static void teardown(void)
{
    cu.ctx_set(NULL);
    cu.ctx_release(0);
}

typedef struct {
    size_t graphs, nodes, edges, steps;
} cost_t;

/* The walk's cost for graph g, from the last line the log has for it. */
static cost_t cost_of(CUgraph g)
{
    FILE *f = fopen(getenv("RECAP_LOG_FILE"), "r");
    char line[1024], key[64];
    cost_t c = {0, 0, 0, 0};
    int found = 0;

    ck_assert_ptr_nonnull(f);
    snprintf(key, sizeof(key), "graph %p: walked ", (void *)g);
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *at = strstr(line, key);
        if (at != NULL)
            found = sscanf(at + strlen(key), "%zu graphs, %zu nodes, %zu edges in %zu steps",
                           &c.graphs, &c.nodes, &c.edges, &c.steps) == 4;
    }
    fclose(f);
    ck_assert_msg(found, "no walk logged for graph %p", (void *)g);
    return c;
}

/* A parent of n child graph nodes running `child` (or an empty graph), each after up to `deps`
 * random earlier ones (after the one just before it when `chain`). */
static CUgraph parent_of(size_t n, CUgraph const *children, size_t nchildren, int deps, int chain)
{
    CUgraphNode *node = calloc(n, sizeof(*node)), d[4];
    CUgraph p, empty;
    size_t i;

    ck_assert_ptr_nonnull(node);
    CU_OK(cu.graph_create(&p, 0));
    CU_OK(cu.graph_create(&empty, 0));
    for (i = 0; i < n; i++) {
        size_t nd = 0;
        int k, want = i > 0 ? (int)tu_rand_below((uint64_t)deps + 1) : 0;

        if (chain && i > 0)
            d[nd++] = node[i - 1];
        for (k = 0; k < want && nd < 4; k++) {
            CUgraphNode x = node[tu_rand_below(i)];
            size_t j;

            for (j = 0; j < nd && d[j] != x; j++)
                ;
            if (j == nd) /* each edge once */
                d[nd++] = x;
        }
        CU_OK(cu.add_child(&node[i], p, d, nd,
                           nchildren > 0 ? children[tu_rand_below(nchildren)] : empty));
    }
    CU_OK(cu.graph_destroy(empty));
    free(node);
    return p;
}

/* Steps within a constant (per generator drawn from) of what was walked. */
static void assert_linear(cost_t c, size_t n, size_t generators)
{
    size_t walked = c.graphs + c.nodes + c.edges;

    ck_assert_uint_ge(c.nodes, n);
    ck_assert_msg(c.steps <= 8 * (generators + 1) * walked,
                  "%zu steps for %zu graphs, %zu nodes, %zu edges: not linear", c.steps, c.graphs,
                  c.nodes, c.edges);
}

START_TEST(children_that_draw_nothing_cost_a_walk)
{
    int round;

    for (round = 0; round < 2; round++) {
        size_t n = 500 + tu_rand_below(2500);
        recap_graph_exec_t e;
        CUgraph p = parent_of(n, NULL, 0, (int)tu_rand_below(4), 0);

        ck_assert_ok(recap_graph_instantiate(p, &e));
        assert_linear(cost_of(p), n, 0);
        ck_assert_ok(recap_graph_exec_destroy(e));
        CU_OK(cu.graph_destroy(p));
    }
}
END_TEST

START_TEST(children_that_draw_cost_near_linear)
{
    size_t n = 500 + tu_rand_below(2500), ngen = 1 + tu_rand_below(3), i;
    recap_generator_h gen[3];
    CUgraph child[3], p;
    recap_graph_exec_t e;
    recap_stream_t s;
    uint32_t *buf;

    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_device_alloc(0, 4 * 64, (void **)&buf));
    for (i = 0; i < ngen; i++) {
        recap_graph_t g = NULL;

        ck_assert_ok(recap_generator_create(0, &gen[i]));
        ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
        ck_assert_ok(recap_generator_fill_u32(gen[i], s, buf, 1 + tu_rand_below(64)));
        ck_assert_ok(recap_stream_end_capture(s, &g));
        child[i] = (CUgraph)g;
    }
    /* a chain (every two children ordered: exact), with random edges across it */
    p = parent_of(n, child, ngen, (int)tu_rand_below(3), 1);
    ck_assert_ok(recap_graph_instantiate(p, &e));
    assert_linear(cost_of(p), n, ngen);
    ck_assert_ok(recap_graph_exec_destroy(e));
    CU_OK(cu.graph_destroy(p));
    for (i = 0; i < ngen; i++) {
        CU_OK(cu.graph_destroy(child[i]));
        ck_assert_ok(recap_generator_destroy(gen[i]));
    }
    ck_assert_ok(recap_device_free(0, buf));
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

static long peak_kb(void)
{
    struct rusage ru;

    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
}

START_TEST(children_cost_no_square_memory)
{
    size_t n = 4000 + tu_rand_below(1000);
    CUgraph p = parent_of(n, NULL, 0, (int)tu_rand_below(2), 0);
    CUgraphExec e;
    long before, grown;

    CU_OK(cu.instantiate(&e, p, 0)); /* the driver's own memory is not recap's */
    before = peak_kb();
    ck_assert_ok(recap_graph_instantiated(p, e));
    grown = peak_kb() - before;
    /* per-child sibling arrays were n x n words, 128 MB and more; what the walk keeps now is
     * linear, under 2 MB, with room left for a sanitizer's shadow memory */
    ck_assert_msg(grown < 48 * 1024, "instantiating %zu child graph nodes grew the peak by %ld kB",
                  n, grown);
    ck_assert_ok(recap_graph_exec_destroyed(e));
    CU_OK(cu.exec_destroy(e));
    CU_OK(cu.graph_destroy(p));
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s = suite_create("compose_cost");
    TCase *tc = tcase_create("compose_cost");
    char path[] = "/tmp/recap-compose-cost-XXXXXX";
    int fd, rc;

    (void)argc;
    if (getenv("RECAP_LOG_FILE") == NULL || strcmp(getenv("RECAP_LOG") ? getenv("RECAP_LOG") : "",
                                                   "debug") != 0) {
        fd = mkstemp(path);
        if (fd < 0) {
            perror("mkstemp");
            return 99;
        }
        close(fd);
        setenv("RECAP_LOG", "debug", 1);
        setenv("RECAP_LOG_FILE", path, 1);
        execv("/proc/self/exe", argv);
        perror("execv");
        return 99;
    }
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, children_that_draw_nothing_cost_a_walk);
    tcase_add_test(tc, children_that_draw_cost_near_linear);
    tcase_add_test(tc, children_cost_no_square_memory);
    suite_add_tcase(s, tc);
    rc = tu_run(s);
    unlink(getenv("RECAP_LOG_FILE"));
    return rc;
}
