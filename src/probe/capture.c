/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>

#include "base/error.h"
#include "probe/probe.h"

/* Both checks talk to the driver table directly: hooks interposed in this process must not
 * turn what is probed (the driver's own behaviour) into recap's. */

static const struct {
    CUstreamCaptureMode mode;
    const char *name;
} modes[] = {
    {CU_STREAM_CAPTURE_MODE_GLOBAL, "global"},
    {CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, "thread-local"},
    {CU_STREAM_CAPTURE_MODE_RELAXED, "relaxed"},
};

/* A private non-blocking stream, so no other work of the process joins the probe's captures. */
static int private_stream(recap__probe_dev_t *pd, recap__probe_out_t *out, CUstream *s)
{
    char buf[32];
    CUresult rc = pd->drv->cuStreamCreate(s, CU_STREAM_NON_BLOCKING);

    if (rc != CUDA_SUCCESS)
        recap__probe_fail(out, "cuStreamCreate: %s", recap__probe_cu_name(pd->drv, rc, buf, 32));
    return rc == CUDA_SUCCESS ? 0 : -1;
}

/* Begins and ends an empty capture; says "<mode> ok" or why not. */
static void empty_capture(recap__probe_dev_t *pd, recap__probe_out_t *out, CUstream s, int m)
{
    const recap__driver_t *drv = pd->drv;
    CUgraph graph = NULL;
    char buf[32];
    CUresult rc;

    rc = drv->cuStreamBeginCapture(s, modes[m].mode);
    if (rc != CUDA_SUCCESS) {
        recap__probe_fail(out, "%s: cuStreamBeginCapture: %s", modes[m].name,
                          recap__probe_cu_name(drv, rc, buf, sizeof(buf)));
        return;
    }
    rc = drv->cuStreamEndCapture(s, &graph);
    if (rc == CUDA_SUCCESS && graph == NULL)
        recap__probe_fail(out, "%s: cuStreamEndCapture returned no graph", modes[m].name);
    else if (rc != CUDA_SUCCESS)
        recap__probe_fail(out, "%s: cuStreamEndCapture: %s", modes[m].name,
                          recap__probe_cu_name(drv, rc, buf, sizeof(buf)));
    else
        recap__probe_say(out, "%s ok", modes[m].name);
    if (graph != NULL)
        drv->cuGraphDestroy(graph);
}

void recap__probe_capture_modes(recap__probe_out_t *out)
{
    recap__probe_dev_t pd;
    CUstream s;
    size_t m;

    if (recap__probe_enter(&pd, out) != 0)
        return;
    if (private_stream(&pd, out, &s) == 0) {
        recap__probe_say(out, "empty captures on a private stream of device 0: ");
        for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
            recap__probe_say(out, "%s", m ? ", " : "");
            empty_capture(&pd, out, s, (int)m);
        }
        pd.drv->cuStreamDestroy(s);
    }
    recap__probe_leave(&pd);
}

/* The names of the entry points this driver lacks among those the event probe needs. */
static int missing_event_api(const recap__driver_t *drv, recap__probe_out_t *out)
{
    if (drv->cuEventCreate != NULL && drv->cuEventRecord != NULL && drv->cuEventQuery != NULL &&
        drv->cuEventDestroy != NULL)
        return 0;
    out->status = RECAP_PROBE_NA;
    recap__probe_say(out, "not applicable: this driver lacks%s%s%s%s",
                     drv->cuEventCreate ? "" : " cuEventCreate",
                     drv->cuEventRecord ? "" : " cuEventRecord",
                     drv->cuEventQuery ? "" : " cuEventQuery",
                     drv->cuEventDestroy ? "" : " cuEventDestroy_v2");
    return 1;
}

/* Records `ev` on `s`, begins a global-mode capture on `s` (as PyTorch captures by default),
 * queries `ev` mid-capture and ends the capture; reports both result codes. */
static void query_mid_capture(recap__probe_dev_t *pd, recap__probe_out_t *out, CUstream s, CUevent ev)
{
    const recap__driver_t *drv = pd->drv;
    CUresult rc, query, end;
    CUgraph graph = NULL;
    char b1[32], b2[32];

    rc = drv->cuEventRecord(ev, s);
    if (rc == CUDA_SUCCESS)
        rc = drv->cuStreamSynchronize(s); /* so "not ready" cannot be what the query sees */
    if (rc == CUDA_SUCCESS)
        rc = drv->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    if (rc != CUDA_SUCCESS) {
        recap__probe_fail(out, "setting up (record, synchronize, begin capture): %s",
                          recap__probe_cu_name(drv, rc, b1, sizeof(b1)));
        return;
    }
    query = drv->cuEventQuery(ev);
    end = drv->cuStreamEndCapture(s, &graph);
    if (graph != NULL)
        drv->cuGraphDestroy(graph);
    recap__probe_say(out, "cuEventQuery mid-capture on an event recorded before the capture "
                     "returned %s, cuStreamEndCapture %s: ",
                     recap__probe_cu_name(drv, query, b1, sizeof(b1)),
                     recap__probe_cu_name(drv, end, b2, sizeof(b2)));
    if (query == CUDA_SUCCESS && end == CUDA_SUCCESS)
        recap__probe_say(out, "this driver allows it (no hazard)");
    else
        recap__probe_say(out, "hazard present (a framework creating RNG capture state lazily, "
                         "mid-capture, loses the capture this way); recap primes every "
                         "generator before the capture begins, so it is not exposed");
}

void recap__probe_captured_event(recap__probe_out_t *out)
{
    recap__probe_dev_t pd;
    CUevent ev;
    CUstream s;
    char buf[32];
    CUresult rc;

    if (recap__probe_enter(&pd, out) != 0)
        return;
    if (!missing_event_api(pd.drv, out) && private_stream(&pd, out, &s) == 0) {
        rc = pd.drv->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
        if (rc != CUDA_SUCCESS) {
            recap__probe_fail(out, "cuEventCreate: %s", recap__probe_cu_name(pd.drv, rc, buf, 32));
        } else {
            query_mid_capture(&pd, out, s, ev);
            pd.drv->cuEventDestroy(ev);
        }
        pd.drv->cuStreamDestroy(s);
    }
    recap__probe_leave(&pd);
}
