/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/nvtx.h"
#include "base/log.h"
#include "capture/capture.h"
#include "capture/internal.h"
#include "driver/driver.h"
#include "rng/registry.h"

/*
 * Device slots: 16 bytes {seed, offset} per device generator state, carved from slabs so that
 * priming many generators costs one allocation. A slot lives as long as its state (graphs hold
 * references to the states they drew from), then returns to its device's free list. Priming walks
 * rng's registry of live device states (rng/registry.h), taking pool_lock inside its lock.
 */
#define SLOTS_PER_SLAB 4096
#define MAX_DEVICES 64

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint64_t *free; /* free slot addresses */
    size_t nfree, cap;
} pool[MAX_DEVICES];

void recap__slots_atfork(recap__atfork_t when)
{
    recap__atfork_mutex(&pool_lock, when);
}

void recap__slots_state_gone(recap__genstate_t *gs)
{
    recap__genstate_capture_t *cx = recap__capture_part(gs);

    if (cx == NULL)
        return;
    recap__compose_state_gone(gs);
    pthread_mutex_lock(&pool_lock);
    if (gs->device < MAX_DEVICES)
        pool[gs->device].free[pool[gs->device].nfree++] = cx->slot; /* cap >= slots handed out */
    pthread_mutex_unlock(&pool_lock);
    gs->capture = NULL;
    free(cx);
}

/* Adds a slab to the device's pool. Called with pool_lock held. The relaxed capture mode lets the
 * allocation happen while another thread (or this one) captures in global mode without
 * invalidating that capture, as PyTorch's allocator does. */
static recap_status_t grow_pool(int device)
{
    const recap__device_t *dev;
    const recap__driver_t *drv;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUdeviceptr base = 0;
    recap_status_t st;
    uint64_t *nf;
    CUresult rc;
    int pushed, i;

    st = recap__device_get(device, &dev);
    if (st != RECAP_OK)
        return st;
    recap__driver_get(&drv);
    nf = recap__realloc_n(pool[device].free, recap__count_add(pool[device].cap, SLOTS_PER_SLAB), sizeof(uint64_t));
    if (nf == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "slot pool");
    pool[device].free = nf;
    st = recap__ctx_enter(dev, &pushed);
    if (st != RECAP_OK)
        return st;
    if (drv->has_graphs)
        drv->cuThreadExchangeStreamCaptureMode(&mode);
    rc = drv->cuMemAlloc(&base, SLOTS_PER_SLAB * 16);
    if (drv->has_graphs)
        drv->cuThreadExchangeStreamCaptureMode(&mode);
    recap__ctx_leave(pushed);
    if (rc != CUDA_SUCCESS)
        return recap__cuda_fail(rc, "cuMemAlloc(generator slots)");
    pool[device].cap += SLOTS_PER_SLAB;
    for (i = SLOTS_PER_SLAB - 1; i >= 0; i--)
        pool[device].free[pool[device].nfree++] = base + 16 * (uint64_t)i;
    recap__log(RECAP_LOG_DEBUG, "device %d: %d generator slots allocated", device, SLOTS_PER_SLAB);
    return RECAP_OK;
}

typedef struct {
    int device, primed;
    recap_status_t st;
} prime_t;

/* One registered state: a capture part with a slot when it has none (registry and pool locked). */
static int prime_one(recap__genstate_t *gs, void *arg)
{
    prime_t *p = arg;
    recap__genstate_capture_t *cx;

    if (gs->device != p->device || recap__capture_part(gs) != NULL)
        return 0;
    if (pool[p->device].nfree == 0) {
        p->st = grow_pool(p->device);
        if (p->st != RECAP_OK)
            return 1;
    }
    cx = calloc(1, sizeof(*cx));
    if (cx == NULL) {
        p->st = recap__fail(RECAP_ERR_NO_MEMORY, "generator state's capture part");
        return 1;
    }
    cx->slot = pool[p->device].free[--pool[p->device].nfree];
    /* Published with release: capture draws read it without the registry's lock. */
    __atomic_store_n(&gs->capture, cx, __ATOMIC_RELEASE);
    p->primed++;
    return 0;
}

static recap_status_t prime(int device)
{
    prime_t p = {device, 0, RECAP_OK};

    if (device < 0 || device >= MAX_DEVICES)
        return recap__fail(RECAP_ERR_NO_DEVICE, "device %d", device);
    pthread_mutex_lock(&pool_lock);
    recap__genstates_each(prime_one, &p);
    pthread_mutex_unlock(&pool_lock);
    recap__stat_add(RECAP_STAT_STATES_PRIMED, (uint64_t)p.primed);
    if (p.primed > 0)
        recap__log(RECAP_LOG_INFO, "device %d: primed %d generator state%s for capture", device,
                   p.primed, p.primed == 1 ? "" : "s");
    return p.st;
}

recap_status_t recap__slots_prime(int device)
{
    recap_status_t st;

    recap__nvtx_push(RECAP_NVTX_PRIME);
    st = prime(device);
    recap__nvtx_pop();
    return st;
}

typedef struct {
    uint64_t slot;
    recap__genstate_t *gs;
} find_t;

static int find_one(recap__genstate_t *gs, void *arg)
{
    find_t *f = arg;
    recap__genstate_capture_t *cx = recap__capture_part(gs);
    int refs;

    if (cx == NULL || cx->slot != f->slot)
        return 0;
    refs = __atomic_load_n(&gs->refs, __ATOMIC_ACQUIRE);
    /* a state on its way out (refs 0, not yet unregistered) is not handed out */
    while (refs > 0 && !__atomic_compare_exchange_n(&gs->refs, &refs, refs + 1, 0,
                                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    f->gs = refs > 0 ? gs : NULL;
    return 1;
}

recap__genstate_t *recap__slots_state_of(uint64_t slot)
{
    find_t f = {slot, NULL};

    recap__genstates_each(find_one, &f);
    return f.gs;
}
