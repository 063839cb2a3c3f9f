/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What recap's composition walk adds to instantiating a graph of N child graph nodes (N = 1k,
 * 8k, 64k), beside the driver's own cuGraphInstantiate of the same graph in the same run: child
 * graphs that draw nothing (a walk of the nodes is all recap may cost), and child graphs that
 * draw from one generator, chained (every order is checked). Medians of REPS runs; the walk's
 * peak memory growth in the last column. Runs on the real driver (bench/run-all on the GPU
 * machine) and on the CUDA test double (RECAP_CUDA_DRIVER=tests/double/.libs/libcudadouble.so),
 * where the driver's column is the double's, not a GPU's.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cuda.h>

#include "recap.h"

#define MAX_REPS 7

static struct {
    CUresult (*ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*graph_create)(CUgraph *, unsigned);
    CUresult (*add_child)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph);
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*exec_destroy)(CUgraphExec);
    CUresult (*graph_destroy)(CUgraph);
    CUresult (*get_nodes)(CUgraph, CUgraphNode *, size_t *);
    CUresult (*node_type)(CUgraphNode, CUgraphNodeType *);
    CUresult (*child_graph)(CUgraphNode, CUgraph *);
    CUresult (*get_edges)(CUgraph, CUgraphNode *, CUgraphNode *, CUgraphEdgeData *, size_t *);
    CUresult (*dependents)(CUgraphNode, CUgraphNode *, CUgraphEdgeData *, size_t *);
} cu;

static int fail(const char *what, int rc)
{
    fprintf(stderr, "bench_compose: %s failed (%d: %s)\n", what, rc,
            rc < 0 ? recap_strerror((recap_status_t)rc) : "CUDA error");
    exit(1);
}

#define CU(call) do { CUresult rc_ = (call); if (rc_ != CUDA_SUCCESS) fail(#call, (int)rc_); } while (0)
#define RC(call) do { recap_status_t st_ = (call); if (st_ != RECAP_OK) fail(#call, (int)st_); } while (0)

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static long peak_kb(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* n child graph nodes running `child`, each after the one before it and, one in four, after the
 * one before that too. */
static CUgraph parent_of(size_t n, CUgraph child)
{
    CUgraphNode *node = calloc(n, sizeof(*node));
    CUgraph p;
    size_t i;

    if (node == NULL)
        fail("calloc", 0);
    CU(cu.graph_create(&p, 0));
    for (i = 0; i < n; i++) {
        CUgraphNode d[2];
        size_t nd = 0;

        if (i > 0)
            d[nd++] = node[i - 1];
        if (i > 1 && i % 4 == 0)
            d[nd++] = node[i - 2];
        CU(cu.add_child(&node[i], p, d, nd, child));
    }
    free(node);
    return p;
}

static void row(const char *kind, size_t n, CUgraph child)
{
    double drv[MAX_REPS], rec[MAX_REPS];
    int reps = n > 10000 ? 3 : MAX_REPS, r;
    CUgraph p = parent_of(n, child);
    long grown = 0;

    for (r = 0; r < reps; r++) {
        CUgraphExec e;
        double t0 = now_ms(), t1, t2;
        long before;

        CU(cu.instantiate(&e, p, 0));
        drv[r] = now_ms() - t0;
        before = peak_kb(); /* the walk's own growth, not the driver's */
        t1 = now_ms();
        RC(recap_graph_instantiated(p, e)); /* what recap's hooks call after the driver's */
        t2 = now_ms();
        rec[r] = t2 - t1;
        if (peak_kb() - before > grown)
            grown = peak_kb() - before;
        RC(recap_graph_exec_destroyed(e));
        CU(cu.exec_destroy(e));
    }
    qsort(drv, (size_t)reps, sizeof(double), cmp_double);
    qsort(rec, (size_t)reps, sizeof(double), cmp_double);
    printf("| %s | %zu | %.3f | %.3f | %.3f | %ld |\n", kind, n, drv[reps / 2], rec[reps / 2],
           rec[reps / 2] / drv[reps / 2], grown);
    fflush(stdout);
    CU(cu.graph_destroy(p));
}

/* The driver queries a walk of n child graph nodes makes, each kind timed alone over the whole
 * level (ms): where the walk's time goes at large n, recap's own work or the driver's answers.
 * Last, the edges read node by node (each node's dependents), another way to the same edges. */
static void queries(size_t n, CUgraph child)
{
    CUgraph p = parent_of(n, child);
    CUgraphNode *node = calloc(n, sizeof(*node)), *from, *to, dep[4];
    CUgraphEdgeData *data, ddep[4];
    CUgraph *sub = calloc(n, sizeof(*sub));
    CUgraphExec e;
    double t[7];
    size_t i, count = n, c, ne = 0, nd;

    if (node == NULL || sub == NULL)
        fail("calloc", 0);
    CU(cu.instantiate(&e, p, 0)); /* as when recap's walk runs: right after the instantiate */
    t[0] = now_ms();
    CU(cu.get_nodes(p, node, &count));
    t[1] = now_ms();
    for (i = 0; i < count; i++) {
        CUgraphNodeType ty;
        CU(cu.node_type(node[i], &ty));
    }
    t[2] = now_ms();
    for (i = 0; i < count; i++)
        CU(cu.child_graph(node[i], &sub[i]));
    t[3] = now_ms();
    for (i = 0; i < count; i++)
        CU(cu.get_nodes(sub[i], NULL, &c));
    t[4] = now_ms();
    CU(cu.get_edges(p, NULL, NULL, NULL, &ne));
    from = calloc(ne + 1, sizeof(*from));
    to = calloc(ne + 1, sizeof(*to));
    data = calloc(ne + 1, sizeof(*data));
    if (from == NULL || to == NULL || data == NULL)
        fail("calloc", 0);
    CU(cu.get_edges(p, from, to, data, &ne));
    t[5] = now_ms();
    for (i = 0; cu.dependents != NULL && i < count; i++) {
        nd = sizeof(dep) / sizeof(dep[0]);
        CU(cu.dependents(node[i], dep, ddep, &nd));
    }
    t[6] = now_ms();
    printf("| %zu | %.3f | %.3f | %.3f | %.3f | %.3f | ", n, t[1] - t[0], t[2] - t[1],
           t[3] - t[2], t[4] - t[3], t[5] - t[4]);
    if (cu.dependents != NULL)
        printf("%.3f |\n", t[6] - t[5]);
    else
        printf("(not in this driver) |\n");
    fflush(stdout);
    free(from);
    free(to);
    free(data);
    free(sub);
    free(node);
    CU(cu.exec_destroy(e));
    CU(cu.graph_destroy(p));
}

int main(void)
{
    static const size_t sizes[] = {1000, 8000, 64000};
    const char *path = getenv("RECAP_CUDA_DRIVER");
    void *lib = dlopen(path != NULL && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    recap_generator_h gen;
    recap_graph_t filled = NULL;
    recap_stream_t s;
    CUcontext ctx;
    CUgraph empty;
    void *buf;
    size_t i;

    if (lib == NULL)
        fail("dlopen of the driver", 0);
#define SYM(f, name) if ((*(void **)&cu.f = dlsym(lib, name)) == NULL) fail(name, 0)
    SYM(ctx_retain, "cuDevicePrimaryCtxRetain");
    SYM(ctx_set, "cuCtxSetCurrent");
    SYM(graph_create, "cuGraphCreate");
    SYM(add_child, "cuGraphAddChildGraphNode");
    SYM(instantiate, "cuGraphInstantiateWithFlags");
    SYM(exec_destroy, "cuGraphExecDestroy");
    SYM(graph_destroy, "cuGraphDestroy");
    SYM(get_nodes, "cuGraphGetNodes");
    SYM(node_type, "cuGraphNodeGetType");
    SYM(child_graph, "cuGraphChildGraphNodeGetGraph");
    SYM(get_edges, "cuGraphGetEdges_v2");
    /* optional: a driver before CUDA 12.3 has only the version without edge data */
    *(void **)&cu.dependents = dlsym(lib, "cuGraphNodeGetDependentNodes_v2");
#undef SYM
    RC(recap_device_alloc(0, 4096, &buf)); /* recap sets device 0 up */
    CU(cu.ctx_retain(&ctx, 0));
    CU(cu.ctx_set(ctx));
    RC(recap_stream_create(0, &s));
    RC(recap_generator_create(0, &gen));
    RC(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
    RC(recap_generator_fill_u32(gen, s, buf, 1024));
    RC(recap_stream_end_capture(s, &filled));
    CU(cu.graph_create(&empty, 0));
    printf("Instantiating N child graph nodes: the driver's cuGraphInstantiate and recap's walk "
           "after it (recap_graph_instantiated), median ms.\n\n");
    printf("| children | N | driver instantiate ms | recap walk ms | recap / driver | walk peak "
           "growth kB |\n|---|---|---|---|---|---|\n");
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        row("draw nothing", sizes[i], empty);
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        row("draw, chained", sizes[i], (CUgraph)filled);
    printf("\nThe driver's answers to the queries a walk of N children that draw nothing makes, "
           "each kind over the whole level, ms (one run):\n\n| N | cuGraphGetNodes (parent) | "
           "cuGraphNodeGetType x N | cuGraphChildGraphNodeGetGraph x N | cuGraphGetNodes "
           "(child) x N | cuGraphGetEdges (parent, with data) | cuGraphNodeGetDependentNodes x N "
           "|\n|---|---|---|---|---|---|---|\n");
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        queries(sizes[i], empty);
    CU(cu.graph_destroy(empty));
    RC(recap_graph_destroy(filled));
    RC(recap_generator_destroy(gen));
    RC(recap_stream_destroy(s));
    RC(recap_device_free(0, buf));
    return 0;
}
