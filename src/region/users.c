/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which engines are in use: regions, checkpoints and managers keep their engine pointer and call
 * it until they are destroyed, so an engine recap ships (the plain engine, the NCCL wrapper)
 * refuses to be destroyed while any of them, or another wrapper, points to it.
 */
#include "config.h"

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
