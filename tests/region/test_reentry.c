/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Re-entry from the host's callbacks: every callback recap makes (a framework generator's
 * operations, a capture subscriber, an engine's operations including the recompute context, a
 * region's function in its first run and its recompute) against every public call it could make
 * on the objects in play, destroys included. Each pair runs in a child process under an alarm:
 * the call must return a status (RECAP_ERR_STATE where recap.h says so) and never wait for a lock
 * its own thread holds; the process must go on without touching a freed object (the sanitizer
 * builds see that) and tear down cleanly. The pairs run in a random order, over value-mode and
 * graph-safe trackers.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define ALARM_S 20
#define NFLOATS 16

/* ---------------------------------------------------------------- callbacks */

enum {
    /* framework generator operations */
    CB_GET_STATE, CB_SET_STATE, CB_STATE_CREATE, CB_STATE_CLONE, CB_STATE_INSTALL,
    CB_STATE_CURRENT, CB_STATE_GET, CB_STATE_SET, CB_STATE_RELEASE, CB_STATE_RETAIN,
    CB_NEEDS_REGISTRATION,
    CB_SUBSCRIBER,
    /* engine operations */
    CB_BUFFER_ARG, CB_NEEDS_GRAD, CB_ALLOC_LIKE, CB_FREE_BUFFER, CB_FREE_STORAGE,
    CB_SHARE_STORAGE, CB_SAME_STORAGE, CB_SET_RECORDING, CB_ADD_TRIGGER, CB_REMOVE_TRIGGER,
    CB_SAVE, CB_LOAD, CB_DROP, CB_CONTEXT_ENTER, CB_CONTEXT_EXIT,
    /* the region's function */
    CB_FUNCTION,
    NCB
};

static const char *const cb_names[NCB] = {
    "get_state", "set_state", "state_create", "state_clone", "state_install", "state_current",
    "state_get", "state_set", "state_release", "state_retain", "needs_registration",
    "subscriber", "buffer_arg", "needs_grad", "alloc_like", "free_buffer", "free_storage",
    "share_storage", "same_storage", "set_recording", "add_trigger", "remove_trigger", "save",
    "load", "drop", "context_enter", "context_exit", "region function"};

enum {
    A_FRAMEWORK_GENERATORS, A_CREATE_FRAMEWORK, A_GET_STATE, A_SET_STATE, A_MANUAL_SEED,
    A_FORK_UNFORK, A_TRACKER_ADD, A_SNAPSHOT_TAKE, A_SNAPSHOT_RESTORE, A_SCOPE,
    A_DEFAULT_TRACKER, A_SUBSCRIBE, A_UNSUBSCRIBE, A_WILL_LAUNCH, A_TRACKER_CREATE,
    A_TRACKER_DESTROY, A_GENERATOR_DESTROY, A_REGION_DESTROY, A_REGION_REBUILD,
    A_MANAGER_DESTROY, A_MANAGER_RELEASE, A_MANAGER_REBUILD, A_ENGINE_DESTROY, A_NESTED_REGION,
    A_IS_CHECKPOINTING, A_SIGNATURE_DESTROY, A_FIRE_TRIGGER, A_REGION_FINISH, A_DEFAULT_GET,
    A_NEEDS_REGISTRATION, NA
};

static const char *const a_names[NA] = {
    "recap_framework_generators", "recap_generator_create_framework",
    "recap_generator_get_state", "recap_generator_set_state", "recap_generator_manual_seed",
    "recap_tracker_fork/unfork", "recap_tracker_add", "recap_snapshot_take",
    "recap_snapshot_restore", "recap_exact_capture_enter/leave",
    "recap_default_tracker_initialize", "recap_capture_subscribe",
    "recap_capture_unsubscribe", "recap_graph_will_launch", "recap_tracker_create/destroy",
    "recap_tracker_destroy", "recap_generator_destroy", "recap_region_destroy",
    "recap_region_rebuild", "recap_manager_destroy", "recap_manager_release",
    "recap_manager_rebuild", "recap_plain_engine_destroy", "a nested region",
    "recap_is_checkpointing", "recap_signature_destroy", "recap_plain_buffer_fire",
    "recap_region_finish", "recap_default_tracker_get", "recap_capture_needs_registration"};

/* The objects in play (one child, one pair). */
static struct {
    int cb, action, armed, fired, graph_safe;
    int nth; /* the action runs at the callback's nth call (from 1) */
    recap_status_t status;
    recap_generator_h gen;
    recap_tracker_h tracker;
    recap_snapshot_h snap;
    recap_subscription_h sub;
    recap_plain_engine_h engine;
    recap_engine_ops_t ops;
    const recap_engine_ops_t *plain;
    recap_manager_h mgr;
    recap_region_h region;
    recap_signature_h sig;
    recap_buffer_t x, y, trigger;
    /* what the action destroyed */
    int gone_tracker, gone_gen, gone_sub, gone_engine, gone_mgr, gone_region, gone_sig;
} P;

#define CHILD_CHECK(cond)                                                                   \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s from %s: %s:%d: %s (%s)\n", a_names[P.action],              \
                    cb_names[P.cb], __FILE__, __LINE__, #cond, recap_last_error());          \
            _exit(3);                                                                       \
        }                                                                                   \
    } while (0)

static void fn(const float *x, float *y, uint64_t n);
static recap_status_t on_event(const recap_capture_event_info_t *info, void *arg);
static const recap_framework_ops_t fw_value_ops;

/* A status of recap's enum, from a call that came back. */
static int valid(recap_status_t st)
{
    return st <= RECAP_OK && st >= RECAP_ERR_BUSY;
}

/* The action, once, from inside the armed callback. */
static recap_status_t act(void)
{
    uint8_t state[RECAP_STATE_BYTES] = {0};
    recap_tracker_params_t tp = {.device = RECAP_DEVICE_HOST};
    recap_framework_info_t info[4];
    recap_exact_scope_h scope;
    recap_subscription_h s2;
    recap_fork_token_t tok;
    recap_generator_h g2;
    recap_tracker_h t2;
    recap_status_t st;
    size_t n;
    int yes;

    switch (P.action) {
    case A_FRAMEWORK_GENERATORS:
        return recap_framework_generators(info, 4, &n);
    case A_CREATE_FRAMEWORK:
        st = recap_generator_create_framework(&fw_value_ops, NULL, RECAP_DEVICE_HOST, &g2);
        return st != RECAP_OK ? st : recap_generator_destroy(g2);
    case A_GET_STATE:
        return recap_generator_get_state(P.gen, state);
    case A_SET_STATE:
        st = recap_generator_get_state(P.gen, state);
        return st != RECAP_OK ? st : recap_generator_set_state(P.gen, state);
    case A_MANUAL_SEED:
        return recap_generator_manual_seed(P.gen, 5);
    case A_FORK_UNFORK:
        st = recap_tracker_fork(P.tracker, RECAP_RNG_MODEL_PARALLEL, &tok);
        return st != RECAP_OK ? st : recap_tracker_unfork(P.tracker, tok);
    case A_TRACKER_ADD:
        return recap_tracker_add(P.tracker, "reentry-rng", 4321);
    case A_SNAPSHOT_TAKE:
        return recap_snapshot_take(P.tracker, P.snap);
    case A_SNAPSHOT_RESTORE:
        return recap_snapshot_restore(P.tracker, P.snap);
    case A_SCOPE:
        st = recap_exact_capture_enter(&scope);
        return st != RECAP_OK ? st : recap_exact_capture_leave(scope);
    case A_DEFAULT_TRACKER:
        return recap_default_tracker_initialize(&tp, 0, &t2);
    case A_SUBSCRIBE:
        st = recap_capture_subscribe(RECAP_EVENT_MASK_ALL, on_event, NULL, &s2);
        return st != RECAP_OK ? st : recap_capture_unsubscribe(s2);
    case A_UNSUBSCRIBE:
        st = recap_capture_unsubscribe(P.sub);
        P.gone_sub |= st == RECAP_OK;
        return st;
    case A_WILL_LAUNCH:
        return recap_graph_will_launch((recap_graph_exec_t)(uintptr_t)0xe1ec, NULL);
    case A_TRACKER_CREATE:
        st = recap_tracker_create(&tp, &t2);
        return st != RECAP_OK ? st : recap_tracker_destroy(t2);
    case A_TRACKER_DESTROY:
        st = recap_tracker_destroy(P.tracker);
        P.gone_tracker |= st == RECAP_OK;
        return st;
    case A_GENERATOR_DESTROY:
        st = recap_generator_destroy(P.gen);
        P.gone_gen |= st == RECAP_OK;
        return st;
    case A_REGION_DESTROY:
        st = recap_region_destroy(P.region);
        P.gone_region |= st == RECAP_OK;
        return st;
    case A_REGION_REBUILD:
        return recap_region_rebuild(P.region);
    case A_MANAGER_DESTROY:
        st = recap_manager_destroy(P.mgr);
        P.gone_mgr |= st == RECAP_OK;
        return st;
    case A_MANAGER_RELEASE:
        return recap_manager_release(P.mgr, NULL);
    case A_MANAGER_REBUILD:
        return recap_manager_rebuild(P.mgr);
    case A_ENGINE_DESTROY:
        st = recap_plain_engine_destroy(P.engine);
        P.gone_engine |= st == RECAP_OK;
        return st;
    case A_NESTED_REGION: {
        recap_region_params_t rp = {.ops = &P.ops, .host = P.engine};
        recap_value_t v[3];
        recap_region_h r2;

        st = recap_region_create(&rp, &r2);
        if (st != RECAP_OK)
            return st;
        v[0].buf = P.x;
        v[1].buf = P.y;
        v[2].u64 = NFLOATS;
        st = recap_region_record(r2, P.sig, (recap_func_t)fn, v, 3);
        CHILD_CHECK(recap_region_destroy(r2) == RECAP_OK);
        return st;
    }
    case A_IS_CHECKPOINTING:
        return recap_is_checkpointing(&yes);
    case A_FIRE_TRIGGER: /* the manager's trigger: its rebuild */
        return recap_plain_buffer_fire(P.trigger);
    case A_REGION_FINISH:
        return recap_region_finish(P.region);
    case A_DEFAULT_GET:
        return recap_default_tracker_get(&t2);
    case A_NEEDS_REGISTRATION:
        return recap_capture_needs_registration(&yes);
    case A_SIGNATURE_DESTROY: /* the region holds its own reference */
        st = recap_signature_destroy(P.sig);
        P.gone_sig |= st == RECAP_OK;
        return st;
    }
    return RECAP_ERR_INVALID_ARG;
}

/* What recap.h promises for some pairs: calls recap refuses from there. */
static void check_promise(void)
{
    int fw_op = P.cb <= CB_NEEDS_REGISTRATION;

    CHILD_CHECK(valid(P.status));
    if (fw_op && (P.action == A_GET_STATE || P.action == A_SET_STATE ||
                  P.action == A_MANUAL_SEED || P.action == A_FORK_UNFORK ||
                  P.action == A_TRACKER_ADD || P.action == A_SNAPSHOT_TAKE ||
                  P.action == A_SNAPSHOT_RESTORE || P.action == A_TRACKER_DESTROY ||
                  P.action == A_GENERATOR_DESTROY))
        CHILD_CHECK(P.status == RECAP_ERR_STATE);
    if (P.cb == CB_SUBSCRIBER && (P.action == A_UNSUBSCRIBE || P.action == A_SUBSCRIBE ||
                                  P.action == A_WILL_LAUNCH))
        CHILD_CHECK(P.status == RECAP_ERR_STATE);
}

static void hook(int cb)
{
    if (cb != P.cb || !P.armed || P.fired || --P.nth > 0)
        return;
    P.fired = 1;
    P.status = act();
    check_promise();
}

/* ---------------------------------------------------------------- the framework */

typedef struct obj {
    int refs;
    uint8_t st[RECAP_STATE_BYTES];
} obj_t;

static obj_t *fw_current;

static obj_t *obj_new(const uint8_t *st)
{
    obj_t *o = calloc(1, sizeof(*o));

    CHILD_CHECK(o != NULL);
    o->refs = 1;
    if (st != NULL)
        memcpy(o->st, st, RECAP_STATE_BYTES);
    return o;
}

static void obj_put(obj_t *o)
{
    if (--o->refs == 0)
        free(o);
}

static recap_status_t f_get(void *f, uint8_t st[RECAP_STATE_BYTES])
{
    hook(CB_GET_STATE);
    memcpy(st, fw_current->st, RECAP_STATE_BYTES);
    return RECAP_OK;
}

static recap_status_t f_set(void *f, const uint8_t st[RECAP_STATE_BYTES])
{
    hook(CB_SET_STATE);
    memcpy(fw_current->st, st, RECAP_STATE_BYTES);
    return RECAP_OK;
}

static recap_status_t f_create(void *f, uint64_t seed, void **obj_p)
{
    uint8_t st[RECAP_STATE_BYTES] = {0};

    hook(CB_STATE_CREATE);
    memcpy(st, &seed, sizeof(seed));
    *obj_p = obj_new(st);
    return RECAP_OK;
}

static recap_status_t f_clone(void *f, void *obj, void **clone_p)
{
    hook(CB_STATE_CLONE);
    *clone_p = obj_new(((obj_t *)obj)->st);
    return RECAP_OK;
}

static recap_status_t f_install(void *f, void *obj)
{
    hook(CB_STATE_INSTALL);
    ((obj_t *)obj)->refs++;
    obj_put(fw_current);
    fw_current = obj;
    return RECAP_OK;
}

static recap_status_t f_current(void *f, void **obj_p)
{
    hook(CB_STATE_CURRENT);
    *obj_p = fw_current;
    return RECAP_OK;
}

static recap_status_t f_state_get(void *f, void *obj, uint8_t st[RECAP_STATE_BYTES])
{
    hook(CB_STATE_GET);
    memcpy(st, ((obj_t *)obj)->st, RECAP_STATE_BYTES);
    return RECAP_OK;
}

static recap_status_t f_state_set(void *f, void *obj, const uint8_t st[RECAP_STATE_BYTES])
{
    hook(CB_STATE_SET);
    memcpy(((obj_t *)obj)->st, st, RECAP_STATE_BYTES);
    return RECAP_OK;
}

static void f_release(void *f, void *obj)
{
    hook(CB_STATE_RELEASE);
    obj_put(obj);
}

static recap_status_t f_retain(void *f, void *obj)
{
    hook(CB_STATE_RETAIN);
    ((obj_t *)obj)->refs++;
    return RECAP_OK;
}

static recap_status_t f_needs(void *f, int *needs_p)
{
    hook(CB_NEEDS_REGISTRATION);
    *needs_p = 0;
    return RECAP_OK;
}

static const recap_framework_ops_t fw_ops = {
    RECAP_FRAMEWORK_OPS_VERSION, "reentry framework", f_get, f_set, f_create, f_clone,
    f_install, f_current, f_state_get, f_state_set, f_release, f_retain, f_needs};
/* Megatron's way: new states are clones of the current one. */
static const recap_framework_ops_t fw_clone_ops = {
    RECAP_FRAMEWORK_OPS_VERSION, "reentry framework", f_get, f_set, NULL, f_clone,
    f_install, f_current, f_state_get, f_state_set, f_release, f_retain, f_needs};
static const recap_framework_ops_t fw_value_ops = {
    .version = RECAP_FRAMEWORK_OPS_VERSION, .name = "reentry framework", .get_state = f_get,
    .set_state = f_set, .needs_registration = f_needs};

static recap_status_t on_event(const recap_capture_event_info_t *info, void *arg)
{
    hook(CB_SUBSCRIBER);
    return RECAP_OK;
}

/* ---------------------------------------------------------------- the engine: the plain one,
 * each operation announced first */

#define WRAP(name, CB, params, args)              \
    static recap_status_t e_##name params         \
    {                                             \
        hook(CB);                                 \
        return P.plain->name args;                \
    }
WRAP(buffer_arg, CB_BUFFER_ARG, (void *e, recap_buffer_t b, void **a), (e, b, a))
WRAP(alloc_like, CB_ALLOC_LIKE, (void *e, recap_buffer_t l, recap_buffer_t *b), (e, l, b))
WRAP(free_buffer, CB_FREE_BUFFER, (void *e, recap_buffer_t b), (e, b))
WRAP(free_storage, CB_FREE_STORAGE, (void *e, recap_buffer_t b), (e, b))
WRAP(share_storage, CB_SHARE_STORAGE, (void *e, recap_buffer_t d, recap_buffer_t s), (e, d, s))
WRAP(set_recording, CB_SET_RECORDING, (void *e, int on, int *prev), (e, on, prev))
WRAP(add_trigger, CB_ADD_TRIGGER,
     (void *e, recap_buffer_t b, recap_trigger_func_t f, void *a, void **h), (e, b, f, a, h))
WRAP(remove_trigger, CB_REMOVE_TRIGGER, (void *e, void *h), (e, h))
WRAP(save, CB_SAVE, (void *e, recap_buffer_t b, void **s), (e, b, s))
WRAP(load, CB_LOAD, (void *e, void *s, recap_buffer_t *b), (e, s, b))
WRAP(drop, CB_DROP, (void *e, void *s), (e, s))
WRAP(context_enter, CB_CONTEXT_ENTER, (void *e, recap_pass_t p, void **c), (e, p, c))
WRAP(context_exit, CB_CONTEXT_EXIT, (void *e, void *c), (e, c))

static int e_needs_grad(void *e, recap_buffer_t b)
{
    hook(CB_NEEDS_GRAD);
    return P.plain->needs_grad != NULL ? P.plain->needs_grad(e, b) : 1;
}

static int e_same_storage(void *e, recap_buffer_t a, recap_buffer_t b)
{
    hook(CB_SAME_STORAGE);
    return P.plain->same_storage != NULL ? P.plain->same_storage(e, a, b) : a == b;
}

static void fn(const float *x, float *y, uint64_t n)
{
    uint64_t i;

    hook(CB_FUNCTION);
    for (i = 0; i < n; i++)
        y[i] = 2 * x[i];
}

/* ---------------------------------------------------------------- one pair */

static void setup(void)
{
    recap_tracker_params_t tp = {.device = RECAP_DEVICE_HOST};
    recap_region_params_t rp = {0};
    static const recap_type_t types[] = {RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT,
                                         RECAP_TYPE_UINT64};
    void *data;
    size_t i;

    fw_current = obj_new(NULL);
    CHILD_CHECK(recap_generator_create_framework(P.graph_safe == 2   ? &fw_clone_ops
                                                 : P.graph_safe ? &fw_ops
                                                                : &fw_value_ops,
                                                 NULL, RECAP_DEVICE_HOST, &P.gen) == RECAP_OK);
    tp.generator = P.gen;
    tp.flags = P.graph_safe ? RECAP_TRACKER_GRAPH_SAFE : 0;
    CHILD_CHECK(recap_tracker_create(&tp, &P.tracker) == RECAP_OK);
    CHILD_CHECK(recap_tracker_add(P.tracker, RECAP_RNG_MODEL_PARALLEL, 7) == RECAP_OK);
    CHILD_CHECK(recap_tracker_add(P.tracker, RECAP_RNG_DATA_PARALLEL, 8) == RECAP_OK);
    CHILD_CHECK(recap_snapshot_create(&P.snap) == RECAP_OK);
    CHILD_CHECK(recap_snapshot_take(P.tracker, P.snap) == RECAP_OK);
    CHILD_CHECK(recap_capture_subscribe(RECAP_EVENT_MASK_ALL, on_event, NULL, &P.sub) ==
                RECAP_OK);
    CHILD_CHECK(recap_plain_engine_create(RECAP_DEVICE_HOST, 0, &P.engine) == RECAP_OK);
    CHILD_CHECK(recap_plain_engine_ops(&P.plain) == RECAP_OK);
    P.ops = *P.plain;
    P.ops.buffer_arg = e_buffer_arg;
    P.ops.needs_grad = e_needs_grad;
    P.ops.alloc_like = e_alloc_like;
    P.ops.free_buffer = e_free_buffer;
    P.ops.free_storage = e_free_storage;
    P.ops.share_storage = e_share_storage;
    P.ops.same_storage = e_same_storage;
    P.ops.set_recording = e_set_recording;
    P.ops.add_trigger = e_add_trigger;
    P.ops.remove_trigger = e_remove_trigger;
    P.ops.save = e_save;
    P.ops.load = e_load;
    P.ops.drop = e_drop;
    P.ops.context_enter = e_context_enter;
    P.ops.context_exit = e_context_exit;
    CHILD_CHECK(recap_manager_create(&P.ops, P.engine, &P.mgr) == RECAP_OK);
    rp.ops = &P.ops;
    rp.host = P.engine;
    rp.tracker = P.tracker;
    rp.manager = P.mgr;
    CHILD_CHECK(recap_region_create(&rp, &P.region) == RECAP_OK);
    CHILD_CHECK(recap_signature_create(RECAP_TYPE_VOID, types, 3, &P.sig) == RECAP_OK);
    CHILD_CHECK(recap_plain_buffer_create(P.engine, NFLOATS * 4, 1, &P.x) == RECAP_OK);
    CHILD_CHECK(recap_plain_buffer_create(P.engine, NFLOATS * 4, 1, &P.y) == RECAP_OK);
    CHILD_CHECK(recap_plain_buffer_create(P.engine, 4, 1, &P.trigger) == RECAP_OK);
    CHILD_CHECK(recap_plain_buffer_data(P.x, &data) == RECAP_OK);
    for (i = 0; i < NFLOATS; i++)
        ((float *)data)[i] = (float)i;
}

/* The host's side of one step: every callback above gets its turn. Statuses after the action
 * depend on what it did; each call must come back. */
static void drive(void)
{
    uint8_t state[RECAP_STATE_BYTES];
    recap_exact_scope_h scope = NULL;
    recap_fork_token_t tok;
    recap_value_t v[3];
    int needs;

    v[0].buf = P.x;
    v[1].buf = P.y;
    v[2].u64 = NFLOATS;
    if (recap_exact_capture_enter(&scope) != RECAP_OK)
        scope = NULL;
    if (!P.gone_gen) {
        (void)recap_generator_get_state(P.gen, state);
        (void)recap_generator_set_state(P.gen, state);
        (void)recap_generator_needs_registration(P.gen, &needs);
    }
    if (!P.gone_tracker) {
        if (recap_tracker_fork(P.tracker, RECAP_RNG_DATA_PARALLEL, &tok) == RECAP_OK)
            CHILD_CHECK(recap_tracker_unfork(P.tracker, tok) == RECAP_OK || P.gone_tracker);
        (void)recap_snapshot_take(P.tracker, P.snap);
        (void)recap_snapshot_restore(P.tracker, P.snap);
        /* new state objects */
        (void)recap_tracker_add(P.tracker, "drive-rng-1", 97);
        (void)recap_tracker_add(P.tracker, "drive-rng-2", 98);
        (void)recap_tracker_add(P.tracker, "drive-rng-3", 99);
    }
    if (!P.gone_sub)
        (void)recap_graph_will_launch((recap_graph_exec_t)(uintptr_t)0x1a, NULL);
    if (!P.gone_region && !P.gone_engine && !P.gone_sig) /* (a region keeps its own reference) */
        (void)recap_region_record(P.region, P.sig, (recap_func_t)fn, v, 3);
    if (!P.gone_mgr && !P.gone_engine)
        (void)recap_manager_release(P.mgr, P.trigger);
    if (!P.gone_engine)
        (void)recap_plain_buffer_fire(P.trigger); /* the manager's rebuild */
    if (!P.gone_mgr && !P.gone_engine)
        (void)recap_manager_rebuild(P.mgr);
    if (!P.gone_region && !P.gone_engine)
        (void)recap_region_finish(P.region);
    if (!P.gone_mgr && !P.gone_engine) /* the next step: the last trigger is removed */
        (void)recap_manager_release(P.mgr, P.trigger);
    if (scope != NULL)
        (void)recap_exact_capture_leave(scope);
    /* The default tracker on the framework's generator, with a state of its own, then replaced:
     * its states go back to the framework while recap holds the default tracker's lock. */
    if (!P.gone_gen) {
        recap_tracker_params_t dp = {.generator = P.gen};
        recap_tracker_h dt;

        dp.flags = P.graph_safe ? RECAP_TRACKER_GRAPH_SAFE : 0;
        if (recap_default_tracker_initialize(&dp, 1, &dt) == RECAP_OK)
            (void)recap_tracker_add(dt, "default-drive-rng", 77);
    }
    {
        recap_tracker_params_t hp = {.device = RECAP_DEVICE_HOST};
        recap_tracker_h dt;

        CHILD_CHECK(recap_default_tracker_initialize(&hp, 1, &dt) == RECAP_OK);
    }
}

/* Everything the pair left, destroyed; the objects recap refused to destroy from the callback
 * are destroyed now, in an order that works. */
static void teardown(void)
{
    if (!P.gone_region)
        CHILD_CHECK(recap_region_destroy(P.region) == RECAP_OK);
    if (!P.gone_mgr)
        CHILD_CHECK(recap_manager_destroy(P.mgr) == RECAP_OK);
    if (!P.gone_sig)
        CHILD_CHECK(recap_signature_destroy(P.sig) == RECAP_OK);
    if (!P.gone_engine) {
        CHILD_CHECK(recap_plain_buffer_destroy(P.x) == RECAP_OK);
        CHILD_CHECK(recap_plain_buffer_destroy(P.y) == RECAP_OK);
        CHILD_CHECK(recap_plain_buffer_destroy(P.trigger) == RECAP_OK);
        CHILD_CHECK(recap_plain_engine_destroy(P.engine) == RECAP_OK);
    }
    if (!P.gone_sub)
        CHILD_CHECK(recap_capture_unsubscribe(P.sub) == RECAP_OK);
    CHILD_CHECK(recap_snapshot_destroy(P.snap) == RECAP_OK);
    if (!P.gone_tracker)
        CHILD_CHECK(recap_tracker_destroy(P.tracker) == RECAP_OK);
    if (!P.gone_gen)
        CHILD_CHECK(recap_generator_destroy(P.gen) == RECAP_OK);
}

static void run_pair(int cb, int action, int graph_safe, int nth)
{
    const char *a = getenv("RECAP_TEST_ALARM");

    signal(SIGALRM, SIG_DFL); /* not Check's handler, which kills the process group */
    alarm(a != NULL ? (unsigned)atoi(a) : ALARM_S);
    memset(&P, 0, sizeof(P));
    P.cb = cb;
    P.action = action;
    P.graph_safe = graph_safe;
    P.nth = nth;
    setup();
    P.armed = 1;
    drive();
    P.armed = 0;
    teardown();
    _exit(P.fired ? 0 : 10);
}

START_TEST(every_callback_against_every_call)
{
    /* "cb,action,graph_safe,nth": that pair here, to debug it */
    const char *one = getenv("RECAP_REENTRY_PAIR");
    int n = NCB * NA, *order = malloc(sizeof(int) * (size_t)n), fired[NCB] = {0};
    int ocb, oaction, ogs, onth, i, pass, failures = 0;

    if (one != NULL && sscanf(one, "%d,%d,%d,%d", &ocb, &oaction, &ogs, &onth) == 4)
        run_pair(ocb, oaction, ogs, onth);
    ck_assert_ptr_nonnull(order);
    /* Pass 0: each pair at the callback's first call; pass 1: at a later one (the second get_state
     * of a scope is the one made for the framework generators, say). */
    for (pass = 0; pass < 2; pass++) {
        for (i = 0; i < n; i++)
            order[i] = i;
        for (i = n - 1; i > 0; i--) {
            int j = (int)tu_rand_below((uint64_t)i + 1), t = order[i];

            order[i] = order[j];
            order[j] = t;
        }
        for (i = 0; i < n; i++) {
            int cb = order[i] / NA, action = order[i] % NA;
            /* 0: value form; 1, 2: graph-safe form, whose state objects are created (1) or
             * cloned (2); the state objects' operations exist in the graph-safe form only */
            int graph_safe = cb == CB_STATE_CREATE  ? 1
                             : cb == CB_STATE_CLONE ? 2
                             : cb > CB_STATE_CREATE && cb <= CB_STATE_RETAIN
                                 ? 1 + (int)tu_rand_below(2)
                                 : (int)tu_rand_below(3);
            int nth = pass == 0 ? 1 : 2 + (int)tu_rand_below(8), status;
            pid_t pid;

            pid = fork();
            ck_assert_int_ge(pid, 0);
            if (pid == 0)
                run_pair(cb, action, graph_safe, nth);
            ck_assert_int_eq(waitpid(pid, &status, 0), pid);
            if (!WIFEXITED(status) ||
                (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 10)) {
                fprintf(stderr, "%s from inside %s, call %d (%s framework; "
                        "RECAP_REENTRY_PAIR=%d,%d,%d,%d): %s\n", a_names[action], cb_names[cb],
                        nth, graph_safe ? "graph-safe" : "value-mode", cb, action, graph_safe,
                        nth, !WIFSIGNALED(status) ? "failed (its message above)"
                             : WTERMSIG(status) == SIGALRM ? "hung" : "crashed");
                failures++;
                continue;
            }
            if (pass == 0)
                fired[cb] += WEXITSTATUS(status) == 0;
        }
    }
    ck_assert_msg(failures == 0, "%d of %d pairs failed (listed above)", failures, 2 * n);
    /* Every callback was reached in most of its pairs (an action may destroy what would have
     * led to it). */
    for (i = 0; i < NCB; i++)
        ck_assert_msg(fired[i] >= NA / 2, "%s was called in %d of %d pairs", cb_names[i],
                      fired[i], NA);
    free(order);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reentry");
    TCase *tc = tcase_create("reentry");

    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, every_callback_against_every_call);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
