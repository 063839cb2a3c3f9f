/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <stddef.h>

#include "base/dl.h"

typedef recap__dlsym_fn dlsym_fn;
typedef void *(*dlopen_fn)(const char *, int);
typedef int (*dlclose_fn)(void *);

static dlsym_fn real_dlsym;
static dlopen_fn real_dlopen;
static dlclose_fn real_dlclose;
static int found;

/* libc's definition of `name` (dlvsym is not interposed): the next one after librecap, as a
 * sanitizer runtime's interceptor comes before it, else the global one. glibc 2.34 moved the dl
 * functions into libc under a new version. */
RECAP_NO_SANITIZE_EARLY static void *libc_sym(const char *name)
{
    void *p = dlvsym(RTLD_NEXT, name, "GLIBC_2.34");

    if (p == NULL)
        p = dlvsym(RTLD_NEXT, name, "GLIBC_2.2.5");
    if (p == NULL)
        p = dlvsym(RTLD_DEFAULT, name, "GLIBC_2.34");
    if (p == NULL)
        p = dlvsym(RTLD_DEFAULT, name, "GLIBC_2.2.5");
    return p;
}

/* Not pthread_once: the dlsym interposer runs inside sanitizer runtimes' initialization (they
 * resolve their interceptors through dlsym(RTLD_NEXT)), where their pthread_once interceptor
 * crashes. The lookups are idempotent, so threads racing here store the same values. */
RECAP_NO_SANITIZE_EARLY static void find_libc(void)
{
    if (__atomic_load_n(&found, __ATOMIC_ACQUIRE))
        return;
    __atomic_store_n(&real_dlsym, (dlsym_fn)libc_sym("dlsym"), __ATOMIC_RELAXED);
    __atomic_store_n(&real_dlopen, (dlopen_fn)libc_sym("dlopen"), __ATOMIC_RELAXED);
    __atomic_store_n(&real_dlclose, (dlclose_fn)libc_sym("dlclose"), __ATOMIC_RELAXED);
    __atomic_store_n(&found, 1, __ATOMIC_RELEASE);
}

RECAP_NO_SANITIZE_EARLY void *recap__dlsym(void *handle, const char *name)
{
    dlsym_fn f;

    find_libc();
    f = __atomic_load_n(&real_dlsym, __ATOMIC_RELAXED);
    return f != NULL ? f(handle, name) : NULL;
}

RECAP_NO_SANITIZE_EARLY static void *no_dlsym(void *handle, const char *name)
{
    (void)handle;
    (void)name;
    return NULL;
}

RECAP_NO_SANITIZE_EARLY recap__dlsym_fn recap__real_dlsym(void)
{
    dlsym_fn f;

    find_libc();
    f = __atomic_load_n(&real_dlsym, __ATOMIC_RELAXED);
    return f != NULL ? f : no_dlsym;
}

RECAP_NO_SANITIZE_EARLY void *recap__dlopen(const char *file, int mode)
{
    dlopen_fn f;

    find_libc();
    f = __atomic_load_n(&real_dlopen, __ATOMIC_RELAXED);
    return f != NULL ? f(file, mode) : NULL;
}

RECAP_NO_SANITIZE_EARLY int recap__dlclose(void *handle)
{
    dlclose_fn f;

    find_libc();
    f = __atomic_load_n(&real_dlclose, __ATOMIC_RELAXED);
    return f != NULL ? f(handle) : -1;
}
