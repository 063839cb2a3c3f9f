/* SPDX-License-Identifier: Apache-2.0 */
/*
 * All-or-nothing writes of state values. recap's own states take any value, but a framework's
 * generator and state objects are written through its operations, which may fail: a restore,
 * seeding or set_states that wrote half of its values would leave the job drawing from a mix of
 * two RNG states. So the values are written in order, each one's former value read first, and on
 * a failure those already written get their former values back.
 */
#include "config.h"

#include "base/log.h"
#include "tracker/tracker.h"

static recap_status_t read_one(recap__write_t *w, uint64_t *seed, uint64_t *offset)
{
    if (w->obj != NULL)
        return recap__genstate_get_value(w->obj, seed, offset);
    return recap__generator_get_value(w->gen, seed, offset);
}

static recap_status_t write_one(recap__write_t *w, uint64_t seed, uint64_t offset)
{
    if (w->obj != NULL)
        return recap__genstate_set_value(w->obj, seed, offset);
    return recap__generator_set_value(w->gen, seed, offset);
}

/* Puts back the former values of w[0..n), last first. A framework failing again here cannot be
 * helped; it is logged, and the caller still reports the first failure. */
static void undo(recap__write_t *w, size_t n)
{
    while (n-- > 0)
        if (write_one(&w[n], w[n].old_seed, w[n].old_offset) != RECAP_OK)
            recap__log(RECAP_LOG_WARN, "a framework generator refused to take back its former "
                       "state after a failed restore: its state is now undefined");
}

recap_status_t recap__writes_apply(recap__write_t *w, size_t n)
{
    recap_status_t st;
    size_t i;

    for (i = 0; i < n; i++) {
        st = read_one(&w[i], &w[i].old_seed, &w[i].old_offset);
        if (st == RECAP_OK)
            st = write_one(&w[i], w[i].seed, w[i].offset);
        if (st != RECAP_OK) {
            undo(w, i);
            return st;
        }
    }
    return RECAP_OK;
}

int recap__tracker_has_framework(recap_tracker_h t)
{
    return t->gen->fw != NULL || (t->host_gen != NULL && t->host_gen->fw != NULL);
}
