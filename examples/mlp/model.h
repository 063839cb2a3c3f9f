/*
 * A small MLP training step for the recap example: L layers of linear -> dropout -> GELU-like,
 * then a linear output layer and a squared-error loss, forward and backward by hand.
 *
 * Activations are plain-host buffers (recap_plain_*), so their memory is accounted for: host
 * memory, or device memory when a CUDA device is present. recap has no GEMM kernels, so for
 * device buffers the arithmetic is done on the host: each operation copies its device operands
 * into host scratch, computes, and copies the result back. What runs on the device is what recap
 * itself provides: the dropout masks are drawn by recap's device fill into device memory.
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

/* Where the activations live and where the random numbers come from. */
typedef struct {
    int device; /* RECAP_DEVICE_HOST or a CUDA device */
    recap_plain_host_h host;
    const recap_host_ops_t *ops;
    recap_tracker_h tracker;
    recap_stream_t stream; /* device mode: where the masks are drawn */
    float *scratch[3];     /* device mode: host copies of operands */
} mlp_env_t;

typedef struct {
    float loss;
    uint64_t held_at_forward_end; /* activation bytes live when the backward starts */
    uint64_t peak;                /* the step's peak of live activation bytes */
    uint64_t released;            /* bytes the regions released */
} mlp_result_t;

/* Exits with a message on a failed recap call (an example: no error recovery). */
void mlp_check(recap_status_t st, const char *what);

int mlp_env_init(mlp_env_t *env, const mlp_cfg_t *cfg, int device);
void mlp_env_free(mlp_env_t *env);

void mlp_params_alloc(mlp_params_t *p, const mlp_cfg_t *cfg);
void mlp_params_random(mlp_params_t *p, const mlp_cfg_t *cfg, uint64_t seed);
void mlp_params_free(mlp_params_t *p, const mlp_cfg_t *cfg);
/* Whether two gradient sets are equal bit for bit. */
int mlp_params_equal(const mlp_params_t *a, const mlp_params_t *b, const mlp_cfg_t *cfg);

/* One training step on input x (batch x width) and target y (batch x outputs): fills the
 * gradients in g. With regions, each layer's dropout+GELU runs in a region without output,
 * released once its consumer ran and rebuilt by the backward's trigger. */
void mlp_step(mlp_env_t *env, const mlp_cfg_t *cfg, const mlp_params_t *w, const float *x,
              const float *y, int regions, mlp_params_t *g, mlp_result_t *res);

/* Buffer helpers (host or device buffers alike). */
recap_buffer_t mlp_buf(mlp_env_t *env, size_t floats);
void mlp_read(mlp_env_t *env, recap_buffer_t b, float *dst, size_t floats);
void mlp_write(mlp_env_t *env, recap_buffer_t b, const float *src, size_t floats);
void mlp_free(recap_buffer_t b);
/* The buffer's data pointer (host or device memory); exits if it is released. */
void *mlp_data(recap_buffer_t b);
/* Seeds the tracker for a step: the same seed gives the same masks. */
void mlp_env_seed(mlp_env_t *env, int64_t seed);

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
