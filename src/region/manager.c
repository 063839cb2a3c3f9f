/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The manager (CheckpointWithoutOutputManager): regions whose outputs feed one another are
 * released together and rebuilt together, in forward order, by a single trigger, so a region's
 * rebuild reads inputs its predecessor has already rebuilt.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/handle.h"
#include "region/region.h"

recap_status_t recap_manager_create(const recap_engine_ops_t *ops, void *engine,
                                    recap_manager_h *mgr_p)
{
    recap_manager_h m;
    recap_status_t st;

    RECAP_CHECK_ARG(ops != NULL && mgr_p != NULL, "NULL argument");
    st = recap__engine_check(ops, engine);
    if (st != RECAP_OK)
        return st;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "manager");
    m->ops = ops;
    m->engine = engine;
    m->magic = RECAP_MAGIC_MANAGER;
    st = recap__engine_use(engine, 1);
    if (st != RECAP_OK) {
        free(m);
        return st;
    }
    if (recap__handle_register(m, RECAP_MAGIC_MANAGER) != RECAP_OK) {
        recap__engine_use(engine, -1);
        free(m);
        return RECAP_ERR_NO_MEMORY;
    }
    *mgr_p = m;
    return RECAP_OK;
}

/* RECAP_ERR_STATE naming `what` while the manager, or one of its regions, is running. */
static recap_status_t not_busy(recap_manager_h m, const char *what)
{
    size_t i;

    if (m->busy)
        return recap__fail(RECAP_ERR_STATE, "%s of a manager from inside its own release or "
                           "rebuild (a region's function or an engine operation; nothing "
                           "changed)", what);
    for (i = 0; i < m->n; i++)
        if (m->regions[i]->running)
            return recap__fail(RECAP_ERR_STATE, "%s of a manager from inside one of its regions' "
                               "lifecycle calls (nothing changed)", what);
    return RECAP_OK;
}

static void let_go(recap_manager_h m)
{
    size_t i;

    for (i = 0; i < m->n; i++)
        m->regions[i]->manager = NULL;
    m->n = 0;
    m->released = 0;
}

recap_status_t recap_manager_destroy(recap_manager_h mgr)
{
    recap_status_t st;

    RECAP_CHECK_ARG(mgr != NULL, "manager is NULL");
    RECAP_CHECK_ARG(recap__handle_live(mgr, RECAP_MAGIC_MANAGER),
                    "manager handle %p is not live (destroyed already, or never created)",
                    (void *)mgr);
    st = not_busy(mgr, "destroy");
    if (st != RECAP_OK)
        return st;
    RECAP_CHECK_ARG(recap__handle_unregister(mgr, RECAP_MAGIC_MANAGER),
                    "manager %p destroyed twice at once", (void *)mgr);
    mgr->magic = RECAP_MAGIC_DEAD;
    mgr->busy = 1; /* the engine's remove_trigger may call back */
    recap__trigger_disarm(mgr->ops, mgr->engine, &mgr->trigger);
    let_go(mgr);
    recap__engine_use(mgr->engine, -1);
    free(mgr->regions);
    free(mgr);
    return RECAP_OK;
}

static recap_status_t check_add(recap_manager_h m, recap_region_h r)
{
    if (r->manager == m)
        return recap__fail(RECAP_ERR_EXISTS, "region already added to this manager");
    if (r->manager != NULL)
        return recap__fail(RECAP_ERR_INVALID_ARG, "region belongs to another manager");
    if (r->rec.ops != m->ops || r->rec.engine != m->engine)
        return recap__fail(RECAP_ERR_INVALID_ARG, "region of another engine than the manager's");
    if (r->state != RECAP_REGION_NEW && r->state != RECAP_REGION_RECORDED)
        return recap__fail(RECAP_ERR_STATE, "only regions not yet released can be added");
    if (m->released)
        return recap__fail(RECAP_ERR_STATE, "manager released its regions and awaits their "
                                            "rebuild");
    return RECAP_OK;
}

recap_status_t recap__manager_add(recap_manager_h m, recap_region_h r)
{
    recap_status_t st = check_add(m, r);
    recap_region_h *grown;

    if (st != RECAP_OK)
        return st;
    if (m->n == m->cap) {
        grown = recap__realloc_n(m->regions, m->cap ? recap__count_add(m->cap, m->cap) : 8, sizeof(*grown));
        if (grown == NULL)
            return recap__fail(RECAP_ERR_NO_MEMORY, "manager's region list");
        m->regions = grown;
        m->cap = m->cap ? 2 * m->cap : 8;
    }
    m->regions[m->n++] = r;
    r->manager = m;
    return RECAP_OK;
}

recap_status_t recap_manager_add(recap_manager_h mgr, recap_region_h region)
{
    recap_status_t st;

    RECAP_CHECK_HANDLE(mgr, RECAP_MAGIC_MANAGER, "manager");
    RECAP_CHECK_HANDLE(region, RECAP_MAGIC_REGION, "region");
    st = not_busy(mgr, "add");
    if (st == RECAP_OK)
        st = recap__region_not_running(region, "add to a manager");
    return st != RECAP_OK ? st : recap__manager_add(mgr, region);
}

void recap__manager_forget(recap_manager_h m, recap_region_h r)
{
    size_t i;

    for (i = 0; i < m->n && m->regions[i] != r; i++)
        ;
    if (i == m->n)
        return;
    memmove(&m->regions[i], &m->regions[i + 1], (m->n - i - 1) * sizeof(m->regions[0]));
    m->n--;
    r->manager = NULL;
}

recap_status_t recap_manager_count(recap_manager_h mgr, size_t *count_p)
{
    RECAP_CHECK_HANDLE(mgr, RECAP_MAGIC_MANAGER, "manager");
    RECAP_CHECK_ARG(count_p != NULL, "NULL argument");
    *count_p = mgr->n;
    return RECAP_OK;
}

static recap_status_t on_trigger(void *arg)
{
    recap_manager_h m = arg;

    return m->released ? recap_manager_rebuild(m) : RECAP_OK;
}

static recap_status_t release(recap_manager_h mgr, recap_buffer_t trigger)
{
    recap_status_t st;
    size_t i;

    for (i = 0; i < mgr->n; i++) {
        st = recap__region_expect(mgr->regions[i], RECAP_REGION_RECORDED, "manager release");
        if (st != RECAP_OK)
            return st;
    }
    /* The previous step's trigger must not rebuild this step's regions. */
    recap__trigger_disarm(mgr->ops, mgr->engine, &mgr->trigger);
    st = recap__trigger_arm(mgr->ops, mgr->engine, trigger, on_trigger, mgr, &mgr->trigger);
    if (st != RECAP_OK)
        return st;
    mgr->released = 1;
    for (i = 0; i < mgr->n; i++)
        if ((st = recap__region_release(mgr->regions[i])) != RECAP_OK)
            return st;
    return RECAP_OK;
}

recap_status_t recap_manager_release(recap_manager_h mgr, recap_buffer_t trigger)
{
    recap_status_t st;

    RECAP_CHECK_HANDLE(mgr, RECAP_MAGIC_MANAGER, "manager");
    st = not_busy(mgr, "release");
    if (st != RECAP_OK)
        return st;
    if (mgr->released)
        return recap__fail(RECAP_ERR_STATE, "manager already released its regions");
    mgr->busy = 1;
    st = release(mgr, trigger);
    mgr->busy = 0;
    return st;
}

static recap_status_t rebuild(recap_manager_h mgr)
{
    recap_status_t st;
    size_t i;

    for (i = 0; i < mgr->n; i++) {
        if (mgr->regions[i]->state != RECAP_REGION_RELEASED)
            continue; /* rebuilt by a call that failed further on */
        if ((st = recap__region_rebuild(mgr->regions[i])) != RECAP_OK)
            return st;
    }
    let_go(mgr);
    return RECAP_OK;
}

recap_status_t recap_manager_rebuild(recap_manager_h mgr)
{
    recap_status_t st;

    RECAP_CHECK_HANDLE(mgr, RECAP_MAGIC_MANAGER, "manager");
    st = not_busy(mgr, "rebuild");
    if (st != RECAP_OK)
        return st;
    if (!mgr->released)
        return recap__fail(RECAP_ERR_STATE, "manager rebuild before its release");
    mgr->busy = 1;
    st = rebuild(mgr);
    mgr->busy = 0;
    return st;
}
