/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One training step, with or without regions. With regions, layer i's dropout+GELU runs in a
 * region without output; once its consumer (the next linear, or the output layer) has run, the
 * region releases its outputs (mask and activation) and arms a trigger on the consumer's output.
 * The backward fires that trigger when the consumer's output gradient is computed, just before
 * the consumer's weight gradient needs the activation back. Everything else is the same code.
 */
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct {
    mlp_env_t *env;
    const mlp_cfg_t *cfg;
    const mlp_params_t *w;
    int regions;
    recap_signature_h sig;
    mlp_act_ctx_t act;
    recap_region_params_t rp;
    recap_buffer_t a[MLP_MAX_LAYERS + 1], h[MLP_MAX_LAYERS + 1], mask[MLP_MAX_LAYERS + 1];
    recap_buffer_t out;
    recap_region_h r[MLP_MAX_LAYERS + 1];
    uint64_t released;
} step_t;

static uint64_t live(step_t *s)
{
    recap_plain_stats_t st;

    mlp_check(recap_plain_engine_stats(s->env->engine, &st), "stats");
    return st.live_bytes;
}

static void linear_kernel(const mlp_args_t *a, float *const *in, float *out)
{
    mlp_linear(in[0], a->W, a->b, out, a->rows, a->in, a->out);
}

/* y = x W + b on buffers. */
static void linear(step_t *s, recap_buffer_t x, const float *W, const float *b, recap_buffer_t y,
                   int in, int out)
{
    mlp_args_t a = {.W = W, .b = b, .rows = s->cfg->batch, .in = in, .out = out};
    void *xs[1] = {mlp_data(x)};
    size_t nx[1] = {(size_t)s->cfg->batch * in};

    mlp_op(s->env, linear_kernel, &a, xs, nx, 1, mlp_data(y), (size_t)s->cfg->batch * out);
}

static void dropout_gelu(step_t *s, int i)
{
    uint64_t n = (uint64_t)s->cfg->batch * s->cfg->width;
    recap_value_t v[5] = {{.buf = s->h[i]}, {.buf = s->mask[i]}, {.buf = s->a[i]}, {.u64 = n},
                          {.ptr = &s->act}};

    if (!s->regions) {
        mlp_act_fn(mlp_data(s->h[i]), mlp_data(s->mask[i]), mlp_data(s->a[i]), n, &s->act);
        return;
    }
    mlp_check(recap_region_create(&s->rp, &s->r[i]), "region create");
    mlp_check(recap_region_record(s->r[i], s->sig, (recap_func_t)mlp_act_fn, v, 5), "record");
}

/* Layer i's consumer has run: its activations can go until `trigger`'s gradient arrives. */
static void release(step_t *s, int i, recap_buffer_t trigger)
{
    uint64_t before = live(s);

    if (!s->regions)
        return;
    mlp_check(recap_region_release(s->r[i], trigger), "release");
    s->released += before - live(s);
}

static void forward(step_t *s, const float *x)
{
    int L = s->cfg->layers, H = s->cfg->width, i;
    size_t bh = (size_t)s->cfg->batch * H;

    s->a[0] = mlp_buf(s->env, bh);
    mlp_upload(s->env, mlp_data(s->a[0]), x, bh);
    for (i = 1; i <= L; i++) {
        s->h[i] = mlp_buf(s->env, bh);
        linear(s, s->a[i - 1], s->w->W[i - 1], s->w->b[i - 1], s->h[i], H, H);
        if (i > 1)
            release(s, i - 1, s->h[i]);
        s->mask[i] = mlp_buf(s->env, bh);
        s->a[i] = mlp_buf(s->env, bh);
        dropout_gelu(s, i);
    }
    s->out = mlp_buf(s->env, (size_t)s->cfg->batch * s->cfg->outputs);
    linear(s, s->a[L], s->w->Wo, s->w->bo, s->out, H, s->cfg->outputs);
    release(s, L, s->out);
}

/* The gradient of `b`'s consumer output has been computed: the engine's autograd would fire the
 * hooks registered on it now. */
static void gradient_arrived(step_t *s, recap_buffer_t b)
{
    if (s->regions)
        mlp_check(recap_plain_buffer_fire(b), "trigger");
}

/* g = d(loss)/d(out) from in = {out}; the loss into *a->loss. */
static void loss_kernel(const mlp_args_t *a, float *const *in, float *g)
{
    size_t n = (size_t)a->rows * (size_t)a->out, k;
    double sum = 0.0;

    for (k = 0; k < n; k++) {
        float d = in[0][k] - a->y[k];

        g[k] = d / (float)n;
        sum += 0.5 * (double)d * (double)d;
    }
    *a->loss = (float)(sum / (double)n);
}

static recap_buffer_t loss_grad(step_t *s, const float *y, float *loss)
{
    size_t n = (size_t)s->cfg->batch * s->cfg->outputs;
    mlp_args_t a = {.y = y, .loss = loss, .rows = s->cfg->batch, .out = s->cfg->outputs};
    recap_buffer_t gb = mlp_buf(s->env, n);
    void *in[1] = {mlp_data(s->out)};

    mlp_op(s->env, loss_kernel, &a, in, &n, 1, mlp_data(gb), n);
    return gb;
}

/* in = {x, gy}: the weight gradients, and the input's gradient into out when it is wanted. */
static void linear_back_kernel(const mlp_args_t *a, float *const *in, float *gx)
{
    mlp_linear_backward(in[0], a->W, in[1], a->gW, a->gb, gx, a->rows, a->in, a->out);
}

/* Weight gradients of a linear whose input is x and output gradient gy; returns the input's
 * gradient as a new buffer (NULL when not wanted). */
static recap_buffer_t linear_back(step_t *s, recap_buffer_t x, const float *W, recap_buffer_t gy,
                                  float *gW, float *gb, int in, int out, int want_gx)
{
    size_t rows = (size_t)s->cfg->batch, n[2] = {rows * in, rows * out};
    mlp_args_t a = {.W = W, .gW = gW, .gb = gb, .rows = (int)rows, .in = in, .out = out};
    void *ops[2] = {mlp_data(x), mlp_data(gy)};
    recap_buffer_t gx = want_gx ? mlp_buf(s->env, rows * in) : NULL;

    mlp_op(s->env, linear_back_kernel, &a, ops, n, 2, want_gx ? mlp_data(gx) : NULL,
           want_gx ? rows * in : 0);
    return gx;
}

/* Through GELU and dropout, in = {ga, h, mask}: gh = ga * gelu'(d) * keep, d = h * keep
 * (keep = 0 or 1/(1-p)). */
static void act_back_kernel(const mlp_args_t *a, float *const *in, float *gh)
{
    size_t n = (size_t)a->rows * (size_t)a->out, k;
    float keep = 1.0f / (1.0f - a->drop);

    for (k = 0; k < n; k++) {
        float kk = in[2][k] < a->drop ? 0.0f : keep;

        gh[k] = in[0][k] * mlp_gelu_grad(in[1][k] * kk) * kk;
    }
}

static recap_buffer_t act_back(step_t *s, int i, recap_buffer_t ga)
{
    size_t n = (size_t)s->cfg->batch * s->cfg->width, ns[3] = {n, n, n};
    mlp_args_t a = {.rows = s->cfg->batch, .out = s->cfg->width, .drop = s->cfg->drop};
    void *in[3] = {mlp_data(ga), mlp_data(s->h[i]), mlp_data(s->mask[i])};
    recap_buffer_t gh = mlp_buf(s->env, n);

    mlp_op(s->env, act_back_kernel, &a, in, ns, 3, mlp_data(gh), n);
    return gh;
}

static void backward(step_t *s, const float *y, mlp_params_t *g, float *loss)
{
    int L = s->cfg->layers, H = s->cfg->width, i;
    recap_buffer_t gout = loss_grad(s, y, loss), ga, gh;

    gradient_arrived(s, s->out);
    ga = linear_back(s, s->a[L], s->w->Wo, gout, g->Wo, g->bo, H, s->cfg->outputs, 1);
    mlp_free(gout);
    mlp_free(s->out);
    for (i = L; i >= 1; i--) {
        gh = act_back(s, i, ga);
        mlp_free(ga);
        mlp_free(s->mask[i]);
        mlp_free(s->a[i]);
        gradient_arrived(s, s->h[i]);
        ga = linear_back(s, s->a[i - 1], s->w->W[i - 1], gh, g->W[i - 1], g->b[i - 1], H, H,
                         i > 1);
        mlp_free(gh);
        mlp_free(s->h[i]);
        if (s->regions) {
            mlp_check(recap_region_finish(s->r[i]), "finish");
            mlp_check(recap_region_destroy(s->r[i]), "region destroy");
        }
    }
    mlp_free(s->a[0]);
}

void mlp_step(mlp_env_t *env, const mlp_cfg_t *cfg, const mlp_params_t *w, const float *x,
              const float *y, int regions, mlp_params_t *g, mlp_result_t *res)
{
    step_t s = {.env = env, .cfg = cfg, .w = w, .regions = regions};
    recap_plain_stats_t st;

    s.act = (mlp_act_ctx_t){env, cfg->drop};
    s.rp = (recap_region_params_t){env->ops, env->engine, env->tracker, NULL, 0};
    s.sig = mlp_act_signature();
    mlp_check(recap_plain_engine_reset_peak(env->engine), "reset peak");
    forward(&s, x);
    res->held_at_forward_end = live(&s);
    backward(&s, y, g, &res->loss);
    mlp_check(recap_plain_engine_stats(env->engine, &st), "stats");
    res->peak = st.peak_bytes;
    res->released = s.released;
    mlp_check(recap_signature_destroy(s.sig), "signature destroy");
}
