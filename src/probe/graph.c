/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>

#include "base/error.h"
#include "probe/probe.h"

/*
 * Graph features, each tried for real on device 0. A feature this driver does not offer (too
 * old, entry point missing) is reported as "no" and is not a failure; a feature it offers that
 * then does not work is. Capture-to-graph and conditional handles work on an empty graph;
 * device launch and upload on a graph of one captured memset node, because a graph for device
 * launch may not be empty, and a graph that runs after its upload proves the upload.
 */

#define MEMSET_WORD 0x5eedu

typedef struct {
    recap__probe_dev_t pd;
    recap__probe_out_t *out;
    CUstream s;
    CUdeviceptr mem; /* 4 bytes the memset node writes, MEMSET_WORD */
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

/* Captures nothing into an existing graph: the capture must end with that same graph. */
static void capture_to_graph(feat_t *f)
{
    const recap__driver_t *drv = f->pd.drv;
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
    const recap__driver_t *drv = f->pd.drv;
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

/* A graph of one memset node, captured on the probe's stream. */
static CUresult memset_graph(feat_t *f, CUgraph *g, const char **call)
{
    const recap__driver_t *drv = f->pd.drv;
    CUresult rc, end;

    *g = NULL;
    *call = "cuStreamBeginCapture";
    rc = drv->cuStreamBeginCapture(f->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (rc != CUDA_SUCCESS)
        return rc;
    *call = "cuMemsetD32Async (captured)";
    rc = drv->cuMemsetD32Async(f->mem, MEMSET_WORD, 1, f->s);
    end = drv->cuStreamEndCapture(f->s, g); /* always: the stream must stop capturing */
    if (rc == CUDA_SUCCESS) {
        *call = "cuStreamEndCapture";
        rc = end;
    }
    if (rc != CUDA_SUCCESS && *g != NULL) {
        drv->cuGraphDestroy(*g);
        *g = NULL;
    }
    return rc;
}

/* Launches the memset graph's executable and checks that its node wrote the word (cleared
 * first on the same stream). A graph that ran but wrote nothing fails with CUDA_ERROR_UNKNOWN. */
static CUresult launch_and_check(feat_t *f, CUgraphExec e, const char **call)
{
    const recap__driver_t *drv = f->pd.drv;
    unsigned int word = 0;
    CUresult rc;

    *call = "cuMemsetD32Async";
    rc = drv->cuMemsetD32Async(f->mem, 0, 1, f->s);
    if (rc == CUDA_SUCCESS) {
        *call = "cuGraphLaunch";
        rc = drv->cuGraphLaunch(e, f->s);
    }
    if (rc == CUDA_SUCCESS) {
        *call = "cuStreamSynchronize";
        rc = drv->cuStreamSynchronize(f->s);
    }
    if (rc == CUDA_SUCCESS) {
        *call = "cuMemcpyDtoH";
        rc = drv->cuMemcpyDtoH(&word, f->mem, sizeof(word));
    }
    if (rc == CUDA_SUCCESS && word != MEMSET_WORD) {
        *call = "the launched graph's memset (word not written)";
        rc = CUDA_ERROR_UNKNOWN;
    }
    return rc;
}

/* Instantiates the memset graph with `flags`, uploads it, launches it from the host and waits. */
static void instantiate_upload_launch(feat_t *f, const char *name, unsigned long long flags)
{
    const recap__driver_t *drv = f->pd.drv;
    CUgraph g = NULL;
    CUgraphExec e = NULL;
    const char *call;
    CUresult rc = memset_graph(f, &g, &call);

    if (rc == CUDA_SUCCESS) {
        call = flags ? "cuGraphInstantiateWithFlags(DEVICE_LAUNCH)" : "cuGraphInstantiateWithFlags";
        rc = drv->cuGraphInstantiateWithFlags(&e, g, flags);
    }
    if (rc == CUDA_SUCCESS) {
        call = "cuGraphUpload";
        rc = drv->cuGraphUpload(e, f->s);
    }
    if (rc == CUDA_SUCCESS)
        rc = launch_and_check(f, e, &call);
    feature_result(f, name, call, rc);
    if (e != NULL)
        drv->cuGraphExecDestroy(e);
    if (g != NULL)
        drv->cuGraphDestroy(g);
}

/* Device launch is proven up to what a host can do: the graph instantiates for device launch,
 * uploads and runs. Launching it from a kernel would need a kernel built with cudadevrt. */
static void device_launch(feat_t *f)
{
    const recap__driver_t *drv = f->pd.drv;

    if (f->version < 12000)
        feature_no(f, "device launch", "driver older than 12.0");
    else if (f->cc_major < 7)
        feature_no(f, "device launch", "device older than sm_70");
    else if (drv->cuGraphUpload == NULL || drv->cuMemsetD32Async == NULL)
        feature_no(f, "device launch", "driver lacks cuGraphUpload or cuMemsetD32Async");
    else
        instantiate_upload_launch(f, "device launch", CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH);
}

static void upload(feat_t *f)
{
    const recap__driver_t *drv = f->pd.drv;

    if (drv->cuGraphUpload == NULL || drv->cuMemsetD32Async == NULL)
        feature_no(f, "upload", "driver lacks cuGraphUpload or cuMemsetD32Async");
    else
        instantiate_upload_launch(f, "upload", 0);
}

/* Driver version, compute capability, a private stream and 4 bytes of device memory. */
static CUresult feature_setup(feat_t *f)
{
    const recap__driver_t *drv = f->pd.drv;
    CUresult rc = drv->cuDriverGetVersion(&f->version);

    if (rc == CUDA_SUCCESS)
        rc = drv->cuDeviceGetAttribute(&f->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                       f->pd.dev);
    if (rc == CUDA_SUCCESS)
        rc = drv->cuMemAlloc(&f->mem, 4);
    if (rc == CUDA_SUCCESS)
        rc = drv->cuStreamCreate(&f->s, CU_STREAM_NON_BLOCKING);
    if (rc != CUDA_SUCCESS && f->mem != 0)
        drv->cuMemFree(f->mem);
    return rc;
}

void recap__probe_graph_features(recap__probe_out_t *out)
{
    feat_t f = {.out = out};
    char buf[32];
    CUresult rc;

    if (recap__probe_enter(&f.pd, out) != 0)
        return;
    rc = feature_setup(&f);
    if (rc != CUDA_SUCCESS) {
        recap__probe_fail(out, "setting up: %s", recap__probe_cu_name(f.pd.drv, rc, buf, 32));
    } else {
        recap__probe_say(out, "device 0: ");
        capture_to_graph(&f);
        recap__probe_say(out, "; ");
        conditional_nodes(&f);
        recap__probe_say(out, "; ");
        device_launch(&f);
        recap__probe_say(out, "; ");
        upload(&f);
        recap__probe_say(out, " (capture-to-graph and conditional handles on an empty graph; "
                         "device launch and upload: a one-memset graph instantiated, uploaded "
                         "and launched from the host)");
        f.pd.drv->cuStreamDestroy(f.s);
        f.pd.drv->cuMemFree(f.mem);
    }
    recap__probe_leave(&f.pd);
}
