/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fork/unfork: install a named state in the tracker's generator and put the outer one back.
 * This runs around every dropout of every layer, so it takes one lock (the tracker's, which is
 * its generator's when that is recap's own: tracker.c's choose_lock; else the tracker's and then
 * the generator's), allocates nothing in steady state and finds the name by a cached slot.
 * The case a training step meets (recap's own generator, no capture, a state other than the
 * current one, frames to spare) runs inline under the tracker's lock (fork_fast, unfork_fast);
 * any other case gives up there with nothing changed and takes the full path (fork_locked,
 * unfork_locked), out of line, so the fast one saves no registers for it. The two are one body:
 * the full path's exchange (rng/generator.c) starts with the fast path's (rng/exchange.h), and
 * both end with the same bookkeeping (keep_outer_value, keep_outer_object, keep_value).
 */
#include "config.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/handle.h"
#include "rng/exchange.h"
#include "tracker/tracker.h"

static recap_status_t grow_frames(recap_tracker_h t)
{
    recap__frame_t *f = recap__realloc_n(t->frames, recap__count_add(t->frames_cap, t->frames_cap), sizeof(*f));

    if (f == NULL)
        return RECAP_ERR_NO_MEMORY;
    t->frames = f;
    t->frames_cap *= 2;
    return RECAP_OK;
}

/* The outermost fork of a tracker claims its generator (in the generator's lock section of the
 * exchange): refused while another tracker has forks open on it. */
static struct recap_tracker *claim_of(recap_tracker_h t)
{
    return t->depth == 0 ? t : NULL;
}

/* What a fork of a value-mode tracker keeps of the outer state once the exchange handed its
 * value back: its slot's value when it is named (cur >= 0), else the frame's. The fast and the
 * full path both end so. */
static inline void keep_outer_value(recap_tracker_h t, recap__frame_t *f, int cur, uint64_t seed,
                                    uint64_t offset)
{
    if (cur >= 0) {
        t->slots[cur]->e.seed = seed;
        t->slots[cur]->e.offset = offset;
    } else {
        f->seed = seed;
        f->offset = offset;
    }
}

/* The outer state's progress goes to its slot (a named outer) or to the frame (the default).
 * On failure (a framework's operation, the claim) nothing changed. */
static recap_status_t fork_value(recap_tracker_h t, recap__frame_t *f, int i,
                                 struct recap_tracker **holder_p)
{
    uint64_t seed = t->slots[i]->e.seed, offset = t->slots[i]->e.offset;
    recap_status_t st;

    if (i == t->current) {
        /* Its slot is stale; its progress is in the generator, which keeps drawing it. */
        st = recap__generator_get_value(t->gen, &seed, &offset);
        if (st == RECAP_OK)
            keep_outer_value(t, f, i, seed, offset);
        return st;
    }
    st = recap__generator_exchange_value(t->gen, claim_of(t), &seed, &offset, holder_p);
    if (st != RECAP_OK)
        return st;
    keep_outer_value(t, f, t->current, seed, offset);
    return RECAP_OK;
}

/* A reference to the slot's object for the generator to hold: a spare one when there is. */
static recap__genstate_t *lend(recap__slot_t *s)
{
    if (s->spare > 0)
        s->spare--;
    else
        recap__genstate_ref(s->obj);
    return s->obj;
}

/* Gives back a reference lend handed out and nobody used. */
static void unlend(recap__slot_t *s)
{
    s->spare++;
}

/* Takes over a reference to `obj` as the slot's object. */
static void keep_object(recap__slot_t *s, recap__genstate_t *obj)
{
    if (s->obj == obj) {
        s->spare++;
        return;
    }
    recap__slot_release(s);
    s->obj = obj;
}

/* What a fork of a graph-safe tracker keeps of the outer object the install handed back: the
 * frame holds it with the generator's reference, so the unfork can hand it back without
 * reference counting; the fast and the full path both end so. */
static inline void keep_outer_object(recap_tracker_h t, recap__frame_t *f, int cur,
                                     recap__genstate_t *old)
{
    f->saved = old;
    if (cur >= 0 && t->slots[cur]->obj != old) {
        /* Someone installed another object meanwhile: it is what the outer state is now. */
        recap__genstate_ref(old);
        keep_object(t->slots[cur], old);
    }
}

static recap_status_t fork_object(recap_tracker_h t, recap__frame_t *f, int i,
                                  struct recap_tracker **holder_p)
{
    recap__genstate_t *old;
    recap_status_t st = recap__generator_install_genstate(t->gen, claim_of(t), lend(t->slots[i]),
                                                          &old, holder_p);

    if (st != RECAP_OK) {
        unlend(t->slots[i]);
        return st;
    }
    keep_outer_object(t, f, t->current, old);
    return RECAP_OK;
}

static recap_status_t refuse_claim(const char *name, const struct recap_tracker *holder)
{
    return recap__fail(RECAP_ERR_STATE, "fork of \"" RECAP__NAME_FMT "\": tracker %p has a fork open on the "
                       "same generator; trackers sharing a generator cannot interleave forks "
                       "(its state would come back to the wrong one): unfork it first",
                       RECAP__NAME_ARGS(name), (const void *)holder);
}

/* The tracker's last fork closed: the generator is free for others (the holder's one store). */
static void release_generator(recap_tracker_h t)
{
    if (t->depth == 0)
        __atomic_store_n(&t->gen->forker, NULL, __ATOMIC_RELEASE);
}

/* fork_value's common case: 0 with nothing changed when the generator needs the full call. */
static inline int fork_value_fast(recap_tracker_h t, recap__frame_t *f, int i, int cur,
                                  struct recap_tracker *claim)
{
    uint64_t seed = t->slots[i]->e.seed, offset = t->slots[i]->e.offset;

    if (!recap__generator_try_exchange(t->gen, recap__tracker_holds_gen(t), claim, &seed,
                                       &offset))
        return 0;
    keep_outer_value(t, f, cur, seed, offset);
    return 1;
}

/* fork_object's common case, likewise. */
static inline int fork_object_fast(recap_tracker_h t, recap__frame_t *f, int i, int cur,
                                   struct recap_tracker *claim)
{
    recap__genstate_t *old, *s = lend(t->slots[i]);

    if (!recap__generator_try_install(t->gen, recap__tracker_holds_gen(t), claim, s, &old)) {
        unlend(t->slots[i]);
        return 0;
    }
    keep_outer_object(t, f, cur, old);
    return 1;
}

/* Under the tracker's lock: the fork of a state other than the current one, when the generator
 * takes the fast exchange; 0 with nothing changed otherwise (fork_locked then decides). */
static inline int fork_fast(recap_tracker_h t, const char *name, recap_fork_token_t *token_p)
{
    size_t depth = t->depth;
    int cur = t->current, i, done;
    recap__frame_t *f;

    /* A framework generator never takes the fast exchange: no lookup to repeat in fork_locked. */
    if (depth == t->frames_cap || (t->flags & RECAP_TRACKER_INFERENCE) || t->gen->fw != NULL)
        return 0;
    i = recap__tracker_find(t, name);
    if (i < 0 || i == cur)
        return 0;
    f = &t->frames[depth];
    if (t->flags & RECAP_TRACKER_GRAPH_SAFE)
        done = fork_object_fast(t, f, i, cur, depth == 0 ? t : NULL);
    else
        done = fork_value_fast(t, f, i, cur, depth == 0 ? t : NULL);
    if (!done)
        return 0;
    f->slot = i;
    f->outer = cur;
    f->token = t->next_token++;
    t->current = i;
    t->depth = depth + 1;
    *token_p = f->token;
    return 1;
}

/* The whole fork, under the tracker's lock, which it releases. */
static __attribute__((noinline)) recap_status_t fork_locked(recap_tracker_h tracker,
                                                            const char *name,
                                                            recap_fork_token_t *token_p)
{
    struct recap_tracker *holder = NULL;
    recap__frame_t *f;
    recap_status_t st;
    int i = -1;

    if (tracker->depth == tracker->frames_cap && grow_frames(tracker) != RECAP_OK) {
        recap__tracker_unlock(tracker);
        return recap__fail(RECAP_ERR_NO_MEMORY, "fork frames");
    }
    f = &tracker->frames[tracker->depth];
    if (!(tracker->flags & RECAP_TRACKER_INFERENCE)) {
        i = recap__tracker_find(tracker, name);
        if (i < 0) {
            recap__tracker_unlock(tracker);
            return recap__fail(RECAP_ERR_NOT_FOUND, "fork of \"" RECAP__NAME_FMT "\": no such state "
                               "was added", RECAP__NAME_ARGS(name));
        }
        if (tracker->flags & RECAP_TRACKER_GRAPH_SAFE)
            st = fork_object(tracker, f, i, &holder);
        else
            st = fork_value(tracker, f, i, &holder);
        if (st != RECAP_OK) {
            recap__tracker_unlock(tracker);
            return holder != NULL ? refuse_claim(name, holder) : st;
        }
    }
    f->slot = i;
    f->outer = tracker->current;
    f->token = tracker->next_token++;
    if (i >= 0)
        tracker->current = i;
    tracker->depth++;
    *token_p = f->token;
    recap__tracker_unlock(tracker);
    return RECAP_OK;
}

recap_status_t recap_tracker_fork(recap_tracker_h tracker, const char *name,
                                  recap_fork_token_t *token_p)
{
    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_ARG(name != NULL && token_p != NULL, "NULL argument");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_tracker_fork");
    recap__tracker_lock_bare(tracker);
    if (__builtin_expect(fork_fast(tracker, name, token_p), 1)) {
        recap__tracker_unlock_bare(tracker);
        return RECAP_OK;
    }
    recap__tracker_adopt(tracker);
    return fork_locked(tracker, name, token_p);
}

/* The fork's state's progress, which an unfork keeps in its slot (fast and full path). */
static inline void keep_value(recap__slot_t *s, uint64_t seed, uint64_t offset)
{
    s->e.seed = seed;
    s->e.offset = offset;
}

/* The value an unfork puts back: the outer state's slot when it is named, else the frame's. */
static inline void outer_value(const struct recap_tracker *t, const recap__frame_t *f,
                               uint64_t *seed, uint64_t *offset)
{
    if (f->outer >= 0) {
        *seed = t->slots[f->outer]->e.seed;
        *offset = t->slots[f->outer]->e.offset;
    } else {
        *seed = f->seed;
        *offset = f->offset;
    }
}

/* The advanced state goes to the fork's slot; the outer one is re-read after that, from its
 * slot when named, since a nested fork of the same name may have advanced it. */
static recap_status_t unfork_value(recap_tracker_h t, const recap__frame_t *f)
{
    recap__slot_t *s = t->slots[f->slot];
    uint64_t seed, offset;
    recap_status_t st;

    if (f->outer == f->slot) {
        st = recap__generator_get_value(t->gen, &seed, &offset);
        if (st == RECAP_OK)
            keep_value(s, seed, offset);
        return st;
    }
    outer_value(t, f, &seed, &offset);
    st = recap__generator_exchange_value(t->gen, NULL, &seed, &offset, NULL);
    if (st != RECAP_OK)
        return st;
    keep_value(s, seed, offset);
    return RECAP_OK;
}

/* The generator's reference to the advanced object goes to its slot, the frame's to the outer
 * state back to the generator. */
static recap_status_t unfork_object(recap_tracker_h t, const recap__frame_t *f)
{
    recap__slot_t *s = t->slots[f->slot];
    recap__genstate_t *old;
    recap_status_t st;

    if (f->outer == f->slot) {
        /* The same object stays installed; the frame's reference is the slot's again. */
        keep_object(s, f->saved);
    } else if (f->outer < 0 || t->slots[f->outer]->obj == f->saved) {
        st = recap__generator_install_genstate(t->gen, NULL, f->saved, &old, NULL);
        if (st != RECAP_OK)
            return st;
        keep_object(s, old);
    } else {
        st = recap__generator_install_genstate(t->gen, NULL, lend(t->slots[f->outer]),
                                                 &old, NULL);
        if (st != RECAP_OK) {
            unlend(t->slots[f->outer]);
            return st;
        }
        keep_object(s, old);
        recap__genstate_unref(f->saved);
    }
    return RECAP_OK;
}

/* Under the tracker's lock: the unfork of the innermost fork `token` names, of a state other than
 * its outer one, when the generator takes the fast exchange; 0 with nothing changed otherwise
 * (unfork_locked then decides). unfork_value and unfork_object's common cases. */
static inline int unfork_fast(recap_tracker_h t, recap_fork_token_t token)
{
    size_t depth = t->depth;
    const recap__frame_t *f;
    recap__genstate_t *old;
    recap__slot_t *s;
    uint64_t seed, offset;

    if (depth == 0 || t->gen->fw != NULL)
        return 0;
    f = &t->frames[depth - 1];
    if (f->token != token || f->slot < 0 || f->outer == f->slot)
        return 0;
    s = t->slots[f->slot];
    if (t->flags & RECAP_TRACKER_GRAPH_SAFE) {
        if ((f->outer >= 0 && t->slots[f->outer]->obj != f->saved) ||
            !recap__generator_try_install(t->gen, recap__tracker_holds_gen(t), NULL, f->saved,
                                          &old))
            return 0;
        keep_object(s, old);
    } else {
        outer_value(t, f, &seed, &offset);
        if (!recap__generator_try_exchange(t->gen, recap__tracker_holds_gen(t), NULL, &seed,
                                           &offset))
            return 0;
        keep_value(s, seed, offset);
    }
    t->current = f->outer;
    t->depth = depth - 1;
    release_generator(t);
    return 1;
}

/* The whole unfork, under the tracker's lock, which it releases. */
static __attribute__((noinline)) recap_status_t unfork_locked(recap_tracker_h tracker,
                                                              recap_fork_token_t token)
{
    const recap__frame_t *f;
    recap_status_t st = RECAP_OK;
    size_t depth;

    depth = tracker->depth;
    if (depth == 0 || tracker->frames[depth - 1].token != token) {
        recap__tracker_unlock(tracker);
        if (depth == 0)
            return recap__fail(RECAP_ERR_STATE, "unfork without an open fork");
        return recap__fail(RECAP_ERR_STATE, "unfork of token %llu, but the innermost open fork "
                           "is another one (forks end in reverse order)",
                           (unsigned long long)token);
    }
    f = &tracker->frames[depth - 1];
    if (f->slot >= 0) {
        if (tracker->flags & RECAP_TRACKER_GRAPH_SAFE)
            st = unfork_object(tracker, f);
        else
            st = unfork_value(tracker, f);
        if (st == RECAP_OK)
            tracker->current = f->outer;
    }
    /* A framework that failed to take the outer state back leaves the fork open: the caller
     * may retry, and nothing is lost. */
    if (st == RECAP_OK) {
        tracker->depth = depth - 1;
        if (f->slot >= 0)
            release_generator(tracker);
    }
    recap__tracker_unlock(tracker);
    return st;
}

recap_status_t recap_tracker_unfork(recap_tracker_h tracker, recap_fork_token_t token)
{
    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_tracker_unfork");
    recap__tracker_lock_bare(tracker);
    if (__builtin_expect(unfork_fast(tracker, token), 1)) {
        recap__tracker_unlock_bare(tracker);
        return RECAP_OK;
    }
    recap__tracker_adopt(tracker);
    return unfork_locked(tracker, token);
}
