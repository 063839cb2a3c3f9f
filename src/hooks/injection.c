/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUDA_INJECTION64_PATH=librecap.so: the driver loads librecap at cuInit and calls
 * InitializeInjection, where recap subscribes to CUPTI. When librecap is also preloaded, the
 * preload front end already reports and this does nothing.
 *
 * Both ways in here were asked for by a setting (CUDA_INJECTION64_PATH, RECAP_HOOKS=cupti): when
 * CUPTI refuses recap (a profiler holds it: nsys, ncu, compute-sanitizer) the job runs on in
 * explicit mode, so that is said on stderr whatever RECAP_LOG says, naming the holder.
 */
#include "config.h"

#include "base/env.h"
#include "base/log.h"
#include "hooks/hooks.h"

RECAP_API int InitializeInjection(void);
RECAP_API int InitializeInjection(void)
{
    if (recap__hooks_preload_enabled()) {
        recap__log(RECAP_LOG_INFO, "injection: the LD_PRELOAD front end is active; CUPTI not "
                   "installed");
        return 1;
    }
    /* The host's CUDA goes on either way. */
    if (recap__cupti_install(RECAP_HOOKS_INJECTION) != RECAP_OK)
        recap__env_warn("CUDA_INJECTION64_PATH", "CUDA_INJECTION64_PATH: recap's CUPTI front end "
                        "is not installed: %s", recap_last_error());
    return 1;
}

/* RECAP_HOOKS=cupti with a preloaded or linked librecap: subscribe at load. */
__attribute__((constructor)) static void install_configured_cupti(void)
{
    if (recap__hooks_config() == RECAP_HOOKS_CFG_CUPTI &&
        recap__cupti_install(RECAP_HOOKS_CUPTI) != RECAP_OK)
        recap__env_warn("RECAP_HOOKS", "RECAP_HOOKS=cupti: recap's CUPTI front end is not "
                        "installed: %s", recap_last_error());
}
