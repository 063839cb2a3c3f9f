/* SPDX-License-Identifier: Apache-2.0 */
/* Operations on trackers: creation, the default tracker, queries, add, fork and unfork, seeding,
 * states. */
#include "tests/fuzz/fuzz.h"

void op_tracker_create(input_t *in)
{
    static const uint32_t flags[] = {0, RECAP_TRACKER_GRAPH_SAFE, RECAP_TRACKER_INFERENCE,
                                     RECAP_TRACKER_GRAPH_SAFE | RECAP_TRACKER_INFERENCE, 0x80};
    static const int devices[] = {RECAP_DEVICE_HOST, 0, 3, -9};
    recap_tracker_params_t p;
    recap_tracker_h t = (recap_tracker_h)0x1;
    int slot = pick(in, DEFAULT_SLOT), g = -1, hg = -1;

    if (w.trk[slot].h != NULL)
        return;
    memset(&p, 0, sizeof(p));
    p.flags = flags[u8(in) % 5];
    p.device = devices[u8(in) % 4];
    if (u8(in) % 2) {
        g = pick(in, NGEN);
        if (w.gen[g].h == NULL)
            g = -1;
    }
    if (u8(in) % 3 == 0) {
        hg = pick(in, NGEN);
        if (w.gen[hg].h == NULL)
            hg = -1;
    }
    p.generator = gen_of(g);
    p.host_generator = gen_of(hg);
    if (CALL(recap_tracker_create(&p, &t)) != RECAP_OK) {
        REQUIRE(t == (recap_tracker_h)0x1);
        return;
    }
    w.trk[slot].h = t;
    w.trk[slot].inference = (p.flags & RECAP_TRACKER_INFERENCE) != 0;
    w.trk[slot].gen = g;
    w.trk[slot].host_gen = hg;
    w.trk[slot].nforks = 0;
    if (g >= 0)
        w.gen[g].users++;
    if (hg >= 0)
        w.gen[hg].users++;
}

static void trk_forget(int slot)
{
    if (w.trk[slot].gen >= 0)
        w.gen[w.trk[slot].gen].users--;
    if (w.trk[slot].host_gen >= 0)
        w.gen[w.trk[slot].host_gen].users--;
    memset(&w.trk[slot], 0, sizeof(w.trk[slot]));
}

void op_tracker_destroy(input_t *in)
{
    int slot = pick(in, DEFAULT_SLOT);
    recap_status_t st;

    if (w.trk[slot].h == NULL || w.trk[slot].args > 0) /* functions draw from it */
        return;
    st = CALL(recap_tracker_destroy(w.trk[slot].h));
    /* Refused exactly while forks are open or regions use it. */
    REQUIRE((st == RECAP_OK) == (w.trk[slot].nforks == 0 && w.trk[slot].regions == 0));
    if (st == RECAP_OK)
        trk_forget(slot);
}

/* The default tracker: initialized with params of no generator of ours (it outlives the input),
 * replaced with force_reset, or fetched. */
void op_default_tracker(input_t *in)
{
    static const uint32_t flags[] = {0, RECAP_TRACKER_GRAPH_SAFE, RECAP_TRACKER_INFERENCE};
    recap_tracker_params_t p;
    recap_tracker_h t = (recap_tracker_h)0x1;
    trk_slot_t *d = &w.trk[DEFAULT_SLOT];
    int force = u8(in) % 4 == 0;

    memset(&p, 0, sizeof(p));
    p.flags = flags[u8(in) % 3];
    p.device = u8(in) % 2 ? RECAP_DEVICE_HOST : 0;
    if (u8(in) % 2) {
        if (CALL(recap_default_tracker_get(&t)) != RECAP_OK)
            return;
    } else if (CALL(recap_default_tracker_initialize(&p, force, &t)) != RECAP_OK) {
        REQUIRE(t == (recap_tracker_h)0x1);
        return;
    }
    if (d->h != t) { /* a new one: the old handle (if any) was destroyed with no fork open */
        REQUIRE(d->h == NULL || d->nforks == 0);
        memset(d, 0, sizeof(*d));
        d->h = t;
        d->inference = -1;
        d->gen = d->host_gen = -1;
    }
}

trk_slot_t *any_tracker(input_t *in)
{
    trk_slot_t *t = &w.trk[pick(in, NTRK)];

    return t->h != NULL ? t : NULL;
}

void op_tracker_query(input_t *in)
{
    trk_slot_t *t = any_tracker(in);
    recap_generator_h g;
    const char *cur;
    int v;

    if (t == NULL)
        return;
    switch (u8(in) % 4) {
    case 0:
        REQUIRE(CALL(recap_tracker_is_initialized(t->h, &v)) == RECAP_OK && (v == 0 || v == 1));
        break;
    case 1:
        REQUIRE(CALL(recap_tracker_is_graph_safe(t->h, &v)) == RECAP_OK && (v == 0 || v == 1));
        break;
    case 2:
        REQUIRE(CALL(recap_tracker_current_name(t->h, &cur)) == RECAP_OK && cur != NULL);
        REQUIRE(strlen(cur) <= RECAP_NAME_MAX);
        break;
    default:
        REQUIRE(CALL(recap_tracker_generator(t->h, &g)) == RECAP_OK && g != NULL);
        break;
    }
}

static size_t states_count_of(recap_tracker_h t)
{
    recap_states_h s;
    size_t n = 0;

    REQUIRE(CALL(recap_tracker_get_states(t, &s)) == RECAP_OK);
    REQUIRE(CALL(recap_states_count(s, &n)) == RECAP_OK);
    REQUIRE(CALL(recap_states_free(s)) == RECAP_OK);
    return n;
}

void op_tracker_add(input_t *in)
{
    trk_slot_t *t = any_tracker(in);
    char buf[160];
    const char *nm = name(in, buf, sizeof(buf));
    uint64_t seed = num(in);
    size_t before;

    if (t == NULL)
        return;
    before = states_count_of(t->h);
    if (CALL(recap_tracker_add(t->h, nm, seed)) != RECAP_OK)
        REQUIRE(states_count_of(t->h) == before); /* a failed add records nothing */
}

void op_tracker_fork(input_t *in)
{
    trk_slot_t *t = any_tracker(in);
    recap_fork_token_t tok = 0x5a5a;
    char buf[160];
    const char *nm = name(in, buf, sizeof(buf));

    if (t == NULL || t->nforks == NFORKS)
        return;
    if (CALL(recap_tracker_fork(t->h, nm, &tok)) == RECAP_OK)
        t->forks[t->nforks++] = tok;
    else
        REQUIRE(tok == 0x5a5a);
}

void op_tracker_unfork(input_t *in)
{
    trk_slot_t *t = any_tracker(in);
    recap_fork_token_t tok;
    recap_status_t st;
    uint8_t k = u8(in);

    if (t == NULL)
        return;
    /* The innermost token, an outer one (refused), or any number (refused unless it is the
     * innermost). */
    if (t->nforks > 0 && k < 160)
        tok = t->forks[t->nforks - 1];
    else if (t->nforks > 0 && k < 220)
        tok = t->forks[k % t->nforks];
    else
        tok = num(in);
    st = CALL(recap_tracker_unfork(t->h, tok));
    REQUIRE((st == RECAP_OK) == (t->nforks > 0 && tok == t->forks[t->nforks - 1]));
    if (st == RECAP_OK)
        t->nforks--;
}

void op_tracker_reset_or_seed(input_t *in)
{
    trk_slot_t *t = any_tracker(in);
    recap_parallel_ranks_t r;
    int64_t seed;
    int *f = (int *)&r;
    size_t i;

    if (t == NULL)
        return;
    if (u8(in) % 3 == 0) {
        REQUIRE((CALL(recap_tracker_reset(t->h)) == RECAP_OK) == (t->nforks == 0));
        return;
    }
    seed = (int64_t)(num(in) - (u8(in) % 8 == 0 ? UINT64_C(1) << 20 : 0)); /* <= 0 too */
    for (i = 0; i < sizeof(r) / sizeof(int); i++) {
        uint8_t k = u8(in);
        f[i] = k < 240 ? k % 4 + (i % 2) : (int)(int8_t)u8(in); /* sizes odd slots: mostly >= 1 */
    }
    CALL(recap_tracker_seed_parallel(t->h, seed, u8(in) % 16 ? &r : NULL));
}

void op_states(input_t *in)
{
    int s = pick(in, NSTATES);
    trk_slot_t *t;
    recap_states_h copy;
    uint8_t st[RECAP_STATE_BYTES];
    const char *nm;
    char buf[160];
    size_t n;

    switch (u8(in) % 6) {
    case 0:
        t = any_tracker(in);
        if (t == NULL || w.states[s] != NULL)
            return;
        REQUIRE(CALL(recap_tracker_get_states(t->h, &w.states[s])) == RECAP_OK);
        break;
    case 1:
        t = any_tracker(in);
        if (t == NULL || w.states[s] == NULL)
            return;
        /* Refused while forks are open (an inference tracker ignores it). */
        if (CALL(recap_tracker_set_states(t->h, w.states[s])) == RECAP_OK)
            REQUIRE(t->nforks == 0 || t->inference != 0);
        else
            REQUIRE(t->nforks > 0);
        break;
    case 2:
        if (w.states[s] == NULL)
            return;
        REQUIRE(CALL(recap_states_free(w.states[s])) == RECAP_OK);
        w.states[s] = NULL;
        break;
    case 3:
        if (w.states[s] == NULL)
            return;
        REQUIRE(CALL(recap_states_copy(w.states[s], &copy)) == RECAP_OK);
        REQUIRE(CALL(recap_states_free(copy)) == RECAP_OK);
        break;
    case 4:
        if (w.states[s] == NULL)
            return;
        REQUIRE(CALL(recap_states_count(w.states[s], &n)) == RECAP_OK);
        nm = (const char *)0x1;
        if (CALL(recap_states_name(w.states[s], num(in), &nm)) != RECAP_OK)
            REQUIRE(nm == (const char *)0x1);
        else
            REQUIRE(nm != NULL && strlen(nm) <= RECAP_NAME_MAX);
        break;
    default:
        if (w.states[s] == NULL)
            return;
        if (CALL(recap_states_lookup(w.states[s], name(in, buf, sizeof(buf)), st)) == RECAP_OK)
            REQUIRE((st[8] & 3) == 0); /* stored offsets are multiples of 4 */
        break;
    }
}

void op_convert(input_t *in)
{
    trk_slot_t *t = any_tracker(in);
    uint8_t st[RECAP_STATE_BYTES], back[RECAP_STATE_BYTES];
    recap_generator_h g = (recap_generator_h)0x1;
    int slot = free_gen_slot(), device;
    size_t i;

    if (t == NULL || slot < 0)
        return;
    for (i = 0; i < sizeof(st); i++)
        st[i] = u8(in);
    if (CALL(recap_state_to_graph_safe(t->h, st, &g)) != RECAP_OK) {
        REQUIRE(g == (recap_generator_h)0x1);
        return;
    }
    REQUIRE(CALL(recap_generator_device(g, &device)) == RECAP_OK);
    if (CALL(recap_state_from_graph_safe(g, back)) == RECAP_OK)
        REQUIRE(memcmp(st, back, sizeof(st)) == 0);
    w.gen[slot].h = g;
    w.gen[slot].device = device;
    w.gen[slot].users = 0;
}
