/* SPDX-License-Identifier: Apache-2.0 */
/* The process-wide default tracker (Megatron's get_cuda_rng_tracker / initialize_rng_tracker). */
#include "config.h"

#include "base/error.h"
#include "tracker/tracker.h"

/* Held for the pointer only, never while a tracker is created or destroyed: those run framework
 * generators' operations, which may call recap_default_tracker_get or fork. */
static recap__lock_t default_lock = RECAP_LOCK_INIT;
static recap_tracker_h default_tracker;

void recap__default_tracker_atfork(recap__atfork_t when)
{
    if (when == RECAP_ATFORK_PREPARE)
        recap__lock(&default_lock);
    else
        recap__unlock(&default_lock);
}

static int same_params(const recap_tracker_params_t *a, const recap_tracker_params_t *b)
{
    return a->flags == b->flags && a->generator == b->generator &&
           a->host_generator == b->host_generator &&
           (a->generator != NULL || a->device == b->device);
}

/* Megatron silently keeps the first tracker; a caller asking for other options is told. */
static recap_status_t keep_existing(const recap_tracker_params_t *params, recap_tracker_h *tracker_p)
{
    const recap_tracker_params_t *have = &default_tracker->params;

    if (!same_params(have, params))
        return recap__fail(RECAP_ERR_OPTIONS_DIFFER, "the default tracker exists with flags "
                           "0x%x, generator %p, device %d, host generator %p; asked for flags "
                           "0x%x, generator %p, device %d, host generator %p (use force_reset "
                           "to replace it)", (unsigned)have->flags, (void *)have->generator,
                           have->device, (void *)have->host_generator, (unsigned)params->flags,
                           (void *)params->generator, params->device,
                           (void *)params->host_generator);
    *tracker_p = default_tracker;
    return RECAP_OK;
}

recap_status_t recap_default_tracker_initialize(const recap_tracker_params_t *params,
                                                int force_reset, recap_tracker_h *tracker_p)
{
    recap_tracker_h t, old;
    recap_status_t st;

    RECAP_CHECK_ARG(params != NULL && tracker_p != NULL, "NULL argument");
    recap__lock(&default_lock);
    if (default_tracker != NULL && !force_reset) {
        st = keep_existing(params, tracker_p);
        recap__unlock(&default_lock);
        return st;
    }
    recap__unlock(&default_lock);
    st = recap_tracker_create(params, &t);
    if (st != RECAP_OK)
        return st;
    recap__lock(&default_lock);
    if (default_tracker != NULL && !force_reset) { /* another thread made one meanwhile */
        st = keep_existing(params, tracker_p);
        recap__unlock(&default_lock);
        recap__tracker_destroy(t);
        return st;
    }
    old = default_tracker;
    default_tracker = t;
    recap__unlock(&default_lock);
    st = old != NULL ? recap__tracker_destroy(old) : RECAP_OK;
    if (st != RECAP_OK) { /* the old one has forks open or regions, and stays */
        recap__lock(&default_lock);
        if (default_tracker == t)
            default_tracker = old;
        recap__unlock(&default_lock);
        recap__tracker_destroy(t);
        return st;
    }
    *tracker_p = t;
    return RECAP_OK;
}

int recap__tracker_is_default(recap_tracker_h t)
{
    int is;

    recap__lock(&default_lock);
    is = t == default_tracker;
    recap__unlock(&default_lock);
    return is;
}

recap_status_t recap_default_tracker_get(recap_tracker_h *tracker_p)
{
    recap_tracker_h t;

    RECAP_CHECK_ARG(tracker_p != NULL, "tracker_p is NULL");
    recap__lock(&default_lock);
    t = default_tracker;
    recap__unlock(&default_lock);
    if (t == NULL)
        return recap__fail(RECAP_ERR_STATE, "the default tracker is not initialized: call "
                           "recap_default_tracker_initialize first");
    *tracker_p = t;
    return RECAP_OK;
}
