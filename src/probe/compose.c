/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/dl.h"
#include "base/error.h"
#include "probe/probe.h"

/*
 * Graph composition on this driver (capture/compose.c), one check per way of composing: a
 * captured fill embedded as a child graph node (nested, the parent cloned), exec updates,
 * graphs built node by node, conditional bodies, device-launch execs, upload and two streams.
 * The exact ones must draw what eager runs of a twin generator draw; the refused ones must be
 * refused with RECAP_ERR_UNSUPPORTED. recap's own calls report the events, so the checks say
 * what the library does whatever front end the process has.
 */

#define N 4099 /* words per fill: a partial Philox block */

static struct {
    CUresult (*add_child)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph);
    CUresult (*exec_update)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
    CUresult (*exec_child)(CUgraphExec, CUgraphNode, CUgraph);
    CUresult (*add_kernel)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                           const CUDA_KERNEL_NODE_PARAMS *);
    CUresult (*add_node)(CUgraphNode *, CUgraph, const CUgraphNode *, const CUgraphEdgeData *,
                         size_t, CUgraphNodeParams *);
} cx;

typedef struct {
    recap__probe_dev_t pd;
    recap_generator_h g, twin;
    recap_stream_t s;
    uint32_t *buf, *tbuf, *got, *want;
    CUgraph c; /* a captured fill of N words from g into buf */
} rig_t;

static int rig_init(rig_t *r, recap__probe_out_t *out)
{
    void *lib = recap__driver_lib();
    recap_status_t st;

    memset(r, 0, sizeof(*r));
    if (lib == NULL)
        return recap__probe_fail(out, "no driver library"), -1;
    *(void **)&cx.add_child = recap__dlsym(lib, "cuGraphAddChildGraphNode");
    *(void **)&cx.exec_update = recap__dlsym(lib, "cuGraphExecUpdate_v2");
    *(void **)&cx.exec_child = recap__dlsym(lib, "cuGraphExecChildGraphNodeSetParams");
    *(void **)&cx.add_kernel = recap__dlsym(lib, "cuGraphAddKernelNode_v2");
    *(void **)&cx.add_node = recap__dlsym(lib, "cuGraphAddNode_v2");
    r->got = malloc(8 * N);
    r->want = malloc(8 * N);
    st = r->got != NULL && r->want != NULL ? RECAP_OK : RECAP_ERR_NO_MEMORY;
    if (st == RECAP_OK)
        st = recap_stream_create(0, &r->s);
    if (st == RECAP_OK)
        st = recap_generator_create(0, &r->g);
    if (st == RECAP_OK)
        st = recap_generator_create(0, &r->twin);
    if (st == RECAP_OK)
        st = recap_device_alloc(0, 8 * N, (void **)&r->buf);
    if (st == RECAP_OK)
        st = recap_device_alloc(0, 8 * N, (void **)&r->tbuf);
    if (st == RECAP_OK)
        st = recap_stream_begin_capture(r->s, RECAP_CAPTURE_GLOBAL);
    if (st == RECAP_OK) {
        recap_status_t fst = recap_generator_fill_u32(r->g, r->s, r->buf, N);
        st = recap_stream_end_capture(r->s, (recap_graph_t *)&r->c);
        if (st == RECAP_OK)
            st = fst;
    }
    if (st != RECAP_OK)
        return recap__probe_fail(out, "setting up: %s", recap_last_error()), -1;
    return recap__probe_enter(&r->pd, out);
}

static void rig_free(rig_t *r)
{
    if (r->pd.drv != NULL)
        recap__probe_leave(&r->pd);
    if (r->c != NULL)
        recap_graph_destroy(r->c);
    if (r->buf != NULL)
        recap_device_free(0, r->buf);
    if (r->tbuf != NULL)
        recap_device_free(0, r->tbuf);
    if (r->g != NULL)
        recap_generator_destroy(r->g);
    if (r->twin != NULL)
        recap_generator_destroy(r->twin);
    if (r->s != NULL)
        recap_stream_destroy(r->s);
    free(r->got);
    free(r->want);
}

/* Launches exec K times; each must equal `runs` eager fills of n words (the last of them). */
static int exact(rig_t *r, recap__probe_out_t *out, recap_graph_exec_t e, size_t n, int runs,
                 const char *what)
{
    uint8_t a[RECAP_STATE_BYTES], b[RECAP_STATE_BYTES];
    int k, i;

    for (k = 0; k < 3; k++) {
        recap_status_t st = recap_graph_launch(e, r->s);
        for (i = 0; i < runs && st == RECAP_OK; i++)
            st = recap_generator_fill_u32(r->twin, r->s, r->tbuf, n);
        if (st == RECAP_OK)
            st = recap_stream_synchronize(r->s);
        if (st == RECAP_OK)
            st = recap_memcpy_to_host(0, r->got, r->buf, 4 * n);
        if (st == RECAP_OK)
            st = recap_memcpy_to_host(0, r->want, r->tbuf, 4 * n);
        if (st != RECAP_OK)
            return recap__probe_fail(out, "%s: launch %d: %s", what, k, recap_last_error()), -1;
        if (memcmp(r->got, r->want, 4 * n) != 0)
            return recap__probe_fail(out, "%s: launch %d drew other numbers than eager run %d",
                                     what, k, k), -1;
    }
    recap_generator_get_state(r->g, a);
    recap_generator_get_state(r->twin, b);
    if (memcmp(a, b, sizeof(a)) != 0)
        return recap__probe_fail(out, "%s: the generator's offset after 3 launches is not where "
                                 "3 eager runs leave it", what), -1;
    recap__probe_say(out, "%s%s: exact (3 launches = 3 eager runs)", out->len ? "; " : "", what);
    return 0;
}

/* Instantiates g; expects recap to refuse it with RECAP_ERR_UNSUPPORTED. */
static void refused(rig_t *r, recap__probe_out_t *out, CUgraph g, unsigned long long flags,
                    const char *what)
{
    CUgraphExec e = NULL;
    CUresult rc = r->pd.drv->cuGraphInstantiateWithFlags(&e, g, flags);
    recap_status_t st;

    if (rc != CUDA_SUCCESS) {
        recap__probe_say(out, "%s%s: the driver itself refuses to instantiate it", out->len ? "; " : "",
                         what);
        return;
    }
    st = recap_graph_instantiated(g, e);
    if (st == RECAP_ERR_UNSUPPORTED)
        recap__probe_say(out, "%s%s: refused (%.160s)", out->len ? "; " : "", what, recap_last_error());
    else
        recap__probe_fail(out, "%s: not refused (%s)", what, recap_strerror(st));
    recap_graph_exec_destroyed(e);
    r->pd.drv->cuGraphExecDestroy(e);
}

static int need(recap__probe_out_t *out, void *fn, const char *name)
{
    if (fn != NULL)
        return 0;
    out->status = RECAP_PROBE_NA;
    recap__probe_say(out, "not applicable: this driver lacks %s", name);
    return -1;
}

void recap__probe_compose_child(recap__probe_out_t *out)
{
    recap_graph_exec_t e = NULL;
    CUgraph p = NULL, p2 = NULL, clone = NULL;
    CUgraphNode a, b;
    rig_t r;

    if (rig_init(&r, out) == 0 && need(out, (void *)cx.add_child, "cuGraphAddChildGraphNode") == 0 &&
        r.pd.drv->cuGraphCreate != NULL && r.pd.drv->cuGraphCreate(&p, 0) == CUDA_SUCCESS &&
        r.pd.drv->cuGraphCreate(&p2, 0) == CUDA_SUCCESS &&
        cx.add_child(&a, p, NULL, 0, r.c) == CUDA_SUCCESS &&
        cx.add_child(&a, p2, NULL, 0, p) == CUDA_SUCCESS &&
        cx.add_child(&b, p2, &a, 1, r.c) == CUDA_SUCCESS) {
        if (recap_graph_instantiate(p, &e) != RECAP_OK)
            recap__probe_fail(out, "child graph node: %s", recap_last_error());
        else if (exact(&r, out, e, N, 1, "a captured graph as a child graph node") == 0) {
            recap_graph_exec_destroy(e);
            e = NULL;
            if (recap_graph_instantiate(p2, &e) != RECAP_OK)
                recap__probe_fail(out, "nested: %s", recap_last_error());
            else if (exact(&r, out, e, N, 2, "a child in a child, then the child again") == 0) {
                if (recap_graph_clone(p, (recap_graph_t *)&clone) != RECAP_OK) {
                    recap__probe_fail(out, "cloning the parent: %s", recap_last_error());
                } else {
                    recap_graph_exec_destroy(e);
                    e = NULL;
                    if (recap_graph_instantiate(clone, &e) != RECAP_OK)
                        recap__probe_fail(out, "clone: %s", recap_last_error());
                    else
                        exact(&r, out, e, N, 1, "the parent cloned");
                }
            }
        }
    } else if (out->status == RECAP_PROBE_PASS && out->len == 0) {
        recap__probe_fail(out, "building the parent graphs failed");
    }
    if (e != NULL)
        recap_graph_exec_destroy(e);
    if (clone != NULL)
        recap_graph_destroy(clone);
    if (p2 != NULL)
        r.pd.drv->cuGraphDestroy(p2);
    if (p != NULL)
        r.pd.drv->cuGraphDestroy(p);
    rig_free(&r);
}

void recap__probe_compose_update(recap__probe_out_t *out)
{
    recap_graph_exec_t e = NULL;
    recap_graph_t more = NULL;
    CUgraphExecUpdateResultInfo info;
    CUgraph p = NULL;
    CUgraphNode node;
    rig_t r;

    if (rig_init(&r, out) != 0 || need(out, (void *)cx.exec_update, "cuGraphExecUpdate_v2") ||
        need(out, (void *)cx.exec_child, "cuGraphExecChildGraphNodeSetParams") ||
        need(out, (void *)cx.add_child, "cuGraphAddChildGraphNode"))
        goto out;
    if (recap_stream_begin_capture(r.s, RECAP_CAPTURE_GLOBAL) == RECAP_OK) {
        recap_generator_fill_u32(r.g, r.s, r.buf, 2 * N);
        recap_stream_end_capture(r.s, &more);
    }
    if (more == NULL || recap_graph_instantiate(r.c, &e) != RECAP_OK) {
        recap__probe_fail(out, "setting up: %s", recap_last_error());
        goto out;
    }
    if (cx.exec_update((CUgraphExec)e, (CUgraph)more, &info) != CUDA_SUCCESS ||
        recap_graph_exec_updated(e, more) != RECAP_OK) {
        recap__probe_fail(out, "cuGraphExecUpdate: %s", recap_last_error());
        goto out;
    }
    if (exact(&r, out, e, 2 * N, 1, "cuGraphExecUpdate to a graph with more draws") != 0)
        goto out;
    recap_graph_exec_destroy(e);
    e = NULL;
    if (r.pd.drv->cuGraphCreate(&p, 0) != CUDA_SUCCESS ||
        cx.add_child(&node, p, NULL, 0, r.c) != CUDA_SUCCESS ||
        recap_graph_instantiate(p, &e) != RECAP_OK ||
        cx.exec_child((CUgraphExec)e, node, (CUgraph)more) != CUDA_SUCCESS ||
        recap_graph_exec_child_updated(e, node, more) != RECAP_OK)
        recap__probe_fail(out, "cuGraphExecChildGraphNodeSetParams: %s", recap_last_error());
    else
        exact(&r, out, e, 2 * N, 1, "cuGraphExecChildGraphNodeSetParams");
out:
    if (e != NULL)
        recap_graph_exec_destroy(e);
    if (p != NULL)
        r.pd.drv->cuGraphDestroy(p);
    if (more != NULL)
        recap_graph_destroy(more);
    rig_free(&r);
}

void recap__probe_compose_unordered(recap__probe_out_t *out)
{
    CUgraph p = NULL;
    CUgraphNode a;
    rig_t r;

    if (rig_init(&r, out) == 0 && need(out, (void *)cx.add_child, "cuGraphAddChildGraphNode") == 0) {
        if (r.pd.drv->cuGraphCreate(&p, 0) == CUDA_SUCCESS &&
            cx.add_child(&a, p, NULL, 0, r.c) == CUDA_SUCCESS &&
            cx.add_child(&a, p, NULL, 0, r.c) == CUDA_SUCCESS)
            refused(&r, out, p, 0, "two unordered child graph nodes drawing from one generator");
        else
            recap__probe_fail(out, "building the graph failed");
    }
    if (p != NULL)
        r.pd.drv->cuGraphDestroy(p);
    rig_free(&r);
}

void recap__probe_compose_conditional(recap__probe_out_t *out)
{
    CUgraphConditionalHandle h;
    CUgraphNodeParams np;
    CUgraphNode node, inner;
    CUgraph p = NULL;
    rig_t r;

    if (rig_init(&r, out) == 0 && need(out, (void *)cx.add_node, "cuGraphAddNode_v2") == 0 &&
        need(out, (void *)r.pd.drv->cuGraphConditionalHandleCreate,
             "cuGraphConditionalHandleCreate (CUDA 12.4+)") == 0 &&
        need(out, (void *)cx.add_child, "cuGraphAddChildGraphNode") == 0) {
        memset(&np, 0, sizeof(np));
        np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        np.conditional.type = CU_GRAPH_COND_TYPE_IF;
        np.conditional.size = 1;
        np.conditional.ctx = r.pd.ctx;
        if (r.pd.drv->cuGraphCreate(&p, 0) == CUDA_SUCCESS &&
            r.pd.drv->cuGraphConditionalHandleCreate(&h, p, r.pd.ctx, 1,
                                                     CU_GRAPH_COND_ASSIGN_DEFAULT) == CUDA_SUCCESS &&
            (np.conditional.handle = h, cx.add_node(&node, p, NULL, NULL, 0, &np)) == CUDA_SUCCESS &&
            recap_graph_conditional_added(p, node, (recap_graph_t *)np.conditional.phGraph_out, 1) ==
                RECAP_OK &&
            cx.add_child(&inner, np.conditional.phGraph_out[0], NULL, 0, r.c) == CUDA_SUCCESS)
            refused(&r, out, p, 0, "a conditional (IF) body that draws");
        else
            recap__probe_fail(out, "building the conditional node failed");
    }
    if (p != NULL)
        r.pd.drv->cuGraphDestroy(p);
    rig_free(&r);
}

void recap__probe_compose_device_launch(recap__probe_out_t *out)
{
    rig_t r;

    if (rig_init(&r, out) == 0)
        refused(&r, out, r.c, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH,
                "an exec instantiated for device-side launch that draws");
    rig_free(&r);
}

void recap__probe_compose_node_by_node(recap__probe_out_t *out)
{
    CUDA_KERNEL_NODE_PARAMS kp;
    CUgraphNode nodes[8], copy;
    CUgraph bare = NULL;
    size_t n = 8;
    rig_t r;

    if (rig_init(&r, out) == 0 && need(out, (void *)cx.add_kernel, "cuGraphAddKernelNode_v2") == 0 &&
        need(out, (void *)r.pd.drv->cuGraphGetNodes, "cuGraphGetNodes") == 0) {
        size_t i;
        int copied = 0;

        if (r.pd.drv->cuGraphGetNodes(r.c, nodes, &n) == CUDA_SUCCESS &&
            r.pd.drv->cuGraphCreate(&bare, 0) == CUDA_SUCCESS)
            for (i = 0; i < n && !copied; i++) { /* the fill: recap's kernel that is not the last */
                CUgraphNodeType t;
                memset(&kp, 0, sizeof(kp));
                if (r.pd.drv->cuGraphNodeGetType(nodes[i], &t) == CUDA_SUCCESS &&
                    t == CU_GRAPH_NODE_TYPE_KERNEL &&
                    r.pd.drv->cuGraphKernelNodeGetParams(nodes[i], &kp) == CUDA_SUCCESS &&
                    recap__device_kernel_id(kp.func) != RECAP_K_ADVANCE)
                    copied = cx.add_kernel(&copy, bare, NULL, 0, &kp) == CUDA_SUCCESS;
            }
        if (copied)
            refused(&r, out, bare, 0, "a captured fill's kernel node copied without its advance node");
        else
            recap__probe_fail(out, "copying the captured kernel node failed");
    }
    if (bare != NULL)
        r.pd.drv->cuGraphDestroy(bare);
    rig_free(&r);
}

void recap__probe_compose_streams(recap__probe_out_t *out)
{
    recap_graph_exec_t e = NULL;
    rig_t r;

    if (rig_init(&r, out) == 0) {
        if (recap_graph_instantiate(r.c, &e) != RECAP_OK ||
            (r.pd.drv->cuGraphUpload != NULL &&
             r.pd.drv->cuGraphUpload((CUgraphExec)e, (CUstream)r.s) != CUDA_SUCCESS))
            recap__probe_fail(out, "instantiate and upload: %s", recap_last_error());
        else if (exact(&r, out, e, N, 1, "uploaded before the first launch") == 0) {
            recap_stream_t s2 = NULL;
            if (recap_stream_create(0, &s2) != RECAP_OK) {
                recap__probe_fail(out, "a second stream: %s", recap_last_error());
            } else {
                recap_stream_t keep = r.s;
                int k, bad = 0;
                for (k = 0; k < 4 && !bad; k++) { /* alternate streams, no host sync between */
                    r.s = k % 2 ? s2 : keep;
                    bad = recap_graph_launch(e, r.s) != RECAP_OK;
                }
                r.s = keep;
                recap_stream_synchronize(s2);
                recap_stream_synchronize(keep);
                for (k = 0; k < 4 && !bad; k++)
                    bad = recap_generator_fill_u32(r.twin, keep, r.tbuf, N) != RECAP_OK;
                if (bad)
                    recap__probe_fail(out, "two streams: %s", recap_last_error());
                else
                    exact(&r, out, e, N, 1, "launches alternating between two streams");
                recap_stream_destroy(s2);
            }
        }
    }
    if (e != NULL)
        recap_graph_exec_destroy(e);
    rig_free(&r);
}
