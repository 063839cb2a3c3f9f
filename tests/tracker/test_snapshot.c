/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-state snapshots: take/restore, and their serialized form for training checkpoints. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define NWORDS 8
#define MAX_STATES 8
#define STEP_WORDS ((2 + MAX_STATES) * NWORDS)

static uint32_t mode_flags(int i)
{
    return i ? RECAP_TRACKER_GRAPH_SAFE : 0;
}

/* A tracker with a host generator, seeded as a rank of a parallel job would be. */
typedef struct {
    recap_tracker_h t;
    recap_generator_h host;
} rig_t;

static rig_t rig_new(uint32_t flags, int64_t seed)
{
    recap_tracker_params_t p = {.flags = flags, .device = RECAP_DEVICE_HOST};
    recap_parallel_ranks_t r = {1, 2, 0, 1, 0, 1, 1, 2, 0, 2};
    rig_t rig;

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &rig.host));
    ck_assert_ok(recap_generator_manual_seed(rig.host, (uint64_t)seed ^ 0x5555));
    p.host_generator = rig.host;
    ck_assert_ok(recap_tracker_create(&p, &rig.t));
    ck_assert_ok(recap_tracker_seed_parallel(rig.t, seed, &r));
    return rig;
}

static void rig_free(rig_t *rig)
{
    ck_assert_ok(recap_tracker_destroy(rig->t));
    ck_assert_ok(recap_generator_destroy(rig->host));
}

/* What a training step draws: the host generator, the current state, then every named state. */
static void step(rig_t *rig, uint32_t w[STEP_WORDS])
{
    recap_generator_h g;
    recap_states_h s;
    const char *name;
    size_t i, n;

    memset(w, 0, STEP_WORDS * sizeof(*w));
    ck_assert_ok(recap_generator_fill_u32(rig->host, NULL, w, NWORDS));
    ck_assert_ok(recap_tracker_generator(rig->t, &g));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, w + NWORDS, NWORDS));
    ck_assert_ok(recap_tracker_get_states(rig->t, &s));
    ck_assert_ok(recap_states_count(s, &n));
    ck_assert_uint_le(n, MAX_STATES);
    for (i = 0; i < n; i++) {
        ck_assert_ok(recap_states_name(s, i, &name));
        tu_fork_draw(rig->t, name, w + (2 + i) * NWORDS, NWORDS);
    }
    ck_assert_ok(recap_states_free(s));
}

static void steps(rig_t *rig, int k)
{
    uint32_t w[STEP_WORDS];

    while (k-- > 0)
        step(rig, w);
}

/* Everything a snapshot covers, read through the ABI, to compare "before" and "after". */
typedef struct {
    uint8_t host[RECAP_STATE_BYTES], gen[RECAP_STATE_BYTES];
    recap_states_h states;
} seen_t;

static seen_t observe(rig_t *rig)
{
    recap_generator_h g;
    seen_t s;

    ck_assert_ok(recap_generator_get_state(rig->host, s.host));
    ck_assert_ok(recap_tracker_generator(rig->t, &g));
    ck_assert_ok(recap_generator_get_state(g, s.gen));
    ck_assert_ok(recap_tracker_get_states(rig->t, &s.states));
    return s;
}

static void assert_seen_equal(seen_t *a, seen_t *b)
{
    ck_assert_mem_eq(a->host, b->host, RECAP_STATE_BYTES);
    ck_assert_mem_eq(a->gen, b->gen, RECAP_STATE_BYTES);
    tu_assert_states_equal(a->states, b->states);
    recap_states_free(a->states);
    recap_states_free(b->states);
}

START_TEST(restore_replays_the_draws_made_after_take)
{
    rig_t rig = rig_new(mode_flags(_i), 1 + (int64_t)tu_rand_below(1ULL << 40));
    uint32_t first[STEP_WORDS], again[STEP_WORDS];
    recap_snapshot_h snap;
    seen_t at_take, after;

    steps(&rig, (int)tu_rand_below(4));
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_snapshot_take(rig.t, snap));
    at_take = observe(&rig);
    step(&rig, first);
    ck_assert_ok(recap_snapshot_restore(rig.t, snap));
    after = observe(&rig);
    assert_seen_equal(&at_take, &after);
    step(&rig, again);
    ck_assert_mem_eq(first, again, sizeof(first));
    /* The same snapshot restores again (its arrays are reused, not consumed). */
    ck_assert_ok(recap_snapshot_take(rig.t, snap));
    step(&rig, first);
    ck_assert_ok(recap_snapshot_restore(rig.t, snap));
    step(&rig, again);
    ck_assert_mem_eq(first, again, sizeof(first));
    ck_assert_ok(recap_snapshot_destroy(snap));
    rig_free(&rig);
}
END_TEST

START_TEST(restore_inside_a_fork_replays_the_draws)
{
    rig_t rig = rig_new(mode_flags(_i), 99), twin = rig_new(mode_flags(_i), 99);
    uint32_t first[STEP_WORDS], again[STEP_WORDS];
    recap_fork_token_t tok, tok2;
    recap_snapshot_h snap;
    const char *name;

    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_tracker_fork(rig.t, RECAP_RNG_MODEL_PARALLEL, &tok));
    ck_assert_ok(recap_tracker_fork(twin.t, RECAP_RNG_MODEL_PARALLEL, &tok2));
    step(&rig, first);
    step(&twin, first);
    ck_assert_ok(recap_snapshot_take(rig.t, snap));
    step(&rig, first);
    ck_assert_ok(recap_snapshot_restore(rig.t, snap));
    ck_assert_ok(recap_tracker_current_name(rig.t, &name));
    ck_assert_str_eq(name, RECAP_RNG_MODEL_PARALLEL);
    step(&rig, again);
    ck_assert_mem_eq(first, again, sizeof(first));
    /* And the fork ends as if the restored stretch had been drawn once. */
    step(&twin, again);
    ck_assert_ok(recap_tracker_unfork(rig.t, tok));
    ck_assert_ok(recap_tracker_unfork(twin.t, tok2));
    step(&rig, first);
    step(&twin, again);
    ck_assert_mem_eq(first, again, sizeof(first));
    ck_assert_ok(recap_snapshot_destroy(snap));
    rig_free(&rig);
    rig_free(&twin);
}
END_TEST

static void gen_draw(rig_t *rig, uint32_t *w, size_t n)
{
    recap_generator_h g;

    ck_assert_ok(recap_tracker_generator(rig->t, &g));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, w, n));
}

/* A snapshot taken outside forks, restored inside fork(x) (a recompute inside a fork): as
 * Megatron's module, the generator draws the snapshot's generator state, a nested fork(x) draws
 * x's restored state, and the fork's end stores what the generator drew into x and puts the
 * pre-fork default back. The twin is the oracle: the same history with the snapshot's states
 * drawn outside forks. A graph-safe tracker refuses (its generator holds x's object) and changes
 * nothing. */
START_TEST(restore_inside_another_fork_keeps_generator_and_state_apart)
{
    int64_t seed = 1 + (int64_t)tu_rand_below(1ULL << 40);
    rig_t rig = rig_new(mode_flags(_i), seed), twin = rig_new(mode_flags(_i), seed);
    uint32_t a[NWORDS], b[NWORDS];
    uint8_t before_fork[RECAP_STATE_BYTES], now[RECAP_STATE_BYTES];
    recap_fork_token_t tok;
    recap_generator_h g;
    recap_snapshot_h snap;
    const char *x = tu_rand_below(2) ? RECAP_RNG_MODEL_PARALLEL : RECAP_RNG_EXPERT_PARALLEL;
    const char *name;
    int k = (int)tu_rand_below(3);

    steps(&rig, k);
    steps(&twin, k);
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_snapshot_take(rig.t, snap));
    gen_draw(&rig, a, 1 + tu_rand_below(NWORDS)); /* the default moves on before the fork */
    ck_assert_ok(recap_tracker_generator(rig.t, &g));
    ck_assert_ok(recap_generator_get_state(g, before_fork));
    ck_assert_ok(recap_tracker_fork(rig.t, x, &tok));
    tu_fork_draw(rig.t, x, a, NWORDS); /* a nested fork of x: x's progress */
    gen_draw(&rig, a, NWORDS);
    if (_i) {
        seen_t s0 = observe(&rig), s1;

        ck_assert_status(recap_snapshot_restore(rig.t, snap), RECAP_ERR_STATE);
        ck_assert_msg(strstr(recap_last_error(), "outside the fork") != NULL, "%s",
                      recap_last_error());
        s1 = observe(&rig);
        assert_seen_equal(&s0, &s1);
        ck_assert_ok(recap_tracker_unfork(rig.t, tok));
        goto out;
    }
    ck_assert_ok(recap_snapshot_restore(rig.t, snap));
    ck_assert_ok(recap_tracker_current_name(rig.t, &name));
    ck_assert_str_eq(name, RECAP_RNG_DEFAULT);
    gen_draw(&rig, a, NWORDS); /* the generator: the snapshot's generator state */
    gen_draw(&twin, b, NWORDS);
    ck_assert_mem_eq(a, b, sizeof(a));
    tu_fork_draw(rig.t, x, a, NWORDS); /* a nested fork of x: x's restored state */
    tu_fork_draw(twin.t, x, b, NWORDS);
    ck_assert_mem_eq(a, b, sizeof(a));
    gen_draw(&rig, a, NWORDS); /* and the generator's, put back after it */
    gen_draw(&twin, b, NWORDS);
    ck_assert_mem_eq(a, b, sizeof(a));
    ck_assert_ok(recap_tracker_unfork(rig.t, tok));
    ck_assert_ok(recap_tracker_current_name(rig.t, &name));
    ck_assert_str_eq(name, RECAP_RNG_DEFAULT);
    ck_assert_ok(recap_generator_get_state(g, now)); /* the pre-fork default is back */
    ck_assert_mem_eq(now, before_fork, sizeof(now));
    tu_fork_draw(rig.t, x, a, NWORDS); /* x took what the generator drew inside the fork */
    gen_draw(&twin, b, NWORDS);
    ck_assert_mem_eq(a, b, sizeof(a));
out:
    ck_assert_ok(recap_snapshot_destroy(snap));
    rig_free(&rig);
    rig_free(&twin);
}
END_TEST

START_TEST(restore_of_other_names_replaces_the_map)
{
    recap_tracker_params_t p = {.flags = mode_flags(_i), .device = RECAP_DEVICE_HOST};
    rig_t rig = rig_new(mode_flags(_i), 5);
    uint8_t st[RECAP_STATE_BYTES];
    recap_snapshot_h snap;
    recap_tracker_h other;
    recap_fork_token_t tok;
    recap_states_h s;
    seen_t at_take, after;

    p.host_generator = rig.host;
    ck_assert_ok(recap_tracker_create(&p, &other));
    ck_assert_ok(recap_tracker_add(other, "x", 1));
    ck_assert_ok(recap_tracker_add(other, "y", 2));
    ck_assert_ok(recap_snapshot_create(&snap));
    steps(&rig, 2);
    ck_assert_ok(recap_snapshot_take(rig.t, snap));
    ck_assert_ok(recap_snapshot_restore(other, snap));
    at_take = observe(&rig);
    ck_assert_ok(recap_tracker_destroy(rig.t));
    rig.t = other;
    after = observe(&rig);
    assert_seen_equal(&at_take, &after);
    ck_assert_ok(recap_tracker_get_states(other, &s));
    ck_assert_status(recap_states_lookup(s, "x", st), RECAP_ERR_NOT_FOUND);
    ck_assert_ok(recap_states_free(s));
    ck_assert_status(recap_tracker_fork(other, "x", &tok), RECAP_ERR_NOT_FOUND);
    ck_assert_ok(recap_tracker_fork(other, RECAP_RNG_GTP_REMAT, &tok));
    ck_assert_ok(recap_tracker_unfork(other, tok));
    ck_assert_ok(recap_snapshot_destroy(snap));
    recap_tracker_destroy(other);
    recap_generator_destroy(rig.host);
}
END_TEST

START_TEST(restore_of_other_names_with_a_fork_open_is_rejected)
{
    rig_t rig = rig_new(mode_flags(_i), 5), other = rig_new(mode_flags(_i), 6);
    recap_snapshot_h snap;
    recap_fork_token_t tok;
    seen_t before, after;

    ck_assert_ok(recap_tracker_add(other.t, "extra", 12345));
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_snapshot_take(other.t, snap));
    ck_assert_ok(recap_tracker_fork(rig.t, RECAP_RNG_DATA_PARALLEL, &tok));
    before = observe(&rig);
    ck_assert_status(recap_snapshot_restore(rig.t, snap), RECAP_ERR_STATE);
    after = observe(&rig);
    assert_seen_equal(&before, &after);
    ck_assert_ok(recap_tracker_unfork(rig.t, tok));
    ck_assert_ok(recap_snapshot_restore(rig.t, snap));
    ck_assert_ok(recap_snapshot_destroy(snap));
    rig_free(&rig);
    rig_free(&other);
}
END_TEST

START_TEST(restore_drops_states_added_after_take)
{
    rig_t rig = rig_new(mode_flags(_i), 8);
    recap_snapshot_h snap;
    seen_t at_take, after;
    uint32_t w[NWORDS];

    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_snapshot_take(rig.t, snap));
    at_take = observe(&rig);
    ck_assert_ok(recap_tracker_add(rig.t, "late", 424242));
    tu_fork_draw(rig.t, "late", w, NWORDS);
    ck_assert_ok(recap_snapshot_restore(rig.t, snap));
    after = observe(&rig);
    assert_seen_equal(&at_take, &after);
    /* The name's seed stays used (restoring, like set_states, does not touch used seeds). */
    ck_assert_status(recap_tracker_add(rig.t, "late", 424242), RECAP_ERR_DUPLICATE_SEED);
    ck_assert_ok(recap_tracker_add(rig.t, "late", 424243));
    ck_assert_ok(recap_snapshot_destroy(snap));
    rig_free(&rig);
}
END_TEST

/* The snapshot caches that its names are the tracker's; an add must end that. */
START_TEST(take_after_add_records_the_new_name)
{
    recap_tracker_params_t p = {.flags = mode_flags(_i), .device = RECAP_DEVICE_HOST};
    rig_t rig = rig_new(mode_flags(_i), 8), copy;
    recap_snapshot_h snap;
    seen_t a, b;

    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_snapshot_take(rig.t, snap));
    ck_assert_ok(recap_snapshot_restore(rig.t, snap));
    ck_assert_ok(recap_tracker_add(rig.t, "late", 424242));
    ck_assert_ok(recap_snapshot_take(rig.t, snap));
    p.host_generator = rig.host;
    copy.host = rig.host;
    ck_assert_ok(recap_tracker_create(&p, &copy.t));
    ck_assert_ok(recap_snapshot_restore(copy.t, snap));
    a = observe(&rig);
    b = observe(&copy);
    assert_seen_equal(&a, &b);
    recap_tracker_destroy(copy.t);
    ck_assert_ok(recap_snapshot_destroy(snap));
    rig_free(&rig);
}
END_TEST

START_TEST(restore_brings_back_the_initialized_flag)
{
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_snapshot_h snap;
    recap_tracker_h t;
    int init = 0;

    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_snapshot_take(t, snap));
    ck_assert_ok(recap_tracker_add(t, "a", 1));
    ck_assert_ok(recap_tracker_is_initialized(t, &init));
    ck_assert_int_eq(init, 1);
    ck_assert_ok(recap_snapshot_restore(t, snap));
    ck_assert_ok(recap_tracker_is_initialized(t, &init));
    ck_assert_int_eq(init, 0);
    ck_assert_ok(recap_snapshot_destroy(snap));
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(restore_of_an_unusable_snapshot_is_rejected)
{
    rig_t rig = rig_new(0, 3);
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_snapshot_h snap;
    recap_tracker_h nohost;
    seen_t before, after;

    ck_assert_ok(recap_snapshot_create(&snap));
    before = observe(&rig);
    ck_assert_status(recap_snapshot_restore(rig.t, snap), RECAP_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "never taken"));
    ck_assert_ok(recap_tracker_create(&p, &nohost));
    ck_assert_ok(recap_snapshot_take(nohost, snap));
    ck_assert_status(recap_snapshot_restore(rig.t, snap), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "host generator"));
    after = observe(&rig);
    assert_seen_equal(&before, &after);
    ck_assert_ok(recap_snapshot_take(rig.t, snap));
    ck_assert_status(recap_snapshot_restore(nohost, snap), RECAP_ERR_INVALID_ARG);
    recap_tracker_destroy(nohost);
    ck_assert_ok(recap_snapshot_destroy(snap));
    rig_free(&rig);
}
END_TEST

/* ---------------------------------------------------------------- serialized form */

static uint8_t *serialize(recap_snapshot_h snap, size_t *len_p)
{
    uint8_t *buf;
    size_t len = 0, len2 = 0;

    ck_assert_ok(recap_snapshot_serialize(snap, NULL, 0, &len));
    buf = malloc(len);
    ck_assert_ptr_nonnull(buf);
    ck_assert_ok(recap_snapshot_serialize(snap, buf, len, &len2));
    ck_assert_uint_eq(len, len2);
    *len_p = len;
    return buf;
}

START_TEST(serialized_snapshot_resumes_draws_exactly)
{
    int64_t seed = 1 + (int64_t)tu_rand_below(1ULL << 40);
    rig_t job = rig_new(mode_flags(_i), seed), resumed;
    uint32_t would[STEP_WORDS], did[STEP_WORDS];
    recap_tracker_params_t p = {.flags = mode_flags(_i), .device = RECAP_DEVICE_HOST};
    recap_snapshot_h snap, loaded;
    uint8_t *blob;
    size_t len;
    int k;

    steps(&job, 1 + (int)tu_rand_below(5));
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_snapshot_take(job.t, snap));
    blob = serialize(snap, &len);
    /* The job goes on (or would have); a new process loads the checkpoint. */
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &resumed.host));
    p.host_generator = resumed.host;
    ck_assert_ok(recap_tracker_create(&p, &resumed.t));
    ck_assert_ok(recap_snapshot_create(&loaded));
    ck_assert_ok(recap_snapshot_deserialize(blob, len, loaded));
    ck_assert_ok(recap_snapshot_restore(resumed.t, loaded));
    for (k = 0; k < 3; k++) {
        step(&job, would);
        step(&resumed, did);
        ck_assert_mem_eq(would, did, sizeof(would));
    }
    free(blob);
    recap_snapshot_destroy(snap);
    recap_snapshot_destroy(loaded);
    rig_free(&job);
    rig_free(&resumed);
}
END_TEST

START_TEST(serialize_reports_its_size_and_rejects_a_small_buffer)
{
    rig_t rig = rig_new(0, 3);
    recap_snapshot_h snap;
    uint8_t buf[512];
    size_t len = 0, need = 0;

    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_status(recap_snapshot_serialize(snap, NULL, 0, &len), RECAP_ERR_STATE);
    ck_assert_ok(recap_snapshot_take(rig.t, snap));
    ck_assert_ok(recap_snapshot_serialize(snap, NULL, 0, &need));
    /* header 56, checksum 8, per state 20 + name: data-, model-, expert-parallel, both remats */
    ck_assert_uint_eq(need, 64 + 5 * 20 + 17 + 18 + 19 + 13 + 14);
    ck_assert_status(recap_snapshot_serialize(snap, buf, need - 1, &len), RECAP_ERR_INVALID_ARG);
    ck_assert_uint_eq(len, need);
    ck_assert_ok(recap_snapshot_serialize(snap, buf, sizeof(buf), &len));
    ck_assert_uint_eq(len, need);
    recap_snapshot_destroy(snap);
    rig_free(&rig);
}
END_TEST

/* An independent writer of the documented format (little-endian, FNV-1a-64 at the end). */
typedef struct {
    const char *name;
    uint32_t len;
    uint64_t seed, offset;
} blob_entry_t;

static uint8_t *put_le(uint8_t *p, uint64_t v, int bytes)
{
    int i;

    for (i = 0; i < bytes; i++, v >>= 8)
        *p++ = (uint8_t)v;
    return p;
}

static uint64_t fnv1a64(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;

    while (n--)
        h = (h ^ *p++) * 0x100000001b3ULL;
    return h;
}

static void reseal(uint8_t *b, size_t len)
{
    put_le(b + len - 8, fnv1a64(b, len - 8), 8);
}

static size_t build_blob(uint8_t *b, uint32_t version, uint32_t flags, const uint64_t host[2],
                         const uint64_t gen[2], const blob_entry_t *e, size_t n)
{
    uint8_t *p = b;
    size_t i, len;

    memcpy(p, "RCAP", 4);
    p = put_le(p + 4, version, 4);
    p = put_le(p, 0, 4); /* length, below */
    p = put_le(p, flags, 4);
    p = put_le(p, n, 4);
    p = put_le(p, 0, 4);
    p = put_le(p, host[0], 8);
    p = put_le(p, host[1], 8);
    p = put_le(p, gen[0], 8);
    p = put_le(p, gen[1], 8);
    for (i = 0; i < n; i++) {
        p = put_le(p, e[i].len, 4);
        memcpy(p, e[i].name, e[i].len);
        p = put_le(p + e[i].len, e[i].seed, 8);
        p = put_le(p, e[i].offset, 8);
    }
    len = (size_t)(p - b) + 8;
    put_le(b + 8, len, 4);
    reseal(b, len);
    return len;
}

START_TEST(blob_layout_matches_the_documented_format)
{
    recap_tracker_params_t p = {.flags = RECAP_TRACKER_GRAPH_SAFE, .device = RECAP_DEVICE_HOST};
    uint64_t host[2], gen[2] = {tu_rand(), tu_rand_offset()};
    blob_entry_t e[2] = {{"first", 5, tu_rand(), tu_rand_offset()},
                         {"second-state", 12, tu_rand(), tu_rand_offset()}};
    uint8_t want[256], gs[RECAP_STATE_BYTES], *got;
    recap_generator_h g;
    recap_snapshot_h snap;
    recap_tracker_h t;
    recap_states_h s;
    size_t wlen, glen;

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &p.host_generator));
    host[0] = tu_rand();
    host[1] = tu_rand_offset();
    put_le(gs, host[0], 8);
    put_le(gs + 8, host[1], 8);
    ck_assert_ok(recap_generator_set_state(p.host_generator, gs));
    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_tracker_generator(t, &g));
    put_le(gs, gen[0], 8);
    put_le(gs + 8, gen[1], 8);
    ck_assert_ok(recap_generator_set_state(g, gs));
    wlen = build_blob(want, 1, 3, host, gen, e, 2);
    /* Load our blob, apply it, take it back: the library writes the same bytes. */
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_snapshot_deserialize(want, wlen, snap));
    ck_assert_ok(recap_snapshot_restore(t, snap));
    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_ok(recap_states_lookup(s, "second-state", gs));
    recap_states_free(s);
    ck_assert_ok(recap_snapshot_take(t, snap));
    got = serialize(snap, &glen);
    ck_assert_uint_eq(glen, wlen);
    ck_assert_mem_eq(got, want, wlen);
    free(got);
    recap_snapshot_destroy(snap);
    recap_tracker_destroy(t);
    recap_generator_destroy(p.host_generator);
}
END_TEST

/* A target snapshot with known content, to prove a rejected blob leaves it alone. */
typedef struct {
    rig_t rig;
    recap_snapshot_h target;
    uint8_t *target_blob, *blob;
    size_t target_len, len;
} victim_t;

static victim_t victim_new(void)
{
    victim_t v;
    recap_snapshot_h src;

    v.rig = rig_new(0, 1 + (int64_t)tu_rand_below(1000));
    steps(&v.rig, 1);
    ck_assert_ok(recap_snapshot_create(&v.target));
    ck_assert_ok(recap_snapshot_take(v.rig.t, v.target));
    v.target_blob = serialize(v.target, &v.target_len);
    steps(&v.rig, 1);
    ck_assert_ok(recap_snapshot_create(&src));
    ck_assert_ok(recap_snapshot_take(v.rig.t, src));
    v.blob = serialize(src, &v.len);
    recap_snapshot_destroy(src);
    return v;
}

static void assert_target_untouched(victim_t *v)
{
    uint8_t *now;
    size_t len;

    now = serialize(v->target, &len);
    ck_assert_uint_eq(len, v->target_len);
    ck_assert_mem_eq(now, v->target_blob, len);
    free(now);
}

static void victim_free(victim_t *v)
{
    free(v->blob);
    free(v->target_blob);
    recap_snapshot_destroy(v->target);
    rig_free(&v->rig);
}

START_TEST(flipped_byte_is_rejected_and_nothing_changes)
{
    victim_t v = victim_new();
    uint8_t *bad = malloc(v.len);
    seen_t before = observe(&v.rig), after;
    int k;

    for (k = 0; k < 500; k++) {
        size_t at = tu_rand_below(v.len);
        memcpy(bad, v.blob, v.len);
        bad[at] ^= (uint8_t)(1 + tu_rand_below(255));
        ck_assert_status(recap_snapshot_deserialize(bad, v.len, v.target), RECAP_ERR_CORRUPT);
        assert_target_untouched(&v);
    }
    after = observe(&v.rig);
    assert_seen_equal(&before, &after);
    free(bad);
    victim_free(&v);
}
END_TEST

/* Damage to the version field is damage: the checksum is checked before the version (issue 20,
 * defect 11), and only an intact blob of another version reads as RECAP_ERR_VERSION. */
START_TEST(flipped_version_byte_is_corrupt_not_another_version)
{
    victim_t v = victim_new();
    uint8_t *bad = malloc(v.len);
    size_t at;
    int bit;

    for (at = 4; at < 8; at++) {
        for (bit = 0; bit < 8; bit++) {
            memcpy(bad, v.blob, v.len);
            bad[at] ^= (uint8_t)(1u << bit);
            ck_assert_status(recap_snapshot_deserialize(bad, v.len, v.target), RECAP_ERR_CORRUPT);
            ck_assert_ptr_nonnull(strstr(recap_last_error(), "checksum"));
            assert_target_untouched(&v);
        }
    }
    free(bad);
    victim_free(&v);
}
END_TEST

START_TEST(truncated_blob_is_rejected_at_every_length)
{
    victim_t v = victim_new();
    size_t len;

    for (len = 0; len < v.len; len++) {
        ck_assert_status(recap_snapshot_deserialize(v.blob, len, v.target), RECAP_ERR_CORRUPT);
        assert_target_untouched(&v);
    }
    ck_assert_ok(recap_snapshot_deserialize(v.blob, v.len, v.target));
    victim_free(&v);
}
END_TEST

START_TEST(foreign_version_is_rejected)
{
    victim_t v = victim_new();
    uint32_t versions[] = {0, 2, 0x01000000u, (uint32_t)tu_rand() | 2};
    size_t k;

    for (k = 0; k < sizeof(versions) / sizeof(versions[0]); k++) {
        put_le(v.blob + 4, versions[k], 4);
        reseal(v.blob, v.len);
        ck_assert_status(recap_snapshot_deserialize(v.blob, v.len, v.target), RECAP_ERR_VERSION);
        ck_assert_ptr_nonnull(strstr(recap_last_error(), "version"));
        assert_target_untouched(&v);
    }
    victim_free(&v);
}
END_TEST

/* Blobs with a valid checksum whose content is still wrong. */
START_TEST(well_sealed_nonsense_is_corrupt)
{
    uint64_t host[2] = {1, 0}, gen[2] = {2, 8};
    blob_entry_t e[2] = {{"a", 1, 3, 4}, {"b", 1, 5, 12}};
    char longname[RECAP_NAME_MAX + 1];
    uint8_t b[512];
    recap_snapshot_h snap;
    size_t len;

    memset(longname, 'n', sizeof(longname));
    ck_assert_ok(recap_snapshot_create(&snap));
    len = build_blob(b, 1, 1, host, gen, e, 2);
    ck_assert_ok(recap_snapshot_deserialize(b, len, snap));
#define REJECT(what)                                                                      \
    ck_assert_msg(recap_snapshot_deserialize(b, len, snap) == RECAP_ERR_CORRUPT, "%s", what)
    e[1].offset = 6;
    len = build_blob(b, 1, 1, host, gen, e, 2);
    REJECT("state offset not a multiple of 4");
    e[1].offset = 12;
    gen[1] = 2;
    len = build_blob(b, 1, 1, host, gen, e, 2);
    REJECT("generator offset not a multiple of 4");
    gen[1] = 8;
    host[1] = 1;
    len = build_blob(b, 1, 1, host, gen, e, 2);
    REJECT("host offset not a multiple of 4");
    host[1] = 0;
    len = build_blob(b, 1, 0, host, gen, e, 2);
    REJECT("host state without its flag");
    len = build_blob(b, 1, 1 | 8, host, gen, e, 2);
    REJECT("unknown flag");
    e[1].name = "a";
    len = build_blob(b, 1, 1, host, gen, e, 2);
    REJECT("duplicate name");
    e[1].name = "b\0c";
    e[1].len = 3;
    len = build_blob(b, 1, 1, host, gen, e, 2);
    REJECT("NUL in a name");
    e[1].name = "";
    e[1].len = 0;
    len = build_blob(b, 1, 1, host, gen, e, 2);
    REJECT("empty name");
    e[1].name = longname;
    e[1].len = RECAP_NAME_MAX + 1;
    len = build_blob(b, 1, 1, host, gen, e, 2);
    REJECT("name too long");
    e[1].len = RECAP_NAME_MAX;
    len = build_blob(b, 1, 1, host, gen, e, 2);
    ck_assert_ok(recap_snapshot_deserialize(b, len, snap));
    e[1].name = RECAP_RNG_DEFAULT;
    e[1].len = (uint32_t)strlen(RECAP_RNG_DEFAULT);
    len = build_blob(b, 1, 1, host, gen, e, 2);
    REJECT("the default state's name");
    e[1].name = "b";
    e[1].len = 1;
    len = build_blob(b, 1, 1, host, gen, e, 2);
    put_le(b + 16, 3, 4); /* one state more than present */
    reseal(b, len);
    REJECT("count larger than the entries");
    len = build_blob(b, 1, 1, host, gen, e, 2);
    put_le(b + 16, 1, 4); /* trailing bytes */
    reseal(b, len);
    REJECT("bytes after the last state");
    len = build_blob(b, 1, 1, host, gen, e, 2);
    b[0] = 'X';
    REJECT("magic");
#undef REJECT
    recap_snapshot_destroy(snap);
}
END_TEST

START_TEST(null_arguments_get_a_status_and_message)
{
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_snapshot_h snap;
    recap_tracker_h t;
    uint8_t buf[8] = {0};
    size_t len;

    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_status(recap_snapshot_create(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_snapshot_destroy(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_snapshot_take(NULL, snap), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_snapshot_take(t, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_snapshot_restore(NULL, snap), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_snapshot_restore(t, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_snapshot_serialize(NULL, buf, 8, &len), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_snapshot_serialize(snap, buf, 8, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_snapshot_deserialize(NULL, 8, snap), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_snapshot_deserialize(buf, 8, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_str_eq(recap_last_error(), "NULL argument");
    recap_snapshot_destroy(snap);
    recap_tracker_destroy(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("snapshot");
    TCase *tc = tcase_create("snapshot");
    TCase *blob = tcase_create("serialize");

    tcase_add_loop_test(tc, restore_replays_the_draws_made_after_take, 0, 2);
    tcase_add_loop_test(tc, restore_inside_a_fork_replays_the_draws, 0, 2);
    tcase_add_loop_test(tc, restore_inside_another_fork_keeps_generator_and_state_apart, 0, 2);
    tcase_add_loop_test(tc, restore_of_other_names_replaces_the_map, 0, 2);
    tcase_add_loop_test(tc, restore_of_other_names_with_a_fork_open_is_rejected, 0, 2);
    tcase_add_loop_test(tc, restore_drops_states_added_after_take, 0, 2);
    tcase_add_loop_test(tc, take_after_add_records_the_new_name, 0, 2);
    tcase_add_test(tc, restore_brings_back_the_initialized_flag);
    tcase_add_test(tc, restore_of_an_unusable_snapshot_is_rejected);
    tcase_add_test(tc, null_arguments_get_a_status_and_message);
    suite_add_tcase(s, tc);
    tcase_add_loop_test(blob, serialized_snapshot_resumes_draws_exactly, 0, 2);
    tcase_add_test(blob, serialize_reports_its_size_and_rejects_a_small_buffer);
    tcase_add_test(blob, blob_layout_matches_the_documented_format);
    tcase_add_test(blob, flipped_byte_is_rejected_and_nothing_changes);
    tcase_add_test(blob, truncated_blob_is_rejected_at_every_length);
    tcase_add_test(blob, foreign_version_is_rejected);
    tcase_add_test(blob, flipped_version_byte_is_corrupt_not_another_version);
    tcase_add_test(blob, well_sealed_nonsense_is_corrupt);
    suite_add_tcase(s, blob);
    return tu_run(s);
}
