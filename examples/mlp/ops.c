/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The example's operations on buffers. On host buffers an operation is a call. On device buffers
 * it is stream work: its device operands are copied into pinned staging memory, an engine function
 * runs the arithmetic there, and the result is copied back into the device buffer. Nothing
 * waits on the engine, so a step made of these operations can be captured into a CUDA graph, where
 * the copies become copy nodes and the arithmetic an engine node, replayed with every launch.
 */
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define MLP_MAX_OPERANDS 3

/* One enqueued operation: what its host function needs, kept until the work has run. */
typedef struct mlp_task {
    mlp_kernel_t k;
    mlp_args_t args;
    float *in[MLP_MAX_OPERANDS]; /* pinned copies of the device operands */
    float *out;                  /* pinned result (or, for an upload, the staged source) */
    int nin;
    struct mlp_task *next;
} mlp_task_t;

static void task_run(void *data)
{
    mlp_task_t *t = data;

    t->k(&t->args, t->in, t->out);
}

static float *pinned(mlp_env_t *env, size_t floats)
{
    void *p;

    mlp_check(recap_host_alloc(env->device, floats * sizeof(float), &p), "pinned staging");
    return p;
}

static mlp_task_t *task_new(mlp_env_t *env)
{
    mlp_task_t *t = calloc(1, sizeof(*t));

    if (t == NULL) {
        mlp_check(RECAP_ERR_NO_MEMORY, "task");
        return NULL;
    }
    t->next = env->tasks;
    env->tasks = t;
    return t;
}

void mlp_op(mlp_env_t *env, mlp_kernel_t k, const mlp_args_t *a, void *const *in,
            const size_t *in_floats, int nin, void *out, size_t out_floats)
{
    mlp_task_t *t;
    int i;

    if (nin > MLP_MAX_OPERANDS)
        mlp_check(RECAP_ERR_INVALID_ARG, "too many operands");
    if (env->device == RECAP_DEVICE_HOST) {
        k(a, (float *const *)in, out);
        return;
    }
    t = task_new(env);
    t->k = k;
    t->args = *a;
    t->nin = nin;
    for (i = 0; i < nin; i++) {
        t->in[i] = pinned(env, in_floats[i]);
        mlp_check(recap_memcpy_to_host_async(env->device, t->in[i], in[i],
                                             in_floats[i] * sizeof(float), env->stream),
                  "operand D2H");
    }
    if (out != NULL)
        t->out = pinned(env, out_floats);
    mlp_check(recap_stream_host_func(env->device, env->stream, task_run, t), "host function");
    if (out != NULL)
        mlp_check(recap_memcpy_to_device_async(env->device, out, t->out,
                                               out_floats * sizeof(float), env->stream),
                  "result H2D");
}

void mlp_upload(mlp_env_t *env, void *dst, const float *src, size_t floats)
{
    mlp_task_t *t;

    if (env->device == RECAP_DEVICE_HOST) {
        memcpy(dst, src, floats * sizeof(float));
        return;
    }
    /* The staged copy is taken now: a graph replays the upload of the values given here. */
    t = task_new(env);
    t->out = pinned(env, floats);
    memcpy(t->out, src, floats * sizeof(float));
    mlp_check(recap_memcpy_to_device_async(env->device, dst, t->out, floats * sizeof(float),
                                           env->stream),
              "upload H2D");
}

void mlp_env_done(mlp_env_t *env)
{
    mlp_task_t *t;
    int i;

    while ((t = env->tasks) != NULL) {
        env->tasks = t->next;
        for (i = 0; i < t->nin; i++)
            mlp_check(recap_host_free(env->device, t->in[i]), "staging free");
        if (t->out != NULL)
            mlp_check(recap_host_free(env->device, t->out), "staging free");
        free(t);
    }
}
