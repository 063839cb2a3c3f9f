/* SPDX-License-Identifier: Apache-2.0 */
/* The set of live handles (handle.h says why). */
#include "config.h"

#include "base/handle.h"
#include "base/lock.h"
#include "base/ptrmap.h"

static recap__lock_t live_lock = RECAP_LOCK_INIT;
static recap__ptrmap_t live;

void recap__handle_atfork(recap__atfork_t when)
{
    if (when == RECAP_ATFORK_PREPARE)
        recap__lock(&live_lock);
    else
        recap__unlock(&live_lock);
}

recap_status_t recap__handle_register(void *h, uint32_t magic)
{
    int failed = 0;

    recap__lock(&live_lock);
    recap__ptrmap_put(&live, h, (void *)(uintptr_t)magic, &failed);
    recap__unlock(&live_lock);
    return failed ? recap__fail(RECAP_ERR_NO_MEMORY, "handle registry") : RECAP_OK;
}

int recap__handle_live(const void *h, uint32_t magic)
{
    int live_one;

    recap__lock(&live_lock);
    live_one = recap__ptrmap_get(&live, h) == (void *)(uintptr_t)magic;
    recap__unlock(&live_lock);
    return live_one;
}

int recap__handle_unregister(void *h, uint32_t magic)
{
    int live_one;

    recap__lock(&live_lock);
    live_one = recap__ptrmap_get(&live, h) == (void *)(uintptr_t)magic;
    if (live_one)
        recap__ptrmap_del(&live, h);
    recap__unlock(&live_lock);
    return live_one;
}
