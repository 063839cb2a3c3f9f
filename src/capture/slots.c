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

/*
 * Device slots: 16 bytes {seed, offset} per device generator state, carved from slabs so that
 * priming many generators costs one allocation. A slot lives as long as its state (graphs hold
 * references to the states they drew from), then returns to its device's free list.
 */
#define SLOTS_PER_SLAB 4096
#define MAX_DEVICES 64

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static recap__genstate_t *reg_head;
static struct {
    uint64_t *free; /* free slot addresses */
    size_t nfree, cap;
} pool[MAX_DEVICES];

void recap__slots_atfork(recap__atfork_t when)
{
    recap__atfork_mutex(&reg_lock, when);
}

void recap__slots_register(recap__genstate_t *gs)
{
    if (gs->device < 0)
        return;
    pthread_mutex_lock(&reg_lock);
    gs->reg_prev = NULL;
    gs->reg_next = reg_head;
    if (reg_head != NULL)
        reg_head->reg_prev = gs;
    reg_head = gs;
    pthread_mutex_unlock(&reg_lock);
}

void recap__slots_unregister(recap__genstate_t *gs)
{
    if (gs->device < 0)
        return;
    pthread_mutex_lock(&reg_lock);
    if (gs->reg_prev != NULL)
        gs->reg_prev->reg_next = gs->reg_next;
    else
        reg_head = gs->reg_next;
    if (gs->reg_next != NULL)
        gs->reg_next->reg_prev = gs->reg_prev;
    recap__compose_state_gone(gs);
    if (gs->slot != 0 && gs->device < MAX_DEVICES)
        pool[gs->device].free[pool[gs->device].nfree++] = gs->slot; /* cap >= slots handed out */
    pthread_mutex_unlock(&reg_lock);
}

/* Adds a slab to the device's pool. Called with reg_lock held. The relaxed capture mode lets the
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

static recap_status_t prime(int device)
{
    recap_status_t st = RECAP_OK;
    recap__genstate_t *gs;
    int primed = 0;

    if (device < 0 || device >= MAX_DEVICES)
        return recap__fail(RECAP_ERR_NO_DEVICE, "device %d", device);
    pthread_mutex_lock(&reg_lock);
    for (gs = reg_head; gs != NULL; gs = gs->reg_next) {
        if (gs->device != device || __atomic_load_n(&gs->slot, __ATOMIC_ACQUIRE) != 0)
            continue;
        if (pool[device].nfree == 0) {
            st = grow_pool(device);
            if (st != RECAP_OK)
                break;
        }
        /* Published with release: capture draws read it without reg_lock. */
        __atomic_store_n(&gs->slot, pool[device].free[--pool[device].nfree], __ATOMIC_RELEASE);
        primed++;
    }
    pthread_mutex_unlock(&reg_lock);
    recap__stat_add(RECAP_STAT_STATES_PRIMED, (uint64_t)primed);
    if (primed > 0)
        recap__log(RECAP_LOG_INFO, "device %d: primed %d generator state%s for capture", device,
                   primed, primed == 1 ? "" : "s");
    return st;
}

recap_status_t recap__slots_prime(int device)
{
    recap_status_t st;

    recap__nvtx_push(RECAP_NVTX_PRIME);
    st = prime(device);
    recap__nvtx_pop();
    return st;
}

recap__genstate_t *recap__slots_state_of(uint64_t slot)
{
    recap__genstate_t *gs;

    pthread_mutex_lock(&reg_lock);
    for (gs = reg_head; gs != NULL; gs = gs->reg_next)
        if (__atomic_load_n(&gs->slot, __ATOMIC_ACQUIRE) == slot) {
            int refs = __atomic_load_n(&gs->refs, __ATOMIC_ACQUIRE);
            /* a state on its way out (refs 0, not yet unregistered) is not handed out */
            while (refs > 0 && !__atomic_compare_exchange_n(&gs->refs, &refs, refs + 1, 0,
                                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                ;
            if (refs == 0)
                gs = NULL;
            break;
        }
    pthread_mutex_unlock(&reg_lock);
    return gs;
}
