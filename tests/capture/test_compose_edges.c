/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The composition walk reads a graph level's edges node by node (cuGraphNodeGetDependentNodes_v2,
 * else its first version) where the driver has that call, else at once (cuGraphGetEdges): both
 * ways must give the walk the same edges. Random graphs of child graph nodes drawing from a few
 * generators (some themselves two children, ordered or not), empty nodes between them and random
 * edges (half of them along a chain), then more edges added after a first walk: each is exact or refused as a transitive
 * closure computed here says, and on the CUDA test double the same cases run against the double
 * as three drivers (both versions of the per-node call, the first only, neither: the variants
 * tests/double/Makefile.inc builds) give the same line per case: the result, the refusal, what
 * the walk reports it walked (graphs, nodes, edges, steps: its debug log line) and where one
 * launch leaves each generator. A failed edge read refuses, through whichever call is used.
 *
 * The cases run in child processes of this program (one per driver, with the seed, RECAP_LOG and
 * RECAP_LOG_FILE in their environment, as recap reads them at load), which write their lines to
 * the file $RECAP_COMPOSE_EDGES_OUT names.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "testutil.h"

#define NGEN 3
#define MAXN 24

static struct {
    CUresult (*ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_release)(CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*graph_create)(CUgraph *, unsigned);
    CUresult (*add_child)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph);
    CUresult (*add_empty)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t);
    CUresult (*add_deps)(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t);
    CUresult (*graph_destroy)(CUgraph);
    void (*fail_next)(const char *, int); /* the double's fault injection (NULL elsewhere) */
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
    SYM(add_empty, "cuGraphAddEmptyNode");
    SYM(add_deps, "cuGraphAddDependencies");
    SYM(graph_destroy, "cuGraphDestroy");
#undef SYM
    *(void **)&cu.fail_next = dlsym(lib, "recap_double_fail_next");
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

/* ------------------------------------------------------------------ the cases (child process) */

/* The generators and the graphs a parent's nodes run: per generator, a captured fill, and two
 * child graph nodes of it with an edge between them (ordered) or without (refused wherever it
 * is); and an empty graph (draws nothing). */
typedef struct {
    recap_generator_h gen[NGEN];
    recap_stream_t s;
    uint32_t *buf;
    CUgraph fill[NGEN], ordered[NGEN], unordered[NGEN], nothing;
} rig_t;

enum { K_EMPTY, K_NOTHING, K_FILL, K_ORDERED, K_UNORDERED };

static CUgraph pair_of(CUgraph child, int ordered)
{
    CUgraphNode a, b;
    CUgraph g;

    CU_OK(cu.graph_create(&g, 0));
    CU_OK(cu.add_child(&a, g, NULL, 0, child));
    CU_OK(cu.add_child(&b, g, &a, ordered ? 1 : 0, child));
    return g;
}

static void rig_init(rig_t *r)
{
    int k;

    ck_assert_ok(recap_stream_create(0, &r->s));
    ck_assert_ok(recap_device_alloc(0, 4 * 64 * NGEN, (void **)&r->buf));
    for (k = 0; k < NGEN; k++) {
        recap_graph_t g = NULL;

        ck_assert_ok(recap_generator_create(0, &r->gen[k]));
        ck_assert_ok(recap_generator_manual_seed(r->gen[k], 1000 + (uint64_t)k));
        ck_assert_ok(recap_stream_begin_capture(r->s, RECAP_CAPTURE_GLOBAL));
        ck_assert_ok(recap_generator_fill_u32(r->gen[k], r->s, r->buf + 64 * k,
                                              1 + tu_rand_below(64)));
        ck_assert_ok(recap_stream_end_capture(r->s, &g));
        r->fill[k] = (CUgraph)g;
        r->ordered[k] = pair_of(r->fill[k], 1);
        r->unordered[k] = pair_of(r->fill[k], 0);
    }
    CU_OK(cu.graph_create(&r->nothing, 0));
}

static void rig_free(rig_t *r)
{
    int k;

    for (k = 0; k < NGEN; k++) {
        CU_OK(cu.graph_destroy(r->ordered[k]));
        CU_OK(cu.graph_destroy(r->unordered[k]));
        ck_assert_ok(recap_graph_destroy((recap_graph_t)r->fill[k]));
        ck_assert_ok(recap_generator_destroy(r->gen[k]));
    }
    CU_OK(cu.graph_destroy(r->nothing));
    ck_assert_ok(recap_device_free(0, r->buf));
    ck_assert_ok(recap_stream_destroy(r->s));
}

/* What the walk of graph g reported it walked: the last debug log line for it. */
static void walked(CUgraph g, char *out, size_t size)
{
    FILE *f = fopen(getenv("RECAP_LOG_FILE"), "r");
    char line[1024], key[64];
    size_t c[4] = {0, 0, 0, 0};
    int found = 0;

    ck_assert_ptr_nonnull(f);
    snprintf(key, sizeof(key), "graph %p: walked ", (void *)g);
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *at = strstr(line, key);
        if (at != NULL)
            found = sscanf(at + strlen(key), "%zu graphs, %zu nodes, %zu edges in %zu steps", &c[0],
                           &c[1], &c[2], &c[3]) == 4;
    }
    fclose(f);
    ck_assert_msg(found, "no walk logged for graph %p", (void *)g);
    snprintf(out, size, "%zu graphs, %zu nodes, %zu edges, %zu steps", c[0], c[1], c[2], c[3]);
}

/* recap_last_error() without its pointers (graphs differ from run to run). */
static void reason(char *out, size_t size)
{
    const char *s = recap_last_error();
    size_t k = 0;

    while (*s != '\0' && k + 2 < size) {
        if (s[0] == '0' && s[1] == 'x') {
            for (s += 2; (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'); s++)
                ;
            out[k++] = 'P';
        } else {
            out[k++] = *s++;
        }
    }
    out[k] = '\0';
}

/* Instantiates p through recap, asserts the expected result, and appends the case's line to f. */
static void instantiate(rig_t *r, CUgraph p, int exact, FILE *f, int round, int phase)
{
    char cost[128], why[400] = "";
    recap_graph_exec_t e;
    recap_status_t st = recap_graph_instantiate((recap_graph_t)p, &e);
    int k;

    if (exact)
        ck_assert_msg(st == RECAP_OK, "round %d.%d: refused an exact graph: %s", round, phase,
                      recap_last_error());
    else
        ck_assert_msg(st == RECAP_ERR_UNSUPPORTED && strstr(recap_last_error(), "without an order"),
                      "round %d.%d: an unordered graph gave %d: %s", round, phase, st,
                      recap_last_error());
    walked(p, cost, sizeof(cost));
    if (st != RECAP_OK)
        reason(why, sizeof(why));
    fprintf(f, "case %d.%d: %d, %s%s%s, states", round, phase, st, cost, *why ? ": " : "", why);
    if (st == RECAP_OK) {
        ck_assert_ok(recap_graph_launch(e, r->s));
        ck_assert_ok(recap_stream_synchronize(r->s));
        ck_assert_ok(recap_graph_exec_destroy(e));
    }
    for (k = 0; k < NGEN; k++) {
        uint8_t state[RECAP_STATE_BYTES];
        size_t i;

        ck_assert_ok(recap_generator_get_state(r->gen[k], state));
        fputc(' ', f);
        for (i = 0; i < sizeof(state); i++)
            fprintf(f, "%02x", state[i]);
    }
    fputc('\n', f);
}

/* Exact when no part is an unordered pair and every two parts drawing from one generator are
 * ordered (reach: the transitive closure of the edges). */
static int exact_of(int n, unsigned char reach[MAXN][MAXN], const int *kind, const unsigned *mask)
{
    int i, j, k;

    for (k = 0; k < n; k++)
        for (i = 0; i < n; i++)
            for (j = 0; j < n; j++)
                reach[i][j] |= reach[i][k] && reach[k][j];
    for (i = 0; i < n; i++) {
        if (kind[i] == K_UNORDERED)
            return 0;
        for (j = i + 1; j < n; j++)
            if ((mask[i] & mask[j]) != 0 && !reach[i][j])
                return 0;
    }
    return 1;
}

START_TEST(random_graphs_walked)
{
    FILE *f = fopen(getenv("RECAP_COMPOSE_EDGES_OUT"), "a");
    int round;
    rig_t r;

    ck_assert_ptr_nonnull(f);
    rig_init(&r);
    for (round = 0; round < 40; round++) {
        int n = 2 + (int)tu_rand_below(MAXN - 1), kind[MAXN], i, j;
        unsigned mask[MAXN], one_in = 1u << (1 + tu_rand_below(3)), chain = tu_rand_below(2) == 0;
        unsigned char edge[MAXN][MAXN], reach[MAXN][MAXN];
        CUgraphNode node[MAXN], d[MAXN];
        CUgraph p;

        memset(edge, 0, sizeof(edge));
        CU_OK(cu.graph_create(&p, 0));
        for (i = 0; i < n; i++) {
            uint64_t x = tu_rand_below(20), g = tu_rand_below(NGEN);
            size_t nd = 0;

            kind[i] = x < 4 ? K_EMPTY : x < 6 ? K_NOTHING : x < 17 ? K_FILL : x < 19 ? K_ORDERED
                                                                                   : K_UNORDERED;
            mask[i] = kind[i] >= K_FILL ? 1u << g : 0;
            for (j = 0; j < i; j++) /* edges from earlier nodes only (an order exists) */
                if ((chain && j == i - 1) || tu_rand_below(one_in) == 0) {
                    d[nd++] = node[j];
                    edge[j][i] = 1;
                }
            if (kind[i] == K_EMPTY)
                CU_OK(cu.add_empty(&node[i], p, d, nd));
            else
                CU_OK(cu.add_child(&node[i], p, d, nd,
                                   kind[i] == K_NOTHING ? r.nothing
                                   : kind[i] == K_FILL  ? r.fill[g]
                                   : kind[i] == K_ORDERED ? r.ordered[g]
                                                          : r.unordered[g]));
        }
        memcpy(reach, edge, sizeof(reach));
        instantiate(&r, p, exact_of(n, reach, kind, mask), f, round, 0);
        /* more edges after a walk read the graph's (forward, each once) */
        for (i = 0; i < n; i++) {
            int a = (int)tu_rand_below((uint64_t)n - 1), b = a + 1 + (int)tu_rand_below((uint64_t)(n - a - 1));
            if (!edge[a][b]) {
                CU_OK(cu.add_deps(p, &node[a], &node[b], 1));
                edge[a][b] = 1;
            }
        }
        memcpy(reach, edge, sizeof(reach));
        instantiate(&r, p, exact_of(n, reach, kind, mask), f, round, 1);
        CU_OK(cu.graph_destroy(p));
    }
    rig_free(&r);
    fclose(f);
}
END_TEST

/* The call the walk reads edges with ($RECAP_COMPOSE_EDGES_CALL, on the double) failing: the
 * walk cannot check the order, and refuses. */
START_TEST(failed_edge_read_refuses)
{
    const char *call = getenv("RECAP_COMPOSE_EDGES_CALL");
    recap_graph_exec_t e;
    CUgraphNode a, b;
    CUgraph p;
    rig_t r;

    if (cu.fail_next == NULL || call == NULL)
        return; /* fault injection is the double's */
    rig_init(&r);
    CU_OK(cu.graph_create(&p, 0));
    CU_OK(cu.add_child(&a, p, NULL, 0, r.fill[0]));
    CU_OK(cu.add_child(&b, p, &a, 1, r.fill[0]));
    ck_assert_ok(recap_graph_instantiate((recap_graph_t)p, &e));
    ck_assert_ok(recap_graph_exec_destroy(e));
    cu.fail_next(call, 1);
    ck_assert_status(recap_graph_instantiate((recap_graph_t)p, &e), RECAP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(recap_last_error(), "cannot read the graph's edges") != NULL, "%s",
                  recap_last_error());
    cu.fail_next(call, 0);
    CU_OK(cu.graph_destroy(p));
    rig_free(&r);
}
END_TEST

/* ------------------------------------------------------------------ the drivers (parent) */

/* Runs the cases in a child process against `driver`; their lines (free them). */
static char *run_cases(const char *self, const char *driver, const char *call, uint64_t seed)
{
    char out[] = "/tmp/recap-compose-edges-XXXXXX", log[] = "/tmp/recap-compose-edges-log-XXXXXX";
    char cmd[4096], *lines;
    int fd, status;
    long size;
    FILE *f;

    ck_assert_int_ge(fd = mkstemp(out), 0);
    close(fd);
    ck_assert_int_ge(fd = mkstemp(log), 0);
    close(fd);
    snprintf(cmd, sizeof(cmd),
             "RECAP_CUDA_DRIVER='%s' RECAP_COMPOSE_EDGES_CALL='%s' RECAP_TEST_SEED=%" PRIu64
             " RECAP_LOG=debug RECAP_LOG_FILE='%s' RECAP_COMPOSE_EDGES_OUT='%s' '%s' >&2",
             driver, call, seed, log, out, self);
    free(tu_shell(cmd, &status));
    ck_assert_msg(status == 0, "the cases failed against %s (exit %d)", driver, status);
    f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    rewind(f);
    ck_assert_ptr_nonnull(lines = calloc((size_t)size + 1, 1));
    ck_assert_uint_eq(fread(lines, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    unlink(out);
    unlink(log);
    return lines;
}

START_TEST(edge_paths_agree)
{
    static const struct {
        const char *lib, *call;
    } drivers[] = {
        {"libcudadouble.so", "cuGraphNodeGetDependentNodes_v2"},
        {"libcudadoubledepsv1.so", "cuGraphNodeGetDependentNodes"},
        {"libcudadoublenodeps.so", "cuGraphGetEdges_v2"},
    };
    const char *path = getenv("RECAP_CUDA_DRIVER"), *base;
    char self[4096], lib[4096], *first = NULL;
    uint64_t seed = tu_rand();
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    size_t i, dir;

    ck_assert_int_gt(len, 0);
    self[len] = '\0';
    base = path != NULL ? strrchr(path, '/') : NULL;
    if (base == NULL || strcmp(base + 1, drivers[0].lib) != 0) { /* a real driver: one run */
        free(run_cases(self, path != NULL ? path : "", "", seed));
        return;
    }
    dir = (size_t)(base + 1 - path);
    for (i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++) {
        char *lines;

        snprintf(lib, sizeof(lib), "%.*s%s", (int)dir, path, drivers[i].lib);
        lines = run_cases(self, lib, drivers[i].call, seed);
        ck_assert_msg(strstr(lines, "case 39.1:") != NULL, "%s: cases missing:\n%s", lib, lines);
        if (first == NULL) {
            first = lines;
        } else {
            ck_assert_msg(strcmp(first, lines) == 0, "%s walked otherwise than %s:\n%s\nvs\n%s",
                          drivers[i].lib, drivers[0].lib, lines, first);
            free(lines);
        }
    }
    free(first);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("compose_edges");
    TCase *tc = tcase_create("compose_edges");

    tcase_set_timeout(tc, 120);
    if (getenv("RECAP_COMPOSE_EDGES_OUT") != NULL) { /* a child: the cases */
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, random_graphs_walked);
        tcase_add_test(tc, failed_edge_read_refuses);
    } else {
        tcase_add_test(tc, edge_paths_agree);
    }
    suite_add_tcase(s, tc);
    return tu_run(s);
}
