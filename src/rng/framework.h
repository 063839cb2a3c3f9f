/* SPDX-License-Identifier: Apache-2.0 */
/* Framework generators (internal, rng/framework.c): a framework's generator driven through the
 * table of operations it gives recap, the registry of those alive, and the guard against recap
 * calls made from inside one of its operations. */
#ifndef RECAP_RNG_FRAMEWORK_H
#define RECAP_RNG_FRAMEWORK_H

#include <stddef.h>
#include <stdint.h>

#include "base/atfork.h"
#include "rng/state.h"
#include "recap.h"

recap_status_t recap__fw_state_get(recap__genstate_t *gs, uint64_t *seed, uint64_t *offset);
recap_status_t recap__fw_state_set(recap__genstate_t *gs, uint64_t seed, uint64_t offset);
void recap__fw_state_release(recap__genstate_t *gs);
recap_status_t recap__fw_get(recap_generator_h gen, uint64_t *seed, uint64_t *offset);
recap_status_t recap__fw_set(recap_generator_h gen, uint64_t seed, uint64_t offset);
recap_status_t recap__fw_new_state(recap_generator_h gen, uint64_t seed, uint64_t offset,
                                   recap__genstate_t **s_p);
/* With the generator's lock held: installs s and hands back the framework's object installed
 * before it (framework.c says how references move). */
recap_status_t recap__fw_exchange(recap_generator_h gen, recap__genstate_t *s,
                                  recap__genstate_t **old_p);
int recap__fw_graph_safe(const recap_generator_h gen);
/* The values of every framework generator alive (scope.c): up to cap entries, with ids that tell a
 * generator still alive at restore from a new one at the same address; the count alive. */
typedef struct recap__fw_value {
    recap_generator_h gen;
    uint64_t id;
    uint64_t seed, offset;
} recap__fw_value_t;
recap_status_t recap__fw_save_all(recap__fw_value_t *v, size_t cap, size_t *count_p);
/* Writes back the values of those still alive; the first failure is returned. */
recap_status_t recap__fw_restore_all(const recap__fw_value_t *v, size_t n);
/* Framework generators created in this process and their distinct names, for RECAP_REPORT: each
 * name ended by a NUL, *len_p bytes in all (0 when they do not fit cap); *left_out_p: how many
 * names the list had no room for. */
void recap__fw_seen(uint64_t *created_p, char *names, size_t cap, size_t *len_p,
                    uint64_t *left_out_p);
/* Destroying a framework generator: off the registry first (waits for scopes reading it), then,
 * after its state objects went back, the rest. */
void recap__fw_unlink(recap_generator_h gen);
void recap__fw_destroy(recap_generator_h gen);
void recap__fw_atfork(recap__atfork_t when);

/* Whether the calling thread is inside a framework operation recap called: recap's tracker,
 * snapshot and generator calls made from there would wait on locks the thread holds, so they
 * fail with RECAP_ERR_STATE instead. */
/* Initial-exec: every fork reads it, and the default model costs a __tls_get_addr call. */
extern __thread int recap__fw_depth __attribute__((tls_model("initial-exec")));
static inline int recap__fw_in_op(void)
{
    return recap__fw_depth > 0;
}
#define RECAP_CHECK_NOT_IN_FRAMEWORK_OP(what)                                                 \
    do {                                                                                     \
        if (__builtin_expect(recap__fw_in_op(), 0))                                          \
            return recap__fail(RECAP_ERR_STATE, "%s called from inside a framework generator " \
                               "operation (recap holds the locks it would take)", (what));   \
    } while (0)

#endif
