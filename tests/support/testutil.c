/* SPDX-License-Identifier: Apache-2.0 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "testutil.h"

static uint64_t rng_state;

void tu_rand_init(void)
{
    const char *env = getenv("RECAP_TEST_SEED");

    rng_state = env != NULL ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)clock();
    fprintf(stderr, "RECAP_TEST_SEED=%" PRIu64 "\n", rng_state);
}

/* splitmix64: tiny, good enough to pick test inputs, and independent of what is tested. */
uint64_t tu_rand(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t tu_rand_below(uint64_t n)
{
    return n == 0 ? 0 : tu_rand() % n;
}

uint64_t tu_rand_offset(void)
{
    switch (tu_rand_below(3)) {
    case 0: return 0;
    case 1: return 4 * tu_rand_below(1000);
    default: return 4 * (tu_rand() >> 20);
    }
}

char *tu_shell(const char *cmd, int *status_p)
{
    size_t len = 0, cap = 1 << 16;
    char *out = malloc(cap);
    FILE *f = popen(cmd, "r");
    int ws;

    ck_assert_msg(f != NULL && out != NULL, "cannot run %s", cmd);
    while (!feof(f) && !ferror(f)) {
        if (len + 4096 >= cap)
            ck_assert_ptr_nonnull(out = realloc(out, cap *= 2));
        len += fread(out + len, 1, cap - len - 1, f);
    }
    out[len] = '\0';
    ws = pclose(f);
    ck_assert_msg(ws != -1 && WIFEXITED(ws), "%s did not exit", cmd);
    *status_p = WEXITSTATUS(ws);
    return out;
}

const char *tu_preload_env(const char *lib)
{
    static char buf[8192];
    const char *first = getenv("RECAP_TEST_PRELOAD_FIRST");

    snprintf(buf, sizeof(buf), "LD_PRELOAD=%s%s%s", first != NULL ? first : "",
             first != NULL ? " " : "", lib);
    return buf;
}

int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    tu_rand_init();
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* Same names in the same order with the same values. */
void tu_assert_states_equal(recap_states_h a, recap_states_h b)
{
    uint8_t x[RECAP_STATE_BYTES], y[RECAP_STATE_BYTES];
    size_t na, nb, i;
    const char *n1, *n2;

    ck_assert_ok(recap_states_count(a, &na));
    ck_assert_ok(recap_states_count(b, &nb));
    ck_assert_uint_eq(na, nb);
    for (i = 0; i < na; i++) {
        ck_assert_ok(recap_states_name(a, i, &n1));
        ck_assert_ok(recap_states_name(b, i, &n2));
        ck_assert_str_eq(n1, n2);
        ck_assert_ok(recap_states_lookup(a, n1, x));
        ck_assert_ok(recap_states_lookup(b, n2, y));
        ck_assert_mem_eq(x, y, sizeof(x));
    }
}

void tu_fork_draw(recap_tracker_h t, const char *name, uint32_t *w, size_t n)
{
    recap_fork_token_t tok;
    recap_generator_h g;

    ck_assert_ok(recap_tracker_generator(t, &g));
    ck_assert_ok(recap_tracker_fork(t, name, &tok));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, w, n));
    ck_assert_ok(recap_tracker_unfork(t, tok));
}

void tu_rand_path(char *buf, size_t cap, const char *prefix, size_t n)
{
    size_t i = strlen(prefix);

    ck_assert_uint_lt(n, cap);
    ck_assert_uint_le(i, n);
    memcpy(buf, prefix, i);
    for (; i < n; i++)
        buf[i] = (char)('a' + (int)tu_rand_below(26));
    buf[n] = '\0';
}

void tu_assert_named_whole_or_marked(const char *msg, const char *name, size_t min)
{
    static const char mark[] = "(cut)";
    const char *at;
    size_t i, len = strlen(msg);

    if (strstr(msg, name) != NULL)
        return;
    ck_assert_msg(len >= sizeof(mark) - 1 && strcmp(msg + len - (sizeof(mark) - 1), mark) == 0,
                  "a name cut without the mark: %s", msg);
    at = strstr(msg, "/nonexistent");
    ck_assert_msg(at != NULL, "the name is not in the text: %s", msg);
    for (i = 0; at[i] != '\0' && at[i] == name[i]; i++)
        ;
    ck_assert_msg(i >= min, "only %zu bytes of the name before the mark: %s", i, msg);
}

void tu_long_missing_path(const char *var, recap_status_t (*call)(int *), recap_status_t want)
{
    char path[4096];
    int out;

    tu_rand_init();
    tu_rand_path(path, sizeof(path), "/nonexistent/", 300 + (size_t)tu_rand_below(3000));
    setenv(var, path, 1);
    ck_assert_int_eq(call(&out), want);
    tu_assert_named_whole_or_marked(recap_last_error(), path, 200);
}
