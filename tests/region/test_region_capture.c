/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Regions on device buffers, eagerly and inside a captured graph: the rebuild inside the capture
 * redraws exactly the forward's random numbers on every replay (snapshots on a graph-safe
 * tracker are capture-relative). Runs against the CUDA test double in CI, which runs only recap's
 * own kernels: the recorded function therefore only draws (a dropout mask and uniforms), with
 * no arithmetic of its own.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "testutil.h"

typedef struct {
    recap_plain_engine_h engine;
    const recap_engine_ops_t *ops;
    recap_tracker_h tracker;
    recap_stream_t stream;
    recap_signature_h sig;
    recap_buffer_t x, mask, u;
    size_t n;
} devrig_t;

/* The recorded function: a dropout mask from the model-parallel state, uniforms from the
 * default one. x is the layer input (a gradient flows through it), unread here. */
static void draw_fn(const float *x, uint32_t *mask, float *u, uint64_t n, recap_tracker_h t,
                    recap_stream_t s)
{
    recap_fork_token_t tok;
    recap_generator_h g;

    recap_tracker_generator(t, &g);
    recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok);
    recap_generator_fill_u32(g, s, mask, n);
    recap_tracker_unfork(t, tok);
    recap_generator_fill_uniform(g, s, u, n);
}

static void dev_init(devrig_t *d, uint32_t host_flags)
{
    static const recap_type_t t[] = {RECAP_TYPE_BUFFER,  RECAP_TYPE_BUFFER_OUT,
                                     RECAP_TYPE_BUFFER_OUT, RECAP_TYPE_UINT64,
                                     RECAP_TYPE_POINTER, RECAP_TYPE_POINTER};
    recap_tracker_params_t p = {RECAP_TRACKER_GRAPH_SAFE, NULL, 0, NULL};

    d->n = 1 + tu_rand_below(50000);
    ck_assert_ok(recap_plain_engine_create(0, host_flags, &d->engine));
    ck_assert_ok(recap_plain_engine_ops(&d->ops));
    ck_assert_ok(recap_tracker_create(&p, &d->tracker));
    ck_assert_ok(recap_tracker_add(d->tracker, RECAP_RNG_MODEL_PARALLEL, 1 + tu_rand_below(1000)));
    ck_assert_ok(recap_stream_create(0, &d->stream));
    ck_assert_ok(recap_signature_create(RECAP_TYPE_VOID, t, 6, &d->sig));
    ck_assert_ok(recap_plain_buffer_create(d->engine, d->n * 4, 1, &d->x));
    ck_assert_ok(recap_plain_buffer_create(d->engine, d->n * 4, 1, &d->mask));
    ck_assert_ok(recap_plain_buffer_create(d->engine, d->n * 4, 1, &d->u));
}

static void dev_args(devrig_t *d, recap_value_t *v)
{
    v[0].buf = d->x;
    v[1].buf = d->mask;
    v[2].buf = d->u;
    v[3].u64 = d->n;
    v[4].ptr = d->tracker;
    v[5].ptr = d->stream;
}

static void dev_free(devrig_t *d)
{
    ck_assert_ok(recap_plain_buffer_destroy(d->x));
    ck_assert_ok(recap_plain_buffer_destroy(d->mask));
    ck_assert_ok(recap_plain_buffer_destroy(d->u));
    ck_assert_ok(recap_signature_destroy(d->sig));
    ck_assert_ok(recap_stream_destroy(d->stream));
    ck_assert_ok(recap_tracker_destroy(d->tracker));
    ck_assert_ok(recap_plain_engine_destroy(d->engine));
}

static void *data_of(recap_buffer_t b)
{
    void *p;

    ck_assert_ok(recap_plain_buffer_data(b, &p));
    return p;
}

static void to_host(const void *dev, void *engine, size_t bytes)
{
    ck_assert_ok(recap_memcpy_to_host(0, engine, dev, bytes));
}

START_TEST(a_device_region_rebuilds_eagerly)
{
    devrig_t d;
    recap_region_params_t p;
    recap_region_h r;
    recap_value_t v[6];
    uint32_t *m0, *m1;
    float *u0, *u1;
    recap_plain_stats_t s;

    dev_init(&d, 0);
    m0 = malloc(d.n * 4);
    m1 = malloc(d.n * 4);
    u0 = malloc(d.n * 4);
    u1 = malloc(d.n * 4);
    p = (recap_region_params_t){d.ops, d.engine, d.tracker, NULL, 0};
    dev_args(&d, v);
    ck_assert_ok(recap_region_create(&p, &r));
    ck_assert_ok(recap_region_record(r, d.sig, (recap_func_t)draw_fn, v, 6));
    ck_assert_ok(recap_stream_synchronize(d.stream));
    to_host(data_of(d.mask), m0, d.n * 4);
    to_host(data_of(d.u), u0, d.n * 4);
    ck_assert_ok(recap_region_release(r, NULL));
    ck_assert_ok(recap_plain_engine_stats(d.engine, &s));
    ck_assert_uint_eq(s.live_bytes, d.n * 4); /* only x: device memory given back */
    ck_assert_ok(recap_region_rebuild(r));
    ck_assert_ok(recap_stream_synchronize(d.stream));
    to_host(data_of(d.mask), m1, d.n * 4);
    to_host(data_of(d.u), u1, d.n * 4);
    ck_assert_mem_eq(m0, m1, d.n * 4);
    ck_assert_mem_eq(u0, u1, d.n * 4);
    ck_assert_ok(recap_region_destroy(r));
    dev_free(&d);
    free(m0);
    free(m1);
    free(u0);
    free(u1);
}
END_TEST

/* Copies of the forward's storage (kept by the engine after the release, as a graph pool would)
 * and of the rebuilt one after each replay. */
static void check_replays(devrig_t *d, recap_graph_exec_t e, void *fwd_mask, void *fwd_u,
                          void *new_mask, void *new_u)
{
    uint32_t *a = malloc(d->n * 4), *b = malloc(d->n * 4), *prev = calloc(d->n, 4);
    float *fa = malloc(d->n * 4), *fb = malloc(d->n * 4);
    int k;

    for (k = 0; k < 3; k++) {
        ck_assert_ok(recap_graph_launch(e, d->stream));
        ck_assert_ok(recap_stream_synchronize(d->stream));
        to_host(fwd_mask, a, d->n * 4);
        to_host(new_mask, b, d->n * 4);
        to_host(fwd_u, fa, d->n * 4);
        to_host(new_u, fb, d->n * 4);
        ck_assert_msg(memcmp(a, b, d->n * 4) == 0, "replay %d: rebuilt mask differs", k);
        ck_assert_msg(memcmp(fa, fb, d->n * 4) == 0, "replay %d: rebuilt uniforms differ", k);
        ck_assert_msg(memcmp(a, prev, d->n * 4) != 0, "replay %d repeated the last mask", k);
        memcpy(prev, a, d->n * 4);
    }
    free(a);
    free(b);
    free(prev);
    free(fa);
    free(fb);
}

START_TEST(a_region_rebuilt_inside_a_capture_redraws_the_forward_on_every_replay)
{
    devrig_t d;
    recap_region_params_t p;
    recap_region_h r;
    recap_value_t v[6];
    recap_graph_t g;
    recap_graph_exec_t e;
    void *fwd_mask, *fwd_u;

    dev_init(&d, RECAP_PLAIN_KEEP_FREED);
    p = (recap_region_params_t){d.ops, d.engine, d.tracker, NULL, 0};
    dev_args(&d, v);
    /* Relaxed: the rebuild allocates its new buffers inside the capture. */
    ck_assert_ok(recap_stream_begin_capture(d.stream, RECAP_CAPTURE_RELAXED));
    ck_assert_ok(recap_region_create(&p, &r));
    ck_assert_ok(recap_region_record(r, d.sig, (recap_func_t)draw_fn, v, 6));
    fwd_mask = data_of(d.mask);
    fwd_u = data_of(d.u);
    ck_assert_ok(recap_region_release(r, NULL));
    ck_assert_ptr_null(data_of(d.mask));
    ck_assert_ok(recap_region_rebuild(r));
    ck_assert_ptr_ne(data_of(d.mask), fwd_mask);
    ck_assert_ok(recap_stream_end_capture(d.stream, &g));
    ck_assert_ok(recap_graph_instantiate(g, &e));
    check_replays(&d, e, fwd_mask, fwd_u, data_of(d.mask), data_of(d.u));
    ck_assert_ok(recap_graph_exec_destroy(e));
    ck_assert_ok(recap_graph_destroy(g));
    ck_assert_ok(recap_region_destroy(r));
    dev_free(&d);
}
END_TEST

START_TEST(a_checkpoint_recomputed_inside_a_capture_redraws_the_forward)
{
    devrig_t d;
    recap_region_params_t p;
    recap_checkpoint_h ck;
    recap_value_t v[6];
    recap_buffer_t outs[2];
    recap_graph_t g;
    recap_graph_exec_t e;

    dev_init(&d, 0);
    p = (recap_region_params_t){d.ops, d.engine, d.tracker, NULL, 0};
    dev_args(&d, v);
    ck_assert_ok(recap_stream_begin_capture(d.stream, RECAP_CAPTURE_RELAXED));
    ck_assert_ok(recap_checkpoint_run(&p, d.sig, (recap_func_t)draw_fn, v, 6, &ck));
    ck_assert_ok(recap_checkpoint_backward(ck, outs, 2));
    ck_assert_ok(recap_stream_end_capture(d.stream, &g));
    ck_assert_ok(recap_graph_instantiate(g, &e));
    check_replays(&d, e, data_of(d.mask), data_of(d.u), data_of(outs[0]), data_of(outs[1]));
    ck_assert_ok(recap_graph_exec_destroy(e));
    ck_assert_ok(recap_graph_destroy(g));
    ck_assert_ok(recap_checkpoint_destroy(ck));
    ck_assert_ok(recap_plain_buffer_destroy(outs[0]));
    ck_assert_ok(recap_plain_buffer_destroy(outs[1]));
    dev_free(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("region_capture");
    TCase *tc = tcase_create("region_capture");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, a_device_region_rebuilds_eagerly);
    tcase_add_test(tc, a_region_rebuilt_inside_a_capture_redraws_the_forward_on_every_replay);
    tcase_add_test(tc, a_checkpoint_recomputed_inside_a_capture_redraws_the_forward);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
