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
    static gpa1_fn real;
    CUresult rc;

    if (real == NULL)
        real = (gpa1_fn)recap__hooks_real_driver("cuGetProcAddress");
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
    static gpa2_fn real;
    CUresult rc;

    if (real == NULL)
        real = (gpa2_fn)recap__hooks_real_driver("cuGetProcAddress_v2");
    if (real == NULL)
        return CUDA_ERROR_NOT_FOUND;
    rc = real(symbol, pfn, version, flags, status);
    if (rc == CUDA_SUCCESS)
        swap_answer(symbol, pfn);
    return rc;
}

/* glibc resolves RTLD_DEFAULT and RTLD_NEXT relative to the calling object; asked through
 * recap's dlsym, the caller would be recap. So the caller's object is found from the return
 * address and its view is rebuilt: RTLD_NEXT searches the objects loaded after it, RTLD_DEFAULT
 * the global scope and then the caller's own dependency group (an extension loaded RTLD_LOCAL
 * sees its local group). */
RECAP_NO_SANITIZE_EARLY static struct link_map *caller_map(const void *caller)
{
    struct link_map *map = NULL;
    Dl_info info;

    if (dladdr1(caller, &info, (void **)&map, RTLD_DL_LINKMAP) == 0)
        return NULL;
    return map;
}

RECAP_NO_SANITIZE_EARLY static void *in_object(struct link_map *map, const char *name)
{
    void *h = recap__dlopen(map->l_name[0] ? map->l_name : NULL, RTLD_LAZY | RTLD_NOLOAD);
    void *p = NULL;

    if (h != NULL) {
        p = recap__dlsym(h, name);
        recap__dlclose(h);
    }
    return p;
}

RECAP_NO_SANITIZE_EARLY static void *next_after(const void *caller, const char *name)
{
    struct link_map *map = caller_map(caller);
    void *p = NULL;

    if (map == NULL)
        return recap__dlsym(RTLD_DEFAULT, name);
    for (map = map->l_next; map != NULL && p == NULL; map = map->l_next)
        p = in_object(map, name);
    return p;
}

RECAP_NO_SANITIZE_EARLY static void *default_for(const void *caller, const char *name)
{
    void *p = recap__dlsym(RTLD_DEFAULT, name);
    struct link_map *map;

    if (p == NULL && (map = caller_map(caller)) != NULL)
        p = in_object(map, name);
    return p;
}

/* What dlsym answers for a driver entry point while the preload front end works: the lookup
 * as the caller would have made it, then recap's entry point in place of the driver's. */
RECAP_NO_SANITIZE_EARLY static void *driver_dlsym(void *handle, const char *name,
                                                  const void *caller)
{
    void *p, *w;
    unsigned i;

    if (handle == RTLD_NEXT)
        p = next_after(caller, name);
    else if (handle == RTLD_DEFAULT)
        p = default_for(caller, name);
    else
        p = recap__dlsym(handle, name);
    if (p == NULL)
        return p;
    if (strcmp(name, "cuGetProcAddress_v2") == 0)
        return (void *)cuGetProcAddress_v2;
    if (strcmp(name, "cuGetProcAddress") == 0)
        return (void *)cuGetProcAddress;
    /* A graph entry point asked for by its exported name: recap's wrapper of that very name. */
    for (i = 0; i < recap__ndriver_hooks; i++)
        if (strcmp(recap__driver_hooks[i].symbol, name) == 0) {
            w = recap__driver_hooks[i].wrapper;
            return recap__hooks_real_driver(name) == p ? w : p;
        }
    return p;
}

/*
 * Every other name goes to libc's dlsym by a tail call, so glibc sees the caller's return
 * address and resolves RTLD_NEXT and RTLD_DEFAULT exactly as without recap, with no lookup of
 * recap's own. That path runs while sanitizer runtimes initialize (they resolve their
 * interceptors through dlsym(RTLD_NEXT) before any constructor has run), where the emulation's
 * dlopen of each later object would run their constructors early. Without optimization the tail
 * call is not guaranteed: the emulation answers then.
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
    if (name[0] == 'c' && name[1] == 'u' && recap__hooks_preload_enabled())
        return driver_dlsym(handle, name, __builtin_return_address(0));
#ifdef RECAP_TAIL_RETURN
    RECAP_TAIL_RETURN recap__real_dlsym()(handle, name);
#else
    if (handle == RTLD_NEXT)
        return next_after(__builtin_return_address(0), name);
    if (handle == RTLD_DEFAULT)
        return default_for(__builtin_return_address(0), name);
    return recap__dlsym(handle, name);
#endif
}
