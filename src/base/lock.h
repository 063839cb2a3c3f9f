/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small spinlock for state that is held for a few loads and stores (generator offsets, tracker
 * maps). Uncontended it costs one compare-and-swap and one release store, plus, for a thread's
 * outermost lock, a store to and a load from the thread's own record and one load of the fork
 * gate: no atomic read-modify-write on a cache line other threads write, which matters for
 * fork/unfork on every layer of a training step. Under contention it yields the CPU instead of
 * burning it.
 *
 * fork(): another thread may hold an object's lock when the process forks, and that thread does
 * not exist in the child. Two things keep the child from waiting for it forever:
 *  - the fork handlers (src/base/lock.c, last in src/process/atfork.c's order) close a gate that
 *    keeps threads out of new outermost critical sections and wait, briefly, for the threads
 *    inside to leave, so the child normally inherits every object unlocked and consistent. Each
 *    thread says whether it is inside in its own record (a list the forking thread reads); the
 *    store-then-load of a thread entering and the forking thread's gate-then-scan are ordered by
 *    membarrier(2), which makes every running thread execute a full barrier, so the entering
 *    thread needs none (without membarrier it takes an out-of-line path that orders them);
 *  - a lock is tagged with the process incarnation that took it (a count of forks along the way):
 *    should the wait time out (a thread inside a critical section waiting for something the
 *    forking thread holds), the child takes over a lock left by a thread of its parent instead
 *    of spinning on it.
 * A host callback recap makes while holding a lock (a framework generator's operation) runs
 * stepped out of the section (recap__lock_step_out): a fork then does not wait for the callback,
 * which may be slow or fork itself, and the child takes over the lock it held.
 */
#ifndef RECAP_BASE_LOCK_H
#define RECAP_BASE_LOCK_H

#include <sched.h>

#include "base/atfork.h"

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
    unsigned locked; /* 0, or the tag of the process incarnation holding it */
} recap__lock_t;

#define RECAP_LOCK_INIT {0}

/* A thread's part in the fork gate. */
typedef struct recap__lock_thread {
    int depth;       /* critical sections the thread is in */
    unsigned inside; /* depth > 0, for the forking thread to read (atomic) */
    int listed;      /* on the list of threads the forking thread reads */
    struct recap__lock_thread *prev, *next;
} recap__lock_thread_t;

/* src/base/lock.c */
extern unsigned recap__lock_tag; /* odd: 2 * forks along the way + 1 */
/* RECAP_GATE_CLOSED while a fork is being prepared; RECAP_GATE_FENCE where membarrier is not
 * available (entering threads then order their store and load themselves, out of line). One word,
 * so an entering thread's fast path reads one global. */
extern unsigned recap__lock_gate;
#define RECAP_GATE_CLOSED 1u
#define RECAP_GATE_FENCE 2u
/* initial-exec: a plain access, not a __tls_get_addr call, on every lock (as recap__fw_depth) */
extern __thread recap__lock_thread_t recap__lock_self __attribute__((tls_model("initial-exec")));
void recap__lock_enter_slow(void);
void recap__lock_atfork(recap__atfork_t when);

/* A critical section around several locks taken one after another (a launch's generators):
 * the gate is checked once for all of them instead of once per lock. */
static inline void recap__lock_section_enter(void)
{
    recap__lock_thread_t *self = &recap__lock_self;

    if (self->depth++ == 0) {
        __atomic_store_n(&self->inside, 1, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the forking thread's membarrier orders them */
        if (__builtin_expect(__atomic_load_n(&recap__lock_gate, __ATOMIC_RELAXED) != 0 ||
                             !self->listed, 0))
            recap__lock_enter_slow();
    }
}

static inline void recap__lock_section_leave(void)
{
    recap__lock_thread_t *self = &recap__lock_self;

    if (--self->depth == 0)
        __atomic_store_n(&self->inside, 0, __ATOMIC_RELEASE);
}

/* Around a host callback made inside critical sections: the callback runs as if outside them
 * (a fork does not wait for it; recap calls it makes enter sections of their own), and coming
 * back waits for a fork being prepared, as entering does. */
static inline int recap__lock_step_out(void)
{
    recap__lock_thread_t *self = &recap__lock_self;
    int depth = self->depth;

    if (depth > 0) {
        self->depth = 0;
        __atomic_store_n(&self->inside, 0, __ATOMIC_RELEASE);
    }
    return depth;
}

static inline void recap__lock_step_in(int depth)
{
    if (depth > 0) {
        recap__lock_section_enter();
        recap__lock_self.depth = depth;
    }
}

/* The lock alone, for code already inside a section (recap__lock_section_enter). */
static inline void recap__lock_in_section(recap__lock_t *l)
{
    unsigned tag = __atomic_load_n(&recap__lock_tag, __ATOMIC_RELAXED), seen = 0;
    int spins = 0;

    while (!__atomic_compare_exchange_n(&l->locked, &seen, tag, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
        if (seen != tag) /* left by a thread of the parent process: not coming back */
            continue;
        seen = 0;
        if (++spins < 64)
            recap__cpu_relax();
        else
            sched_yield();
    }
}

static inline void recap__unlock_in_section(recap__lock_t *l)
{
    __atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

static inline void recap__lock(recap__lock_t *l)
{
    recap__lock_section_enter();
    recap__lock_in_section(l);
}

static inline void recap__unlock(recap__lock_t *l)
{
    recap__unlock_in_section(l);
    recap__lock_section_leave();
}

#endif
