/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-region bookkeeping cost of recap's recompute regions, with a function that does nothing
 * so only recap's work (and the engine operations it calls) is timed: create + record + release +
 * rebuild + finish + destroy of one region, on host buffers, with a tracker holding an engine
 * generator and Megatron's per-rank states (3 named states). Two engines: the plain engine (whose
 * operations allocate and account for memory) and a null host whose operations do nothing, which
 * isolates recap's own cost. Anchors measured in the same run: a bare ffi_call of the same
 * signature, and a snapshot take+restore pair on the same tracker (a region takes two snapshots
 * and restores two). Each figure is the median of REPS batches of BATCH operations. Target:
 * <= 2 us per region.
 */
#include <ffi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "recap.h"

#define REPS 31
#define BATCH 20000

typedef struct bench_ctx bench_ctx_t;
typedef void (*batch_fn)(bench_ctx_t *c);

struct bench_ctx {
    recap_tracker_h t;
    recap_generator_h host_gen;
    recap_snapshot_h snap;
    recap_signature_h sig;
    recap_region_params_t params;
    recap_buffer_t x, y, trig;
    recap_value_t v[5];
    ffi_cif cif;
    ffi_type *atypes[5];
};

static void die(const char *what, recap_status_t st)
{
    fprintf(stderr, "bench_region: %s: %s (%s)\n", what, recap_strerror(st), recap_last_error());
    exit(1);
}

#define CHECK(call)                  \
    do {                             \
        recap_status_t st_ = (call); \
        if (st_ != RECAP_OK)         \
            die(#call, st_);         \
    } while (0)

/* The recorded function: does nothing, so what is timed is recap's. */
static void noop(const void *x, void *y, uint64_t n, float a, void *p)
{
    (void)x, (void)y, (void)n, (void)a, (void)p;
}

/* ---------------------------------------------------------------- an engine that does nothing */

static char null_storage[64];

static recap_status_t null_arg(void *h, recap_buffer_t b, void **arg_p)
{
    *arg_p = null_storage;
    return RECAP_OK;
}

static recap_status_t null_alloc(void *h, recap_buffer_t like, recap_buffer_t *b)
{
    *b = null_storage;
    return RECAP_OK;
}

static recap_status_t null_buf(void *h, recap_buffer_t b)
{
    return RECAP_OK;
}

static recap_status_t null_share(void *h, recap_buffer_t d, recap_buffer_t s)
{
    return RECAP_OK;
}

static recap_status_t null_save(void *h, recap_buffer_t b, void **s)
{
    *s = b;
    return RECAP_OK;
}

static recap_status_t null_load(void *h, void *s, recap_buffer_t *b)
{
    *b = s;
    return RECAP_OK;
}

static recap_status_t null_drop(void *h, void *s)
{
    return RECAP_OK;
}

static const recap_engine_ops_t null_ops = {
    .buffer_arg = null_arg, .alloc_like = null_alloc, .free_buffer = null_buf,
    .free_storage = null_buf, .share_storage = null_share,
    .save = null_save, .load = null_load, .drop = null_drop,
};

/* ---------------------------------------------------------------- timed batches */

static void bare_ffi_call(bench_ctx_t *c)
{
    char buf[64];
    uint64_t n = 1;
    float a = 1.0f;
    void *x = buf, *y = buf, *p = NULL;
    void *av[5] = {&x, &y, &n, &a, &p};
    int i;

    for (i = 0; i < BATCH; i++)
        ffi_call(&c->cif, FFI_FN(noop), NULL, av);
}

static void take_restore(bench_ctx_t *c)
{
    int i;

    for (i = 0; i < BATCH; i++) {
        CHECK(recap_snapshot_take(c->t, c->snap));
        CHECK(recap_snapshot_restore(c->t, c->snap));
    }
}

static void lifecycle(bench_ctx_t *c)
{
    recap_region_h r;
    int i;

    for (i = 0; i < BATCH; i++) {
        CHECK(recap_region_create(&c->params, &r));
        CHECK(recap_region_record(r, c->sig, (recap_func_t)noop, c->v, 5));
        CHECK(recap_region_release(r, c->trig));
        if (c->trig != NULL)
            CHECK(recap_plain_buffer_fire(c->trig));
        else
            CHECK(recap_region_rebuild(r));
        CHECK(recap_region_finish(r));
        CHECK(recap_region_destroy(r));
    }
}

static void create_destroy(bench_ctx_t *c)
{
    recap_region_h r;
    int i;

    for (i = 0; i < BATCH; i++) {
        CHECK(recap_region_create(&c->params, &r));
        CHECK(recap_region_destroy(r));
    }
}

static void checkpoint(bench_ctx_t *c)
{
    recap_checkpoint_h ck;
    recap_buffer_t out;
    int i;

    for (i = 0; i < BATCH; i++) {
        CHECK(recap_checkpoint_run(&c->params, c->sig, (recap_func_t)noop, c->v, 5, &ck));
        CHECK(recap_checkpoint_backward(ck, &out, 1));
        CHECK(c->params.ops->free_buffer(c->params.host, out));
        CHECK(recap_checkpoint_destroy(ck));
    }
}

#include "median.h"

static recap_plain_engine_h plain;

static void setup(bench_ctx_t *c)
{
    static const recap_type_t t[5] = {RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT, RECAP_TYPE_UINT64,
                                      RECAP_TYPE_FLOAT, RECAP_TYPE_POINTER};
    recap_tracker_params_t tp = {.device = RECAP_DEVICE_HOST};
    recap_parallel_ranks_t one = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
    int i;

    CHECK(recap_generator_create(RECAP_DEVICE_HOST, &c->host_gen));
    tp.host_generator = c->host_gen;
    CHECK(recap_tracker_create(&tp, &c->t));
    CHECK(recap_tracker_seed_parallel(c->t, 1234, &one));
    CHECK(recap_snapshot_create(&c->snap));
    CHECK(recap_signature_create(RECAP_TYPE_VOID, t, 5, &c->sig));
    for (i = 0; i < 5; i++)
        c->atypes[i] = i < 2 || i == 4 ? &ffi_type_pointer
                                       : i == 2 ? &ffi_type_uint64 : &ffi_type_float;
    if (ffi_prep_cif(&c->cif, FFI_DEFAULT_ABI, 5, &ffi_type_void, c->atypes) != FFI_OK)
        die("ffi_prep_cif", RECAP_ERR_UNSUPPORTED);
    CHECK(recap_plain_engine_create(RECAP_DEVICE_HOST, 0, &plain));
}

/* Region params and arguments for the plain engine (with or without a trigger buffer, inputs
 * needing a gradient or not) or the null host. */
static void use_host(bench_ctx_t *c, int null_host, int trigger, int needs_grad)
{
    const recap_engine_ops_t *ops;

    if (c->x != NULL && c->x != null_storage) {
        CHECK(recap_plain_buffer_destroy(c->x));
        CHECK(recap_plain_buffer_destroy(c->y));
    }
    if (c->trig != NULL)
        CHECK(recap_plain_buffer_destroy(c->trig));
    c->trig = NULL;
    if (null_host) {
        c->params = (recap_region_params_t){&null_ops, NULL, c->t, NULL, 0};
        c->x = c->y = null_storage;
    } else {
        CHECK(recap_plain_engine_ops(&ops));
        c->params = (recap_region_params_t){ops, plain, c->t, NULL, 0};
        CHECK(recap_plain_buffer_create(plain, 4096, needs_grad, &c->x));
        CHECK(recap_plain_buffer_create(plain, 4096, 1, &c->y));
        if (trigger)
            CHECK(recap_plain_buffer_create(plain, 4, 1, &c->trig));
    }
    c->v[0].buf = c->x;
    c->v[1].buf = c->y;
    c->v[2].u64 = 1024;
    c->v[3].f32 = 0.5f;
    c->v[4].ptr = NULL;
}

int main(void)
{
    static const struct {
        const char *what;
        batch_fn fn;
        int null_host, trigger, needs_grad, per_region;
    } ops[] = {
        {"region create+record+release+rebuild+finish+destroy, null host", lifecycle, 1, 0, 1, 1},
        {"the same, plain engine (malloc'd storage, saved views)", lifecycle, 0, 0, 1, 1},
        {"the same, plain engine, rebuilt by a trigger (arm + fire)", lifecycle, 0, 1, 1, 1},
        {"the same, plain engine, no input needs a gradient (plain call)", lifecycle, 0, 0, 0, 0},
        {"region create+destroy only, plain engine", create_destroy, 0, 0, 1, 0},
        {"checkpoint run+backward+destroy (and the output's free), plain engine", checkpoint, 0,
         0, 1, 1},
    };
    bench_ctx_t c = {0};
    double ffi, pair, ns;
    size_t i;

    setup(&c);
    ffi = median_ns(bare_ffi_call, &c);
    pair = median_ns(take_restore, &c);
    printf("| operation | median ns | beyond 2 ffi_calls + 2 take/restore pairs |\n");
    printf("|---|---:|---:|\n");
    printf("| bare ffi_call of the same 5-argument signature (anchor) | %.1f | |\n", ffi);
    printf("| snapshot take+restore, 3 states + host generator (anchor) | %.1f | |\n", pair);
    for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        use_host(&c, ops[i].null_host, ops[i].trigger, ops[i].needs_grad);
        ns = median_ns(ops[i].fn, &c);
        if (ops[i].per_region)
            printf("| %s | %.1f | %.1f |\n", ops[i].what, ns, ns - 2 * ffi - 2 * pair);
        else
            printf("| %s | %.1f | |\n", ops[i].what, ns);
    }
    printf("\n%d batches of %d regions each, median; target <= 2000 ns per region.\n", REPS,
           BATCH);
    use_host(&c, 1, 0, 1);
    CHECK(recap_plain_engine_destroy(plain));
    CHECK(recap_signature_destroy(c.sig));
    CHECK(recap_snapshot_destroy(c.snap));
    CHECK(recap_tracker_destroy(c.t));
    CHECK(recap_generator_destroy(c.host_gen));
    return 0;
}
