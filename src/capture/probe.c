/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>

#include "base/dl.h"
#include "base/error.h"
#include "base/log.h"
#include "capture/capture.h"
#include "driver/driver.h"

/*
 * The registration probe: does a capture in this process reject a draw on a generator nobody
 * registered? It begins and ends the capture through the symbols the process itself resolves
 * (an LD_PRELOAD hook answers there), so it sees what the host's own captures would see.
 */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static int probe_done, probe_needs;

/* The probe runs a capture, whose events reach the subscribers' callbacks with the lock held
 * by their thread: one of them may fork (the handlers then leave the lock to that thread) or ask
 * for the probe again (refused). */
static __thread int probing;
static __thread int fork_took; /* this thread, forking, took the lock before the fork */

void recap__capture_probe_atfork(recap__atfork_t when)
{
    if (when == RECAP_ATFORK_PREPARE)
        fork_took = !probing;
    if (fork_took)
        recap__atfork_mutex(&probe_lock, when);
}

typedef CUresult (*begin_fn)(CUstream, CUstreamCaptureMode);
typedef CUresult (*end_fn)(CUstream, CUgraph *);
typedef CUresult (*destroy_fn)(CUgraph);

static void *process_symbol(const char *name, void *fallback)
{
    void *p = recap__dlsym(RTLD_DEFAULT, name);

    return p != NULL ? p : fallback;
}

static recap_status_t run_probe(int *needs_p)
{
    const recap__driver_t *drv;
    begin_fn begin;
    end_fn end;
    destroy_fn destroy;
    recap_generator_h gen = NULL;
    recap_stream_t stream = NULL;
    recap_philox_args_t args;
    recap_status_t st, draw;
    CUgraph graph = NULL;
    CUresult rc;

    st = recap__driver_graphs(&drv);
    if (st != RECAP_OK)
        return st;
    begin = (begin_fn)process_symbol("cuStreamBeginCapture_v2", (void *)drv->cuStreamBeginCapture);
    end = (end_fn)process_symbol("cuStreamEndCapture", (void *)drv->cuStreamEndCapture);
    destroy = (destroy_fn)process_symbol("cuGraphDestroy", (void *)drv->cuGraphDestroy);
    st = recap_generator_create(0, &gen);
    if (st == RECAP_OK)
        st = recap_stream_create(0, &stream);
    if (st != RECAP_OK)
        goto out;
    rc = begin((CUstream)stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (rc != CUDA_SUCCESS) {
        st = recap__cuda_fail(rc, "probe: cuStreamBeginCapture");
        goto out;
    }
    draw = recap_generator_reserve(gen, stream, 4, &args);
    rc = end((CUstream)stream, &graph);
    if (rc == CUDA_SUCCESS && graph != NULL)
        destroy(graph);
    /* Whatever a hook saw of this capture, recap's own records must not outlive it. */
    recap_capture_ended(stream, NULL);
    if (draw != RECAP_OK && draw != RECAP_ERR_NOT_REGISTERED) {
        st = draw;
        goto out;
    }
    *needs_p = draw == RECAP_ERR_NOT_REGISTERED;
    recap__log(RECAP_LOG_INFO, "registration probe: %s", *needs_p ? "explicit registration "
               "needed (no hook active)" : "hooks register generators automatically");
out:
    if (stream != NULL)
        recap_stream_destroy(stream);
    if (gen != NULL)
        recap_generator_destroy(gen);
    return st;
}

recap_status_t recap_capture_needs_registration(int *needs_p)
{
    recap_status_t st = RECAP_OK;

    RECAP_CHECK_ARG(needs_p != NULL, "needs_p is NULL");
    if (probing)
        return recap__fail(RECAP_ERR_STATE, "recap_capture_needs_registration from inside the "
                           "registration probe's own capture (a capture subscriber's callback)");
    pthread_mutex_lock(&probe_lock);
    probing = 1;
    if (!probe_done) {
        st = run_probe(&probe_needs);
        probe_done = st == RECAP_OK;
    }
    if (st == RECAP_OK)
        *needs_p = probe_needs;
    probing = 0;
    pthread_mutex_unlock(&probe_lock);
    return st;
}
