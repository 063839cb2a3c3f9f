/* SPDX-License-Identifier: Apache-2.0 */
/* The example's environment (plain engine, tracker, stream) and weights. */
#include <stdlib.h>
#include <string.h>

#include "model.h"

void mlp_env_init(mlp_env_t *env, int device, int graph_safe)
{
    recap_tracker_params_t tp = {.device = device};
    uint32_t flags = device == RECAP_DEVICE_HOST ? 0 : RECAP_PLAIN_REUSE_FREED;

    memset(env, 0, sizeof(*env));
    env->device = device;
    if (graph_safe)
        tp.flags = RECAP_TRACKER_GRAPH_SAFE;
    mlp_check(recap_plain_engine_create(device, flags, &env->engine), "plain engine");
    mlp_check(recap_plain_engine_ops(&env->ops), "plain ops");
    mlp_check(recap_tracker_create(&tp, &env->tracker), "tracker");
    if (device != RECAP_DEVICE_HOST)
        mlp_check(recap_stream_create(device, &env->stream), "stream");
}

void mlp_env_seed(mlp_env_t *env, int64_t seed)
{
    recap_parallel_ranks_t one = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1};

    mlp_check(recap_tracker_seed_parallel(env->tracker, seed, &one), "seeding");
}

void mlp_env_free(mlp_env_t *env)
{
    mlp_env_done(env);
    if (env->stream != NULL)
        mlp_check(recap_stream_destroy(env->stream), "stream destroy");
    mlp_check(recap_tracker_destroy(env->tracker), "tracker destroy");
    mlp_check(recap_plain_engine_destroy(env->engine), "plain engine destroy");
}

void mlp_params_alloc(mlp_params_t *p, const mlp_cfg_t *cfg)
{
    size_t h = (size_t)cfg->width, o = (size_t)cfg->outputs;
    int i;

    memset(p, 0, sizeof(*p));
    for (i = 0; i < cfg->layers; i++) {
        p->W[i] = calloc(h * h, sizeof(float));
        p->b[i] = calloc(h, sizeof(float));
    }
    p->Wo = calloc(h * o, sizeof(float));
    p->bo = calloc(o, sizeof(float));
}

/* splitmix64 for the weights: independent of the RNG that recap manages. */
static float uniform(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return (float)((z ^ (z >> 31)) >> 40) / 16777216.0f * 2.0f - 1.0f;
}

void mlp_params_random(mlp_params_t *p, const mlp_cfg_t *cfg, uint64_t seed)
{
    size_t h = (size_t)cfg->width, o = (size_t)cfg->outputs, k;
    float scale = 1.0f / (float)cfg->width;
    int i;

    for (i = 0; i < cfg->layers; i++) {
        for (k = 0; k < h * h; k++)
            p->W[i][k] = uniform(&seed) * 2.0f * scale * 8.0f;
        for (k = 0; k < h; k++)
            p->b[i][k] = uniform(&seed) * 0.1f;
    }
    for (k = 0; k < h * o; k++)
        p->Wo[k] = uniform(&seed) * scale * 8.0f;
    for (k = 0; k < o; k++)
        p->bo[k] = uniform(&seed) * 0.1f;
}

void mlp_params_free(mlp_params_t *p, const mlp_cfg_t *cfg)
{
    int i;

    for (i = 0; i < cfg->layers; i++) {
        free(p->W[i]);
        free(p->b[i]);
    }
    free(p->Wo);
    free(p->bo);
}

int mlp_params_equal(const mlp_params_t *a, const mlp_params_t *b, const mlp_cfg_t *cfg)
{
    size_t h = (size_t)cfg->width, o = (size_t)cfg->outputs;
    int i, eq = 1;

    for (i = 0; i < cfg->layers; i++)
        eq = eq && memcmp(a->W[i], b->W[i], h * h * sizeof(float)) == 0 &&
             memcmp(a->b[i], b->b[i], h * sizeof(float)) == 0;
    return eq && memcmp(a->Wo, b->Wo, h * o * sizeof(float)) == 0 &&
           memcmp(a->bo, b->bo, o * sizeof(float)) == 0;
}
