/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "capture/capture.h"
#include "capture/internal.h"
#include "driver/driver.h"

/* The device whose context a graph call runs in: the graph's (recorded at capture) when recap
 * knows it, else the calling thread's current context's, else device 0. */
static int graph_call_device(const recap__driver_t *drv, const void *handle)
{
    int device = recap__graph_device(handle);
    CUcontext ctx = NULL;
    CUdevice cur;

    if (device >= 0)
        return device;
    /* cuCtxGetDevice without a current context fails, and compute-sanitizer or an API tracer in
     * the host job would report that as the job's error: ask whether there is one first. */
    if (drv->cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != NULL &&
        drv->cuCtxGetDevice(&cur) == CUDA_SUCCESS)
        return (int)cur;
    return 0;
}

static const recap__driver_t *drv_or_null(void)
{
    const recap__driver_t *drv = NULL;

    return recap__driver_graphs(&drv) == RECAP_OK ? drv : NULL;
}

#define NEED_DRIVER(drv)                                  \
    const recap__driver_t *drv = drv_or_null();            \
    if (drv == NULL)                                      \
        return recap__driver_graphs(&drv)

recap_status_t recap_stream_create(int device, recap_stream_t *stream_p)
{
    CUstream s = NULL;
    NEED_DRIVER(drv);

    RECAP_CHECK_ARG(stream_p != NULL, "stream_p is NULL");
    RECAP_IN_DEVICE(device, "cuStreamCreate", drv->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    *stream_p = s;
    return RECAP_OK;
}

recap_status_t recap_stream_destroy(recap_stream_t stream)
{
    CUresult rc;
    NEED_DRIVER(drv);

    RECAP_CHECK_ARG(stream != NULL, "stream is NULL");
    rc = drv->cuStreamDestroy((CUstream)stream);
    return rc == CUDA_SUCCESS ? RECAP_OK : recap__cuda_fail(rc, "cuStreamDestroy");
}

recap_status_t recap_stream_synchronize(recap_stream_t stream)
{
    recap_status_t st;
    int device;
    NEED_DRIVER(drv);

    st = recap__stream_device((CUstream)stream, &device);
    if (st != RECAP_OK)
        return st;
    RECAP_IN_DEVICE(device, "cuStreamSynchronize", drv->cuStreamSynchronize((CUstream)stream));
    return RECAP_OK;
}

/* Ends a capture recap began but cannot follow and drops its graph, so a failed begin leaves the
 * stream as it found it. The caller's error stays the one reported. */
static void abandon_capture(const recap__driver_t *drv, CUstream stream, int device)
{
    const recap__device_t *dev;
    CUgraph g = NULL;
    int pushed = 0;

    if (recap__device_get(device, &dev) != RECAP_OK || recap__ctx_enter(dev, &pushed) != RECAP_OK)
        return;
    if (drv->cuStreamEndCapture(stream, &g) == CUDA_SUCCESS && g != NULL)
        drv->cuGraphDestroy(g);
    recap__ctx_leave(pushed);
}

recap_status_t recap_stream_begin_capture(recap_stream_t stream, recap_capture_mode_t mode)
{
    recap_status_t st;
    int device;
    NEED_DRIVER(drv);

    RECAP_CHECK_ARG(mode >= RECAP_CAPTURE_GLOBAL && mode <= RECAP_CAPTURE_RELAXED,
                    "capture mode %d", (int)mode);
    st = recap_capture_will_begin(stream, mode);
    if (st != RECAP_OK)
        return st;
    recap__stream_device((CUstream)stream, &device);
    RECAP_IN_DEVICE(device, "cuStreamBeginCapture",
              drv->cuStreamBeginCapture((CUstream)stream, (CUstreamCaptureMode)mode));
    st = recap_capture_began(stream);
    if (st != RECAP_OK)
        abandon_capture(drv, (CUstream)stream, device);
    return st;
}

recap_status_t recap_stream_end_capture(recap_stream_t stream, recap_graph_t *graph_p)
{
    recap_status_t st, wst;
    CUgraph g = NULL;
    CUresult rc;
    int device;
    NEED_DRIVER(drv);

    RECAP_CHECK_ARG(graph_p != NULL, "graph_p is NULL");
    /* Nothing may keep the capture from ending: on a capture the host invalidated, the real
     * driver refuses even cuStreamGetCtx, and a stream left capturing fails every later call.
     * Without its device the capture ends in the calling thread's context. */
    if (recap__stream_device((CUstream)stream, &device) != RECAP_OK)
        device = -1;
    /* A failure to capture the advance node must not leave the stream capturing: end anyway,
     * then report (the graph is destroyed: its replays would repeat numbers). */
    wst = recap_capture_will_end(stream);
    {
        const recap__device_t *dev;
        int pushed = 0;
        if (device >= 0 && recap__device_get(device, &dev) == RECAP_OK)
            recap__ctx_enter(dev, &pushed);
        rc = drv->cuStreamEndCapture((CUstream)stream, &g);
        st = recap_capture_ended(stream, rc == CUDA_SUCCESS ? g : NULL);
        if (rc == CUDA_SUCCESS && (wst != RECAP_OK || st != RECAP_OK)) {
            recap_graph_destroyed(g);
            drv->cuGraphDestroy(g);
        }
        recap__ctx_leave(pushed);
    }
    if (rc != CUDA_SUCCESS)
        return recap__cuda_fail(rc, "cuStreamEndCapture");
    if (wst != RECAP_OK || st != RECAP_OK)
        return wst != RECAP_OK ? wst : st;
    *graph_p = g;
    return RECAP_OK;
}

recap_status_t recap_graph_instantiate(recap_graph_t graph, recap_graph_exec_t *exec_p)
{
    CUgraphExec e = NULL;
    recap_status_t st;
    NEED_DRIVER(drv);

    RECAP_CHECK_ARG(graph != NULL && exec_p != NULL, "NULL argument");
    if (recap__events_check_caller("recap_graph_instantiate") != RECAP_OK)
        return RECAP_ERR_STATE;
    RECAP_IN_DEVICE(graph_call_device(drv, graph), "cuGraphInstantiateWithFlags",
              drv->cuGraphInstantiateWithFlags(&e, (CUgraph)graph, 0));
    /* An exec recap keeps no record of would launch without advancing its generators: every
     * replay would repeat the same numbers. */
    st = recap_graph_instantiated(graph, e);
    if (st != RECAP_OK) {
        const recap__device_t *dev;
        char *why = strdup(recap_last_error()); /* whole: the calls below set their own */
        int pushed = 0;

        recap__graph_forget(e, 1); /* a refused exec may hold a record and a plan */
        if (recap__device_get(graph_call_device(drv, graph), &dev) == RECAP_OK &&
            recap__ctx_enter(dev, &pushed) == RECAP_OK) {
            drv->cuGraphExecDestroy(e);
            recap__ctx_leave(pushed);
        }
        if (st == RECAP_ERR_UNSUPPORTED) /* a composition recap cannot make exact */
            (void)recap__fail(st, "%s; the exec is destroyed", why != NULL ? why : "refused");
        else
            (void)recap__fail(st, "graph instantiated, but recap could not record its RNG "
                              "bookkeeping (%s); the exec is destroyed",
                              why != NULL ? why : "no memory to say");
        free(why);
        return st;
    }
    *exec_p = e;
    return RECAP_OK;
}

recap_status_t recap_graph_clone(recap_graph_t graph, recap_graph_t *clone_p)
{
    CUgraph c = NULL;
    NEED_DRIVER(drv);

    RECAP_CHECK_ARG(graph != NULL && clone_p != NULL, "NULL argument");
    RECAP_IN_DEVICE(graph_call_device(drv, graph), "cuGraphClone", drv->cuGraphClone(&c, (CUgraph)graph));
    recap_graph_cloned(graph, c);
    *clone_p = c;
    return RECAP_OK;
}

recap_status_t recap_graph_launch(recap_graph_exec_t exec, recap_stream_t stream)
{
    recap_status_t st;
    CUresult rc;
    NEED_DRIVER(drv);

    RECAP_CHECK_ARG(exec != NULL, "exec is NULL");
    st = recap_graph_will_launch(exec, stream); /* refuses inside a subscriber's callback */
    if (st != RECAP_OK)
        return st;
    {
        const recap__device_t *dev;
        int pushed = 0;

        st = recap__device_get(graph_call_device(drv, exec), &dev);
        if (st == RECAP_OK)
            st = recap__ctx_enter(dev, &pushed);
        if (st != RECAP_OK) {
            recap_graph_launch_failed(exec);
            return st;
        }
        rc = drv->cuGraphLaunch((CUgraphExec)exec, (CUstream)stream);
        recap__ctx_leave(pushed);
    }
    if (rc != CUDA_SUCCESS) {
        recap_graph_launch_failed(exec);
        return recap__cuda_fail(rc, "cuGraphLaunch");
    }
    return recap_graph_launched(exec, stream);
}

/* A destroy the driver refuses (cuGraphExecDestroy inside a global capture of this thread, say)
 * leaves the handle alive, and its launches must keep advancing the generators: recap's record
 * goes only with the handle (capture.h, recap__record_take). */
static recap_status_t destroy_handle(const recap__driver_t *drv, void *handle, int exec)
{
    const recap__device_t *dev;
    recap__rng_record_t *rec;
    recap_status_t st;
    CUresult rc;
    int pushed;

    st = recap__device_get(graph_call_device(drv, handle), &dev);
    if (st == RECAP_OK)
        st = recap__ctx_enter(dev, &pushed);
    if (st != RECAP_OK)
        return st;
    rec = recap__record_take(handle, exec);
    rc = exec ? drv->cuGraphExecDestroy((CUgraphExec)handle) : drv->cuGraphDestroy((CUgraph)handle);
    recap__ctx_leave(pushed);
    if (rc != CUDA_SUCCESS) {
        recap__record_put_back(handle, exec, rec);
        return recap__cuda_fail(rc, exec ? "cuGraphExecDestroy" : "cuGraphDestroy");
    }
    recap__record_unref(rec);
    if (exec)
        recap__events_emit(RECAP_EVENT_GRAPH_EXEC_DESTROYED, NULL, RECAP_CAPTURE_GLOBAL, NULL, handle);
    else
        recap__events_emit(RECAP_EVENT_GRAPH_DESTROYED, NULL, RECAP_CAPTURE_GLOBAL, handle, NULL);
    return RECAP_OK;
}

recap_status_t recap_graph_destroy(recap_graph_t graph)
{
    NEED_DRIVER(drv);

    RECAP_CHECK_ARG(graph != NULL, "graph is NULL");
    if (recap__events_check_caller("recap_graph_destroy") != RECAP_OK)
        return RECAP_ERR_STATE;
    return destroy_handle(drv, graph, 0);
}

recap_status_t recap_graph_exec_destroy(recap_graph_exec_t exec)
{
    NEED_DRIVER(drv);

    RECAP_CHECK_ARG(exec != NULL, "exec is NULL");
    if (recap__events_check_caller("recap_graph_exec_destroy") != RECAP_OK)
        return RECAP_ERR_STATE;
    return destroy_handle(drv, exec, 1);
}

recap_status_t recap_capture_prime(recap_stream_t stream)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    recap_status_t st;
    CUresult rc;
    int device;
    NEED_DRIVER(drv);

    st = recap__events_check_caller("recap_capture_prime");
    if (st != RECAP_OK)
        return st;
    rc = drv->cuStreamGetCaptureInfo((CUstream)stream, &status, NULL, NULL, NULL, NULL);
    if (rc != CUDA_SUCCESS)
        return recap__cuda_fail(rc, "cuStreamGetCaptureInfo");
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return RECAP_OK;
    st = recap__stream_device((CUstream)stream, &device);
    if (st == RECAP_OK)
        st = recap__slots_prime(device);
    if (st == RECAP_OK)
        st = recap_capture_began(stream);
    return st;
}
