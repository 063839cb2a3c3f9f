/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Plain triggers: callbacks armed on a buffer, called when the engine says the buffer's gradient
 * is being computed (recap_plain_buffer_fire). The list is the engine's, not the buffer's, so a
 * trigger handle stays valid after its buffer is gone and recap can always remove it. Triggers
 * may remove triggers while firing (a rebuild destroys regions, say): removal is then deferred
 * until no fire is running.
 */
#include "config.h"

#include <stdlib.h>

#include "base/error.h"
#include "plain/plain.h"

static void unlink_locked(struct recap_plain_engine *h, recap__ptrigger_t *t)
{
    if (t->prev != NULL)
        t->prev->next = t->next;
    else
        h->head = t->next;
    if (t->next != NULL)
        t->next->prev = t->prev;
    else
        h->tail = t->prev;
}

recap_status_t recap__ptrigger_add(recap__pbuf_t *b, recap_trigger_func_t fn, void *arg,
                                   void **handle_p)
{
    struct recap_plain_engine *h = b->engine;
    recap__ptrigger_t *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "trigger");
    t->buf = b;
    t->fn = fn;
    t->arg = arg;
    recap__lock(&h->lock);
    t->prev = h->tail;
    if (h->tail != NULL)
        h->tail->next = t;
    else
        h->head = t;
    h->tail = t;
    h->stats.triggers_armed++;
    recap__unlock(&h->lock);
    *handle_p = t;
    return RECAP_OK;
}

recap_status_t recap__ptrigger_remove(struct recap_plain_engine *h, void *handle)
{
    recap__ptrigger_t *t = handle;

    RECAP_CHECK_ARG(t != NULL, "trigger handle is NULL");
    recap__lock(&h->lock);
    if (h->firing > 0) {
        t->removed = 1;
        t = NULL;
    } else {
        unlink_locked(h, t);
    }
    recap__unlock(&h->lock);
    free(t);
    return RECAP_OK;
}

void recap__ptrigger_orphan_locked(recap__pbuf_t *b)
{
    recap__ptrigger_t *t;

    for (t = b->engine->head; t != NULL; t = t->next)
        if (t->buf == b)
            t->buf = NULL;
}

static void sweep_locked(struct recap_plain_engine *h)
{
    recap__ptrigger_t *t = h->head, *next;

    for (; t != NULL; t = next) {
        next = t->next;
        if (t->removed) {
            unlink_locked(h, t);
            free(t);
        }
    }
}

recap_status_t recap_plain_buffer_fire(recap_buffer_t buf)
{
    recap__pbuf_t *b;
    struct recap_plain_engine *h;
    recap__ptrigger_t *t, *last;
    recap_status_t st = RECAP_OK;

    st = recap__pbuf_check(buf, &b);
    if (st != RECAP_OK)
        return st;
    h = b->engine;
    recap__lock(&h->lock);
    h->firing++;
    last = h->tail; /* triggers armed by a trigger wait for the next fire */
    for (t = h->head; t != NULL && st == RECAP_OK; t = t == last ? NULL : t->next) {
        if (t->buf != b || t->removed)
            continue;
        h->stats.triggers_fired++;
        recap__unlock(&h->lock);
        st = t->fn(t->arg);
        recap__lock(&h->lock);
    }
    if (--h->firing == 0)
        sweep_locked(h);
    recap__unlock(&h->lock);
    return st;
}

void recap__ptrigger_free_all(struct recap_plain_engine *h)
{
    recap__ptrigger_t *t, *next;

    for (t = h->head; t != NULL; t = next) {
        next = t->next;
        free(t);
    }
    h->head = h->tail = NULL;
}
