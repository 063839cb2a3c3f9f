/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Functions exported under names the public headers no longer use: binaries linked before the
 * rename call them. Each forwards to the function that replaced it. (The headers map the old
 * names onto the new ones for source code, so they are undone here.)
 */
#include "config.h"

#include "recap.h"

#undef recap_plain_host_create
#undef recap_plain_host_destroy
#undef recap_plain_host_ops
#undef recap_plain_host_stats
#undef recap_plain_host_reset_peak
#undef recap_nccl_host_ops

/* ABI <= 1.4: the engine was "the host". */
RECAP_API recap_status_t recap_plain_host_create(int device, uint32_t flags,
                                                 recap_plain_engine_h *engine_p);
RECAP_API recap_status_t recap_plain_host_destroy(recap_plain_engine_h engine);
RECAP_API recap_status_t recap_plain_host_ops(const recap_engine_ops_t **ops_p);
RECAP_API recap_status_t recap_plain_host_stats(recap_plain_engine_h engine,
                                                recap_plain_stats_t *stats_p);
RECAP_API recap_status_t recap_plain_host_reset_peak(recap_plain_engine_h engine);
RECAP_API recap_status_t recap_nccl_host_ops(recap_nccl_h nccl, const recap_engine_ops_t **ops_p,
                                             void **engine_p);

recap_status_t recap_plain_host_create(int device, uint32_t flags, recap_plain_engine_h *engine_p)
{
    return recap_plain_engine_create(device, flags, engine_p);
}

recap_status_t recap_plain_host_destroy(recap_plain_engine_h engine)
{
    return recap_plain_engine_destroy(engine);
}

recap_status_t recap_plain_host_ops(const recap_engine_ops_t **ops_p)
{
    return recap_plain_engine_ops(ops_p);
}

recap_status_t recap_plain_host_stats(recap_plain_engine_h engine, recap_plain_stats_t *stats_p)
{
    return recap_plain_engine_stats(engine, stats_p);
}

recap_status_t recap_plain_host_reset_peak(recap_plain_engine_h engine)
{
    return recap_plain_engine_reset_peak(engine);
}

recap_status_t recap_nccl_host_ops(recap_nccl_h nccl, const recap_engine_ops_t **ops_p,
                                   void **engine_p)
{
    return recap_nccl_engine_ops(nccl, ops_p, engine_p);
}
