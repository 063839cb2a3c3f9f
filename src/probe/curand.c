/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>

#include "base/dl.h"
#include "base/error.h"
#include "probe/probe.h"

/*
 * cuRAND as an outside reference for the philox check. It is loaded at run time, never linked:
 * librecap works without it, and a machine without it just skips these parts. Its generator
 * with PHILOX4_32_10, default ordering, the same seed and generator offset 65536 * offset must
 * give exactly the reference words (DESIGN.md). The handle stays open: cuRAND brings cudart,
 * which is never safe to unload under a host that may use it too.
 */

#define CURAND_RNG_PSEUDO_PHILOX4_32_10 161 /* curandRngType_t */

typedef struct {
    int (*create)(void **gen, int type);
    int (*create_host)(void **gen, int type);
    int (*set_seed)(void *gen, unsigned long long seed);
    int (*set_offset)(void *gen, unsigned long long offset);
    int (*generate)(void *gen, unsigned int *out, size_t n);
    int (*destroy)(void *gen);
    const char *lib;
} curand_t;

static int load_curand(curand_t *c)
{
    static const char *const names[] = {"libcurand.so.10", "libcurand.so"};
    size_t i;
    void *h;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            continue;
        *(void **)&c->create = recap__dlsym(h, "curandCreateGenerator");
        *(void **)&c->create_host = recap__dlsym(h, "curandCreateGeneratorHost");
        *(void **)&c->set_seed = recap__dlsym(h, "curandSetPseudoRandomGeneratorSeed");
        *(void **)&c->set_offset = recap__dlsym(h, "curandSetGeneratorOffset");
        *(void **)&c->generate = recap__dlsym(h, "curandGenerate");
        *(void **)&c->destroy = recap__dlsym(h, "curandDestroyGenerator");
        c->lib = names[i];
        if (c->create && c->create_host && c->set_seed && c->set_offset && c->generate &&
            c->destroy)
            return 0;
    }
    return -1;
}

enum { GEN_OK, GEN_NOT_CREATED, GEN_FAILED };

/* Creates, seeds and runs a generator into `dst` (host or device memory to match `host`).
 * On failure *what names the call and *status_p holds its curandStatus_t. */
static int generate(const curand_t *c, const recap__probe_words_t *w, int host, unsigned *dst,
                    const char **what, int *status_p)
{
    void *gen = NULL;
    int st;

    *what = host ? "curandCreateGeneratorHost" : "curandCreateGenerator";
    st = host ? c->create_host(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10)
              : c->create(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10);
    *status_p = st;
    if (st != 0)
        return GEN_NOT_CREATED;
    *what = "curandSetPseudoRandomGeneratorSeed";
    st = c->set_seed(gen, w->seed);
    if (st == 0) {
        *what = "curandSetGeneratorOffset";
        st = c->set_offset(gen, 65536ull * w->offset);
    }
    if (st == 0) {
        *what = "curandGenerate";
        st = c->generate(gen, dst, w->n);
    }
    c->destroy(gen);
    *status_p = st;
    return st == 0 ? GEN_OK : GEN_FAILED;
}

/* A generator that cannot even be created means this cuRAND cannot run here (no usable
 * runtime or device for it): not applicable. Anything failing after that is a failure. */
static void generator_failed(recap__probe_out_t *out, const char *who, int how, const char *what,
                             int st)
{
    if (how == GEN_NOT_CREATED)
        recap__probe_say(out, "; %s: not applicable (%s: curandStatus %d)", who, what, st);
    else
        recap__probe_fail(out, "; %s: %s: curandStatus %d", who, what, st);
}

/* cuRAND reaches the GPU through libcuda.so.1; comparing its words with a device recap drives
 * through another driver ($RECAP_CUDA_DRIVER, e.g. the test double) would mean nothing. */
static int same_driver(void)
{
    const recap__driver_t *drv;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);

    return h != NULL && recap__driver_get(&drv) == RECAP_OK &&
           recap__dlsym(h, "cuInit") == (void *)drv->cuInit;
}

static void device_generator(recap__probe_out_t *out, const curand_t *c,
                             const recap__probe_words_t *w)
{
    const char *who = "cuRAND device generator", *what;
    void *buf = NULL;
    int st, how;

    if (!same_driver()) {
        recap__probe_say(out, "; %s: not applicable (recap uses another CUDA driver than "
                         "libcuda.so.1)", who);
        return;
    }
    if (recap_device_alloc(0, w->n * sizeof(uint32_t), &buf) != RECAP_OK) {
        recap__probe_fail(out, "; %s: %s", who, recap_last_error());
        return;
    }
    /* cuRAND works on the legacy stream of device 0's primary context, as recap's copy does,
     * so the synchronous copy below sees its words. */
    how = generate(c, w, 0, buf, &what, &st);
    if (how != GEN_OK)
        generator_failed(out, who, how, what, st);
    else if (recap_memcpy_to_host(0, w->got, buf, w->n * sizeof(uint32_t)) != RECAP_OK)
        recap__probe_fail(out, "; %s: %s", who, recap_last_error());
    else
        recap__probe_compare(out, w, who);
    recap_device_free(0, buf);
}

void recap__probe_curand(recap__probe_out_t *out, const recap__probe_words_t *w, int device)
{
    curand_t c = {0};
    const char *what;
    int st, how;

    if (load_curand(&c) != 0) {
        recap__probe_say(out, "; cuRAND: not applicable (no libcurand.so.10 or libcurand.so "
                         "on the library path)");
        return;
    }
    how = generate(&c, w, 1, w->got, &what, &st);
    if (how != GEN_OK)
        generator_failed(out, "cuRAND host generator", how, what, st);
    else
        recap__probe_compare(out, w, "cuRAND host generator");
    if (device)
        device_generator(out, &c, w);
}
