/* SPDX-License-Identifier: Apache-2.0 */
/* The live device generator states (rng/registry.h): a list under one mutex. */
#include "config.h"

#include <pthread.h>

#include "rng/registry.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static recap__genstate_t *head;

void recap__genstates_atfork(recap__atfork_t when)
{
    recap__atfork_mutex(&lock, when);
}

void recap__genstates_add(recap__genstate_t *gs)
{
    pthread_mutex_lock(&lock);
    gs->reg_prev = NULL;
    gs->reg_next = head;
    if (head != NULL)
        head->reg_prev = gs;
    head = gs;
    pthread_mutex_unlock(&lock);
}

void recap__genstates_remove(recap__genstate_t *gs)
{
    pthread_mutex_lock(&lock);
    if (gs->reg_prev != NULL)
        gs->reg_prev->reg_next = gs->reg_next;
    else
        head = gs->reg_next;
    if (gs->reg_next != NULL)
        gs->reg_next->reg_prev = gs->reg_prev;
    gs->reg_prev = gs->reg_next = NULL;
    pthread_mutex_unlock(&lock);
}

int recap__genstates_each(int (*fn)(recap__genstate_t *gs, void *arg), void *arg)
{
    recap__genstate_t *gs;
    int r = 0;

    pthread_mutex_lock(&lock);
    for (gs = head; gs != NULL && r == 0; gs = gs->reg_next)
        r = fn(gs, arg);
    pthread_mutex_unlock(&lock);
    return r;
}
