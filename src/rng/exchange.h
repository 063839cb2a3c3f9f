/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tracker's fork/unfork exchange with its generator, inline, for the case every fork of a
 * training step meets: recap's own state, no capture running, the claim free or the caller's.
 * A fork+unfork pair has a budget of a few dozen nanoseconds and the out-of-line calls (frames,
 * saved registers, the checks done again) took about a third of it. Anything else (a framework
 * generator, a capture, another tracker's claim) answers 0 with nothing changed, and the caller
 * makes the full call (recap__generator_exchange_value, recap__generator_install_genstate), which
 * handles it and reports the claim's holder. A framework generator is told apart before its lock
 * is taken: gen->fw is set at creation and cleared at destroy, which its trackers prevent while
 * they drive it, so a fork through it takes the lock once, as before. A tracker whose lock is
 * the generator's holds it already (`held`) and the exchange takes no lock at all.
 */
#ifndef RECAP_RNG_EXCHANGE_H
#define RECAP_RNG_EXCHANGE_H

#include "base/lock.h"
#include "rng/generator.h"
#include "rng/port.h"

/* Under the generator's lock: takes the generator for `claim` (NULL: nothing to take); 0 when
 * another tracker holds it, named in *holder_p when holder_p is not NULL (the holder seen: it
 * may give the generator back right after, with one store outside this lock). The claim's one
 * rule, for the fast path and generator.c's take. */
static inline int recap__generator_take_fast(recap_generator_h gen, struct recap_tracker *claim,
                                             struct recap_tracker **holder_p)
{
    struct recap_tracker *holder;

    if (claim != NULL) {
        holder = __atomic_load_n(&gen->forker, __ATOMIC_RELAXED);
        if (holder != NULL && holder != claim) {
            if (holder_p != NULL)
                *holder_p = holder;
            return 0;
        }
        __atomic_store_n(&gen->forker, claim, __ATOMIC_RELAXED);
    }
    return 1;
}

/* The generator's lock for the exchanges below: `held` when the caller's tracker lock is this
 * lock (tracker/tracker.c's choose_lock), which the caller then holds: nothing to take. */
static inline void recap__exchange_enter(recap_generator_h gen, int held)
{
    if (!held)
        recap__lock_in_section(&gen->lock);
}

static inline void recap__exchange_leave(recap_generator_h gen, int held)
{
    if (!held)
        recap__unlock_in_section(&gen->lock);
}

/* recap__generator_exchange_value for recap's own state outside captures; the caller is inside a
 * lock section (it holds its tracker's lock, the generator's when `held`). */
static inline __attribute__((always_inline)) int
recap__generator_try_exchange(recap_generator_h gen, int held, struct recap_tracker *claim,
                              uint64_t *seed, uint64_t *offset)
{
    recap__genstate_t *gs;
    uint64_t s, o;

    if (gen->fw != NULL)
        return 0;
    recap__exchange_enter(gen, held);
    gs = gen->state;
    /* A host state is never captured; a device one is only while a capture runs somewhere. */
    if (gs->fw != NULL || recap__genstate_in_capture(gs) ||
        !recap__generator_take_fast(gen, claim, NULL)) {
        recap__exchange_leave(gen, held);
        return 0;
    }
    /* Atomic loads and stores, as get_value/set_value: graph launches add to the offset. */
    s = __atomic_load_n(&gs->seed, __ATOMIC_RELAXED);
    o = __atomic_load_n(&gs->offset, __ATOMIC_RELAXED);
    __atomic_store_n(&gs->seed, *seed, __ATOMIC_RELAXED);
    __atomic_store_n(&gs->offset, *offset, __ATOMIC_RELAXED);
    recap__exchange_leave(gen, held);
    *seed = s;
    *offset = o;
    return 1;
}

/* recap__generator_install_genstate for recap's own generator; the caller is inside a lock
 * section, as for try_exchange. Takes over the caller's reference to s on success only. */
static inline __attribute__((always_inline)) int
recap__generator_try_install(recap_generator_h gen, int held, struct recap_tracker *claim,
                             recap__genstate_t *s, recap__genstate_t **old_p)
{
    recap__genstate_t *old;

    if (gen->fw != NULL)
        return 0;
    recap__exchange_enter(gen, held);
    if (!recap__generator_take_fast(gen, claim, NULL)) {
        recap__exchange_leave(gen, held);
        return 0;
    }
    old = gen->state;
    gen->state = s;
    recap__exchange_leave(gen, held);
    *old_p = old;
    return 1;
}

#endif
