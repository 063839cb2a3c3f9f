/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The value operations of recap's framework table for torch's CUDA generators, in C.
 *
 * recap.torch's table is Python: every get or set of a generator's (seed, offset) is a ctypes
 * callback, several microseconds each, and an exact-capture scope over 8 tracker states makes
 * some thirty of them. torch's own C++ accessors are no faster: philox_offset_per_thread() asks
 * the driver whether the current stream captures (and throws if it does) on every call. So this
 * file reads and writes the two fields themselves: an at::CUDAGeneratorImpl holds its state as
 * an intrusive pointer to an at::CUDAGeneratorState, whose seed_ and philox_offset_per_thread_
 * are plain 64-bit fields. Where they lie is not taken from torch's headers: recap.torch finds
 * them on the running torch (generator views that share one state, and values set through
 * torch's API) and checks reads and writes against torch's get_state/set_state before it binds
 * them here; on any doubt it keeps the Python table.
 *
 * Nothing here calls torch, so nothing can throw into these C frames. An offset that is not a
 * multiple of 4 is refused (RECAP_ERR_MISALIGNED, as recap.h asks of set_state). A write that
 * changes the seed goes to the Python table: torch's set_current_seed also resets state that
 * only it knows (cuDNN's RNN dropout state) and refuses inside a capture. Writing the same seed
 * back only writes the offset, as torch's set_state does after its set_current_seed.
 */
#define _GNU_SOURCE /* process_vm_readv */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "recap.h"

#define EXPORT __attribute__((visibility("default")))

/* What recap.torch passes as the table's `framework` pointer (mirrored in recap/torch.py). */
typedef struct recap_torch_ctx {
    const recap_framework_ops_t *slow; /* the Python table, for what is not done here */
    void *impl;                        /* the default generator's at::CUDAGeneratorImpl */
} recap_torch_ctx_t;

static size_t state_at;  /* the state pointer's place in an at::CUDAGeneratorImpl */
static size_t seed_at;   /* seed_'s place in an at::CUDAGeneratorState */
static size_t offset_at; /* philox_offset_per_thread_'s */

/* The places recap.torch found (bytes, each a multiple of 8). 0, or -1 when refused. */
EXPORT int recap_torch_bind(size_t state_offset, size_t seed_offset, size_t offset_offset)
{
    if (state_offset % 8 || seed_offset % 8 || offset_offset % 8 || seed_offset == offset_offset)
        return -1;
    state_at = state_offset;
    seed_at = seed_offset;
    offset_at = offset_offset;
    return 0;
}

static uint8_t *state_of(const void *impl)
{
    uint8_t *st;

    memcpy(&st, (const uint8_t *)impl + state_at, sizeof(st));
    return st;
}

static uint64_t field(const uint8_t *st, size_t at)
{
    uint64_t v;

    memcpy(&v, st + at, sizeof(v));
    return v;
}

static recap_status_t load(const void *impl, uint8_t state[RECAP_STATE_BYTES])
{
    const uint8_t *st = state_of(impl);
    uint64_t seed = field(st, seed_at), offset = field(st, offset_at);

    memcpy(state, &seed, sizeof(seed));
    memcpy(state + sizeof(seed), &offset, sizeof(offset));
    return RECAP_OK;
}

/* 1 when written here, 0 when the Python table must do it, or a refusal. */
static int store(void *impl, const uint8_t state[RECAP_STATE_BYTES], recap_status_t *status)
{
    uint8_t *st = state_of(impl);
    uint64_t seed, offset;

    memcpy(&seed, state, sizeof(seed));
    memcpy(&offset, state + sizeof(seed), sizeof(offset));
    if (offset % 4 != 0) {
        *status = RECAP_ERR_MISALIGNED;
        return 1;
    }
    if (seed != field(st, seed_at))
        return 0;
    memcpy(st + offset_at, &offset, sizeof(offset));
    *status = RECAP_OK;
    return 1;
}

/* Every function below takes the table's own argument types, so recap calls them directly. */
EXPORT recap_status_t recap_torch_get_state(void *fw, uint8_t state[RECAP_STATE_BYTES])
{
    return load(((recap_torch_ctx_t *)fw)->impl, state);
}

EXPORT recap_status_t recap_torch_set_state(void *fw, const uint8_t state[RECAP_STATE_BYTES])
{
    recap_torch_ctx_t *c = fw;
    recap_status_t st;

    return store(c->impl, state, &st) ? st : c->slow->set_state(fw, state);
}

/* State objects are at::CUDAGeneratorImpl pointers: recap.torch hands them out as handles. */
EXPORT recap_status_t recap_torch_state_get(void *fw, void *obj,
                                            uint8_t state[RECAP_STATE_BYTES])
{
    (void)fw;
    return load(obj, state);
}

EXPORT recap_status_t recap_torch_state_set(void *fw, void *obj,
                                            const uint8_t state[RECAP_STATE_BYTES])
{
    recap_torch_ctx_t *c = fw;
    recap_status_t st;

    return store(obj, state, &st) ? st : c->slow->state_set(fw, obj, state);
}

/*
 * Graph replays without torch's per-state prologue.
 *
 * torch 2.11's CUDAGraph::replay runs, for every generator state registered with the graph,
 * two fill_ kernels (the state's seed and offset into its two one-element device tensors,
 * seed_extragraph_ and offset_extragraph_, which the captured kernels read) and then advances
 * the state's offset by what the graph drew from it: about 14 us of host time per state, whether
 * the graph drew from it or not. recap registers every live tracker state before a capture (no
 * draw can be registered once it has begun), so a graph that draws from one of eight states
 * would pay for eight. Here a replay writes the seed and offset of the states the graph drew
 * from, with two stream memory writes each (no kernel), advances those offsets as torch does,
 * and launches the graph; states it did not draw from are left as torch would leave them (an
 * increment of 0 changes nothing but their device tensors, which no other graph reads before
 * its own prologue writes them).
 *
 * recap.torch builds a plan only when it knows every state torch registered with the graph (it
 * compares its count with torch's own) and only after this code, bound to the fields it found,
 * reproduced one of torch's replays exactly. The driver functions come from the library recap
 * uses (RECAP_CUDA_DRIVER, else libcuda.so.1).
 */
/* The driver's types, as cuda.h declares them (this file builds without the CUDA toolkit). */
typedef int drv_result_t;
typedef drv_result_t (*write64_fn)(void *stream, uint64_t addr, uint64_t value, unsigned flags);
typedef drv_result_t (*capturing_fn)(void *stream, int *status);
typedef drv_result_t (*launch_fn)(void *exec, void *stream);
enum { CAPTURE_STATUS_NONE = 0 };

static struct {
    int tried, ok;
    write64_fn write64;
    capturing_fn capturing;
    launch_fn launch;
} drv;

/* Where torch keeps what a replay needs, in bytes (recap_torch_bind_replay). */
static struct {
    int bound;
    size_t intragraph_at; /* CUDAGeneratorState::offset_intragraph_ (64-bit) */
    size_t capturing_at;  /* CUDAGeneratorState::capturing_ (one byte) */
    size_t seed_ext_at;   /* CUDAGeneratorState::seed_extragraph_ (a TensorImpl pointer) */
    size_t offset_ext_at; /* CUDAGeneratorState::offset_extragraph_ */
    size_t storage_at;    /* TensorImpl's StorageImpl pointer */
    size_t data_at;       /* StorageImpl's data pointer */
} rp;

/* Copies n bytes at addr, or answers -1 where they cannot be read: recap.torch looks for
 * torch's fields by following words that may not be pointers at all, and must not fault. */
EXPORT int recap_torch_peek(uintptr_t addr, void *out, size_t n)
{
    struct iovec local = {out, n}, remote = {(void *)addr, n};

    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* 0 when the driver functions a replay needs resolved (once). */
EXPORT int recap_torch_driver(void)
{
    recap_status_t (*active)(recap_hooks_t *);
    recap_hooks_t hooks = RECAP_HOOKS_NONE;
    const char *path;
    void *lib;

    if (drv.tried)
        return drv.ok ? 0 : -1;
    drv.tried = 1;
    path = getenv("RECAP_CUDA_DRIVER");
    lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return -1;
    *(void **)&drv.write64 = dlsym(lib, "cuStreamWriteValue64_v2");
    *(void **)&drv.capturing = dlsym(lib, "cuStreamIsCapturing");
    /* Under LD_PRELOAD, recap's interposed cuGraphLaunch, so that recap sees this launch as it
     * sees torch's (graphs may hold recap's own draws too); CUPTI and the injection front end
     * see the driver's call itself. */
    *(void **)&active = dlsym(RTLD_DEFAULT, "recap_hooks_active");
    if (active != NULL && active(&hooks) == RECAP_OK && hooks == RECAP_HOOKS_PRELOAD)
        *(void **)&drv.launch = dlsym(RTLD_DEFAULT, "cuGraphLaunch");
    if (drv.launch == NULL)
        *(void **)&drv.launch = dlsym(lib, "cuGraphLaunch");
    drv.ok = drv.write64 && drv.capturing && drv.launch;
    return drv.ok ? 0 : -1;
}

EXPORT int recap_torch_bind_replay(size_t intragraph_at, size_t capturing_at, size_t seed_ext_at,
                                   size_t offset_ext_at, size_t storage_at, size_t data_at)
{
    if (intragraph_at % 8 || seed_ext_at % 8 || offset_ext_at % 8 || storage_at % 8 ||
        data_at % 8 || seed_ext_at == offset_ext_at || offset_at == 0)
        return -1;
    rp.intragraph_at = intragraph_at;
    rp.capturing_at = capturing_at;
    rp.seed_ext_at = seed_ext_at;
    rp.offset_ext_at = offset_ext_at;
    rp.storage_at = storage_at;
    rp.data_at = data_at;
    rp.bound = 1;
    return 0;
}

static uint64_t word(const void *base, size_t at)
{
    uint64_t v;

    memcpy(&v, (const uint8_t *)base + at, sizeof(v));
    return v;
}

/* The device address of a one-element tensor held as a TensorImpl pointer at st + at. */
static uint64_t tensor_data(const uint8_t *st, size_t at)
{
    const void *impl = (const void *)(uintptr_t)word(st, at), *storage;

    if (impl == NULL)
        return 0;
    storage = (const void *)(uintptr_t)word(impl, rp.storage_at);
    return storage ? word(storage, rp.data_at) : 0;
}

typedef struct recap_torch_entry {
    uint8_t *state;      /* the at::CUDAGeneratorState */
    uint64_t increment;  /* what the graph draws from it per replay */
    uint64_t seed_dev;   /* its seed_extragraph_'s device address */
    uint64_t offset_dev; /* its offset_extragraph_'s */
} recap_torch_entry_t;

typedef struct recap_torch_plan {
    void *exec; /* the graph's CUgraphExec, NULL until instantiated */
    uint64_t replays;
    size_t n;
    recap_torch_entry_t entries[];
} recap_torch_plan_t;

/* The increment a state drew in the capture that just ended (torch leaves it in the state until
 * its next capture begins). */
EXPORT uint64_t recap_torch_state_increment(const void *state)
{
    return rp.bound ? word(state, rp.intragraph_at) : 0;
}

/* A plan for a graph that draws `increments[i]` from `states[i]` (the states whose increment is
 * 0 are left out), or NULL when a state's device tensors are missing or memory ran out. */
EXPORT recap_torch_plan_t *recap_torch_plan_create(void *exec, size_t n, void *const states[],
                                                   const uint64_t increments[])
{
    recap_torch_plan_t *p;
    size_t i, k = 0;

    if (!rp.bound || n > 4096)
        return NULL;
    p = calloc(1, sizeof(*p) + n * sizeof(p->entries[0]));
    if (p == NULL)
        return NULL;
    p->exec = exec;
    for (i = 0; i < n; i++) {
        recap_torch_entry_t *e = &p->entries[k];

        if (increments[i] == 0)
            continue;
        e->state = states[i];
        e->increment = (increments[i] + 3) / 4 * 4; /* as torch's increase() rounds */
        e->seed_dev = tensor_data(e->state, rp.seed_ext_at);
        e->offset_dev = tensor_data(e->state, rp.offset_ext_at);
        if (e->seed_dev == 0 || e->offset_dev == 0) {
            free(p);
            return NULL;
        }
        k++;
    }
    p->n = k;
    return p;
}

EXPORT void recap_torch_plan_destroy(recap_torch_plan_t *p)
{
    free(p);
}

EXPORT void recap_torch_plan_set_exec(recap_torch_plan_t *p, void *exec)
{
    p->exec = exec;
}

EXPORT size_t recap_torch_plan_states(const recap_torch_plan_t *p)
{
    return p->n;
}

EXPORT uint64_t recap_torch_plan_replays(const recap_torch_plan_t *p)
{
    return p->replays;
}

/* One replay on `stream`: 0 when launched; -1 when torch's own replay must run instead (no
 * exec yet, the stream captures, or a state is in a capture: torch then raises its error);
 * else the driver's error. Offsets advance only once every write is queued. */
EXPORT int recap_torch_replay(recap_torch_plan_t *p, void *stream)
{
    int status = 0;
    size_t i;
    drv_result_t rc;

    if (p->exec == NULL || (!drv.ok && recap_torch_driver() != 0))
        return -1;
    rc = drv.capturing(stream, &status);
    if (rc != 0)
        return rc;
    if (status != CAPTURE_STATUS_NONE)
        return -1;
    for (i = 0; i < p->n; i++)
        if (p->entries[i].state[rp.capturing_at])
            return -1;
    for (i = 0; i < p->n; i++) {
        const recap_torch_entry_t *e = &p->entries[i];

        rc = drv.write64(stream, e->seed_dev, word(e->state, seed_at), 0);
        if (rc == 0)
            rc = drv.write64(stream, e->offset_dev, word(e->state, offset_at), 0);
        if (rc != 0)
            return rc;
    }
    for (i = 0; i < p->n; i++) {
        uint64_t off = word(p->entries[i].state, offset_at) + p->entries[i].increment;

        memcpy(p->entries[i].state + offset_at, &off, sizeof(off));
    }
    rc = drv.launch(p->exec, stream);
    if (rc == 0)
        p->replays++;
    return rc;
}
