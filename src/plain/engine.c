/* SPDX-License-Identifier: Apache-2.0 */
/* The plain engine object: creation, destruction and its accounting. */
#include "config.h"

#include <stdlib.h>

#include "base/error.h"
#include "base/handle.h"
#include "plain/plain.h"
#include "region/region.h" /* recap__engine_users */

recap_status_t recap_plain_engine_create(int device, uint32_t flags, recap_plain_engine_h *host_p)
{
    recap_plain_engine_h h;
    int count = 0;
    recap_status_t st;

    RECAP_CHECK_ARG(host_p != NULL, "host_p is NULL");
    RECAP_CHECK_ARG((flags & ~(uint32_t)(RECAP_PLAIN_KEEP_FREED | RECAP_PLAIN_REUSE_FREED)) == 0,
                    "unknown flags 0x%x", flags);
    if (device != RECAP_DEVICE_HOST) {
        st = recap_device_count(&count);
        if (st != RECAP_OK)
            return st;
        if (device < 0 || device >= count)
            return recap__fail(RECAP_ERR_NO_DEVICE, "device %d (%d present)", device, count);
    }
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "plain engine");
    h->device = device;
    /* Reusing kept storage implies keeping it. */
    h->flags = flags & RECAP_PLAIN_REUSE_FREED ? flags | RECAP_PLAIN_KEEP_FREED : flags;
    h->stats.context_pass = -1;
    h->magic = RECAP_MAGIC_PLAIN_ENGINE;
    if (recap__handle_register(h, RECAP_MAGIC_PLAIN_ENGINE) != RECAP_OK) {
        free(h);
        return RECAP_ERR_NO_MEMORY;
    }
    *host_p = h;
    return RECAP_OK;
}

recap_status_t recap_plain_engine_destroy(recap_plain_engine_h engine)
{
    size_t i, users;

    RECAP_CHECK_LIVE(engine, RECAP_MAGIC_PLAIN_ENGINE, "plain engine");
    users = recap__engine_users(engine);
    if (users != 0)
        return recap__fail(RECAP_ERR_STATE, "plain engine destroyed while %zu region(s), "
                           "checkpoint(s), manager(s) or NCCL wrapper(s) use it: destroy them "
                           "first (nothing changed)", users);
    if (engine->stats.live_buffers != 0)
        return recap__fail(RECAP_ERR_STATE, "plain engine still has %llu live buffers",
                           (unsigned long long)engine->stats.live_buffers);
    RECAP_CHECK_ARG(recap__handle_unregister(engine, RECAP_MAGIC_PLAIN_ENGINE),
                    "plain engine %p destroyed twice at once", (void *)engine);
    engine->magic = RECAP_MAGIC_DEAD;
    for (i = 0; i < engine->nkept; i++) {
        if (engine->device == RECAP_DEVICE_HOST)
            free(engine->kept[i].data);
        else
            recap_device_free(engine->device, engine->kept[i].data);
    }
    free(engine->kept);
    recap__ptrigger_free_all(engine);
    free(engine);
    return RECAP_OK;
}

recap_status_t recap_plain_engine_stats(recap_plain_engine_h engine, recap_plain_stats_t *stats_p)
{
    RECAP_CHECK_HANDLE(engine, RECAP_MAGIC_PLAIN_ENGINE, "plain engine");
    RECAP_CHECK_ARG(stats_p != NULL, "NULL argument");
    recap__lock(&engine->lock);
    *stats_p = engine->stats;
    recap__unlock(&engine->lock);
    return RECAP_OK;
}

recap_status_t recap_plain_engine_reset_peak(recap_plain_engine_h engine)
{
    RECAP_CHECK_HANDLE(engine, RECAP_MAGIC_PLAIN_ENGINE, "plain engine");
    recap__lock(&engine->lock);
    engine->stats.peak_bytes = engine->stats.live_bytes;
    recap__unlock(&engine->lock);
    return RECAP_OK;
}
