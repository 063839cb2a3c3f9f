/* SPDX-License-Identifier: Apache-2.0 */
/* Operations on captures, graphs and executables; signatures; the rest. */
#include <dlfcn.h>
#include <limits.h>

#include <cuda.h>

#include "tests/fuzz/fuzz.h"

static int stream_slot(input_t *in)
{
    int s = pick(in, NSTREAM);

    return w.stream[s] != NULL ? s : -1;
}

static int free_graph_slot(void)
{
    int i;

    for (i = 0; i < NGRAPH; i++)
        if (w.graph[i] == NULL)
            return i;
    return -1;
}

void op_capture(input_t *in)
{
    int s = stream_slot(in), g;
    recap_graph_t graph = (recap_graph_t)0x1;
    recap_status_t st;

    if (s < 0)
        return;
    switch (u8(in) % 4) {
    case 0: /* begin, in any mode value (valid ones mostly) */
        st = CALL(recap_stream_begin_capture(w.stream[s], (recap_capture_mode_t)(u8(in) % 4)));
        if (st == RECAP_OK)
            w.capturing[s] = 1;
        break;
    case 1: /* end, also of a stream that is not capturing */
        g = free_graph_slot();
        if (g < 0)
            return;
        st = CALL(recap_stream_end_capture(w.stream[s], &graph));
        if (st == RECAP_OK)
            w.graph[g] = graph;
        else
            REQUIRE(graph == (recap_graph_t)0x1);
        if (w.capturing[s] || st == RECAP_OK)
            w.capturing[s] = 0; /* ended either way */
        break;
    case 2:
        CALL(recap_capture_prime(w.stream[s]));
        break;
    default: /* events out of order */
        CALL(recap_capture_began(w.stream[s]));
        CALL(recap_capture_will_end(w.stream[s]));
        break;
    }
}

void op_graph(input_t *in)
{
    int gi = pick(in, NGRAPH), ei = pick(in, NEXEC), s;
    recap_graph_exec_t e = (recap_graph_exec_t)0x1;
    recap_graph_t c = (recap_graph_t)0x1;

    switch (u8(in) % 5) {
    case 0:
        if (w.graph[gi] == NULL || w.exec[ei] != NULL)
            return;
        if (CALL(recap_graph_instantiate(w.graph[gi], &e)) == RECAP_OK)
            w.exec[ei] = e;
        break;
    case 1:
        if (w.exec[ei] == NULL || (s = stream_slot(in)) < 0)
            return;
        CALL(recap_graph_launch(w.exec[ei], w.stream[s]));
        break;
    case 2: {
        int free_slot = free_graph_slot();

        if (w.graph[gi] == NULL || free_slot < 0)
            return;
        if (CALL(recap_graph_clone(w.graph[gi], &c)) == RECAP_OK)
            w.graph[free_slot] = c;
        break;
    }
    case 3: /* the driver may refuse (inside a global capture): the graph stays */
        if (w.graph[gi] != NULL && CALL(recap_graph_destroy(w.graph[gi])) == RECAP_OK)
            w.graph[gi] = NULL;
        break;
    default:
        if (w.exec[ei] != NULL && CALL(recap_graph_exec_destroy(w.exec[ei])) == RECAP_OK)
            w.exec[ei] = NULL;
        break;
    }
}

void op_signature(input_t *in)
{
    recap_type_t types[RECAP_MAX_ARGS + 4];
    recap_signature_h sig = (recap_signature_h)0x1;
    int s = pick(in, NSIG);
    size_t n = u8(in) % (RECAP_MAX_ARGS + 3), i;

    if (w.sig[s] != NULL) {
        REQUIRE(CALL(recap_signature_destroy(w.sig[s])) == RECAP_OK);
        w.sig[s] = NULL;
        return;
    }
    for (i = 0; i < n; i++)
        types[i] = (recap_type_t)(u8(in) % 12);
    if (CALL(recap_signature_create((recap_type_t)(u8(in) % 12), n ? types : NULL, n, &sig)) ==
        RECAP_OK)
        w.sig[s] = sig;
    else
        REQUIRE(sig == (recap_signature_h)0x1);
}

void op_misc(input_t *in)
{
    recap_capture_stats_t cs;
    recap_hooks_t hooks;
    char devname[64];
    size_t mem;
    void *p;
    int v, a, b;

    switch (u8(in) % 7) {
    case 0:
        REQUIRE(recap_strerror((recap_status_t)(int)num(in)) != NULL);
        break;
    case 1:
        REQUIRE(CALL(recap_capture_stats(&cs)) == RECAP_OK);
        break;
    case 2:
        REQUIRE(CALL(recap_hooks_active(&hooks)) == RECAP_OK && hooks == RECAP_HOOKS_NONE);
        break;
    case 3:
        CALL(recap_device_info((int)(num(in) % 5) - 1, u8(in) % 2 ? devname : NULL,
                               1 + u8(in) % sizeof(devname), &a, &b, &mem));
        break;
    case 4:
        CALL(recap_driver_version(&v));
        break;
    case 5: /* device memory that no fill uses */
        if (CALL(recap_device_alloc((int)(u8(in) % 3) - 1, (size_t)(num(in) % 100000), &p)) ==
            RECAP_OK)
            REQUIRE(CALL(recap_device_free(0, p)) == RECAP_OK);
        break;
    default:
        if (w.dbuf[0] != NULL) {
            size_t n = (size_t)(num(in) % (HBUF_WORDS * 4));
            if (u8(in) % 2)
                CALL(recap_memcpy_to_host(0, w.hbuf, w.dbuf[0], n));
            else
                CALL(recap_memcpy_to_device(0, w.dbuf[0], w.hbuf, n));
        }
        break;
    }
}

/* The driver calls recap does not make (building parents), from the driver recap uses. */
static struct {
    CUresult (*graph_create)(CUgraph *, unsigned);
    CUresult (*add_child)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph);
    int tried;
} drv;

static int driver_ready(void)
{
    if (!drv.tried) {
        const char *path = getenv("RECAP_CUDA_DRIVER");
        void *lib = dlopen(path != NULL && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

        drv.tried = 1;
        if (lib != NULL) {
            *(void **)&drv.graph_create = dlsym(lib, "cuGraphCreate");
            *(void **)&drv.add_child = dlsym(lib, "cuGraphAddChildGraphNode");
        }
    }
    return drv.graph_create != NULL && drv.add_child != NULL;
}

/* Graph g wrapped in `depth` parents (recap_graph_destroy frees it, and the copies in it). */
static recap_graph_t nest(recap_graph_t g, int depth)
{
    CUgraph cur = (CUgraph)g, p;
    CUgraphNode node;
    int i;

    for (i = 0; i < depth; i++) {
        REQUIRE(drv.graph_create(&p, 0) == CUDA_SUCCESS);
        REQUIRE(drv.add_child(&node, p, NULL, 0, cur) == CUDA_SUCCESS);
        if (cur != (CUgraph)g)
            REQUIRE(CALL(recap_graph_destroy((recap_graph_t)cur)) == RECAP_OK);
        cur = p;
    }
    return (recap_graph_t)cur;
}

static void offsets(uint64_t *off)
{
    int i;

    for (i = 0; i < NGEN; i++)
        if (w.gen[i].h == NULL || CALL(recap_generator_offset(w.gen[i].h, &off[i])) != RECAP_OK)
            off[i] = 0;
}

/* Nesting depth and counts that become sizes: a graph at any depth (up to 300 levels) launches
 * exactly as the graph itself does, or is refused with a message; a conditional node's body count
 * of any value is recorded or refused (never a wrapped size). */
void op_nest(input_t *in)
{
    int gi = pick(in, NGRAPH), s = stream_slot(in), depth = 1 + (int)(num(in) % 300);
    recap_graph_exec_t e1 = NULL, e2 = NULL;
    uint64_t o0[NGEN], o1[NGEN], o2[NGEN];
    recap_graph_t nested;
    int i;

    if (!w.have_device || !driver_ready() || w.graph[gi] == NULL)
        return;
    if (u8(in) % 4 == 0) { /* a body count of any size */
        recap_graph_t bodies[2] = {w.graph[gi], NULL};
        size_t count = (size_t)num(in) << (u8(in) % 64);
        recap_status_t st = CALL(recap_graph_conditional_added(w.graph[gi],
                                                               (recap_graph_node_t)bodies, bodies,
                                                               count > UINT_MAX ? count : count % 3));

        REQUIRE(count > UINT_MAX ? st == RECAP_ERR_INVALID_ARG : st == RECAP_OK);
        return;
    }
    nested = nest(w.graph[gi], depth);
    if (s >= 0 && !w.capturing[s] && CALL(recap_graph_instantiate(w.graph[gi], &e1)) == RECAP_OK) {
        recap_status_t st = CALL(recap_graph_instantiate(nested, &e2));

        REQUIRE(st == RECAP_OK || st == RECAP_ERR_UNSUPPORTED);
        offsets(o0);
        if (st == RECAP_OK && CALL(recap_graph_launch(e1, w.stream[s])) == RECAP_OK) {
            offsets(o1);
            REQUIRE(CALL(recap_graph_launch(e2, w.stream[s])) == RECAP_OK);
            offsets(o2);
            for (i = 0; i < NGEN; i++) /* the nested launch drew what the graph's own did */
                REQUIRE(o2[i] - o1[i] == o1[i] - o0[i]);
        }
        if (e2 != NULL)
            REQUIRE(CALL(recap_graph_exec_destroy(e2)) == RECAP_OK);
        REQUIRE(CALL(recap_graph_exec_destroy(e1)) == RECAP_OK);
    }
    REQUIRE(CALL(recap_graph_destroy(nested)) == RECAP_OK);
}
