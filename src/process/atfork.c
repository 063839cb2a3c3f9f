/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <pthread.h>

#include "base/handle.h"
#include "base/lock.h"
#include "base/log.h"
#include "capture/capture.h"
#include "driver/driver.h"
#include "hooks/hooks.h"
#include "rng/generator.h"
#include "rng/registry.h"
#include "tracker/tracker.h"

/* The process layer, above every other: fork() handling is the one place that knows each
 * module (base/atfork.h says what a handler does). The modules' handlers in lock order: an
 * outer lock (the registration probe runs captures, the default tracker creates generators)
 * before the locks taken inside it. */
static void (*const handlers[])(recap__atfork_t) = {
    recap__capture_probe_atfork, recap__default_tracker_atfork, recap__scope_atfork,
    recap__fw_atfork,
    recap__cupti_atfork,
    recap__hooks_atfork,
    /* compose.c takes the slot pool's and the state registry's locks inside its own; priming
     * the registry's inside the pool's */
    recap__compose_atfork, recap__slots_atfork, recap__genstates_atfork, recap__device_atfork,
    recap__capture_atfork,       recap__graphs_atfork,          recap__events_atfork,
    recap__handle_atfork,        recap__log_atfork,             recap__lock_atfork,
};
#define NHANDLERS (sizeof(handlers) / sizeof(handlers[0]))

static void prepare(void)
{
    size_t i;

    for (i = 0; i < NHANDLERS; i++)
        handlers[i](RECAP_ATFORK_PREPARE);
}

static void parent(void)
{
    size_t i;

    for (i = NHANDLERS; i-- > 0;)
        handlers[i](RECAP_ATFORK_PARENT);
}

/* Every lock is released before a module cleans up: dropping another thread's capture releases
 * generator states, which takes the slot registry's lock. */
static void child(void)
{
    size_t i;

    for (i = NHANDLERS; i-- > 0;)
        handlers[i](RECAP_ATFORK_CHILD);
    recap__capture_atfork_child();
}

__attribute__((constructor)) static void register_atfork(void)
{
    pthread_atfork(prepare, parent, child);
}
