/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The walk of a graph (walk.h): level by level, on its own stack, what each level's advance nodes
 * and child graph nodes draw, and the checks that parts drawing from one generator are ordered.
 * compose.c says why recap walks graphs at all.
 */
#include "config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ptrmap.h"
#include "capture/conditional.h"
#include "capture/walk.h"
#include "driver/driver.h"
#include "kernels/capture_body.h"
#include "kernels/fill_body.h"

/* One level of the walk, on the walk's own stack (no recursion: nesting has no depth limit). */
enum { WAIT_NONE, WAIT_CHILD, WAIT_BODY };
typedef struct {
    CUgraph g;
    CUgraphNode *nodes;
    CUgraphNodeType *types;
    recap__unit_t *units;
    size_t count, nunits, i;
    recap__draws_t fills;  /* slots recap's captured fill kernels of this level read */
    recap__draws_t result; /* what one run of the level draws */
    recap__plan_t *plan;   /* the top level: what the exec keeps */
    recap__bodies_t *cond; /* node i is a conditional node whose bodies are being walked */
    size_t body;
    int waiting; /* what the level below walks for: units[nunits] or cond->body[body] */
} level_t;

void recap__refuse(recap__walk_t *w, const char *fmt, ...)
{
    va_list ap;

    if (w->why[0] != '\0')
        return;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof(w->why), fmt, ap);
    va_end(ap);
}

void recap__nomem(recap__walk_t *w)
{
    w->failed = 1;
    w->nomem = 1;
}

/* A kernel node: recap's advance node becomes a unit; recap's captured fill kernels are noted so
 * a graph that holds them without their advance node is refused. */
static void walk_kernel(recap__walk_t *w, level_t *l)
{
    CUDA_KERNEL_NODE_PARAMS p;
    int id;

    memset(&p, 0, sizeof(p));
    if (w->drv->cuGraphKernelNodeGetParams(l->nodes[l->i], &p) != CUDA_SUCCESS) {
        w->failed = 1;
        return;
    }
    id = recap__device_kernel_id(p.func);
    if (id < 0 || p.kernelParams == NULL || p.kernelParams[0] == NULL)
        return;
    if (id == RECAP_K_ADVANCE) {
        const recap__advance_params_t *ap = p.kernelParams[0];
        recap__unit_t *u = &l->units[l->nunits++];
        uint32_t k;

        u->node = l->i;
        u->kind = RECAP_UNIT_ADVANCE;
        if (ap->count > RECAP_SLOTS_PER_LAUNCH) /* recap writes at most that many */
            recap__refuse(w, "graph %p holds a recap advance node naming %u generator slots (at "
                          "most %u exist): its parameters were overwritten, so what it draws "
                          "cannot be known", (void *)w->top, (unsigned)ap->count,
                          (unsigned)RECAP_SLOTS_PER_LAUNCH);
        for (k = 0; k < ap->count && k < RECAP_SLOTS_PER_LAUNCH; k++)
            if (!recap__draws_add(&u->draws, ap->slot[k], ap->inc[k]))
                recap__nomem(w);
    } else if (id == RECAP_K_FILL_U32_CAPTURED || id == RECAP_K_FILL_F32_CAPTURED ||
               id == RECAP_K_FILL_F64_CAPTURED) {
        const recap__fill_params_t *fp = p.kernelParams[0];
        if (fp->philox.captured &&
            !recap__draws_add(&l->fills, (uint64_t)(uintptr_t)fp->philox.seed_ptr, 0))
            recap__nomem(w);
    }
}

/* Moves level l on to its next node that holds a graph to walk and returns that graph (l->waiting
 * says what for), or NULL when the level is done. */
static CUgraph level_step(recap__walk_t *w, level_t *l)
{
    for (;;) {
        if (l->cond != NULL) {
            while (l->body < l->cond->n && l->cond->body[l->body] == NULL)
                l->body++;
            if (l->body < l->cond->n) {
                l->waiting = WAIT_BODY;
                return l->cond->body[l->body];
            }
            free(l->cond);
            l->cond = NULL;
            l->i++;
        } else if (l->waiting == WAIT_CHILD) {
            l->i++;
        }
        l->waiting = WAIT_NONE;
        if (l->i >= l->count || w->failed)
            return NULL;
        w->nodes++;
        if (w->drv->cuGraphNodeGetType(l->nodes[l->i], &l->types[l->i]) != CUDA_SUCCESS) {
            w->failed = 1;
            return NULL;
        }
        if (l->types[l->i] == CU_GRAPH_NODE_TYPE_KERNEL) {
            walk_kernel(w, l);
        } else if (l->types[l->i] == CU_GRAPH_NODE_TYPE_GRAPH) {
            CUgraph child = NULL;
            recap__unit_t *u = &l->units[l->nunits];

            if (w->drv->cuGraphChildGraphNodeGetGraph == NULL ||
                w->drv->cuGraphChildGraphNodeGetGraph(l->nodes[l->i], &child) != CUDA_SUCCESS) {
                w->failed = 1;
                return NULL;
            }
            u->node = l->i;
            u->kind = RECAP_UNIT_CHILD;
            l->waiting = WAIT_CHILD;
            return child;
        } else if (l->types[l->i] == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            int nomem = 0;

            l->cond = recap__conditional_bodies(l->nodes[l->i], &nomem);
            l->body = 0;
            if (nomem)
                recap__nomem(w);
            if (l->cond != NULL)
                continue; /* its bodies, one by one */
        }
        l->i++;
    }
}

static void units_free(recap__unit_t *units, size_t n)
{
    size_t i;

    for (i = 0; units != NULL && i < n; i++)
        recap__draws_free(&units[i].draws);
    free(units);
}

static void level_free(level_t *l)
{
    units_free(l->units, l->nunits);
    free(l->types);
    free(l->nodes);
    free(l->cond);
    recap__draws_free(&l->fills);
    recap__draws_free(&l->result);
    memset(l, 0, sizeof(*l));
}

/* Reads graph g's nodes into a new level. 0 when that failed. */
static int level_open(recap__walk_t *w, level_t *l, CUgraph g, recap__plan_t *plan)
{
    size_t count = 0;

    memset(l, 0, sizeof(*l));
    l->g = g;
    l->plan = plan;
    w->graphs++;
    if (w->drv->cuGraphGetNodes(g, NULL, &count) != CUDA_SUCCESS) {
        w->failed = 1;
        return 0;
    }
    l->nodes = recap__calloc_n(count, 1, sizeof(*l->nodes));
    l->types = recap__calloc_n(count, 1, sizeof(*l->types));
    l->units = recap__calloc_n(count, 1, sizeof(*l->units));
    if (l->nodes == NULL || l->types == NULL || l->units == NULL) {
        recap__nomem(w);
        return 0;
    }
    /* (an empty graph: the real driver refuses arrays with a count of 0) */
    if (count > 0 && w->drv->cuGraphGetNodes(g, l->nodes, &count) != CUDA_SUCCESS) {
        w->failed = 1;
        return 0;
    }
    l->count = count;
    return 1;
}

/* What the units of a level draw, one (slot, unit) pair per draw, sorted by slot. */
typedef struct {
    uint64_t slot;
    size_t pos, unit; /* the unit's node's topological position (once known), the unit */
} use_t;

static int use_cmp(const void *a, const void *b)
{
    const use_t *x = a, *y = b;

    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static const char *unit_name(const recap__unit_t *u)
{
    return u->kind == RECAP_UNIT_CHILD ? "a child graph node" : "captured work";
}

static void refuse_unordered(recap__walk_t *w, const recap__unit_t *a, const recap__unit_t *b)
{
    recap__refuse(w, "graph %p: two parts of it draw from the same generator without an order "
                  "between them (%s and %s), so they would draw the same numbers. Make one depend "
                  "on the other (a child graph node after the captured work's last node, or "
                  "between the child graph nodes)", (void *)w->top, unit_name(a), unit_name(b));
}

/* Whether every kernel node of the level runs after node c (it runs before all captured work). */
int recap__before_all_kernels(recap__order_t *o, size_t c, const size_t *kernels, size_t nkernels)
{
    size_t k;

    recap__order_mark(o, c, 0);
    for (k = 0; k < nkernels; k++)
        if (!recap__order_marked(o, kernels[k]))
            return 0;
    o->steps += nkernels;
    return 1;
}

/*
 * The units of one level drawing from one generator (uses[0 .. n), in topological order) must run
 * one entirely before the other. A child graph node is one step; an advance node stands for the
 * captured work of its level, which runs before it: a child is ordered with it when it runs after
 * the advance node, or before every kernel node of the level. Two advance nodes of one generator
 * on one level are never taken as ordered (their kernels cannot be told apart).
 *
 * Children in topological order are all ordered exactly when each reaches the next, and each of
 * those walks stays between the two: one walk of the level in all. Children after the advance
 * node are a suffix of that chain; of the others only the last must run before all kernels.
 */
static void check_slot(recap__walk_t *w, const recap__unit_t *units, const use_t *uses, size_t n,
                       recap__order_t *o, const size_t *kernels, size_t nkernels)
{
    const recap__unit_t *adv = NULL, *last = NULL, *before = NULL;
    size_t i;

    for (i = 0; i < n; i++) {
        const recap__unit_t *u = &units[uses[i].unit];

        if (u->kind == RECAP_UNIT_ADVANCE) {
            if (adv != NULL)
                refuse_unordered(w, adv, u);
            adv = u;
            continue;
        }
        if (last != NULL && !recap__order_reaches(o, last->node, u->node))
            refuse_unordered(w, last, u);
        last = u;
    }
    if (adv == NULL || w->why[0] != '\0')
        return;
    recap__order_mark(o, adv->node, 0);
    for (i = 0; i < n; i++)
        if (units[uses[i].unit].kind == RECAP_UNIT_CHILD &&
            !recap__order_marked(o, units[uses[i].unit].node))
            before = &units[uses[i].unit];
    if (before != NULL && !recap__before_all_kernels(o, before->node, kernels, nkernels))
        refuse_unordered(w, before, adv);
}

/* The fills of a level need their advance node there too. */
static void check_fills(recap__walk_t *w, const level_t *l)
{
    recap__draws_t adv = {0};
    size_t i;

    for (i = 0; i < l->nunits; i++)
        if (l->units[i].kind == RECAP_UNIT_ADVANCE && !recap__draws_merge(&adv, &l->units[i].draws))
            recap__nomem(w);
    for (i = 0; i < l->fills.n && !w->failed; i++)
        if (!recap__draws_has(&adv, l->fills.d[i].slot))
            recap__refuse(w, "graph %p holds recap kernel nodes that draw from a generator (slot "
                          "%#llx) without the advance node of the graph they were copied from: "
                          "launches would reuse numbers. Add the captured graph as a child graph "
                          "node instead of copying its kernel nodes", (void *)w->top,
                          (unsigned long long)l->fills.d[i].slot);
    recap__draws_free(&adv);
}

/* The units of level l that share a generator must be ordered; the top level's plan keeps the
 * level's order for later child graph node updates. */
static void check_level(recap__walk_t *w, level_t *l)
{
    size_t *from = NULL, *to = NULL, *kernels = NULL, nedges = 0, nuses = 0, nkernels = 0, i, j;
    CUgraphNode *sorted = NULL;
    recap__order_t order;
    use_t *uses = NULL;
    int shared = 0, children = 0, rc;

    memset(&order, 0, sizeof(order));
    check_fills(w, l);
    for (i = 0; i < l->nunits; i++) {
        nuses += l->units[i].draws.n;
        children |= l->units[i].kind == RECAP_UNIT_CHILD;
    }
    if (nuses > 0 && (uses = recap__calloc_n(nuses, 0, sizeof(*uses))) == NULL) {
        recap__nomem(w);
        return;
    }
    for (i = 0, nuses = 0; i < l->nunits; i++)
        for (j = 0; j < l->units[i].draws.n; j++) {
            uses[nuses].slot = l->units[i].draws.d[j].slot;
            uses[nuses++].unit = i;
        }
    if (nuses > 1)
        qsort(uses, nuses, sizeof(*uses), use_cmp);
    for (i = 1; i < nuses && !shared; i++)
        shared = uses[i].slot == uses[i - 1].slot;
    w->steps += nuses;
    /* The edges are read only where a generator is shared, or the exec keeps the order. */
    if (!shared && (l->plan == NULL || !children))
        goto out;
    if ((sorted = recap__sorted_of(l->nodes, l->count)) == NULL ||
        (kernels = recap__calloc_n(l->count, 1, sizeof(*kernels))) == NULL) {
        recap__nomem(w);
        goto out;
    }
    if (!recap__edges_of(w, l->g, l->nodes, sorted, l->count, &from, &to, &nedges)) {
        if (!w->nomem)
            recap__refuse(w, "graph %p: parts of it draw from one generator and recap cannot read "
                          "the graph's edges to check that they run one after the other",
                          (void *)w->top);
        goto out;
    }
    rc = recap__order_init(&order, l->count, from, to, nedges);
    if (rc == 0) {
        recap__nomem(w);
        goto out;
    }
    if (rc < 0) {
        recap__refuse(w, "graph %p: its edges make a cycle, so no order of its parts exists",
                      (void *)w->top);
        goto out;
    }
    for (i = 0; i < l->count; i++)
        if (l->types[i] == CU_GRAPH_NODE_TYPE_KERNEL)
            kernels[nkernels++] = i;
    for (i = 0; i < nuses; i++)
        uses[i].pos = order.pos[l->units[uses[i].unit].node];
    for (i = 0; i < nuses; i = j) { /* each generator's units, in topological order */
        for (j = i + 1; j < nuses && uses[j].slot == uses[i].slot; j++)
            ;
        if (j - i > 1) {
            qsort(uses + i, j - i, sizeof(*uses), use_cmp);
            check_slot(w, l->units, uses + i, j - i, &order, kernels, nkernels);
        }
    }
    w->steps += order.steps + l->count + nedges;
    if (l->plan != NULL) { /* the plan takes the level's order and parts */
        recap__plan_t *p = l->plan;

        p->count = l->count;
        p->sorted = sorted;
        p->order = order;
        p->kernels = kernels;
        p->nkernels = nkernels;
        sorted = NULL;
        kernels = NULL;
        memset(&order, 0, sizeof(order));
    }
out:
    recap__order_free(&order);
    free(uses);
    free(kernels);
    free(sorted);
    free(from);
    free(to);
}

/* Level l is walked: checked, and what it draws summed into l->result. */
static void level_close(recap__walk_t *w, level_t *l)
{
    recap__plan_t *p = l->plan;
    size_t i;

    if (!w->failed)
        check_level(w, l);
    for (i = 0; i < l->nunits && !w->failed; i++)
        if (!recap__draws_merge(&l->result, &l->units[i].draws))
            recap__nomem(w);
    if (p == NULL || w->failed)
        return;
    p->unit_of = recap__calloc_n(l->count, 1, sizeof(size_t));
    if (p->unit_of == NULL) {
        recap__nomem(w);
        return;
    }
    for (i = 0; i < l->nunits; i++) {
        p->unit_of[l->units[i].node] = i + 1;
        p->nchildren += l->units[i].kind == RECAP_UNIT_CHILD;
    }
    p->units = l->units; /* the plan keeps the parts and what each draws */
    p->nunits = l->nunits;
    l->units = NULL;
    l->nunits = 0;
}

/* The level below l (waited for) is done and drew `below`: it counts as l's unit or body. */
static void level_resume(recap__walk_t *w, level_t *l, recap__draws_t *below)
{
    if (l->waiting == WAIT_CHILD) {
        recap__unit_t *u = &l->units[l->nunits];

        u->draws = *below;
        memset(below, 0, sizeof(*below));
        if (u->draws.n > 0 || l->plan != NULL)
            l->nunits++; /* the top level keeps every child: it may be updated to draw */
        else
            recap__draws_free(&u->draws);
    } else if (l->waiting == WAIT_BODY) {
        if (below->n > 0) {
            recap__refuse(w, "graph %p: the body of a conditional node (IF/WHILE/SWITCH) draws "
                          "random numbers; recap reserves a graph's offsets on the host at launch "
                          "and cannot know how often the body runs, so launches could not equal "
                          "eager runs. Draw outside the conditional body", (void *)w->top);
            if (!recap__draws_merge(&l->result, below))
                recap__nomem(w);
        }
        recap__draws_free(below);
        l->body++;
    }
}

/* Walks graph g, child graphs and conditional bodies to any depth: adds to *out what one run of
 * it draws, per slot. With `plan` (the top level), keeps its order and parts for later child
 * updates. Returns 0 when a driver call failed or memory ran out. */
int recap__walk(recap__walk_t *w, CUgraph g, recap__draws_t *out, recap__plan_t *plan)
{
    recap__ptrmap_t path = {0}; /* the graphs of the stack: one that holds itself is refused */
    level_t *stack = NULL;
    size_t depth = 0, cap = 0;
    CUgraph next = g;
    int nomem = 0;

    while (!w->failed) {
        level_t *l;

        if (next != NULL && recap__ptrmap_get(&path, next) != NULL) {
            /* only conditional bodies reported wrongly can do that: the driver copies children */
            recap__refuse(w, "graph %p holds itself (graph %p is reported as a conditional body "
                          "inside itself): what it draws has no bound", (void *)w->top,
                          (void *)next);
            next = NULL;
            level_resume(w, &stack[depth - 1], &(recap__draws_t){0});
            continue;
        }
        if (next != NULL && (recap__ptrmap_put(&path, next, next, &nomem), nomem)) {
            recap__nomem(w);
            break;
        }
        if (next != NULL) { /* one level down */
            if (depth == cap) {
                size_t ncap = cap ? 2 * cap : 16;
                level_t *s = ncap <= SIZE_MAX / sizeof(*s) ? realloc(stack, ncap * sizeof(*s)) : NULL;
                if (s == NULL) {
                    recap__nomem(w);
                    break;
                }
                stack = s;
                cap = ncap;
            }
            l = &stack[depth];
            if (!level_open(w, l, next, depth++ == 0 ? plan : NULL))
                break;
        }
        l = &stack[depth - 1];
        if ((next = level_step(w, l)) != NULL || w->failed)
            continue;
        level_close(w, l); /* done: its draws go up */
        if (depth == 1) {
            if (!w->failed && !recap__draws_merge(out, &l->result))
                recap__nomem(w);
            break;
        }
        level_resume(w, &stack[depth - 2], &l->result);
        recap__ptrmap_del(&path, l->g);
        level_free(l);
        depth--;
    }
    while (depth > 0)
        level_free(&stack[--depth]);
    free(stack);
    recap__ptrmap_free(&path);
    return !w->failed;
}

void recap__plan_free(recap__plan_t *p)
{
    if (p == NULL)
        return;
    units_free(p->units, p->nunits);
    free(p->unit_of);
    free(p->sorted);
    free(p->kernels);
    recap__order_free(&p->order);
    recap__draws_free(&p->total);
    free(p);
}
