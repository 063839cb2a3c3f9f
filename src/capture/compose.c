/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atfork.h"
#include "base/error.h"
#include "base/log.h"
#include "base/ptrmap.h"
#include "capture/capture.h"
#include "capture/conditional.h"
#include "capture/internal.h"
#include "capture/walk.h"
#include "driver/driver.h"

/*
 * Graph composition: what an executable draws per launch, read from the graph itself.
 *
 * Every captured graph that draws ends in recap's advance node, which names each generator slot
 * the graph drew from and by how much. The driver copies that node wherever the graph goes: into
 * a parent as a child graph node (at any depth), into clones, into the graph an exec is updated
 * from. So at instantiate (and at exec update) recap walks the graph, child graphs included, sums
 * the advance nodes per slot, and gives the exec that record: each launch then advances the
 * generators exactly as the children would, whoever built the parent and however.
 *
 * A child's kernels read its generator's slot at run time and its advance node moves the slot on,
 * so two parts of a graph that draw from one generator are exact only when one runs entirely
 * before the other. The walk checks that order with the graph's edges and refuses (a failed
 * call, a warning through the hooks) where it is missing. What recap cannot make exact it refuses
 * the same way: a conditional node whose body draws (the host reserves offsets at launch and
 * cannot know how often the body runs) and an exec instantiated for device-side launch (its
 * device launches are invisible to the host). Refused execs still advance the generators by one
 * run of everything they draw, so later eager draws at least stay clear of a plain launch.
 *
 * This file installs what the walk (walk.h) found as an exec's record, at instantiate and at
 * exec updates; launch_order.c orders launches of one generator across streams.
 */

static pthread_mutex_t compose_lock = PTHREAD_MUTEX_INITIALIZER;
static recap__ptrmap_t plans; /* CUgraphExec -> recap__plan_t (execs whose graph has child nodes) */

/* The conditional bodies' lock is never taken inside this one: taken after it, it stays a leaf. */
void recap__compose_atfork(recap__atfork_t when)
{
    recap__atfork_mutex(&compose_lock, when);
    recap__conditional_atfork(when);
}

/* The record of `draws`: each slot's generator state and increment (NULL when nothing is drawn).
 * A slot that belongs to no live state is left out, with *st saying so. */
static recap__rng_record_t *record_of(const recap__draws_t *draws, const void *handle,
                                      recap_status_t *st)
{
    recap__genstate_t **gs = calloc(draws->n + 1, sizeof(*gs));
    recap__rng_record_t *rec = NULL;
    size_t i, n = 0;

    *st = RECAP_OK;
    if (gs == NULL) {
        *st = recap__fail(RECAP_ERR_NO_MEMORY, "graph RNG record");
        return NULL;
    }
    for (i = 0; i < draws->n; i++) {
        if (draws->d[i].inc == 0)
            continue;
        gs[i] = recap__slots_state_of(draws->d[i].slot);
        if (gs[i] == NULL)
            *st = recap__fail(RECAP_ERR_UNSUPPORTED, "graph %p draws from a generator state "
                              "that no longer exists (slot %#llx): that part of its launches "
                              "cannot be advanced", handle,
                              (unsigned long long)draws->d[i].slot);
        else
            n++;
    }
    if (n > 0) {
        for (i = 0; i < draws->n && gs[i] == NULL; i++)
            ;
        rec = recap__record_new(gs[i]->device, n);
        if (rec == NULL)
            *st = recap__fail(RECAP_ERR_NO_MEMORY, "graph RNG record");
    }
    for (i = 0, n = 0; i < draws->n; i++) {
        if (gs[i] == NULL)
            continue;
        if (rec != NULL)
            recap__record_set(rec, n++, gs[i], draws->d[i].inc);
        recap__genstate_unref(gs[i]); /* the record holds its own reference */
    }
    free(gs);
    return rec;
}

/* Walks `graph` for exec `exec`; *plan_p gets the plan (NULL when the driver cannot walk). */
static recap_status_t plan_graph(CUgraph graph, CUgraphExec exec, recap__plan_t **plan_p)
{
    const recap__driver_t *drv;
    recap__plan_t *plan;
    recap__walk_t w;

    *plan_p = NULL;
    if (recap__driver_get(&drv) != RECAP_OK || drv->cuGraphGetNodes == NULL ||
        drv->cuGraphNodeGetType == NULL || drv->cuGraphKernelNodeGetParams == NULL)
        return RECAP_OK;
    plan = calloc(1, sizeof(*plan));
    if (plan == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "graph plan");
    memset(&w, 0, sizeof(w));
    w.drv = drv;
    w.top = graph;
    if (!recap__walk(&w, graph, &plan->total, plan)) {
        recap__plan_free(plan);
        if (w.nomem)
            return recap__fail(RECAP_ERR_NO_MEMORY, "walking graph %p", (void *)graph);
        recap__log(RECAP_LOG_DEBUG, "graph %p: cannot walk it; using its capture record", graph);
        return RECAP_OK;
    }
    /* the cost of the walk, which tests read: linear in what it walked */
    recap__log(RECAP_LOG_DEBUG, "graph %p: walked %zu graphs, %zu nodes, %zu edges in %zu steps",
               (void *)graph, w.graphs, w.nodes, w.edges, w.steps + w.nodes);
    if (w.why[0] == '\0' && plan->total.n > 0 && exec != NULL && drv->cuGraphExecGetFlags != NULL) {
        cuuint64_t flags = 0;
        if (drv->cuGraphExecGetFlags(exec, &flags) == CUDA_SUCCESS &&
            (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
            recap__refuse(&w, "exec %p of graph %p was instantiated for device-side launch and "
                          "draws random numbers: launches made from the device are invisible to "
                          "the host, which reserves each launch's offsets, so they would reuse "
                          "numbers. Instantiate it without cudaGraphInstantiateFlagDeviceLaunch, "
                          "or draw outside it", (void *)exec, (void *)graph);
    }
    snprintf(plan->refused, sizeof(plan->refused), "%s", w.why);
    *plan_p = plan;
    return RECAP_OK;
}

/* Installs plan's record for exec and keeps the plan when SetParams may need it. */
static recap_status_t install(CUgraphExec exec, recap__plan_t *plan)
{
    recap__rng_record_t *rec;
    recap_status_t st, rst;
    int failed = 0;
    recap__plan_t *old;

    rec = record_of(&plan->total, exec, &rst);
    st = recap__exec_record_set(exec, rec);
    if (st == RECAP_OK && rst != RECAP_OK)
        st = rst;
    pthread_mutex_lock(&compose_lock);
    old = recap__ptrmap_del(&plans, exec);
    if (plan->nchildren > 0 || plan->refused[0] != '\0')
        recap__ptrmap_put(&plans, exec, plan, &failed);
    else
        failed = 1; /* nothing to keep */
    pthread_mutex_unlock(&compose_lock);
    recap__plan_free(old);
    if (failed)
        recap__plan_free(plan);
    return st;
}

static recap_status_t refused(const char *why)
{
    recap__log(RECAP_LOG_WARN, "%s", why);
    return recap__fail(RECAP_ERR_UNSUPPORTED, "%s", why);
}

recap_status_t recap__compose_instantiated(CUgraph graph, CUgraphExec exec, int *done_p)
{
    recap_status_t st;
    recap__plan_t *plan;
    char why[sizeof(plan->refused)];

    *done_p = 0;
    st = plan_graph(graph, exec, &plan);
    if (st != RECAP_OK || plan == NULL)
        return st;
    *done_p = 1;
    snprintf(why, sizeof(why), "%s", plan->refused);
    st = install(exec, plan);
    return why[0] != '\0' ? refused(why) : st;
}

void recap__compose_exec_forget(CUgraphExec exec)
{
    recap__plan_t *p;

    pthread_mutex_lock(&compose_lock);
    p = recap__ptrmap_del(&plans, exec);
    pthread_mutex_unlock(&compose_lock);
    recap__plan_free(p);
}

recap_status_t recap_graph_exec_updated(recap_graph_exec_t exec, recap_graph_t graph)
{
    recap_status_t st;
    recap__plan_t *plan;
    char why[sizeof(plan->refused)];

    RECAP_CHECK_ARG(exec != NULL && graph != NULL, "NULL exec or graph");
    st = recap__events_check_caller("recap_graph_exec_updated");
    if (st != RECAP_OK)
        return st;
    st = plan_graph((CUgraph)graph, (CUgraphExec)exec, &plan);
    if (st != RECAP_OK)
        return st;
    if (plan == NULL) /* no walk: the update's graph is what its capture drew */
        return recap__exec_record_from_graph(exec, graph);
    snprintf(why, sizeof(why), "%s", plan->refused);
    st = install((CUgraphExec)exec, plan);
    return why[0] != '\0' ? refused(why) : st;
}

/* Child c of plan p now draws `now`: every other part drawing from one of those generators must
 * be ordered with it, by what each draws now (after its own updates). Two walks of the top
 * level: what runs before c and what runs after it. 1 when one is not, -1 out of memory. */
static int check_changed(recap__plan_t *p, const recap__unit_t *c, const recap__draws_t *now)
{
    unsigned char *side = recap__calloc_n(p->nunits, 1, 1); /* 1: runs before c, 2: after it */
    int all_after = 0, unordered = 0;
    size_t i;

    if (side == NULL)
        return -1;
    recap__order_mark(&p->order, c->node, 1);
    for (i = 0; i < p->nunits; i++)
        side[i] |= recap__order_marked(&p->order, p->units[i].node);
    recap__order_mark(&p->order, c->node, 0);
    for (i = 0; i < p->nunits; i++)
        side[i] |= recap__order_marked(&p->order, p->units[i].node) << 1;
    for (i = 0; i < p->nunits; i++) {
        const recap__unit_t *u = &p->units[i];

        if (u == c || !recap__draws_share(now, &u->draws))
            continue;
        if (u->kind == RECAP_UNIT_ADVANCE && !(side[i] & 1) && !all_after)
            all_after =
                recap__before_all_kernels(&p->order, c->node, p->kernels, p->nkernels) ? 1 : -1;
        if (u->kind == RECAP_UNIT_CHILD ? side[i] == 0 : !(side[i] & 1) && all_after != 1)
            unordered = 1;
    }
    free(side);
    return unordered;
}

recap_status_t recap_graph_exec_child_updated(recap_graph_exec_t exec, recap_graph_node_t node,
                                              recap_graph_t child)
{
    const recap__driver_t *drv;
    recap__draws_t now = {0};
    recap__rng_record_t *rec = NULL;
    recap_status_t st, rst = RECAP_OK;
    recap__unit_t *c = NULL;
    recap__plan_t *p;
    recap__walk_t w;
    long at = -1;
    int unordered;
    size_t i;

    RECAP_CHECK_ARG(exec != NULL && node != NULL && child != NULL, "NULL exec, node or child");
    st = recap__events_check_caller("recap_graph_exec_child_updated");
    if (st != RECAP_OK)
        return st;
    if (recap__driver_get(&drv) != RECAP_OK || drv->cuGraphGetNodes == NULL ||
        drv->cuGraphNodeGetType == NULL || drv->cuGraphKernelNodeGetParams == NULL)
        return recap__fail(RECAP_ERR_UNSUPPORTED, "the driver cannot list a graph's nodes");
    memset(&w, 0, sizeof(w));
    w.drv = drv;
    w.top = child;
    if (!recap__walk(&w, (CUgraph)child, &now, NULL)) {
        recap__draws_free(&now);
        if (w.nomem)
            return recap__fail(RECAP_ERR_NO_MEMORY, "walking graph %p", child);
        return recap__fail(RECAP_ERR_CUDA, "graph %p: cannot list its nodes", child);
    }
    pthread_mutex_lock(&compose_lock);
    p = recap__ptrmap_get(&plans, exec);
    if (p != NULL && p->sorted != NULL)
        at = recap__index_of(p->sorted, p->count, (CUgraphNode)node);
    if (at >= 0 && p->unit_of[at] > 0 && p->units[p->unit_of[at] - 1].kind == RECAP_UNIT_CHILD)
        c = &p->units[p->unit_of[at] - 1];
    if (c == NULL && now.n > 0)
        recap__refuse(&w, "exec %p: child graph node %p now runs graph %p, which draws random "
                      "numbers, but recap did not see the node at instantiate: re-instantiate the "
                      "exec", exec, node, child);
    if (c != NULL && now.n > 0 && (unordered = check_changed(p, c, &now)) != 0)
        recap__refuse(&w, "exec %p: child graph node %p now draws from a generator that another "
                      "part of the graph, not ordered with it, also draws from: they would draw "
                      "the same numbers%s", exec, node,
                      unordered < 0 ? " (or memory ran out checking it)" : "");
    if (c != NULL) { /* total = total - old + now */
        for (i = 0; i < c->draws.n; i++)
            recap__draws_add(&p->total, c->draws.d[i].slot, (uint64_t)0 - c->draws.d[i].inc);
        if (!recap__draws_merge(&p->total, &now))
            rst = recap__fail(RECAP_ERR_NO_MEMORY, "graph RNG record");
        recap__draws_free(&c->draws);
        c->draws = now;
        memset(&now, 0, sizeof(now));
        if (rst == RECAP_OK)
            rec = record_of(&p->total, exec, &rst);
    }
    if (w.why[0] != '\0' && p != NULL)
        snprintf(p->refused, sizeof(p->refused), "%s", w.why);
    pthread_mutex_unlock(&compose_lock);
    recap__draws_free(&now);
    if (c != NULL) {
        st = recap__exec_record_set(exec, rec);
        if (st == RECAP_OK)
            st = rst;
    }
    return w.why[0] != '\0' ? refused(w.why) : st;
}
