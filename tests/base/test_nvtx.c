/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap's NVTX ranges, seen by a tool attached as Nsight Systems attaches: a fake NVTX tool
 * (tests/double/fake_nvtx.c) named by NVTX_INJECTION64_PATH before recap's first NVTX call. Priming
 * before a capture, each launch of a graph drawing random numbers (and its slot write), region
 * release and rebuild, and a checkpoint's recompute each push a range in the "recap" domain and
 * pop it; a graph without random numbers pushes none. Built only with the NVTX3 headers.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "test_region_util.h"

static size_t (*nvtx_log)(char *, size_t);
static void (*nvtx_clear)(void);
static char text[1 << 16];

/* The tool's lines since the last call. */
static const char *events(void)
{
    nvtx_log(text, sizeof(text));
    nvtx_clear();
    return text;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;

    for (; (hay = strstr(hay, needle)) != NULL; hay += strlen(needle))
        n++;
    return n;
}

/* Every push in `log` is popped, in the recap domain. */
static void assert_balanced(const char *log)
{
    ck_assert_int_eq(count(log, "push recap: "), count(log, "pop recap\n"));
}

static void setup(void)
{
    void *tool;
    int version;

    ck_assert_ok(recap_driver_version(&version));
    tool = dlopen(RECAP_FAKE_NVTX, RTLD_NOW | RTLD_NOLOAD);
    if (tool == NULL) { /* recap's first range loads it: prime a device to make one */
        recap_stream_t s;

        ck_assert_ok(recap_stream_create(0, &s));
        ck_assert_ok(recap_capture_will_begin(s, RECAP_CAPTURE_GLOBAL));
        ck_assert_ok(recap_stream_destroy(s));
        tool = dlopen(RECAP_FAKE_NVTX, RTLD_NOW | RTLD_NOLOAD);
    }
    ck_assert_msg(tool != NULL, "NVTX did not load the tool named by NVTX_INJECTION64_PATH");
    nvtx_log = (size_t (*)(char *, size_t))dlsym(tool, "fake_nvtx_log");
    nvtx_clear = (void (*)(void))dlsym(tool, "fake_nvtx_clear");
    ck_assert(nvtx_log != NULL && nvtx_clear != NULL);
    events();
}

/* Captures one fill from a fresh device generator on s. */
static recap_graph_exec_t capture_fill(recap_stream_t s, recap_generator_h *gen, void **buf,
                                       recap_graph_t *g)
{
    recap_graph_exec_t e;

    ck_assert_ok(recap_generator_create(0, gen));
    ck_assert_ok(recap_device_alloc(0, 4096 * 4, buf));
    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_generator_fill_u32(*gen, s, *buf, 4096));
    ck_assert_ok(recap_stream_end_capture(s, g));
    ck_assert_ok(recap_graph_instantiate(*g, &e));
    return e;
}

START_TEST(capture_and_launches_show_prime_advance_and_slot_write_ranges)
{
    recap_generator_h gen;
    recap_stream_t s;
    recap_graph_t g;
    recap_graph_exec_t e;
    void *buf;
    const char *log;
    int k;

    ck_assert_ok(recap_stream_create(0, &s));
    e = capture_fill(s, &gen, &buf, &g);
    log = events();
    ck_assert_msg(count(log, "push recap: recap prime\npop recap\n") == 1, "%s", log);
    ck_assert_ok(recap_graph_launch(e, s)); /* the first launch writes the fresh slot */
    log = events();
    ck_assert_msg(strcmp(log, "push recap: recap launch advance\npush recap: recap slot write\n"
                              "pop recap\npop recap\n") == 0, "%s", log);
    for (k = 0; k < 3; k++)
        ck_assert_ok(recap_graph_launch(e, s)); /* steady state: no device work */
    log = events();
    ck_assert_msg(count(log, "push recap: recap launch advance\npop recap\n") == 3 &&
                  count(log, "slot write") == 0, "%s", log);
    ck_assert_ok(recap_stream_synchronize(s));
    ck_assert_ok(recap_graph_exec_destroy(e));
    ck_assert_ok(recap_graph_destroy(g));
    ck_assert_ok(recap_device_free(0, buf));
    ck_assert_ok(recap_generator_destroy(gen));
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

/* A graph that draws nothing costs its launch a lookup only: no range. */
START_TEST(graph_without_rng_launches_without_a_range)
{
    recap_stream_t s;
    recap_graph_t g;
    recap_graph_exec_t e;
    const char *log;

    ck_assert_ok(recap_stream_create(0, &s));
    ck_assert_ok(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL));
    ck_assert_ok(recap_stream_end_capture(s, &g));
    ck_assert_ok(recap_graph_instantiate(g, &e));
    events();
    ck_assert_ok(recap_graph_launch(e, s));
    log = events();
    ck_assert_msg(*log == '\0', "%s", log);
    ck_assert_ok(recap_stream_synchronize(s));
    ck_assert_ok(recap_graph_exec_destroy(e));
    ck_assert_ok(recap_graph_destroy(g));
    ck_assert_ok(recap_stream_destroy(s));
}
END_TEST

START_TEST(region_release_and_rebuild_show_ranges)
{
    recap_signature_h sig = rr_dropout_sig();
    recap_buffer_t x, y;
    recap_region_h r;
    recap_value_t v[6];
    rr_rig_t rig;
    const char *log;

    rr_rig_init(&rig, 0, 1234);
    x = rr_fbuf(&rig, 1000, 1, 1);
    y = rr_fbuf(&rig, 1000, 1, 0);
    rr_dropout_args(v, x, y, 1000, 0.5f, 0.25f, rig.tracker);
    ck_assert_ok(recap_region_create(&rig.params, &r));
    ck_assert_ok(recap_region_record(r, sig, (recap_func_t)rr_dropout_fn, v, 6));
    events();
    ck_assert_ok(recap_region_release(r, NULL));
    log = events();
    ck_assert_msg(strcmp(log, "push recap: recap region release\npop recap\n") == 0, "%s", log);
    ck_assert_ok(recap_region_rebuild(r));
    log = events();
    ck_assert_msg(strcmp(log, "push recap: recap region rebuild\npop recap\n") == 0, "%s", log);
    ck_assert_ok(recap_region_destroy(r));
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ck_assert_ok(recap_plain_buffer_destroy(y));
    rr_rig_free(&rig);
}
END_TEST

START_TEST(checkpoint_backward_shows_a_recompute_range)
{
    recap_signature_h sig = rr_dropout_sig();
    recap_buffer_t x, y, out = NULL;
    recap_checkpoint_h ck;
    recap_value_t v[6];
    rr_rig_t rig;
    const char *log;

    rr_rig_init(&rig, 0, 99);
    x = rr_fbuf(&rig, 500, 1, 1);
    y = rr_fbuf(&rig, 500, 1, 0);
    rr_dropout_args(v, x, y, 500, 0.5f, 0.25f, rig.tracker);
    ck_assert_ok(recap_checkpoint_run(&rig.params, sig, (recap_func_t)rr_dropout_fn, v, 6, &ck));
    events();
    ck_assert_ok(recap_checkpoint_backward(ck, &out, 1));
    log = events();
    ck_assert_msg(strcmp(log, "push recap: recap checkpoint recompute\npop recap\n") == 0, "%s",
                  log);
    assert_balanced(log);
    ck_assert_ok(recap_checkpoint_destroy(ck));
    ck_assert_ok(recap_plain_buffer_destroy(out));
    ck_assert_ok(recap_signature_destroy(sig));
    ck_assert_ok(recap_plain_buffer_destroy(x));
    ck_assert_ok(recap_plain_buffer_destroy(y));
    rr_rig_free(&rig);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nvtx");
    TCase *tc = tcase_create("nvtx");

    /* NVTX reads it at recap's first range, in each forked test's process. */
    setenv("NVTX_INJECTION64_PATH", RECAP_FAKE_NVTX, 1);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, capture_and_launches_show_prime_advance_and_slot_write_ranges);
    tcase_add_test(tc, graph_without_rng_launches_without_a_range);
    tcase_add_test(tc, region_release_and_rebuild_show_ranges);
    tcase_add_test(tc, checkpoint_backward_shows_a_recompute_range);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
