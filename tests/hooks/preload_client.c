/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A host program that knows nothing of recap's hooks: it finds the driver the way the CUDA
 * runtime does (dlopen, dlsym of cuGetProcAddress, then every entry point through it), captures a
 * recap fill on a stream with the driver's own capture calls, and replays the graph. Run by
 * tests/hooks/test_preload.c with and without LD_PRELOAD=librecap-preload.so, against the CUDA
 * test double.
 *
 * Exit 0: the lookups were hooked as expected and K replays equal K eager runs.
 * Exit 3: the captured draw was refused (RECAP_ERR_NOT_REGISTERED): no hook active.
 * Exit 1: anything else (message on stderr).
 */
#define __CUDA_API_VERSION_INTERNAL 1
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recap.h"

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t,
                            CUdriverProcAddressQueryResult *);

static int fails;

#define EXPECT(cond, ...)                     \
    do {                                      \
        if (!(cond)) {                        \
            fprintf(stderr, "client: " __VA_ARGS__); \
            fputc('\n', stderr);              \
            fails++;                          \
        }                                     \
    } while (0)

/* Which object a function pointer lives in: "recap" or "driver". */
static const char *owner(void *fn)
{
    Dl_info info;

    if (fn == NULL || dladdr(fn, &info) == 0 || info.dli_fname == NULL)
        return "?";
    return strstr(info.dli_fname, "librecap") != NULL ? "recap" : "driver";
}

static void *lookup(gpa2_fn gpa, const char *name, int version, cuuint64_t flags)
{
    CUdriverProcAddressQueryResult q;
    void *p = NULL;

    if (gpa(name, &p, version, flags, &q) != CUDA_SUCCESS)
        return NULL;
    return p;
}

/* What a capture subscriber heard (checked when the hooks are expected to report). */
static recap_capture_event_info_t heard[16];
static int nheard;

static recap_status_t hear(const recap_capture_event_info_t *info, void *arg)
{
    (void)arg;
    if (nheard < 16)
        heard[nheard++] = *info;
    return RECAP_OK;
}

/* Recap's API, from the library the test names (the preloaded copy when preloaded). */
#define API(name) __typeof__(&name) p_##name = (__typeof__(&name))dlsym(rl, #name)

int main(void)
{
    const int expect_hooked = getenv("EXPECT_HOOKED") != NULL;
    const char *drv_path = getenv("RECAP_CUDA_DRIVER"), *lib_path = getenv("RECAP_LIB");
    void *drv, *rl;
    gpa2_fn gpa;
    const char *want = expect_hooked ? "recap" : "driver";

    if (drv_path == NULL || lib_path == NULL)
        return 1;
    drv = dlopen(drv_path, RTLD_NOW | RTLD_LOCAL);
    rl = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (drv == NULL || rl == NULL) {
        fprintf(stderr, "client: %s\n", dlerror());
        return 1;
    }
    gpa = (gpa2_fn)dlsym(drv, "cuGetProcAddress_v2");
    EXPECT(gpa != NULL && strcmp(owner((void *)gpa), want) == 0, "dlsym(cuGetProcAddress_v2) from %s", owner((void *)gpa));
    if (gpa == NULL)
        return 1;

    /* Versions and per-thread flags pick variants; recap wraps exactly the graph entry points. */
    {
        void *b2 = lookup(gpa, "cuStreamBeginCapture", 12000, CU_GET_PROC_ADDRESS_DEFAULT);
        void *bpt = lookup(gpa, "cuStreamBeginCapture", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
        void *b1 = lookup(gpa, "cuStreamBeginCapture", 10000, CU_GET_PROC_ADDRESS_DEFAULT);
        void *self = lookup(gpa, "cuGetProcAddress", 12000, CU_GET_PROC_ADDRESS_DEFAULT);
        void *launch = lookup(gpa, "cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_DEFAULT);
        void *missing = lookup(gpa, "cuNoSuchEntryPoint", 12000, CU_GET_PROC_ADDRESS_DEFAULT);

        EXPECT(b2 && strcmp(owner(b2), want) == 0, "cuStreamBeginCapture@12000 from %s", owner(b2));
        EXPECT(bpt && bpt != b2 && strcmp(owner(bpt), want) == 0, "per-thread variant from %s", owner(bpt));
        EXPECT(b1 && b1 != b2 && strcmp(owner(b1), want) == 0, "v1 variant from %s", owner(b1));
        EXPECT(self && strcmp(owner(self), want) == 0, "cuGetProcAddress asking for itself: %s", owner(self));
        EXPECT(launch && strcmp(owner(launch), "driver") == 0, "cuLaunchKernel must pass untouched: %s", owner(launch));
        EXPECT(missing == NULL, "an unknown entry point must stay unknown");
    }

    {
        API(recap_generator_create); API(recap_generator_manual_seed); API(recap_generator_fill_u32);
        API(recap_stream_create); API(recap_stream_synchronize); API(recap_device_alloc);
        API(recap_memcpy_to_host); API(recap_strerror); API(recap_last_error);
        API(recap_capture_subscribe);
        typedef CUresult (*edestroy_fn)(CUgraphExec);
        typedef CUresult (*gdestroy_fn)(CUgraph);
        edestroy_fn edestroy = (edestroy_fn)lookup(gpa, "cuGraphExecDestroy", 12000, 0);
        gdestroy_fn gdestroy = (gdestroy_fn)lookup(gpa, "cuGraphDestroy", 12000, 0);
        recap_subscription_h sub;
        typedef CUresult (*begin_fn)(CUstream, CUstreamCaptureMode);
        typedef CUresult (*end_fn)(CUstream, CUgraph *);
        typedef CUresult (*inst_fn)(CUgraphExec *, CUgraph, unsigned long long);
        typedef CUresult (*launch_fn)(CUgraphExec, CUstream);
        typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
        typedef CUresult (*setcur_fn)(CUcontext);
        begin_fn begin = (begin_fn)lookup(gpa, "cuStreamBeginCapture", 12000, 0);
        end_fn end = (end_fn)lookup(gpa, "cuStreamEndCapture", 12000, 0);
        inst_fn inst = (inst_fn)lookup(gpa, "cuGraphInstantiate", 12000, 0);
        launch_fn glaunch = (launch_fn)lookup(gpa, "cuGraphLaunch", 12000, 0);
        retain_fn retain = (retain_fn)lookup(gpa, "cuDevicePrimaryCtxRetain", 12000, 0);
        setcur_fn setcur = (setcur_fn)lookup(gpa, "cuCtxSetCurrent", 12000, 0);
        const size_t n = 5000;
        recap_generator_h g, twin;
        recap_stream_t s;
        recap_status_t st;
        CUcontext ctx;
        CUgraph graph = NULL;
        CUgraphExec exec;
        void *a, *b;
        uint32_t *ha = malloc(n * 4), *hb = malloc(n * 4), *prev = calloc(n, 4);
        int k;

        if (!begin || !end || !inst || !glaunch || !retain || !setcur || !p_recap_generator_create ||
            !edestroy || !gdestroy || !p_recap_capture_subscribe)
            return 1;
        if (p_recap_capture_subscribe(RECAP_EVENT_MASK_ALL, hear, NULL, &sub) != RECAP_OK)
            return 1;
        retain(&ctx, 0);
        setcur(ctx);
        p_recap_generator_create(0, &g);
        p_recap_generator_create(0, &twin);
        p_recap_generator_manual_seed(g, 99);
        p_recap_generator_manual_seed(twin, 99);
        p_recap_stream_create(0, &s);
        p_recap_device_alloc(0, n * 4, &a);
        p_recap_device_alloc(0, n * 4, &b);
        if (begin((CUstream)s, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS)
            return 1;
        st = p_recap_generator_fill_u32(g, s, a, n);
        end((CUstream)s, &graph);
        if (st == RECAP_ERR_NOT_REGISTERED) {
            fprintf(stderr, "client: captured draw refused: %s\n", p_recap_last_error());
            free(ha);
            free(hb);
            free(prev);
            return fails == 0 ? 3 : 1;
        }
        EXPECT(st == RECAP_OK, "captured fill: %s", p_recap_strerror(st));
        if (graph == NULL || inst(&exec, graph, 0) != CUDA_SUCCESS)
            return 1;
        for (k = 0; k < 4; k++) {
            EXPECT(glaunch(exec, (CUstream)s) == CUDA_SUCCESS, "launch %d", k);
            p_recap_generator_fill_u32(twin, s, b, n);
            p_recap_stream_synchronize(s);
            p_recap_memcpy_to_host(0, ha, a, n * 4);
            p_recap_memcpy_to_host(0, hb, b, n * 4);
            EXPECT(memcmp(ha, hb, n * 4) == 0, "replay %d differs from eager run %d", k, k);
            EXPECT(memcmp(ha, prev, n * 4) != 0, "replay %d repeated numbers", k);
            memcpy(prev, ha, n * 4);
        }
        EXPECT(edestroy(exec) == CUDA_SUCCESS && gdestroy(graph) == CUDA_SUCCESS, "destroys");
        /* Each event once, in order, from the preload front end. */
        {
            static const recap_capture_event_t want_ev[] = {
                RECAP_EVENT_CAPTURE_WILL_BEGIN, RECAP_EVENT_CAPTURE_ENDED,
                RECAP_EVENT_GRAPH_INSTANTIATED, RECAP_EVENT_GRAPH_WILL_LAUNCH,
                RECAP_EVENT_GRAPH_WILL_LAUNCH,  RECAP_EVENT_GRAPH_WILL_LAUNCH,
                RECAP_EVENT_GRAPH_WILL_LAUNCH,  RECAP_EVENT_GRAPH_EXEC_DESTROYED,
                RECAP_EVENT_GRAPH_DESTROYED};
            const int nwant = (int)(sizeof(want_ev) / sizeof(want_ev[0]));
            EXPECT(nheard == nwant, "subscriber heard %d events, expected %d", nheard, nwant);
            for (k = 0; k < nheard && k < nwant; k++) {
                EXPECT(heard[k].event == want_ev[k], "event %d is %d, expected %d", k,
                       (int)heard[k].event, (int)want_ev[k]);
                EXPECT(heard[k].source == RECAP_HOOKS_PRELOAD, "event %d from front end %d", k,
                       (int)heard[k].source);
            }
            EXPECT(nheard > 2 && heard[1].graph == (void *)graph && heard[2].exec == (void *)exec,
                   "events carry the graph and exec");
        }
        /* An exec updated to a graph that draws more, through the driver's four-argument
         * cuGraphExecUpdate (CUDA < 12 headers), then back through the current one: each launch
         * equals the eager run of the graph it holds now. */
        {
            typedef CUresult (*upd1_fn)(CUgraphExec, CUgraph, CUgraphNode *,
                                        CUgraphExecUpdateResult *);
            typedef CUresult (*upd2_fn)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
            upd1_fn upd1 = (upd1_fn)lookup(gpa, "cuGraphExecUpdate", 11000, 0);
            upd2_fn upd2 = (upd2_fn)lookup(gpa, "cuGraphExecUpdate", 12000, 0);
            const size_t big = 300000; /* two Philox blocks per thread, n one */
            const size_t sizes[3] = {n, big, n};
            CUgraph g1 = NULL, g2 = NULL;
            CUgraphNode err = NULL;
            CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_ERROR;
            CUgraphExecUpdateResultInfo info;
            uint32_t *hx = malloc(big * 4), *hy = malloc(big * 4);
            void *x, *y;

            EXPECT(upd1 && upd2 && (void *)upd1 != (void *)upd2 && strcmp(owner((void *)upd1), want) == 0 &&
                   strcmp(owner((void *)upd2), want) == 0, "cuGraphExecUpdate v1/v2 from %s/%s",
                   owner((void *)upd1), owner((void *)upd2));
            if (!upd1 || !upd2 || hx == NULL || hy == NULL)
                return 1;
            p_recap_device_alloc(0, big * 4, &x);
            p_recap_device_alloc(0, big * 4, &y);
            begin((CUstream)s, CU_STREAM_CAPTURE_MODE_GLOBAL);
            EXPECT(p_recap_generator_fill_u32(g, s, x, n) == RECAP_OK, "capture of g1");
            end((CUstream)s, &g1);
            begin((CUstream)s, CU_STREAM_CAPTURE_MODE_GLOBAL);
            EXPECT(p_recap_generator_fill_u32(g, s, x, big) == RECAP_OK, "capture of g2");
            end((CUstream)s, &g2);
            if (g1 == NULL || g2 == NULL || inst(&exec, g1, 0) != CUDA_SUCCESS)
                return 1;
            for (k = 0; k < 3; k++) {
                if (k == 1)
                    EXPECT(upd1(exec, g2, &err, &res) == CUDA_SUCCESS &&
                           res == CU_GRAPH_EXEC_UPDATE_SUCCESS, "legacy update to g2");
                if (k == 2)
                    EXPECT(upd2(exec, g1, &info) == CUDA_SUCCESS, "update back to g1");
                EXPECT(glaunch(exec, (CUstream)s) == CUDA_SUCCESS, "launch after update %d", k);
                p_recap_generator_fill_u32(twin, s, y, sizes[k]);
                p_recap_stream_synchronize(s);
                p_recap_memcpy_to_host(0, hx, x, sizes[k] * 4);
                p_recap_memcpy_to_host(0, hy, y, sizes[k] * 4);
                EXPECT(memcmp(hx, hy, sizes[k] * 4) == 0, "launch %d after update differs from "
                       "the eager run", k);
            }
            EXPECT(edestroy(exec) == CUDA_SUCCESS && gdestroy(g1) == CUDA_SUCCESS &&
                   gdestroy(g2) == CUDA_SUCCESS, "destroys after update");
            free(hx);
            free(hy);
        }
        free(ha);
        free(hb);
        free(prev);
    }
    return fails == 0 ? 0 : 1;
}
