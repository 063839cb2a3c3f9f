/* SPDX-License-Identifier: Apache-2.0 */
#include <stdlib.h>
#include <string.h>

#include "fake_framework.h"

#define MAX_FF 64

static ff_t *all[MAX_FF];

static ff_obj_t *obj_new(ff_t *f, uint64_t seed, uint64_t offset)
{
    ff_obj_t *o = calloc(1, sizeof(*o));

    if (o == NULL)
        abort();
    o->refs = 1;
    o->seed = seed;
    o->offset = offset;
    f->live++;
    return o;
}

static void obj_unref(ff_t *f, ff_obj_t *o)
{
    if (--o->refs == 0) {
        free(o);
        f->live--;
    }
}

/* Counts the call and says whether `op` is to fail now. */
static int failing(ff_t *f, const char *op)
{
    f->calls++;
    if (f->fail_op == NULL || strcmp(f->fail_op, op) != 0)
        return 0;
    if (f->fail_after > 0) {
        f->fail_after--;
        return 0;
    }
    f->fail_op = NULL;
    return 1;
}

static void enc(uint64_t seed, uint64_t offset, uint8_t b[RECAP_STATE_BYTES])
{
    int i;

    for (i = 0; i < 8; i++) {
        b[i] = (uint8_t)(seed >> (8 * i));
        b[8 + i] = (uint8_t)(offset >> (8 * i));
    }
}

static void dec(const uint8_t b[RECAP_STATE_BYTES], uint64_t *seed, uint64_t *offset)
{
    int i;

    *seed = *offset = 0;
    for (i = 7; i >= 0; i--) {
        *seed = *seed << 8 | b[i];
        *offset = *offset << 8 | b[8 + i];
    }
}

static recap_status_t get_state(void *fw, uint8_t state[RECAP_STATE_BYTES])
{
    ff_t *f = fw;

    if (f->reenter != NULL) {
        recap_fork_token_t tok;
        f->reenter_status = recap_tracker_fork(f->reenter, "a", &tok);
    }
    if (failing(f, "get_state"))
        return RECAP_ERR_CUDA;
    enc(f->current->seed, f->current->offset, state);
    return RECAP_OK;
}

/* Like torch.cuda.set_rng_state: the value goes into the current state object. */
static recap_status_t set_state(void *fw, const uint8_t state[RECAP_STATE_BYTES])
{
    ff_t *f = fw;
    uint64_t seed, offset;

    if (failing(f, "set_state"))
        return RECAP_ERR_CUDA;
    dec(state, &seed, &offset);
    if (offset % 4 != 0)
        return RECAP_ERR_MISALIGNED;
    f->current->seed = seed;
    f->current->offset = offset;
    return RECAP_OK;
}

static recap_status_t state_create(void *fw, uint64_t seed, void **obj_p)
{
    ff_t *f = fw;

    if (failing(f, "state_create"))
        return RECAP_ERR_NO_MEMORY;
    *obj_p = obj_new(f, seed, 0);
    return RECAP_OK;
}

static recap_status_t state_clone(void *fw, void *obj, void **clone_p)
{
    ff_t *f = fw;
    const ff_obj_t *o = obj;

    if (failing(f, "state_clone"))
        return RECAP_ERR_NO_MEMORY;
    *clone_p = obj_new(f, o->seed, o->offset);
    return RECAP_OK;
}

static recap_status_t state_install(void *fw, void *obj)
{
    ff_t *f = fw;
    ff_obj_t *o = obj;

    if (failing(f, "state_install"))
        return RECAP_ERR_CUDA;
    o->refs++;
    obj_unref(f, f->current);
    f->current = o;
    return RECAP_OK;
}

static recap_status_t state_current(void *fw, void **obj_p)
{
    ff_t *f = fw;

    if (failing(f, "state_current"))
        return RECAP_ERR_CUDA;
    *obj_p = f->current; /* lent, not a reference */
    return RECAP_OK;
}

static recap_status_t state_retain(void *fw, void *obj)
{
    ff_t *f = fw;

    if (failing(f, "state_retain"))
        return RECAP_ERR_CUDA;
    ((ff_obj_t *)obj)->refs++;
    return RECAP_OK;
}

static recap_status_t state_get(void *fw, void *obj, uint8_t state[RECAP_STATE_BYTES])
{
    ff_t *f = fw;
    const ff_obj_t *o = obj;

    if (failing(f, "state_get"))
        return RECAP_ERR_CUDA;
    enc(o->seed, o->offset, state);
    return RECAP_OK;
}

static recap_status_t state_set(void *fw, void *obj, const uint8_t state[RECAP_STATE_BYTES])
{
    ff_t *f = fw;
    ff_obj_t *o = obj;

    if (failing(f, "state_set"))
        return RECAP_ERR_CUDA;
    dec(state, &o->seed, &o->offset);
    return RECAP_OK;
}

static void state_release(void *fw, void *obj)
{
    ff_t *f = fw;

    f->calls++;
    obj_unref(f, obj);
}

static recap_status_t needs_registration(void *fw, int *needs_p)
{
    ff_t *f = fw;

    if (failing(f, "needs_registration"))
        return RECAP_ERR_CUDA;
    *needs_p = f->needs_registration;
    return RECAP_OK;
}

recap_framework_ops_t ff_ops(int graph_safe)
{
    recap_framework_ops_t o = {0};

    o.version = RECAP_FRAMEWORK_OPS_VERSION;
    o.name = "fake framework";
    o.get_state = get_state;
    o.set_state = set_state;
    o.needs_registration = needs_registration;
    if (graph_safe) {
        o.state_create = state_create;
        o.state_clone = state_clone;
        o.state_install = state_install;
        o.state_current = state_current;
        o.state_get = state_get;
        o.state_set = state_set;
        o.state_release = state_release;
        o.state_retain = state_retain;
    }
    return o;
}

ff_t *ff_new(int device, uint64_t seed, int graph_safe)
{
    recap_framework_ops_t ops = ff_ops(graph_safe);
    ff_t *f = calloc(1, sizeof(*f));
    int i;

    if (f == NULL)
        abort();
    f->current = obj_new(f, seed, 0);
    if (recap_generator_create_framework(&ops, f, device, &f->gen) != RECAP_OK)
        abort();
    for (i = 0; i < MAX_FF && all[i] != NULL; i++)
        ;
    if (i == MAX_FF)
        abort();
    all[i] = f;
    return f;
}

int ff_free(ff_t *f)
{
    int i, left;

    for (i = 0; i < MAX_FF; i++)
        if (all[i] == f)
            all[i] = NULL;
    if (recap_generator_destroy(f->gen) != RECAP_OK)
        abort();
    obj_unref(f, f->current);
    left = f->live;
    free(f);
    return left;
}

ff_t *ff_of(recap_generator_h gen)
{
    int i;

    for (i = 0; i < MAX_FF; i++)
        if (all[i] != NULL && all[i]->gen == gen)
            return all[i];
    return NULL;
}

void ff_draw(ff_t *f, uint32_t *w, size_t n)
{
    size_t t;
    int k;

    for (t = 0; t < n / 4; t++) {
        recap_philox_stream_t s;

        recap_philox_init(f->current->seed, t, f->current->offset, &s);
        for (k = 0; k < 4; k++)
            w[4 * t + k] = recap_philox_next(&s);
    }
    f->current->offset += 4;
}

void ff_current_value(const ff_t *f, uint64_t *seed, uint64_t *offset)
{
    *seed = f->current->seed;
    *offset = f->current->offset;
}
