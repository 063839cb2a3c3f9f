/* SPDX-License-Identifier: Apache-2.0 */
/* The spinlocks' fork gate (lock.h says why). */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#ifdef __linux__
#include <linux/membarrier.h>
#endif

#include "base/lock.h"

unsigned recap__lock_tag = 1;
unsigned recap__lock_gate = RECAP_GATE_FENCE; /* until membarrier is known to work */
__thread recap__lock_thread_t recap__lock_self __attribute__((tls_model("initial-exec")));

/* Every thread that ever entered a critical section and has not exited. */
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static recap__lock_thread_t *threads;
static pthread_key_t exit_key;
static int exit_key_made;

/* How long a fork waits for the threads inside critical sections to leave: they hold a lock for
 * a few loads and stores, so only a thread waiting for something the forking thread holds takes
 * longer, and then the child takes its locks over. */
#define GATE_WAIT_NS 100000000L

/* membarrier(2)'s private expedited barrier: the process registers once (a fork's child
 * registers again); where the kernel or a sandbox refuses it, entering threads fence. */
static int barrier_register(void)
{
#if defined(__linux__) && defined(SYS_membarrier) /* (the commands are an enum, not macros) */
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);

    return cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
           syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
#else
    return 0;
#endif
}

/* Every running thread of the process executes a full barrier before this returns. */
static int barrier_all(void)
{
#if defined(__linux__) && defined(SYS_membarrier) /* (the commands are an enum, not macros) */
    return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0;
#else
    return 0;
#endif
}

/* Thread sanitizers do not see membarrier's ordering, and valgrind does not know the call:
 * there entering threads fence themselves (RECAP_LOCK_FENCE=1 asks for it too). */
__attribute__((constructor)) static void barrier_at_load(void)
{
    const char *v = getenv("RECAP_LOCK_FENCE");

#if defined(__SANITIZE_THREAD__)
    return;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    return;
#endif
#endif
    if (v != NULL && v[0] == '1')
        return;
    if (barrier_register())
        __atomic_and_fetch(&recap__lock_gate, ~RECAP_GATE_FENCE, __ATOMIC_SEQ_CST);
}

static void unlist(recap__lock_thread_t *t)
{
    if (t->prev != NULL)
        t->prev->next = t->next;
    else if (threads == t)
        threads = t->next;
    if (t->next != NULL)
        t->next->prev = t->prev;
    t->prev = t->next = NULL;
    t->listed = 0;
}

static void thread_exit(void *arg)
{
    pthread_mutex_lock(&threads_lock);
    unlist(arg);
    pthread_mutex_unlock(&threads_lock);
}

static void list_self(recap__lock_thread_t *self)
{
    pthread_mutex_lock(&threads_lock);
    if (!exit_key_made)
        exit_key_made = pthread_key_create(&exit_key, thread_exit) == 0;
    self->prev = NULL;
    self->next = threads;
    if (threads != NULL)
        threads->prev = self;
    threads = self;
    self->listed = 1;
    pthread_mutex_unlock(&threads_lock);
    if (exit_key_made)
        pthread_setspecific(exit_key, self);
}

/* A thread entering its outermost critical section for the first time, without membarrier, or
 * while a fork is being prepared: listed, then stepping back until the fork is done. */
void recap__lock_enter_slow(void)
{
    recap__lock_thread_t *self = &recap__lock_self;

    if (!self->listed)
        list_self(self);
    /* Sequentially consistent exchanges and loads: no membarrier needed here. */
    __atomic_exchange_n(&self->inside, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&recap__lock_gate, __ATOMIC_SEQ_CST) & RECAP_GATE_CLOSED) {
        __atomic_store_n(&self->inside, 0, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&recap__lock_gate, __ATOMIC_ACQUIRE) & RECAP_GATE_CLOSED)
            sched_yield();
        __atomic_exchange_n(&self->inside, 1, __ATOMIC_SEQ_CST);
    }
}

static long elapsed_ns(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* Closes the gate and waits for the other threads to leave their critical sections. */
static void gate_close(void)
{
    recap__lock_thread_t *self = &recap__lock_self, *t;
    struct timespec t0;

    pthread_mutex_lock(&threads_lock); /* no thread joins the list meanwhile */
    if (!(__atomic_or_fetch(&recap__lock_gate, RECAP_GATE_CLOSED, __ATOMIC_SEQ_CST) &
          RECAP_GATE_FENCE) && !barrier_all())
        __atomic_or_fetch(&recap__lock_gate, RECAP_GATE_FENCE, __ATOMIC_SEQ_CST); /* from now on */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (t = threads; t != NULL; t = t->next)
        while (t != self && __atomic_load_n(&t->inside, __ATOMIC_SEQ_CST) &&
               elapsed_ns(&t0) < GATE_WAIT_NS)
            sched_yield();
}

/* Last in the prepare order, after every module-wide lock. */
void recap__lock_atfork(recap__atfork_t when)
{
    recap__lock_thread_t *self = &recap__lock_self;

    switch (when) {
    case RECAP_ATFORK_PREPARE:
        gate_close();
        break;
    case RECAP_ATFORK_PARENT:
        __atomic_and_fetch(&recap__lock_gate, ~RECAP_GATE_CLOSED, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&threads_lock);
        break;
    case RECAP_ATFORK_CHILD:
        /* The other threads are gone, and a lock still held by one of them is another
         * incarnation's. The child is one thread: it may change how threads enter. */
        threads = NULL;
        if (self->listed) {
            self->prev = self->next = NULL;
            threads = self;
        }
        if (!(__atomic_load_n(&recap__lock_gate, __ATOMIC_RELAXED) & RECAP_GATE_FENCE) &&
            !barrier_register())
            __atomic_or_fetch(&recap__lock_gate, RECAP_GATE_FENCE, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&recap__lock_tag, 2, __ATOMIC_SEQ_CST);
        __atomic_and_fetch(&recap__lock_gate, ~RECAP_GATE_CLOSED, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&threads_lock);
        break;
    }
}
