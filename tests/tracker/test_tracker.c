/* SPDX-License-Identifier: Apache-2.0 */
/* The RNG state tracker: named states, fork/unfork, states objects, the default tracker. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#endif

#include "testutil.h"

#define NWORDS 16

/* Loop tests run once per mode: _i = 0 value mode, 1 graph-safe mode. */
static uint32_t mode_flags(int i)
{
    return i ? RECAP_TRACKER_GRAPH_SAFE : 0;
}

static recap_tracker_h new_tracker(uint32_t flags)
{
    recap_tracker_params_t p = {.flags = flags, .device = RECAP_DEVICE_HOST};
    recap_tracker_h t;

    ck_assert_ok(recap_tracker_create(&p, &t));
    return t;
}

static void draw(recap_tracker_h t, uint32_t *w, size_t n)
{
    recap_generator_h g;

    ck_assert_ok(recap_tracker_generator(t, &g));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, w, n));
}

static void fork_draw(recap_tracker_h t, const char *name, uint32_t *w, size_t n)
{
    recap_fork_token_t tok;

    ck_assert_ok(recap_tracker_fork(t, name, &tok));
    draw(t, w, n);
    ck_assert_ok(recap_tracker_unfork(t, tok));
}

static void gen_state(recap_tracker_h t, uint8_t st[RECAP_STATE_BYTES])
{
    recap_generator_h g;

    ck_assert_ok(recap_tracker_generator(t, &g));
    ck_assert_ok(recap_generator_get_state(g, st));
}

static void named_state(recap_tracker_h t, const char *name, uint8_t st[RECAP_STATE_BYTES])
{
    recap_states_h s;

    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_ok(recap_states_lookup(s, name, st));
    ck_assert_ok(recap_states_free(s));
}

static void encode(uint64_t seed, uint64_t offset, uint8_t st[RECAP_STATE_BYTES])
{
    int i;

    for (i = 0; i < 8; i++) {
        st[i] = (uint8_t)(seed >> (8 * i));
        st[8 + i] = (uint8_t)(offset >> (8 * i));
    }
}

static size_t state_count(recap_tracker_h t)
{
    recap_states_h s;
    size_t n;

    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_ok(recap_states_count(s, &n));
    ck_assert_ok(recap_states_free(s));
    return n;
}


static void assert_trackers_equal(recap_tracker_h a, recap_tracker_h b)
{
    uint8_t x[RECAP_STATE_BYTES], y[RECAP_STATE_BYTES];
    recap_states_h sa, sb;

    ck_assert_ok(recap_tracker_get_states(a, &sa));
    ck_assert_ok(recap_tracker_get_states(b, &sb));
    tu_assert_states_equal(sa, sb);
    recap_states_free(sa);
    recap_states_free(sb);
    gen_state(a, x);
    gen_state(b, y);
    ck_assert_mem_eq(x, y, sizeof(x));
}

/* Adds "a", "b", "c" with random distinct seeds; the same seeds for a twin tracker. */
static void add_abc(recap_tracker_h t, uint64_t base)
{
    ck_assert_ok(recap_tracker_add(t, "a", base));
    ck_assert_ok(recap_tracker_add(t, "b", base + 1));
    ck_assert_ok(recap_tracker_add(t, "c", base + 2));
}

START_TEST(set_states_after_get_states_round_trips)
{
    recap_tracker_h t = new_tracker(mode_flags(_i)), u = new_tracker(mode_flags(_i));
    recap_states_h s, got;
    uint32_t w[NWORDS];
    int init = 0;

    add_abc(t, tu_rand() >> 1);
    fork_draw(t, "b", w, 1 + tu_rand_below(NWORDS));
    fork_draw(t, "c", w, 1 + tu_rand_below(NWORDS));
    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_ok(recap_tracker_set_states(u, s));
    ck_assert_ok(recap_tracker_is_initialized(u, &init));
    ck_assert_int_eq(init, 1);
    ck_assert_ok(recap_tracker_get_states(u, &got));
    tu_assert_states_equal(s, got);
    /* The copy is by value: the tracker moving on does not change `s`. */
    fork_draw(u, "a", w, NWORDS);
    recap_states_free(got);
    ck_assert_ok(recap_tracker_get_states(t, &got));
    tu_assert_states_equal(s, got);
    recap_states_free(got);
    recap_states_free(s);
    recap_tracker_destroy(t);
    recap_tracker_destroy(u);
}
END_TEST

START_TEST(reset_empties_states_seeds_and_flag)
{
    recap_tracker_h t = new_tracker(mode_flags(_i));
    uint64_t seed = tu_rand();
    const char *name;
    uint32_t w[4];
    int init = 1;

    ck_assert_ok(recap_tracker_add(t, "a", seed));
    fork_draw(t, "a", w, 4);
    ck_assert_ok(recap_tracker_reset(t));
    ck_assert_uint_eq(state_count(t), 0);
    ck_assert_ok(recap_tracker_is_initialized(t, &init));
    ck_assert_int_eq(init, 0);
    ck_assert_ok(recap_tracker_current_name(t, &name));
    ck_assert_str_eq(name, RECAP_RNG_DEFAULT);
    ck_assert_ok(recap_tracker_add(t, "a", seed));
    ck_assert_uint_eq(state_count(t), 1);
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(duplicate_seed_is_rejected_and_nothing_recorded)
{
    recap_tracker_h t = new_tracker(0);
    uint64_t seed = tu_rand();
    uint8_t st[RECAP_STATE_BYTES];
    recap_states_h s;

    ck_assert_ok(recap_tracker_add(t, "a", seed));
    ck_assert_status(recap_tracker_add(t, "b", seed), RECAP_ERR_DUPLICATE_SEED);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "already used"));
    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_status(recap_states_lookup(s, "b", st), RECAP_ERR_NOT_FOUND);
    recap_states_free(s);
    ck_assert_uint_eq(state_count(t), 1);
    /* "b" was not recorded, so it can still be added with another seed. */
    ck_assert_ok(recap_tracker_add(t, "b", seed + 1));
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(duplicate_name_is_rejected_and_its_seed_not_recorded)
{
    recap_tracker_h t = new_tracker(0);
    uint64_t seed = tu_rand() >> 1;
    uint8_t st[RECAP_STATE_BYTES], want[RECAP_STATE_BYTES];

    ck_assert_ok(recap_tracker_add(t, "a", seed));
    ck_assert_status(recap_tracker_add(t, "a", seed + 7), RECAP_ERR_EXISTS);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "\"a\""));
    named_state(t, "a", st);
    encode(seed, 0, want);
    ck_assert_mem_eq(st, want, sizeof(st));
    ck_assert_uint_eq(state_count(t), 1);
    /* seed + 7 was not recorded: another name can use it. */
    ck_assert_ok(recap_tracker_add(t, "b", seed + 7));
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(added_state_equals_freshly_seeded_generator)
{
    recap_tracker_h t = new_tracker(mode_flags(_i));
    recap_generator_h fresh, g;
    uint64_t seed = tu_rand();
    uint8_t before[RECAP_STATE_BYTES], after[RECAP_STATE_BYTES], st[RECAP_STATE_BYTES],
        want[RECAP_STATE_BYTES];
    uint32_t w[NWORDS], ref[NWORDS];

    ck_assert_ok(recap_tracker_generator(t, &g));
    ck_assert_ok(recap_generator_manual_seed(g, tu_rand()));
    gen_state(t, before);
    ck_assert_ok(recap_tracker_add(t, "x", seed));
    gen_state(t, after);
    ck_assert_mem_eq(before, after, sizeof(before));
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &fresh));
    ck_assert_ok(recap_generator_manual_seed(fresh, seed));
    ck_assert_ok(recap_generator_get_state(fresh, want));
    named_state(t, "x", st);
    ck_assert_mem_eq(st, want, sizeof(st));
    fork_draw(t, "x", w, NWORDS);
    ck_assert_ok(recap_generator_fill_u32(fresh, NULL, ref, NWORDS));
    ck_assert_mem_eq(w, ref, sizeof(w));
    ck_assert_ok(recap_generator_get_state(fresh, want));
    named_state(t, "x", st);
    ck_assert_mem_eq(st, want, sizeof(st));
    recap_generator_destroy(fresh);
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(bad_names_are_rejected)
{
    recap_tracker_h t = new_tracker(0);
    char name[RECAP_NAME_MAX + 2];

    ck_assert_status(recap_tracker_add(t, NULL, 1), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_add(t, "", 1), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_add(t, RECAP_RNG_DEFAULT, 1), RECAP_ERR_INVALID_ARG);
    memset(name, 'n', sizeof(name));
    name[RECAP_NAME_MAX + 1] = '\0';
    ck_assert_status(recap_tracker_add(t, name, 1), RECAP_ERR_INVALID_ARG);
    name[RECAP_NAME_MAX] = '\0';
    ck_assert_ok(recap_tracker_add(t, name, 1));
    ck_assert_uint_eq(state_count(t), 1);
    recap_tracker_destroy(t);
}
END_TEST

/* A name recap cannot hold (longer than RECAP_NAME_MAX, random length and letters) is shown in
 * the message as its first RECAP_NAME_MAX bytes and the cut mark; one that fits, whole. */
START_TEST(a_long_name_in_a_message_is_cut_with_the_mark)
{
    recap_tracker_h t = new_tracker(mode_flags(_i));
    char name[RECAP_NAME_MAX + 2002], want[RECAP_NAME_MAX + 32];
    recap_fork_token_t tok;
    size_t n;

    tu_rand_init();
    n = RECAP_NAME_MAX + 1 + (size_t)tu_rand_below(2000);
    tu_rand_path(name, sizeof(name), "", n);
    snprintf(want, sizeof(want), "\"%.*s\xe2\x80\xa6(cut)\"", RECAP_NAME_MAX, name);
    ck_assert_status(recap_tracker_fork(t, name, &tok), RECAP_ERR_NOT_FOUND);
    ck_assert_msg(strstr(recap_last_error(), want) != NULL, "%s", recap_last_error());
    n = 1 + (size_t)tu_rand_below(RECAP_NAME_MAX);
    tu_rand_path(name, sizeof(name), "", n);
    snprintf(want, sizeof(want), "\"%.*s\"", RECAP_NAME_MAX, name);
    ck_assert_status(recap_tracker_fork(t, name, &tok), RECAP_ERR_NOT_FOUND);
    ck_assert_msg(strstr(recap_last_error(), want) != NULL, "%s", recap_last_error());
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(nested_forks_draw_like_sequential_forks)
{
    recap_tracker_h t = new_tracker(mode_flags(_i)), u = new_tracker(mode_flags(_i));
    uint32_t nested[6][NWORDS] = {{0}}, seq[6][NWORDS] = {{0}};
    recap_fork_token_t ta, tb, ta2;
    uint64_t base = tu_rand() >> 1;
    size_t n = 1 + tu_rand_below(NWORDS);
    const char *name;

    add_abc(t, base);
    add_abc(u, base);
    ck_assert_ok(recap_tracker_fork(t, "a", &ta));
    draw(t, nested[0], n);
    ck_assert_ok(recap_tracker_fork(t, "b", &tb));
    draw(t, nested[1], n);
    ck_assert_ok(recap_tracker_fork(t, "a", &ta2));
    draw(t, nested[2], n);
    ck_assert_ok(recap_tracker_current_name(t, &name));
    ck_assert_str_eq(name, "a");
    ck_assert_ok(recap_tracker_unfork(t, ta2));
    ck_assert_ok(recap_tracker_current_name(t, &name));
    ck_assert_str_eq(name, "b");
    draw(t, nested[3], n);
    ck_assert_ok(recap_tracker_unfork(t, tb));
    draw(t, nested[4], n);
    ck_assert_ok(recap_tracker_unfork(t, ta));
    draw(t, nested[5], n);

    fork_draw(u, "a", seq[0], n);
    fork_draw(u, "b", seq[1], n);
    fork_draw(u, "a", seq[2], n);
    fork_draw(u, "b", seq[3], n);
    fork_draw(u, "a", seq[4], n);
    draw(u, seq[5], n);
    ck_assert_mem_eq(nested, seq, sizeof(nested));
    assert_trackers_equal(t, u);
    recap_tracker_destroy(t);
    recap_tracker_destroy(u);
}
END_TEST

START_TEST(inner_fork_of_the_same_name_continues_it)
{
    recap_tracker_h t = new_tracker(mode_flags(_i)), u = new_tracker(mode_flags(_i));
    uint32_t nested[4][NWORDS] = {{0}}, seq[4][NWORDS] = {{0}};
    recap_fork_token_t t1, t2;
    uint64_t base = tu_rand() >> 1;
    const char *name;

    add_abc(t, base);
    add_abc(u, base);
    ck_assert_ok(recap_tracker_fork(t, "c", &t1));
    draw(t, nested[0], NWORDS);
    ck_assert_ok(recap_tracker_fork(t, "c", &t2));
    draw(t, nested[1], NWORDS);
    ck_assert_ok(recap_tracker_unfork(t, t2));
    ck_assert_ok(recap_tracker_current_name(t, &name));
    ck_assert_str_eq(name, "c");
    draw(t, nested[2], NWORDS);
    ck_assert_ok(recap_tracker_unfork(t, t1));
    draw(t, nested[3], NWORDS);

    ck_assert_ok(recap_tracker_fork(u, "c", &t1));
    draw(u, seq[0], NWORDS);
    draw(u, seq[1], NWORDS);
    draw(u, seq[2], NWORDS);
    ck_assert_ok(recap_tracker_unfork(u, t1));
    draw(u, seq[3], NWORDS);
    ck_assert_mem_eq(nested, seq, sizeof(nested));
    assert_trackers_equal(t, u);
    recap_tracker_destroy(t);
    recap_tracker_destroy(u);
}
END_TEST

/* Forks nested deeper than the frame array's first size (8) grow it on the way: the fast path
 * hands those forks to the full one and takes over again after, same-name forks (which the fast
 * path also leaves to the full one) included. Each level (9 to 40 of them, names drawn from three)
 * draws on the way in and on the way out, which must equal those draws made with single forks
 * one after the other. */
START_TEST(deep_nested_forks_draw_like_sequential_forks)
{
    enum { MAX_DEPTH = 40, N = 8 };
    recap_tracker_h t = new_tracker(mode_flags(_i)), u = new_tracker(mode_flags(_i));
    uint32_t nested[2 * MAX_DEPTH][N], seq[2 * MAX_DEPTH][N];
    recap_fork_token_t tok[MAX_DEPTH];
    uint64_t base = tu_rand() >> 1;
    const int depth = 9 + (int)tu_rand_below(MAX_DEPTH - 8); /* past the first 8 frames */
    char levels[MAX_DEPTH], name[2] = {0};
    int k, d = 0;

    for (k = 0; k < depth; k++) /* three names: same-name forks nest now and then */
        levels[k] = (char)('a' + tu_rand_below(3));
    memset(nested, 0, sizeof(nested));
    memset(seq, 0, sizeof(seq));
    add_abc(t, base);
    add_abc(u, base);
    for (k = 0; k < depth; k++) {
        name[0] = levels[k];
        ck_assert_ok(recap_tracker_fork(t, name, &tok[k]));
        draw(t, nested[d++], N);
    }
    for (k = depth - 1; k >= 0; k--) {
        ck_assert_ok(recap_tracker_unfork(t, tok[k]));
        draw(t, nested[d++], N);
    }

    d = 0;
    for (k = 0; k < depth; k++) {
        name[0] = levels[k];
        fork_draw(u, name, seq[d++], N);
    }
    for (k = depth - 1; k > 0; k--) {
        name[0] = levels[k - 1];
        fork_draw(u, name, seq[d++], N);
    }
    draw(u, seq[d++], N); /* the default state, after the outermost unfork */
    ck_assert_mem_eq(nested, seq, sizeof(nested));
    assert_trackers_equal(t, u);
    recap_tracker_destroy(t);
    recap_tracker_destroy(u);
}
END_TEST

START_TEST(fork_of_unknown_name_is_not_found)
{
    recap_tracker_h t = new_tracker(mode_flags(_i));
    uint8_t before[RECAP_STATE_BYTES], after[RECAP_STATE_BYTES];
    recap_fork_token_t tok = 0;
    const char *name;

    add_abc(t, 100);
    gen_state(t, before);
    ck_assert_status(recap_tracker_fork(t, "zz", &tok), RECAP_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "\"zz\""));
    ck_assert_uint_eq(tok, 0);
    gen_state(t, after);
    ck_assert_mem_eq(before, after, sizeof(before));
    ck_assert_ok(recap_tracker_current_name(t, &name));
    ck_assert_str_eq(name, RECAP_RNG_DEFAULT);
    ck_assert_status(recap_tracker_unfork(t, tok), RECAP_ERR_STATE);
    recap_tracker_destroy(t);
}
END_TEST

/* A fork finds exactly the names added, whatever their lengths: names that are prefixes and
 * extensions of one another, one byte changed anywhere, and the caller's string ending right
 * before an unmapped page (the lookup compares words: it must neither misjudge a length nor read
 * past what it may). Random names, lengths 1..RECAP_NAME_MAX. */
#define NNAMES 12
START_TEST(fork_finds_exactly_the_names_added_at_any_length)
{
    recap_tracker_h t = new_tracker(mode_flags(_i));
    char names[NNAMES][RECAP_NAME_MAX + 1], q[RECAP_NAME_MAX + 2], base[RECAP_NAME_MAX + 1];
    long page = sysconf(_SC_PAGESIZE);
    char *buf = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    size_t k, n, len;
    int r, j;

    ck_assert_ptr_ne(buf, MAP_FAILED);
    ck_assert_int_eq(mprotect(buf + page, (size_t)page, PROT_NONE), 0);
    tu_rand_init();
    for (k = 0; k < RECAP_NAME_MAX; k++)
        base[k] = (char)('a' + tu_rand_below(3));
    base[RECAP_NAME_MAX] = '\0';
    /* Prefixes of one random string (the hard case: they differ only in length), distinct. */
    for (n = 0; n < NNAMES;) {
        len = 1 + (size_t)tu_rand_below(RECAP_NAME_MAX);
        for (k = 0; k < n && strlen(names[k]) != len; k++)
            ;
        if (k < n)
            continue;
        memcpy(names[n], base, len);
        names[n][len] = '\0';
        ck_assert_ok(recap_tracker_add(t, names[n], 1000 + n));
        n++;
    }
    for (r = 0; r < 4000; r++) {
        const char *cur;
        recap_fork_token_t tok;
        char *at;
        int want = -1;

        strcpy(q, names[tu_rand_below(NNAMES)]);
        len = strlen(q);
        switch (tu_rand_below(4)) {
        case 0: /* as added */
            break;
        case 1: /* shorter, often a prefix nobody added */
            q[tu_rand_below(len)] = '\0';
            break;
        case 2: /* longer by one byte */
            if (len < RECAP_NAME_MAX) {
                q[len] = (char)('a' + tu_rand_below(3));
                q[len + 1] = '\0';
            }
            break;
        default: /* one byte changed */
            q[tu_rand_below(len)] = (char)('a' + tu_rand_below(4));
        }
        len = strlen(q);
        if (len == 0)
            continue;
        for (j = 0; j < NNAMES; j++)
            if (strcmp(q, names[j]) == 0)
                want = j;
        /* At the very end of the mapped page half the time, else anywhere in it. */
        at = tu_rand_below(2) ? buf + page - (len + 1) : buf + tu_rand_below((size_t)page - len);
        memcpy(at, q, len + 1);
        if (want < 0) {
            ck_assert_status(recap_tracker_fork(t, at, &tok), RECAP_ERR_NOT_FOUND);
            continue;
        }
        ck_assert_ok(recap_tracker_fork(t, at, &tok));
        ck_assert_ok(recap_tracker_current_name(t, &cur));
        ck_assert_str_eq(cur, names[want]);
        ck_assert_ok(recap_tracker_unfork(t, tok));
    }
    ck_assert_int_eq(munmap(buf, 2 * (size_t)page), 0);
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(unfork_of_a_non_innermost_token_is_rejected)
{
    recap_tracker_h t = new_tracker(mode_flags(_i)), u = new_tracker(mode_flags(_i));
    recap_fork_token_t ta, tb;
    uint8_t before[RECAP_STATE_BYTES], after[RECAP_STATE_BYTES];
    uint32_t w[4];
    const char *name;

    add_abc(t, 7);
    add_abc(u, 7);
    ck_assert_ok(recap_tracker_fork(t, "a", &ta));
    ck_assert_ok(recap_tracker_fork(t, "b", &tb));
    gen_state(t, before);
    ck_assert_status(recap_tracker_unfork(t, ta), RECAP_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "innermost"));
    ck_assert_status(recap_tracker_unfork(t, tb + 1000), RECAP_ERR_STATE);
    gen_state(t, after);
    ck_assert_mem_eq(before, after, sizeof(before));
    ck_assert_ok(recap_tracker_current_name(t, &name));
    ck_assert_str_eq(name, "b");
    ck_assert_ok(recap_tracker_unfork(t, tb));
    ck_assert_ok(recap_tracker_unfork(t, ta));
    /* Nothing was corrupted: the tracker equals one that did the same forks correctly. */
    ck_assert_ok(recap_tracker_fork(u, "a", &ta));
    ck_assert_ok(recap_tracker_fork(u, "b", &tb));
    ck_assert_ok(recap_tracker_unfork(u, tb));
    ck_assert_ok(recap_tracker_unfork(u, ta));
    fork_draw(t, "c", w, 4);
    fork_draw(u, "c", w, 4);
    assert_trackers_equal(t, u);
    recap_tracker_destroy(t);
    recap_tracker_destroy(u);
}
END_TEST

START_TEST(unfork_without_a_fork_is_rejected)
{
    recap_tracker_h t = new_tracker(0);
    recap_fork_token_t tok;

    ck_assert_status(recap_tracker_unfork(t, 1), RECAP_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "without an open fork"));
    add_abc(t, 3);
    ck_assert_ok(recap_tracker_fork(t, "a", &tok));
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_status(recap_tracker_unfork(t, tok), RECAP_ERR_STATE);
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(token_of_another_tracker_is_rejected)
{
    recap_tracker_h t = new_tracker(0), u = new_tracker(0);
    recap_fork_token_t tt, tu;

    add_abc(t, 3);
    add_abc(u, 3);
    ck_assert_ok(recap_tracker_fork(t, "a", &tt));
    ck_assert_ok(recap_tracker_fork(u, "a", &tu));
    ck_assert_status(recap_tracker_unfork(t, tu), RECAP_ERR_STATE);
    ck_assert_ok(recap_tracker_unfork(t, tt));
    ck_assert_ok(recap_tracker_unfork(u, tu));
    recap_tracker_destroy(t);
    recap_tracker_destroy(u);
}
END_TEST

START_TEST(reset_set_states_and_destroy_with_open_fork_are_rejected)
{
    recap_tracker_h t = new_tracker(mode_flags(_i));
    recap_fork_token_t tok;
    recap_states_h s;

    add_abc(t, 11);
    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_ok(recap_tracker_fork(t, "b", &tok));
    ck_assert_status(recap_tracker_reset(t), RECAP_ERR_STATE);
    ck_assert_status(recap_tracker_set_states(t, s), RECAP_ERR_STATE);
    ck_assert_status(recap_tracker_destroy(t), RECAP_ERR_STATE);
    ck_assert_uint_eq(state_count(t), 3);
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_tracker_set_states(t, s));
    recap_states_free(s);
    ck_assert_ok(recap_tracker_destroy(t));
}
END_TEST

START_TEST(inference_tracker_passes_forks_through)
{
    recap_tracker_h t = new_tracker(RECAP_TRACKER_INFERENCE), u = new_tracker(0);
    recap_fork_token_t tok;
    recap_states_h s;
    uint32_t w[NWORDS], ref[NWORDS];
    const char *name;
    int init = 1;

    ck_assert_ok(recap_tracker_add(u, "a", 5));
    ck_assert_ok(recap_tracker_get_states(u, &s));
    ck_assert_ok(recap_tracker_add(t, "a", 5));
    ck_assert_ok(recap_tracker_add(t, "a", 5));
    ck_assert_ok(recap_tracker_set_states(t, s));
    ck_assert_uint_eq(state_count(t), 0);
    ck_assert_ok(recap_tracker_is_initialized(t, &init));
    ck_assert_int_eq(init, 0);
    ck_assert_ok(recap_tracker_fork(t, "never-added", &tok));
    ck_assert_ok(recap_tracker_current_name(t, &name));
    ck_assert_str_eq(name, RECAP_RNG_DEFAULT);
    draw(t, w, NWORDS);
    ck_assert_status(recap_tracker_unfork(t, tok + 1), RECAP_ERR_STATE);
    ck_assert_ok(recap_tracker_unfork(t, tok));
    draw(u, ref, NWORDS); /* u's default generator: the same default seed, undisturbed */
    ck_assert_mem_eq(w, ref, sizeof(w));
    recap_states_free(s);
    recap_tracker_destroy(t);
    recap_tracker_destroy(u);
}
END_TEST

START_TEST(states_object_copies_counts_names_and_looks_up)
{
    recap_tracker_h t = new_tracker(0);
    uint8_t st[RECAP_STATE_BYTES], want[RECAP_STATE_BYTES];
    recap_states_h s, c;
    uint64_t base = tu_rand() >> 1;
    const char *name;
    size_t n;

    add_abc(t, base);
    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_ok(recap_states_copy(s, &c));
    ck_assert_ok(recap_states_free(s));
    ck_assert_ok(recap_states_count(c, &n));
    ck_assert_uint_eq(n, 3);
    ck_assert_ok(recap_states_name(c, 0, &name));
    ck_assert_str_eq(name, "a");
    ck_assert_ok(recap_states_name(c, 2, &name));
    ck_assert_str_eq(name, "c");
    ck_assert_status(recap_states_name(c, 3, &name), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_states_lookup(c, "b", st));
    encode(base + 1, 0, want);
    ck_assert_mem_eq(st, want, sizeof(st));
    ck_assert_status(recap_states_lookup(c, "bb", st), RECAP_ERR_NOT_FOUND);
    ck_assert_status(recap_states_lookup(c, RECAP_RNG_DEFAULT, st), RECAP_ERR_NOT_FOUND);
    ck_assert_ok(recap_states_free(c));
    recap_tracker_destroy(t);
}
END_TEST

/*
 * Many named states against a model: a plain array of the names in insertion order and the list
 * of used seeds, scanned linearly. Random adds (new names, names present, names removed before,
 * seeds used before), removals (set_states of a states object built without them), forks of
 * present and absent names, a snapshot restored after removals, and a reset; every status, the
 * order of get_states and every found / not found must be the model's. Sizes are random (the
 * seed is printed), smaller under valgrind, which runs this suite too (scripts/ci-sanitize).
 */
#define MODEL_NAME_BYTES (RECAP_NAME_MAX + 1)

typedef struct {
    char (*pool)[MODEL_NAME_BYTES]; /* every name a test may use */
    size_t npool;
    size_t *live; /* pool indices in insertion order */
    uint64_t *live_seed;
    size_t nlive;
    uint64_t *used; /* seeds used since the last reset */
    size_t nused;
} model_t;

/* Pool name k: its number, then a prefix of a fixed string, the length chosen by k, so lengths
 * run from 2 to RECAP_NAME_MAX and names share long prefixes and suffixes. */
static void model_name(char *out, size_t k)
{
    static const char tail[] = "layers.attention.dropout-rng.decoder.blocks.mlp.expert.0123456789"
                               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.0123456789";
    int len = snprintf(out, MODEL_NAME_BYTES, "%zu-", k);
    size_t extra = (k * 37) % (size_t)(RECAP_NAME_MAX - len + 1);

    memcpy(out + len, tail, extra);
    out[(size_t)len + extra] = '\0';
}

static size_t model_find(const model_t *m, size_t k)
{
    size_t i;

    for (i = 0; i < m->nlive && m->live[i] != k; i++)
        ;
    return i;
}

static int model_seed_used(const model_t *m, uint64_t seed)
{
    size_t i;

    for (i = 0; i < m->nused; i++)
        if (m->used[i] == seed)
            return 1;
    return 0;
}

/* get_states: the model's names in its order, each with its seed (offset 0: nothing drew). */
static void model_check_states(recap_tracker_h t, const model_t *m)
{
    uint8_t st[RECAP_STATE_BYTES], want[RECAP_STATE_BYTES];
    recap_states_h s;
    const char *name;
    size_t n, i;

    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_ok(recap_states_count(s, &n));
    ck_assert_uint_eq(n, m->nlive);
    for (i = 0; i < n; i++) {
        ck_assert_ok(recap_states_name(s, i, &name));
        ck_assert_str_eq(name, m->pool[m->live[i]]);
    }
    for (i = 0; i < 64; i++) {
        size_t k = (size_t)tu_rand_below(m->npool), at = model_find(m, k);

        if (at == m->nlive) {
            ck_assert_status(recap_states_lookup(s, m->pool[k], st), RECAP_ERR_NOT_FOUND);
            continue;
        }
        ck_assert_ok(recap_states_lookup(s, m->pool[k], st));
        encode(m->live_seed[at], 0, want);
        ck_assert_mem_eq(st, want, sizeof(st));
    }
    ck_assert_ok(recap_states_free(s));
}

static void model_add(recap_tracker_h t, model_t *m)
{
    size_t k = (size_t)tu_rand_below(m->npool), at = model_find(m, k);
    uint64_t seed = m->nused > 0 && tu_rand_below(5) == 0 ? m->used[tu_rand_below(m->nused)]
                                                           : tu_rand();
    char want[64 + MODEL_NAME_BYTES];

    if (model_seed_used(m, seed)) { /* the seed is checked first */
        ck_assert_status(recap_tracker_add(t, m->pool[k], seed), RECAP_ERR_DUPLICATE_SEED);
        snprintf(want, sizeof(want), "seed %llu is already used", (unsigned long long)seed);
        ck_assert_ptr_nonnull(strstr(recap_last_error(), want));
    } else if (at < m->nlive) { /* and its seed is not recorded */
        ck_assert_status(recap_tracker_add(t, m->pool[k], seed), RECAP_ERR_EXISTS);
        snprintf(want, sizeof(want), "state \"%s\" already exists", m->pool[k]);
        ck_assert_str_eq(recap_last_error(), want);
    } else {
        ck_assert_ok(recap_tracker_add(t, m->pool[k], seed));
        m->live[m->nlive] = k;
        m->live_seed[m->nlive++] = seed;
        m->used[m->nused++] = seed;
    }
}

static void model_fork(recap_tracker_h t, const model_t *m)
{
    size_t k = m->nlive > 0 && tu_rand_below(4) != 0 ? m->live[tu_rand_below(m->nlive)]
                                                      : (size_t)tu_rand_below(m->npool);
    size_t at = model_find(m, k);
    uint8_t st[RECAP_STATE_BYTES], want[RECAP_STATE_BYTES];
    recap_fork_token_t tok;
    const char *cur;

    if (at == m->nlive) {
        ck_assert_status(recap_tracker_fork(t, m->pool[k], &tok), RECAP_ERR_NOT_FOUND);
        return;
    }
    ck_assert_ok(recap_tracker_fork(t, m->pool[k], &tok));
    ck_assert_ok(recap_tracker_current_name(t, &cur));
    ck_assert_str_eq(cur, m->pool[k]);
    gen_state(t, st);
    encode(m->live_seed[at], 0, want);
    ck_assert_mem_eq(st, want, sizeof(st));
    ck_assert_ok(recap_tracker_unfork(t, tok));
}

/* Removes random names: set_states of a states object built without them (their seeds stay
 * used, as set_states keeps the used seeds). */
static void model_remove(recap_tracker_h t, model_t *m)
{
    uint8_t st[RECAP_STATE_BYTES];
    size_t i, kept = 0, gone = 1 + (size_t)tu_rand_below(1 + m->nlive / 8);
    recap_states_h s;

    while (gone-- > 0 && m->nlive > 0)
        m->live[tu_rand_below(m->nlive)] = SIZE_MAX;
    ck_assert_ok(recap_states_create(&s));
    for (i = 0; i < m->nlive; i++) {
        if (m->live[i] == SIZE_MAX)
            continue;
        encode(m->live_seed[i], 0, st);
        ck_assert_ok(recap_states_put(s, m->pool[m->live[i]], st));
        /* A name put twice keeps its place. */
        if (tu_rand_below(16) == 0)
            ck_assert_ok(recap_states_put(s, m->pool[m->live[i]], st));
        m->live[kept] = m->live[i];
        m->live_seed[kept++] = m->live_seed[i];
    }
    m->nlive = kept;
    ck_assert_ok(recap_tracker_set_states(t, s));
    ck_assert_ok(recap_states_free(s));
}

START_TEST(many_states_match_a_linear_model)
{
    recap_tracker_h t = new_tracker(mode_flags(_i));
    size_t n, ops, r, i, snap_nlive = 0;
    size_t *snap_live = NULL;
    uint64_t *snap_seed = NULL;
    recap_snapshot_h snap;
    model_t m = {0};

    tu_rand_init();
#ifdef HAVE_VALGRIND_VALGRIND_H
    if (RUNNING_ON_VALGRIND)
        n = 100 + (size_t)tu_rand_below(200);
    else
#endif
        n = 300 + (size_t)tu_rand_below(2700);
    ops = 4 * n;
    m.npool = 2 * n;
    ck_assert_ptr_nonnull(m.pool = malloc(m.npool * sizeof(*m.pool)));
    ck_assert_ptr_nonnull(m.live = malloc(m.npool * sizeof(*m.live)));
    ck_assert_ptr_nonnull(m.live_seed = malloc(m.npool * sizeof(*m.live_seed)));
    ck_assert_ptr_nonnull(m.used = malloc(ops * sizeof(*m.used)));
    ck_assert_ptr_nonnull(snap_live = malloc(m.npool * sizeof(*snap_live)));
    ck_assert_ptr_nonnull(snap_seed = malloc(m.npool * sizeof(*snap_seed)));
    for (i = 0; i < m.npool; i++)
        model_name(m.pool[i], i);
    ck_assert_ok(recap_snapshot_create(&snap));
    for (r = 0; r < ops; r++) {
        uint64_t what = tu_rand_below(100);

        if (what < 45)
            model_add(t, &m);
        else if (what < 95)
            model_fork(t, &m);
        else if (what < 97)
            model_remove(t, &m);
        else if (what < 98 && snap_nlive == 0) { /* taken once, restored later */
            ck_assert_ok(recap_snapshot_take(t, snap));
            snap_nlive = m.nlive;
            memcpy(snap_live, m.live, m.nlive * sizeof(*snap_live));
            memcpy(snap_seed, m.live_seed, m.nlive * sizeof(*snap_seed));
        } else if (what < 99 && snap_nlive > 0) { /* other names by now, mostly: by name */
            ck_assert_ok(recap_snapshot_restore(t, snap));
            m.nlive = snap_nlive;
            memcpy(m.live, snap_live, m.nlive * sizeof(*snap_live));
            memcpy(m.live_seed, snap_seed, m.nlive * sizeof(*snap_seed));
        } else if (tu_rand_below(20) == 0) {
            ck_assert_ok(recap_tracker_reset(t));
            m.nlive = m.nused = 0;
        }
        if (r % (ops / 8) == 0)
            model_check_states(t, &m);
    }
    model_check_states(t, &m);
    ck_assert_ok(recap_snapshot_destroy(snap));
    recap_tracker_destroy(t);
    free(m.pool);
    free(m.live);
    free(m.live_seed);
    free(m.used);
    free(snap_live);
    free(snap_seed);
}
END_TEST

/* A map built by the host (recap_states_create/put) sets a tracker's states: values, order,
 * replacement of a name put twice; bad values refused. */
START_TEST(built_states_object_sets_the_tracker)
{
    recap_tracker_h t = new_tracker(mode_flags(_i));
    uint8_t a[RECAP_STATE_BYTES], b[RECAP_STATE_BYTES], got[RECAP_STATE_BYTES];
    uint64_t sa = tu_rand(), sb = tu_rand(), ob = tu_rand_offset();
    uint32_t w[NWORDS], ref[NWORDS];
    recap_generator_h fresh;
    recap_states_h s;
    const char *name;
    size_t n;

    ck_assert_ok(recap_states_create(&s));
    encode(sa, 0, a);
    encode(sb, ob, b);
    ck_assert_ok(recap_states_put(s, "x", b));
    ck_assert_ok(recap_states_put(s, "y", b));
    ck_assert_ok(recap_states_put(s, "x", a));
    encode(1, 2, got);
    ck_assert_status(recap_states_put(s, "z", got), RECAP_ERR_MISALIGNED);
    ck_assert_status(recap_states_put(s, RECAP_RNG_DEFAULT, a), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_states_count(s, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert_ok(recap_tracker_set_states(t, s));
    ck_assert_ok(recap_states_free(s));
    ck_assert_int_eq(state_count(t), 2);
    named_state(t, "x", got);
    ck_assert_mem_eq(got, a, sizeof(a));
    named_state(t, "y", got);
    ck_assert_mem_eq(got, b, sizeof(b));
    ck_assert_ok(recap_tracker_get_states(t, &s));
    ck_assert_ok(recap_states_name(s, 0, &name));
    ck_assert_str_eq(name, "x");
    ck_assert_ok(recap_states_free(s));
    fork_draw(t, "y", w, NWORDS);
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &fresh));
    ck_assert_ok(recap_generator_set_state(fresh, b));
    ck_assert_ok(recap_generator_fill_u32(fresh, NULL, ref, NWORDS));
    ck_assert_mem_eq(w, ref, sizeof(w));
    ck_assert_ok(recap_generator_destroy(fresh));
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(graph_safe_conversion_continues_the_sequence)
{
    recap_tracker_h t = new_tracker(RECAP_TRACKER_GRAPH_SAFE);
    recap_generator_h gs, ref;
    uint8_t st[RECAP_STATE_BYTES], back[RECAP_STATE_BYTES], before[RECAP_STATE_BYTES],
        after[RECAP_STATE_BYTES];
    uint32_t w[NWORDS], r[NWORDS];
    int graph_safe = 0;

    ck_assert_ok(recap_tracker_is_graph_safe(t, &graph_safe));
    ck_assert_int_eq(graph_safe, 1);
    encode(tu_rand(), tu_rand_offset(), st);
    gen_state(t, before);
    ck_assert_ok(recap_state_to_graph_safe(t, st, &gs));
    ck_assert_ok(recap_state_from_graph_safe(gs, back));
    ck_assert_mem_eq(back, st, sizeof(st));
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &ref));
    ck_assert_ok(recap_generator_set_state(ref, st));
    ck_assert_ok(recap_generator_fill_u32(gs, NULL, w, NWORDS));
    ck_assert_ok(recap_generator_fill_u32(ref, NULL, r, NWORDS));
    ck_assert_mem_eq(w, r, sizeof(w));
    ck_assert_ok(recap_state_from_graph_safe(gs, back));
    ck_assert_ok(recap_generator_get_state(ref, st));
    ck_assert_mem_eq(back, st, sizeof(st));
    gen_state(t, after);
    ck_assert_mem_eq(before, after, sizeof(before));
    st[8] |= 2;
    ck_assert_status(recap_state_to_graph_safe(t, st, &gs), RECAP_ERR_MISALIGNED);
    recap_generator_destroy(gs);
    recap_generator_destroy(ref);
    recap_tracker_destroy(t);
    t = new_tracker(0);
    ck_assert_ok(recap_tracker_is_graph_safe(t, &graph_safe));
    ck_assert_int_eq(graph_safe, 0);
    recap_tracker_destroy(t);
}
END_TEST

START_TEST(tracker_drives_the_generator_it_is_given)
{
    recap_tracker_params_t p = {0};
    recap_generator_h g, got;
    recap_tracker_h t;
    uint8_t st[RECAP_STATE_BYTES], want[RECAP_STATE_BYTES];
    recap_fork_token_t tok;

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    p.generator = g;
    p.flags = mode_flags(_i);
    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_tracker_generator(t, &got));
    ck_assert_ptr_eq(got, g);
    ck_assert_ok(recap_tracker_add(t, "a", 42));
    ck_assert_ok(recap_tracker_fork(t, "a", &tok));
    ck_assert_ok(recap_generator_get_state(g, st));
    encode(42, 0, want);
    ck_assert_mem_eq(st, want, sizeof(st));
    ck_assert_ok(recap_tracker_unfork(t, tok));
    ck_assert_ok(recap_tracker_destroy(t));
    /* Not owned by the tracker: still usable. */
    ck_assert_ok(recap_generator_get_state(g, st));
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

/* Two trackers driving one generator: a fork saves the generator's state and its unfork puts it
 * back, so B's fork inside A's would hand A's state B's seed. It is refused with nothing changed;
 * one after the other stays allowed (issue 20, defect 4). */
START_TEST(trackers_sharing_a_generator_cannot_interleave_forks)
{
    recap_tracker_params_t p = {.flags = mode_flags(_i), .device = RECAP_DEVICE_HOST};
    recap_tracker_h a, b, ra, rb;
    recap_generator_h g;
    recap_fork_token_t ta, tb = 0;
    uint32_t w[2 * NWORDS], ref[2 * NWORDS], wy[NWORDS], refy[NWORDS];
    const char *cur;

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    p.generator = g;
    ck_assert_ok(recap_tracker_create(&p, &a));
    ck_assert_ok(recap_tracker_create(&p, &b));
    ck_assert_ok(recap_tracker_add(a, "x", 11));
    ck_assert_ok(recap_tracker_add(b, "y", 22));
    ra = new_tracker(mode_flags(_i));
    rb = new_tracker(mode_flags(_i));
    ck_assert_ok(recap_tracker_add(ra, "x", 11));
    ck_assert_ok(recap_tracker_add(rb, "y", 22));

    ck_assert_ok(recap_tracker_fork(a, "x", &ta));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, w, NWORDS));
    ck_assert_status(recap_tracker_fork(b, "y", &tb), RECAP_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "same generator"));
    ck_assert_uint_eq(tb, 0);
    ck_assert_ok(recap_tracker_current_name(b, &cur));
    ck_assert_str_eq(cur, RECAP_RNG_DEFAULT);
    /* The generator still draws x, continuing. */
    ck_assert_ok(recap_generator_fill_u32(g, NULL, w + NWORDS, NWORDS));
    ck_assert_ok(recap_tracker_unfork(a, ta));
    ck_assert_ok(recap_tracker_fork(ra, "x", &ta));
    draw(ra, ref, NWORDS);
    draw(ra, ref + NWORDS, NWORDS);
    ck_assert_ok(recap_tracker_unfork(ra, ta));
    ck_assert_mem_eq(w, ref, sizeof(w));

    /* Once A's fork is closed, B forks; A's x kept its own progress. */
    ck_assert_ok(recap_tracker_fork(b, "y", &tb));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, wy, NWORDS));
    ck_assert_status(recap_tracker_fork(a, "x", &ta), RECAP_ERR_STATE);
    ck_assert_ok(recap_tracker_unfork(b, tb));
    fork_draw(rb, "y", refy, NWORDS);
    ck_assert_mem_eq(wy, refy, sizeof(wy));
    fork_draw(a, "x", w, NWORDS);
    fork_draw(ra, "x", ref, NWORDS);
    ck_assert_mem_eq(w, ref, NWORDS * sizeof(uint32_t));

    ck_assert_ok(recap_tracker_destroy(a));
    ck_assert_ok(recap_tracker_destroy(b));
    ck_assert_ok(recap_tracker_destroy(ra));
    ck_assert_ok(recap_tracker_destroy(rb));
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

/* One generator cannot be both: the host generator's snapshot value would overwrite the
 * tracker generator's (issue 20, defect 14). */
START_TEST(same_generator_as_generator_and_host_generator_is_rejected)
{
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_tracker_h t = NULL;
    recap_generator_h g;

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    p.generator = p.host_generator = g;
    ck_assert_status(recap_tracker_create(&p, &t), RECAP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "host_generator"));
    ck_assert_ptr_null(t);
    /* Not driven: it can be destroyed. */
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

/* ---------------------------------------------------------------- the default tracker */

START_TEST(default_tracker_before_initialize_is_a_state_error)
{
    recap_tracker_h t = NULL;

    ck_assert_status(recap_default_tracker_get(&t), RECAP_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "recap_default_tracker_initialize"));
    ck_assert_ptr_null(t);
}
END_TEST

START_TEST(default_tracker_initialize_with_same_params_returns_it)
{
    recap_tracker_params_t p = {.flags = RECAP_TRACKER_GRAPH_SAFE, .device = RECAP_DEVICE_HOST};
    recap_tracker_h a, b, c;

    ck_assert_ok(recap_default_tracker_initialize(&p, 0, &a));
    ck_assert_ok(recap_tracker_add(a, "a", 1));
    ck_assert_ok(recap_default_tracker_initialize(&p, 0, &b));
    ck_assert_ptr_eq(a, b);
    ck_assert_ok(recap_default_tracker_get(&c));
    ck_assert_ptr_eq(a, c);
    ck_assert_uint_eq(state_count(c), 1);
}
END_TEST

START_TEST(default_tracker_initialize_with_other_params_keeps_the_first)
{
    recap_tracker_params_t p = {.flags = 0, .device = RECAP_DEVICE_HOST}, q = p;
    recap_tracker_h a, b = NULL, c;

    ck_assert_ok(recap_default_tracker_initialize(&p, 0, &a));
    ck_assert_ok(recap_tracker_add(a, "a", 1));
    q.flags = RECAP_TRACKER_INFERENCE;
    ck_assert_status(recap_default_tracker_initialize(&q, 0, &b), RECAP_ERR_OPTIONS_DIFFER);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "force_reset"));
    ck_assert_ptr_null(b);
    ck_assert_ok(recap_default_tracker_get(&c));
    ck_assert_ptr_eq(a, c);
    ck_assert_uint_eq(state_count(c), 1);
}
END_TEST

START_TEST(default_tracker_force_reset_replaces_it)
{
    recap_tracker_params_t p = {.flags = 0, .device = RECAP_DEVICE_HOST}, q = p;
    recap_tracker_h a, b, c;
    recap_fork_token_t tok;
    int graph_safe = 0;

    ck_assert_ok(recap_default_tracker_initialize(&p, 0, &a));
    ck_assert_ok(recap_tracker_add(a, "a", 1));
    q.flags = RECAP_TRACKER_GRAPH_SAFE;
    ck_assert_ok(recap_default_tracker_initialize(&q, 1, &b));
    ck_assert_ok(recap_default_tracker_get(&c));
    ck_assert_ptr_eq(b, c);
    ck_assert_ok(recap_tracker_is_graph_safe(c, &graph_safe));
    ck_assert_int_eq(graph_safe, 1);
    ck_assert_uint_eq(state_count(c), 0);
    /* A default tracker with a fork open cannot be replaced under its forks. */
    ck_assert_ok(recap_tracker_add(c, "a", 1));
    ck_assert_ok(recap_tracker_fork(c, "a", &tok));
    ck_assert_status(recap_default_tracker_initialize(&p, 1, &a), RECAP_ERR_STATE);
    ck_assert_ok(recap_default_tracker_get(&a));
    ck_assert_ptr_eq(a, c);
    ck_assert_ok(recap_tracker_unfork(c, tok));
}
END_TEST

START_TEST(destroying_the_default_tracker_is_refused)
{
    recap_tracker_params_t p = {.flags = 0, .device = RECAP_DEVICE_HOST};
    recap_tracker_h a, b;
    uint8_t st[RECAP_STATE_BYTES];

    ck_assert_ok(recap_default_tracker_initialize(&p, 0, &a));
    ck_assert_ok(recap_tracker_add(a, "a", 7));
    ck_assert_status(recap_tracker_destroy(a), RECAP_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "recap_default_tracker_initialize"));
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "force_reset"));
    /* Still the default and still whole: its state can be used. */
    ck_assert_ok(recap_default_tracker_get(&b));
    ck_assert_ptr_eq(a, b);
    ck_assert_uint_eq(state_count(b), 1);
    named_state(b, "a", st);
    fork_draw(b, "a", (uint32_t[NWORDS]){0}, NWORDS);
    /* force_reset is the way to replace it; the new default is refused the same way. */
    ck_assert_ok(recap_default_tracker_initialize(&p, 1, &b));
    ck_assert_ptr_ne(a, b);
    ck_assert_status(recap_tracker_destroy(b), RECAP_ERR_STATE);
}
END_TEST

/* ---------------------------------------------------------------- threads */

#define THREAD_ITERS 100000

typedef struct {
    recap_tracker_h t;
    uint64_t base;
    uint64_t hash;
    uint8_t a[RECAP_STATE_BYTES], b[RECAP_STATE_BYTES], dflt[RECAP_STATE_BYTES];
    int failed;
} solo_t;

/* Forks "a" every iteration and "b" inside it every third, drawing in each; folds the words
 * into a hash. Returns through s, asserting nothing (Check asserts are not thread-safe). */
static void *solo_run(void *arg)
{
    solo_t *s = arg;
    recap_generator_h g;
    recap_fork_token_t ta, tb;
    uint32_t w[4];
    uint64_t h = 0xcbf29ce484222325ULL;
    int i, k, bad = 0;

    recap_tracker_generator(s->t, &g);
    for (i = 0; i < THREAD_ITERS; i++) {
        bad |= recap_tracker_fork(s->t, "a", &ta) != RECAP_OK;
        bad |= recap_generator_fill_u32(g, NULL, w, 4) != RECAP_OK;
        if (i % 3 == 0) {
            bad |= recap_tracker_fork(s->t, "b", &tb) != RECAP_OK;
            bad |= recap_generator_fill_u32(g, NULL, w + 2, 2) != RECAP_OK;
            bad |= recap_tracker_unfork(s->t, tb) != RECAP_OK;
        }
        bad |= recap_tracker_unfork(s->t, ta) != RECAP_OK;
        for (k = 0; k < 4; k++)
            h = (h ^ w[k]) * 0x100000001b3ULL;
    }
    s->hash = h;
    s->failed = bad;
    return NULL;
}

static void solo_setup(solo_t *s, uint32_t flags, uint64_t base)
{
    memset(s, 0, sizeof(*s));
    s->t = new_tracker(flags);
    s->base = base;
    ck_assert_ok(recap_tracker_add(s->t, "a", base));
    ck_assert_ok(recap_tracker_add(s->t, "b", base + 1));
}

static void solo_finish(solo_t *s)
{
    ck_assert_int_eq(s->failed, 0);
    named_state(s->t, "a", s->a);
    named_state(s->t, "b", s->b);
    gen_state(s->t, s->dflt);
    recap_tracker_destroy(s->t);
}

START_TEST(threads_on_their_own_trackers_draw_what_one_thread_draws)
{
    solo_t par[4], one;
    pthread_t th[4];
    uint64_t base = tu_rand() >> 2;
    int k;

    for (k = 0; k < 4; k++)
        solo_setup(&par[k], mode_flags(_i), base + 10 * (uint64_t)k);
    for (k = 0; k < 4; k++)
        ck_assert_int_eq(pthread_create(&th[k], NULL, solo_run, &par[k]), 0);
    for (k = 0; k < 4; k++) {
        ck_assert_int_eq(pthread_join(th[k], NULL), 0);
        solo_finish(&par[k]);
    }
    for (k = 0; k < 4; k++) {
        solo_setup(&one, mode_flags(_i), base + 10 * (uint64_t)k);
        solo_run(&one);
        solo_finish(&one);
        ck_assert_uint_eq(par[k].hash, one.hash);
        ck_assert_mem_eq(par[k].a, one.a, RECAP_STATE_BYTES);
        ck_assert_mem_eq(par[k].b, one.b, RECAP_STATE_BYTES);
        ck_assert_mem_eq(par[k].dflt, one.dflt, RECAP_STATE_BYTES);
    }
}
END_TEST

#define SHARED_ITERS 20000

typedef struct {
    recap_tracker_h t;
    const char *name;
    int failed;
} shared_t;

/* Unforks that are not innermost are refused; the thread waits until its fork is on top. */
static void *shared_run(void *arg)
{
    shared_t *s = arg;
    recap_generator_h g;
    recap_fork_token_t tok;
    recap_status_t st;
    uint32_t w[4];
    int i, bad = 0;

    recap_tracker_generator(s->t, &g);
    for (i = 0; i < SHARED_ITERS; i++) {
        bad |= recap_tracker_fork(s->t, s->name, &tok) != RECAP_OK;
        bad |= recap_generator_fill_u32(g, NULL, w, 4) != RECAP_OK;
        while ((st = recap_tracker_unfork(s->t, tok)) == RECAP_ERR_STATE)
            sched_yield();
        bad |= st != RECAP_OK;
    }
    s->failed = bad;
    return NULL;
}

/* The little-endian word at p (a state's seed at st, its offset at st + 8). */
static uint64_t le64_at(const uint8_t *p)
{
    uint64_t v = 0;
    int i;

    for (i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t offset_of(const uint8_t st[RECAP_STATE_BYTES])
{
    return le64_at(st + 8);
}

START_TEST(threads_sharing_a_tracker_keep_it_consistent)
{
    recap_tracker_h t = new_tracker(mode_flags(_i));
    shared_t s[2] = {{t, "a", 0}, {t, "b", 0}};
    uint8_t a[RECAP_STATE_BYTES], b[RECAP_STATE_BYTES], d[RECAP_STATE_BYTES],
        d0[RECAP_STATE_BYTES];
    pthread_t th[2];
    const char *name;
    int k;

    ck_assert_ok(recap_tracker_add(t, "a", 1));
    ck_assert_ok(recap_tracker_add(t, "b", 2));
    gen_state(t, d0);
    for (k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_create(&th[k], NULL, shared_run, &s[k]), 0);
    for (k = 0; k < 2; k++) {
        ck_assert_int_eq(pthread_join(th[k], NULL), 0);
        ck_assert_int_eq(s[k].failed, 0);
    }
    /* Every draw happened inside some fork, so it advanced "a" or "b", never the default. */
    named_state(t, "a", a);
    named_state(t, "b", b);
    gen_state(t, d);
    ck_assert_mem_eq(d, d0, sizeof(d));
    ck_assert_uint_eq(offset_of(a) + offset_of(b), 2 * SHARED_ITERS * 4);
    ck_assert_uint_eq(a[0], 1);
    ck_assert_uint_eq(b[0], 2);
    ck_assert_ok(recap_tracker_current_name(t, &name));
    ck_assert_str_eq(name, RECAP_RNG_DEFAULT);
    ck_assert_status(recap_tracker_unfork(t, 0), RECAP_ERR_STATE);
    ck_assert_ok(recap_tracker_destroy(t));
}
END_TEST

#ifndef RECAP_TEST_FRAMEWORK /* recap draws from a framework's generator only through it */
/* A tracker over recap's own generator locks with the generator's lock (tracker.c's
 * choose_lock), so its forks exclude draws from other threads through that one lock: a draw
 * sees one whole state (a seed that belongs to it) and no draw is lost or repeated. */
#define DRAWS 20000
#define EXCHANGES 20000

typedef struct {
    recap_generator_h g;
    uint64_t seed[DRAWS], offset[DRAWS];
    int failed;
} drawer_t;

static void *drawer_run(void *arg)
{
    drawer_t *d = arg;
    recap_philox_args_t a;
    int i;

    for (i = 0; i < DRAWS; i++) {
        if (recap_generator_reserve(d->g, NULL, 4, &a) != RECAP_OK || a.captured) {
            d->failed = 1;
            return NULL;
        }
        d->seed[i] = a.seed;
        d->offset[i] = a.offset;
        if (i % 64 == 0)
            sched_yield();
    }
    return NULL;
}

typedef struct {
    recap_tracker_h t;
    int failed;
} forker_t;

static void *forker_run(void *arg)
{
    forker_t *f = arg;
    recap_fork_token_t ta, tb;
    int i, bad = 0;

    for (i = 0; i < EXCHANGES; i++) {
        bad |= recap_tracker_fork(f->t, "a", &ta) != RECAP_OK;
        if (tu_rand_below(2)) {
            bad |= recap_tracker_fork(f->t, "b", &tb) != RECAP_OK;
            bad |= recap_tracker_unfork(f->t, tb) != RECAP_OK;
        }
        bad |= recap_tracker_unfork(f->t, ta) != RECAP_OK;
    }
    f->failed = bad;
    return NULL;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

    return (a > b) - (a < b);
}

static uint64_t seed_of(const uint8_t st[RECAP_STATE_BYTES])
{
    return le64_at(st);
}

START_TEST(draws_from_another_thread_see_whole_states_while_the_tracker_forks)
{
    recap_tracker_h t = new_tracker(mode_flags(_i));
    static drawer_t d;
    forker_t f = {t, 0};
    uint8_t st[3][RECAP_STATE_BYTES];
    static uint64_t offs[DRAWS];
    uint64_t base = (tu_rand() >> 2) | 1, seeds[3];
    pthread_t th[2];
    size_t k, n, i, total = 0;

    memset(&d, 0, sizeof(d));
    ck_assert_ok(recap_tracker_add(t, "a", base));
    ck_assert_ok(recap_tracker_add(t, "b", base + 1));
    ck_assert_ok(recap_tracker_generator(t, &d.g));
    ck_assert_int_eq(pthread_create(&th[0], NULL, drawer_run, &d), 0);
    ck_assert_int_eq(pthread_create(&th[1], NULL, forker_run, &f), 0);
    ck_assert_int_eq(pthread_join(th[0], NULL), 0);
    ck_assert_int_eq(pthread_join(th[1], NULL), 0);
    ck_assert_int_eq(d.failed, 0);
    ck_assert_int_eq(f.failed, 0);
    /* Each state's draws took offsets 0, 4, 8, ... once each, up to where the state now is. */
    named_state(t, "a", st[0]);
    named_state(t, "b", st[1]);
    gen_state(t, st[2]);
    for (k = 0; k < 3; k++) {
        seeds[k] = seed_of(st[k]);
        for (n = 0, i = 0; i < DRAWS; i++)
            if (d.seed[i] == seeds[k])
                offs[n++] = d.offset[i];
        qsort(offs, n, sizeof(offs[0]), cmp_u64);
        for (i = 0; i < n; i++)
            ck_assert_msg(offs[i] == 4 * i, "state %zu: draw %zu took offset %llu", k, i,
                          (unsigned long long)offs[i]);
        ck_assert_uint_eq(offset_of(st[k]), 4 * n);
        total += n;
    }
    ck_assert_uint_eq(seeds[0], base);
    ck_assert_uint_eq(seeds[1], base + 1);
    ck_assert_uint_eq(total, DRAWS); /* no draw saw a seed of no state */
    ck_assert_ok(recap_tracker_destroy(t));
}
END_TEST
#endif

/* Two trackers whose generators are each other's host generator: a snapshot of each holds its
 * lock while it reads the other generator. Sharing both generators' locks would order them both
 * ways; one of the two keeps its own lock, and both threads finish. */
#define CROSSED_ITERS 20000

typedef struct {
    recap_tracker_h t;
    pthread_barrier_t *start;
    int failed;
} crossed_t;

static void *crossed_run(void *arg)
{
    crossed_t *c = arg;
    recap_snapshot_h snap;
    recap_fork_token_t tok;
    int i, bad = 0;

    if (recap_snapshot_create(&snap) != RECAP_OK)
        bad = 1;
    pthread_barrier_wait(c->start); /* both loops overlap from their first round */
    if (bad) {
        c->failed = 1;
        return NULL;
    }
    for (i = 0; i < CROSSED_ITERS; i++) {
        bad |= recap_snapshot_take(c->t, snap) != RECAP_OK;
        bad |= recap_tracker_fork(c->t, "a", &tok) != RECAP_OK;
        bad |= recap_tracker_unfork(c->t, tok) != RECAP_OK;
        bad |= recap_snapshot_restore(c->t, snap) != RECAP_OK;
    }
    recap_snapshot_destroy(snap);
    c->failed = bad;
    return NULL;
}

START_TEST(trackers_on_each_others_host_generators_do_not_deadlock)
{
    recap_tracker_params_t p = {.flags = mode_flags(_i), .device = RECAP_DEVICE_HOST};
    recap_generator_h g, h;
    crossed_t c[2];
    pthread_t th[2];
    pthread_barrier_t start;
    struct timespec deadline;
    int k;

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &h));
    p.generator = g;
    p.host_generator = h;
    ck_assert_ok(recap_tracker_create(&p, &c[0].t));
    p.generator = h;
    p.host_generator = g;
    ck_assert_ok(recap_tracker_create(&p, &c[1].t));
    ck_assert_int_eq(pthread_barrier_init(&start, NULL, 2), 0);
    for (k = 0; k < 2; k++) {
        c[k].failed = 0;
        c[k].start = &start;
        ck_assert_ok(recap_tracker_add(c[k].t, "a", 100 + (uint64_t)k));
    }
    for (k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_create(&th[k], NULL, crossed_run, &c[k]), 0);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    for (k = 0; k < 2; k++) {
        ck_assert_msg(pthread_timedjoin_np(th[k], NULL, &deadline) == 0,
                      "thread %d did not finish in 60 s: the two trackers deadlocked", k);
        ck_assert_int_eq(c[k].failed, 0);
    }
    pthread_barrier_destroy(&start);
    for (k = 0; k < 2; k++)
        ck_assert_ok(recap_tracker_destroy(c[k].t));
    ck_assert_ok(recap_generator_destroy(g));
    ck_assert_ok(recap_generator_destroy(h));
}
END_TEST

START_TEST(null_arguments_get_a_status_and_message)
{
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_tracker_h t = new_tracker(0);
    recap_fork_token_t tok;
    recap_generator_h g;
    recap_states_h s;
    uint8_t st[RECAP_STATE_BYTES] = {0};
    const char *name;
    size_t n;
    int v;

    ck_assert_status(recap_tracker_create(NULL, &t), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_create(&p, NULL), RECAP_ERR_INVALID_ARG);
    p.flags = 1u << 7;
    ck_assert_status(recap_tracker_create(&p, &t), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_destroy(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_reset(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_is_initialized(NULL, &v), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_is_initialized(t, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_is_graph_safe(NULL, &v), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_add(NULL, "a", 1), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_fork(NULL, "a", &tok), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_fork(t, NULL, &tok), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_fork(t, "a", NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_unfork(NULL, 1), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_generator(NULL, &g), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_current_name(NULL, &name), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_get_states(NULL, &s), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_get_states(t, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_tracker_set_states(t, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_states_copy(NULL, &s), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_states_free(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_states_count(NULL, &n), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_states_name(NULL, 0, &name), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_states_lookup(NULL, "a", st), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_state_to_graph_safe(NULL, st, &g), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_state_to_graph_safe(t, NULL, &g), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_state_from_graph_safe(NULL, st), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_default_tracker_initialize(NULL, 0, &t), RECAP_ERR_INVALID_ARG);
    ck_assert_status(recap_default_tracker_get(NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_str_eq(recap_last_error(), "tracker_p is NULL");
    ck_assert_ok(recap_tracker_destroy(t));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tracker");
    TCase *tc = tcase_create("tracker");
    TCase *dflt = tcase_create("default");
    TCase *thr = tcase_create("threads");

    tcase_add_loop_test(tc, set_states_after_get_states_round_trips, 0, 2);
    tcase_add_loop_test(tc, reset_empties_states_seeds_and_flag, 0, 2);
    tcase_add_test(tc, duplicate_seed_is_rejected_and_nothing_recorded);
    tcase_add_test(tc, duplicate_name_is_rejected_and_its_seed_not_recorded);
    tcase_add_loop_test(tc, added_state_equals_freshly_seeded_generator, 0, 2);
    tcase_add_test(tc, bad_names_are_rejected);
    tcase_add_loop_test(tc, a_long_name_in_a_message_is_cut_with_the_mark, 0, 2);
    tcase_add_loop_test(tc, nested_forks_draw_like_sequential_forks, 0, 2);
    tcase_add_loop_test(tc, deep_nested_forks_draw_like_sequential_forks, 0, 2);
    tcase_add_loop_test(tc, inner_fork_of_the_same_name_continues_it, 0, 2);
    tcase_add_loop_test(tc, fork_of_unknown_name_is_not_found, 0, 2);
    tcase_add_loop_test(tc, fork_finds_exactly_the_names_added_at_any_length, 0, 2);
    tcase_add_loop_test(tc, unfork_of_a_non_innermost_token_is_rejected, 0, 2);
    tcase_add_test(tc, unfork_without_a_fork_is_rejected);
    tcase_add_test(tc, token_of_another_tracker_is_rejected);
    tcase_add_loop_test(tc, reset_set_states_and_destroy_with_open_fork_are_rejected, 0, 2);
    tcase_add_test(tc, inference_tracker_passes_forks_through);
    tcase_add_test(tc, same_generator_as_generator_and_host_generator_is_rejected);
    tcase_add_loop_test(tc, trackers_sharing_a_generator_cannot_interleave_forks, 0, 2);
    tcase_add_test(tc, states_object_copies_counts_names_and_looks_up);
    tcase_add_loop_test(tc, built_states_object_sets_the_tracker, 0, 2);
    tcase_add_loop_test(tc, many_states_match_a_linear_model, 0, 2);
    tcase_add_test(tc, graph_safe_conversion_continues_the_sequence);
    tcase_add_loop_test(tc, tracker_drives_the_generator_it_is_given, 0, 2);
    tcase_add_test(tc, null_arguments_get_a_status_and_message);
    suite_add_tcase(s, tc);
    /* Check runs every test in a child process, so each starts without a default tracker. */
    tcase_add_test(dflt, default_tracker_before_initialize_is_a_state_error);
    tcase_add_test(dflt, default_tracker_initialize_with_same_params_returns_it);
    tcase_add_test(dflt, default_tracker_initialize_with_other_params_keeps_the_first);
    tcase_add_test(dflt, default_tracker_force_reset_replaces_it);
    tcase_add_test(dflt, destroying_the_default_tracker_is_refused);
    suite_add_tcase(s, dflt);
    tcase_set_timeout(thr, 120);
    tcase_add_loop_test(thr, threads_on_their_own_trackers_draw_what_one_thread_draws, 0, 2);
    tcase_add_loop_test(thr, threads_sharing_a_tracker_keep_it_consistent, 0, 2);
#ifndef RECAP_TEST_FRAMEWORK
    tcase_add_loop_test(thr, draws_from_another_thread_see_whole_states_while_the_tracker_forks,
                        0, 2);
#endif
    tcase_add_loop_test(thr, trackers_on_each_others_host_generators_do_not_deadlock, 0, 2);
    suite_add_tcase(s, thr);
    return tu_run(s);
}
