/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/lock.h"
#include "base/log.h"
#include "capture/capture.h"
#include "capture/internal.h"
#include "driver/driver.h"
#include "kernels/capture_body.h"

/*
 * A capture in progress: which states drew inside it and how far (their capture-relative
 * offsets). Each capture keeps its own, so captures on several streams or threads at once do
 * not disturb each other.
 */
typedef struct {
    recap__genstate_t *gs; /* referenced while the capture lives */
    uint64_t rel;
    int moved; /* its value was set inside the capture (a restore, a value-mode fork) */
} capture_entry_t;

struct recap__capture {
    CUstream stream;
    uint64_t id;
    int device;
    pthread_t thread;
    recap__lock_t lock;
    capture_entry_t *e;
    size_t n, cap;
    char poison[200];
    struct recap__capture *next;
};

static pthread_mutex_t caps_lock = PTHREAD_MUTEX_INITIALIZER;
static recap__capture_t *caps_head;
static _Thread_local recap__capture_t *thread_cap;

recap__capture_t *recap__capture_of_thread(void)
{
    return thread_cap;
}

static recap__capture_t *find_locked(CUstream stream, uint64_t id, int by_id)
{
    recap__capture_t *c;

    for (c = caps_head; c != NULL; c = c->next)
        if (by_id ? c->id == id : c->stream == stream)
            return c;
    return NULL;
}

recap_status_t recap__capture_of_stream(CUstream stream, recap__capture_t **cap_p)
{
    const recap__driver_t *drv;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    recap_status_t st;
    recap__capture_t *c;
    CUresult rc;

    st = recap__driver_get(&drv);
    if (st != RECAP_OK)
        return st;
    if (!drv->has_graphs) { /* no capture API, so no capture */
        *cap_p = NULL;
        return RECAP_OK;
    }
    rc = drv->cuStreamGetCaptureInfo(stream, &status, &id, NULL, NULL, NULL);
    if (rc != CUDA_SUCCESS)
        return recap__cuda_fail(rc, "cuStreamGetCaptureInfo");
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        *cap_p = NULL;
        return RECAP_OK;
    }
    pthread_mutex_lock(&caps_lock);
    c = find_locked(NULL, id, 1);
    pthread_mutex_unlock(&caps_lock);
    if (c == NULL)
        return recap__fail(RECAP_ERR_NOT_REGISTERED,
                           "stream %p is capturing (capture %llu) but recap was not told: no hook "
                           "is active; call recap_capture_prime(stream) as the first thing inside "
                           "the capture (and report its end and launches), or preload librecap",
                           (void *)stream, (unsigned long long)id);
    *cap_p = c;
    return RECAP_OK;
}

static capture_entry_t *entry_of(recap__capture_t *c, recap__genstate_t *gs, int create)
{
    size_t i;

    for (i = 0; i < c->n; i++)
        if (c->e[i].gs == gs)
            return &c->e[i];
    if (!create)
        return NULL;
    if (c->n == c->cap) {
        size_t ncap = c->cap ? 2 * c->cap : 8;
        capture_entry_t *ne = recap__realloc_n(c->e, ncap, sizeof(*ne));
        if (ne == NULL)
            return NULL;
        c->e = ne;
        c->cap = ncap;
    }
    recap__genstate_ref(gs);
    c->e[c->n].gs = gs;
    c->e[c->n].rel = 0;
    c->e[c->n].moved = 0;
    return &c->e[c->n++];
}

recap_status_t recap__capture_draw(recap__capture_t *cap, recap__genstate_t *gs, uint64_t inc,
                                   recap_philox_args_t *args)
{
    recap__genstate_capture_t *cx = recap__capture_part(gs);
    uint64_t slot = cx != NULL ? cx->slot : 0;
    capture_entry_t *e;

    if (gs->device != cap->device)
        return recap__fail(RECAP_ERR_WRONG_DEVICE, "generator of device %d drawn in a capture on "
                           "device %d", gs->device, cap->device);
    if (slot == 0)
        return recap__fail(RECAP_ERR_NOT_REGISTERED,
                           "generator state %p was not primed for capture %llu: it was created "
                           "after the capture began; call recap_capture_prime(stream) first",
                           (void *)gs, (unsigned long long)cap->id);
    recap__lock(&cap->lock);
    e = entry_of(cap, gs, 1);
    if (e == NULL) {
        recap__unlock(&cap->lock);
        return recap__fail(RECAP_ERR_NO_MEMORY, "capture entry");
    }
    args->captured = 1;
    args->seed = 0;
    args->offset = 0;
    args->seed_ptr = (const uint64_t *)(uintptr_t)slot;
    args->offset_ptr = (const uint64_t *)(uintptr_t)(slot + 8);
    args->offset_intragraph = e->rel;
    e->rel += inc;
    recap__unlock(&cap->lock);
    return RECAP_OK;
}

/*
 * The running capture a state takes part in, whichever thread asks: frameworks run backward
 * passes (and so recomputes that restore RNG snapshots) on worker threads while the capture
 * belongs to the thread that began it. The calling thread's own capture is tried first; with
 * `create`, a primed state not yet drawn in any capture joins the calling thread's. Called with
 * caps_lock held, so the capture cannot end meanwhile; returns it with its own lock held (the
 * caller unlocks): its entries grow, and move, under that lock as its thread draws.
 */
static recap__capture_t *capture_of_state(recap__genstate_t *gs, int create, capture_entry_t **e_p)
{
    recap__capture_t *c = thread_cap;

    if (c != NULL && c->device == gs->device) {
        recap__lock(&c->lock);
        if ((*e_p = entry_of(c, gs, 0)) != NULL)
            return c;
        recap__unlock(&c->lock);
    }
    for (c = caps_head; c != NULL; c = c->next) {
        if (c->device != gs->device)
            continue;
        recap__lock(&c->lock);
        if ((*e_p = entry_of(c, gs, 0)) != NULL)
            return c;
        recap__unlock(&c->lock);
    }
    c = thread_cap;
    if (create && c != NULL && c->device == gs->device &&
        recap__capture_part(gs) != NULL) {
        recap__lock(&c->lock);
        if ((*e_p = entry_of(c, gs, 1)) != NULL)
            return c;
        recap__unlock(&c->lock);
    }
    return NULL;
}

/* gs's entry in the running capture it takes part in: its relative offset and whether its value
 * was set or drawn there. Returns 0 when gs takes part in none. */
static int entry_query(recap__genstate_t *gs, uint64_t *rel, int *moved)
{
    capture_entry_t *e = NULL;
    recap__capture_t *c;

    pthread_mutex_lock(&caps_lock);
    c = capture_of_state(gs, 0, &e);
    if (c != NULL) {
        *rel = e->rel;
        *moved = e->moved || e->rel != 0;
        recap__unlock(&c->lock);
    }
    pthread_mutex_unlock(&caps_lock);
    return c != NULL;
}

int recap__capture_rel_get(recap__genstate_t *gs, uint64_t *rel)
{
    int moved;

    return entry_query(gs, rel, &moved);
}

static void poison(recap__capture_t *c, const char *why)
{
    if (c->poison[0] == '\0') {
        snprintf(c->poison, sizeof(c->poison), "%s", why);
        recap__log(RECAP_LOG_WARN, "capture %llu: %s", (unsigned long long)c->id, why);
    }
}

int recap__capture_rel_set(recap__genstate_t *gs, uint64_t rel, int seed_changed, int before)
{
    capture_entry_t *e = NULL;
    recap__capture_t *c;

    pthread_mutex_lock(&caps_lock);
    c = capture_of_state(gs, 1, &e);
    if (c != NULL) {
        e->rel = rel;
        e->moved = 1;
        if (seed_changed)
            poison(c, "a generator's seed changed inside the capture (a value-mode tracker "
                      "fork or set_state); the graph would replay with one seed: use a "
                      "graph-safe tracker inside captures");
        else if (before)
            poison(c, "a generator was set inside the capture to an offset below the one its "
                      "launches start from (a state saved before eager draws the capture does "
                      "not hold); every launch would draw numbers drawn before it");
        recap__unlock(&c->lock);
    }
    pthread_mutex_unlock(&caps_lock);
    return c != NULL;
}

int recap__capture_moved(recap__genstate_t *gs)
{
    uint64_t rel;
    int moved;

    return entry_query(gs, &rel, &moved) && moved;
}

/* ------------------------------------------------------------------ events */

recap_status_t recap_capture_will_begin(recap_stream_t stream, recap_capture_mode_t mode)
{
    recap_status_t st;
    int device;

    st = recap__events_check_caller("recap_capture_will_begin");
    if (st != RECAP_OK)
        return st;
    /* Subscribers first: states they create for this capture get primed with the rest.
     * Priming allocates under the relaxed mode whatever the capture's mode. */
    recap__events_emit(RECAP_EVENT_CAPTURE_WILL_BEGIN, stream, mode, NULL, NULL);
    st = recap__stream_device((CUstream)stream, &device);
    if (st != RECAP_OK)
        return st;
    return recap__slots_prime(device);
}

recap_status_t recap_capture_began(recap_stream_t stream)
{
    const recap__driver_t *drv;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    recap__capture_t *c;
    recap_status_t st;
    CUresult rc;
    int device;

    st = recap__events_check_caller("recap_capture_began");
    if (st == RECAP_OK)
        st = recap__driver_graphs(&drv);
    if (st != RECAP_OK)
        return st;
    rc = drv->cuStreamGetCaptureInfo((CUstream)stream, &status, &id, NULL, NULL, NULL);
    if (rc != CUDA_SUCCESS)
        return recap__cuda_fail(rc, "cuStreamGetCaptureInfo");
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return recap__fail(RECAP_ERR_STATE, "stream %p is not capturing", stream);
    st = recap__stream_device((CUstream)stream, &device);
    if (st != RECAP_OK)
        return st;
    pthread_mutex_lock(&caps_lock);
    if (find_locked(NULL, id, 1) != NULL) { /* reported twice (e.g. prime after a hook) */
        pthread_mutex_unlock(&caps_lock);
        return RECAP_OK;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        pthread_mutex_unlock(&caps_lock);
        return recap__fail(RECAP_ERR_NO_MEMORY, "capture record");
    }
    c->stream = (CUstream)stream;
    c->id = id;
    c->device = device;
    c->thread = pthread_self();
    c->next = caps_head;
    caps_head = c;
    __atomic_add_fetch(&recap__ncaptures, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&caps_lock);
    thread_cap = c;
    recap__stat_add(RECAP_STAT_CAPTURES, 1);
    recap__log(RECAP_LOG_INFO, "capture %llu began on stream %p (device %d)",
               (unsigned long long)id, stream, device);
    return RECAP_OK;
}

/* Captures the advance node: adds each state's increment to its slot at the end of every
 * launch of the graph. */
static recap_status_t capture_advance_node(recap__capture_t *c)
{
    const recap__device_t *dev;
    const recap__driver_t *drv;
    recap__advance_params_t p;
    recap_status_t st = RECAP_OK;
    size_t i = 0;
    int pushed;

    st = recap__device_enter(c->device, &dev, &drv, &pushed);
    if (st != RECAP_OK)
        return st;
    while (i < c->n && st == RECAP_OK) {
        void *args[1] = {&p};
        CUresult rc;

        memset(&p, 0, sizeof(p));
        for (; i < c->n && p.count < RECAP_SLOTS_PER_LAUNCH; i++) {
            if (c->e[i].rel == 0)
                continue;
            p.slot[p.count] = recap__capture_part(c->e[i].gs)->slot;
            p.inc[p.count] = c->e[i].rel;
            p.count++;
        }
        if (p.count == 0)
            break;
        rc = drv->cuLaunchKernel(dev->fn[RECAP_K_ADVANCE], 1, 1, 1, RECAP_SLOTS_PER_LAUNCH, 1, 1,
                                 0, c->stream, args, NULL);
        if (rc != CUDA_SUCCESS)
            st = recap__cuda_fail(rc, "capturing the generator advance node");
    }
    recap__ctx_leave(pushed);
    return st;
}

recap_status_t recap_capture_will_end(recap_stream_t stream)
{
    recap__capture_t *c;
    recap_status_t st = recap__events_check_caller("recap_capture_will_end");

    if (st != RECAP_OK)
        return st;
    pthread_mutex_lock(&caps_lock);
    c = find_locked((CUstream)stream, 0, 0);
    pthread_mutex_unlock(&caps_lock);
    if (c == NULL || c->n == 0 || c->poison[0] != '\0')
        return RECAP_OK;
    return capture_advance_node(c);
}

static void capture_free(recap__capture_t *c)
{
    size_t i;

    for (i = 0; i < c->n; i++)
        recap__genstate_unref(c->e[i].gs);
    free(c->e);
    free(c);
}

/* The thread's next most recent capture, when it runs several at once. */
static recap__capture_t *other_capture_of_thread(pthread_t self)
{
    recap__capture_t *c;

    for (c = caps_head; c != NULL; c = c->next)
        if (pthread_equal(c->thread, self))
            return c;
    return NULL;
}

static recap_status_t capture_end(recap_stream_t stream, recap_graph_t graph)
{
    recap__capture_t **pp, *c;
    recap__rng_record_t *rec;
    recap_status_t st = RECAP_OK;
    size_t i, n = 0;

    pthread_mutex_lock(&caps_lock);
    for (pp = &caps_head; *pp != NULL && (*pp)->stream != (CUstream)stream; pp = &(*pp)->next)
        ;
    c = *pp;
    if (c != NULL) {
        *pp = c->next;
        __atomic_sub_fetch(&recap__ncaptures, 1, __ATOMIC_RELAXED);
    }
    if (c != NULL && thread_cap == c)
        thread_cap = other_capture_of_thread(pthread_self());
    pthread_mutex_unlock(&caps_lock);
    if (c == NULL)
        return RECAP_OK; /* a capture recap never heard of, or one without RNG */
    if (c->poison[0] != '\0') {
        st = recap__fail(RECAP_ERR_UNSUPPORTED, "capture %llu cannot replay its random numbers "
                         "correctly: %s", (unsigned long long)c->id, c->poison);
    } else if (graph != NULL) {
        for (i = 0; i < c->n; i++)
            n += c->e[i].rel != 0;
        if (n > 0) {
            rec = recap__record_new(c->device, n);
            if (rec == NULL) {
                st = recap__fail(RECAP_ERR_NO_MEMORY, "graph RNG record");
            } else {
                for (i = 0, n = 0; i < c->n; i++)
                    if (c->e[i].rel != 0)
                        recap__record_set(rec, n++, c->e[i].gs, c->e[i].rel);
                st = recap__graphs_attach((CUgraph)graph, rec);
            }
        }
        recap__log(RECAP_LOG_INFO, "capture %llu ended: graph %p draws from %zu generator "
                   "state%s", (unsigned long long)c->id, graph, n, n == 1 ? "" : "s");
    }
    capture_free(c);
    return st;
}

recap_status_t recap_capture_ended(recap_stream_t stream, recap_graph_t graph)
{
    recap_status_t st = recap__events_check_caller("recap_capture_ended");

    if (st != RECAP_OK)
        return st;
    st = capture_end(stream, graph);
    recap__events_emit(RECAP_EVENT_CAPTURE_ENDED, stream, RECAP_CAPTURE_GLOBAL, graph, NULL);
    return st;
}

/* ------------------------------------------------------------------ fork */

void recap__capture_atfork(recap__atfork_t when)
{
    recap__atfork_mutex(&caps_lock, when);
}

/* In a forked child only the forking thread lives on: the captures other threads had begun
 * belong to no thread now and are dropped (their streams are the parent's business). */
void recap__capture_atfork_child(void)
{
    recap__capture_t **pp = &caps_head, *c, *dropped = NULL;
    pthread_t self = pthread_self();
    int n = 0;

    pthread_mutex_lock(&caps_lock);
    while ((c = *pp) != NULL) {
        if (pthread_equal(c->thread, self)) {
            pp = &c->next;
            n++;
        } else {
            *pp = c->next;
            c->next = dropped;
            dropped = c;
        }
    }
    __atomic_store_n(&recap__ncaptures, n, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&caps_lock);
    while ((c = dropped) != NULL) {
        dropped = c->next;
        capture_free(c);
    }
}
