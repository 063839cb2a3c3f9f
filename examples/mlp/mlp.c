/*
 * recap example: a training step of a small MLP (linear -> dropout -> GELU-like, several
 * layers, then a linear output and a squared-error loss), run without and with activation
 * recomputation. With it, each layer's dropout+GELU activations live in a region without output:
 * released as soon as the next layer has consumed them, rebuilt by a trigger when the backward
 * reaches that layer, with the forward's dropout masks redrawn exactly.
 *
 * It checks that the loss and every weight gradient are bit-identical both ways, and measures
 * activation memory through the plain host's accounting: what is held when the backward starts
 * drops by exactly the bytes the regions released, and the step's peak by those bytes less the
 * last layer's, which is rebuilt as soon as the backward starts, when every other activation is
 * still alive. Runs on host buffers, and on device buffers too when a CUDA device (or, under
 * `make check`, recap's CUDA test double) is present. Prints its figures; exits 1 on a mismatch.
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

static void run(int device, const mlp_cfg_t *cfg)
{
    size_t nx = (size_t)cfg->batch * cfg->width, ny = (size_t)cfg->batch * cfg->outputs;
    float *x = malloc(nx * sizeof(float)), *y = malloc(ny * sizeof(float));
    mlp_params_t w, g[2];
    mlp_result_t r[2];
    uint64_t next[2];
    mlp_env_t env;
    int k;

    mlp_env_init(&env, cfg, device);
    mlp_params_alloc(&w, cfg);
    mlp_params_random(&w, cfg, 42);
    random_data(x, nx, 7);
    random_data(y, ny, 8);
    for (k = 0; k < 2; k++) {
        mlp_params_alloc(&g[k], cfg);
        mlp_env_seed(&env, cfg->seed);
        mlp_step(&env, cfg, &w, x, y, k, &g[k], &r[k]);
        next[k] = after_step_draw(&env);
    }
    report(device == RECAP_DEVICE_HOST ? "host" : "device", cfg, r);
    expect(memcmp(&r[0].loss, &r[1].loss, sizeof(float)) == 0, "loss bit-identical");
    expect(mlp_params_equal(&g[0], &g[1], cfg), "gradients bit-identical");
    expect(next[0] == next[1], "RNG continues identically after the step");
    printf("gradients bit-identical: %s; RNG after the step identical: %s\n",
           mlp_params_equal(&g[0], &g[1], cfg) ? "yes" : "NO", next[0] == next[1] ? "yes" : "NO");
    for (k = 0; k < 2; k++)
        mlp_params_free(&g[k], cfg);
    mlp_params_free(&w, cfg);
    mlp_env_free(&env);
    free(x);
    free(y);
}

int main(void)
{
    mlp_cfg_t cfg = {.layers = 4, .batch = 32, .width = 128, .outputs = 16, .drop = 0.1f,
                     .seed = 1234};
    int devices = 0;

    run(RECAP_DEVICE_HOST, &cfg);
    if (recap_device_count(&devices) == RECAP_OK && devices > 0)
        run(0, &cfg);
    else
        printf("\n(no CUDA device: device buffers not exercised)\n");
    return failures == 0 ? 0 : 1;
}
