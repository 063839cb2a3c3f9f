/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL and the driver calls the NCCL operations need, resolved at run time. librecap has no
 * build-time dependency on NCCL: an engine that distributes checkpoint inputs has NCCL loaded
 * already (its communicator comes from it), and every other program never loads it.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dl.h"
#include "base/error.h"
#include "base/log.h"
#include "base/text.h"
#include "driver/driver.h"
#include "nccl/nccl.h"

#define NCCL_SONAME "libnccl.so.2"

static recap__nccl_lib_t lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static recap_status_t lib_status = RECAP_ERR_UNSUPPORTED;
/* Sized to what they hold: RECAP_NCCL_LIB names any path, and a cut one would name another
 * file. Set once, under lib_once; kept for the process (the library stays loaded too). */
static char *lib_why;
static const char *lib_path = NCCL_SONAME;

#define why(...) (lib_why = recap__text_printf(__VA_ARGS__))

static const struct {
    size_t offset;
    const char *name;
    int optional;
} lib_syms[] = {
    {offsetof(recap__nccl_lib_t, AllGather), "ncclAllGather", 0},
    {offsetof(recap__nccl_lib_t, GetErrorString), "ncclGetErrorString", 0},
    {offsetof(recap__nccl_lib_t, CommCount), "ncclCommCount", 0},
    {offsetof(recap__nccl_lib_t, CommUserRank), "ncclCommUserRank", 0},
    {offsetof(recap__nccl_lib_t, CommCuDevice), "ncclCommCuDevice", 0},
    {offsetof(recap__nccl_lib_t, CommGetAsyncError), "ncclCommGetAsyncError", 1},
};

/* The engine's NCCL first: a communicator may only be used by the library that created it, and a
 * second copy of NCCL in the process would not know it. */
static void *open_nccl(void)
{
    const char *over = getenv("RECAP_NCCL_LIB");
    void *h;

    if (over != NULL && *over != '\0') {
        char *path = strdup(over);

        if (path == NULL) {
            why("out of memory for the name of RECAP_NCCL_LIB");
            return NULL;
        }
        lib_path = path;
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            why("cannot load %s (RECAP_NCCL_LIB, in place of " NCCL_SONAME "): %s", path,
                dlerror());
        return h;
    }
    h = dlopen(NCCL_SONAME, RTLD_NOW | RTLD_NOLOAD);
    if (h != NULL) {
        recap__log(RECAP_LOG_INFO, "using the process's %s", NCCL_SONAME);
        return h;
    }
    h = dlopen(NCCL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        why("cannot load " NCCL_SONAME " (NCCL, needed to distribute checkpoint inputs): %s",
            dlerror());
    return h;
}

static void lib_load(void)
{
    void *h = open_nccl();
    recap__nccl_result_t (*get_version)(int *);
    size_t i;

    if (h == NULL)
        return;
    lib.path = lib_path;
    for (i = 0; i < sizeof(lib_syms) / sizeof(lib_syms[0]); i++) {
        void *sym = recap__dlsym(h, lib_syms[i].name);

        if (sym == NULL && !lib_syms[i].optional) {
            why("%s lacks %s (not an NCCL 2 library like " NCCL_SONAME "?)", lib_path,
                lib_syms[i].name);
            return; /* left open: a library the engine may use is never unloaded */
        }
        memcpy((char *)&lib + lib_syms[i].offset, &sym, sizeof(sym));
    }
    *(void **)&get_version = recap__dlsym(h, "ncclGetVersion");
    if (get_version == NULL || get_version(&lib.version) != RECAP__NCCL_SUCCESS)
        lib.version = 0;
    lib_status = RECAP_OK;
    recap__log(RECAP_LOG_INFO, "loaded NCCL %d from %s", lib.version, lib_path);
}

recap_status_t recap__nccl_lib_get(const recap__nccl_lib_t **lib_p)
{
    pthread_once(&lib_once, lib_load);
    if (lib_status != RECAP_OK)
        return recap__fail(lib_status, "%s",
                           lib_why != NULL ? lib_why : "NCCL could not be loaded (no memory "
                                                       "to say why)");
    *lib_p = &lib;
    return RECAP_OK;
}

recap_status_t recap_nccl_version(int *version_p)
{
    const recap__nccl_lib_t *l;
    recap_status_t st;

    RECAP_CHECK_ARG(version_p != NULL, "version_p is NULL");
    st = recap__nccl_lib_get(&l);
    if (st == RECAP_OK)
        *version_p = l->version;
    return st;
}

recap_status_t recap__nccl_result(const recap__nccl_lib_t *l, void *comm, recap__nccl_result_t rc,
                                  const char *what)
{
    const char *text;

    /* A non-blocking communicator answers ncclInProgress; the call is done when its
     * asynchronous error says so (NCCL's documented polling loop). */
    while (rc == RECAP__NCCL_IN_PROGRESS && l->CommGetAsyncError != NULL) {
        recap__nccl_result_t async = RECAP__NCCL_SUCCESS, prc;

        prc = l->CommGetAsyncError(comm, &async);
        rc = prc != RECAP__NCCL_SUCCESS ? prc : async;
        if (rc == RECAP__NCCL_IN_PROGRESS)
            sched_yield();
    }
    if (rc == RECAP__NCCL_SUCCESS)
        return RECAP_OK;
    text = l->GetErrorString(rc);
    return recap__fail(rc == RECAP__NCCL_INVALID_ARGUMENT || rc == RECAP__NCCL_INVALID_USAGE
                           ? RECAP_ERR_INVALID_ARG : RECAP_ERR_CUDA,
                       "%s: %s (ncclResult_t %d)", what, text != NULL ? text : "?", rc);
}

/* ---------------------------------------------------------------- device memory */

typedef CUresult (*dtod_fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static dtod_fn dtod;
static pthread_once_t dtod_once = PTHREAD_ONCE_INIT;

/* Not in the driver table (src/driver) because only this module copies device to device. */
static void find_dtod(void)
{
    void *h = recap__driver_lib();

    if (h != NULL)
        *(void **)&dtod = recap__dlsym(h, "cuMemcpyDtoDAsync_v2");
}

recap_status_t recap__nccl_ptr_device(int device, const void *ptr, int *owner_p)
{
    const recap__driver_t *drv;
    const recap__device_t *dev;
    int pushed, owner;
    recap_status_t st = recap__device_enter(device, &dev, &drv, &pushed);

    if (st != RECAP_OK)
        return st;
    owner = recap__pointer_device(drv, ptr);
    recap__ctx_leave(pushed);
    if (owner < 0)
        return recap__fail(RECAP_ERR_INVALID_ARG, "%p is not CUDA device memory (NCCL moves "
                           "device buffers only)", ptr);
    *owner_p = owner;
    return RECAP_OK;
}

/* Without cuMemcpyDtoDAsync (only the CUDA test double lacks it) the copy goes through host
 * memory after the stream's earlier work: slower and synchronous, but the same bytes. */
static recap_status_t staged_copy(const recap__driver_t *drv, void *dst, const void *src,
                                  size_t bytes, recap_stream_t stream)
{
    void *tmp = malloc(bytes);
    CUresult rc;

    if (tmp == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "staging %zu bytes", bytes);
    rc = drv->cuStreamSynchronize((CUstream)stream);
    if (rc == CUDA_SUCCESS)
        rc = drv->cuMemcpyDtoH(tmp, (CUdeviceptr)(uintptr_t)src, bytes);
    if (rc == CUDA_SUCCESS)
        rc = drv->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, tmp, bytes);
    free(tmp);
    return rc == CUDA_SUCCESS ? RECAP_OK : recap__cuda_fail(rc, "staged device copy");
}

recap_status_t recap__nccl_copy(int device, void *dst, const void *src, size_t bytes,
                                recap_stream_t stream, int *staged_p)
{
    const recap__driver_t *drv;
    const recap__device_t *dev;
    recap_status_t st;
    int pushed;
    CUresult rc;

    *staged_p = 0;
    if (bytes == 0)
        return recap__driver_get(&drv);
    st = recap__device_enter(device, &dev, &drv, &pushed);
    if (st != RECAP_OK)
        return st;
    pthread_once(&dtod_once, find_dtod);
    if (dtod != NULL) {
        rc = dtod((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes,
                  (CUstream)stream);
        st = rc == CUDA_SUCCESS ? RECAP_OK : recap__cuda_fail(rc, "cuMemcpyDtoDAsync");
    } else {
        st = staged_copy(drv, dst, src, bytes, stream);
        *staged_p = 1;
    }
    recap__ctx_leave(pushed);
    return st;
}
