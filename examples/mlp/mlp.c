/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap example: a training step of a small MLP (linear -> dropout -> GELU-like, several
 * layers, then a linear output and a squared-error loss), run without and with activation
 * recomputation. With it, each layer's dropout+GELU activations live in a region without output:
 * released as soon as the next layer has consumed them, rebuilt by a trigger when the backward
 * reaches that layer, with the forward's dropout masks redrawn exactly.
 *
 * It checks that the loss and every weight gradient are bit-identical both ways, and measures
 * activation memory through the plain engine's accounting: what is held when the backward starts
 * drops by exactly the bytes the regions released, and the step's peak by those bytes less the
 * last layer's, which is rebuilt as soon as the backward starts, when every other activation is
 * still alive. Runs on host buffers, and on device buffers too when a CUDA device (or, under
 * `make check`, recap's CUDA test double) is present: eagerly, and captured into a CUDA graph
 * that is replayed, eager execution being the oracle of every replay. Prints its figures; exits
 * 1 on a mismatch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static int failures;

static void expect(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "mlp: FAILED: %s\n", what);
        failures++;
    }
}

static void random_data(float *v, size_t n, uint64_t seed)
{
    size_t k;

    for (k = 0; k < n; k++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        v[k] = (float)(seed >> 40) / 16777216.0f * 2.0f - 1.0f;
    }
}

/* Words drawn from the model-parallel state after the step: the same with and without
 * regions, since a rebuild puts the RNG back where it found it. */
static uint64_t after_step_draw(mlp_env_t *env)
{
    recap_fork_token_t tok;
    recap_generator_h g;
    uint32_t w[2] = {0, 0};
    uint32_t *dev = NULL;

    mlp_check(recap_tracker_generator(env->tracker, &g), "generator");
    mlp_check(recap_tracker_fork(env->tracker, RECAP_RNG_MODEL_PARALLEL, &tok), "fork");
    if (env->device == RECAP_DEVICE_HOST) {
        mlp_check(recap_generator_fill_u32(g, NULL, w, 2), "draw");
    } else {
        mlp_check(recap_device_alloc(env->device, sizeof(w), (void **)&dev), "alloc");
        mlp_check(recap_generator_fill_u32(g, env->stream, dev, 2), "draw");
        mlp_check(recap_stream_synchronize(env->stream), "sync");
        mlp_check(recap_memcpy_to_host(env->device, w, dev, sizeof(w)), "D2H");
        mlp_check(recap_device_free(env->device, dev), "free");
    }
    mlp_check(recap_tracker_unfork(env->tracker, tok), "unfork");
    return (uint64_t)w[0] << 32 | w[1];
}

static void report(const char *where, const mlp_cfg_t *cfg, const mlp_result_t *r)
{
    uint64_t layer = 2ull * cfg->batch * cfg->width * sizeof(float);
    uint64_t saved_end = r[0].held_at_forward_end - r[1].held_at_forward_end;
    uint64_t saved_peak = r[0].peak - r[1].peak;

    printf("\n%s buffers: %d layers, batch %d, width %d, dropout %.2f\n", where, cfg->layers,
           cfg->batch, cfg->width, (double)cfg->drop);
    printf("| | without regions | with regions | saved |\n|---|---:|---:|---:|\n");
    printf("| activation bytes when the backward starts | %llu | %llu | %llu |\n",
           (unsigned long long)r[0].held_at_forward_end,
           (unsigned long long)r[1].held_at_forward_end, (unsigned long long)saved_end);
    printf("| peak activation bytes of the step | %llu | %llu | %llu |\n",
           (unsigned long long)r[0].peak, (unsigned long long)r[1].peak,
           (unsigned long long)saved_peak);
    printf("| loss | %.9g | %.9g | bit-identical: %s |\n", (double)r[0].loss, (double)r[1].loss,
           memcmp(&r[0].loss, &r[1].loss, sizeof(float)) == 0 ? "yes" : "NO");
    printf("released by the regions: %llu bytes (%d regions x %llu)\n",
           (unsigned long long)r[1].released, cfg->layers, (unsigned long long)layer);
    expect(r[0].released == 0, "nothing released without regions");
    expect(r[1].released == (uint64_t)cfg->layers * layer, "each region released mask + output");
    expect(saved_end == r[1].released, "bytes saved when the backward starts == bytes released");
    expect(saved_peak == r[1].released - layer, "peak saved == released less the last layer");
}

/* Device work enqueued by a step has run: its staging can go. */
static void finish(mlp_env_t *env)
{
    if (env->device != RECAP_DEVICE_HOST)
        mlp_check(recap_stream_synchronize(env->stream), "sync");
    mlp_env_done(env);
}

/* The step's inputs, and the engine run's outcome that the device runs must reproduce: the device
 * fill draws cuRAND's numbers as the engine one does, and the arithmetic is the same code. */
typedef struct {
    mlp_params_t w;
    float *x, *y;
    int have_ref;
    float ref_loss;
    mlp_params_t ref;
} model_t;

static void run(int device, const mlp_cfg_t *cfg, model_t *m)
{
    mlp_params_t g[2];
    mlp_result_t r[2];
    uint64_t next[2];
    mlp_env_t env;
    int k;

    mlp_env_init(&env, device, 0);
    for (k = 0; k < 2; k++) {
        mlp_params_alloc(&g[k], cfg);
        mlp_env_seed(&env, cfg->seed);
        mlp_step(&env, cfg, &m->w, m->x, m->y, k, &g[k], &r[k]);
        finish(&env);
        next[k] = after_step_draw(&env);
    }
    report(device == RECAP_DEVICE_HOST ? "host" : "device", cfg, r);
    expect(memcmp(&r[0].loss, &r[1].loss, sizeof(float)) == 0, "loss bit-identical");
    expect(mlp_params_equal(&g[0], &g[1], cfg), "gradients bit-identical");
    expect(next[0] == next[1], "RNG continues identically after the step");
    printf("gradients bit-identical: %s; RNG after the step identical: %s\n",
           mlp_params_equal(&g[0], &g[1], cfg) ? "yes" : "NO", next[0] == next[1] ? "yes" : "NO");
    if (!m->have_ref) {
        m->have_ref = 1;
        m->ref_loss = r[0].loss;
        m->ref = g[0];
    } else {
        int same = memcmp(&r[0].loss, &m->ref_loss, sizeof(float)) == 0 &&
                   mlp_params_equal(&g[0], &m->ref, cfg);

        expect(same, "device step == host step");
        printf("loss and gradients equal to the engine buffers' run: %s\n", same ? "yes" : "NO");
        mlp_params_free(&g[0], cfg);
    }
    mlp_params_free(&g[1], cfg);
    mlp_env_free(&env);
}

/* The tracker's whole state, serialized (to compare two states). */
static size_t state_bytes(recap_tracker_h t, recap_snapshot_h snap, uint8_t *buf, size_t cap)
{
    size_t len = 0;

    mlp_check(recap_snapshot_take(t, snap), "snapshot");
    mlp_check(recap_snapshot_serialize(snap, buf, cap, &len), "serialize");
    return len;
}

/*
 * The step captured into a CUDA graph (with and without regions) and replayed three times. Eager
 * execution is the oracle of every replay: the tracker's state is snapshotted before the launch,
 * and after it the same step runs eagerly (without regions) from that snapshot; the loss and
 * every gradient must equal the replay's bit for bit, and the eager step must leave the tracker
 * where the launch left it. Each replay draws fresh masks (a new loss). The rebuilds inside the
 * capture redraw the forward's masks on every replay, or the oracle would not match.
 *
 * Memory: the step's buffers come from the plain engine's pool (RECAP_PLAIN_REUSE_FREED, reuse in
 * stream order), which after the capture holds exactly the device memory the graph writes:
 * regions shrink it.
 */
static void run_graph(int device, const mlp_cfg_t *cfg, model_t *m)
{
    uint64_t pool[2];
    int regions;

    printf("\ncaptured in a CUDA graph, replayed 3 times, each replay against an eager step:\n");
    printf("| | replay 1 loss | replay 2 loss | replay 3 loss | = eager, gradients too | "
           "device memory in the pool |\n|---|---:|---:|---:|---|---:|\n");
    for (regions = 0; regions < 2; regions++) {
        static uint8_t before[4096], launched[4096], eager[4096];
        mlp_params_t gg, ge;
        mlp_result_t rg, re;
        recap_plain_stats_t st;
        recap_snapshot_h snap;
        recap_graph_t graph;
        recap_graph_exec_t exec;
        struct mlp_task *graph_tasks;
        float losses[3];
        int k, all_equal = 1;
        size_t nb, nl, ne;
        mlp_env_t env;

        mlp_env_init(&env, device, 1);
        mlp_check(recap_snapshot_create(&snap), "snapshot create");
        mlp_params_alloc(&gg, cfg);
        mlp_params_alloc(&ge, cfg);
        mlp_env_seed(&env, cfg->seed);
        /* Relaxed: buffers are allocated inside the capture (the pool's first use of them). */
        mlp_check(recap_stream_begin_capture(env.stream, RECAP_CAPTURE_RELAXED), "begin capture");
        mlp_step(&env, cfg, &m->w, m->x, m->y, regions, &gg, &rg);
        mlp_check(recap_stream_end_capture(env.stream, &graph), "end capture");
        mlp_check(recap_graph_instantiate(graph, &exec), "instantiate");
        graph_tasks = env.tasks; /* the graph's host nodes use their staging until it goes */
        env.tasks = NULL;
        mlp_check(recap_plain_engine_stats(env.engine, &st), "stats");
        pool[regions] = st.live_bytes + st.held_bytes;
        expect(st.live_bytes == 0, "the captured step freed every buffer");
        for (k = 0; k < 3; k++) {
            nb = state_bytes(env.tracker, snap, before, sizeof(before));
            mlp_check(recap_graph_launch(exec, env.stream), "launch");
            mlp_check(recap_stream_synchronize(env.stream), "sync");
            losses[k] = rg.loss;
            nl = state_bytes(env.tracker, snap, launched, sizeof(launched));
            mlp_check(recap_snapshot_deserialize(before, nb, snap), "deserialize");
            mlp_check(recap_snapshot_restore(env.tracker, snap), "restore");
            mlp_step(&env, cfg, &m->w, m->x, m->y, 0, &ge, &re);
            finish(&env);
            ne = state_bytes(env.tracker, snap, eager, sizeof(eager));
            all_equal = all_equal && memcmp(&rg.loss, &re.loss, sizeof(float)) == 0 &&
                        mlp_params_equal(&gg, &ge, cfg);
            expect(memcmp(&rg.loss, &re.loss, sizeof(float)) == 0, "replay loss == eager loss");
            expect(mlp_params_equal(&gg, &ge, cfg), "replay gradients == eager gradients");
            expect(nl == ne && memcmp(launched, eager, nl) == 0,
                   "the eager step leaves the tracker where the launch did");
            expect(nl != nb || memcmp(before, launched, nb) != 0, "a launch advances the tracker");
            if (k > 0)
                expect(memcmp(&losses[k], &losses[k - 1], sizeof(float)) != 0,
                       "each replay draws fresh masks");
        }
        printf("| %s | %.9g | %.9g | %.9g | %s | %llu |\n",
               regions ? "with regions" : "without regions", (double)losses[0],
               (double)losses[1], (double)losses[2], all_equal ? "yes" : "NO",
               (unsigned long long)pool[regions]);
        mlp_check(recap_graph_exec_destroy(exec), "exec destroy");
        mlp_check(recap_graph_destroy(graph), "graph destroy");
        env.tasks = graph_tasks;
        mlp_env_done(&env);
        mlp_check(recap_snapshot_destroy(snap), "snapshot destroy");
        mlp_params_free(&gg, cfg);
        mlp_params_free(&ge, cfg);
        mlp_env_free(&env);
    }
    printf("device memory saved in the graph: %llu bytes\n",
           (unsigned long long)(pool[0] - pool[1]));
    expect(pool[1] < pool[0], "regions shrink the graph's memory");
}

int main(void)
{
    mlp_cfg_t cfg = {.layers = 4, .batch = 32, .width = 128, .outputs = 16, .drop = 0.1f,
                     .seed = 1234};
    size_t nx = (size_t)cfg.batch * cfg.width, ny = (size_t)cfg.batch * cfg.outputs;
    model_t m = {.x = malloc(nx * sizeof(float)), .y = malloc(ny * sizeof(float))};
    int devices = 0;

    mlp_params_alloc(&m.w, &cfg);
    mlp_params_random(&m.w, &cfg, 42);
    random_data(m.x, nx, 7);
    random_data(m.y, ny, 8);
    run(RECAP_DEVICE_HOST, &cfg, &m);
    if (recap_device_count(&devices) == RECAP_OK && devices > 0) {
        run(0, &cfg, &m);
        run_graph(0, &cfg, &m);
    } else {
        printf("\n(no CUDA device: device buffers and graphs not exercised)\n");
    }
    mlp_params_free(&m.ref, &cfg);
    mlp_params_free(&m.w, &cfg);
    free(m.x);
    free(m.y);
    return failures == 0 ? 0 : 1;
}
