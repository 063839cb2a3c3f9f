/* SPDX-License-Identifier: Apache-2.0 */
/* Recorded calls: signatures (libffi), argument values copied at record time and passed again at
 * rebuild, return values, and the signatures and calls that are refused. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "test_region_util.h"

/* Every argument type: writes what it received into the output buffer (as raw 8-byte words) so
 * the record and the rebuild can be compared with what was passed. */
typedef struct {
    int32_t i32;
    int64_t i64;
    uint32_t u32;
    uint64_t u64;
    float f;
    double d;
    void *p;
    float in0;
} all_t;

static int all_runs;

static int32_t all_fn(int32_t a, int64_t b, uint32_t c, uint64_t d, float e, double f, void *g,
                      const float *in, all_t *out)
{
    all_runs++;
    out->i32 = a;
    out->i64 = b;
    out->u32 = c;
    out->u64 = d;
    out->f = e;
    out->d = f;
    out->p = g;
    out->in0 = in[0];
    return -a;
}

static const recap_type_t all_types[] = {
    RECAP_TYPE_INT32,  RECAP_TYPE_INT64,   RECAP_TYPE_UINT32, RECAP_TYPE_UINT64,
    RECAP_TYPE_FLOAT,  RECAP_TYPE_DOUBLE,  RECAP_TYPE_POINTER, RECAP_TYPE_BUFFER,
    RECAP_TYPE_BUFFER_OUT};

START_TEST(every_argument_type_reaches_the_function_at_record_and_rebuild)
{
    rr_rig_t rig;
    recap_signature_h sig;
    recap_region_h r;
    recap_value_t v[9], ret;
    recap_buffer_t in, out;
    all_t *o, want;

    rr_rig_init(&rig, 0, 11);
    in = rr_fbuf(&rig, 1, 1, 1);
    ck_assert_ok(recap_plain_buffer_create(rig.engine, sizeof(all_t), 1, &out));
    want = (all_t){(int32_t)tu_rand(), (int64_t)tu_rand(), (uint32_t)tu_rand(), tu_rand(),
                   (float)tu_rand_below(1000) / 7.0f, (double)tu_rand() / 3.0,
                   (void *)(uintptr_t)tu_rand(), rr_data(in)[0]};
    v[0].i32 = want.i32;
    v[1].i64 = want.i64;
    v[2].u32 = want.u32;
    v[3].u64 = want.u64;
    v[4].f32 = want.f;
    v[5].f64 = want.d;
    v[6].ptr = want.p;
    v[7].buf = in;
    v[8].buf = out;
    ck_assert_ok(recap_signature_create(RECAP_TYPE_INT32, all_types, 9, &sig));
    ck_assert_ok(recap_region_create(&rig.params, &r));
    ck_assert_ok(recap_region_record(r, sig, (recap_func_t)all_fn, v, 9));
    memset(v, 0xAB, sizeof(v)); /* the region copied them */
    for (all_runs = 0; all_runs < 2;) {
        o = (all_t *)(void *)rr_data(out);
        ck_assert_int_eq(o->i32, want.i32);
        ck_assert_int_eq(o->i64, want.i64);
        ck_assert_uint_eq(o->u32, want.u32);
        ck_assert_uint_eq(o->u64, want.u64);
        ck_assert_float_eq(o->f, want.f);
        ck_assert_double_eq(o->d, want.d);
        ck_assert_ptr_eq(o->p, want.p);
        ck_assert_float_eq(o->in0, want.in0);
        ck_assert_ok(recap_region_return_value(r, &ret));
        ck_assert_int_eq(ret.i32, -want.i32);
        if (all_runs == 1)
            break;
        ck_assert_ok(recap_region_release(r, NULL));
        ck_assert_ok(recap_region_rebuild(r));
    }
    ck_assert_int_eq(all_runs, 1); /* counted from the rebuild */
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_ok(recap_plain_buffer_destroy(in));
    ck_assert_ok(recap_plain_buffer_destroy(out));
    rr_rig_free(&rig);
}
END_TEST

/* Return values of each type, through a region whose input buffer needs no gradient (a plain
 * call) and one that does. */
static int32_t ret_i32(const float *x) { return -7 - (int32_t)x[0]; }
static uint32_t ret_u32(const float *x) { return 0xFFFFFFF0u + (uint32_t)x[0]; }
static int64_t ret_i64(const float *x) { return -(1LL << 40) - (int64_t)x[0]; }
static uint64_t ret_u64(const float *x) { return (1ULL << 63) + (uint64_t)x[0]; }
static float ret_f(const float *x) { return x[0] * 0.5f; }
static double ret_d(const float *x) { return (double)x[0] / 3.0; }
static void *ret_p(const float *x) { return (void *)x; }

static recap_value_t returned(rr_rig_t *rig, recap_type_t t, recap_func_t fn, recap_buffer_t x)
{
    const recap_type_t arg = RECAP_TYPE_BUFFER;
    recap_value_t v = {.buf = x}, ret;
    recap_signature_h sig;
    recap_region_h r;

    ck_assert_ok(recap_signature_create(t, &arg, 1, &sig));
    ck_assert_ok(recap_region_create(&rig->params, &r));
    memset(&ret, 0x5A, sizeof(ret));
    ck_assert_ok(recap_region_record(r, sig, fn, &v, 1));
    ck_assert_ok(recap_region_return_value(r, &ret));
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_ok(recap_signature_destroy(sig));
    return ret;
}

START_TEST(return_values_of_every_type_come_back)
{
    rr_rig_t rig;
    recap_buffer_t x;
    float k;

    rr_rig_init(&rig, 0, 12);
    x = rr_fbuf(&rig, 1, _i, 0);
    k = (float)tu_rand_below(100);
    rr_data(x)[0] = k;
    ck_assert_int_eq(returned(&rig, RECAP_TYPE_INT32, (recap_func_t)ret_i32, x).i32,
                     -7 - (int32_t)k);
    ck_assert_uint_eq(returned(&rig, RECAP_TYPE_UINT32, (recap_func_t)ret_u32, x).u32,
                      0xFFFFFFF0u + (uint32_t)k);
    ck_assert_int_eq(returned(&rig, RECAP_TYPE_INT64, (recap_func_t)ret_i64, x).i64,
                     -(1LL << 40) - (int64_t)k);
    ck_assert_uint_eq(returned(&rig, RECAP_TYPE_UINT64, (recap_func_t)ret_u64, x).u64,
                      (1ULL << 63) + (uint64_t)k);
    ck_assert_float_eq(returned(&rig, RECAP_TYPE_FLOAT, (recap_func_t)ret_f, x).f32, k * 0.5f);
    ck_assert_double_eq(returned(&rig, RECAP_TYPE_DOUBLE, (recap_func_t)ret_d, x).f64,
                        (double)k / 3.0);
    ck_assert_ptr_eq(returned(&rig, RECAP_TYPE_POINTER, (recap_func_t)ret_p, x).ptr, rr_data(x));
    ck_assert_uint_eq(returned(&rig, RECAP_TYPE_VOID, (recap_func_t)ret_p, x).u64, 0);
    ck_assert_ok(recap_plain_buffer_destroy(x));
    rr_rig_free(&rig);
}
END_TEST

/* 32 arguments: the output and 31 integers; writes their weighted sum. */
typedef uint64_t u;
static void wide_fn(uint64_t *out, u a1, u a2, u a3, u a4, u a5, u a6, u a7, u a8, u a9, u a10,
                    u a11, u a12, u a13, u a14, u a15, u a16, u a17, u a18, u a19, u a20, u a21,
                    u a22, u a23, u a24, u a25, u a26, u a27, u a28, u a29, u a30, u a31)
{
    const u a[31] = {a1,  a2,  a3,  a4,  a5,  a6,  a7,  a8,  a9,  a10, a11, a12, a13, a14, a15, a16,
                     a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31};
    int i;

    *out = 0;
    for (i = 0; i < 31; i++)
        *out += a[i] * (u)(i + 1);
}

START_TEST(thirty_two_arguments_are_accepted)
{
    recap_type_t t[RECAP_MAX_ARGS];
    recap_value_t v[RECAP_MAX_ARGS];
    rr_rig_t rig;
    recap_signature_h sig;
    recap_region_h r;
    recap_buffer_t out;
    uint64_t want = 0;
    void *d;
    int i;

    rr_rig_init(&rig, 0, 13);
    ck_assert_ok(recap_plain_buffer_create(rig.engine, 8, 1, &out));
    t[0] = RECAP_TYPE_BUFFER_OUT;
    v[0].buf = out;
    for (i = 1; i < RECAP_MAX_ARGS; i++) {
        t[i] = RECAP_TYPE_UINT64;
        v[i].u64 = tu_rand() >> 8;
        want += v[i].u64 * (u)i;
    }
    ck_assert_ok(recap_signature_create(RECAP_TYPE_VOID, t, RECAP_MAX_ARGS, &sig));
    ck_assert_ok(recap_region_create(&rig.params, &r));
    ck_assert_ok(recap_region_record(r, sig, (recap_func_t)wide_fn, v, RECAP_MAX_ARGS));
    ck_assert_ok(recap_plain_buffer_data(out, &d));
    ck_assert_uint_eq(*(uint64_t *)d, want);
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_ok(recap_plain_buffer_destroy(out));
    rr_rig_free(&rig);
}
END_TEST

static void assert_sig_refused(recap_type_t ret, const recap_type_t *t, size_t n, const char *why)
{
    recap_signature_h sig = (recap_signature_h)(uintptr_t)1;

    ck_assert_status(recap_signature_create(ret, t, n, &sig), RECAP_ERR_INVALID_ARG);
    ck_assert_msg(strstr(recap_last_error(), why) != NULL, "message '%s' lacks '%s'",
                  recap_last_error(), why);
    ck_assert_ptr_eq(sig, (recap_signature_h)(uintptr_t)1);
}

START_TEST(bad_signatures_are_refused_with_a_message)
{
    recap_type_t t[RECAP_MAX_ARGS + 1];
    size_t i, bad = tu_rand_below(4);

    for (i = 0; i <= RECAP_MAX_ARGS; i++)
        t[i] = RECAP_TYPE_INT32;
    assert_sig_refused(RECAP_TYPE_VOID, t, RECAP_MAX_ARGS + 1, "at most 32");
    t[bad] = (recap_type_t)42;
    assert_sig_refused(RECAP_TYPE_VOID, t, 4, "unknown type code 42");
    t[bad] = (recap_type_t)-1;
    assert_sig_refused(RECAP_TYPE_VOID, t, 4, "unknown type code -1");
    t[bad] = RECAP_TYPE_VOID;
    assert_sig_refused(RECAP_TYPE_VOID, t, 4, "VOID is a return type");
    t[bad] = RECAP_TYPE_INT32;
    assert_sig_refused((recap_type_t)99, t, 4, "unknown return type");
    assert_sig_refused(RECAP_TYPE_BUFFER, t, 4, "cannot be a return type");
    assert_sig_refused(RECAP_TYPE_BUFFER_OUT, t, 4, "cannot be a return type");
    assert_sig_refused(RECAP_TYPE_VOID, NULL, 2, "args is NULL");
    ck_assert_status(recap_signature_create(RECAP_TYPE_VOID, t, 1, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_signature_destroy(NULL), RECAP_ERR_INVALID_ARG);
}
END_TEST

static int never_runs;
static void never_fn(const float *x, float *y, uint64_t n)
{
    never_runs++;
}

START_TEST(bad_calls_are_refused_at_record_and_run_nothing)
{
    rr_rig_t rig;
    recap_signature_h sig = rr_dropout_sig();
    recap_region_h r;
    recap_value_t v[6];
    recap_buffer_t x, y;
    recap_region_state_t s;

    rr_rig_init(&rig, 0, 14);
    x = rr_fbuf(&rig, 4, 1, 1);
    y = rr_fbuf(&rig, 4, 1, 0);
    rr_dropout_args(v, x, y, 4, 1.0f, 0.0f, rig.tracker);
    ck_assert_ok(recap_region_create(&rig.params, &r));
    never_runs = 0;
    ck_assert_status(recap_region_record(r, sig, NULL, v, 6), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "function is NULL"));
    ck_assert_status(recap_region_record(r, NULL, (recap_func_t)never_fn, v, 6),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_region_record(r, sig, (recap_func_t)never_fn, v, 5),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "5 arguments for a signature of 6"));
    ck_assert_status(recap_region_record(r, sig, (recap_func_t)never_fn, v, 7),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_region_record(r, sig, (recap_func_t)never_fn, v, 33),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "at most 32"));
    ck_assert_status(recap_region_record(r, sig, (recap_func_t)never_fn, NULL, 6),
                     RECAP_ERR_INVALID_ARG);
    v[1].buf = NULL;
    ck_assert_status(recap_region_record(r, sig, (recap_func_t)never_fn, v, 6),
                     RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "argument 1: NULL buffer"));
    ck_assert_int_eq(never_runs, 0);
    ck_assert_ok(recap_region_state(r, &s));
    ck_assert_int_eq(s, RECAP_REGION_NEW);
    ck_assert_uint_eq(rr_stats(&rig).saves, 0);
    /* A good call still records afterwards. */
    v[1].buf = y;
    ck_assert_ok(recap_region_record(r, sig, (recap_func_t)rr_dropout_fn, v, 6));
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ck_assert_ok(recap_plain_buffer_destroy(y));
    rr_rig_free(&rig);
}
END_TEST

/* A host whose functions receive the handles themselves (buffer_arg NULL) and keeps no saved
 * copies (save/load/drop NULL): recap passes and stashes the handles. */
static void handle_fn(recap_buffer_t x, recap_buffer_t y, uint64_t n)
{
    void *dx, *dy;

    recap_plain_buffer_data(x, &dx);
    recap_plain_buffer_data(y, &dy);
    memcpy(dy, dx, n * sizeof(float));
}

START_TEST(a_host_without_buffer_arg_or_save_gets_its_handles)
{
    static const recap_type_t t[] = {RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT, RECAP_TYPE_UINT64};
    recap_engine_ops_t ops;
    rr_rig_t rig;
    size_t n = 1 + tu_rand_below(300);
    recap_buffer_t x, y;
    recap_signature_h sig;
    recap_region_h r;
    recap_value_t v[3];

    rr_rig_init(&rig, 0, 15);
    ops = *rig.ops;
    ops.buffer_arg = NULL;
    ops.save = NULL;
    ops.load = NULL;
    ops.drop = NULL;
    rig.params.ops = &ops;
    x = rr_fbuf(&rig, n, 1, 1);
    y = rr_fbuf(&rig, n, 1, 0);
    v[0].buf = x;
    v[1].buf = y;
    v[2].u64 = n;
    ck_assert_ok(recap_signature_create(RECAP_TYPE_VOID, t, 3, &sig));
    ck_assert_ok(recap_region_create(&rig.params, &r));
    ck_assert_ok(recap_region_record(r, sig, (recap_func_t)handle_fn, v, 3));
    ck_assert_ok(recap_region_release(r, NULL));
    ck_assert_ok(recap_region_rebuild(r));
    ck_assert_mem_eq(rr_data(y), rr_data(x), n * sizeof(float));
    ck_assert_uint_eq(rr_stats(&rig).saves, 0);
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ck_assert_ok(recap_plain_buffer_destroy(y));
    rr_rig_free(&rig);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("region_call");
    TCase *tc = tcase_create("region_call");

    tcase_add_test(tc, every_argument_type_reaches_the_function_at_record_and_rebuild);
    tcase_add_loop_test(tc, return_values_of_every_type_come_back, 0, 2);
    tcase_add_test(tc, thirty_two_arguments_are_accepted);
    tcase_add_test(tc, bad_signatures_are_refused_with_a_message);
    tcase_add_test(tc, bad_calls_are_refused_at_record_and_run_nothing);
    tcase_add_test(tc, a_host_without_buffer_arg_or_save_gets_its_handles);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
