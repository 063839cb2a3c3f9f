/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small MLP training step for the recap example: L layers of linear -> dropout -> GELU-like,
 * then a linear output layer and a squared-error loss, forward and backward by hand.
 *
 * Activations are plain-host buffers (recap_plain_*), so their memory is accounted for: host
 * memory, or device memory when a CUDA device is present. recap has no GEMM kernels, so for
 * device buffers the arithmetic runs on the engine, in stream order: each operation copies its
 * device operands into pinned staging memory, an engine function computes, and the result is
 * copied back (mlp_op). What runs on the device is what recap itself provides: the dropout masks
 * are drawn by recap's device fill into device memory. Being stream-ordered, a whole step can be
 * captured into a CUDA graph and replayed.
 */
#ifndef RECAP_EXAMPLE_MLP_MODEL_H
#define RECAP_EXAMPLE_MLP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "recap.h"

#define MLP_MAX_LAYERS 8

typedef struct {
    int layers, batch, width, outputs;
    float drop; /* dropout probability */
    int64_t seed;
} mlp_cfg_t;

/* Weights, or their gradients: W[i] is width x width (row-major, x W), Wo width x outputs. */
typedef struct {
    float *W[MLP_MAX_LAYERS], *b[MLP_MAX_LAYERS], *Wo, *bo;
} mlp_params_t;

struct mlp_task;

/* Where the activations live and where the random numbers come from. */
typedef struct {
    int device; /* RECAP_DEVICE_HOST or a CUDA device */
    recap_plain_engine_h engine;
    const recap_engine_ops_t *ops;
    recap_tracker_h tracker;
    recap_stream_t stream;  /* device mode: where masks, copies and host functions run */
    struct mlp_task *tasks; /* device mode: operations enqueued since the last mlp_env_done */
} mlp_env_t;

typedef struct {
    float loss;
    uint64_t held_at_forward_end; /* activation bytes live when the backward starts */
    uint64_t peak;                /* the step's peak of live activation bytes */
    uint64_t released;            /* bytes the regions released */
} mlp_result_t;

/* Exits with a message on a failed recap call (an example: no error recovery). */
void mlp_check(recap_status_t st, const char *what);

/* graph_safe: the tracker's states stay valid inside a capture (for a step captured in a graph).
 * Device buffers come from a plain engine that reuses freed storage in stream order
 * (RECAP_PLAIN_REUSE_FREED): asynchronous work may still use a buffer freed on the engine, and a
 * captured step's memory is the graph's. */
void mlp_env_init(mlp_env_t *env, int device, int graph_safe);
/* After the device work of the enqueued operations has finished (a synchronize, or the graph
 * that holds them destroyed): frees their staging memory. */
void mlp_env_done(mlp_env_t *env);
void mlp_env_free(mlp_env_t *env);

void mlp_params_alloc(mlp_params_t *p, const mlp_cfg_t *cfg);
void mlp_params_random(mlp_params_t *p, const mlp_cfg_t *cfg, uint64_t seed);
void mlp_params_free(mlp_params_t *p, const mlp_cfg_t *cfg);
/* Whether two gradient sets are equal bit for bit. */
int mlp_params_equal(const mlp_params_t *a, const mlp_params_t *b, const mlp_cfg_t *cfg);

/* One training step on input x (batch x width) and target y (batch x outputs): fills the
 * gradients in g and res->loss. With regions, each layer's dropout+GELU runs in a region without
 * output, released once its consumer ran and rebuilt by the backward's trigger. On device
 * buffers the step is only enqueued: g and res->loss are written when the stream reaches them
 * (the caller synchronizes), so a step enqueued inside a capture writes them at every replay.
 * x is staged when the step is enqueued; y and the weights are read when it runs. */
void mlp_step(mlp_env_t *env, const mlp_cfg_t *cfg, const mlp_params_t *w, const float *x,
              const float *y, int regions, mlp_params_t *g, mlp_result_t *res);

/* Buffer helpers (host or device buffers alike). */
recap_buffer_t mlp_buf(mlp_env_t *env, size_t floats);
void mlp_free(recap_buffer_t b);
/* The buffer's data pointer (host or device memory); exits if it is released. */
void *mlp_data(recap_buffer_t b);
/* Seeds the tracker for a step: the same seed gives the same masks. */
void mlp_env_seed(mlp_env_t *env, int64_t seed);

/* One operation's host-side arguments: weights and host outputs by pointer, sizes by value. */
typedef struct {
    const float *W, *b, *y;
    float *gW, *gb, *loss;
    int rows, in, out;
    float drop;
} mlp_args_t;

/* An operation's arithmetic on host arrays: in[] its buffer operands, out its buffer result
 * (NULL when it has none). */
typedef void (*mlp_kernel_t)(const mlp_args_t *a, float *const *in, float *out);

/* Runs `k` on buffers given by their data pointers (host or device memory): at once on host
 * buffers; on device buffers enqueued on env->stream (operands staged to the engine, the kernel in
 * an engine function, the result copied back). The arguments are copied; what they point to must
 * stay valid until the work has run (in a graph: while it is replayed). */
void mlp_op(mlp_env_t *env, mlp_kernel_t k, const mlp_args_t *a, void *const *in,
            const size_t *in_floats, int nin, void *out, size_t out_floats);
/* Copies host floats into a buffer (on device buffers in stream order, from a staged copy). */
void mlp_upload(mlp_env_t *env, void *dst, const float *src, size_t floats);

/* The layers' arithmetic on host arrays. */
void mlp_linear(const float *x, const float *W, const float *b, float *y, int rows, int in,
                int out);
void mlp_linear_backward(const float *x, const float *W, const float *gy, float *gW, float *gb,
                         float *gx, int rows, int in, int out);
float mlp_gelu(float d);
float mlp_gelu_grad(float d);

/* The region's function: mask <- uniforms from the model-parallel RNG state, a <- GELU(h
 * dropped out by the mask). Recorded through libffi (see model.c for its signature). */
typedef struct {
    mlp_env_t *env;
    float drop;
} mlp_act_ctx_t;
void mlp_act_fn(const float *h, float *mask, float *a, uint64_t n, mlp_act_ctx_t *ctx);
recap_signature_h mlp_act_signature(void);

#endif
