/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/dl.h"
#include "base/error.h"
#include "base/log.h"
#include "base/text.h"
#include "driver/driver.h"

static recap__driver_t driver;
static void *driver_lib;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static recap_status_t driver_status = RECAP_ERR_NO_DRIVER;
static char *driver_why; /* sized to fit: RECAP_CUDA_DRIVER names any path */

/* The table driver_load resolves, made from the one list (driver/entry_points.h). */
enum { DRV_REQUIRED, DRV_GRAPHS, DRV_EXTRA };
static const struct {
    void **slot;
    const char *name;
    int kind;
} driver_syms[] = {
#define DRIVER_SYM(kind, field, symbol, params) {(void **)&driver.field, symbol, DRV_##kind},
    RECAP__DRIVER_ENTRY_POINTS(DRIVER_SYM)
#undef DRIVER_SYM
};

static void driver_load(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    void *lib;
    size_t i;
    CUresult rc;

    if (path == NULL || *path == '\0')
        path = "libcuda.so.1";
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    driver_lib = lib;
    if (lib == NULL) {
        driver_why = recap__text_printf("cannot load %s: %s", path, dlerror());
        return;
    }
    for (i = 0; i < sizeof(driver_syms) / sizeof(driver_syms[0]); i++) {
        *driver_syms[i].slot = recap__dlsym(lib, driver_syms[i].name);
        if (*driver_syms[i].slot == NULL && driver_syms[i].kind != DRV_REQUIRED)
            continue;
        if (*driver_syms[i].slot == NULL) {
            driver_why = recap__text_printf("%s lacks %s", path, driver_syms[i].name);
            return; /* the handle stays open: unloading a driver is never worth the risk */
        }
    }
    driver.has_graphs = 1;
    for (i = 0; i < sizeof(driver_syms) / sizeof(driver_syms[0]); i++)
        if (driver_syms[i].kind == DRV_GRAPHS && *driver_syms[i].slot == NULL)
            driver.has_graphs = 0;
    rc = driver.cuInit(0);
    if (rc != CUDA_SUCCESS) {
        const char *name = "?";
        driver.cuGetErrorName(rc, &name);
        driver_why = recap__text_printf("cuInit failed: %s", name);
        return;
    }
    driver_status = RECAP_OK;
    recap__log(RECAP_LOG_INFO, "loaded CUDA driver %s", path);
}

void *recap__driver_lib(void)
{
    pthread_once(&driver_once, driver_load);
    return driver_lib;
}

recap_status_t recap__driver_get(const recap__driver_t **drv_p)
{
    pthread_once(&driver_once, driver_load);
    if (driver_status != RECAP_OK)
        return recap__fail(driver_status, "%s",
                           driver_why != NULL ? driver_why : "the CUDA driver could not be "
                                                             "loaded (no memory to say why)");
    *drv_p = &driver;
    return RECAP_OK;
}

recap_status_t recap__driver_graphs(const recap__driver_t **drv_p)
{
    recap_status_t st = recap__driver_get(drv_p);

    if (st == RECAP_OK && !(*drv_p)->has_graphs)
        return recap__fail(RECAP_ERR_UNSUPPORTED, "this CUDA driver lacks the stream capture / "
                           "graph API recap uses (CUDA >= 11.3 needed)");
    return st;
}

recap_status_t recap__cuda_fail(CUresult rc, const char *what)
{
    const char *name = "unknown CUresult";

    if (driver.cuGetErrorName != NULL)
        driver.cuGetErrorName(rc, &name);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY)
        return recap__fail(RECAP_ERR_NO_MEMORY, "%s: %s", what, name);
    return recap__fail(RECAP_ERR_CUDA, "%s: %s (%d)", what, name, (int)rc);
}

recap_status_t recap_driver_version(int *version_p)
{
    const recap__driver_t *drv;
    recap_status_t st;
    CUresult rc;
    int v;

    RECAP_CHECK_ARG(version_p != NULL, "version_p is NULL");
    st = recap__driver_get(&drv);
    if (st != RECAP_OK)
        return st;
    rc = drv->cuDriverGetVersion(&v);
    if (rc != CUDA_SUCCESS)
        return recap__cuda_fail(rc, "cuDriverGetVersion");
    *version_p = v;
    return RECAP_OK;
}
