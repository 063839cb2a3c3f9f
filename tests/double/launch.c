/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double: modules, and running work: kernels on the host, thread by thread. */
#include "tests/double/double.h"

RECAP_API CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
    double_module_t *mod;
    uint32_t magic;

    NEED_INIT();
    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (m == NULL || image == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&magic, image, sizeof(magic));
    if (magic != FATBIN_MAGIC)
        return CUDA_ERROR_INVALID_IMAGE;
    mod = calloc(1, sizeof(*mod));
    if (mod == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    mod->device = ctx_device(current());
    for (size_t i = 0; i < NKERNELS; i++) {
        mod->fns[i] = kernel_table[i];
        mod->fns[i].device = mod->device;
    }
    pthread_mutex_lock(&lock);
    mod->next = modules;
    modules = mod;
    pthread_mutex_unlock(&lock);
    *m = (CUmodule)mod;
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuModuleUnload(CUmodule m)
{
    double_module_t **pp, *found = NULL;

    NEED_INIT();
    pthread_mutex_lock(&lock);
    for (pp = &modules; *pp != NULL; pp = &(*pp)->next)
        if (*pp == (double_module_t *)m) {
            found = *pp;
            *pp = found->next;
            break;
        }
    pthread_mutex_unlock(&lock);
    if (found == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    free(found);
    return CUDA_SUCCESS;
}

RECAP_API CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    double_module_t *mod = (double_module_t *)m;
    size_t i;

    NEED_INIT();
    if (m == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (f == NULL || name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (i = 0; i < sizeof(mod->fns) / sizeof(mod->fns[0]); i++)
        if (strcmp(mod->fns[i].name, name) == 0) {
            *f = (CUfunction)&mod->fns[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}

/* ------------------------------------------------------------------ executing work */

/* Checks the memory a kernel will touch against the allocations, as the GPU's memory protection
 * would (the double turns a would-be illegal address into a launch error). */
static CUresult check_kernel_memory(const double_function_t *fn, const void *params)
{
    if (strncmp(fn->name, "recap_fill_", 11) == 0) {
        const recap__fill_params_t *p = params;
        size_t es = strncmp(fn->name, RECAP_KERNEL_FILL_F64, strlen(RECAP_KERNEL_FILL_F64)) == 0 ? 8 : 4;
        if (check_range(p->dst, p->n * es) != CUDA_SUCCESS)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        if (p->philox.captured && (check_range((CUdeviceptr)(uintptr_t)p->philox.seed_ptr, 8) ||
                                   check_range((CUdeviceptr)(uintptr_t)p->philox.offset_ptr, 8)))
            return CUDA_ERROR_ILLEGAL_ADDRESS;
    } else {
        /* advance / slot_write: every slot must be 16 bytes of device memory */
        const uint64_t *slot = ((const recap__advance_params_t *)params)->slot;
        uint32_t i, count = strcmp(fn->name, RECAP_KERNEL_ADVANCE) == 0
                                ? ((const recap__advance_params_t *)params)->count
                                : ((const recap__slot_write_params_t *)params)->count;
        if (count > RECAP_SLOTS_PER_LAUNCH)
            return CUDA_ERROR_INVALID_VALUE;
        for (i = 0; i < count; i++)
            if (check_range(slot[i], 16) != CUDA_SUCCESS)
                return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    return CUDA_SUCCESS;
}

/* Executes one unit of work now (no lock held). */
CUresult run_op(const op_t *op)
{
    CUresult rc = CUDA_SUCCESS;
    uint64_t t, nthreads;

    switch (op->kind) {
    case OP_CHILD:
    case OP_COND:
    case OP_EMPTY:
        return double_run_compound(op);
    case OP_KERNEL:
        rc = check_kernel_memory(op->fn, op->params);
        if (rc != CUDA_SUCCESS)
            return rc;
        nthreads = (uint64_t)op->grid * op->block;
        for (t = 0; t < nthreads; t++)
            op->fn->body(op->params, t, nthreads);
        __atomic_add_fetch(&launches, 1, __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
    case OP_WRITE32:
        if (check_range(op->dptr, 4) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_VALUE;
        *(volatile uint32_t *)(uintptr_t)op->dptr = (uint32_t)op->value;
        break;
    case OP_WRITE64:
        if (check_range(op->dptr, 8) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_VALUE;
        *(volatile uint64_t *)(uintptr_t)op->dptr = op->value;
        break;
    case OP_MEMSET8:
        if (check_range(op->dptr, op->n) != CUDA_SUCCESS)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        memset((void *)(uintptr_t)op->dptr, (int)(uint8_t)op->value, op->n);
        break;
    case OP_MEMSET32:
        if (check_range(op->dptr, 4 * op->n) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < op->n; i++)
            ((uint32_t *)(uintptr_t)op->dptr)[i] = (uint32_t)op->value;
        break;
    case OP_HTOD:
        if (check_range(op->dptr, op->n) != CUDA_SUCCESS)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        memcpy((void *)(uintptr_t)op->dptr, op->host, op->n);
        break;
    case OP_DTOH:
        if (check_range(op->dptr, op->n) != CUDA_SUCCESS)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        memcpy(op->host, (const void *)(uintptr_t)op->dptr, op->n);
        break;
    case OP_HOSTFN:
        op->hostfn(op->host);
        break;
    }
    __atomic_add_fetch(&stream_ops, 1, __ATOMIC_RELAXED);
    return rc;
}

CUresult run_ops(op_t *const *ops, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        CUresult rc = run_op(ops[i]);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

/* Submits work to a stream: a capturing stream records a copy of it, the legacy stream checks the
 * blocking captures, and otherwise the work runs at once. */
CUresult submit(CUstream s, int per_thread, const op_t *op)
{
    double_stream_t *st;
    CUresult rc;

    pthread_mutex_lock(&lock);
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS && st == NULL)
        rc = legacy_use_locked(ctx_device(current()), 1);
    if (rc == CUDA_SUCCESS && st != NULL && st->cap != NULL) {
        if (st->cap->invalidated) {
            rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else {
            op_t *rec = op_clone(op);
            rc = rec == NULL ? CUDA_ERROR_OUT_OF_MEMORY : graph_append_locked(st->cap->graph, rec);
            if (rc != CUDA_SUCCESS)
                op_free(rec);
        }
        pthread_mutex_unlock(&lock);
        return rc;
    }
    pthread_mutex_unlock(&lock);
    return rc == CUDA_SUCCESS ? run_op(op) : rc;
}

static CUresult stream_device_check(CUstream s, int per_thread, int device)
{
    double_stream_t *st;
    CUresult rc;

    pthread_mutex_lock(&lock);
    rc = resolve_locked(s, per_thread, &st);
    if (rc == CUDA_SUCCESS && stream_device_of(st) != device)
        rc = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_unlock(&lock);
    return rc;
}

static CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, CUstream s, void **params, void **extra,
                              int per_thread)
{
    const double_function_t *fn = (const double_function_t *)f;
    op_t op;
    CUresult rc;

    if (current() == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (fn == NULL || params == NULL || params[0] == NULL || extra != NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (gx == 0 || bx == 0 || bx > 1024 || gy != 1 || gz != 1 || by != 1 || bz != 1)
        return CUDA_ERROR_INVALID_VALUE;
    if (fn->device != ctx_device(current()))
        return CUDA_ERROR_INVALID_HANDLE;
    if ((rc = stream_device_check(s, per_thread, fn->device)) != CUDA_SUCCESS)
        return rc;
    memset(&op, 0, sizeof(op));
    op.kind = OP_KERNEL;
    op.fn = fn;
    op.grid = gx;
    op.block = bx;
    op.params = params[0]; /* borrowed: submit() copies it when it records the launch */
    rc = submit(s, per_thread, &op);
    return rc;
}

RECAP_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shmem, CUstream s,
                               void **params, void **extra)
{
    NEED_INIT();
    return launch_kernel(f, gx, gy, gz, bx, by, bz, s, params, extra, 0);
}

RECAP_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                    CUstream s, void **params, void **extra)
{
    NEED_INIT();
    return launch_kernel(f, gx, gy, gz, bx, by, bz, s, params, extra, 1);
}
