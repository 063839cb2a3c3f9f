/* SPDX-License-Identifier: Apache-2.0 */
#include "tests/double/double.h"

/*
 * The capture rules.
 *
 * What the real driver does (cuThreadExchangeStreamCaptureMode in cuda.h; each rule below was
 * observed with tests/double/probe_rules.c on driver 580.159, CUDA 13.0):
 *  - A "potentially unsafe" call (cuMemAlloc, cuMemFree, cuStreamSynchronize of a stream that is
 *    not capturing, the legacy stream included, cuGraphInstantiate*, cuGraphExecDestroy) is
 *    prohibited for a thread whose interaction
 *    mode is not RELAXED if the thread itself has a capture in progress that was not begun
 *    RELAXED, or, for a thread in GLOBAL mode, if any thread has a GLOBAL capture in progress
 *    (an invalidated capture not yet ended still counts). The call fails with
 *    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates those captures.
 *  - cuCtxSynchronize while any stream of the context captures fails the same way whatever the
 *    modes, and invalidates every such capture; synchronizing a capturing stream invalidates
 *    its capture.
 *  - Work on the legacy NULL stream (launches, async and synchronous copies and memsets, graph
 *    launches, synchronization) while a blocking stream (created without
 *    CU_STREAM_NON_BLOCKING, or a per-thread default stream) of the same context captures fails
 *    with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidates those captures. With only
 *    non-blocking streams capturing, synchronous copies and memsets are allowed in any mode, and
 *    so is cuModuleLoadData.
 *  - Work into an invalidated capture fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, and so
 *    does cuStreamGetCtx on its stream (as the 580 driver answers on an H200).
 *  - cuGraphLaunch and cuGraphUpload into a capturing stream fail with
 *    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the capture.
 *  - Graph calls other than those (create, clone, destroy, node queries and additions, launches
 *    on other streams) and stream creation and destruction are allowed in every mode.
 *  - cuStreamEndCapture from another thread than the one that began a GLOBAL or THREAD_LOCAL
 *    capture fails with CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, returns no graph, and ends the
 *    capture all the same. The 1-argument cuStreamBeginCapture forms capture RELAXED.
 */

static int prohibits_locked(const double_capture_t *c)
{
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED || c->mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return 0;
    if (pthread_equal(c->thread, pthread_self()))
        return 1;
    return thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

CUresult unsafe_call_locked(void)
{
    CUresult rc = CUDA_SUCCESS;

    for (double_capture_t *c = captures; c != NULL; c = c->next)
        if (prohibits_locked(c)) {
            c->invalidated = 1;
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    return rc;
}

CUresult unsafe_call(void)
{
    CUresult rc;

    pthread_mutex_lock(&lock);
    rc = unsafe_call_locked();
    pthread_mutex_unlock(&lock);
    return rc;
}

static int blocking_capture(const double_capture_t *c, int device)
{
    return (c->stream->flags & CU_STREAM_NON_BLOCKING) == 0 && c->stream->device == device;
}

/* Work submitted to the legacy stream of `device`; invalidate = 0 for queries. */
CUresult legacy_use_locked(int device, int invalidate)
{
    CUresult rc = CUDA_SUCCESS;

    for (double_capture_t *c = captures; c != NULL; c = c->next)
        if (blocking_capture(c, device)) {
            if (invalidate)
                c->invalidated = 1;
            rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
    return rc;
}
