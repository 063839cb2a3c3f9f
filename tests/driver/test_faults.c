/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Faults recap must survive: each answered by a status with a message, nothing leaked (the suite
 * runs under AddressSanitizer's leak check in scripts/ci-sanitize), no capture or record left
 * behind, the next operation working, and the host's own driver calls answered as without recap.
 * Driver faults are injected through the CUDA test double (recap_double_fail_next: the next
 * calls of a driver function fail); against a real driver the cases that need injection return
 * early.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

extern char **environ;

/* ---------------------------------------------------------------- the driver under test */

/* The driver library recap loaded (the double in CI). */
static void *driver(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    void *lib;
    int n;

    ck_assert_ok(recap_device_count(&n));
    lib = dlopen(path != NULL && *path != '\0' ? path : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ck_assert_msg(lib != NULL, "the driver recap loaded is not loaded: %s", dlerror());
    return lib;
}

static void *driver_fn(const char *name)
{
    void *lib = driver(), *fn = dlsym(lib, name);

    dlclose(lib);
    return fn;
}

/* Arms the double to fail the next `count` calls of `fn`; 0 against a real driver. */
static int fail_next(const char *fn, int count)
{
    void (*arm)(const char *, int) = (void (*)(const char *, int))driver_fn("recap_double_fail_next");

    if (arm == NULL) {
        fprintf(stderr, "not the CUDA test double: no fault injection, case skipped\n");
        return 0;
    }
    arm(fn, count);
    return 1;
}

static CUstreamCaptureStatus capture_status(recap_stream_t s)
{
    CUresult (*is_capturing)(CUstream, CUstreamCaptureStatus *) =
        (CUresult(*)(CUstream, CUstreamCaptureStatus *))driver_fn("cuStreamIsCapturing");
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;

    ck_assert_ptr_nonnull(is_capturing);
    ck_assert_int_eq(is_capturing((CUstream)s, &status), CUDA_SUCCESS);
    return status;
}

static uint64_t live_records(void)
{
    recap_capture_stats_t cs;

    ck_assert_ok(recap_capture_stats(&cs));
    return cs.live_records;
}

/* A failed call's message names what failed. */
#define ck_assert_fails_with(expr, want, text)                                                 \
    do {                                                                                       \
        ck_assert_status((expr), (want));                                                      \
        ck_assert_msg(strstr(recap_last_error(), (text)) != NULL, "message '%s' lacks '%s'",   \
                      recap_last_error(), (text));                                             \
    } while (0)

/* ---------------------------------------------------------------- a capture rig */

/* A device generator and its twin, a stream, and a buffer for each: graph launches of fills
 * from g are compared with eager fills from twin set to g's state (eager execution is the
 * oracle). */
typedef struct {
    recap_generator_h g, twin;
    recap_stream_t s;
    void *a, *b;
    uint32_t *ha, *hb, *prev;
    size_t n;
} rig_t;

static void rig_init(rig_t *r)
{
    memset(r, 0, sizeof(*r));
    r->n = 1000 + tu_rand_below(20000);
    ck_assert_ok(recap_generator_create(0, &r->g));
    ck_assert_ok(recap_generator_create(0, &r->twin));
    ck_assert_ok(recap_generator_manual_seed(r->g, tu_rand()));
    ck_assert_ok(recap_stream_create(0, &r->s));
    ck_assert_ok(recap_device_alloc(0, r->n * 4, &r->a));
    ck_assert_ok(recap_device_alloc(0, r->n * 4, &r->b));
    r->ha = malloc(r->n * 4);
    r->hb = malloc(r->n * 4);
    r->prev = calloc(r->n, 4);
    ck_assert(r->ha != NULL && r->hb != NULL && r->prev != NULL);
}

static void rig_free(rig_t *r)
{
    ck_assert_ok(recap_stream_synchronize(r->s));
    ck_assert_ok(recap_device_free(0, r->a));
    ck_assert_ok(recap_device_free(0, r->b));
    ck_assert_ok(recap_stream_destroy(r->s));
    ck_assert_ok(recap_generator_destroy(r->g));
    ck_assert_ok(recap_generator_destroy(r->twin));
    free(r->ha);
    free(r->hb);
    free(r->prev);
}

static recap_graph_t rig_capture(rig_t *r)
{
    recap_graph_t graph = NULL;

    ck_assert_ok(recap_stream_begin_capture(r->s, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_generator_fill_u32(r->g, r->s, r->a, r->n));
    ck_assert_ok(recap_stream_end_capture(r->s, &graph));
    ck_assert_ptr_nonnull(graph);
    return graph;
}

/* Launches exec: it must draw exactly what an eager fill from g's state draws, new numbers, and
 * leave g where that eager fill leaves twin. */
static void rig_launch_matches_eager(rig_t *r, recap_graph_exec_t exec)
{
    uint8_t st[RECAP_STATE_BYTES], st_twin[RECAP_STATE_BYTES];

    ck_assert_ok(recap_generator_get_state(r->g, st));
    ck_assert_ok(recap_generator_set_state(r->twin, st));
    ck_assert_ok(recap_graph_launch(exec, r->s));
    ck_assert_ok(recap_generator_fill_u32(r->twin, r->s, r->b, r->n));
    ck_assert_ok(recap_stream_synchronize(r->s));
    ck_assert_ok(recap_memcpy_to_host(0, r->ha, r->a, r->n * 4));
    ck_assert_ok(recap_memcpy_to_host(0, r->hb, r->b, r->n * 4));
    ck_assert_msg(memcmp(r->ha, r->hb, r->n * 4) == 0, "the launch drew other numbers than eager");
    ck_assert_msg(memcmp(r->ha, r->prev, r->n * 4) != 0, "the launch repeated numbers");
    memcpy(r->prev, r->ha, r->n * 4);
    ck_assert_ok(recap_generator_get_state(r->g, st));
    ck_assert_ok(recap_generator_get_state(r->twin, st_twin));
    ck_assert_mem_eq(st, st_twin, RECAP_STATE_BYTES);
}

/* A capture, an instantiation and three launches that match eager runs, all cleaned up. */
static void rig_capture_works(rig_t *r)
{
    uint64_t records = live_records();
    recap_graph_t graph = rig_capture(r);
    recap_graph_exec_t exec = NULL;
    int k;

    ck_assert_ok(recap_graph_instantiate(graph, &exec));
    for (k = 0; k < 3; k++)
        rig_launch_matches_eager(r, exec);
    ck_assert_ok(recap_graph_exec_destroy(exec));
    ck_assert_ok(recap_graph_destroy(graph));
    ck_assert_uint_eq(live_records(), records);
}

/* ---------------------------------------------------------------- no driver */

START_TEST(without_a_driver_every_device_call_answers_no_driver)
{
    recap_tracker_params_t p = {.flags = RECAP_TRACKER_GRAPH_SAFE, .device = 0};
    recap_generator_h g = (recap_generator_h)0x1;
    recap_stream_t s = (recap_stream_t)0x1;
    recap_tracker_h t = (recap_tracker_h)0x1;
    recap_capture_stats_t cs;
    recap_hooks_t hooks;
    void *buf = (void *)0x1, *fn = NULL;
    int v = -7, needs = -7;

    setenv("RECAP_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    ck_assert_fails_with(recap_driver_version(&v), RECAP_ERR_NO_DRIVER, "/nonexistent");
    ck_assert_int_eq(v, -7); /* outputs are written only on success */
    ck_assert_fails_with(recap_device_count(&v), RECAP_ERR_NO_DRIVER, "/nonexistent");
    ck_assert_fails_with(recap_generator_create(0, &g), RECAP_ERR_NO_DRIVER, "/nonexistent");
    ck_assert_ptr_eq(g, (recap_generator_h)0x1);
    ck_assert_fails_with(recap_stream_create(0, &s), RECAP_ERR_NO_DRIVER, "/nonexistent");
    ck_assert_fails_with(recap_device_alloc(0, 64, &buf), RECAP_ERR_NO_DRIVER, "/nonexistent");
    ck_assert_ptr_eq(buf, (void *)0x1);
    ck_assert_fails_with(recap_stream_begin_capture(NULL, RECAP_CAPTURE_GLOBAL),
                         RECAP_ERR_NO_DRIVER, "/nonexistent");
    ck_assert_fails_with(recap_capture_will_begin(NULL, RECAP_CAPTURE_GLOBAL), RECAP_ERR_NO_DRIVER,
                         "/nonexistent");
    ck_assert_fails_with(recap_capture_prime(NULL), RECAP_ERR_NO_DRIVER, "/nonexistent");
    ck_assert_fails_with(recap_capture_needs_registration(&needs), RECAP_ERR_NO_DRIVER,
                         "/nonexistent");
    ck_assert_int_eq(needs, -7);
    ck_assert_fails_with(recap_tracker_create(&p, &t), RECAP_ERR_NO_DRIVER, "/nonexistent");
    ck_assert_ptr_eq(t, (recap_tracker_h)0x1);
    /* Events about graphs recap never saw are no-ops, not errors. */
    ck_assert_ok(recap_graph_will_launch((recap_graph_exec_t)0x10, NULL));
    ck_assert_ok(recap_graph_exec_destroyed((recap_graph_exec_t)0x10));
    ck_assert_ok(recap_capture_stats(&cs));
    ck_assert_uint_eq(cs.captures, 0);
    ck_assert_uint_eq(cs.live_records, 0);
    ck_assert_ok(recap_hooks_active(&hooks));
    ck_assert_int_eq(hooks, RECAP_HOOKS_NONE);
    /* A host asking recap's interposed cuGetProcAddress finds nothing, as without a driver. */
    ck_assert_int_eq(cuGetProcAddress("cuGraphLaunch", &fn, 12000, 0, NULL), CUDA_ERROR_NOT_FOUND);
    ck_assert_ptr_null(fn);
}
END_TEST

START_TEST(without_a_driver_host_generators_and_trackers_work)
{
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_generator_h g;
    recap_tracker_h t;
    recap_fork_token_t tok;
    uint32_t words[100];
    uint64_t off;

    setenv("RECAP_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, words, 100));
    ck_assert_ok(recap_generator_offset(g, &off));
    ck_assert_uint_eq(off, 4);
    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_tracker_add(t, RECAP_RNG_MODEL_PARALLEL, 1234));
    ck_assert_ok(recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok));
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_tracker_destroy(t));
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

/* ---------------------------------------------------------------- faults around captures */

START_TEST(slot_allocation_failure_fails_the_capture_start_and_the_next_one_works)
{
    recap_capture_stats_t before, after;
    recap_philox_args_t args;
    rig_t r;

    rig_init(&r);
    ck_assert_ok(recap_capture_stats(&before));
    if (!fail_next("cuMemAlloc_v2", 1)) {
        rig_free(&r);
        return;
    }
    /* Priming needs device slots: the allocation fails before the capture begins. */
    ck_assert_fails_with(recap_stream_begin_capture(r.s, RECAP_CAPTURE_GLOBAL), RECAP_ERR_NO_MEMORY,
                         "cuMemAlloc");
    ck_assert_int_eq(capture_status(r.s), CU_STREAM_CAPTURE_STATUS_NONE);
    ck_assert_ok(recap_capture_stats(&after));
    ck_assert_uint_eq(after.captures, before.captures);
    ck_assert_uint_eq(after.states_primed, before.states_primed);
    /* Draws on the stream are eager ones. */
    ck_assert_ok(recap_generator_reserve(r.twin, r.s, 4, &args));
    ck_assert_int_eq(args.captured, 0);
    rig_capture_works(&r);
    ck_assert_ok(recap_capture_stats(&after));
    ck_assert_uint_ge(after.states_primed, before.states_primed + 2);
    rig_free(&r);
}
END_TEST

START_TEST(driver_refusing_the_capture_start_leaves_no_capture)
{
    static const char *const fns[] = {"cuStreamBeginCapture_v2", "cuStreamGetCaptureInfo_v2"};
    recap_philox_args_t args;
    size_t i;
    rig_t r;

    rig_init(&r);
    for (i = 0; i < 2; i++) {
        if (!fail_next(fns[i], 1))
            break;
        /* Whether the driver refuses to begin or recap cannot follow the capture it began, the
         * call fails and the stream is not left capturing. */
        ck_assert_status(recap_stream_begin_capture(r.s, RECAP_CAPTURE_GLOBAL), RECAP_ERR_CUDA);
        ck_assert_msg(strstr(recap_last_error(), "cuStream") != NULL, "%s", recap_last_error());
        ck_assert_int_eq(capture_status(r.s), CU_STREAM_CAPTURE_STATUS_NONE);
        ck_assert_ok(recap_generator_reserve(r.twin, r.s, 4, &args));
        ck_assert_int_eq(args.captured, 0);
        rig_capture_works(&r);
    }
    rig_free(&r);
}
END_TEST

START_TEST(advance_node_failure_ends_the_capture_and_keeps_no_record)
{
    uint64_t records;
    uint8_t st0[RECAP_STATE_BYTES], st1[RECAP_STATE_BYTES];
    recap_graph_t graph = (recap_graph_t)0x1;
    rig_t r;

    rig_init(&r);
    records = live_records();
    ck_assert_ok(recap_generator_get_state(r.g, st0));
    ck_assert_ok(recap_stream_begin_capture(r.s, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_generator_fill_u32(r.g, r.s, r.a, r.n));
    if (!fail_next("cuLaunchKernel", 1)) {
        ck_assert_ok(recap_stream_end_capture(r.s, &graph));
        ck_assert_ok(recap_graph_destroy(graph));
        rig_free(&r);
        return;
    }
    /* Without the advance node replays would repeat numbers: the graph is not handed out. */
    ck_assert_fails_with(recap_stream_end_capture(r.s, &graph), RECAP_ERR_CUDA, "advance");
    ck_assert_ptr_eq(graph, (recap_graph_t)0x1);
    ck_assert_int_eq(capture_status(r.s), CU_STREAM_CAPTURE_STATUS_NONE);
    ck_assert_uint_eq(live_records(), records);
    ck_assert_ok(recap_generator_get_state(r.g, st1));
    ck_assert_mem_eq(st0, st1, RECAP_STATE_BYTES); /* the failed capture drew nothing */
    rig_capture_works(&r);
    rig_free(&r);
}
END_TEST

/* Another thread, in the global capture interaction mode, allocates device memory: a call that
 * invalidates global captures (the host's allocator during someone else's capture). */
typedef struct {
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*release)(CUdeviceptr);
    CUresult rc;
} unsafe_call_t;

static void *unsafe_alloc(void *arg)
{
    unsafe_call_t *u = arg;
    CUcontext ctx = NULL;
    CUdeviceptr p = 0;

    if (u->retain(&ctx, 0) != CUDA_SUCCESS || u->set_current(ctx) != CUDA_SUCCESS) {
        u->rc = CUDA_ERROR_UNKNOWN;
        return NULL;
    }
    u->rc = u->alloc(&p, 256);
    if (u->rc == CUDA_SUCCESS)
        u->release(p);
    return NULL;
}

START_TEST(capture_the_host_invalidates_ends_with_an_error_and_no_record)
{
    uint8_t st0[RECAP_STATE_BYTES], st1[RECAP_STATE_BYTES];
    recap_graph_t graph = (recap_graph_t)0x1;
    unsafe_call_t u;
    recap_capture_stats_t cs0, cs1;
    pthread_t th;
    rig_t r;

    rig_init(&r);
    u.retain = (CUresult(*)(CUcontext *, CUdevice))driver_fn("cuDevicePrimaryCtxRetain");
    u.set_current = (CUresult(*)(CUcontext))driver_fn("cuCtxSetCurrent");
    u.alloc = (CUresult(*)(CUdeviceptr *, size_t))driver_fn("cuMemAlloc_v2");
    u.release = (CUresult(*)(CUdeviceptr))driver_fn("cuMemFree_v2");
    u.rc = CUDA_SUCCESS;
    ck_assert(u.retain && u.set_current && u.alloc && u.release);
    ck_assert_ok(recap_capture_stats(&cs0));
    ck_assert_ok(recap_generator_get_state(r.g, st0));
    ck_assert_ok(recap_stream_begin_capture(r.s, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_generator_fill_u32(r.g, r.s, r.a, r.n));
    ck_assert_int_eq(pthread_create(&th, NULL, unsafe_alloc, &u), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    /* The host's call is answered by the driver as without recap. */
    ck_assert_int_eq(u.rc, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(capture_status(r.s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    ck_assert_fails_with(recap_stream_end_capture(r.s, &graph), RECAP_ERR_CUDA,
                         "cuStreamEndCapture");
    ck_assert_ptr_eq(graph, (recap_graph_t)0x1);
    ck_assert_int_eq(capture_status(r.s), CU_STREAM_CAPTURE_STATUS_NONE);
    ck_assert_ok(recap_capture_stats(&cs1));
    ck_assert_uint_eq(cs1.live_records, cs0.live_records);
    ck_assert_uint_eq(cs1.graphs_with_rng, cs0.graphs_with_rng);
    ck_assert_ok(recap_generator_get_state(r.g, st1));
    ck_assert_mem_eq(st0, st1, RECAP_STATE_BYTES);
    rig_capture_works(&r);
    rig_free(&r);
}
END_TEST

START_TEST(graph_destroyed_while_its_execs_live_keeps_them_drawing_correctly)
{
    int (*live_graphs)(void) = (int (*)(void))driver_fn("recap_double_live_graphs");
    int (*live_execs)(void) = (int (*)(void))driver_fn("recap_double_live_execs");
    uint64_t records = live_records();
    recap_graph_t graph, clone;
    recap_graph_exec_t e1, e2;
    int graphs0 = live_graphs ? live_graphs() : 0, execs0 = live_execs ? live_execs() : 0, k;
    rig_t r;

    rig_init(&r);
    graph = rig_capture(&r);
    ck_assert_ok(recap_graph_instantiate(graph, &e1));
    ck_assert_ok(recap_graph_clone(graph, &clone));
    ck_assert_uint_eq(live_records(), records + 3);
    /* recap holds the graph's record for its execs and its clone: they outlive the graph. */
    ck_assert_ok(recap_graph_destroy(graph));
    ck_assert_uint_eq(live_records(), records + 2);
    ck_assert_ok(recap_graph_instantiate(clone, &e2));
    ck_assert_ok(recap_graph_destroy(clone));
    for (k = 0; k < 4; k++)
        rig_launch_matches_eager(&r, k % 2 ? e1 : e2);
    ck_assert_ok(recap_graph_exec_destroy(e1));
    rig_launch_matches_eager(&r, e2);
    ck_assert_ok(recap_graph_exec_destroy(e2));
    ck_assert_uint_eq(live_records(), records);
    if (live_graphs != NULL) {
        ck_assert_int_eq(live_graphs(), graphs0);
        ck_assert_int_eq(live_execs(), execs0);
    }
    rig_free(&r);
}
END_TEST

START_TEST(failed_launch_reports_and_the_next_launch_draws_the_current_state)
{
    recap_graph_t graph;
    recap_graph_exec_t exec;
    rig_t r;

    rig_init(&r);
    graph = rig_capture(&r);
    ck_assert_ok(recap_graph_instantiate(graph, &exec));
    rig_launch_matches_eager(&r, exec);
    if (fail_next("cuGraphLaunch", 1)) {
        ck_assert_fails_with(recap_graph_launch(exec, r.s), RECAP_ERR_CUDA, "cuGraphLaunch");
        /* The slots' contents are unknown after a failed launch: the next one rewrites them and
         * draws what an eager run from the generator's state draws. */
        rig_launch_matches_eager(&r, exec);
        rig_launch_matches_eager(&r, exec);
    }
    ck_assert_ok(recap_graph_exec_destroy(exec));
    ck_assert_ok(recap_graph_destroy(graph));
    rig_free(&r);
}
END_TEST

/* The driver refuses to destroy an executable or a graph inside a global capture of the calling
 * thread (potentially unsafe calls): both stay alive, so recap must keep their records and the
 * executable's launches must go on drawing fresh numbers. */
START_TEST(refused_destroys_keep_the_records_of_what_stays_alive)
{
    recap_graph_t graph, clone, scratch;
    recap_graph_exec_t exec;
    uint64_t records;
    rig_t r;

    rig_init(&r);
    graph = rig_capture(&r);
    ck_assert_ok(recap_graph_instantiate(graph, &exec));
    ck_assert_ok(recap_graph_clone(graph, &clone));
    records = live_records();
    rig_launch_matches_eager(&r, exec);
    ck_assert_ok(recap_stream_begin_capture(r.s, RECAP_CAPTURE_GLOBAL));
    ck_assert_fails_with(recap_graph_exec_destroy(exec), RECAP_ERR_CUDA, "cuGraphExecDestroy");
    ck_assert_status(recap_stream_end_capture(r.s, &scratch), RECAP_ERR_CUDA); /* invalidated */
    ck_assert_uint_eq(live_records(), records);
    if (fail_next("cuGraphDestroy", 1)) {
        ck_assert_fails_with(recap_graph_destroy(graph), RECAP_ERR_CUDA, "cuGraphDestroy");
        ck_assert_uint_eq(live_records(), records);
    }
    rig_launch_matches_eager(&r, exec);
    rig_launch_matches_eager(&r, exec);
    ck_assert_ok(recap_graph_exec_destroy(exec));
    ck_assert_ok(recap_graph_instantiate(clone, &exec));
    rig_launch_matches_eager(&r, exec);
    ck_assert_ok(recap_graph_exec_destroy(exec));
    ck_assert_ok(recap_graph_destroy(clone));
    ck_assert_ok(recap_graph_destroy(graph));
    ck_assert_uint_eq(live_records(), records - 3);
    rig_free(&r);
}
END_TEST

/* The same through recap's interposed driver entry points, as a preloaded recap sees a host's
 * destroys: this program run again with RECAP_HOOKS=preload (see main). */
START_TEST(hooked_refused_destroy_keeps_the_record)
{
    typedef CUresult (*destroy_fn)(CUgraphExec);
    destroy_fn destroy = (destroy_fn)driver_fn("cuGraphExecDestroy");
    recap_graph_t graph, scratch;
    recap_graph_exec_t exec;
    recap_hooks_t hooks;
    uint64_t records;
    rig_t r;

    ck_assert_ok(recap_hooks_active(&hooks));
    ck_assert_int_eq(hooks, RECAP_HOOKS_PRELOAD);
    /* The driver's entry point as the host finds it is recap's wrapper. */
    ck_assert_ptr_eq((void *)destroy, dlsym(RTLD_DEFAULT, "cuGraphExecDestroy"));
    rig_init(&r);
    graph = rig_capture(&r);
    ck_assert_ok(recap_graph_instantiate(graph, &exec));
    records = live_records();
    ck_assert_ok(recap_stream_begin_capture(r.s, RECAP_CAPTURE_GLOBAL));
    ck_assert_int_eq(destroy((CUgraphExec)exec), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_status(recap_stream_end_capture(r.s, &scratch), RECAP_ERR_CUDA);
    ck_assert_uint_eq(live_records(), records);
    rig_launch_matches_eager(&r, exec);
    ck_assert_int_eq(destroy((CUgraphExec)exec), CUDA_SUCCESS);
    ck_assert_uint_eq(live_records(), records - 1);
    ck_assert_ok(recap_graph_destroy(graph));
    rig_free(&r);
}
END_TEST

START_TEST(refused_destroy_through_the_preload_hooks_keeps_the_record)
{
    static char hooks_env[] = "RECAP_HOOKS=preload";
    char *argv[] = {(char *)"test_faults", (char *)"--hooked", NULL}, *envp[256];
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    int n = 0, i, status = -1;
    pid_t pid;

    ck_assert_int_gt(len, 0);
    self[len] = '\0';
    for (i = 0; environ[i] != NULL && n < 250; i++)
        if (strncmp(environ[i], "RECAP_HOOKS=", 12) != 0)
            envp[n++] = environ[i];
    envp[n++] = hooks_env;
    envp[n] = NULL;
    ck_assert_int_eq(posix_spawn(&pid, self, NULL, NULL, argv, envp), 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the hooked run failed (%d)",
                  status);
}
END_TEST

START_TEST(failed_instantiation_keeps_no_exec_record)
{
    recap_graph_exec_t exec = (recap_graph_exec_t)0x1;
    recap_graph_t graph;
    uint64_t records;
    rig_t r;

    rig_init(&r);
    graph = rig_capture(&r);
    records = live_records();
    if (fail_next("cuGraphInstantiateWithFlags", 1)) {
        ck_assert_fails_with(recap_graph_instantiate(graph, &exec), RECAP_ERR_CUDA,
                             "cuGraphInstantiate");
        ck_assert_ptr_eq(exec, (recap_graph_exec_t)0x1);
        ck_assert_uint_eq(live_records(), records);
    }
    ck_assert_ok(recap_graph_instantiate(graph, &exec));
    ck_assert_uint_eq(live_records(), records + 1);
    rig_launch_matches_eager(&r, exec);
    ck_assert_ok(recap_graph_exec_destroy(exec));
    ck_assert_ok(recap_graph_destroy(graph));
    rig_free(&r);
}
END_TEST

START_TEST(device_setup_failures_are_retried)
{
    static const char *const fns[] = {"cuDevicePrimaryCtxRetain", "cuModuleLoadData"};
    uint32_t *buf = NULL;
    recap_generator_h g;
    size_t i;
    int n;

    ck_assert_ok(recap_device_count(&n));
    ck_assert_ok(recap_generator_create(0, &g));
    for (i = 0; i < 2; i++)
        if (!fail_next(fns[i], 1))
            break;
    if (i == 2) {
        /* The first device use fails on each fault in turn; then the device is set up. */
        ck_assert_fails_with(recap_device_alloc(0, 4096, (void **)&buf), RECAP_ERR_CUDA,
                             "cuDevicePrimaryCtxRetain");
        ck_assert_fails_with(recap_device_alloc(0, 4096, (void **)&buf), RECAP_ERR_CUDA,
                             "cuModuleLoadData");
        ck_assert_ptr_null(buf);
    }
    ck_assert_ok(recap_device_alloc(0, 4096, (void **)&buf));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, buf, 1024));
    ck_assert_ok(recap_stream_synchronize(NULL));
    ck_assert_ok(recap_device_free(0, buf));
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

/* A device setup that fails partway gives back what it took: the primary context retain and,
 * once the kernels' module is loaded, the module (each retry would otherwise leak another). */
START_TEST(failed_device_setup_releases_the_module_and_the_context)
{
    static const char *const fns[][2] = {{"cuCtxPushCurrent_v2", "cuCtxPushCurrent"},
                                         {"cuModuleLoadData", "cuModuleLoadData"},
                                         {"cuModuleGetFunction", "cuModuleGetFunction"}};
    int (*live_modules)(void) = (int (*)(void))driver_fn("recap_double_live_modules");
    int (*retains)(int) = (int (*)(int))driver_fn("recap_double_primary_retains");
    void *buf = NULL;
    size_t i;

    if (live_modules == NULL || retains == NULL)
        return; /* a real driver: no fault injection, no inspection */
    ck_assert_int_eq(live_modules(), 0);
    ck_assert_int_eq(retains(0), 0);
    for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        ck_assert(fail_next(fns[i][0], 1));
        ck_assert_fails_with(recap_device_alloc(0, 4096, &buf), RECAP_ERR_CUDA, fns[i][1]);
        ck_assert_ptr_null(buf);
        ck_assert_msg(live_modules() == 0, "after %s failed: %d modules loaded", fns[i][0],
                      live_modules());
        ck_assert_msg(retains(0) == 0, "after %s failed: %d retains of the primary context",
                      fns[i][0], retains(0));
    }
    ck_assert_ok(recap_device_alloc(0, 4096, &buf));
    ck_assert_int_eq(live_modules(), 1);
    ck_assert_int_eq(retains(0), 1);
    ck_assert_ok(recap_device_free(0, buf));
}
END_TEST

START_TEST(device_allocation_failure_is_no_memory)
{
    void *buf = (void *)0x1;

    if (!fail_next("cuMemAlloc_v2", 1))
        return;
    ck_assert_fails_with(recap_device_alloc(0, 4096, &buf), RECAP_ERR_NO_MEMORY, "cuMemAlloc");
    ck_assert_ptr_eq(buf, (void *)0x1);
    ck_assert_ok(recap_device_alloc(0, 4096, &buf));
    ck_assert_ok(recap_device_free(0, buf));
}
END_TEST

/* ---------------------------------------------------------------- interception */

typedef int (*cupti_subscribe_fn)(void **subscriber, void *callback, void *user);
typedef int (*cupti_unsubscribe_fn)(void *subscriber);

static void cupti_callback(void *user, int domain, int id, const void *data)
{
    (void)user;
    (void)domain;
    (void)id;
    (void)data;
}

/* CUPTI has one subscriber: when this test can take it (a GPU machine), recap must answer BUSY;
 * when CUPTI cannot work here (no GPU: CI), UNSUPPORTED. Either way recap stays in explicit mode
 * and captures the host reports still work. */
START_TEST(cupti_taken_or_unavailable_leaves_explicit_mode_working)
{
    static const char *const names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    void *lib = NULL, *mine = NULL;
    recap_status_t st;
    recap_hooks_t hooks;
    size_t i;
    int is_free = -1;
    rig_t r;

    rig_init(&r);
    for (i = 0; i < 3 && lib == NULL; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL) {
        cupti_subscribe_fn subscribe = (cupti_subscribe_fn)dlsym(lib, "cuptiSubscribe");

        if (subscribe != NULL && subscribe(&mine, (void *)cupti_callback, NULL) != 0)
            mine = NULL;
    }
    st = recap_hooks_install_cupti();
    if (mine != NULL) {
        ck_assert_fails_with(st, RECAP_ERR_BUSY, "subscriber");
        ck_assert_ok(recap_cupti_is_free(&is_free));
        ck_assert_int_eq(is_free, 0);
        ((cupti_unsubscribe_fn)dlsym(lib, "cuptiUnsubscribe"))(mine);
    } else {
        ck_assert_status(st, RECAP_ERR_UNSUPPORTED);
        ck_assert_str_ne(recap_last_error(), "");
    }
    ck_assert_ok(recap_hooks_active(&hooks));
    ck_assert_int_eq(hooks, RECAP_HOOKS_NONE);
    ck_assert_ok(recap_hooks_uninstall_cupti());
    rig_capture_works(&r);
    rig_free(&r);
    if (lib != NULL)
        dlclose(lib);
}
END_TEST

/* A host resolving the driver through recap's interposed cuGetProcAddress gets the driver's own
 * answers (status, symbol status, pointer) for entry points the driver lacks or lacks at the
 * version asked for: a preloaded recap swaps in its wrappers only for entry points the driver
 * found. The double answers CUDA_ERROR_NOT_FOUND; the 580 driver answers CUDA_SUCCESS with a
 * NULL pointer and the symbol status saying why. */
START_TEST(driver_lookups_that_find_nothing_are_answered_as_the_driver_answers)
{
    typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
    static const struct {
        const char *name;
        int version;
    } cases[] = {{"cuNoSuchEntryPoint", 12000}, {"cuStreamBeginCapture", 9000}};
    gpa_fn own = (gpa_fn)driver_fn("cuGetProcAddress_v2");
    CUdriverProcAddressQueryResult q, q_own;
    void *fn, *fn_own;
    size_t i;

    ck_assert_ptr_nonnull(own);
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        CUresult rc, rc_own;

        fn = fn_own = (void *)0x1;
        q = q_own = CU_GET_PROC_ADDRESS_SUCCESS;
        rc = cuGetProcAddress(cases[i].name, &fn, cases[i].version, 0, &q);
        rc_own = own(cases[i].name, &fn_own, cases[i].version, 0, &q_own);
        ck_assert_int_eq(rc, rc_own);
        ck_assert_int_eq(q, q_own);
        ck_assert_int_ne(q, CU_GET_PROC_ADDRESS_SUCCESS);
        ck_assert_ptr_eq(fn, fn_own);
    }
    /* Not preloaded (RECAP_HOOKS unset): an entry point that exists is the driver's own. */
    ck_assert_int_eq(cuGetProcAddress("cuGraphLaunch", &fn, 12000, 0, &q), CUDA_SUCCESS);
    ck_assert_int_eq(q, CU_GET_PROC_ADDRESS_SUCCESS);
    ck_assert_ptr_eq(fn, driver_fn("cuGraphLaunch"));
}
END_TEST

/* recap interposes dlsym; everything but the driver names it answers must resolve as glibc
 * would for the caller: RTLD_NEXT from this program finds librecap's own symbols (they come
 * after the program), which a lookup made relative to librecap would not. */
START_TEST(dlsym_of_other_names_resolves_relative_to_the_caller)
{
    void *next = dlsym(RTLD_NEXT, "recap_abi_version");
    Dl_info info;

    ck_assert_ptr_nonnull(next);
    ck_assert_int_ne(dladdr(next, &info), 0);
    ck_assert_msg(strstr(info.dli_fname, "librecap") != NULL, "%s", info.dli_fname);
    ck_assert_ptr_eq(dlsym(RTLD_DEFAULT, "recap_abi_version"), next);
    ck_assert_ptr_nonnull(dlsym(RTLD_NEXT, "malloc"));
    ck_assert_ptr_null(dlsym(RTLD_NEXT, "recap_no_such_symbol"));
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");

    tcase_set_timeout(tc, 60);
    if (argc == 2 && strcmp(argv[1], "--hooked") == 0) {
        /* Run by refused_destroy_through_the_preload_hooks_keeps_the_record. */
        tcase_add_test(tc, hooked_refused_destroy_keeps_the_record);
        suite_add_tcase(s, tc);
        return tu_run(s);
    }
    tcase_add_test(tc, without_a_driver_every_device_call_answers_no_driver);
    tcase_add_test(tc, without_a_driver_host_generators_and_trackers_work);
    tcase_add_test(tc, slot_allocation_failure_fails_the_capture_start_and_the_next_one_works);
    tcase_add_test(tc, driver_refusing_the_capture_start_leaves_no_capture);
    tcase_add_test(tc, advance_node_failure_ends_the_capture_and_keeps_no_record);
    tcase_add_test(tc, capture_the_host_invalidates_ends_with_an_error_and_no_record);
    tcase_add_test(tc, graph_destroyed_while_its_execs_live_keeps_them_drawing_correctly);
    tcase_add_test(tc, failed_launch_reports_and_the_next_launch_draws_the_current_state);
    tcase_add_test(tc, refused_destroys_keep_the_records_of_what_stays_alive);
    tcase_add_test(tc, refused_destroy_through_the_preload_hooks_keeps_the_record);
    tcase_add_test(tc, failed_instantiation_keeps_no_exec_record);
    tcase_add_test(tc, device_setup_failures_are_retried);
    tcase_add_test(tc, failed_device_setup_releases_the_module_and_the_context);
    tcase_add_test(tc, device_allocation_failure_is_no_memory);
    tcase_add_test(tc, cupti_taken_or_unavailable_leaves_explicit_mode_working);
    tcase_add_test(tc, driver_lookups_that_find_nothing_are_answered_as_the_driver_answers);
    tcase_add_test(tc, dlsym_of_other_names_resolves_relative_to_the_caller);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
