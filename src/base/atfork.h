/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fork() of a process using recap. src/base/atfork.c registers one set of handlers: before the
 * fork the forking thread takes every module-wide lock, in one order (the order the modules nest
 * them in), so no other thread is inside a module's critical section when the process is copied;
 * the parent releases them; the child releases them too (the other threads are gone) and each
 * module drops what belonged to those threads (captures in progress). Per-object locks
 * (generators, trackers, captures, plain hosts) are not covered: an object another thread was
 * using at the fork may stay locked in the child, which should create its own.
 */
#ifndef RECAP_BASE_ATFORK_H
#define RECAP_BASE_ATFORK_H

#include <pthread.h>

typedef enum { RECAP_ATFORK_PREPARE, RECAP_ATFORK_PARENT, RECAP_ATFORK_CHILD } recap_atfork_t;

/* Each module's handler, in the order the prepare step calls them. */
void recap__capture_probe_atfork(recap_atfork_t when); /* capture/probe.c */
void recap__default_tracker_atfork(recap_atfork_t when); /* tracker/default.c */
void recap__cupti_atfork(recap_atfork_t when);          /* hooks/cupti.c */
void recap__hooks_atfork(recap_atfork_t when);          /* hooks/frontend.c */
void recap__slots_atfork(recap_atfork_t when);          /* capture/slots.c */
void recap__device_atfork(recap_atfork_t when);         /* driver/device.c */
void recap__capture_atfork(recap_atfork_t when);        /* capture/capture.c */
void recap__graphs_atfork(recap_atfork_t when);         /* capture/graphs.c */
void recap__compose_atfork(recap_atfork_t when);        /* capture/compose.c */
void recap__events_atfork(recap_atfork_t when);         /* capture/subscribers.c */
void recap__scope_atfork(recap_atfork_t when);          /* tracker/scope.c */
void recap__handle_atfork(recap_atfork_t when);         /* base/handle.c */
void recap__log_atfork(recap_atfork_t when);            /* base/log.c: any module logs */
/* In the child, once every lock is released: drops the captures of the threads that are gone. */
void recap__capture_atfork_child(void);                  /* capture/capture.c */

/* A module-wide mutex: taken before the fork, released after it in both processes. */
static inline void recap__atfork_mutex(pthread_mutex_t *m, recap_atfork_t when)
{
    if (when == RECAP_ATFORK_PREPARE)
        pthread_mutex_lock(m);
    else
        pthread_mutex_unlock(m);
}

#endif
