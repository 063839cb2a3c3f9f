/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The dlsym interposer with the names librecap exports (src/hooks/lookup.c): a program that knows
 * nothing of recap (tests/dlsym/client.c) run with and without LD_PRELOAD=librecap-preload.so. A shim's
 * RTLD_NEXT finds the next object, never the shim; a process without CUDA sees no CUDA symbol and
 * gets no driver loaded; lookups racing dlopen/dlclose do not crash; RTLD_NEXT stays cheap.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define LIB RECAP_BUILDDIR "/src/.libs/librecap-preload.so"
#define CLIENT RECAP_BUILDDIR "/tests/dlsym_client"
#define LIBDIR RECAP_BUILDDIR "/tests/.libs"
#define DOUBLEDIR RECAP_BUILDDIR "/tests/double/.libs"

/* Runs the client (stdout and stderr together), preloaded or not, in an environment without
 * recap's settings. Under ThreadSanitizer the dynamic loader's own allocations, made under a
 * lock it cannot see, are not reported. */
static char *client(int preload, const char *args, int *status_p)
{
    const char *drv = getenv("RECAP_CUDA_DRIVER");
    char cmd[8192];

    snprintf(cmd, sizeof(cmd),
             "env -u LD_PRELOAD -u RECAP_LOG -u RECAP_HOOKS -u RECAP_REPORT "
             "TSAN_OPTIONS=\"$TSAN_OPTIONS:ignore_noninstrumented_modules=1\" "
             "RECAP_CUDA_DRIVER='%s' DLSYM_TEST_LIBDIR='%s' LD_LIBRARY_PATH='%s:%s' '%s' %s %s 2>&1",
             drv != NULL ? drv : "", LIBDIR, LIBDIR, DOUBLEDIR,
             preload ? tu_preload_env(LIB) : "RECAP_TEST_PLAIN=1", CLIENT, args);
    return tu_shell(cmd, status_p);
}

static int double_driver(void)
{
    const char *d = getenv("RECAP_CUDA_DRIVER");

    return d != NULL && strstr(d, "libcudadouble") != NULL;
}

START_TEST(shim_rtld_next_finds_the_driver_not_itself)
{
    int st_plain, st_recap;
    char *plain, *recap;

    if (!double_driver())
        return;
    plain = client(0, "shim", &st_plain);
    recap = client(1, "shim", &st_recap);
    ck_assert_msg(st_plain == 0, "plain run: exit %d: %s", st_plain, plain);
    ck_assert_msg(strstr(plain, "version 13000, rc 0") != NULL, "%s", plain);
    ck_assert_msg(st_recap == st_plain && strcmp(plain, recap) == 0,
                  "without recap (exit %d):\n%s\nwith recap (exit %d):\n%s", st_plain, plain,
                  st_recap, recap);
    free(plain);
    free(recap);
}
END_TEST

START_TEST(a_process_without_cuda_sees_no_cuda_symbols)
{
    int st;
    char *out = client(1, "nocuda", &st);

    ck_assert_msg(st == 0, "exit %d: %s", st, out);
    ck_assert_ptr_nonnull(strstr(out, "nocuda: 0 wrong answers, driver loaded: 0"));
    free(out);
    out = client(0, "nocuda", &st);
    ck_assert_msg(st == 0, "without recap: exit %d: %s", st, out);
    free(out);
}
END_TEST

START_TEST(python_ctypes_finds_no_cuda_symbol)
{
    char cmd[4096], *out;
    int st;

    if (system("command -v python3 >/dev/null 2>&1") != 0)
        return;
    /* Under scripts/ci-sanitize's ASan run, the leaks of Python itself are not recap's. */
    snprintf(cmd, sizeof(cmd),
             "env -u RECAP_LOG ASAN_OPTIONS=detect_leaks=0 '%s' python3 -c \"import ctypes; "
             "print(hasattr(ctypes.CDLL(None), 'cudaGraphLaunch'), "
             "hasattr(ctypes.CDLL(None), 'cuGraphLaunch'), "
             "hasattr(ctypes.CDLL(None), 'recap_abi_version'))\" 2>&1",
             tu_preload_env(LIB));
    out = tu_shell(cmd, &st);
    ck_assert_msg(st == 0 && strcmp(out, "False False True\n") == 0, "exit %d: %s", st, out);
    free(out);
}
END_TEST

START_TEST(lookups_racing_dlopen_and_dlclose_do_not_crash)
{
    int st;
    char *out = client(1, "race 3", &st);

    ck_assert_msg(st == 0 && strstr(out, "race: done") != NULL, "exit %d: %s", st, out);
    free(out);
}
END_TEST

START_TEST(rtld_next_stays_cheap)
{
    int st_plain, st_recap;
    char *plain = client(0, "cost", &st_plain), *recap = client(1, "cost", &st_recap);
    double plain_exported, plain_other, recap_exported, recap_other;

    ck_assert_int_eq(st_plain, 0);
    ck_assert_int_eq(st_recap, 0);
    ck_assert_int_eq(sscanf(plain, "%lf %lf", &plain_exported, &plain_other), 2);
    ck_assert_int_eq(sscanf(recap, "%lf %lf", &recap_exported, &recap_other), 2);
    fprintf(stderr, "dlsym(RTLD_NEXT) in ns, plain / with recap: cuGraphLaunch %.0f / %.0f, "
            "cuInit %.0f / %.0f\n", plain_exported, recap_exported, plain_other, recap_other);
    /* Each was up to 57 us when every lookup walked the loaded objects and opened each. */
    if (getenv("RECAP_TEST_PRELOAD_FIRST") == NULL) /* a sanitizer's costs are its own */
        ck_assert_msg(recap_exported < 10000.0 && recap_other < 10000.0, "%s", recap);
    free(plain);
    free(recap);
}
END_TEST

int main(void)
{
    Suite *s;
    TCase *tc;

    /* As test_preload: a sanitizer-built librecap goes after its runtime (tu_preload_env). */
    if (getenv("RECAP_TEST_NO_PRELOAD") != NULL)
        return 77;
    s = suite_create("dlsym");
    tc = tcase_create("dlsym");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, shim_rtld_next_finds_the_driver_not_itself);
    tcase_add_test(tc, a_process_without_cuda_sees_no_cuda_symbols);
    tcase_add_test(tc, python_ctypes_finds_no_cuda_symbol);
    tcase_add_test(tc, lookups_racing_dlopen_and_dlclose_do_not_crash);
    tcase_add_test(tc, rtld_next_stays_cheap);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
