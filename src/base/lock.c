/* SPDX-License-Identifier: Apache-2.0 */
/* The spinlocks' fork handling (lock.h says why). */
#include "config.h"

#include <sched.h>
#include <time.h>

#include "base/lock.h"

unsigned recap__lock_tag = 1;
unsigned recap__lock_gate;
unsigned recap__lock_inside;
__thread int recap__lock_depth __attribute__((tls_model("initial-exec")));

/* How long a fork waits for the threads inside critical sections to leave: they hold a lock for
 * a few loads and stores, so only a thread waiting for something the forking thread holds takes
 * longer, and then the child takes its locks over. */
#define GATE_WAIT_NS 100000000L

/* A thread entering its outermost critical section while a fork is being prepared steps back
 * until the fork is done. */
void recap__lock_wait_gate(void)
{
    while (__atomic_load_n(&recap__lock_gate, __ATOMIC_SEQ_CST)) {
        __atomic_sub_fetch(&recap__lock_inside, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&recap__lock_gate, __ATOMIC_ACQUIRE))
            sched_yield();
        __atomic_add_fetch(&recap__lock_inside, 1, __ATOMIC_SEQ_CST);
    }
}

static long elapsed_ns(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* Last in the prepare order, after every module-wide lock: the forking thread holds some of
 * those (it counts once among the threads inside). */
void recap__lock_atfork(recap__atfork_t when)
{
    unsigned own = recap__lock_depth > 0 ? 1 : 0;
    struct timespec t0;

    switch (when) {
    case RECAP_ATFORK_PREPARE:
        __atomic_store_n(&recap__lock_gate, 1, __ATOMIC_SEQ_CST);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (__atomic_load_n(&recap__lock_inside, __ATOMIC_SEQ_CST) > own &&
               elapsed_ns(&t0) < GATE_WAIT_NS)
            sched_yield();
        break;
    case RECAP_ATFORK_PARENT:
        __atomic_store_n(&recap__lock_gate, 0, __ATOMIC_SEQ_CST);
        break;
    case RECAP_ATFORK_CHILD:
        /* The other threads are gone: only this one can be inside, and a lock still held by one
         * of them is another incarnation's. */
        __atomic_store_n(&recap__lock_inside, own, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&recap__lock_tag, 2, __ATOMIC_SEQ_CST);
        __atomic_store_n(&recap__lock_gate, 0, __ATOMIC_SEQ_CST);
        break;
    }
}
