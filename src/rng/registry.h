/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The live device generator states (recap's own kind: a framework's states are the framework's),
 * for what walks them all: priming gives each a device slot before a capture, and a graph's
 * slots are mapped back to their states (capture/slots.c).
 */
#ifndef RECAP_RNG_REGISTRY_H
#define RECAP_RNG_REGISTRY_H

#include "base/atfork.h"
#include "rng/generator.h"

/* Calls fn(gs, arg) on each live device state with the registry locked, until fn returns
 * nonzero, and returns that (0 when it never did). fn must not create or release a state. */
int recap__genstates_each(int (*fn)(recap__genstate_t *gs, void *arg), void *arg);

/* A new device state joins; a released one leaves (rng/generator.c). */
void recap__genstates_add(recap__genstate_t *gs);
void recap__genstates_remove(recap__genstate_t *gs);
void recap__genstates_atfork(recap__atfork_t when);

#endif
