/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUDA_INJECTION64_PATH=librecap.so: the driver loads librecap at cuInit and calls
 * InitializeInjection, where recap subscribes to CUPTI. When librecap is also preloaded, the
 * preload front end already reports and this does nothing.
 */
#include "config.h"

#include "base/log.h"
#include "hooks/hooks.h"

__attribute__((visibility("default"))) int InitializeInjection(void);
__attribute__((visibility("default"))) int InitializeInjection(void)
{
    if (recap__hooks_preload_enabled()) {
        recap__log(RECAP_LOG_INFO, "injection: the LD_PRELOAD front end is active; CUPTI not "
                   "installed");
        return 1;
    }
    /* Failure is logged by the installer; the host's CUDA goes on either way. */
    recap__cupti_install(RECAP_HOOKS_INJECTION);
    return 1;
}

/* RECAP_HOOKS=cupti with a preloaded or linked librecap: subscribe at load. */
__attribute__((constructor)) static void install_configured_cupti(void)
{
    if (recap__hooks_config() == RECAP_HOOKS_CFG_CUPTI)
        recap__cupti_install(RECAP_HOOKS_CUPTI);
}
