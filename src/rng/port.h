/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the RNG layer asks of captures, without knowing capture/: a small table of questions that
 * capture/port.c installs when librecap loads (as UCX's lower layers are told of the event core
 * through an installer, never calling up), and the count of captures running, which capture/
 * keeps here so that "is any capture running" stays one load on every draw and fork. Until a
 * table is installed the answers are those of a process with no capture support: nothing
 * captures, no state takes part in a capture.
 *
 * A device state's capture part (its device slot, launch ordering) belongs to capture/ and hangs
 * off the state as an opaque pointer (generator.h); the registry of live device states, which
 * priming walks, is rng's (rng/registry.c).
 */
#ifndef RECAP_RNG_PORT_H
#define RECAP_RNG_PORT_H

#include <stdint.h>

#include "recap.h"

struct recap__genstate;
struct recap__capture; /* capture/'s object: opaque here */

typedef struct recap__capture_port {
    /* The capture recording `stream` (*cap_p = NULL when it is not capturing);
     * RECAP_ERR_NOT_REGISTERED when it captures but recap was never told of that capture. */
    recap_status_t (*of_stream)(recap_stream_t stream, struct recap__capture **cap_p);
    /* Captured Philox arguments for `inc` values per thread from gs (the generator is locked). */
    recap_status_t (*draw)(struct recap__capture *cap, struct recap__genstate *gs, uint64_t inc,
                           recap_philox_args_t *args);
    /* gs's offset relative to the running capture it takes part in: 1 and *rel when it takes
     * part in one. */
    int (*rel_get)(struct recap__genstate *gs, uint64_t *rel);
    /* Sets that relative offset (a seed change, or an offset below the launches' base when
     * `before`, fails the capture): 1 when a capture took it, 0 when none applies. */
    int (*rel_set)(struct recap__genstate *gs, uint64_t rel, int seed_changed, int before);
    /* Whether gs's value was set or drawn inside the running capture it takes part in. */
    int (*moved)(struct recap__genstate *gs);
    /* A device state with a capture part is released: that part goes (its slot, its event). */
    void (*state_gone)(struct recap__genstate *gs);
    /* Whether captures need explicit registration here (recap_capture_needs_registration). */
    recap_status_t (*needs_registration)(int *needs_p);
} recap__capture_port_t;

/* The table in use; never NULL. */
extern const recap__capture_port_t *recap__port;
void recap__capture_port_install(const recap__capture_port_t *port);

/* Captures recap knows to be running in the process, kept by capture/: 0 makes every capture
 * check of a draw or a fork one load. */
extern int recap__ncaptures;
static inline int recap__captures_running(void)
{
    return __atomic_load_n(&recap__ncaptures, __ATOMIC_RELAXED) != 0;
}

#endif
