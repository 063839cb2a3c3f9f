/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA test double's internals shared by its files (cuda_double.c: devices, memory, streams,
 * captures, graphs; compose.c: graph composition). Hidden: the double exports only the driver's
 * names and recap_double_*.
 */
#ifndef RECAP_TESTS_DOUBLE_H
#define RECAP_TESTS_DOUBLE_H

#include <cuda.h>
#include <pthread.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

/* Every recap kernel runs through one signature: its by-value parameter block, thread, threads. */
typedef void (*kernel_body_t)(const void *, uint64_t, uint64_t);

typedef struct double_function {
    const char *name;
    kernel_body_t body;
    size_t params_size;
    int device;
} double_function_t;

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
} op_t;

typedef struct double_graph {
    op_t **ops;
    size_t n, cap;
    int capturing; /* owned by a capture in progress */
    int embedded;  /* a child graph node's or conditional node's own graph */
    size_t *efrom, *eto, ne, ecap; /* edges, as node indices */
    struct double_graph *next;
} double_graph_t;

typedef struct double_exec {
    op_t **ops;
    size_t n;
    double_graph_t *src; /* the graph instantiated (child graph nodes are found in it) */
    unsigned long long flags;
    struct double_exec *next;
} double_exec_t;

extern pthread_mutex_t lock;
extern int initialized;
extern double_graph_t *graphs;
extern double_exec_t *execs;

CUresult injected(const char *fn);
int ctx_device(CUcontext c);
CUcontext current(void);
void op_free(op_t *op);
op_t *op_clone(const op_t *src);
op_t **ops_clone(op_t *const *ops, size_t n);
double_graph_t *graph_new_locked(void);
int graph_live_locked(CUgraph h);
void graph_free_locked(double_graph_t *g);
CUresult graph_append_locked(double_graph_t *g, op_t *op);
int exec_live_locked(CUgraphExec h);
CUresult run_ops(op_t *const *ops, size_t n);

/* compose.c */
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

#endif
