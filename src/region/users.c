/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which engines are in use: regions, checkpoints and managers keep their engine pointer and call
 * it until they are destroyed, so an engine recap ships (the plain engine, the NCCL wrapper)
 * refuses to be destroyed while any of them, or another wrapper, points to it. And which engine
 * pointers are live for the operations of an engine recap ships, asked by the region core.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>

#include "base/error.h"
#include "base/lock.h"
#include "base/ptrmap.h"
#include "region/region.h"

static recap__lock_t users_lock = RECAP_LOCK_INIT;
static recap__ptrmap_t users; /* engine -> count of users, as a pointer-sized integer */

recap_status_t recap__engine_use(const void *engine, int delta)
{
    uintptr_t n;
    int failed = 0;

    if (engine == NULL)
        return RECAP_OK;
    recap__lock(&users_lock);
    n = (uintptr_t)recap__ptrmap_get(&users, engine) + (uintptr_t)(intptr_t)delta;
    if (n == 0)
        recap__ptrmap_del(&users, engine);
    else
        recap__ptrmap_put(&users, (void *)engine, (void *)n, &failed);
    recap__unlock(&users_lock);
    return failed ? recap__fail(RECAP_ERR_NO_MEMORY, "engine users") : RECAP_OK;
}

size_t recap__engine_users(const void *engine)
{
    uintptr_t n;

    recap__lock(&users_lock);
    n = (uintptr_t)recap__ptrmap_get(&users, engine);
    recap__unlock(&users_lock);
    return (size_t)n;
}

/* One kind today (the plain engine). Set once, before its operations can reach a region: the
 * operations are stored last (release), so a reader that sees them sees the rest. */
static _Atomic(const recap_engine_ops_t *) kind_ops;
static int (*kind_live)(const void *engine);
static const char *kind_name, *kind_handle;

void recap__engine_kind(const recap_engine_ops_t *ops, int (*live)(const void *engine),
                        const char *name, const char *handle_type)
{
    if (atomic_load_explicit(&kind_ops, memory_order_acquire) == ops)
        return;
    recap__lock(&users_lock);
    kind_live = live;
    kind_name = name;
    kind_handle = handle_type;
    atomic_store_explicit(&kind_ops, ops, memory_order_release);
    recap__unlock(&users_lock);
}

recap_status_t recap__engine_check(const recap_engine_ops_t *ops, const void *engine)
{
    if (ops == NULL || ops != atomic_load_explicit(&kind_ops, memory_order_acquire) ||
        kind_live(engine))
        return RECAP_OK;
    return recap__fail(RECAP_ERR_INVALID_ARG, "engine %p with recap's %s operations is not a "
                       "live %s", engine, kind_name, kind_handle);
}
