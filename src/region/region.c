/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Regions without output: creation, recording, the end of their lifecycle and their queries.
 * Release and rebuild have files of their own.
 */
#include "config.h"

#include <stdlib.h>

#include "base/error.h"
#include "base/handle.h"
#include "region/region.h"
#include "rng/generator.h" /* RECAP_CHECK_NOT_IN_FRAMEWORK_OP */

static const char *state_name(recap_region_state_t s)
{
    static const char *const names[] = {"NEW", "RECORDED", "RELEASED", "REBUILT", "DONE"};

    return (unsigned)s < 5 ? names[s] : "?";
}

recap_status_t recap__region_not_running(recap_region_h r, const char *what)
{
    if (!r->running)
        return RECAP_OK;
    return recap__fail(RECAP_ERR_STATE, "%s of a region from inside its own function or an engine "
                       "operation it called (the region is running them; nothing changed)", what);
}

recap_status_t recap__region_expect(recap_region_h r, recap_region_state_t want,
                                    const char *what)
{
    recap_status_t st = recap__region_not_running(r, what);

    if (st != RECAP_OK)
        return st;
    if (r->state == want)
        return RECAP_OK;
    return recap__fail(RECAP_ERR_STATE, "%s of a %s region (needs %s)", what,
                       state_name(r->state), state_name(want));
}

recap_status_t recap_region_create(const recap_region_params_t *params, recap_region_h *region_p)
{
    recap_region_h r;
    recap_status_t st;

    RECAP_CHECK_ARG(region_p != NULL, "region_p is NULL");
    RECAP_CHECK_ARG(params != NULL, "params is NULL");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_region_create"); /* it joins its tracker */
    /* The set of live handles, not the magic: a destroyed manager's memory is not read. */
    RECAP_CHECK_ARG(params->manager == NULL ||
                    recap__handle_live(params->manager, RECAP_MAGIC_MANAGER),
                    "params.manager %p is not a live manager", (void *)params->manager);
    RECAP_CHECK_ARG((params->flags & ~(uint32_t)(RECAP_REGION_RETAIN_INPUTS |
                                                 RECAP_REGION_NO_CONTEXT)) == 0,
                    "flags 0x%x: regions take RECAP_REGION_RETAIN_INPUTS and "
                    "RECAP_REGION_NO_CONTEXT only", params->flags);
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "region");
    r->magic = RECAP_MAGIC_REGION;
    st = recap__rec_init(&r->rec, params, RECAP__NEED_RELEASE);
    if (st == RECAP_OK)
        st = recap__handle_register(r, RECAP_MAGIC_REGION);
    if (st == RECAP_OK && params->manager != NULL)
        st = recap__manager_add(params->manager, r);
    if (st != RECAP_OK) {
        recap__handle_unregister(r, RECAP_MAGIC_REGION);
        recap__rec_fini(&r->rec); /* (a zeroed rec, when its init failed, holds nothing) */
        free(r);
        return st;
    }
    r->state = RECAP_REGION_NEW;
    *region_p = r;
    return RECAP_OK;
}

recap_status_t recap_region_destroy(recap_region_h region)
{
    recap_status_t st;

    RECAP_CHECK_LIVE(region, RECAP_MAGIC_REGION, "region");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_region_destroy"); /* it leaves its tracker */
    st = recap__region_not_running(region, "destroy");
    if (st == RECAP_OK && region->manager != NULL && region->manager->busy)
        st = recap__fail(RECAP_ERR_STATE, "destroy of a region while its manager releases or "
                         "rebuilds it (nothing changed)");
    if (st != RECAP_OK)
        return st;
    RECAP_CHECK_ARG(recap__handle_unregister(region, RECAP_MAGIC_REGION),
                    "region %p destroyed twice at once", (void *)region);
    region->magic = RECAP_MAGIC_DEAD;
    region->running = 1; /* the engine's operations below may call back */
    recap__trigger_disarm(region->rec.ops, region->rec.engine, &region->trigger);
    if (region->manager != NULL)
        recap__manager_forget(region->manager, region);
    recap__rec_fini(&region->rec);
    free(region);
    return RECAP_OK;
}

recap_status_t recap_region_record(recap_region_h region, recap_signature_h sig, recap_func_t fn,
                                   const recap_value_t *args, size_t nargs)
{
    recap_buffer_t bufs[RECAP_MAX_ARGS];
    recap_status_t st;

    RECAP_CHECK_HANDLE(region, RECAP_MAGIC_REGION, "region");
    st = recap__region_expect(region, RECAP_REGION_NEW, "record");
    if (st == RECAP_OK && region->manager != NULL && region->manager->busy)
        st = recap__fail(RECAP_ERR_STATE, "record of a region while its manager releases or "
                         "rebuilds (nothing changed)");
    if (st != RECAP_OK)
        return st;
    /* From here to the end the engine's operations (needs_grad, save) and the function run: a
     * call back into this region's lifecycle is refused. */
    region->running = 1;
    st = recap__rec_prepare(&region->rec, sig, fn, args, nargs);
    if (st == RECAP_OK)
        st = recap__rec_first(&region->rec);
    if (st == RECAP_OK && !region->rec.plain) {
        recap__region_note_outputs(region);
        recap__rec_buffers(&region->rec, bufs);
        st = recap__rec_save(&region->rec, bufs);
    }
    region->running = 0;
    if (st != RECAP_OK) {
        recap__rec_unprepare(&region->rec);
        return st;
    }
    region->state = RECAP_REGION_RECORDED;
    return RECAP_OK;
}

recap_status_t recap_region_finish(recap_region_h region)
{
    recap_status_t st;

    RECAP_CHECK_HANDLE(region, RECAP_MAGIC_REGION, "region");
    st = recap__region_expect(region, RECAP_REGION_REBUILT, "finish");
    if (st != RECAP_OK)
        return st;
    region->running = 1;
    recap__trigger_disarm(region->rec.ops, region->rec.engine, &region->trigger);
    region->running = 0;
    region->state = RECAP_REGION_DONE;
    return RECAP_OK;
}

recap_status_t recap_region_state(recap_region_h region, recap_region_state_t *state_p)
{
    RECAP_CHECK_HANDLE(region, RECAP_MAGIC_REGION, "region");
    RECAP_CHECK_ARG(state_p != NULL, "NULL argument");
    *state_p = region->state;
    return RECAP_OK;
}

recap_status_t recap_region_is_plain(recap_region_h region, int *plain_p)
{
    RECAP_CHECK_HANDLE(region, RECAP_MAGIC_REGION, "region");
    RECAP_CHECK_ARG(plain_p != NULL, "NULL argument");
    if (region->state == RECAP_REGION_NEW)
        return recap__fail(RECAP_ERR_STATE, "a region is known to be plain once recorded");
    *plain_p = region->rec.plain;
    return RECAP_OK;
}

recap_status_t recap_region_return_value(recap_region_h region, recap_value_t *value_p)
{
    RECAP_CHECK_HANDLE(region, RECAP_MAGIC_REGION, "region");
    RECAP_CHECK_ARG(value_p != NULL, "NULL argument");
    *value_p = region->rec.ret;
    return RECAP_OK;
}
