/* SPDX-License-Identifier: Apache-2.0 */
/* Graph launches ordered across streams, per generator state (capture/internal.h). */
#include "config.h"

#include <cuda.h>

#include "base/error.h"
#include "base/lock.h"
#include "base/log.h"
#include "capture/capture.h"
#include "capture/internal.h"
#include "driver/driver.h"

/*
 * Launches that draw from one generator read and advance its one device slot, so they must not
 * overlap. On one stream they cannot. When a launch comes on another stream than the state's
 * last launch, recap orders it after that launch: it waits on the event recorded after the last
 * launch (recorded only for states that have moved between streams: nothing in steady state on
 * one stream), or, the first time (no event yet) and where the driver has no events, it waits
 * for the device. Either way the launch is exact.
 */
__thread int recap__launch_needs_events __attribute__((tls_model("initial-exec")));

recap_status_t recap__compose_order(recap__genstate_t *gs, CUstream stream)
{
    recap__genstate_capture_t *cx = recap__capture_part(gs);
    const recap__driver_t *drv;
    const recap__device_t *dev;
    recap_status_t st;
    CUresult rc = CUDA_SUCCESS;
    int pushed;

    st = recap__device_enter(gs->device, &dev, &drv, &pushed);
    if (st != RECAP_OK)
        return st;
    if (__atomic_load_n(&cx->event_valid, __ATOMIC_ACQUIRE) && drv->cuStreamWaitEvent != NULL) {
        rc = drv->cuStreamWaitEvent(stream, (CUevent)__atomic_load_n(&cx->launch_event,
                                                                     __ATOMIC_ACQUIRE), 0);
    } else if (drv->cuCtxSynchronize != NULL) {
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        if (drv->has_graphs)
            drv->cuThreadExchangeStreamCaptureMode(&mode);
        rc = drv->cuCtxSynchronize();
        if (drv->has_graphs)
            drv->cuThreadExchangeStreamCaptureMode(&mode);
        if (!__atomic_load_n(&cx->multi_stream, __ATOMIC_RELAXED))
            recap__log(RECAP_LOG_INFO, "generator state %p: graph launches on streams %p and %p; "
                       "ordered by recap from now on", (void *)gs,
                       __atomic_load_n(&cx->launch_stream, __ATOMIC_RELAXED), (void *)stream);
    }
    recap__ctx_leave(pushed);
    __atomic_store_n(&cx->multi_stream, 1, __ATOMIC_RELAXED);
    return rc == CUDA_SUCCESS ? RECAP_OK
                              : recap__cuda_fail(rc, "ordering a graph launch after the last one "
                                                     "on another stream");
}

recap_status_t recap__compose_record_after(recap__genstate_t *gs, CUstream stream)
{
    recap__genstate_capture_t *cx = recap__capture_part(gs);
    const recap__driver_t *drv;
    const recap__device_t *dev;
    recap_status_t st;
    CUresult rc;
    int pushed;

    recap__driver_get(&drv);
    if (drv->cuEventCreate == NULL || drv->cuEventRecord == NULL || drv->cuStreamWaitEvent == NULL)
        return RECAP_OK; /* the next switch waits for the device instead */
    st = recap__device_enter(gs->device, &dev, &drv, &pushed);
    if (st != RECAP_OK)
        return st;
    rc = CUDA_SUCCESS;
    recap__lock(&cx->slot_lock); /* one event per state, created once */
    if (cx->launch_event == NULL) {
        CUevent ev = NULL;
        rc = drv->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
        __atomic_store_n(&cx->launch_event, (void *)ev, __ATOMIC_RELEASE);
    }
    if (rc == CUDA_SUCCESS)
        rc = drv->cuEventRecord((CUevent)cx->launch_event, stream);
    recap__unlock(&cx->slot_lock);
    recap__ctx_leave(pushed);
    __atomic_store_n(&cx->event_valid, rc == CUDA_SUCCESS, __ATOMIC_RELEASE);
    return rc == CUDA_SUCCESS ? RECAP_OK : recap__cuda_fail(rc, "recording a graph launch's event");
}

void recap__compose_state_gone(recap__genstate_t *gs)
{
    recap__genstate_capture_t *cx = recap__capture_part(gs);
    const recap__driver_t *drv;

    if (cx->launch_event != NULL && recap__driver_get(&drv) == RECAP_OK &&
        drv->cuEventDestroy != NULL)
        drv->cuEventDestroy((CUevent)cx->launch_event);
    cx->launch_event = NULL;
}
