#include "config.h"

#include <stdio.h>

#include "base/error.h"
#include "probe/probe.h"

/*
 * Graph features, each tried for real on device 0 with an empty graph. A feature this driver
 * does not offer (too old, entry point missing) is reported as "no" and is not a failure; a
 * feature it offers that then does not work is.
 */

typedef struct {
    recap_probe_dev_t pd;
    recap_probe_out_t *out;
    CUstream s;
    int version;
    int cc_major;
} feat_t;

/* Reports one feature: "name yes" or a failure naming the call and the driver's code. */
static void feature_result(feat_t *f, const char *name, const char *call, CUresult rc)
{
    char buf[32];

    if (rc == CUDA_SUCCESS)
        recap__probe_say(f->out, "%s yes", name);
    else
        recap__probe_fail(f->out, "%s FAILED (%s: %s)", name, call,
                          recap__probe_cu_name(f->pd.drv, rc, buf, sizeof(buf)));
}

static void feature_no(feat_t *f, const char *name, const char *why)
{
    recap__probe_say(f->out, "%s no (%s)", name, why);
}

static void upload(feat_t *f)
{
    const recap_driver_t *drv = f->pd.drv;
    CUgraph g = NULL;
    CUgraphExec e = NULL;
    CUresult rc;
    const char *call = "cuGraphCreate";

    if (drv->cuGraphCreate == NULL || drv->cuGraphUpload == NULL) {
        feature_no(f, "upload", drv->cuGraphCreate ? "driver lacks cuGraphUpload"
                                                    : "driver lacks cuGraphCreate");
        return;
    }
    rc = drv->cuGraphCreate(&g, 0);
    if (rc == CUDA_SUCCESS) {
        call = "cuGraphInstantiateWithFlags";
        rc = drv->cuGraphInstantiateWithFlags(&e, g, 0);
    }
    if (rc == CUDA_SUCCESS) {
        call = "cuGraphUpload";
        rc = drv->cuGraphUpload(e, f->s);
    }
    if (rc == CUDA_SUCCESS) {
        call = "cuStreamSynchronize";
        rc = drv->cuStreamSynchronize(f->s);
    }
    feature_result(f, "upload", call, rc);
    if (e != NULL)
        drv->cuGraphExecDestroy(e);
    if (g != NULL)
        drv->cuGraphDestroy(g);
}

/* Captures nothing into an existing graph: the capture must end with that same graph. */
static void capture_to_graph(feat_t *f)
{
    const recap_driver_t *drv = f->pd.drv;
    CUgraph g = NULL, got = NULL;
    CUresult rc;
    const char *call = "cuGraphCreate";

    if (drv->cuStreamBeginCaptureToGraph == NULL || drv->cuGraphCreate == NULL) {
        feature_no(f, "capture-to-graph", "driver lacks cuStreamBeginCaptureToGraph, CUDA 12.3+");
        return;
    }
    rc = drv->cuGraphCreate(&g, 0);
    if (rc == CUDA_SUCCESS) {
        call = "cuStreamBeginCaptureToGraph";
        rc = drv->cuStreamBeginCaptureToGraph(f->s, g, NULL, NULL, 0,
                                              CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        if (rc == CUDA_SUCCESS) {
            call = "cuStreamEndCapture";
            rc = drv->cuStreamEndCapture(f->s, &got);
        }
    }
    if (rc == CUDA_SUCCESS && got != g) {
        recap__probe_fail(f->out, "capture-to-graph FAILED (the capture ended with another graph)");
        if (got != NULL)
            drv->cuGraphDestroy(got);
    } else {
        feature_result(f, "capture-to-graph", call, rc);
    }
    if (g != NULL)
        drv->cuGraphDestroy(g);
}

static void conditional_nodes(feat_t *f)
{
    const recap_driver_t *drv = f->pd.drv;
    CUgraphConditionalHandle handle;
    CUgraph g = NULL;
    CUresult rc;

    if (f->version < 12030) {
        feature_no(f, "conditional nodes", "driver older than 12.3");
        return;
    }
    if (drv->cuGraphConditionalHandleCreate == NULL || drv->cuGraphCreate == NULL) {
        feature_no(f, "conditional nodes", "driver lacks cuGraphConditionalHandleCreate");
        return;
    }
    rc = drv->cuGraphCreate(&g, 0);
    if (rc == CUDA_SUCCESS)
        rc = drv->cuGraphConditionalHandleCreate(&handle, g, f->pd.ctx, 0, 0);
    feature_result(f, "conditional nodes", "cuGraphConditionalHandleCreate", rc);
    if (g != NULL)
        drv->cuGraphDestroy(g);
}

/* Instantiates an empty graph for device-side launch and uploads it (a device-launchable graph
 * must be uploaded before a kernel can launch it). */
static void device_launch(feat_t *f)
{
    const recap_driver_t *drv = f->pd.drv;
    CUgraph g = NULL;
    CUgraphExec e = NULL;
    CUresult rc;
    const char *call = "cuGraphCreate";

    if (f->version < 12000 || f->cc_major < 7 || drv->cuGraphCreate == NULL ||
        drv->cuGraphUpload == NULL) {
        feature_no(f, "device launch", f->version < 12000 ? "driver older than 12.0"
                   : f->cc_major < 7 ? "device older than sm_70"
                                     : "driver lacks cuGraphCreate or cuGraphUpload");
        return;
    }
    rc = drv->cuGraphCreate(&g, 0);
    if (rc == CUDA_SUCCESS) {
        call = "cuGraphInstantiateWithFlags(DEVICE_LAUNCH)";
        rc = drv->cuGraphInstantiateWithFlags(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH);
    }
    if (rc == CUDA_SUCCESS) {
        call = "cuGraphUpload";
        rc = drv->cuGraphUpload(e, f->s);
    }
    if (rc == CUDA_SUCCESS) {
        call = "cuStreamSynchronize";
        rc = drv->cuStreamSynchronize(f->s);
    }
    feature_result(f, "device launch", call, rc);
    if (e != NULL)
        drv->cuGraphExecDestroy(e);
    if (g != NULL)
        drv->cuGraphDestroy(g);
}

void recap__probe_graph_features(recap_probe_out_t *out)
{
    feat_t f = {.out = out};
    char buf[32];
    CUresult rc;

    if (recap__probe_enter(&f.pd, out) != 0)
        return;
    rc = f.pd.drv->cuDriverGetVersion(&f.version);
    if (rc == CUDA_SUCCESS)
        rc = f.pd.drv->cuDeviceGetAttribute(&f.cc_major,
                                            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, f.pd.dev);
    if (rc == CUDA_SUCCESS)
        rc = f.pd.drv->cuStreamCreate(&f.s, CU_STREAM_NON_BLOCKING);
    if (rc != CUDA_SUCCESS) {
        recap__probe_fail(out, "setting up: %s", recap__probe_cu_name(f.pd.drv, rc, buf, 32));
    } else {
        recap__probe_say(out, "device 0, empty graphs: ");
        capture_to_graph(&f);
        recap__probe_say(out, "; ");
        conditional_nodes(&f);
        recap__probe_say(out, "; ");
        device_launch(&f);
        recap__probe_say(out, "; ");
        upload(&f);
        f.pd.drv->cuStreamDestroy(f.s);
    }
    recap__probe_leave(&f.pd);
}
