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
#define _GNU_SOURCE /* process_vm_readv, pipe2 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
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

/* The 64-bit word at base + at (unaligned reads allowed). */
static uint64_t word(const void *base, size_t at)
{
    uint64_t v;

    memcpy(&v, (const uint8_t *)base + at, sizeof(v));
    return v;
}

static recap_status_t load(const void *impl, uint8_t state[RECAP_STATE_BYTES])
{
    const uint8_t *st = state_of(impl);
    uint64_t seed = word(st, seed_at), offset = word(st, offset_at);

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
    if (seed != word(st, seed_at))
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
 * draw can be registered once it has begun), so a graph that draws from one of eight tracker
 * states would pay for nine (with the default generator's, which torch registers itself). Here
 * a replay reads the graph's own table of registered states (captured_generator_states_, a
 * ska::flat_hash_map of state to increment) at each replay, as torch's replay does; writes the
 * seed and offset of the states with an increment, two stream memory writes each (no kernel);
 * advances their offsets as torch does; and launches the graph's current exec. States with an
 * increment of 0 are left as torch would leave them but for their device tensors, which only
 * graphs that draw from them read, after their own replay wrote them. Nothing is cached between
 * replays, so an instantiate, reset or capture made any way is followed.
 *
 * recap.torch binds this to the places it found on the running torch, and uses it only after a
 * probe graph replayed through it drew exactly what torch's replay drew. The driver functions
 * come from the library recap uses (RECAP_CUDA_DRIVER, else libcuda.so.1).
 */
/* The driver's types, as cuda.h declares them (this file builds without the CUDA toolkit). */
typedef int drv_result_t;
typedef drv_result_t (*write64_fn)(void *stream, uint64_t addr, uint64_t value, unsigned flags);
typedef drv_result_t (*capturing_fn)(void *stream, int *status);
typedef drv_result_t (*launch_fn)(void *exec, void *stream);
typedef drv_result_t (*ctx_fn)(void **ctx);
enum { CAPTURE_STATUS_NONE = 0 };

static struct {
    int tried, ok;
    write64_fn write64;
    capturing_fn capturing;
    launch_fn launch;
    ctx_fn current;
} drv;

/* Where torch keeps what a replay needs, in bytes. */
static struct {
    int state_bound, graph_bound;
    size_t intragraph_at; /* CUDAGeneratorState::offset_intragraph_ (64-bit) */
    size_t capturing_at;  /* CUDAGeneratorState::capturing_ (one byte) */
    size_t seed_ext_at;   /* CUDAGeneratorState::seed_extragraph_ (a TensorImpl pointer) */
    size_t offset_ext_at; /* CUDAGeneratorState::offset_extragraph_ */
    size_t storage_at;    /* TensorImpl's StorageImpl pointer */
    size_t data_at;       /* StorageImpl's data pointer */
    size_t table_at;      /* CUDAGraph::captured_generator_states_ */
    size_t exec_at;       /* CUDAGraph::graph_exec_ */
    size_t has_exec_at;   /* CUDAGraph::has_graph_exec_ (one byte) */
} rp;

/* ska::flat_hash_map (c10/util/flat_hash_map.h), as recap.torch checks it on the running torch:
 * the entries, the slot count less one, the fibonacci policy's shift (a byte), max_lookups (a
 * byte), the load factor (a float), the element count; each entry a distance byte (negative when
 * empty) and the pair (state pointer, increment), 24 bytes. The array holds slots + max_lookups
 * entries, the last a sentinel. */
enum {
    TABLE_SLOTS_AT = 8, TABLE_LOOKUPS_AT = 17, TABLE_COUNT_AT = 24,
    ENTRY_BYTES = 24, ENTRY_KEY_AT = 8, ENTRY_VALUE_AT = 16,
    MAX_TABLE_ENTRIES = 1 << 16, MAX_REPLAY_STATES = 64
};

/* Copies n bytes at addr through a pipe, or answers -1: write() reports EFAULT for memory that is
 * not mapped instead of faulting. The fallback where process_vm_readv is refused (a seccomp
 * profile without it, a sandbox that does not implement it). */
EXPORT int recap_torch_peek_pipe(uintptr_t addr, void *out, size_t n)
{
    int fd[2], ok = 1;
    size_t done = 0, chunk;

    if (pipe2(fd, O_CLOEXEC) != 0)
        return -1;
    while (ok && done < n) {
        chunk = n - done < 4096 ? n - done : 4096; /* below the pipe's capacity: never blocks */
        ok = write(fd[1], (const void *)(addr + done), chunk) == (ssize_t)chunk &&
             read(fd[0], (uint8_t *)out + done, chunk) == (ssize_t)chunk;
        done += chunk;
    }
    close(fd[0]);
    close(fd[1]);
    return ok ? 0 : -1;
}

/* Copies n bytes at addr, or answers -1 where they cannot be read: recap.torch looks for
 * torch's fields by following words that may not be pointers at all, and must not fault. */
EXPORT int recap_torch_peek(uintptr_t addr, void *out, size_t n)
{
    static int vm_refused; /* process_vm_readv failed other than for the memory: use the pipe */
    struct iovec local = {out, n}, remote = {(void *)addr, n};
    ssize_t got;

    if (!__atomic_load_n(&vm_refused, __ATOMIC_RELAXED)) {
        got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (got == (ssize_t)n)
            return 0;
        if (got >= 0 || errno == EFAULT)
            return -1;
        __atomic_store_n(&vm_refused, 1, __ATOMIC_RELAXED);
    }
    return recap_torch_peek_pipe(addr, out, n);
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
    *(void **)&drv.current = dlsym(lib, "cuCtxGetCurrent");
    /* Under LD_PRELOAD, recap's interposed cuGraphLaunch, so that recap sees this launch as it
     * sees torch's (graphs may hold recap's own draws too); CUPTI and the injection front end
     * see the driver's call itself. */
    *(void **)&active = dlsym(RTLD_DEFAULT, "recap_hooks_active");
    if (active != NULL && active(&hooks) == RECAP_OK && hooks == RECAP_HOOKS_PRELOAD)
        *(void **)&drv.launch = dlsym(RTLD_DEFAULT, "cuGraphLaunch");
    if (drv.launch == NULL)
        *(void **)&drv.launch = dlsym(lib, "cuGraphLaunch");
    drv.ok = drv.write64 && drv.capturing && drv.launch && drv.current;
    return drv.ok ? 0 : -1;
}

/* The state's fields (recap_torch_bind must have bound seed and offset). */
EXPORT int recap_torch_bind_state(size_t intragraph_at, size_t capturing_at, size_t seed_ext_at,
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
    rp.state_bound = 1;
    return 0;
}

/* The graph's fields: its table, its exec and the flag saying the exec exists. */
EXPORT int recap_torch_bind_graph(size_t table_at, size_t exec_at, size_t has_exec_at)
{
    if (table_at % 8 || exec_at % 8)
        return -1;
    rp.table_at = table_at;
    rp.exec_at = exec_at;
    rp.has_exec_at = has_exec_at;
    rp.graph_bound = 1;
    return 0;
}

/* The device address of a one-element tensor held as a TensorImpl pointer at st + at (0 for
 * an undefined tensor, whose storage is empty). */
static uint64_t tensor_data(const uint8_t *st, size_t at)
{
    const void *impl = (const void *)(uintptr_t)word(st, at), *storage;

    if (impl == NULL)
        return 0;
    storage = (const void *)(uintptr_t)word(impl, rp.storage_at);
    return storage ? word(storage, rp.data_at) : 0;
}

/* Reads n bytes at addr: directly on the replay path (the places are bound and checked), or
 * through recap_torch_peek while recap.torch is still looking for them, when a word taken for
 * the table's entries may point anywhere. */
static int get(int safe, const uint8_t *addr, void *out, size_t n)
{
    if (safe)
        return recap_torch_peek((uintptr_t)addr, out, n);
    memcpy(out, addr, n);
    return 0;
}

/* Walks a graph's table: each registered state and its increment, up to cap of them; the
 * number of states, or -1 when the table does not read as one. */
static long table_walk(const uint8_t *graph, uint8_t **states, uint64_t *incs, size_t cap,
                       int safe)
{
    uint8_t head[TABLE_COUNT_AT + 8], e[ENTRY_BYTES];
    const uint8_t *entries;
    uint64_t slots, count, i;
    int8_t lookups;
    size_t n = 0;

    if (get(safe, graph + rp.table_at, head, sizeof(head)) != 0)
        return -1;
    entries = (const uint8_t *)(uintptr_t)word(head, 0);
    slots = word(head, TABLE_SLOTS_AT) + 1;
    count = word(head, TABLE_COUNT_AT);
    memcpy(&lookups, head + TABLE_LOOKUPS_AT, 1);
    if (count == 0)
        return 0;
    if (entries == NULL || lookups <= 0 || slots == 0 ||
        slots + (uint64_t)lookups > MAX_TABLE_ENTRIES)
        return -1;
    for (i = 0; i + 1 < slots + (uint64_t)lookups; i++) {
        if (get(safe, entries + i * ENTRY_BYTES, e, sizeof(e)) != 0)
            return -1;
        if ((int8_t)e[0] < 0)
            continue;
        if (n < cap) {
            states[n] = (uint8_t *)(uintptr_t)word(e, ENTRY_KEY_AT);
            incs[n] = word(e, ENTRY_VALUE_AT);
        }
        n++;
    }
    return n == count ? (long)n : -1;
}

/* The states registered with a C++ CUDAGraph and their increments (what torch's replay walks),
 * read without trusting the bound places (recap.torch checks them with it; tests): the count,
 * or -1. */
EXPORT long recap_torch_graph_states(const void *graph, void **states, uint64_t *incs, size_t cap)
{
    if (!rp.graph_bound)
        return -1;
    return table_walk(graph, (uint8_t **)states, incs, cap, 1);
}

/* One replay of a C++ CUDAGraph on `stream`: 0 when launched; -1 when torch's own replay must
 * run instead (nothing done: no exec yet, no current context, the stream captures, a registered
 * state is in a capture, the table is not read, more states than this handles); else the
 * driver's error. Offsets advance only once every write is queued, before the launch, as torch
 * advances them before its own. */
EXPORT int recap_torch_replay(const void *graph, void *stream)
{
    uint8_t *states[MAX_REPLAY_STATES];
    uint64_t incs[MAX_REPLAY_STATES], seed_dev[MAX_REPLAY_STATES], off_dev[MAX_REPLAY_STATES];
    void *exec, *ctx = NULL;
    int status = 0;
    long n, i, k = 0;
    drv_result_t rc;

    if (!rp.state_bound || !rp.graph_bound || (!drv.ok && recap_torch_driver() != 0))
        return -1;
    exec = (void *)(uintptr_t)word(graph, rp.exec_at);
    if (!((const uint8_t *)graph)[rp.has_exec_at] || exec == NULL)
        return -1;
    if (drv.current(&ctx) != 0 || ctx == NULL || drv.capturing(stream, &status) != 0 ||
        status != CAPTURE_STATUS_NONE)
        return -1;
    n = table_walk(graph, states, incs, MAX_REPLAY_STATES, 0);
    if (n < 0 || n > MAX_REPLAY_STATES)
        return -1;
    for (i = 0; i < n; i++) {
        if (states[i] == NULL || states[i][rp.capturing_at])
            return -1; /* torch's replay raises there */
        if (incs[i] == 0)
            continue;
        seed_dev[k] = tensor_data(states[i], rp.seed_ext_at);
        off_dev[k] = tensor_data(states[i], rp.offset_ext_at);
        if (seed_dev[k] == 0 || off_dev[k] == 0)
            return -1;
        states[k] = states[i];
        incs[k++] = (incs[i] + 3) / 4 * 4; /* as torch's increase() rounds */
    }
    for (i = 0; i < k; i++) {
        rc = drv.write64(stream, seed_dev[i], word(states[i], seed_at), 0);
        if (rc == 0)
            rc = drv.write64(stream, off_dev[i], word(states[i], offset_at), 0);
        if (rc != 0)
            return rc;
    }
    for (i = 0; i < k; i++) {
        uint64_t off = word(states[i], offset_at) + incs[i];

        memcpy(states[i] + offset_at, &off, sizeof(off));
    }
    return drv.launch(exec, stream);
}
