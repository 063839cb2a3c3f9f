/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The LD_PRELOAD front end against the CUDA test double: a host that finds the driver through
 * dlsym/cuGetProcAddress (tests/hooks/preload_client.c) is hooked when librecap is preloaded (its
 * captures are primed, replays equal eager runs), not hooked otherwise, and RECAP_HOOKS=off
 * turns the hooks off. The client runs as a child process with its own environment.
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

extern char **environ;

#define LIB RECAP_BUILDDIR "/src/.libs/librecap.so"
#define PRELOAD RECAP_BUILDDIR "/src/.libs/librecap-preload.so"
#define CLIENT RECAP_BUILDDIR "/tests/preload_client"

/* Runs the client with extra environment entries; returns its exit status, stderr in `err`. */
static int run_client(const char *const *extra, char *err, size_t errlen)
{
    char *envp[64];
    char errpath[] = "/tmp/recap-preload-XXXXXX";
    posix_spawn_file_actions_t fa;
    int n = 0, i, fd, status = -1;
    pid_t pid;
    FILE *f;

    for (i = 0; environ[i] != NULL && n < 40; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0 && strncmp(environ[i], "RECAP_", 6) != 0)
            envp[n++] = environ[i];
    if (getenv("RECAP_CUDA_DRIVER") != NULL) {
        static char drv[4096];
        snprintf(drv, sizeof(drv), "RECAP_CUDA_DRIVER=%s", getenv("RECAP_CUDA_DRIVER"));
        envp[n++] = drv;
    }
    envp[n++] = (char *)"RECAP_LIB=" LIB;
    for (i = 0; extra[i] != NULL; i++)
        envp[n++] = strncmp(extra[i], "LD_PRELOAD=", 11) == 0 ? (char *)tu_preload_env(extra[i] + 11)
                                                              : (char *)extra[i];
    envp[n] = NULL;
    fd = mkstemp(errpath);
    ck_assert_int_ge(fd, 0);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    ck_assert_int_eq(posix_spawn(&pid, CLIENT, &fa, NULL, (char *[]){(char *)CLIENT, NULL}, envp), 0);
    waitpid(pid, &status, 0);
    posix_spawn_file_actions_destroy(&fa);
    f = fdopen(fd, "r");
    rewind(f);
    err[fread(err, 1, errlen - 1, f)] = '\0';
    fclose(f);
    unlink(errpath);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int double_driver(void)
{
    const char *d = getenv("RECAP_CUDA_DRIVER");
    return d != NULL && strstr(d, "libcudadouble") != NULL;
}

START_TEST(preloaded_recap_hooks_a_driver_lookup_host)
{
    const char *env[] = {"LD_PRELOAD=" PRELOAD, "EXPECT_HOOKED=1", "RECAP_LOG=info", NULL};
    char err[8192];
    int rc;

    if (!double_driver())
        return; /* the client checks which object answers; on a real GPU gpu-check covers this */
    rc = run_client(env, err, sizeof(err));
    ck_assert_msg(rc == 0, "client exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, " recap INFO capture") != NULL, "no capture in the log: %s", err);
    ck_assert_msg(strstr(err, "interception front end: preload") != NULL, "%s", err);
}
END_TEST

START_TEST(without_preload_the_capture_is_refused)
{
    const char *env[] = {NULL};
    char err[8192];
    int rc;

    if (!double_driver())
        return;
    rc = run_client(env, err, sizeof(err));
    ck_assert_msg(rc == 3, "client exit %d: %s", rc, err);
    ck_assert_ptr_nonnull(strstr(err, "recap_capture_prime"));
}
END_TEST

/* The line of the single-object days, LD_PRELOAD=librecap.so: nothing is interposed, and recap
 * says so once, naming the object to preload, rather than leaving the job silently unhooked. */
START_TEST(preloading_librecap_itself_hooks_nothing_and_says_so)
{
    const char *env[] = {"LD_PRELOAD=" LIB, NULL};
    char err[8192];
    int rc;

    if (!double_driver())
        return;
    rc = run_client(env, err, sizeof(err));
    ck_assert_msg(rc == 3, "client exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "librecap.so, which interposes nothing: preload "
                              "librecap-preload.so") != NULL, "%s", err);
    ck_assert_msg(strstr(strstr(err, "interposes nothing") + 1, "interposes nothing") == NULL,
                  "warned more than once: %s", err);
}
END_TEST

START_TEST(recap_hooks_off_turns_the_preload_front_end_off)
{
    const char *env[] = {"LD_PRELOAD=" PRELOAD, "RECAP_HOOKS=off", NULL};
    char err[8192];
    int rc;

    if (!double_driver())
        return;
    rc = run_client(env, err, sizeof(err));
    ck_assert_msg(rc == 3, "client exit %d: %s", rc, err);
}
END_TEST

/* Runs the preloaded client with `extra` entries and RECAP_REPORT set: it must succeed, hooked
 * by the preload front end. Its stderr is left in `err`, its report in `buf`. */
static void run_reporting(const char *const *extra, char *err, size_t errlen, char *buf,
                          size_t len)
{
    char path[] = "/tmp/recap-report-XXXXXX", envrep[64];
    const char *env[16] = {"LD_PRELOAD=" PRELOAD, "EXPECT_HOOKED=1", envrep};
    int fd, rc, n = 3;
    FILE *f;

    while (*extra != NULL && n < 15)
        env[n++] = *extra++;
    env[n] = NULL;
    fd = mkstemp(path);
    close(fd);
    snprintf(envrep, sizeof(envrep), "RECAP_REPORT=%s", path);
    rc = run_client(env, err, errlen);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    buf[fread(buf, 1, len - 1, f)] = '\0';
    fclose(f);
    unlink(path);
    ck_assert_msg(rc == 0, "client exit %d: %s", rc, err);
    ck_assert_msg(strncmp(buf, "{\"schema\":2,", 12) == 0, "%s", buf);
    ck_assert_msg(strstr(buf, "\"hooks\":\"preload\"") != NULL, "%s", buf);
}

START_TEST(report_file_says_what_recap_saw)
{
    const char *extra[] = {NULL};
    char err[8192], buf[1024];

    if (!double_driver())
        return;
    run_reporting(extra, err, sizeof(err), buf, sizeof(buf));
    /* the client's captures: one replayed 4 times, two for an exec updated between 3 launches */
    ck_assert_msg(strstr(buf, "\"captures\":3,") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "\"launches\":7,") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "\"framework_generators\":0,\"frameworks\":[],"
                              "\"frameworks_left_out\":0,\"subscriptions\":1,"
                              "\"settings_flagged\":[],\"settings_flagged_left_out\":0}") != NULL,
                  "%s", buf);
}
END_TEST

/* RECAP_HOOKS=of (a typo of off) falls back to auto, and the preload front end reports; the
 * report names it, and the misspelt RECAP_LOGG, rather than passing them for defaults. */
START_TEST(report_names_settings_recap_does_not_take)
{
    const char *extra[] = {"RECAP_HOOKS=of", "RECAP_LOGG=info", "RECAP_TEST_ANYTHING=1", NULL};
    char err[8192], buf[1024];

    if (!double_driver())
        return;
    run_reporting(extra, err, sizeof(err), buf, sizeof(buf));
    ck_assert_msg(strstr(err, "RECAP_HOOKS=of not understood") != NULL, "%s", err);
    ck_assert_msg(strstr(buf, "\"settings_flagged\":[\"RECAP_HOOKS\",\"RECAP_LOGG\"],"
                              "\"settings_flagged_left_out\":0}") != NULL, "%s", buf);
}
END_TEST

int main(void)
{
    Suite *s;
    TCase *tc;

    /* A sanitizer-built librecap is preloaded after its sanitizer's runtime, which must come
     * first (scripts/ci-sanitize names it in RECAP_TEST_PRELOAD_FIRST); RECAP_TEST_NO_PRELOAD
     * skips the suite. */
    if (getenv("RECAP_TEST_NO_PRELOAD") != NULL)
        return 77;
    s = suite_create("preload");
    tc = tcase_create("preload");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, preloaded_recap_hooks_a_driver_lookup_host);
    tcase_add_test(tc, without_preload_the_capture_is_refused);
    tcase_add_test(tc, recap_hooks_off_turns_the_preload_front_end_off);
    tcase_add_test(tc, preloading_librecap_itself_hooks_nothing_and_says_so);
    tcase_add_test(tc, report_file_says_what_recap_saw);
    tcase_add_test(tc, report_names_settings_recap_does_not_take);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
