/* SPDX-License-Identifier: Apache-2.0 */
/* Arming and removing the engine trigger that rebuilds a region or a manager's regions. */
#include "config.h"

#include "base/error.h"
#include "region/region.h"

recap_status_t recap__trigger_arm(const recap_engine_ops_t *ops, void *engine,
                                  recap_buffer_t trigger, recap_trigger_func_t fn, void *arg,
                                  void **handle_p)
{
    recap_status_t st;

    if (trigger == NULL)
        return RECAP_OK;
    if (ops->add_trigger == NULL)
        return recap__fail(RECAP_ERR_INVALID_ARG, "engine ops lack add_trigger: release without "
                                                  "a trigger buffer and rebuild explicitly");
    /* As Megatron's register_hook under `if hook_tensor.requires_grad`: a buffer without a
     * gradient never fires, and the engine rebuilds explicitly if at all. */
    if (ops->needs_grad != NULL && !ops->needs_grad(engine, trigger))
        return RECAP_OK;
    st = ops->add_trigger(engine, trigger, fn, arg, handle_p);
    if (st != RECAP_OK) {
        *handle_p = NULL;
        return recap__engine_fail(st, "add_trigger", -1);
    }
    return RECAP_OK;
}

/* Removal cannot be undone or retried usefully; an engine failing it keeps a trigger that, firing
 * in a later state, does nothing. */
void recap__trigger_disarm(const recap_engine_ops_t *ops, void *engine, void **handle_p)
{
    if (*handle_p == NULL)
        return;
    ops->remove_trigger(engine, *handle_p);
    *handle_p = NULL;
}
