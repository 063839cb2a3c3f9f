/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUPTI front end: for hosts that dlopen librecap (a framework plugin) and for
 * CUDA_INJECTION64_PATH. One subscriber, with only the callback ids recap needs enabled (every
 * id enabled makes each graph replay measurably slower: bench/RESULTS.md, "Interception"): the
 * driver's capture begin/end, graph launch and graph/exec destroy, and the resource domain's
 * graph/exec lifecycle. The driver domain sees cudart's calls too (cudart calls the driver), static or
 * shared, so the runtime domain is not needed and nothing is reported twice.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUPTI
#include <cupti.h>
#endif

#include "base/dl.h"
#include "base/env.h"
#include "base/error.h"
#include "base/log.h"
#include "capture/capture.h"
#include "hooks/events.h"
#include "hooks/hooks.h"

#ifdef HAVE_CUPTI

/* cuptiSubscribe_v2 (CUDA 13's CUPTI; absent before): subscribes under a name, which CUPTI
 * reports to whoever is refused next, and reports the holder's name when it refuses. Headers
 * without it leave recap on the v1 call. */
#ifdef CUpti_SubscriberParams_STRUCT_SIZE
#define RECAP_CUPTI_V2 1
#define HOLDER_LEN CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN
#else
#define HOLDER_LEN 64
#endif

static struct {
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
#ifdef RECAP_CUPTI_V2
    CUptiResult (*subscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                                CUpti_SubscriberParams *);
#endif
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                   CUpti_CallbackId);
    CUptiResult (*result_string)(CUptiResult, const char **);
} cupti;
static void *cupti_lib;
static CUpti_SubscriberHandle subscriber;
/* Who held CUPTI when it last refused recap, as CUPTI named it ("" when it did not say). */
static char holder[HOLDER_LEN];
static recap_hooks_t installed_as = RECAP_HOOKS_NONE;
static pthread_mutex_t cupti_lock = PTHREAD_MUTEX_INITIALIZER;

void recap__cupti_atfork(recap__atfork_t when)
{
    recap__atfork_mutex(&cupti_lock, when);
}

static const CUpti_CallbackId driver_ids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphDestroy,
    CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy,
    /* graph composition (capture/compose.c) */
    CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate,
    CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2,
    CUPTI_DRIVER_TRACE_CBID_cuGraphExecChildGraphNodeSetParams,
    CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams,
    CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode,
    CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode_v2,
};
static const CUpti_CallbackId resource_ids[] = {
    CUPTI_CBID_RESOURCE_GRAPH_CLONED,
    CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING,
    CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED,
    CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
};

static void report(const char *where, recap_status_t st)
{
    if (st != RECAP_OK)
        recap__hooks_event_failed(where, st);
}

/* Every form of "begin capture": prime on entry, report the capture on a successful exit. */
static void begin_event(int enter, int ok, CUstream s, CUstreamCaptureMode mode)
{
    if (enter)
        report("priming before capture", recap_capture_will_begin(s, (recap_capture_mode_t)mode));
    else if (ok)
        report("capture began", recap_capture_began(s));
}

/* A graph (exec = 0) or executable destroy, as the preload front end handles it (events.c): the
 * record leaves recap's map on entry and is dropped on exit only when the driver destroyed the
 * handle; a refused destroy (inside a global capture of the thread, say) puts it back, as the
 * handle lives on and may launch. The resource domain's "destroy starting" cannot tell: it may
 * come for a destroy the driver then refuses. CUPTI's per-call correlation data carries the
 * record from entry to exit. */
static void destroy_event(const CUpti_CallbackData *d, int ok, void *handle, int exec)
{
    recap__hook_call_t c = {.report = 1, .taken = NULL};

    if (d->correlationData == NULL)
        return;
    if (d->callbackSite == CUPTI_API_ENTER) {
        if (exec)
            recap__ev_destroy_exec(&c, handle);
        else
            recap__ev_destroy_graph(&c, handle);
        *d->correlationData = (uint64_t)(uintptr_t)c.taken;
        return;
    }
    c.taken = (void *)(uintptr_t)*d->correlationData;
    *d->correlationData = 0;
    recap__ev_destroy_done(&c, handle, exec, ok);
}

/* Graph composition, on the calls' exits: exec updates, child graph node updates in an exec,
 * conditional nodes' bodies. */
static void on_compose(CUpti_CallbackId id, const CUpti_CallbackData *d, int ok)
{
    recap__hook_call_t c = {.report = 1, .taken = NULL};

    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate: {
        const cuGraphExecUpdate_params *p = d->functionParams;
        recap__ev_exec_updated(&c, ok, p->hGraphExec, p->hGraph);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2: {
        const cuGraphExecUpdate_v2_params *p = d->functionParams;
        recap__ev_exec_updated(&c, ok, p->hGraphExec, p->hGraph);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecChildGraphNodeSetParams: {
        const cuGraphExecChildGraphNodeSetParams_params *p = d->functionParams;
        recap__ev_exec_child_updated(&c, ok, p->hGraphExec, p->hNode, p->childGraph);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams: {
        const cuGraphExecNodeSetParams_params *p = d->functionParams;
        if (p->nodeParams != NULL && p->nodeParams->type == CU_GRAPH_NODE_TYPE_GRAPH)
            recap__ev_exec_child_updated(&c, ok, p->hGraphExec, p->hNode, p->nodeParams->graph.graph);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode: {
        const cuGraphAddNode_params *p = d->functionParams;
        recap__ev_node_added(&c, ok && p->phGraphNode != NULL, p->hGraph,
                             p->phGraphNode != NULL ? *p->phGraphNode : NULL, p->nodeParams);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode_v2: {
        const cuGraphAddNode_v2_params *p = d->functionParams;
        recap__ev_node_added(&c, ok && p->phGraphNode != NULL, p->hGraph,
                             p->phGraphNode != NULL ? *p->phGraphNode : NULL, p->nodeParams);
        break;
    }
    default:
        break;
    }
}

static void on_driver(CUpti_CallbackId id, const CUpti_CallbackData *d)
{
    int enter = d->callbackSite == CUPTI_API_ENTER;
    int ok = !enter && d->functionReturnValue != NULL &&
             *(const CUresult *)d->functionReturnValue == CUDA_SUCCESS;

    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz:
        /* the one-argument form captures in relaxed mode (observed on driver 580) */
        begin_event(enter, ok, ((const cuStreamBeginCapture_params *)d->functionParams)->hStream,
                    CU_STREAM_CAPTURE_MODE_RELAXED);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz: {
        const cuStreamBeginCapture_v2_params *p = d->functionParams;
        begin_event(enter, ok, p->hStream, p->mode);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz: {
        const cuStreamBeginCaptureToGraph_params *p = d->functionParams;
        begin_event(enter, ok, p->hStream, p->mode);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz: {
        const cuStreamEndCapture_params *p = d->functionParams;
        if (enter)
            report("capture will end", recap_capture_will_end(p->hStream));
        else
            report("capture ended", recap_capture_ended(p->hStream, ok && p->phGraph != NULL
                                                                        ? *p->phGraph : NULL));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: {
        const cuGraphLaunch_params *p = d->functionParams;
        if (enter)
            report("graph launch", recap_graph_will_launch(p->hGraph, p->hStream));
        else if (!ok)
            report("graph launch failed", recap_graph_launch_failed(p->hGraph));
        else if (recap__launch_needs_events)
            report("graph launched", recap_graph_launched(p->hGraph, p->hStream));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphDestroy:
        destroy_event(d, ok, ((const cuGraphDestroy_params *)d->functionParams)->hGraph, 0);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy:
        destroy_event(d, ok, ((const cuGraphExecDestroy_params *)d->functionParams)->hGraphExec, 1);
        break;
    default: /* graph composition (on_compose) */
        if (!enter)
            on_compose(id, d, ok);
        break;
    }
}

static void on_resource(CUpti_CallbackId id, const CUpti_ResourceData *r)
{
    const CUpti_GraphData *g = r->resourceDescriptor;

    if (g == NULL)
        return;
    switch (id) {
    case CUPTI_CBID_RESOURCE_GRAPH_CLONED:
        report("graph cloned", recap_graph_cloned(g->originalGraph, g->graph));
        break;
    /* A destroy through the API has taken the record already (destroy_event); these drop the
     * records of graphs destroyed without one (a context torn down with its graphs). */
    case CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING:
        recap__graph_forget(g->graph, 0);
        break;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED:
        report("graph instantiated", recap_graph_instantiated(g->graph, g->graphExec));
        break;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING:
        recap__graph_forget(g->graphExec, 1);
        break;
    default:
        break;
    }
}

static void CUPTIAPI on_callback(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                                 const void *data)
{
    recap_hooks_t source;

    (void)user;
    if (!recap__hooks_reporting(installed_as))
        return;
    source = recap__events_source_set(installed_as);
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
        on_driver(id, data);
    else if (domain == CUPTI_CB_DOMAIN_RESOURCE)
        on_resource(id, data);
    recap__events_source_set(source);
}

/* libcupti comes with the toolkit or with the framework (PyTorch ships one): one already loaded
 * wins, then $RECAP_CUPTI_PATH, then the usual names. */
static recap_status_t load_cupti(void)
{
    static const char *const names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so",
                                        "/usr/local/cuda/lib64/libcupti.so"};
    const char *env = recap__env("RECAP_CUPTI_PATH");
    size_t i;

    if (cupti_lib != NULL)
        return RECAP_OK;
    for (i = 0; i < 2 && cupti_lib == NULL; i++)
        cupti_lib = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
    if (cupti_lib == NULL && env != NULL) {
        cupti_lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (cupti_lib == NULL)
            recap__env_warn("RECAP_CUPTI_PATH", "RECAP_CUPTI_PATH=%s: cannot load it (%s); "
                            "trying libcupti.so.13, .12 and libcupti.so", env, dlerror());
    }
    for (i = 0; i < sizeof(names) / sizeof(names[0]) && cupti_lib == NULL; i++)
        cupti_lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (cupti_lib == NULL)
        return recap__fail(RECAP_ERR_UNSUPPORTED, "CUPTI not found (set RECAP_CUPTI_PATH)");
    cupti.subscribe = recap__dlsym(cupti_lib, "cuptiSubscribe");
    cupti.unsubscribe = recap__dlsym(cupti_lib, "cuptiUnsubscribe");
    cupti.enable_callback = recap__dlsym(cupti_lib, "cuptiEnableCallback");
    cupti.result_string = recap__dlsym(cupti_lib, "cuptiGetResultString");
#ifdef RECAP_CUPTI_V2
    cupti.subscribe_v2 = recap__dlsym(cupti_lib, "cuptiSubscribe_v2"); /* NULL: v1 only */
#endif
    if (!cupti.subscribe || !cupti.unsubscribe || !cupti.enable_callback || !cupti.result_string) {
        cupti_lib = NULL;
        return recap__fail(RECAP_ERR_UNSUPPORTED, "libcupti lacks the callback API");
    }
    return RECAP_OK;
}

static recap_status_t cupti_fail(CUptiResult r, const char *what)
{
    const char *s = "?";

    cupti.result_string(r, &s);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && holder[0] != '\0')
        return recap__fail(RECAP_ERR_BUSY, "%s: CUPTI is held by another subscriber, \"%s\"; "
                           "recap stays in explicit mode (%s)", what, holder, s);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        return recap__fail(RECAP_ERR_BUSY, "%s: another CUPTI subscriber (a profiler?) holds "
                           "CUPTI; recap stays in explicit mode (%s)", what, s);
    return recap__fail(RECAP_ERR_UNSUPPORTED, "%s: %s", what, s);
}

/* Subscribes recap's callback as "recap" where this libcupti has cuptiSubscribe_v2, else with
 * the v1 call; a refusal records the holder's name, a success forgets it. Called under
 * cupti_lock (by the installer, and by recap_cupti_is_free's throwaway subscription). */
static CUptiResult subscribe(CUpti_SubscriberHandle *h)
{
    char old[HOLDER_LEN] = "";
    CUptiResult r;

#ifdef RECAP_CUPTI_V2
    if (cupti.subscribe_v2 != NULL) {
        CUpti_SubscriberParams p = {0};

        p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
        p.subscriberName = "recap";
        p.oldSubscriberName = old;
        p.oldSubscriberSize = sizeof(old);
        r = cupti.subscribe_v2(h, (CUpti_CallbackFunc)on_callback, NULL, &p);
    } else
#endif
    {
        r = cupti.subscribe(h, (CUpti_CallbackFunc)on_callback, NULL);
    }
    old[sizeof(old) - 1] = '\0';
    /* A holder that subscribed without a name shows as "CUPTI for <not provided>" (seen with
     * CUDA 13.0's CUPTI on the H200): that names nobody. */
    if (strstr(old, "<not provided>") != NULL)
        old[0] = '\0';
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        memcpy(holder, old, sizeof(holder));
    else if (r == CUPTI_SUCCESS)
        holder[0] = '\0';
    return r;
}

static recap_status_t enable_ids(void)
{
    size_t i;
    CUptiResult r = CUPTI_SUCCESS;

    for (i = 0; i < sizeof(driver_ids) / sizeof(driver_ids[0]) && r == CUPTI_SUCCESS; i++)
        r = cupti.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, driver_ids[i]);
    for (i = 0; i < sizeof(resource_ids) / sizeof(resource_ids[0]) && r == CUPTI_SUCCESS; i++)
        r = cupti.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, resource_ids[i]);
    return r == CUPTI_SUCCESS ? RECAP_OK : cupti_fail(r, "cuptiEnableCallback");
}

recap_status_t recap__cupti_install(recap_hooks_t as)
{
    recap_status_t st;
    CUptiResult r;

    pthread_mutex_lock(&cupti_lock);
    if (installed_as != RECAP_HOOKS_NONE || !recap__hooks_claim(as)) {
        pthread_mutex_unlock(&cupti_lock); /* recap already reports, through this or another */
        return RECAP_OK;
    }
    st = load_cupti();
    if (st == RECAP_OK) {
        r = subscribe(&subscriber);
        st = r == CUPTI_SUCCESS ? RECAP_OK : cupti_fail(r, "cuptiSubscribe");
        if (st == RECAP_OK) {
            st = enable_ids();
            if (st != RECAP_OK)
                cupti.unsubscribe(subscriber);
        }
    }
    if (st == RECAP_OK)
        installed_as = as;
    else
        recap__hooks_release(as);
    pthread_mutex_unlock(&cupti_lock);
    if (st != RECAP_OK)
        recap__log(RECAP_LOG_WARN, "CUPTI front end not installed: %s", recap_last_error());
    return st;
}

recap_status_t recap_hooks_uninstall_cupti(void)
{
    pthread_mutex_lock(&cupti_lock);
    if (installed_as != RECAP_HOOKS_NONE) {
        cupti.unsubscribe(subscriber);
        recap__hooks_release(installed_as);
        installed_as = RECAP_HOOKS_NONE;
    }
    pthread_mutex_unlock(&cupti_lock);
    return RECAP_OK;
}

recap_status_t recap_cupti_is_free(int *free_p)
{
    CUpti_SubscriberHandle probe;
    recap_status_t st;
    CUptiResult r;

    RECAP_CHECK_ARG(free_p != NULL, "free_p is NULL");
    pthread_mutex_lock(&cupti_lock);
    if (installed_as != RECAP_HOOKS_NONE) {
        pthread_mutex_unlock(&cupti_lock);
        *free_p = 0;
        return RECAP_OK;
    }
    st = load_cupti();
    if (st == RECAP_OK) {
        r = subscribe(&probe);
        if (r == CUPTI_SUCCESS) {
            cupti.unsubscribe(probe);
            *free_p = 1;
        } else if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
            *free_p = 0;
        } else {
            st = cupti_fail(r, "cuptiSubscribe");
        }
    }
    pthread_mutex_unlock(&cupti_lock);
    return st;
}

recap_status_t recap_cupti_holder(char *name, size_t name_len)
{
    RECAP_CHECK_ARG(name != NULL && name_len > 0, "name is NULL or name_len is 0");
    pthread_mutex_lock(&cupti_lock);
    snprintf(name, name_len, "%s", holder);
    pthread_mutex_unlock(&cupti_lock);
    return RECAP_OK;
}

#else /* !HAVE_CUPTI */

recap_status_t recap_cupti_holder(char *name, size_t name_len)
{
    RECAP_CHECK_ARG(name != NULL && name_len > 0, "name is NULL or name_len is 0");
    name[0] = '\0';
    return RECAP_OK;
}

void recap__cupti_atfork(recap__atfork_t when)
{
    (void)when;
}

recap_status_t recap__cupti_install(recap_hooks_t as)
{
    (void)as;
    return recap__fail(RECAP_ERR_UNSUPPORTED, "recap was built without CUPTI headers");
}

recap_status_t recap_hooks_uninstall_cupti(void)
{
    return RECAP_OK;
}

recap_status_t recap_cupti_is_free(int *free_p)
{
    RECAP_CHECK_ARG(free_p != NULL, "free_p is NULL");
    return recap__fail(RECAP_ERR_UNSUPPORTED, "recap was built without CUPTI headers");
}

#endif

recap_status_t recap_hooks_install_cupti(void)
{
    return recap__cupti_install(RECAP_HOOKS_CUPTI);
}
