/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A CUDA driver test double: a fake libcuda.so.1 implementing the subset of the driver API that
 * recap uses, so CI (no GPU) exercises recap's device code paths. Device memory is host memory
 * tracked by allocation; kernels are recap's own kernel bodies (the src/kernels body headers)
 * compiled for the host and run thread by thread over the launch grid; streams execute in order
 * at once.
 *
 * Stream capture and graphs: a capturing stream records its work (kernels, stream memory
 * operations, async copies and memsets) as the nodes of a graph instead of running it; graphs
 * are linear node lists, executables are snapshots of them. The capture rules of the real driver
 * that recap can observe are enforced (rules.c), and tests/double/probe_rules.c checks them
 * against a real driver.
 *
 * recap finds it through RECAP_CUDA_DRIVER (test-only). Knobs, for tests:
 *   RECAP_DOUBLE_DEVICES=N     number of devices (default 2)
 *   RECAP_DOUBLE_FAIL_INIT=1   cuInit fails with CUDA_ERROR_NO_DEVICE
 * and the recap_double_* exports (launch/node/stream-operation counts, live graph, executable and
 * module counts, primary context retains, fault injection). Never installed.
 *
 * The double's files, one a topic: state.c (its objects), inspect.c (the recap_double_* knobs),
 * device.c, rules.c (the capture rules), memory.c, nodes.c, stream.c, launch.c (modules and
 * running work), stream_ops.c, capture.c, graph.c, compose.c (graph composition: child graph
 * nodes, edges, kernel node parameters read back, exec update, child graph node update in an
 * exec, exec flags, conditional and empty nodes). They share this header (never installed).
 */
#ifndef RECAP_TESTS_DOUBLE_DOUBLE_H
#define RECAP_TESTS_DOUBLE_DOUBLE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* cuda.h then declares the legacy and per-thread-stream names too (cuGraphInstantiate's 5-argument
 * form, cuStreamGetCaptureInfo's 3-argument form, the _ptsz variants). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/registry.h"

#include "recap.h" /* RECAP_API, the one export macro */

/* Which versions of cuGraphNodeGetDependentNodes the double exports: 2 both (as a CUDA >= 12.3
 * driver), 1 the one without edge data (CUDA 10.0 to 12.2), 0 neither (the variants built for
 * tests/test_compose_edges, where recap then reads the edges with cuGraphGetEdges). */
#ifndef DOUBLE_DEPENDENT_NODES
#define DOUBLE_DEPENDENT_NODES 2
#endif

#define MAX_DEV 16
#define MAX_ALLOC 4096
#define FATBIN_MAGIC 0xBA55ED50u

typedef struct double_ctx {
    int device;
} double_ctx_t;

typedef struct double_capture double_capture_t;

typedef struct double_stream {
    int device;
    int alive;
    unsigned flags;
    double_capture_t *cap; /* capture in progress on this stream, or NULL */
    struct double_stream *next;
} double_stream_t;

/* Every recap kernel runs through one signature: its by-value parameter block, thread, threads. */
typedef void (*kernel_body_t)(const void *, uint64_t, uint64_t);

typedef struct double_function {
    const char *name;
    kernel_body_t body;
    size_t params_size;
    int device;
} double_function_t;

extern const double_function_t kernel_table[RECAP_K_COUNT];
#define NKERNELS ((size_t)RECAP_K_COUNT)

typedef struct double_module {
    int device;
    double_function_t fns[NKERNELS];
    struct double_module *next;
} double_module_t;

/* One unit of stream work: run at once, or recorded as a graph node (CUgraphNode = op_t *).
 * OP_CHILD (a child graph node), OP_COND (a conditional node) and OP_EMPTY exist only in graphs
 * (compose.c). */
typedef enum {
    OP_KERNEL, OP_WRITE32, OP_WRITE64, OP_MEMSET8, OP_MEMSET32, OP_HTOD, OP_DTOH, OP_HOSTFN,
    OP_CHILD, OP_COND, OP_EMPTY
} op_kind_t;

struct double_graph;

typedef struct op {
    op_kind_t kind;
    const double_function_t *fn; /* OP_KERNEL */
    unsigned grid, block;
    void *params; /* OP_KERNEL: owned copy of the parameter block */
    CUdeviceptr dptr;
    void *host; /* OP_HTOD source / OP_DTOH destination / OP_HOSTFN data (not owned) */
    CUhostFn hostfn; /* OP_HOSTFN */
    uint64_t value;
    size_t n; /* bytes (copies), elements (memsets) */
    /* OP_CHILD: body[0] is the embedded graph; OP_COND: the bodies, its type and handle */
    struct double_graph *body[2];
    unsigned nbodies;
    CUgraphConditionalNodeType cond_type;
    CUgraphConditionalHandle cond;
    void *kparams[1]; /* what cuGraphKernelNodeGetParams hands out */
    /* The graph holding the node and its index there (cuGraphNodeGetDependentNodes starts from
     * the node alone); NULL for a node in no graph (an exec's snapshot, a copy not yet taken).
     * Set where nodes enter a graph: graph_append_locked, graph_take_ops_locked. */
    struct double_graph *owner;
    size_t index;
} op_t;

typedef struct double_graph {
    op_t **ops;
    size_t n, cap;
    int capturing; /* owned by a capture in progress */
    int embedded;  /* a child graph node's or conditional node's own graph */
    size_t *efrom, *eto, ne, ecap; /* edges, as node indices */
    /* The dependents of each node, built from the edges when first asked for (a scan of every
     * edge per query would make a walk of all nodes quadratic) and rebuilt after nodes or edges
     * change (dep_valid 0): node i's are dep[dep_first[i] .. dep_first[i + 1]), in edge order. */
    size_t *dep_first, *dep;
    int dep_valid;
    struct double_graph *next, **prevp; /* prevp: where the list points at it (freed in O(1)) */
} double_graph_t;

typedef struct double_exec {
    op_t **ops;
    size_t n;
    double_graph_t *src; /* the graph instantiated (child graph nodes are found in it) */
    unsigned long long flags;
    struct double_exec *next;
} double_exec_t;

struct double_capture {
    uint64_t id;
    CUstreamCaptureMode mode;
    pthread_t thread; /* the thread that began it */
    int invalidated;
    double_stream_t *stream;
    double_graph_t *graph;
    double_capture_t *next;
};

extern pthread_mutex_t lock;
extern int initialized, ndev;
extern double_ctx_t primary[MAX_DEV];
extern int primary_retains[MAX_DEV]; /* cuDevicePrimaryCtxRetain minus ...Release, per device */
typedef struct {
    uintptr_t base;
    size_t size;
    int device;
    int pinned; /* cuMemAllocHost: host memory the device can address (UVA) */
} double_alloc_t;
extern double_alloc_t allocs[MAX_ALLOC];
extern int nallocs;
extern unsigned long launches, stream_ops;

/* Live objects, under the lock. */
extern double_stream_t *streams;
extern double_graph_t *graphs;
extern double_exec_t *execs;
extern double_module_t *modules;
extern double_capture_t *captures; /* every capture in progress */
extern uint64_t capture_seq;

/* The current-context stack of each thread, its capture interaction mode and its per-thread
 * default stream. */
extern _Thread_local CUcontext ctx_stack[32];
extern _Thread_local int ctx_depth;
extern _Thread_local CUstreamCaptureMode thread_mode;
extern _Thread_local double_stream_t ptds;


/* First statement of every exported driver function. */
#define ENTER()                               \
    do {                                      \
        CUresult inj_ = injected(__func__);   \
        if (inj_ != CUDA_SUCCESS)             \
            return inj_;                      \
    } while (0)

#define NEED_INIT()                          \
    do {                                     \
        ENTER();                             \
        if (!initialized)                    \
            return CUDA_ERROR_NOT_INITIALIZED; \
    } while (0)

/* The files' shared functions (each defined in the file of its topic). */
void land_copies_locked(void);
void land_copies(void);
int stage_copy(CUdeviceptr dst, const void *src, size_t n);
CUresult injected(const char *fn);
int ctx_device(CUcontext c);
CUcontext current(void);
CUresult unsafe_call_locked(void);
CUresult unsafe_call(void);
CUresult legacy_use_locked(int device, int invalidate);
int find_alloc(uintptr_t p, size_t len);
int track_alloc(void *p, size_t bytes, int pinned);
int untrack_alloc(uintptr_t base, int pinned);
CUresult check_range(CUdeviceptr p, size_t len);
CUresult sync_op_allowed(void);
void op_free(op_t *op);
op_t *op_clone(const op_t *src);
op_t **ops_clone(op_t *const *ops, size_t n);
double_graph_t *graph_new_locked(void);
int graph_live_locked(CUgraph h);
void graph_free_locked(double_graph_t *g);
CUresult graph_append_locked(double_graph_t *g, op_t *op);
CUresult graph_take_ops_locked(double_graph_t *g, op_t **ops, size_t n);
void graph_truncate_locked(double_graph_t *g, size_t n, size_t ne);
op_t *node_live_locked(CUgraphNode h);
int exec_live_locked(CUgraphExec h);
CUresult resolve_locked(CUstream s, int per_thread, double_stream_t **out);
int stream_device_of(const double_stream_t *st);
void capture_unlink_locked(double_capture_t *cap);
CUresult run_op(const op_t *op);
CUresult run_ops(op_t *const *ops, size_t n);
CUresult submit(CUstream s, int per_thread, const op_t *op);

/* Graph composition (compose.c). */
static inline int double_op_compound(op_kind_t k)
{
    return k == OP_CHILD || k == OP_COND;
}
CUresult double_op_clone_bodies(op_t *dst, const op_t *src);
void double_op_free_bodies(op_t *op);
CUresult double_run_compound(const op_t *op);
CUresult double_graph_edge_locked(double_graph_t *g, size_t from, size_t to);
CUresult double_graph_copy_edges_locked(double_graph_t *g, const double_graph_t *src);
/* Appends op with edges from `deps` (nodes of g). */
CUresult double_graph_add_locked(double_graph_t *g, op_t *op, const CUgraphNode *deps, size_t ndeps);

#endif
