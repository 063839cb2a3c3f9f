/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How programs find the driver without linking it: the CUDA runtime (static or shared, >= 11.3)
 * dlopens libcuda, dlsym()s cuGetProcAddress, and asks it for every entry point. recap
 * interposes both: dlsym hands out recap's cuGetProcAddress (and recap's wrappers when a graph
 * entry point is asked for by name), and cuGetProcAddress swaps in recap's wrapper exactly when
 * the driver answered with a variant recap wraps. Any other answer, a future version included,
 * is passed on untouched.
 */
#define _GNU_SOURCE
#define __CUDA_API_VERSION_INTERNAL
#include "config.h"

#include <cuda.h>
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "base/dl.h"
#include "hooks/hooks.h"
#include "hooks/lookup.h"
#include "hooks/preload_driver.h"

typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t,
                            CUdriverProcAddressQueryResult *);

RECAP_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
RECAP_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult *status);

/* The wrapper of the exported variant the driver returned, or NULL. */
static void *wrapper_for(const char *base, void *real)
{
    unsigned i;

    if (real == NULL || base == NULL || strncmp(base, "cu", 2) != 0)
        return NULL;
    for (i = 0; i < recap__ndriver_hooks; i++)
        if (strcmp(recap__driver_hooks[i].base, base) == 0 &&
            recap__hooks_real_driver(recap__driver_hooks[i].symbol) == real)
            return recap__driver_hooks[i].wrapper;
    return NULL;
}

/* Swaps the answer for recap's wrapper when there is one (and for recap's own cuGetProcAddress
 * when the program asks for that). */
static void swap_answer(const char *symbol, void **pfn)
{
    void *w;

    if (pfn == NULL || *pfn == NULL || symbol == NULL || !recap__hooks_preload_enabled())
        return;
    if (strcmp(symbol, "cuGetProcAddress") == 0) {
        if (*pfn == recap__hooks_real_driver("cuGetProcAddress_v2"))
            *pfn = (void *)cuGetProcAddress_v2;
        else if (*pfn == recap__hooks_real_driver("cuGetProcAddress"))
            *pfn = (void *)cuGetProcAddress;
        return;
    }
    w = wrapper_for(symbol, *pfn);
    if (w != NULL)
        *pfn = w;
}

RECAP_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    static gpa1_fn real_s;
    gpa1_fn real = __atomic_load_n(&real_s, __ATOMIC_ACQUIRE);
    CUresult rc;

    if (real == NULL) {
        real = (gpa1_fn)recap__hooks_real_driver("cuGetProcAddress");
        __atomic_store_n(&real_s, real, __ATOMIC_RELEASE);
    }
    if (real == NULL)
        return CUDA_ERROR_NOT_FOUND;
    rc = real(symbol, pfn, version, flags);
    if (rc == CUDA_SUCCESS)
        swap_answer(symbol, pfn);
    return rc;
}

RECAP_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    static gpa2_fn real_s;
    gpa2_fn real = __atomic_load_n(&real_s, __ATOMIC_ACQUIRE);
    CUresult rc;

    if (real == NULL) {
        real = (gpa2_fn)recap__hooks_real_driver("cuGetProcAddress_v2");
        __atomic_store_n(&real_s, real, __ATOMIC_RELEASE);
    }
    if (real == NULL)
        return CUDA_ERROR_NOT_FOUND;
    rc = real(symbol, pfn, version, flags, status);
    if (rc == CUDA_SUCCESS)
        swap_answer(symbol, pfn);
    return rc;
}

/* Whether recap's export of `name` wraps a driver entry point (else a runtime one). */
static int driver_name(const char *name)
{
    unsigned i;

    if (strcmp(name, "cuGetProcAddress") == 0 || strcmp(name, "cuGetProcAddress_v2") == 0)
        return 1;
    for (i = 0; i < recap__ndriver_hooks; i++)
        if (strcmp(recap__driver_hooks[i].symbol, name) == 0)
            return 1;
    return 0;
}

/* What dlsym answers for a CUDA name librecap exports: the answer the process would get without
 * recap (lookup.c), then, while the preload front end works (`own` is recap's export),
 * recap's entry point in its place where that answer is the function recap's forwards to (the
 * loaded driver's for a driver name, whatever the handle; the runtime's for RTLD_DEFAULT, the
 * lookup a preloaded definition wins), or where RTLD_DEFAULT finds nothing while a loaded driver
 * or runtime defines the name (loaded RTLD_LOCAL). A process without CUDA sees no CUDA symbol,
 * and no lookup loads or initializes anything. */
static void *interposed_dlsym(void *handle, const char *name, const void *caller, void *own)
{
    void *p = recap__lookup_without_recap(handle, name, caller), *real;

    if (own == NULL)
        return p;
    if (p == NULL && handle != RTLD_DEFAULT)
        return NULL;
    if (driver_name(name)) {
        real = recap__lookup_loaded_driver(name);
        if (real != NULL && (p == real || (p == NULL && handle == RTLD_DEFAULT)))
            return own;
        return p;
    }
    if (handle == RTLD_DEFAULT && (real = recap__lookup_runtime(name)) != NULL &&
        (p == real || p == NULL))
        return own;
    return p;
}

/* Cached per call site until the next dlopen or dlclose: a shim's dlsym(RTLD_NEXT) on every
 * call costs a lookup in a small table. */
static void *cached_dlsym(void *handle, const char *name, const void *caller, void *own)
{
    recap_lookup_gen_t gen = recap__lookup_generation();
    void *p;

    if (!recap__lookup_cache_get(gen, handle, caller, name, &p)) {
        p = interposed_dlsym(handle, name, caller, own);
        recap__lookup_cache_put(gen, handle, caller, name, p);
    }
    recap__lookup_set_dlerror(name, p);
    return p;
}

/*
 * Every name librecap does not export goes to libc's dlsym by a tail call, so glibc sees the
 * caller's return address and resolves RTLD_NEXT and RTLD_DEFAULT exactly as without recap. That
 * path runs while sanitizer runtimes initialize (they resolve their interceptors through
 * dlsym(RTLD_NEXT) before any constructor has run), where opening a library would run
 * constructors early. Without optimization the tail call is not guaranteed: librecap's view
 * answers then.
 */
#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(musttail)
#define RECAP_TAIL_RETURN __attribute__((musttail)) return
#define RECAP_TAIL_FN
#endif
#elif defined(__GNUC__) && defined(__OPTIMIZE__)
#define RECAP_TAIL_RETURN return
#define RECAP_TAIL_FN __attribute__((optimize("optimize-sibling-calls")))
#endif

RECAP_API void *dlsym(void *handle, const char *name);
RECAP_NO_SANITIZE_EARLY RECAP_API RECAP_TAIL_FN void *dlsym(void *handle, const char *name)
{
    void *own;

    if (name[0] == 'c' && name[1] == 'u' && (own = recap__lookup_own(name)) != NULL)
        return cached_dlsym(handle, name, __builtin_return_address(0),
                            recap__hooks_preload_enabled() ? own : NULL);
#ifdef RECAP_TAIL_RETURN
    RECAP_TAIL_RETURN recap__real_dlsym()(handle, name);
#else
    /* Unoptimized builds: librecap's view stands in for the caller's (RTLD_NEXT never answers
     * the caller's own definition). No library is opened: this runs while sanitizer runtimes
     * start, before constructors. */
    {
        void *p = recap__dlsym(handle, name);
        Dl_info a, b;

        if (handle == RTLD_NEXT && p != NULL && dladdr(p, &a) != 0 &&
            dladdr(__builtin_return_address(0), &b) != 0 && a.dli_fbase == b.dli_fbase)
            p = NULL;
        return p;
    }
#endif
}
