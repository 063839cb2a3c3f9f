/* SPDX-License-Identifier: Apache-2.0 */
/* Per-rank seeding: Megatron's model_parallel_cuda_manual_seed. */
#include "config.h"

#include <string.h>

#include "base/error.h"
#include "base/handle.h"
#include "tracker/tracker.h"

#define MAX_SEEDED 5

static recap_status_t check_rank(const char *what, int rank, int size)
{
    RECAP_CHECK_ARG(size >= 1, "%s size %d: sizes are at least 1", what, size);
    RECAP_CHECK_ARG(rank >= 0 && rank < size, "%s rank %d is outside 0..%d", what, rank,
                    size - 1);
    return RECAP_OK;
}

static recap_status_t check_ranks(const recap_parallel_ranks_t *r)
{
    recap_status_t st = check_rank("tensor-parallel", r->tp_rank, r->tp_size);

    if (st == RECAP_OK)
        st = check_rank("expert-parallel", r->ep_rank, r->ep_size);
    if (st == RECAP_OK)
        st = check_rank("expert-tensor-parallel", r->etp_rank, r->etp_size);
    if (st == RECAP_OK)
        st = check_rank("GTP remat", r->gtp_remat_rank, r->gtp_remat_size);
    if (st == RECAP_OK)
        st = check_rank("expert GTP remat", r->egtp_remat_rank, r->egtp_remat_size);
    return st;
}

static void put(recap__entry_t *e, size_t *n, const char *name, uint64_t seed)
{
    recap__entry_t *x = &e[(*n)++];

    memset(x, 0, sizeof(*x));
    x->len = (uint32_t)strlen(name);
    memcpy(x->name, name, x->len);
    x->seed = seed;
}

/* seed > 0 and ranks < 2^31 keep every sum below 2^64. */
static size_t derive(uint64_t seed, const recap_parallel_ranks_t *r, recap__entry_t *e)
{
    uint64_t tp_seed = seed + 2718 + (uint64_t)r->tp_rank;
    uint64_t ep_seed = seed + 1024 + 100 * (uint64_t)r->ep_rank + (uint64_t)r->etp_rank;
    size_t n = 0;

    put(e, &n, RECAP_RNG_DATA_PARALLEL, seed);
    put(e, &n, RECAP_RNG_MODEL_PARALLEL, tp_seed);
    put(e, &n, RECAP_RNG_EXPERT_PARALLEL, ep_seed);
    if (r->gtp_remat_size > 1)
        put(e, &n, RECAP_RNG_GTP_REMAT, tp_seed + 65536 * (1 + (uint64_t)r->gtp_remat_rank));
    if (r->egtp_remat_size > 1)
        put(e, &n, RECAP_RNG_EGTP_REMAT,
            ep_seed + 32768 + 65536 * (1 + (uint64_t)r->egtp_remat_rank));
    return n;
}

/* Megatron would fail half-way through its adds; we refuse before touching the tracker. */
static recap_status_t check_distinct(const recap__entry_t *e, size_t n)
{
    size_t i, j;

    for (i = 0; i < n; i++)
        for (j = i + 1; j < n; j++)
            if (e[i].seed == e[j].seed)
                return recap__fail(RECAP_ERR_INVALID_ARG, "these ranks give %s and %s the same "
                                   "seed %llu", e[i].name, e[j].name,
                                   (unsigned long long)e[i].seed);
    return RECAP_OK;
}

typedef struct {
    uint64_t seed;
    const recap__entry_t *e;
    size_t n;
} seeded_t;

/* What reset + manual_seed + the adds leave besides the map. */
static void record_seeds(recap_tracker_h t, void *arg)
{
    const seeded_t *s = arg;
    size_t i;

    /* seeds_cap and the seed index's room start at RECAP__INITIAL_CAP >= MAX_SEEDED. */
    recap__index_clear(&t->seed_index);
    for (i = 0; i < s->n; i++) {
        t->seeds[i] = s->e[i].seed;
        recap__index_put(&t->seed_index, recap__seed_hash(s->e[i].seed), i);
    }
    t->nseeds = s->n;
    t->initialized = s->n > 0;
}

recap_status_t recap_tracker_seed_parallel(recap_tracker_h tracker, int64_t seed,
                                           const recap_parallel_ranks_t *ranks)
{
    recap__entry_t e[MAX_SEEDED];
    recap__gen_values_t gv = {0};
    recap_status_t st;
    seeded_t s;
    size_t n;

    RECAP_CHECK_HANDLE(tracker, RECAP_MAGIC_TRACKER, "tracker");
    RECAP_CHECK_ARG(ranks != NULL, "NULL argument");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_tracker_seed_parallel");
    RECAP_CHECK_ARG(seed > 0, "seed %lld: seeds must be > 0", (long long)seed);
    st = check_ranks(ranks);
    if (st != RECAP_OK)
        return st;
    n = derive((uint64_t)seed, ranks, e);
    st = check_distinct(e, n);
    if (st != RECAP_OK)
        return st;
    /* An inference tracker's adds do nothing: seeding only resets it and seeds the generator. */
    if (tracker->flags & RECAP_TRACKER_INFERENCE)
        n = 0;
    s.seed = (uint64_t)seed;
    s.e = e;
    s.n = n;
    /* The generator is seeded in the same all-or-nothing step as the map. */
    gv.set_gen = 1;
    gv.gen_seed = (uint64_t)seed;
    return recap__tracker_replace(tracker, e, n, &gv, record_seeds, &s, "seeding (which resets)");
}
