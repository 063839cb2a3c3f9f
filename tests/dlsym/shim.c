/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A CUDA-intercepting shim as tools write them: it defines cuGetProcAddress_v2 and cuGraphLaunch
 * and forwards each to dlsym(RTLD_NEXT, its name). Loaded as a dependency of a dlopen'ed plugin
 * (tests/dlsym/plugin.c). If RTLD_NEXT ever answers the shim itself, it says so and fails
 * instead of recursing until the stack overflows.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#define EXPORT __attribute__((visibility("default")))

typedef int (*gpa_fn)(const char *, void **, int, unsigned long long, int *);

static __thread int depth;

static int shim_gpa(const char *symbol, void **pfn, int version, unsigned long long flags,
                    int *status)
{
    gpa_fn next = (gpa_fn)dlsym(RTLD_NEXT, "cuGetProcAddress_v2");
    int rc;

    if (next == NULL)
        return -1;
    if (next == shim_gpa || depth > 0) {
        fprintf(stderr, "shim: dlsym(RTLD_NEXT) answered the shim's own function\n");
        return -2;
    }
    depth++;
    rc = next(symbol, pfn, version, flags, status);
    depth--;
    return rc;
}

EXPORT int cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                               unsigned long long flags, int *status)
    __attribute__((alias("shim_gpa")));

/* The same for a graph entry point, which recap wraps too. */
typedef int (*launch_fn)(void *, void *);

static int shim_launch(void *exec, void *stream)
{
    launch_fn next = (launch_fn)dlsym(RTLD_NEXT, "cuGraphLaunch");
    int rc;

    if (next == NULL)
        return -1;
    if (next == shim_launch || depth > 0) {
        fprintf(stderr, "shim: dlsym(RTLD_NEXT) answered the shim's own function\n");
        return -2;
    }
    depth++;
    rc = next(exec, stream);
    depth--;
    return rc;
}

EXPORT int cuGraphLaunch(void *exec, void *stream) __attribute__((alias("shim_launch")));
EXPORT int dlsym_shim_launch(void *exec, void *stream);

EXPORT int dlsym_shim_launch(void *exec, void *stream)
{
    return shim_launch(exec, stream);
}

EXPORT int dlsym_shim_gpa(const char *symbol, void **pfn);
EXPORT int dlsym_shim_driver_version(int *v);
int cuDriverGetVersion(int *v);

/* A reference to the driver, so the link keeps the shim's dependency on it (as a shim that calls
 * some driver entry points directly has one). */
EXPORT int dlsym_shim_driver_version(int *v)
{
    return cuDriverGetVersion(v);
}

/* The plugin's way in (a preloaded library's definition of cuGetProcAddress_v2 would win the
 * plugin's own reference to that name). */
EXPORT int dlsym_shim_gpa(const char *symbol, void **pfn)
{
    int status = 0;

    return shim_gpa(symbol, pfn, 12000, 0, &status);
}
