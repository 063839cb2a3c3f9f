/* SPDX-License-Identifier: Apache-2.0 */
/* The plain host object: creation, destruction and its accounting. */
#include "config.h"

#include <stdlib.h>

#include "base/error.h"
#include "base/handle.h"
#include "plain/plain.h"

recap_status_t recap_plain_host_create(int device, uint32_t flags, recap_plain_host_h *host_p)
{
    recap_plain_host_h h;
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
        return recap__fail(RECAP_ERR_NO_MEMORY, "plain host");
    h->device = device;
    /* Reusing kept storage implies keeping it. */
    h->flags = flags & RECAP_PLAIN_REUSE_FREED ? flags | RECAP_PLAIN_KEEP_FREED : flags;
    h->stats.context_pass = -1;
    h->magic = RECAP_MAGIC_PLAIN_HOST;
    if (recap__handle_register(h, RECAP_MAGIC_PLAIN_HOST) != RECAP_OK) {
        free(h);
        return RECAP_ERR_NO_MEMORY;
    }
    *host_p = h;
    return RECAP_OK;
}

recap_status_t recap_plain_host_destroy(recap_plain_host_h host)
{
    size_t i;

    RECAP_CHECK_LIVE(host, RECAP_MAGIC_PLAIN_HOST, "plain host");
    if (host->stats.live_buffers != 0)
        return recap__fail(RECAP_ERR_STATE, "plain host still has %llu live buffers",
                           (unsigned long long)host->stats.live_buffers);
    RECAP_CHECK_ARG(recap__handle_unregister(host, RECAP_MAGIC_PLAIN_HOST),
                    "plain host %p destroyed twice at once", (void *)host);
    host->magic = RECAP_MAGIC_DEAD;
    for (i = 0; i < host->nkept; i++) {
        if (host->device == RECAP_DEVICE_HOST)
            free(host->kept[i].data);
        else
            recap_device_free(host->device, host->kept[i].data);
    }
    free(host->kept);
    recap__ptrigger_free_all(host);
    free(host);
    return RECAP_OK;
}

recap_status_t recap_plain_host_stats(recap_plain_host_h host, recap_plain_stats_t *stats_p)
{
    RECAP_CHECK_HANDLE(host, RECAP_MAGIC_PLAIN_HOST, "plain host");
    RECAP_CHECK_ARG(stats_p != NULL, "NULL argument");
    recap__lock(&host->lock);
    *stats_p = host->stats;
    recap__unlock(&host->lock);
    return RECAP_OK;
}

recap_status_t recap_plain_host_reset_peak(recap_plain_host_h host)
{
    RECAP_CHECK_HANDLE(host, RECAP_MAGIC_PLAIN_HOST, "plain host");
    recap__lock(&host->lock);
    host->stats.peak_bytes = host->stats.live_bytes;
    recap__unlock(&host->lock);
    return RECAP_OK;
}
