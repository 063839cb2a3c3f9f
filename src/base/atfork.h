/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fork() of a process using recap: what a module's fork handler is given, and the helper for a
 * module-wide mutex. src/process/atfork.c, above every layer, registers one set of handlers
 * (each module declares its own in its header): before the fork the forking thread takes every
 * module-wide lock, in one order (the order the modules nest them in), so no other thread is
 * inside a module's critical section when the process is copied; the parent releases them; the
 * child releases them too (the other threads are gone) and each module drops what belonged to
 * those threads (captures in progress). Per-object locks (generators, trackers, captures, plain
 * engines) are recap__lock_t spinlocks: last of all, the prepare step waits for the threads inside
 * their critical sections to leave, and a child takes over one a vanished thread still held
 * (src/base/lock.h), so a child can use the objects it inherits.
 */
#ifndef RECAP_BASE_ATFORK_H
#define RECAP_BASE_ATFORK_H

#include <pthread.h>

typedef enum { RECAP_ATFORK_PREPARE, RECAP_ATFORK_PARENT, RECAP_ATFORK_CHILD } recap__atfork_t;

/* A module-wide mutex: taken before the fork, released after it in both processes. */
static inline void recap__atfork_mutex(pthread_mutex_t *m, recap__atfork_t when)
{
    if (when == RECAP_ATFORK_PREPARE)
        pthread_mutex_lock(m);
    else
        pthread_mutex_unlock(m);
}

#endif
