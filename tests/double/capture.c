/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double: stream capture. */
#include "tests/double/double.h"

RECAP_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    CUstreamCaptureMode old;

    NEED_INIT();
    if (mode == NULL) /* (the real driver crashes) */
        return CUDA_ERROR_INVALID_VALUE;
    old = thread_mode; /* any value goes, as with the real driver; unknown ones act as THREAD_LOCAL */
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

static CUresult begin_capture(CUstream s, CUstreamCaptureMode mode, int per_thread)
{
    double_stream_t *st;
    double_capture_t *cap;
    CUresult rc;

    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS && st == NULL)
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (rc == CUDA_SUCCESS && st->cap != NULL)
        rc = CUDA_ERROR_ILLEGAL_STATE;
    if (rc == CUDA_SUCCESS && st->device < 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS) {
        cap = calloc(1, sizeof(*cap));
        if (cap == NULL || (cap->graph = graph_new_locked()) == NULL) {
            free(cap);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            cap->graph->capturing = 1;
            cap->id = ++capture_seq;
            cap->mode = mode;
            cap->thread = pthread_self();
            cap->stream = st;
            cap->next = captures;
            captures = cap;
            st->cap = cap;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

RECAP_API CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    NEED_INIT();
    return begin_capture(s, mode, 0);
}

RECAP_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
    NEED_INIT();
    return begin_capture(s, mode, 1);
}

/* The 1-argument forms of CUDA 10.0, before capture modes: they capture RELAXED. */
RECAP_API CUresult cuStreamBeginCapture(CUstream s)
{
    NEED_INIT();
    return begin_capture(s, CU_STREAM_CAPTURE_MODE_RELAXED, 0);
}

RECAP_API CUresult cuStreamBeginCapture_ptsz(CUstream s)
{
    NEED_INIT();
    return begin_capture(s, CU_STREAM_CAPTURE_MODE_RELAXED, 1);
}

static CUresult end_capture(CUstream s, CUgraph *out, int per_thread)
{
    double_stream_t *st;
    double_capture_t *cap;
    CUresult rc;

    if (out != NULL)
        *out = NULL;
    pthread_mutex_lock(&lock);
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS && (st == NULL || st->cap == NULL))
        rc = CUDA_ERROR_ILLEGAL_STATE;
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_unlock(&lock);
        return rc;
    }
    /* The capture ends whatever the outcome; its graph goes to the caller only on success. */
    cap = st->cap;
    capture_unlink_locked(cap);
    if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(cap->thread, pthread_self()))
        rc = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    else if (cap->invalidated)
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (rc != CUDA_SUCCESS || out == NULL) {
        graph_free_locked(cap->graph);
    } else {
        cap->graph->capturing = 0;
        *out = (CUgraph)cap->graph;
    }
    pthread_mutex_unlock(&lock);
    free(cap);
    return rc;
}

RECAP_API CUresult cuStreamEndCapture(CUstream s, CUgraph *out)
{
    NEED_INIT();
    return end_capture(s, out, 0);
}

RECAP_API CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *out)
{
    NEED_INIT();
    return end_capture(s, out, 1);
}

static CUresult capture_info(CUstream s, int per_thread, CUstreamCaptureStatus *status,
                             cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *ndeps)
{
    double_stream_t *st;
    CUresult rc;

    if (status == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS && st == NULL) {
        rc = legacy_use_locked(ctx_device(current()), 0);
        if (rc == CUDA_SUCCESS)
            *status = CU_STREAM_CAPTURE_STATUS_NONE;
    } else if (rc == CUDA_SUCCESS && st->cap == NULL) {
        *status = CU_STREAM_CAPTURE_STATUS_NONE;
    } else if (rc == CUDA_SUCCESS) {
        double_capture_t *cap = st->cap;
        double_graph_t *g = cap->graph;

        *status = cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
        if (!cap->invalidated) {
            if (id != NULL)
                *id = cap->id;
            /* linear graphs: the next node depends on the last one */
            if (graph != NULL)
                *graph = (CUgraph)g;
            if (deps != NULL)
                *deps = g->n > 0 ? (const CUgraphNode *)&g->ops[g->n - 1] : NULL;
            if (edges != NULL)
                *edges = NULL;
            if (ndeps != NULL)
                *ndeps = g->n > 0 ? 1 : 0;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

RECAP_API CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    NEED_INIT();
    return capture_info(s, 0, status, NULL, NULL, NULL, NULL, NULL);
}

RECAP_API CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status)
{
    NEED_INIT();
    return capture_info(s, 1, status, NULL, NULL, NULL, NULL, NULL);
}

RECAP_API CUresult cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id)
{
    NEED_INIT();
    return capture_info(s, 0, status, id, NULL, NULL, NULL, NULL);
}

RECAP_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id)
{
    NEED_INIT();
    return capture_info(s, 1, status, id, NULL, NULL, NULL, NULL);
}

RECAP_API CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                          CUgraph *graph, const CUgraphNode **deps, size_t *ndeps)
{
    NEED_INIT();
    return capture_info(s, 0, status, id, graph, deps, NULL, ndeps);
}

RECAP_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream s, CUstreamCaptureStatus *status,
                                               cuuint64_t *id, CUgraph *graph,
                                               const CUgraphNode **deps, size_t *ndeps)
{
    NEED_INIT();
    return capture_info(s, 1, status, id, graph, deps, NULL, ndeps);
}

RECAP_API CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                          CUgraph *graph, const CUgraphNode **deps,
                                          const CUgraphEdgeData **edges, size_t *ndeps)
{
    NEED_INIT();
    if (edges != NULL && deps == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return capture_info(s, 0, status, id, graph, deps, edges, ndeps);
}

RECAP_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream s, CUstreamCaptureStatus *status,
                                               cuuint64_t *id, CUgraph *graph,
                                               const CUgraphNode **deps,
                                               const CUgraphEdgeData **edges, size_t *ndeps)
{
    NEED_INIT();
    if (edges != NULL && deps == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return capture_info(s, 1, status, id, graph, deps, edges, ndeps);
}
