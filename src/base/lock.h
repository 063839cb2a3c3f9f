/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small spinlock for state that is held for a few loads and stores (generator offsets, tracker
 * maps). Uncontended it costs one atomic exchange and one release store, about half of a
 * pthread mutex pair, which matters for fork/unfork on every layer of a training step. Under
 * contention it yields the CPU instead of burning it.
 */
#ifndef RECAP_BASE_LOCK_H
#define RECAP_BASE_LOCK_H

#include <sched.h>

/* A spin-wait hint: x86's pause, Arm's yield, else nothing (a compiler barrier). */
static inline void recap__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

typedef struct {
    int locked;
} recap__lock_t;

#define RECAP_LOCK_INIT {0}

static inline void recap__lock(recap__lock_t *l)
{
    int spins = 0;

    while (__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(&l->locked, __ATOMIC_RELAXED)) {
            if (++spins < 64)
                recap__cpu_relax();
            else
                sched_yield();
        }
    }
}

static inline void recap__unlock(recap__lock_t *l)
{
    __atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

#endif
