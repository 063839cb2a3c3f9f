/* SPDX-License-Identifier: Apache-2.0 */
/* The example's model: buffers, the layers' arithmetic and the dropout+GELU region function. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

void mlp_check(recap_status_t st, const char *what)
{
    if (st == RECAP_OK)
        return;
    fprintf(stderr, "mlp: %s: %s (%s)\n", what, recap_strerror(st), recap_last_error());
    exit(1);
}

recap_buffer_t mlp_buf(mlp_env_t *env, size_t floats)
{
    recap_buffer_t b;

    mlp_check(recap_plain_buffer_create(env->engine, floats * sizeof(float), 1, &b), "buffer");
    return b;
}

void *mlp_data(recap_buffer_t b)
{
    void *d;

    mlp_check(recap_plain_buffer_data(b, &d), "buffer data");
    if (d == NULL) {
        fprintf(stderr, "mlp: a released activation was used before its rebuild\n");
        exit(1);
    }
    return d;
}

void mlp_free(recap_buffer_t b)
{
    mlp_check(recap_plain_buffer_destroy(b), "buffer destroy");
}

void mlp_linear(const float *x, const float *W, const float *b, float *y, int rows, int in,
                int out)
{
    int r, i, o;

    for (r = 0; r < rows; r++)
        for (o = 0; o < out; o++) {
            float s = b[o];

            for (i = 0; i < in; i++)
                s += x[r * in + i] * W[i * out + o];
            y[r * out + o] = s;
        }
}

/* gW = x^T gy, gb = column sums of gy, gx = gy W^T (gx may be NULL). */
void mlp_linear_backward(const float *x, const float *W, const float *gy, float *gW, float *gb,
                         float *gx, int rows, int in, int out)
{
    int r, i, o;

    memset(gW, 0, (size_t)in * out * sizeof(float));
    memset(gb, 0, (size_t)out * sizeof(float));
    for (r = 0; r < rows; r++)
        for (o = 0; o < out; o++) {
            gb[o] += gy[r * out + o];
            for (i = 0; i < in; i++)
                gW[i * out + o] += x[r * in + i] * gy[r * out + o];
        }
    for (r = 0; gx != NULL && r < rows; r++)
        for (i = 0; i < in; i++) {
            float s = 0.0f;

            for (o = 0; o < out; o++)
                s += gy[r * out + o] * W[i * out + o];
            gx[r * in + i] = s;
        }
}

/* The sigmoid approximation of GELU (x * sigmoid(1.702 x)) and its derivative. */
float mlp_gelu(float d)
{
    return d / (1.0f + expf(-1.702f * d));
}

float mlp_gelu_grad(float d)
{
    float s = 1.0f / (1.0f + expf(-1.702f * d));

    return s + 1.702f * d * s * (1.0f - s);
}

/* a = GELU(h dropped out by the mask): in = {h, mask}. */
static void act_kernel(const mlp_args_t *a, float *const *in, float *out)
{
    size_t n = (size_t)a->rows * (size_t)a->out, i;
    float keep = 1.0f / (1.0f - a->drop);

    for (i = 0; i < n; i++)
        out[i] = mlp_gelu(in[1][i] < a->drop ? 0.0f : in[0][i] * keep);
}

/* Draws the mask with recap (the host generator, or the device fill into device memory on the
 * env's stream), then the GELU as an operation (mlp_op). */
void mlp_act_fn(const float *h, float *mask, float *a, uint64_t n, mlp_act_ctx_t *ctx)
{
    mlp_env_t *env = ctx->env;
    mlp_args_t args = {.rows = 1, .out = (int)n, .drop = ctx->drop};
    void *in[2] = {(void *)(uintptr_t)h, mask};
    size_t nin[2] = {n, n};
    recap_fork_token_t tok;
    recap_generator_h g;

    mlp_check(recap_tracker_generator(env->tracker, &g), "tracker generator");
    mlp_check(recap_tracker_fork(env->tracker, RECAP_RNG_MODEL_PARALLEL, &tok), "fork");
    mlp_check(recap_generator_fill_uniform(g, env->stream, mask, n), "dropout mask");
    mlp_check(recap_tracker_unfork(env->tracker, tok), "unfork");
    mlp_op(env, act_kernel, &args, in, nin, 2, a, n);
}

recap_signature_h mlp_act_signature(void)
{
    static const recap_type_t t[] = {RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT,
                                     RECAP_TYPE_BUFFER_OUT, RECAP_TYPE_UINT64,
                                     RECAP_TYPE_POINTER};
    recap_signature_h s;

    mlp_check(recap_signature_create(RECAP_TYPE_VOID, t, 5, &s), "signature");
    return s;
}
