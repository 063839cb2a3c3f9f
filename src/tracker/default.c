/* SPDX-License-Identifier: Apache-2.0 */
/* The process-wide default tracker (Megatron's get_cuda_rng_tracker / initialize_rng_tracker). */
#include "config.h"

#include "base/error.h"
#include "tracker/tracker.h"

/* Held while the default tracker is created or destroyed, which runs framework operations: one
 * of them may fork, and the fork handlers must then not wait for the lock the thread holds. */
static recap__lock_t default_lock = RECAP_LOCK_INIT;
static recap_tracker_h default_tracker;
static __thread int holding;
static int fork_took; /* the forking thread took the lock in the prepare step */

static void lock_default(void)
{
    recap__lock(&default_lock);
    holding = 1;
}

static void unlock_default(void)
{
    holding = 0;
    recap__unlock(&default_lock);
}

void recap__default_tracker_atfork(recap__atfork_t when)
{
    if (when == RECAP_ATFORK_PREPARE) {
        fork_took = !holding;
        if (fork_took)
            lock_default();
    } else if (fork_took) {
        unlock_default();
    }
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
    recap_tracker_h t;
    recap_status_t st;

    RECAP_CHECK_ARG(params != NULL && tracker_p != NULL, "NULL argument");
    lock_default();
    if (default_tracker != NULL && !force_reset) {
        st = keep_existing(params, tracker_p);
        unlock_default();
        return st;
    }
    st = recap_tracker_create(params, &t);
    if (st == RECAP_OK && default_tracker != NULL) {
        st = recap__tracker_destroy(default_tracker);
        if (st != RECAP_OK)
            recap__tracker_destroy(t); /* the old one has forks open or regions, and stays */
    }
    if (st == RECAP_OK) {
        default_tracker = t;
        *tracker_p = t;
    }
    unlock_default();
    return st;
}

int recap__tracker_is_default(recap_tracker_h t)
{
    int is;

    lock_default();
    is = t == default_tracker;
    unlock_default();
    return is;
}

recap_status_t recap_default_tracker_get(recap_tracker_h *tracker_p)
{
    recap_tracker_h t;

    RECAP_CHECK_ARG(tracker_p != NULL, "tracker_p is NULL");
    lock_default();
    t = default_tracker;
    unlock_default();
    if (t == NULL)
        return recap__fail(RECAP_ERR_STATE, "the default tracker is not initialized: call "
                           "recap_default_tracker_initialize first");
    *tracker_p = t;
    return RECAP_OK;
}
