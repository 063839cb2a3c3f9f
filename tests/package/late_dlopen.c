/* SPDX-License-Identifier: Apache-2.0 */
/*
 * For tests/package/late_dlopen.sh: loads librecap (argv[1]) late, with dlopen, as Python's ctypes
 * or a framework plugin does, then has two threads fail a call each and read their own last-error
 * message (the buffer each allocates at its first failure and frees at its exit).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "recap.h"

static __typeof__(&recap_generator_create) create;
static __typeof__(&recap_last_error) last_error;

/* A failure of the calling thread's own, and its message. */
static void *fail(void *arg)
{
    (void)arg;
    if (create(0, NULL) != RECAP_ERR_INVALID_ARG || strstr(last_error(), "gen_p") == NULL)
        return (void *)"a failure left no message of its own";
    return NULL;
}

int main(int argc, char **argv)
{
    void *lib = argc == 2 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
    const char *err = NULL;
    pthread_t t;
    void *ret;

    if (lib == NULL) {
        fprintf(stderr, "late_dlopen: %s\n", argc == 2 ? dlerror() : "usage: late_dlopen LIB");
        return 1;
    }
    *(void **)&create = dlsym(lib, "recap_generator_create");
    *(void **)&last_error = dlsym(lib, "recap_last_error");
    if (create == NULL || last_error == NULL || strcmp(last_error(), "") != 0) {
        fprintf(stderr, "late_dlopen: recap's API is missing, or a message precedes a failure\n");
        return 1;
    }
    if (pthread_create(&t, NULL, fail, NULL) != 0 || pthread_join(t, &ret) != 0)
        return 1;
    err = ret;
    if (err == NULL && strcmp(last_error(), "") != 0)
        err = "another thread's failure left a message here";
    if (err == NULL)
        err = fail(NULL);
    if (err != NULL) {
        fprintf(stderr, "late_dlopen: %s\n", err);
        return 1;
    }
    printf("late_dlopen: loaded, failed and read messages on two threads\n");
    return 0;
}
