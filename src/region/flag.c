/* SPDX-License-Identifier: Apache-2.0 */
/* recap_is_checkpointing: a per-thread depth, so nested regions and a recompute triggered inside
 * a checkpointed function leave it true until the outermost run ends. */
#include "config.h"

#include "base/error.h"
#include "region/region.h"

static _Thread_local int depth;

void recap__checkpointing_enter(void)
{
    depth++;
}

void recap__checkpointing_leave(void)
{
    depth--;
}

recap_status_t recap_is_checkpointing(int *checkpointing_p)
{
    RECAP_CHECK_ARG(checkpointing_p != NULL, "checkpointing_p is NULL");
    *checkpointing_p = depth > 0;
    return RECAP_OK;
}
