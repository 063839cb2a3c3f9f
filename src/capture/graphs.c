/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/nvtx.h"
#include "base/log.h"
#include "base/ptrmap.h"
#include "capture/capture.h"
#include "capture/internal.h"
#include "driver/driver.h"
#include "kernels/capture_body.h"

/*
 * What a graph draws per launch: each generator state and its increment. Immutable once made and
 * shared (reference counted) by the graph, its clones and every exec instantiated from them, so
 * each keeps working after the others are destroyed.
 */
struct recap__rng_record {
    int refs;
    int device;
    size_t n;
    struct {
        recap__genstate_t *gs;
        recap__genstate_capture_t *cx; /* gs's capture part: a record's states are primed */
        uint64_t inc;
    } e[];
};

static uint64_t stats[RECAP_STAT_COUNT];

void recap__stat_add(recap__stat_t which, uint64_t n)
{
    __atomic_add_fetch(&stats[which], n, __ATOMIC_RELAXED);
}

static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static recap__ptrmap_t graphs; /* CUgraph -> record */
static recap__ptrmap_t execs;  /* CUgraphExec -> record */

void recap__graphs_atfork(recap__atfork_t when)
{
    recap__atfork_mutex(&map_lock, when);
}

recap__rng_record_t *recap__record_new(int device, size_t n)
{
    recap__rng_record_t *r = recap__zalloc_flex(sizeof(*r), n, sizeof(r->e[0]));

    if (r == NULL)
        return NULL;
    r->refs = 1;
    r->device = device;
    r->n = n;
    return r;
}

void recap__record_set(recap__rng_record_t *rec, size_t i, recap__genstate_t *gs, uint64_t inc)
{
    recap__genstate_ref(gs);
    rec->e[i].gs = gs;
    rec->e[i].cx = recap__capture_part(gs); /* read once here, not on every launch */
    rec->e[i].inc = inc;
}

static recap__rng_record_t *record_ref(recap__rng_record_t *r)
{
    if (r != NULL)
        __atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
    return r;
}

void recap__record_unref(recap__rng_record_t *r)
{
    size_t i;

    if (r == NULL || __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    for (i = 0; i < r->n; i++)
        recap__genstate_unref(r->e[i].gs);
    free(r);
}

/* Puts rec under key in map, taking over the caller's reference; drops a previous record (a
 * handle value the driver reused after a destroy recap did not see). */
static recap_status_t map_put(recap__ptrmap_t *map, void *key, recap__rng_record_t *rec)
{
    recap__rng_record_t *old;
    int failed;

    pthread_mutex_lock(&map_lock);
    old = recap__ptrmap_put(map, key, rec, &failed);
    pthread_mutex_unlock(&map_lock);
    if (failed) {
        recap__record_unref(rec);
        return recap__fail(RECAP_ERR_NO_MEMORY, "graph map");
    }
    recap__record_unref(old);
    return RECAP_OK;
}

static recap__rng_record_t *map_get(recap__ptrmap_t *map, const void *key)
{
    recap__rng_record_t *r;

    pthread_mutex_lock(&map_lock);
    r = record_ref(recap__ptrmap_get(map, key));
    pthread_mutex_unlock(&map_lock);
    return r;
}

static void map_drop(recap__ptrmap_t *map, const void *key)
{
    recap__rng_record_t *r;

    pthread_mutex_lock(&map_lock);
    r = recap__ptrmap_del(map, key);
    pthread_mutex_unlock(&map_lock);
    recap__record_unref(r);
}

int recap__graph_device(const void *graph_or_exec)
{
    recap__rng_record_t *r;
    int device = -1;

    pthread_mutex_lock(&map_lock);
    r = recap__ptrmap_get(&graphs, graph_or_exec);
    if (r == NULL)
        r = recap__ptrmap_get(&execs, graph_or_exec);
    if (r != NULL)
        device = r->device;
    pthread_mutex_unlock(&map_lock);
    return device;
}

recap_status_t recap__graphs_attach(CUgraph graph, recap__rng_record_t *rec)
{
    recap__stat_add(RECAP_STAT_GRAPHS_WITH_RNG, 1);
    return map_put(&graphs, graph, rec);
}

recap_status_t recap_capture_stats(recap_capture_stats_t *stats_p)
{
    RECAP_CHECK_ARG(stats_p != NULL, "stats_p is NULL");
    stats_p->captures = __atomic_load_n(&stats[RECAP_STAT_CAPTURES], __ATOMIC_RELAXED);
    stats_p->graphs_with_rng = __atomic_load_n(&stats[RECAP_STAT_GRAPHS_WITH_RNG], __ATOMIC_RELAXED);
    stats_p->launches = __atomic_load_n(&stats[RECAP_STAT_LAUNCHES], __ATOMIC_RELAXED);
    stats_p->slot_writes = __atomic_load_n(&stats[RECAP_STAT_SLOT_WRITES], __ATOMIC_RELAXED);
    stats_p->states_primed = __atomic_load_n(&stats[RECAP_STAT_STATES_PRIMED], __ATOMIC_RELAXED);
    pthread_mutex_lock(&map_lock);
    stats_p->live_records = graphs.live + execs.live;
    pthread_mutex_unlock(&map_lock);
    return RECAP_OK;
}

recap_status_t recap_graph_instantiated(recap_graph_t graph, recap_graph_exec_t exec)
{
    recap_status_t st;

    RECAP_CHECK_ARG(graph != NULL && exec != NULL, "NULL graph or exec");
    st = recap__events_check_caller("recap_graph_instantiated");
    if (st != RECAP_OK)
        return st;
    st = recap__exec_record_for(graph, exec);
    recap__events_emit(RECAP_EVENT_GRAPH_INSTANTIATED, NULL, RECAP_CAPTURE_GLOBAL, graph, exec);
    return st;
}

recap_status_t recap__exec_record_for(recap_graph_t graph, recap_graph_exec_t exec)
{
    recap__rng_record_t *r;
    recap_status_t st, pst;
    int walked;

    /* What the graph holds, child graphs included (compose.c); without the driver calls for
     * that, what its capture drew. */
    st = recap__compose_instantiated((CUgraph)graph, (CUgraphExec)exec, &walked);
    if (!walked) { /* (a walk that ran out of memory fails the call; the capture's record stays) */
        pst = recap__exec_record_from_graph(exec, graph);
        return st != RECAP_OK ? st : pst;
    }
    if ((r = map_get(&execs, exec)) != NULL) {
        recap__record_unref(r);
    } else if ((r = map_get(&graphs, graph)) != NULL) {
        /* The walk saw no draws where the capture recorded some (recap's kernels not recognised
         * in the graph's nodes): the capture's record is the truth for what it captured. */
        recap__log(RECAP_LOG_DEBUG, "graph %p: walk found no draws; using its capture record", graph);
        pst = map_put(&execs, exec, r);
        if (st == RECAP_OK)
            st = pst;
    }
    return st;
}

recap_status_t recap__exec_record_from_graph(recap_graph_exec_t exec, recap_graph_t graph)
{
    recap__rng_record_t *r = map_get(&graphs, graph);

    if (r == NULL) {
        map_drop(&execs, exec); /* a reused handle must not keep an old record */
        return RECAP_OK;
    }
    return map_put(&execs, exec, r);
}

recap_status_t recap__exec_record_set(CUgraphExec exec, recap__rng_record_t *rec)
{
    if (rec == NULL) {
        map_drop(&execs, exec);
        return RECAP_OK;
    }
    return map_put(&execs, exec, rec);
}

recap_status_t recap_graph_cloned(recap_graph_t original, recap_graph_t clone)
{
    recap__rng_record_t *r;

    RECAP_CHECK_ARG(original != NULL && clone != NULL, "NULL graph");
    if (recap__events_check_caller("recap_graph_cloned") != RECAP_OK)
        return RECAP_ERR_STATE;
    r = map_get(&graphs, original);
    if (r == NULL)
        return RECAP_OK;
    return map_put(&graphs, clone, r);
}

recap__rng_record_t *recap__record_take(const void *handle, int exec)
{
    recap__rng_record_t *r;

    pthread_mutex_lock(&map_lock);
    r = recap__ptrmap_del(exec ? &execs : &graphs, handle);
    pthread_mutex_unlock(&map_lock);
    return r;
}

void recap__record_put_back(void *handle, int exec, recap__rng_record_t *rec)
{
    if (rec != NULL)
        map_put(exec ? &execs : &graphs, handle, rec);
}

void recap__graph_forget(const void *handle, int exec)
{
    map_drop(exec ? &execs : &graphs, handle);
    if (exec)
        recap__compose_exec_forget((CUgraphExec)handle);
    else
        recap__compose_graph_forget((CUgraph)handle);
}

recap_status_t recap_graph_destroyed(recap_graph_t graph)
{
    recap_status_t st = recap__events_check_caller("recap_graph_destroyed");

    if (st != RECAP_OK)
        return st;
    recap__graph_forget(graph, 0);
    recap__events_emit(RECAP_EVENT_GRAPH_DESTROYED, NULL, RECAP_CAPTURE_GLOBAL, graph, NULL);
    return RECAP_OK;
}

recap_status_t recap_graph_exec_destroyed(recap_graph_exec_t exec)
{
    recap_status_t st = recap__events_check_caller("recap_graph_exec_destroyed");

    if (st != RECAP_OK)
        return st;
    recap__graph_forget(exec, 1);
    recap__events_emit(RECAP_EVENT_GRAPH_EXEC_DESTROYED, NULL, RECAP_CAPTURE_GLOBAL, NULL, exec);
    return RECAP_OK;
}

/* Writes (seed, offset) into the slots that are stale, before the graph on the same stream. */
static recap_status_t write_slots(int device, CUstream stream, recap__slot_write_params_t *p)
{
    const recap__device_t *dev;
    const recap__driver_t *drv;
    void *args[1] = {p};
    recap_status_t st;
    CUresult rc;
    int pushed;

    st = recap__device_enter(device, &dev, &drv, &pushed);
    if (st != RECAP_OK)
        return st;
    recap__stat_add(RECAP_STAT_SLOT_WRITES, 1);
    recap__nvtx_push(RECAP_NVTX_SLOT_WRITE);
    rc = drv->cuLaunchKernel(dev->fn[RECAP_K_SLOT_WRITE], 1, 1, 1, RECAP_SLOTS_PER_LAUNCH, 1, 1, 0,
                             stream, args, NULL);
    recap__nvtx_pop();
    recap__ctx_leave(pushed);
    return rc == CUDA_SUCCESS ? RECAP_OK : recap__cuda_fail(rc, "writing generator slots");
}

/* Advances the generators of record r for one launch on `stream`, writing stale slots. */
static recap_status_t advance(recap__rng_record_t *r, recap_graph_exec_t exec, CUstream stream)
{
    recap__slot_write_params_t p;
    recap_status_t st = RECAP_OK;
    size_t i;

    p.count = 0;
    /* One fork-safe section for every state's slot lock; the rare driver calls (ordering after
     * another stream, slot writes) run outside it, as a fork waits for sections to end. */
    recap__lock_section_enter();
    for (i = 0; i < r->n; i++) {
        recap__genstate_t *gs = r->e[i].gs;
        recap__genstate_capture_t *cx = r->e[i].cx;
        uint64_t seed, base;

        /* Another stream than this state's last launch: order after it (launch_order.c). One
         * comparison in steady state. */
        if (__builtin_expect(!__atomic_load_n(&cx->launched, __ATOMIC_RELAXED) ||
                             __atomic_load_n(&cx->launch_stream, __ATOMIC_RELAXED) !=
                                 (void *)stream, 0)) {
            if (__atomic_load_n(&cx->launched, __ATOMIC_RELAXED)) {
                recap_status_t ost;

                recap__lock_section_leave();
                ost = recap__compose_order(gs, stream);
                recap__lock_section_enter();
                if (ost != RECAP_OK)
                    st = ost;
            }
            __atomic_store_n(&cx->launch_stream, (void *)stream, __ATOMIC_RELAXED);
            __atomic_store_n(&cx->launched, 1, __ATOMIC_RELAXED);
        }
        if (__builtin_expect(__atomic_load_n(&cx->multi_stream, __ATOMIC_RELAXED), 0)) {
            /* until recap_graph_launched records it after this launch */
            __atomic_store_n(&cx->event_valid, 0, __ATOMIC_RELAXED);
            recap__launch_needs_events = 1;
        }
        recap__lock_in_section(&cx->slot_lock);
        seed = __atomic_load_n(&gs->seed, __ATOMIC_RELAXED);
        base = __atomic_fetch_add(&gs->offset, r->e[i].inc, __ATOMIC_RELAXED);
        if (!cx->slot_valid || cx->slot_seed != seed || cx->slot_offset != base) {
            p.slot[p.count] = cx->slot;
            p.seed[p.count] = seed;
            p.offset[p.count] = base;
            p.count++;
        }
        cx->slot_seed = seed;
        cx->slot_offset = base + r->e[i].inc; /* after the graph's own advance node */
        cx->slot_valid = 1;
        recap__unlock_in_section(&cx->slot_lock);
        if (p.count == RECAP_SLOTS_PER_LAUNCH || (i + 1 == r->n && p.count > 0)) {
            recap_status_t wst;

            recap__lock_section_leave();
            wst = write_slots(r->device, stream, &p);
            recap__lock_section_enter();
            if (wst != RECAP_OK)
                st = wst;
            p.count = 0;
        }
    }
    recap__lock_section_leave();
    if (st != RECAP_OK) /* the slots' contents are unknown now: rewrite them next time */
        recap_graph_launch_failed(exec);
    return st;
}

/*
 * Before each launch: every state the graph draws from gets a fresh base, its host offset, and
 * the host offset moves on by the graph's increment. The graph's own advance node moves the
 * device copy by the same amount, so in steady state (launch after launch, no eager draws in
 * between) nothing is written: a launch costs a lookup and a few additions. Graphs that draw no
 * random numbers have no record and cost the lookup alone (no NVTX range either).
 */
recap_status_t recap_graph_will_launch(recap_graph_exec_t exec, recap_stream_t stream)
{
    recap__rng_record_t *r;
    recap_status_t st;

    RECAP_CHECK_ARG(exec != NULL, "exec is NULL");
    st = recap__events_check_caller("recap_graph_will_launch");
    if (st != RECAP_OK)
        return st;
    recap__events_emit(RECAP_EVENT_GRAPH_WILL_LAUNCH, stream, RECAP_CAPTURE_GLOBAL, NULL, exec);
    recap__launch_needs_events = 0; /* this launch's, whatever became of the last one */
    r = map_get(&execs, exec);
    if (r == NULL)
        return RECAP_OK;
    recap__nvtx_push(RECAP_NVTX_LAUNCH);
    recap__stat_add(RECAP_STAT_LAUNCHES, 1);
    st = advance(r, exec, (CUstream)stream);
    recap__record_unref(r);
    recap__nvtx_pop();
    return st;
}

recap_status_t recap_graph_launch_failed(recap_graph_exec_t exec)
{
    recap__rng_record_t *r;
    size_t i;

    if (recap__events_check_caller("recap_graph_launch_failed") != RECAP_OK)
        return RECAP_ERR_STATE;
    r = map_get(&execs, exec);
    if (r == NULL)
        return RECAP_OK;
    for (i = 0; i < r->n; i++) {
        recap__genstate_capture_t *cx = r->e[i].cx;

        recap__lock(&cx->slot_lock);
        cx->slot_valid = 0;
        recap__unlock(&cx->slot_lock);
    }
    recap__record_unref(r);
    return RECAP_OK;
}

/* After a launch: states that moved between streams get their event recorded after it, so the
 * next launch on another stream waits for exactly this one. Nothing to do otherwise. */
recap_status_t recap_graph_launched(recap_graph_exec_t exec, recap_stream_t stream)
{
    recap__rng_record_t *r;
    recap_status_t st = RECAP_OK;
    size_t i;

    if (!recap__launch_needs_events)
        return RECAP_OK;
    recap__launch_needs_events = 0;
    RECAP_CHECK_ARG(exec != NULL, "exec is NULL");
    r = map_get(&execs, exec);
    if (r == NULL)
        return RECAP_OK;
    for (i = 0; i < r->n; i++)
        if (__atomic_load_n(&r->e[i].cx->multi_stream, __ATOMIC_RELAXED)) {
            recap_status_t rst = recap__compose_record_after(r->e[i].gs, (CUstream)stream);
            if (rst != RECAP_OK)
                st = rst;
        }
    recap__record_unref(r);
    return st;
}
