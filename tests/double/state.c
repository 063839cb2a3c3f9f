/* SPDX-License-Identifier: Apache-2.0 */
/* The double's objects (tests/double/double.h describes them), under `lock`. */
#include "tests/double/double.h"

#define KERNEL_FN(id, name, type, body) {name, (kernel_body_t)body, sizeof(type), 0},
const double_function_t kernel_table[RECAP_K_COUNT] = {RECAP_KERNELS(KERNEL_FN)};
#undef KERNEL_FN

pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
int initialized, ndev = 2;
double_ctx_t primary[MAX_DEV];
int primary_retains[MAX_DEV]; /* cuDevicePrimaryCtxRetain minus ...Release, per device */
double_alloc_t allocs[MAX_ALLOC];
int nallocs;
unsigned long launches, stream_ops;
double_stream_t *streams;
double_graph_t *graphs;
double_exec_t *execs;
double_module_t *modules;
double_capture_t *captures; /* every capture in progress */
uint64_t capture_seq;
_Thread_local CUcontext ctx_stack[32];
_Thread_local int ctx_depth;
_Thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
_Thread_local double_stream_t ptds;
