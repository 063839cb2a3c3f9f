/* SPDX-License-Identifier: Apache-2.0 */
/* Replacing a tracker's whole name -> state map (reset, set_states, seeding, restoring a
 * snapshot of other names): everything that can fail is done before the lock is taken. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
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
    free(m->writes);
    recap__index_free(&m->names);
    m->slots = NULL;
    m->writes = NULL;
    m->n = m->cap = 0;
}

static int has_name(recap_tracker_h t, const char *name)
{
    int found;

    recap__tracker_lock(t);
    found = recap__tracker_find(t, name) >= 0;
    recap__tracker_unlock(t);
    return found;
}

/* Graph-safe trackers get objects only for the names they lack: the others keep theirs. */
recap_status_t recap__map_prepare(recap_tracker_h t, const recap__entry_t *e, size_t n,
                                  recap__map_t *m)
{
    int graph_safe = (t->flags & RECAP_TRACKER_GRAPH_SAFE) != 0;
    size_t i;

    recap_status_t st = RECAP_OK;

    m->n = 0;
    m->cap = n;
    m->slots = NULL;
    memset(&m->names, 0, sizeof(m->names));
    m->writes = recap__alloc_n(recap__count_add(n, 2), sizeof(*m->writes));
    if (m->writes == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "tracker states");
    if (n == 0)
        return RECAP_OK;
    m->slots = recap__alloc_n(n, sizeof(*m->slots));
    if (m->slots == NULL) {
        recap__map_free(m);
        return recap__fail(RECAP_ERR_NO_MEMORY, "tracker states");
    }
    for (i = 0; i < n; i++) {
        recap__slot_t *s = malloc(sizeof(*s));
        if (s == NULL)
            break;
        s->e = e[i];
        s->obj = NULL;
        s->spare = 0;
        m->slots[m->n++] = s;
        if (graph_safe && !has_name(t, s->e.name)) {
            st = recap__generator_new_state(t->gen, e[i].seed, e[i].offset, &s->obj);
            if (st != RECAP_OK)
                break;
        }
    }
    if (i < n) {
        recap__map_free(m);
        return st != RECAP_OK ? st : recap__fail(RECAP_ERR_NO_MEMORY, "tracker states");
    }
    return RECAP_OK;
}

/* The index a replacement installs with its slots (an add's one slot needs none: the add puts it
 * in the tracker's index). A name given twice keeps finding its first slot, as a scan found it. */
static recap_status_t index_names(recap__map_t *m)
{
    size_t i;

    if (recap__index_reserve(&m->names, m->n) != RECAP_OK)
        return recap__fail(RECAP_ERR_NO_MEMORY, "tracker states");
    for (i = 0; i < m->n; i++) {
        const recap__entry_t *e = &m->slots[i]->e;
        uint32_t hash = recap__name_hash(e->name, e->len);

        if (recap__index_find_name(&m->names, m->slots, e->name, e->len, hash) < 0)
            recap__index_put(&m->names, hash, i);
    }
    return RECAP_OK;
}

recap_status_t recap__map_complete(recap_tracker_h t, recap__map_t *m)
{
    size_t i;

    if (!(t->flags & RECAP_TRACKER_GRAPH_SAFE))
        return RECAP_OK;
    for (i = 0; i < m->n; i++) {
        recap__slot_t *s = m->slots[i];
        recap_status_t st;

        if (s->obj != NULL || recap__tracker_find(t, s->e.name) >= 0)
            continue;
        st = recap__generator_new_state(t->gen, s->e.seed, s->e.offset, &s->obj);
        if (st != RECAP_OK)
            return st;
    }
    return RECAP_OK;
}

/* The writes a replacement makes before it commits: the new values of names whose objects stay
 * (graph-safe trackers), then the generators'. */
static size_t plan_writes(recap_tracker_h t, recap__map_t *m, const recap__gen_values_t *gv)
{
    size_t i, k = 0;

    for (i = 0; (t->flags & RECAP_TRACKER_GRAPH_SAFE) && i < m->n; i++) {
        int j = recap__tracker_find(t, m->slots[i]->e.name);
        if (j < 0)
            continue;
        /* No fork is open, so no slot object is installed in the generator. */
        m->writes[k].obj = t->slots[j]->obj;
        m->writes[k].seed = m->slots[i]->e.seed;
        m->writes[k++].offset = m->slots[i]->e.offset;
    }
    if (gv != NULL && gv->set_gen) {
        m->writes[k].obj = NULL;
        m->writes[k].gen = t->gen;
        m->writes[k].seed = gv->gen_seed;
        m->writes[k++].offset = gv->gen_offset;
    }
    if (gv != NULL && gv->set_host && t->host_gen != NULL) {
        m->writes[k].obj = NULL;
        m->writes[k].gen = t->host_gen;
        m->writes[k].seed = gv->host_seed;
        m->writes[k++].offset = gv->host_offset;
    }
    return k;
}

/* A name kept across the replacement moves its object (and spare references) to the new slot;
 * an object prepared for it in vain goes to the old slot, to be freed with the old map. */
static void adopt_objects(recap_tracker_h t, recap__map_t *m)
{
    size_t i;

    for (i = 0; i < m->n; i++) {
        recap__slot_t *s = m->slots[i], *old;
        recap__genstate_t *unused = s->obj;
        int j = recap__tracker_find(t, s->e.name);

        if (j < 0)
            continue;
        old = t->slots[j];
        s->obj = old->obj;
        s->spare = old->spare;
        old->obj = unused;
        old->spare = 0;
    }
}

recap_status_t recap__map_commit(recap_tracker_h t, recap__map_t *m,
                                 const recap__gen_values_t *gv)
{
    recap__slot_t **slots = t->slots;
    size_t n = t->nslots, cap = t->slots_cap;
    recap__index_t names = t->names;
    recap_status_t st = recap__map_complete(t, m);

    if (st == RECAP_OK)
        st = recap__writes_apply(m->writes, plan_writes(t, m, gv));
    if (st != RECAP_OK)
        return st;
    if (t->flags & RECAP_TRACKER_GRAPH_SAFE)
        adopt_objects(t, m);
    t->slots = m->slots;
    t->nslots = m->n;
    t->slots_cap = m->cap;
    t->names = m->names;
    t->hint = 0;
    t->layout = recap__layout_next();
    m->slots = slots;
    m->n = n;
    m->cap = cap;
    m->names = names;
    return RECAP_OK;
}

recap_status_t recap__tracker_replace(recap_tracker_h t, const recap__entry_t *e, size_t n,
                                      const recap__gen_values_t *gv, recap__then_fn then,
                                      void *arg, const char *what)
{
    recap__map_t m;
    recap_status_t st = recap__map_prepare(t, e, n, &m);
    size_t depth;

    if (st != RECAP_OK)
        return st;
    st = index_names(&m);
    if (st != RECAP_OK) {
        recap__map_free(&m);
        return st;
    }
    recap__tracker_lock(t);
    depth = t->depth;
    if (depth == 0)
        st = recap__map_commit(t, &m, gv);
    if (depth == 0 && st == RECAP_OK)
        then(t, arg);
    recap__tracker_unlock(t);
    recap__map_free(&m);
    if (depth > 0)
        return recap__fail(RECAP_ERR_STATE, "%s with %zu fork(s) open: the forks would end on "
                           "states that are gone; unfork first", what, depth);
    return st;
}
