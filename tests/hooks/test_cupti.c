/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUPTI front end (src/hooks/cupti.c) without a GPU: recap subscribes to a fake libcupti
 * (tests/double/fake_cupti.c, found through RECAP_CUPTI_PATH) and each test plays what the real CUPTI
 * reports around a host's driver call on the CUDA test double: the API entry callback, the
 * resource domain's callbacks, the real call, the API exit callback with the call's result.
 * Needs the double (fault injection); against a real driver the suite is skipped.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

typedef void (*emit_fn)(CUpti_CallbackDomain, CUpti_CallbackId, const void *);

static emit_fn emit;
static CUresult (*exec_destroy)(CUgraphExec);
static CUresult (*graph_destroy)(CUgraph);
static void (*fail_next)(const char *, int);

static int on_double(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    void *lib;
    int yes;

    if (path == NULL || *path == '\0')
        return 0;
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    yes = lib != NULL && dlsym(lib, "recap_double_fail_next") != NULL;
    if (lib != NULL)
        dlclose(lib);
    return yes;
}

/* Runs in each test's process (Check forks): recap subscribes to the fake CUPTI. */
static void setup(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    recap_hooks_t hooks;
    void *cupti, *drv;
    int n;

    setenv("RECAP_CUPTI_PATH", RECAP_FAKE_CUPTI, 1);
    ck_assert_ok(recap_hooks_install_cupti());
    ck_assert_ok(recap_hooks_active(&hooks));
    ck_assert_int_eq(hooks, RECAP_HOOKS_CUPTI);
    cupti = dlopen(RECAP_FAKE_CUPTI, RTLD_NOW | RTLD_NOLOAD);
    ck_assert_msg(cupti != NULL, "recap did not load the fake CUPTI: %s", dlerror());
    emit = (emit_fn)dlsym(cupti, "fake_cupti_emit");
    ck_assert_ok(recap_device_count(&n));
    drv = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    ck_assert_ptr_nonnull(drv);
    exec_destroy = (CUresult(*)(CUgraphExec))dlsym(drv, "cuGraphExecDestroy");
    graph_destroy = (CUresult(*)(CUgraph))dlsym(drv, "cuGraphDestroy");
    fail_next = (void (*)(const char *, int))dlsym(drv, "recap_double_fail_next");
    ck_assert(emit != NULL && exec_destroy != NULL && graph_destroy != NULL && fail_next != NULL);
}

static void teardown(void)
{
    recap_hooks_uninstall_cupti();
}

static uint64_t live_records(void)
{
    recap_capture_stats_t cs;

    ck_assert_ok(recap_capture_stats(&cs));
    return cs.live_records;
}

/* How CUPTI reports the destroy starting, played between the API entry and the real call. */
typedef enum {
    NO_RESOURCE_CALLBACK, /* a destroy the driver refuses before it starts */
    RESOURCE_CALLBACK,    /* CUPTI does not say it cannot report a destroy that is then refused */
} resource_cb_t;

/* A host's cuGraphExecDestroy (exec = 1) or cuGraphDestroy as the CUPTI subscriber sees it. */
static CUresult hosted_destroy(void *handle, int exec, resource_cb_t resource)
{
    CUpti_CallbackId api = exec ? CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy
                                : CUPTI_DRIVER_TRACE_CBID_cuGraphDestroy;
    cuGraphExecDestroy_params pe = {.hGraphExec = (CUgraphExec)handle};
    cuGraphDestroy_params pg = {.hGraph = (CUgraph)handle};
    CUpti_GraphData gd = {0};
    CUpti_ResourceData rd = {0};
    CUpti_CallbackData cd = {0};
    uint64_t correlation = 0;
    CUresult rc;

    cd.callbackSite = CUPTI_API_ENTER;
    cd.functionName = exec ? "cuGraphExecDestroy" : "cuGraphDestroy";
    cd.functionParams = exec ? (const void *)&pe : (const void *)&pg;
    cd.correlationData = &correlation;
    emit(CUPTI_CB_DOMAIN_DRIVER_API, api, &cd);
    if (resource == RESOURCE_CALLBACK) {
        if (exec)
            gd.graphExec = (CUgraphExec)handle;
        else
            gd.graph = (CUgraph)handle;
        rd.resourceDescriptor = &gd;
        emit(CUPTI_CB_DOMAIN_RESOURCE,
             exec ? CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING
                  : CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING,
             &rd);
    }
    rc = exec ? exec_destroy((CUgraphExec)handle) : graph_destroy((CUgraph)handle);
    cd.callbackSite = CUPTI_API_EXIT;
    cd.functionReturnValue = &rc;
    emit(CUPTI_CB_DOMAIN_DRIVER_API, api, &cd);
    return rc;
}

typedef struct {
    recap_generator_h g;
    recap_stream_t s;
    void *buf;
    recap_graph_t graph;
    recap_graph_exec_t exec;
} rig_t;

/* A graph that fills from a device generator, and an executable of it. */
static void rig_init(rig_t *r)
{
    ck_assert_ok(recap_generator_create(0, &r->g));
    ck_assert_ok(recap_generator_manual_seed(r->g, 1234));
    ck_assert_ok(recap_stream_create(0, &r->s));
    ck_assert_ok(recap_device_alloc(0, 4096, &r->buf));
    ck_assert_ok(recap_stream_begin_capture(r->s, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_generator_fill_u32(r->g, r->s, r->buf, 1024));
    ck_assert_ok(recap_stream_end_capture(r->s, &r->graph));
    ck_assert_ok(recap_graph_instantiate(r->graph, &r->exec));
}

static void rig_free(rig_t *r)
{
    ck_assert_ok(recap_stream_synchronize(r->s));
    ck_assert_ok(recap_device_free(0, r->buf));
    ck_assert_ok(recap_stream_destroy(r->s));
    ck_assert_ok(recap_generator_destroy(r->g));
}

static uint64_t offset_now(rig_t *r)
{
    uint8_t st[RECAP_STATE_BYTES];
    uint64_t offset;

    ck_assert_ok(recap_generator_get_state(r->g, st));
    memcpy(&offset, st + 8, 8); /* seed then offset, little-endian */
    return offset;
}

/* How far launching exec advances the generator: a launch recap holds a record for advances it
 * by the graph's increment, a launch it knows nothing of by 0. */
static uint64_t launch_advance(rig_t *r, recap_graph_exec_t exec)
{
    uint64_t before = offset_now(r);

    ck_assert_ok(recap_graph_launch(exec, r->s));
    ck_assert_ok(recap_stream_synchronize(r->s));
    return offset_now(r) - before;
}

/* cuGraphExecDestroy inside a global capture of the calling thread is refused: the executable
 * lives on, so its record must stay and its launches must keep advancing the generator, however
 * CUPTI reports the destroy. A destroy that succeeds drops the record. */
START_TEST(refused_exec_destroy_keeps_the_record)
{
    resource_cb_t resource = (resource_cb_t)_i;
    uint64_t records, inc;
    recap_graph_t scratch;
    rig_t r;

    rig_init(&r);
    records = live_records();
    inc = launch_advance(&r, r.exec);
    ck_assert_uint_gt(inc, 0);
    ck_assert_ok(recap_stream_begin_capture(r.s, RECAP_CAPTURE_GLOBAL));
    ck_assert_int_eq(hosted_destroy(r.exec, 1, resource), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_status(recap_stream_end_capture(r.s, &scratch), RECAP_ERR_CUDA); /* invalidated */
    ck_assert_uint_eq(live_records(), records);
    ck_assert_uint_eq(launch_advance(&r, r.exec), inc);
    ck_assert_uint_eq(launch_advance(&r, r.exec), inc);
    ck_assert_int_eq(hosted_destroy(r.exec, 1, RESOURCE_CALLBACK), CUDA_SUCCESS);
    ck_assert_uint_eq(live_records(), records - 1);
    ck_assert_int_eq(hosted_destroy(r.graph, 0, RESOURCE_CALLBACK), CUDA_SUCCESS);
    ck_assert_uint_eq(live_records(), records - 2);
    rig_free(&r);
}
END_TEST

/* A graph the driver refuses to destroy keeps its record: an executable instantiated from it
 * afterwards still advances the generator. */
START_TEST(refused_graph_destroy_keeps_the_record)
{
    resource_cb_t resource = (resource_cb_t)_i;
    recap_graph_exec_t again;
    uint64_t records, inc;
    rig_t r;

    rig_init(&r);
    records = live_records();
    inc = launch_advance(&r, r.exec);
    ck_assert_uint_gt(inc, 0);
    fail_next("cuGraphDestroy", 1);
    ck_assert_int_eq(hosted_destroy(r.graph, 0, resource), CUDA_ERROR_UNKNOWN);
    ck_assert_uint_eq(live_records(), records);
    ck_assert_ok(recap_graph_instantiate(r.graph, &again));
    ck_assert_uint_eq(live_records(), records + 1);
    ck_assert_uint_eq(launch_advance(&r, again), inc);
    ck_assert_int_eq(hosted_destroy(again, 1, RESOURCE_CALLBACK), CUDA_SUCCESS);
    ck_assert_int_eq(hosted_destroy(r.exec, 1, RESOURCE_CALLBACK), CUDA_SUCCESS);
    ck_assert_int_eq(hosted_destroy(r.graph, 0, RESOURCE_CALLBACK), CUDA_SUCCESS);
    ck_assert_uint_eq(live_records(), records - 2);
    rig_free(&r);
}
END_TEST

/* A destroy reported only by the resource domain (a context torn down with its graphs) still
 * drops the record. */
START_TEST(destroy_seen_only_as_a_resource_drops_the_record)
{
    CUpti_GraphData gd = {0};
    CUpti_ResourceData rd = {0};
    uint64_t records;
    rig_t r;

    rig_init(&r);
    records = live_records();
    gd.graphExec = (CUgraphExec)r.exec;
    rd.resourceDescriptor = &gd;
    emit(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, &rd);
    ck_assert_int_eq(exec_destroy((CUgraphExec)r.exec), CUDA_SUCCESS);
    ck_assert_uint_eq(live_records(), records - 1);
    ck_assert_ok(recap_graph_destroy(r.graph));
    ck_assert_uint_eq(live_records(), records - 2);
    rig_free(&r);
}
END_TEST

/* Subscribers hear the CUPTI front end's events once each, with CUPTI as their source: a host's
 * begin capture (API entry), and an executable destroy reported both by the API callbacks and
 * by the resource domain. */
typedef struct {
    recap_capture_event_info_t ev[8];
    int n;
} heard_t;

static recap_status_t hear(const recap_capture_event_info_t *info, void *arg)
{
    heard_t *h = arg;

    if (h->n < 8)
        h->ev[h->n++] = *info;
    return RECAP_OK;
}

START_TEST(subscribers_hear_cupti_events_once)
{
    cuStreamBeginCapture_v2_params pb = {0};
    CUpti_CallbackData cd = {0};
    recap_subscription_h sub;
    heard_t h = {0};
    rig_t r;

    rig_init(&r);
    ck_assert_ok(recap_capture_subscribe(RECAP_EVENT_MASK_ALL, hear, &h, &sub));
    pb.hStream = (CUstream)r.s;
    pb.mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    cd.callbackSite = CUPTI_API_ENTER;
    cd.functionName = "cuStreamBeginCapture_v2";
    cd.functionParams = &pb;
    emit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &cd);
    ck_assert_int_eq(hosted_destroy(r.exec, 1, RESOURCE_CALLBACK), CUDA_SUCCESS);
    ck_assert_ok(recap_capture_unsubscribe(sub));
    ck_assert_int_eq(h.n, 2);
    ck_assert_int_eq(h.ev[0].event, RECAP_EVENT_CAPTURE_WILL_BEGIN);
    ck_assert_ptr_eq(h.ev[0].stream, r.s);
    ck_assert_int_eq(h.ev[0].mode, RECAP_CAPTURE_RELAXED);
    ck_assert_int_eq(h.ev[1].event, RECAP_EVENT_GRAPH_EXEC_DESTROYED);
    ck_assert_ptr_eq(h.ev[1].exec, r.exec);
    ck_assert_int_eq(h.ev[0].source, RECAP_HOOKS_CUPTI);
    ck_assert_int_eq(h.ev[1].source, RECAP_HOOKS_CUPTI);
    ck_assert_ok(recap_graph_destroy(r.graph));
    rig_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- who holds CUPTI */

typedef const char *(*name_fn)(void);

/* Loads the fake CUPTI at `path` (the instance recap will load through RECAP_CUPTI_PATH). */
static void *fake(const char *path)
{
    void *lib;

    setenv("RECAP_CUPTI_PATH", path, 1);
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "%s", dlerror());
    return lib;
}

static void hold(void *lib, const char *profiler)
{
    ((void (*)(const char *))dlsym(lib, "fake_cupti_hold"))(profiler);
}

static const char *holder_now(void)
{
    static char who[64];

    ck_assert_ok(recap_cupti_holder(who, sizeof(who)));
    return who;
}

START_TEST(subscribes_under_its_name_where_cupti_has_v2)
{
    void *lib = fake(RECAP_FAKE_CUPTI);
    name_fn name = (name_fn)dlsym(lib, "fake_cupti_subscriber_name");

    if (dlsym(lib, "cuptiSubscribe_v2") == NULL)
        return; /* built against a CUPTI header without it */
    ck_assert_ok(recap_hooks_install_cupti());
    ck_assert_str_eq(name(), "CUPTI for recap");
    ck_assert_ok(recap_hooks_uninstall_cupti());
    ck_assert_str_eq(name(), "");
}
END_TEST

/* A profiler holds CUPTI: recap is refused, says who holds it, and stays in explicit mode. */
START_TEST(busy_names_the_holder)
{
    void *lib = fake(RECAP_FAKE_CUPTI);
    recap_hooks_t hooks;
    int is_free = 1;

    if (dlsym(lib, "cuptiSubscribe_v2") == NULL)
        return;
    hold(lib, "Nsight Systems");
    ck_assert_status(recap_hooks_install_cupti(), RECAP_ERR_BUSY);
    ck_assert_msg(strstr(recap_last_error(),
                         "CUPTI is held by another subscriber, \"CUPTI for Nsight Systems\"; "
                         "recap stays in explicit mode") != NULL,
                  "%s", recap_last_error());
    ck_assert_str_eq(holder_now(), "CUPTI for Nsight Systems");
    ck_assert_ok(recap_hooks_active(&hooks));
    ck_assert_int_eq(hooks, RECAP_HOOKS_NONE);
    ck_assert_ok(recap_cupti_is_free(&is_free));
    ck_assert_int_eq(is_free, 0);
    /* the profiler lets go: recap gets CUPTI and the holder is forgotten */
    ((void (*)(void))dlsym(lib, "fake_cupti_release"))();
    ck_assert_ok(recap_hooks_install_cupti());
    ck_assert_str_eq(holder_now(), "");
    ck_assert_ok(recap_hooks_uninstall_cupti());
}
END_TEST

/* An older CUPTI (no cuptiSubscribe_v2): the v1 call still subscribes; a refusal cannot name
 * the holder. */
START_TEST(older_cupti_subscribes_with_v1_and_cannot_name_the_holder)
{
    void *lib = fake(RECAP_FAKE_CUPTI_V1);
    name_fn name = (name_fn)dlsym(lib, "fake_cupti_subscriber_name");
    recap_hooks_t hooks;

    ck_assert_ptr_null(dlsym(lib, "cuptiSubscribe_v2"));
    ck_assert_ok(recap_hooks_install_cupti());
    ck_assert_ok(recap_hooks_active(&hooks));
    ck_assert_int_eq(hooks, RECAP_HOOKS_CUPTI);
    ck_assert_str_eq(name(), ""); /* subscribed without a name */
    ck_assert_ok(recap_hooks_uninstall_cupti());
    hold(lib, "Nsight Systems");
    ck_assert_status(recap_hooks_install_cupti(), RECAP_ERR_BUSY);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "another CUPTI subscriber (a profiler?)"));
    ck_assert_str_eq(holder_now(), "");
}
END_TEST

/* recap-probe's hooks check and its JSON say who holds CUPTI. */
START_TEST(probe_names_the_holder)
{
    char cmd[1024];
    int status;
    char *out;

    snprintf(cmd, sizeof(cmd), "RECAP_CUPTI_PATH=%s FAKE_CUPTI_HELD_BY='Nsight Systems' "
             "RECAP_PROBE_PYTHON_TIMEOUT=0 src/tools/recap-probe --json --check hooks",
             RECAP_FAKE_CUPTI);
    out = tu_shell(cmd, &status);
    ck_assert_int_eq(status, 0);
    ck_assert_msg(strstr(out, "\"cupti\":\"held\",\"cupti_holder\":\"CUPTI for Nsight "
                              "Systems\"") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "CUPTI: held by \\\"CUPTI for Nsight Systems\\\"") != NULL, "%s",
                  out);
    free(out);
}
END_TEST

/* RECAP_HOOKS=cupti asked for the CUPTI front end: refused, recap says so once on stderr, with
 * the holder, whatever RECAP_LOG says. */
START_TEST(configured_cupti_refused_warns_once_naming_the_holder)
{
    char cmd[1024];
    int status;
    char *err;
    void *lib = dlopen(RECAP_FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);

    ck_assert_ptr_nonnull(lib);
    if (dlsym(lib, "cuptiSubscribe_v2") == NULL)
        return; /* a CUPTI header without it: the holder cannot be named */
    snprintf(cmd, sizeof(cmd), "env -u RECAP_LOG RECAP_HOOKS=cupti RECAP_CUPTI_PATH=%s "
             "FAKE_CUPTI_HELD_BY='Nsight Compute' src/tools/recap-selfcheck --version 2>&1 "
             ">/dev/null", RECAP_FAKE_CUPTI);
    err = tu_shell(cmd, &status);
    ck_assert_int_eq(status, 0);
    ck_assert_msg(strstr(err, " recap WARN RECAP_HOOKS=cupti: recap's CUPTI front end is not "
                              "installed: cuptiSubscribe: CUPTI is held by another "
                              "subscriber, \"CUPTI for Nsight "
                              "Compute\"") != NULL, "%s", err);
    ck_assert_ptr_eq(strchr(err, '\n') + 1, err + strlen(err)); /* one line */
    free(err);
}
END_TEST

int main(void)
{
    Suite *s;
    TCase *tc;

    if (!on_double()) {
        fprintf(stderr, "not the CUDA test double: suite skipped\n");
        return 77;
    }
    s = suite_create("cupti");
    tc = tcase_create("cupti");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, refused_exec_destroy_keeps_the_record, NO_RESOURCE_CALLBACK,
                        RESOURCE_CALLBACK + 1);
    tcase_add_loop_test(tc, refused_graph_destroy_keeps_the_record, NO_RESOURCE_CALLBACK,
                        RESOURCE_CALLBACK + 1);
    tcase_add_test(tc, destroy_seen_only_as_a_resource_drops_the_record);
    tcase_add_test(tc, subscribers_hear_cupti_events_once);
    suite_add_tcase(s, tc);
    tc = tcase_create("subscriber");
    tcase_add_test(tc, subscribes_under_its_name_where_cupti_has_v2);
    tcase_add_test(tc, busy_names_the_holder);
    tcase_add_test(tc, older_cupti_subscribes_with_v1_and_cannot_name_the_holder);
    tcase_add_test(tc, probe_names_the_holder);
    tcase_add_test(tc, configured_cupti_refused_warns_once_naming_the_holder);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
