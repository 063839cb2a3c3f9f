/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double: streams. */
#include "tests/double/double.h"

/* Resolves a stream handle (lock held): *out = NULL for the legacy stream. `per_thread`: the call
 * came through a _ptsz export, where NULL names the calling thread's default stream. */
CUresult resolve_locked(CUstream s, int per_thread, double_stream_t **out)
{
    if (s == CU_STREAM_LEGACY || (s == NULL && !per_thread)) {
        *out = NULL;
        return CUDA_SUCCESS;
    }
    if (s == NULL || s == CU_STREAM_PER_THREAD) {
        if (ptds.cap == NULL)
            ptds.device = ctx_device(current());
        ptds.alive = 1;
        *out = &ptds;
        return CUDA_SUCCESS;
    }
    for (double_stream_t *st = streams; st != NULL; st = st->next)
        if (st == (double_stream_t *)s) {
            *out = st;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_HANDLE;
}

int stream_device_of(const double_stream_t *st)
{
    return st == NULL ? ctx_device(current()) : st->device;
}

void capture_unlink_locked(double_capture_t *cap)
{
    double_capture_t **pp;

    for (pp = &captures; *pp != NULL; pp = &(*pp)->next)
        if (*pp == cap) {
            *pp = cap->next;
            break;
        }
    cap->stream->cap = NULL;
}

RECAP_API CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
    double_stream_t *st;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (s == NULL || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    st = calloc(1, sizeof(*st));
    if (st == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    st->device = ctx_device(current());
    st->alive = 1;
    st->flags = flags;
    pthread_mutex_lock(&lock);
    st->next = streams;
    streams = st;
    pthread_mutex_unlock(&lock);
    *s = (CUstream)st;
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuStreamDestroy_v2(CUstream s)
{
    double_stream_t **pp;

    NEED_INIT();
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    for (pp = &streams; *pp != NULL; pp = &(*pp)->next)
        if (*pp == (double_stream_t *)s)
            break;
    if (*pp == NULL) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *pp = (*pp)->next;
    if (((double_stream_t *)s)->cap != NULL) { /* the capture dies with its stream */
        double_capture_t *cap = ((double_stream_t *)s)->cap;
        capture_unlink_locked(cap);
        graph_free_locked(cap->graph);
        free(cap);
    }
    pthread_mutex_unlock(&lock);
    free(s);
    return CUDA_SUCCESS;
}

static CUresult stream_synchronize(CUstream s, int per_thread)
{
    double_stream_t *st;
    CUresult rc;

    pthread_mutex_lock(&lock);
    land_copies_locked();
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS) {
        if (st != NULL && st->cap != NULL) {
            st->cap->invalidated = 1;
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        } else {
            rc = unsafe_call_locked();
            if (rc == CUDA_SUCCESS && st == NULL)
                rc = legacy_use_locked(ctx_device(current()), 1);
        }
    }
    pthread_mutex_unlock(&lock);
    return rc; /* work runs at submission */
}

RECAP_API CUresult cuStreamSynchronize(CUstream s)
{
    NEED_INIT();
    return stream_synchronize(s, 0);
}

RECAP_API CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    NEED_INIT();
    return stream_synchronize(s, 1);
}

RECAP_API CUresult cuCtxSynchronize(void)
{
    CUresult rc;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    land_copies_locked();
    rc = CUDA_SUCCESS;
    for (double_capture_t *c = captures; c != NULL; c = c->next)
        if (c->stream->device == ctx_device(current())) {
            c->invalidated = 1;
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    pthread_mutex_unlock(&lock);
    return rc;
}

static CUresult stream_get_ctx(CUstream s, CUcontext *c, int per_thread)
{
    double_stream_t *st;
    CUresult rc;

    if (c == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS && st != NULL && st->cap != NULL && st->cap->invalidated)
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    pthread_mutex_unlock(&lock);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (st == NULL || st == &ptds) {
        *c = current();
        return *c == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
    }
    *c = (CUcontext)&primary[st->device];
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuStreamGetCtx(CUstream s, CUcontext *c)
{
    NEED_INIT();
    return stream_get_ctx(s, c, 0);
}

RECAP_API CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext *c)
{
    NEED_INIT();
    return stream_get_ctx(s, c, 1);
}
