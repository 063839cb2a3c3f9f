#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>

#include "base/dl.h"

typedef void *(*dlsym_fn)(void *, const char *);

static dlsym_fn real_dlsym;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* dlvsym is not interposed; glibc 2.34 moved dlsym into libc under a new version. */
static void find_dlsym(void)
{
    real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (real_dlsym == NULL)
        real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (real_dlsym == NULL)
        real_dlsym = (dlsym_fn)dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34");
    if (real_dlsym == NULL)
        real_dlsym = (dlsym_fn)dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.2.5");
}

void *recap__dlsym(void *handle, const char *name)
{
    pthread_once(&once, find_dlsym);
    return real_dlsym != NULL ? real_dlsym(handle, name) : NULL;
}
