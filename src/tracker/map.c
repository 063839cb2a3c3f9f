/* Replacing a tracker's whole name -> state map (reset, set_states, seeding, restoring a
 * snapshot of other names): everything that can fail is done before the lock is taken. */
#include "config.h"

#include <stdlib.h>

#include "base/error.h"
#include "tracker/tracker.h"

void recap__slot_release(recap__slot_t *s)
{
    for (; s->spare > 0; s->spare--)
        recap__genstate_unref(s->obj);
    recap__genstate_unref(s->obj);
    s->obj = NULL;
}

void recap__map_free(recap__map_t *m)
{
    size_t i;

    for (i = 0; i < m->n; i++) {
        recap__slot_release(m->slots[i]);
        free(m->slots[i]);
    }
    free(m->slots);
    m->slots = NULL;
    m->n = m->cap = 0;
}

recap_status_t recap__map_prepare(recap_tracker_h t, const recap__entry_t *e, size_t n,
                                  recap__map_t *m)
{
    int graph_safe = (t->flags & RECAP_TRACKER_GRAPH_SAFE) != 0;
    size_t i;

    m->n = 0;
    m->cap = n;
    m->slots = NULL;
    if (n == 0)
        return RECAP_OK;
    m->slots = malloc(n * sizeof(*m->slots));
    if (m->slots == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "tracker states");
    for (i = 0; i < n; i++) {
        recap__slot_t *s = malloc(sizeof(*s));
        if (s == NULL)
            break;
        s->e = e[i];
        s->obj = NULL;
        s->spare = 0;
        m->slots[m->n++] = s;
        if (graph_safe) {
            s->obj = recap__genstate_new(t->device, e[i].seed, e[i].offset);
            if (s->obj == NULL)
                break;
        }
    }
    if (i < n) {
        recap__map_free(m);
        return recap__fail(RECAP_ERR_NO_MEMORY, "tracker states");
    }
    return RECAP_OK;
}

/* A name kept across the replacement keeps its object: swap it into the new slot, so the
 * fresh object goes away with the old map. */
static void adopt_objects(recap_tracker_h t, recap__map_t *m)
{
    size_t i;

    for (i = 0; i < m->n; i++) {
        recap__slot_t *s = m->slots[i];
        int j = recap__tracker_find(t, s->e.name);
        if (j >= 0) {
            recap__slot_t keep = *t->slots[j];
            t->slots[j]->obj = s->obj;
            t->slots[j]->spare = s->spare;
            s->obj = keep.obj;
            s->spare = keep.spare;
        }
        /* No fork is open, so no slot object is installed in the generator. */
        recap__genstate_set_value(s->obj, s->e.seed, s->e.offset);
    }
}

void recap__map_commit(recap_tracker_h t, recap__map_t *m)
{
    recap__slot_t **slots = t->slots;
    size_t n = t->nslots, cap = t->slots_cap;

    if (t->flags & RECAP_TRACKER_GRAPH_SAFE)
        adopt_objects(t, m);
    t->slots = m->slots;
    t->nslots = m->n;
    t->slots_cap = m->cap;
    t->hint = 0;
    t->layout = recap__layout_next();
    m->slots = slots;
    m->n = n;
    m->cap = cap;
}
