/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Framework generators: a framework's own generator (torch's CUDA generator, say) behind recap's
 * generator handle. The tracker, seeding and snapshots reach it through the few accessors here;
 * the framework's table does the work, and recap keeps only wrappers for the state objects the
 * framework handed it or it retained (each holding the one reference recap gives back with
 * state_release).
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/handle.h"
#include "base/lock.h"
#include "base/log.h"
#include "base/text.h"
#include "rng/generator.h"
#include "rng/port.h"

struct recap__fw {
    recap_framework_ops_t ops;
    void *ctx;
    char name[64];
    recap_generator_h gen;
    uint64_t id;
    int pins; /* save_all / restore_all calls using it now (atomic) */
    struct recap__fw *prev, *next;
};

/* Every framework generator alive, for recap-probe, reports and exact-capture scopes. The lock
 * is held for list changes and reads only, never around a framework operation (which may take
 * long, fork, or call recap again): a scope pins the generators it reads or writes instead, and
 * a generator being destroyed leaves the list, then waits for its pins to go. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct recap__fw *registry;
/* The generators the calling thread pins (one scope call at a time per thread: a framework
 * operation cannot enter or leave a scope), so a fork's child can recount pins. */
static __thread struct recap__fw **pinning;
static __thread size_t npinning;
/* For RECAP_REPORT, written at exit when a framework may have destroyed its generators: how many
 * were created in the process, and the distinct names of the first few, as given (any bytes:
 * the report escapes them), each ended by a NUL. */
static uint64_t created;
static char seen_names[160];
static size_t seen_len;
static uint64_t seen_left_out; /* creations whose new name did not fit: the report says so */

/* Depth of framework operations the calling thread is inside (see recap__fw_in_op). */
__thread int recap__fw_depth __attribute__((tls_model("initial-exec")));
#define in_op recap__fw_depth

/* A framework's failure becomes recap's: statuses outside recap's enum are mapped so callers
 * can rely on recap_strerror. */
static recap_status_t op_result(const struct recap__fw *fw, const char *op, recap_status_t st)
{
    if (st == RECAP_OK)
        return RECAP_OK;
    if (st > 0 || st < RECAP_ERR_BUSY)
        st = RECAP_ERR_STATE;
    return recap__fail(st, "framework generator \"%s\": %s failed (%s)", fw->name, op,
                       recap_strerror(st));
}

/* The framework's code runs stepped out of recap's lock sections (base/lock.h): a fork in
 * another thread does not wait for it, nor one it makes itself. */
#define FW_CALL(fw, op, ...)                                                  \
    ({                                                                        \
        recap_status_t st_;                                                   \
        int out_;                                                             \
        in_op++;                                                              \
        out_ = recap__lock_step_out();                                        \
        st_ = (fw)->ops.op((fw)->ctx, __VA_ARGS__);                          \
        recap__lock_step_in(out_);                                            \
        in_op--;                                                              \
        __builtin_expect(st_ == RECAP_OK, 1) ? RECAP_OK : op_result((fw), #op, st_); \
    })

static void release_obj(const struct recap__fw *fw, void *obj)
{
    int out;

    in_op++;
    out = recap__lock_step_out();
    fw->ops.state_release(fw->ctx, obj);
    recap__lock_step_in(out);
    in_op--;
}

static recap_status_t decode(const struct recap__fw *fw, const uint8_t b[RECAP_STATE_BYTES],
                             uint64_t *seed, uint64_t *offset)
{
    recap_status_t st = recap__state_decode(b, seed, offset);

    if (st != RECAP_OK)
        return recap__fail(st, "framework generator \"%s\" reported a state whose offset is not "
                           "a multiple of 4", fw->name);
    return RECAP_OK;
}

/* ------------------------------------------------------------------ values */

recap_status_t recap__fw_get(recap_generator_h gen, uint64_t *seed, uint64_t *offset)
{
    uint8_t b[RECAP_STATE_BYTES];
    recap_status_t st = FW_CALL(gen->fw, get_state, b);

    return st == RECAP_OK ? decode(gen->fw, b, seed, offset) : st;
}

recap_status_t recap__fw_set(recap_generator_h gen, uint64_t seed, uint64_t offset)
{
    uint8_t b[RECAP_STATE_BYTES];

    recap__state_encode(seed, offset, b);
    return FW_CALL(gen->fw, set_state, b);
}

recap_status_t recap__fw_state_get(recap__genstate_t *gs, uint64_t *seed, uint64_t *offset)
{
    uint8_t b[RECAP_STATE_BYTES];
    recap_status_t st = FW_CALL(gs->fw, state_get, gs->fobj, b);

    return st == RECAP_OK ? decode(gs->fw, b, seed, offset) : st;
}

recap_status_t recap__fw_state_set(recap__genstate_t *gs, uint64_t seed, uint64_t offset)
{
    uint8_t b[RECAP_STATE_BYTES];

    recap__state_encode(seed, offset, b);
    return FW_CALL(gs->fw, state_set, gs->fobj, b);
}

void recap__fw_state_release(recap__genstate_t *gs)
{
    release_obj(gs->fw, gs->fobj);
}

/* ------------------------------------------------------------------ state objects */

/* Wraps an object the framework handed over; on failure the object goes back. */
static recap_status_t wrap(recap_generator_h gen, void *obj, recap__genstate_t **s_p)
{
    recap__genstate_t *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        release_obj(gen->fw, obj);
        return recap__fail(RECAP_ERR_NO_MEMORY, "framework state wrapper");
    }
    s->refs = 1;
    s->device = gen->device;
    s->fw = gen->fw;
    s->fobj = obj;
    *s_p = s;
    return RECAP_OK;
}

recap_status_t recap__fw_new_state(recap_generator_h gen, uint64_t seed, uint64_t offset,
                                   recap__genstate_t **s_p)
{
    struct recap__fw *fw = gen->fw;
    void *obj = NULL, *cur = NULL;
    recap__genstate_t *s = NULL;
    recap_status_t st;

    if (fw->ops.state_create != NULL) {
        st = FW_CALL(fw, state_create, seed, &obj);
    } else {
        /* Megatron's way: a clone of the current state, then seeded. */
        recap__gen_lock(gen);
        st = FW_CALL(fw, state_current, &cur);
        if (st == RECAP_OK)
            st = FW_CALL(fw, state_clone, cur, &obj);
        recap__gen_unlock(gen);
    }
    if (st != RECAP_OK)
        return st;
    st = wrap(gen, obj, &s);
    if (st != RECAP_OK)
        return st;
    /* A created object is (seed, 0) already; a clone holds the current value. */
    if (offset != 0 || fw->ops.state_create == NULL)
        st = recap__fw_state_set(s, seed, offset);
    if (st != RECAP_OK) {
        recap__genstate_unref(s);
        return st;
    }
    *s_p = s;
    return RECAP_OK;
}

/*
 * With the generator's lock held: installs s (taking over the caller's reference) and hands back
 * what the framework had installed (*old_p, with a reference for the caller). When that is the
 * object recap installed last, the generator's reference to its wrapper moves to the caller;
 * another object is retained and wrapped. On failure nothing changed.
 */
recap_status_t recap__fw_exchange(recap_generator_h gen, recap__genstate_t *s,
                                  recap__genstate_t **old_p)
{
    const struct recap__fw *fw = gen->fw;
    recap__genstate_t *old = gen->state;
    void *obj = NULL;
    recap_status_t st;
    int out;

    /* The steady state of every fork and unfork: the installed object is the one recap installed
     * last, whose wrapper the generator's reference moves to the caller. */
    in_op++;
    out = recap__lock_step_out();
    st = fw->ops.state_current(fw->ctx, &obj);
    if (__builtin_expect(st == RECAP_OK && old != NULL && old->fobj == obj, 1)) {
        st = fw->ops.state_install(fw->ctx, s->fobj);
        recap__lock_step_in(out);
        in_op--;
        if (st != RECAP_OK)
            return op_result(fw, "state_install", st);
        gen->state = s;
        *old_p = old;
        return RECAP_OK;
    }
    recap__lock_step_in(out);
    in_op--;
    if (st != RECAP_OK)
        return op_result(fw, "state_current", st);
    /* Someone else installed `obj` (or recap never installed anything): retain and wrap it. */
    st = FW_CALL(fw, state_retain, obj);
    if (st == RECAP_OK)
        st = wrap(gen, obj, &old);
    if (st != RECAP_OK)
        return st;
    st = FW_CALL(fw, state_install, s->fobj);
    if (st != RECAP_OK) {
        recap__genstate_unref(old);
        return st;
    }
    recap__genstate_unref(gen->state); /* a wrapper of an object no longer installed */
    gen->state = s;
    *old_p = old;
    return RECAP_OK;
}

/* A draw from the framework's current state by value: read, advance, write back. Inside a
 * capture the framework's own kernels draw from it, not recap. */
static recap_status_t fw_draw(recap_generator_h gen, struct recap__capture *cap,
                              recap_status_t cap_st, recap_stream_t stream, uint64_t inc,
                              recap_philox_args_t *args)
{
    uint64_t seed, offset;
    recap_status_t st;

    (void)stream;
    if (cap_st != RECAP_OK && cap_st != RECAP_ERR_NOT_REGISTERED)
        return cap_st;
    if (cap_st != RECAP_OK || cap != NULL)
        return recap__fail(RECAP_ERR_UNSUPPORTED, "recap draws from a framework generator by "
                           "value only, outside captures: inside a capture the framework's own "
                           "kernels draw from it");
    recap__gen_lock(gen);
    st = recap__fw_get(gen, &seed, &offset);
    if (st == RECAP_OK && offset + inc < offset)
        st = recap__fail(RECAP_ERR_INVALID_ARG, "offset %llu + %llu overflows 64 bits",
                         (unsigned long long)offset, (unsigned long long)inc);
    if (st == RECAP_OK)
        st = recap__fw_set(gen, seed, offset + inc);
    recap__gen_unlock(gen);
    if (st != RECAP_OK)
        return st;
    args->captured = 0;
    args->seed = seed;
    args->offset = offset;
    args->seed_ptr = args->offset_ptr = NULL;
    args->offset_intragraph = 0;
    return RECAP_OK;
}

int recap__fw_graph_safe(const recap_generator_h gen)
{
    return gen->fw != NULL && gen->fw->ops.state_install != NULL;
}

/* ------------------------------------------------------------------ lifecycle */

/* The graph-safe form is all or nothing (state_create optional within it). */
static recap_status_t check_ops(const recap_framework_ops_t *o)
{
    const void *gs[] = {(const void *)o->state_clone, (const void *)o->state_install,
                        (const void *)o->state_current, (const void *)o->state_get,
                        (const void *)o->state_set, (const void *)o->state_release,
                        (const void *)o->state_retain};
    static const char *const gs_names[] = {"state_clone", "state_install", "state_current",
                                           "state_get", "state_set", "state_release",
                                           "state_retain"};
    size_t i, present = 0;

    RECAP_CHECK_ARG(o->version == RECAP_FRAMEWORK_OPS_VERSION, "framework ops version %u (this "
                    "library knows %d)", o->version, RECAP_FRAMEWORK_OPS_VERSION);
    RECAP_CHECK_ARG(o->get_state != NULL, "framework ops: get_state is required");
    RECAP_CHECK_ARG(o->set_state != NULL, "framework ops: set_state is required");
    for (i = 0; i < sizeof(gs) / sizeof(gs[0]); i++)
        present += gs[i] != NULL;
    for (i = 0; present > 0 && i < sizeof(gs) / sizeof(gs[0]); i++)
        RECAP_CHECK_ARG(gs[i] != NULL, "framework ops: the graph-safe form is incomplete (%s "
                        "is missing; give all of state_clone .. state_retain or none)",
                        gs_names[i]);
    RECAP_CHECK_ARG(present > 0 || o->state_create == NULL, "framework ops: state_create "
                    "without the rest of the graph-safe form");
    return RECAP_OK;
}

/* Under registry_lock. Names that do not fit whole are left out, and counted (a name left out
 * twice counts twice: the list does not keep it to know). */
static void remember_name(const char *name)
{
    size_t len = strlen(name), at;

    for (at = 0; at < seen_len; at += strlen(seen_names + at) + 1)
        if (strcmp(seen_names + at, name) == 0)
            return;
    if (len + 1 > sizeof(seen_names) - seen_len) {
        seen_left_out++;
        return;
    }
    memcpy(seen_names + seen_len, name, len + 1);
    seen_len += len + 1;
}

void recap__fw_seen(uint64_t *created_p, char *names, size_t cap, size_t *len_p,
                    uint64_t *left_out_p)
{
    pthread_mutex_lock(&registry_lock);
    *created_p = created;
    *left_out_p = seen_left_out;
    *len_p = seen_len < cap ? seen_len : 0;
    memcpy(names, seen_names, *len_p);
    pthread_mutex_unlock(&registry_lock);
}

/* The name as recap keeps it (recap_framework_info_t holds 64 bytes): whole when it fits, else
 * cut at a character and marked, so a log line or a report never shows a cut name as the whole
 * one. */
static void keep_name(char *dst, size_t cap, const char *name)
{
    size_t len = strlen(name), keep = cap - sizeof(RECAP__TEXT_CUT);

    if (len < cap) {
        memcpy(dst, name, len + 1);
        return;
    }
    while (keep > 0 && ((unsigned char)name[keep] & 0xC0) == 0x80)
        keep--; /* not inside a UTF-8 sequence */
    memcpy(dst, name, keep);
    memcpy(dst + keep, RECAP__TEXT_CUT, sizeof(RECAP__TEXT_CUT));
}

recap_status_t recap_generator_create_framework(const recap_framework_ops_t *ops,
                                                void *framework, int device,
                                                recap_generator_h *gen_p)
{
    recap_generator_h gen;
    struct recap__fw *fw;
    recap_status_t st;

    RECAP_CHECK_ARG(ops != NULL && gen_p != NULL, "NULL argument");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_generator_create_framework");
    RECAP_CHECK_ARG(device >= RECAP_DEVICE_HOST, "device %d: a CUDA ordinal or "
                    "RECAP_DEVICE_HOST", device);
    st = check_ops(ops);
    if (st != RECAP_OK)
        return st;
    gen = calloc(1, sizeof(*gen));
    fw = calloc(1, sizeof(*fw));
    if (gen == NULL || fw == NULL) {
        free(gen);
        free(fw);
        return recap__fail(RECAP_ERR_NO_MEMORY, "framework generator");
    }
    fw->ops = *ops;
    fw->ctx = framework;
    keep_name(fw->name, sizeof(fw->name), ops->name != NULL ? ops->name : "unnamed");
    fw->ops.name = fw->name;
    fw->gen = gen;
    gen->device = device;
    gen->kind = &recap__fw_kind;
    gen->fw = fw;
    gen->magic = RECAP_MAGIC_GENERATOR;
    st = recap__handle_register(gen, RECAP_MAGIC_GENERATOR);
    if (st != RECAP_OK) {
        free(gen);
        free(fw);
        return st;
    }
    pthread_mutex_lock(&registry_lock);
    fw->next = registry;
    if (registry != NULL)
        registry->prev = fw;
    registry = fw;
    created++;
    fw->id = created;
    remember_name(fw->name);
    pthread_mutex_unlock(&registry_lock);
    recap__log(RECAP_LOG_INFO, "framework generator \"%s\" (device %d, %s form)", fw->name,
               device, ops->state_install != NULL ? "value and graph-safe" : "value");
    *gen_p = gen;
    return RECAP_OK;
}

/* Takes the generator off the registry and waits for scopes in other threads using it. */
void recap__fw_unlink(recap_generator_h gen)
{
    struct recap__fw *fw = gen->fw;

    pthread_mutex_lock(&registry_lock);
    if (fw->prev != NULL)
        fw->prev->next = fw->next;
    else if (registry == fw)
        registry = fw->next;
    if (fw->next != NULL)
        fw->next->prev = fw->prev;
    fw->prev = fw->next = NULL;
    pthread_mutex_unlock(&registry_lock);
    while (__atomic_load_n(&fw->pins, __ATOMIC_ACQUIRE) > 0)
        sched_yield();
}

void recap__fw_destroy(recap_generator_h gen)
{
    free(gen->fw);
    gen->fw = NULL;
}

recap_status_t recap_generator_is_framework(recap_generator_h gen, int *is_framework_p)
{
    RECAP_CHECK_HANDLE(gen, RECAP_MAGIC_GENERATOR, "generator");
    RECAP_CHECK_ARG(is_framework_p != NULL, "is_framework_p is NULL");
    *is_framework_p = gen->fw != NULL;
    return RECAP_OK;
}

recap_status_t recap_generator_needs_registration(recap_generator_h gen, int *needs_p)
{
    int needs = 0;
    recap_status_t st;

    RECAP_CHECK_HANDLE(gen, RECAP_MAGIC_GENERATOR, "generator");
    RECAP_CHECK_ARG(needs_p != NULL, "needs_p is NULL");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_generator_needs_registration");
    if (gen->fw == NULL)
        return recap__port->needs_registration(needs_p);
    if (gen->fw->ops.needs_registration == NULL)
        return recap__fail(RECAP_ERR_UNSUPPORTED, "framework generator \"%s\" does not say "
                           "whether its framework needs registration (no needs_registration "
                           "operation)", gen->fw->name);
    st = FW_CALL(gen->fw, needs_registration, &needs);
    if (st != RECAP_OK)
        return st;
    *needs_p = needs != 0;
    return RECAP_OK;
}

recap_status_t recap_framework_generators(recap_framework_info_t *info, size_t cap,
                                          size_t *count_p)
{
    const struct recap__fw *fw;
    size_t n = 0;

    RECAP_CHECK_ARG(count_p != NULL && (info != NULL || cap == 0), "NULL argument");
    pthread_mutex_lock(&registry_lock);
    for (fw = registry; fw != NULL; fw = fw->next, n++) {
        if (n >= cap)
            continue;
        snprintf(info[n].name, sizeof(info[n].name), "%s", fw->name);
        info[n].device = fw->gen->device;
        info[n].graph_safe = fw->ops.state_install != NULL;
        info[n].trackers = __atomic_load_n(&fw->gen->drivers, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&registry_lock);
    *count_p = n;
    return RECAP_OK;
}

/* Under registry_lock: pins (delta 1) or unpins (-1) the calling thread's generators (NULL
 * entries: gone). */
static void pin(struct recap__fw **fws, size_t n, int delta)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (fws[i] != NULL)
            __atomic_add_fetch(&fws[i]->pins, delta, __ATOMIC_RELEASE);
    pinning = delta > 0 ? fws : NULL;
    npinning = delta > 0 ? n : 0;
}

static void unpin(struct recap__fw **fws, size_t n)
{
    pthread_mutex_lock(&registry_lock);
    pin(fws, n, -1);
    pthread_mutex_unlock(&registry_lock);
    free(fws);
}

static recap_status_t value_get(recap_generator_h gen, uint64_t *seed, uint64_t *offset)
{
    recap_status_t st;

    recap__gen_lock(gen);
    st = recap__fw_get(gen, seed, offset);
    recap__gen_unlock(gen);
    return st;
}

/* Reads every generator's value with none of recap's module locks held (each generator pinned). */
recap_status_t recap__fw_save_all(recap__fw_value_t *v, size_t cap, size_t *count_p)
{
    recap_status_t st = RECAP_OK;
    struct recap__fw *fw, **fws;
    size_t n = 0, i;

    pthread_mutex_lock(&registry_lock);
    for (fw = registry; fw != NULL; fw = fw->next)
        n++;
    fws = calloc(cap ? cap : 1, sizeof(*fws));
    if (fws == NULL) {
        pthread_mutex_unlock(&registry_lock);
        return recap__fail(RECAP_ERR_NO_MEMORY, "exact-capture scope");
    }
    for (fw = registry, i = 0; fw != NULL && i < cap; fw = fw->next, i++) {
        fws[i] = fw;
        v[i].gen = fw->gen;
        v[i].id = fw->id;
    }
    pin(fws, i, 1);
    pthread_mutex_unlock(&registry_lock);
    for (i = 0; i < n && i < cap && st == RECAP_OK; i++)
        st = value_get(v[i].gen, &v[i].seed, &v[i].offset);
    unpin(fws, n < cap ? n : cap);
    if (st == RECAP_OK)
        *count_p = n;
    return st;
}

recap_status_t recap__fw_restore_all(const recap__fw_value_t *v, size_t n)
{
    recap_status_t first = RECAP_OK, st;
    struct recap__fw *fw, **fws = calloc(n ? n : 1, sizeof(*fws));
    size_t i;

    if (fws == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "exact-capture scope");
    pthread_mutex_lock(&registry_lock);
    for (i = 0; i < n; i++) {
        for (fw = registry; fw != NULL && !(fw->gen == v[i].gen && fw->id == v[i].id);
             fw = fw->next)
            ;
        fws[i] = fw; /* NULL: destroyed inside the scope */
    }
    pin(fws, n, 1);
    pthread_mutex_unlock(&registry_lock);
    for (i = 0; i < n; i++) {
        if (fws[i] == NULL)
            continue;
        recap__gen_lock(v[i].gen);
        st = recap__fw_set(v[i].gen, v[i].seed, v[i].offset);
        recap__gen_unlock(v[i].gen);
        if (first == RECAP_OK)
            first = st;
    }
    unpin(fws, n);
    return first;
}

/* Creating a generator in a fork's child takes the lock; only the forking thread's pins are real
 * there (the other threads are gone). */
void recap__fw_atfork(recap__atfork_t when)
{
    struct recap__fw *fw;
    size_t i;

    if (when == RECAP_ATFORK_CHILD) {
        for (fw = registry; fw != NULL; fw = fw->next)
            fw->pins = 0;
        for (i = 0; i < npinning; i++)
            if (pinning[i] != NULL)
                pinning[i]->pins = 0;
        for (i = 0; i < npinning; i++)
            if (pinning[i] != NULL)
                pinning[i]->pins++;
    }
    recap__atfork_mutex(&registry_lock, when);
}

const recap__gen_kind_t recap__fw_kind = {
    .get = recap__fw_get,
    .set = recap__fw_set,
    .install = recap__fw_exchange,
    .new_state = recap__fw_new_state,
    .draw = fw_draw,
    .unlink = recap__fw_unlink,
    .release = recap__fw_destroy,
};
