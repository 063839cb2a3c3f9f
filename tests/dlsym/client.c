/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A program that knows nothing of recap and looks CUDA names up with dlsym, run by
 * tests/hooks/test_dlsym.c with and without LD_PRELOAD=librecap-preload.so:
 *
 *   client shim     the CUDA driver (the test double, $RECAP_CUDA_DRIVER) loaded RTLD_LOCAL (as
 *                   the CUDA runtime loads it), then two plugins loaded RTLD_LOCAL that both need
 *                   a shim (tests/dlsym/shim.c) which needs the driver: the shim's
 *                   dlsym(RTLD_NEXT) must find the driver, never the shim itself (the second
 *                   plugin, loaded after the shim, has the shim among its dependencies). Prints
 *                   what the driver answered through the shim.
 *   client nocuda   no CUDA library loaded: every CUDA name looked up is NULL with a dlerror()
 *                   text, and afterwards no driver is loaded. Exit 0 when so.
 *   client race S   for S seconds, threads dlopen/dlclose the plugins while others look CUDA names
 *                   up (RTLD_NEXT, RTLD_DEFAULT, the program's handle). Exit 0 unless it crashes.
 *   client cost     the mean times of dlsym(RTLD_NEXT, "cuGraphLaunch") (a name librecap
 *                   exports) and dlsym(RTLD_NEXT, "cuInit") (one it does not) in ns, with a
 *                   dozen more libraries loaded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*gpa_fn)(const char *, void **);

static const char *libdir(void)
{
    const char *d = getenv("DLSYM_TEST_LIBDIR");

    return d != NULL ? d : ".";
}

static void *open_plugin(const char *name)
{
    char path[4096];

    snprintf(path, sizeof(path), "%s/%s", libdir(), name);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static int shim(void)
{
    const char *drv = getenv("RECAP_CUDA_DRIVER");
    void *d, *a, *b, *fn = NULL;
    int rc, v = 0;
    int (*launch)(void *, void *);
    gpa_fn gpa;

    if (drv == NULL || (d = dlopen(drv, RTLD_NOW | RTLD_LOCAL)) == NULL)
        return 1;
    a = open_plugin("libdlsymplugin.so");
    b = open_plugin("libdlsymplugin2.so"); /* after the shim in load order, and it needs the shim */
    if (a == NULL || b == NULL) {
        fprintf(stderr, "client: %s\n", dlerror());
        return 1;
    }
    gpa = (gpa_fn)dlsym(a, "dlsym_plugin_gpa");
    rc = gpa("cuInit", &fn);
    printf("cuInit: rc %d, found %d\n", rc, fn != NULL);
    if (rc != 0 || fn == NULL)
        return 1;
    printf("cuInit(0) = %d\n", ((int (*)(unsigned))fn)(0));
    fn = NULL;
    rc = gpa("cuDriverGetVersion", &fn);
    if (rc == 0 && fn != NULL)
        printf("cuDriverGetVersion = %d, ", ((int (*)(int *))fn)(&v));
    printf("version %d, rc %d\n", v, rc);
    gpa = (gpa_fn)dlsym(b, "dlsym_plugin_gpa");
    rc = gpa("cuNoSuchEntryPoint", &fn);
    printf("unknown name: rc %d\n", rc);
    launch = (int (*)(void *, void *))dlsym(a, "dlsym_plugin_launch");
    printf("cuGraphLaunch(NULL, NULL) through the shim = %d\n", launch(NULL, NULL));
    return 0;
}

static int driver_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (info->dlpi_name != NULL &&
        (strstr(info->dlpi_name, "libcuda.so") != NULL ||
         strstr(info->dlpi_name, "libcudadouble") != NULL)) {
        fprintf(stderr, "client: %s is loaded\n", info->dlpi_name);
        *(int *)data = 1;
    }
    return 0;
}

static int nocuda(void)
{
    static const char *const names[] = {"cudaGraphLaunch", "cuGraphLaunch", "cuGetProcAddress_v2",
                                        "cudaStreamBeginCapture", "cuStreamEndCapture"};
    void *self = dlopen(NULL, RTLD_NOW), *handles[] = {RTLD_DEFAULT, RTLD_NEXT, self};
    int fails = 0, loaded = 0;
    size_t i, k;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        for (k = 0; k < 3; k++) {
            void *p;
            const char *err;

            dlerror();
            p = dlsym(handles[k], names[i]);
            err = dlerror();
            if (p != NULL || err == NULL || strstr(err, names[i]) == NULL) {
                fprintf(stderr, "client: dlsym(%d, %s) = %p, dlerror %s\n", (int)k, names[i], p,
                        err != NULL ? err : "(none)");
                fails++;
            }
        }
    /* A name that exists still answers, and leaves no error behind. */
    dlerror();
    if (dlsym(RTLD_DEFAULT, "printf") == NULL || dlerror() != NULL)
        fails++;
    dl_iterate_phdr(driver_loaded, &loaded);
    printf("nocuda: %d wrong answers, driver loaded: %d\n", fails, loaded);
    return fails == 0 && loaded == 0 ? 0 : 1;
}

static int stop;

static void *churn(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        void *a = open_plugin("libdlsymplugin.so"), *b = open_plugin("libdlsymplugin2.so");
        gpa_fn gpa = a != NULL ? (gpa_fn)dlsym(a, "dlsym_plugin_gpa") : NULL;
        void *fn;

        if (gpa != NULL)
            gpa("cuInit", &fn); /* the shim's RTLD_NEXT while others load and unload */
        if (b != NULL)
            dlclose(b);
        if (a != NULL)
            dlclose(a);
    }
    return NULL;
}

static void *look(void *arg)
{
    void *self = dlopen(NULL, RTLD_NOW);
    unsigned long n = 0;

    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        n += dlsym(RTLD_NEXT, "cuGraphLaunch") != NULL;
        n += dlsym(RTLD_DEFAULT, "cudaGraphLaunch") != NULL;
        n += dlsym(self, "cuStreamBeginCapture") != NULL;
        n += dlsym(RTLD_NEXT, "cuGetProcAddress_v2") != NULL;
        n += dlsym(RTLD_NEXT, "cuDeviceGetCount") != NULL; /* a name recap does not export */
    }
    return (void *)n;
}

static int race(int seconds)
{
    pthread_t t[6];
    int i;

    for (i = 0; i < 6; i++)
        pthread_create(&t[i], NULL, i < 3 ? churn : look, NULL);
    sleep((unsigned)seconds);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    printf("race: done\n");
    return 0;
}

static int cost(void)
{
    static const char *const libs[] = {"libm.so.6", "libz.so.1", "libffi.so.8", "libgcc_s.so.1",
                                       "libstdc++.so.6", "librt.so.1", "libutil.so.1",
                                       "libresolv.so.2", "libcheck.so.0", "libsubunit.so.0"};
    const int n = 20000;
    struct timespec t0, t1;
    volatile void *p = NULL;
    size_t i;
    int k;

    for (i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
        dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    for (i = 0; i < 2; i++) {
        const char *name = i == 0 ? "cuGraphLaunch" : "cuInit";

        dlsym(RTLD_NEXT, name);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (k = 0; k < n; k++)
            p = dlsym(RTLD_NEXT, name);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("%.0f ", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
    }
    (void)p;
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "shim") == 0)
        return shim();
    if (argc >= 2 && strcmp(argv[1], "nocuda") == 0)
        return nocuda();
    if (argc >= 3 && strcmp(argv[1], "race") == 0)
        return race(atoi(argv[2]));
    if (argc >= 2 && strcmp(argv[1], "cost") == 0)
        return cost();
    fprintf(stderr, "usage: client shim|nocuda|race SECONDS|cost\n");
    return 2;
}
