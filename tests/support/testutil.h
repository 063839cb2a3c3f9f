/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the Check suites. */
#ifndef RECAP_TESTUTIL_H
#define RECAP_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "recap.h"

/* Random test inputs: seeded from $RECAP_TEST_SEED, else from the clock; the seed is printed to
 * stderr so a failure can be replayed. */
void tu_rand_init(void);
uint64_t tu_rand(void);
uint64_t tu_rand_below(uint64_t n);

/* A random generator offset (multiple of 4), sometimes small, sometimes near 2^63. */
uint64_t tu_rand_offset(void);

/* prefix followed by random letters, n bytes in all (n < cap), for a path no file has. */
void tu_rand_path(char *buf, size_t cap, const char *prefix, size_t n);

/* An error text that holds a name recap echoes: the name whole, or its first min bytes and more
 * with the text ending in the cut mark (never cut without a sign). */
void tu_assert_named_whole_or_marked(const char *msg, const char *name, size_t min);

/* Sets `var` to a missing file's path of 300 to 3,000 random bytes; `call` must fail with `want`
 * and name the path whole or with the cut mark (the library it loads once is loaded then). */
void tu_long_missing_path(const char *var, recap_status_t (*call)(int *), recap_status_t want);

/* Asserts a status and prints recap_last_error() when it differs. */
#define ck_assert_status(expr, want)                                                       \
    do {                                                                                   \
        recap_status_t st_ = (expr);                                                       \
        ck_assert_msg(st_ == (want), "%s returned %d (%s: %s), expected %d", #expr, st_,   \
                      recap_strerror(st_), recap_last_error(), (want));                    \
    } while (0)
#define ck_assert_ok(expr) ck_assert_status((expr), RECAP_OK)

/* Same names in the same order with the same values. */
void tu_assert_states_equal(recap_states_h a, recap_states_h b);

/* Draws n words from the tracker's generator inside a fork of `name` (host memory). */
void tu_fork_draw(recap_tracker_h t, const char *name, uint32_t *w, size_t n);

/* Runs `cmd` through the shell: what it printed on stdout (free it) and its exit status. */
char *tu_shell(const char *cmd, int *status_p);

/* "LD_PRELOAD=<lib>" for a program not built with recap's sanitizer, with that sanitizer's
 * runtime first when $RECAP_TEST_PRELOAD_FIRST names it (scripts/ci-sanitize); static storage,
 * valid until the next call. */
const char *tu_preload_env(const char *lib);

/* Runs the suite and returns the process exit status. */
int tu_run(Suite *s);

/* cuRAND host generator references (PHILOX4_32_10, default ordering, generator offset
 * 65536 * offset). Return 0 on success. */
int ref_curand_u32(uint64_t seed, uint64_t offset, uint32_t *out, size_t n);
int ref_curand_uniform(uint64_t seed, uint64_t offset, float *out, size_t n);
int ref_curand_uniform_double(uint64_t seed, uint64_t offset, double *out, size_t n);

/* The framework variant of a suite (built with -DRECAP_TEST_FRAMEWORK): every tracker the suite
 * creates without a generator of its own drives a framework's generator instead
 * (tests/support/fake_framework.c), so the same tests check that recap drives a framework exactly
 * as it drives its own generators; destroying the tracker checks that every state object recap took
 * from the framework was given back. */
#ifdef RECAP_TEST_FRAMEWORK
recap_status_t tu_tracker_create(const recap_tracker_params_t *params, recap_tracker_h *tracker_p);
recap_status_t tu_tracker_destroy(recap_tracker_h tracker);
#define recap_tracker_create tu_tracker_create
#define recap_tracker_destroy tu_tracker_destroy
#endif

#endif
