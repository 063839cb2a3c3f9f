/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double follows the driver's stream-capture and graph rules: the rig and main
 * (tests/double/test_double.h says how the suite is laid out). */
#include "test_double.h"

#define DEF(f) __typeof__(f) *p_##f;
DRIVER_FNS(DEF)
#undef DEF

/* The double's inspection exports; NULL against a real driver. */
unsigned long (*d_launch_count)(void);
unsigned long (*d_node_count)(CUgraph);
int (*d_live_graphs)(void);
int (*d_live_execs)(void);
unsigned long (*d_stream_ops)(void);
void (*d_fail_next)(const char *, int);

void *lib;
CUcontext ctx;
CUfunction k_fill, k_advance;
CUdeviceptr buf_a, buf_b, slot;
int base_graphs, base_execs;

/* A driver result's name, for CK's messages. */
const char *en(CUresult rc)
{
    const char *s = NULL;
    return p_cuGetErrorName(rc, &s) == CUDA_SUCCESS && s != NULL ? s : "(unnamed)";
}

static void *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    void *p;

    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    p = malloc((size_t)n + 16);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return p;
}

/* Runs in each test's process (Check forks), so a real driver is initialised after the fork. */
static void setup(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER"), *fatbin = getenv("RECAP_DOUBLE_TEST_FATBIN");
    static const uint32_t fake_image[4] = {0xBA55ED50u, 0, 0, 0}; /* all the double checks */
    void *image;
    CUdevice dev;
    CUmodule mod;

    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "dlopen(%s): %s", path, dlerror());
    DRIVER_FNS(LOAD)
#undef LOAD
    d_launch_count = (unsigned long (*)(void))dlsym(lib, "recap_double_launch_count");
    d_node_count = (unsigned long (*)(CUgraph))dlsym(lib, "recap_double_node_count");
    d_live_graphs = (int (*)(void))dlsym(lib, "recap_double_live_graphs");
    d_live_execs = (int (*)(void))dlsym(lib, "recap_double_live_execs");
    d_stream_ops = (unsigned long (*)(void))dlsym(lib, "recap_double_stream_ops");
    d_fail_next = (void (*)(const char *, int))dlsym(lib, "recap_double_fail_next");

    image = fatbin != NULL && *fatbin != '\0' ? read_file(fatbin) : (void *)fake_image;
    OK(p_cuInit(0));
    OK(p_cuDeviceGet(&dev, 0));
    OK(p_cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(p_cuCtxSetCurrent(ctx));
    OK(p_cuModuleLoadData(&mod, image));
    OK(p_cuModuleGetFunction(&k_fill, mod, RECAP_KERNEL_FILL_U32));
    OK(p_cuModuleGetFunction(&k_advance, mod, RECAP_KERNEL_ADVANCE));
    OK(p_cuMemAlloc_v2(&buf_a, BUF_BYTES));
    OK(p_cuMemAlloc_v2(&buf_b, BUF_BYTES));
    OK(p_cuMemAlloc_v2(&slot, 16));
    OK(p_cuMemsetD8_v2(buf_a, 0, BUF_BYTES));
    OK(p_cuMemsetD8_v2(buf_b, 0, BUF_BYTES));
    OK(p_cuMemsetD8_v2(slot, 0, 16));
    base_graphs = d_live_graphs ? d_live_graphs() : 0;
    base_execs = d_live_execs ? d_live_execs() : 0;
}

static void teardown(void)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_GLOBAL;

    p_cuThreadExchangeStreamCaptureMode(&m);
    p_cuMemFree_v2(buf_a);
    p_cuMemFree_v2(buf_b);
    p_cuMemFree_v2(slot);
}

/* ------------------------------------------------------------------ helpers */

int is_double(void)
{
    return d_launch_count != NULL;
}

CUstream new_stream(unsigned flags)
{
    CUstream s = NULL;
    OK(p_cuStreamCreate(&s, flags));
    return s;
}

CUresult fill(CUstream s, CUdeviceptr dst, uint64_t seed, uint64_t offset)
{
    recap__fill_params_t p;
    void *args[] = {&p};

    memset(&p, 0, sizeof(p));
    p.dst = dst;
    p.n = NWORDS;
    p.philox.seed = seed;
    p.philox.offset = offset;
    recap__fill_keys(seed, &p.keys); /* outside a capture the host computes the round keys */
    return p_cuLaunchKernel(k_fill, 2, 1, 1, 64, 1, 1, 0, s, args, NULL);
}

/* slot[1] += inc: one node whose effect counts the launches. */
CUresult advance(CUstream s, uint64_t inc)
{
    recap__advance_params_t p;
    void *args[] = {&p};

    memset(&p, 0, sizeof(p));
    p.slot[0] = slot;
    p.inc[0] = inc;
    p.count = 1;
    return p_cuLaunchKernel(k_advance, 1, 1, 1, RECAP_SLOTS_PER_LAUNCH, 1, 1, 0, s, args, NULL);
}

void read_words(CUdeviceptr src, uint32_t *out, size_t n)
{
    OK(p_cuMemcpyDtoH_v2(out, src, n * 4));
}

uint64_t slot_offset(void)
{
    uint64_t v[2];
    OK(p_cuMemcpyDtoH_v2(v, slot, sizeof(v)));
    return v[1];
}

int all_zero(CUdeviceptr p)
{
    uint32_t w[NWORDS];

    read_words(p, w, NWORDS);
    for (size_t i = 0; i < NWORDS; i++)
        if (w[i] != 0)
            return 0;
    return 1;
}

CUstreamCaptureStatus capture_status(CUstream s)
{
    CUstreamCaptureStatus st = (CUstreamCaptureStatus)99;
    OK(p_cuStreamIsCapturing(s, &st));
    return st;
}

size_t node_count(CUgraph g)
{
    size_t n = 12345;

    OK(p_cuGraphGetNodes(g, NULL, &n));
    if (d_node_count != NULL)
        ck_assert_uint_eq(d_node_count(g), n);
    return n;
}

CUstreamCaptureMode set_mode(CUstreamCaptureMode m)
{
    OK(p_cuThreadExchangeStreamCaptureMode(&m));
    return m;
}

/* Ends a capture that must have been invalidated. */
void end_invalidated(CUstream s)
{
    CUgraph g = (CUgraph)0x1;

    CK(p_cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
}

static void *job_main(void *arg)
{
    job_t *j = arg;
    CUdeviceptr p = 0;
    CUstreamCaptureMode m = j->mode;

    p_cuCtxSetCurrent(ctx);
    p_cuThreadExchangeStreamCaptureMode(&m);
    j->initial_mode = m;
    switch (j->what) {
    case JOB_MEMALLOC:
        j->rc = p_cuMemAlloc_v2(&p, 256);
        if (j->rc == CUDA_SUCCESS)
            p_cuMemFree_v2(p);
        break;
    case JOB_END_CAPTURE:
        j->graph = (CUgraph)0x1;
        j->rc = p_cuStreamEndCapture(j->stream, &j->graph);
        break;
    case JOB_CTX_SYNC: j->rc = p_cuCtxSynchronize(); break;
    case JOB_LAUNCH: j->rc = fill(j->stream, buf_b, 9, 0); break;
    }
    return NULL;
}

job_t on_other_thread(int what, CUstreamCaptureMode mode, CUstream s)
{
    pthread_t t;
    job_t j;

    memset(&j, 0, sizeof(j));
    j.what = what;
    j.mode = mode;
    j.stream = s;
    ck_assert_int_eq(pthread_create(&t, NULL, job_main, &j), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    return j;
}

void check_no_leaks(void)
{
    if (d_live_graphs != NULL) {
        ck_assert_int_eq(d_live_graphs(), base_graphs);
        ck_assert_int_eq(d_live_execs(), base_execs);
    }
}

int main(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    Suite *s;
    TCase *tc;

    if (path == NULL || *path == '\0') {
        fprintf(stderr, "test_double: RECAP_CUDA_DRIVER is empty: nothing to test\n");
        return 77;
    }
    s = suite_create("double");
    tc = tcase_create("capture");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    double_add_capture_tests(tc);
    double_add_modes_tests(tc);
    double_add_graphs_tests(tc);
    double_add_memops_tests(tc);
    double_add_threads_tests(tc);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
