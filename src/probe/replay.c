/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "probe/probe.h"

/*
 * The graph-safe RNG contract end to end, through recap's own capture calls: a captured step
 * (two fills from one generator) launched K times draws exactly what K eager runs of the step
 * draw on a twin generator that started from the same state, and no launch repeats the one
 * before it. Eager execution is the oracle, as in tests/capture/test_capture.c.
 */

#define K 4
#define N_U32 70001    /* odd sizes: partial Philox blocks */
#define N_FLOAT 300001 /* more than one fill unit of 262144 words */
#define STEP_BYTES (4 * (N_U32 + N_FLOAT))

typedef struct {
    recap_generator_h gen;
    void *u32, *flt;
} step_t;

static recap_status_t step_init(step_t *s, uint64_t seed)
{
    recap_status_t st = recap_generator_create(0, &s->gen);

    if (st == RECAP_OK)
        st = recap_generator_manual_seed(s->gen, seed);
    if (st == RECAP_OK)
        st = recap_device_alloc(0, 4 * N_U32, &s->u32);
    if (st == RECAP_OK)
        st = recap_device_alloc(0, 4 * N_FLOAT, &s->flt);
    return st;
}

static void step_free(step_t *s)
{
    if (s->u32 != NULL)
        recap_device_free(0, s->u32);
    if (s->flt != NULL)
        recap_device_free(0, s->flt);
    if (s->gen != NULL)
        recap_generator_destroy(s->gen);
}

static recap_status_t step_run(step_t *s, recap_stream_t stream)
{
    recap_status_t st = recap_generator_fill_u32(s->gen, stream, s->u32, N_U32);

    if (st == RECAP_OK)
        st = recap_generator_fill_uniform(s->gen, stream, s->flt, N_FLOAT);
    return st;
}

/* The step's output after the stream's work finished. */
static recap_status_t step_read(step_t *s, recap_stream_t stream, unsigned char *dst)
{
    recap_status_t st = recap_stream_synchronize(stream);

    if (st == RECAP_OK)
        st = recap_memcpy_to_host(0, dst, s->u32, 4 * N_U32);
    if (st == RECAP_OK)
        st = recap_memcpy_to_host(0, dst + 4 * N_U32, s->flt, 4 * N_FLOAT);
    return st;
}

/* Launches K times, comparing each launch with an eager run of the twin. Returns 0 when all
 * matched; otherwise the detail says where it went wrong. */
static int replays(recap__probe_out_t *out, step_t *w, step_t *twin, recap_graph_exec_t exec,
                   recap_stream_t stream, unsigned char *buf)
{
    unsigned char *got = buf, *want = buf + STEP_BYTES, *prev = buf + 2 * STEP_BYTES;
    recap_status_t st;
    int k;

    for (k = 0; k < K; k++) {
        st = recap_graph_launch(exec, stream);
        if (st == RECAP_OK)
            st = step_read(w, stream, got);
        if (st == RECAP_OK)
            st = step_run(twin, stream);
        if (st == RECAP_OK)
            st = step_read(twin, stream, want);
        if (st != RECAP_OK) {
            recap__probe_fail(out, "launch %d: %s", k, recap_last_error());
            return -1;
        }
        if (memcmp(got, want, STEP_BYTES) != 0) {
            recap__probe_fail(out, "launch %d drew other numbers than eager run %d", k, k);
            return -1;
        }
        if (k > 0 && memcmp(got, prev, STEP_BYTES) == 0) {
            recap__probe_fail(out, "launch %d repeated the numbers of launch %d", k, k - 1);
            return -1;
        }
        memcpy(prev, got, STEP_BYTES);
    }
    return 0;
}

/* Captures w's step on `stream`, instantiates it and checks its launches. */
static void capture_and_replay(recap__probe_out_t *out, step_t *w, step_t *twin,
                               recap_stream_t stream, unsigned char *buf)
{
    recap_graph_t graph = NULL;
    recap_graph_exec_t exec = NULL;
    recap_status_t st;

    st = recap_stream_begin_capture(stream, RECAP_CAPTURE_GLOBAL);
    if (st == RECAP_OK) {
        st = step_run(w, stream);
        /* End the capture whatever happened inside it, so the stream is usable again. */
        if (recap_stream_end_capture(stream, &graph) != RECAP_OK && st == RECAP_OK)
            st = RECAP_ERR_CUDA;
    }
    if (st == RECAP_OK)
        st = recap_graph_instantiate(graph, &exec);
    if (st != RECAP_OK)
        recap__probe_fail(out, "capturing the step: %s", recap_last_error());
    else if (replays(out, w, twin, exec, stream, buf) == 0)
        recap__probe_say(out, "a captured step (%d + %d words from one generator, device 0) "
                         "launched %d times drew exactly what %d eager runs drew, fresh numbers "
                         "each launch", N_U32, N_FLOAT, K, K);
    if (exec != NULL)
        recap_graph_exec_destroy(exec);
    if (graph != NULL)
        recap_graph_destroy(graph);
}

void recap__probe_replay(recap__probe_out_t *out)
{
    step_t w = {0}, twin = {0};
    recap_stream_t stream = NULL;
    unsigned char *buf = malloc(3 * (size_t)STEP_BYTES);
    recap_status_t st;

    st = buf == NULL ? recap__fail(RECAP_ERR_NO_MEMORY, "out of host memory") : RECAP_OK;
    if (st == RECAP_OK)
        st = step_init(&w, 0x5eed0001);
    if (st == RECAP_OK)
        st = step_init(&twin, 0x5eed0001); /* same seed, offset 0: the same starting state */
    if (st == RECAP_OK)
        st = recap_stream_create(0, &stream);
    if (st != RECAP_OK)
        recap__probe_fail(out, "setting up: %s", recap_last_error());
    else
        capture_and_replay(out, &w, &twin, stream, buf);
    if (stream != NULL)
        recap_stream_destroy(stream);
    step_free(&w);
    step_free(&twin);
    free(buf);
}
