/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA test double: test-only inspection and fault injection: the recap_double_* exports. */
#include "tests/double/double.h"

RECAP_API unsigned long recap_double_launch_count(void);
RECAP_API unsigned long recap_double_stream_ops(void);
RECAP_API unsigned long recap_double_node_count(CUgraph g);
RECAP_API int recap_double_live_graphs(void);
RECAP_API int recap_double_live_execs(void);
RECAP_API int recap_double_live_modules(void);
RECAP_API int recap_double_primary_retains(int device);
RECAP_API void recap_double_fail_next(const char *fn_name, int count);
RECAP_API void recap_double_defer_sync_copies(int on);

RECAP_API unsigned long recap_double_launch_count(void)
{
    return __atomic_load_n(&launches, __ATOMIC_RELAXED);
}

RECAP_API unsigned long recap_double_stream_ops(void)
{
    return __atomic_load_n(&stream_ops, __ATOMIC_RELAXED);
}

/* Nodes of a live graph (or of a live executable); 0 for anything else. */
RECAP_API unsigned long recap_double_node_count(CUgraph g)
{
    unsigned long n = 0;

    pthread_mutex_lock(&lock);
    for (double_graph_t *p = graphs; p != NULL; p = p->next)
        if (p == (double_graph_t *)g)
            n = p->n;
    for (double_exec_t *e = execs; e != NULL; e = e->next)
        if (e == (double_exec_t *)g)
            n = e->n;
    pthread_mutex_unlock(&lock);
    return n;
}

RECAP_API int recap_double_live_graphs(void)
{
    int n = 0;

    pthread_mutex_lock(&lock);
    for (double_graph_t *p = graphs; p != NULL; p = p->next)
        n++;
    pthread_mutex_unlock(&lock);
    return n;
}

RECAP_API int recap_double_live_execs(void)
{
    int n = 0;

    pthread_mutex_lock(&lock);
    for (double_exec_t *e = execs; e != NULL; e = e->next)
        n++;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Modules loaded and not unloaded, on every device. */
RECAP_API int recap_double_live_modules(void)
{
    int n = 0;

    pthread_mutex_lock(&lock);
    for (double_module_t *m = modules; m != NULL; m = m->next)
        n++;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Retains of the device's primary context not yet released; -1 for a device that is not. */
RECAP_API int recap_double_primary_retains(int device)
{
    int n = -1;

    pthread_mutex_lock(&lock);
    if (device >= 0 && device < MAX_DEV)
        n = primary_retains[device];
    pthread_mutex_unlock(&lock);
    return n;
}

/* Fault injection: the next `count` calls of the exported driver function `fn_name` fail. */
#define MAX_FAIL 16
static struct {
    char name[64];
    int count;
} fail_table[MAX_FAIL];
static int fail_armed; /* entries with count > 0 */

/* recap_double_defer_sync_copies(1): a synchronous host-to-device copy returns with its bytes
 * staged and lands only at the next synchronization (of any stream, or the context) or the next
 * synchronous copy, as the DMA of a copy from pageable memory may on a real device: after
 * kernels launched meanwhile on non-blocking streams (which the double runs at submission). */
typedef struct pending_copy {
    CUdeviceptr dst;
    size_t n;
    struct pending_copy *next;
    unsigned char bytes[];
} pending_copy_t;
static int defer_copies;
static pending_copy_t *pending_head, **pending_tail = &pending_head;

RECAP_API void recap_double_defer_sync_copies(int on)
{
    __atomic_store_n(&defer_copies, on, __ATOMIC_RELAXED);
}

/* Lands the staged copies in order; the caller holds `lock`. */
void land_copies_locked(void)
{
    pending_copy_t *p;

    while ((p = pending_head) != NULL) {
        pending_head = p->next;
        memcpy((void *)(uintptr_t)p->dst, p->bytes, p->n);
        free(p);
    }
    pending_tail = &pending_head;
}

void land_copies(void)
{
    pthread_mutex_lock(&lock);
    land_copies_locked();
    pthread_mutex_unlock(&lock);
}

/* Stages a copy when deferring; 0 when the caller copies now. */
int stage_copy(CUdeviceptr dst, const void *src, size_t n)
{
    pending_copy_t *p;

    if (!__atomic_load_n(&defer_copies, __ATOMIC_RELAXED) ||
        (p = malloc(sizeof(*p) + n)) == NULL)
        return 0;
    p->dst = dst;
    p->n = n;
    p->next = NULL;
    memcpy(p->bytes, src, n);
    pthread_mutex_lock(&lock);
    *pending_tail = p;
    pending_tail = &p->next;
    pthread_mutex_unlock(&lock);
    return 1;
}

RECAP_API void recap_double_fail_next(const char *fn_name, int count)
{
    int i, free_slot = -1;

    if (fn_name == NULL || strlen(fn_name) >= sizeof(fail_table[0].name))
        return;
    pthread_mutex_lock(&lock);
    for (i = 0; i < MAX_FAIL; i++) {
        if (fail_table[i].count > 0 && strcmp(fail_table[i].name, fn_name) == 0)
            break;
        if (fail_table[i].count <= 0 && free_slot < 0)
            free_slot = i;
    }
    if (i == MAX_FAIL)
        i = free_slot;
    if (i >= 0) {
        if (fail_table[i].count <= 0 && count > 0)
            fail_armed++;
        else if (fail_table[i].count > 0 && count <= 0)
            fail_armed--;
        strcpy(fail_table[i].name, fn_name);
        fail_table[i].count = count > 0 ? count : 0;
    }
    pthread_mutex_unlock(&lock);
}

CUresult injected(const char *fn)
{
    CUresult rc = CUDA_SUCCESS;

    if (__atomic_load_n(&fail_armed, __ATOMIC_RELAXED) == 0)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_FAIL; i++)
        if (fail_table[i].count > 0 && strcmp(fail_table[i].name, fn) == 0) {
            if (--fail_table[i].count == 0)
                fail_armed--;
            rc = strcmp(fn, "cuMemAlloc_v2") == 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
            break;
        }
    pthread_mutex_unlock(&lock);
    return rc;
}
