/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap's log (src/base/log.c) and the warnings about its settings (src/base/env.c), in fresh
 * processes (the settings are read once, at load): recap-probe and recap-selfcheck,
 * tests/log_client for a fork, tests/log_line_client for a host's own line (recap_log_write).
 * The line's NCCL-style prefix, the rank from the launchers' variables, timestamps,
 * RECAP_LOG_FILE with %h and %p, the fallback to stderr, one warning for each RECAP_* value recap
 * does not understand (whatever RECAP_LOG says), one line per message whatever it holds,
 * nothing on stdout.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

/* Every setting the suite varies starts unset, whatever the environment of `make check`. */
#define CLEAN "env -u RANK -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID -u PMI_RANK -u RECAP_LOG " \
              "-u RECAP_LOG_FILE -u RECAP_LOG_TIME -u RECAP_HOOKS -u RECAP_REPORT -u RECAP_CUPTI_PATH "
/* Without a driver and without asking Python: the front end's line is all it logs. */
#define PROBE "RECAP_CUDA_DRIVER=/nonexistent RECAP_PROBE_PYTHON_TIMEOUT=0 src/tools/recap-probe"
/* recap's LD_PRELOAD front end, after a sanitizer's runtime where the suite runs under one. */
#define INTERPOSER RECAP_BUILDDIR "/src/.libs/librecap-preload.so"
/* recap-probe --check hooks under the LD_PRELOAD front end logs exactly this at info. */
#define FRONT_END_LINE "recap INFO interception front end: preload"
/* A host's line: recap_log_write(LEVEL, MESSAGE), then the status on stdout. */
#define LINE_CLIENT "tests/log_line_client"

/* The environment entries preloading the front end, quoted for the shell. Under a sanitizer its
 * runtime comes first, into libtool's wrapper script too, whose tools' leaks are not recap's. */
static const char *preload(void)
{
    static char buf[8300];

    snprintf(buf, sizeof(buf), "'%s'%s", tu_preload_env(INTERPOSER),
             getenv("RECAP_TEST_PRELOAD_FIRST") != NULL
                 ? " ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\"" : "");
    return buf;
}

static const char *probe_hooks(void)
{
    static char buf[8500];

    snprintf(buf, sizeof(buf), "%s " PROBE " --check hooks", preload());
    return buf;
}
#define PROBE_HOOKS probe_hooks()

/* Runs `env` + `cmd` and returns what it wrote on stderr (stdout discarded). */
static char *stderr_of(const char *env, const char *cmd, int *status_p)
{
    char full[9000];

    snprintf(full, sizeof(full), CLEAN "%s %s 2>&1 >/dev/null", env, cmd);
    return tu_shell(full, status_p);
}

static int count_lines(const char *s)
{
    int n = 0;

    for (; *s != '\0'; s++)
        n += *s == '\n';
    return n;
}

static const char *host(void)
{
    static char name[256];

    ck_assert_int_eq(gethostname(name, sizeof(name)), 0);
    return name;
}

START_TEST(line_names_host_pid_and_thread)
{
    char want[512];
    long pid, tid;
    int status, used = 0;
    char *err = stderr_of("RECAP_LOG=info", PROBE_HOOKS, &status);

    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(count_lines(err), 1);
    snprintf(want, sizeof(want), "%s:%%ld:%%ld %%n", host());
    ck_assert_msg(sscanf(err, want, &pid, &tid, &used) == 2 && used > 0, "%s", err);
    ck_assert_int_eq(pid, tid); /* the tool's main thread */
    ck_assert_msg(strncmp(err + used, FRONT_END_LINE "\n", strlen(FRONT_END_LINE) + 1) == 0,
                  "%s", err);
    free(err);
}
END_TEST

START_TEST(rank_comes_from_the_first_launcher_variable_set)
{
    static const struct {
        const char *env, *rank;
    } cases[] = {
        {"RANK=3", "[3] "},
        {"OMPI_COMM_WORLD_RANK=5", "[5] "},
        {"SLURM_PROCID=7", "[7] "},
        {"PMI_RANK=2", "[2] "},
        {"SLURM_PROCID=9 RANK=1", "[1] "},
        {"RANK=first PMI_RANK=4", "[4] "}, /* not a number: not a rank */
    };
    char env[128], want[128];
    size_t i;
    int status;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *err;

        snprintf(env, sizeof(env), "RECAP_LOG=info %s", cases[i].env);
        err = stderr_of(env, PROBE_HOOKS, &status);
        snprintf(want, sizeof(want), " %s" FRONT_END_LINE "\n", cases[i].rank);
        ck_assert_msg(strstr(err, want) != NULL, "%s: %s", cases[i].env, err);
        free(err);
    }
}
END_TEST

/* The text after a RECAP_LOG_TIME timestamp of now and its space; fails the test without one. */
static const char *after_time(const char *line)
{
    struct tm tm = {0};
    time_t now = time(NULL), then;
    const char *rest = strptime(line, "%Y-%m-%dT%H:%M:%S", &tm);

    ck_assert_msg(rest != NULL, "%s", line);
    ck_assert_msg(rest[0] == '.' && strspn(rest + 1, "0123456789") == 6 && rest[7] == 'Z' &&
                  rest[8] == ' ', "%s", line);
    then = timegm(&tm);
    ck_assert_msg(then >= now - 60 && then <= now + 60, "%s", line); /* UTC, now */
    return rest + 9;
}

START_TEST(time_comes_first_with_RECAP_LOG_TIME)
{
    int status;
    char *err = stderr_of("RECAP_LOG=info RECAP_LOG_TIME=1", PROBE_HOOKS, &status);

    ck_assert_ptr_nonnull(strstr(after_time(err), " " FRONT_END_LINE));
    free(err);
}
END_TEST

/* The name of the only file in dir (NULL when there is not exactly one). */
static char *only_file(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char *name = NULL;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && n++ == 0)
            name = strdup(e->d_name);
    closedir(d);
    if (n != 1) {
        free(name);
        return NULL;
    }
    return name;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text = calloc(1, 65536);

    ck_assert_msg(f != NULL && text != NULL, "cannot read %s", path);
    ck_assert_uint_lt(fread(text, 1, 65535, f), 65535);
    fclose(f);
    return text;
}

START_TEST(log_file_names_host_and_pid)
{
    char dir[] = "/tmp/recap-log-XXXXXX", env[256], want[512], path[512];
    int status;
    long pid;
    char *err, *name, *text;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(env, sizeof(env), "RECAP_LOG=info RECAP_LOG_FILE=%s/r.%%h.%%p.log", dir);
    err = stderr_of(env, PROBE_HOOKS, &status);
    ck_assert_msg(*err == '\0', "stderr: %s", err);
    name = only_file(dir);
    ck_assert_ptr_nonnull(name);
    snprintf(want, sizeof(want), "r.%s.%%ld.log", host());
    ck_assert_msg(sscanf(name, want, &pid) == 1, "%s", name);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    text = slurp(path);
    snprintf(want, sizeof(want), "%s:%ld:%ld " FRONT_END_LINE "\n", host(), pid, pid);
    ck_assert_str_eq(text, want);
    unlink(path);
    rmdir(dir);
    free(err);
    free(name);
    free(text);
}
END_TEST

START_TEST(unwritable_log_file_warns_once_then_logs_to_stderr)
{
    int status;
    char *err = stderr_of("RECAP_LOG=info RECAP_LOG_FILE=/nonexistent/dir/recap.log",
                          PROBE_HOOKS, &status);
    char *line2 = strchr(err, '\n');

    ck_assert_int_eq(count_lines(err), 2);
    ck_assert_msg(strstr(err, " recap WARN RECAP_LOG_FILE=/nonexistent/dir/recap.log: cannot "
                         "open /nonexistent/dir/recap.log: No such file or directory; logging "
                         "to stderr\n") != NULL, "%s", err);
    ck_assert_ptr_nonnull(strstr(line2, " " FRONT_END_LINE "\n"));
    free(err);
}
END_TEST

/* A forked child with %p in the name writes its own file; without %p, both share one. */
START_TEST(forked_child_logs_to_its_own_file_with_pid_in_the_name)
{
    char dir[] = "/tmp/recap-log-XXXXXX", env[9000], path[512], cmd[9100];
    long parent, child;
    int status, version;
    char *out, *text;

    if (recap_driver_version(&version) != RECAP_OK)
        return; /* the child logs the driver it loads */
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(env, sizeof(env), CLEAN "%s RECAP_LOG=info RECAP_LOG_FILE=%s/%%p", preload(), dir);
    snprintf(cmd, sizeof(cmd), "%s tests/log_client", env);
    out = tu_shell(cmd, &status);
    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(sscanf(out, "%ld %ld", &parent, &child), 2);
    snprintf(path, sizeof(path), "%s/%ld", dir, parent);
    text = slurp(path);
    ck_assert_msg(strstr(text, FRONT_END_LINE) != NULL && count_lines(text) == 1, "%s", text);
    free(text);
    unlink(path);
    snprintf(path, sizeof(path), "%s/%ld", dir, child);
    text = slurp(path);
    ck_assert_msg(strstr(text, " recap INFO loaded CUDA driver") != NULL, "%s", text);
    ck_assert_ptr_null(strstr(text, FRONT_END_LINE));
    unlink(path);
    rmdir(dir);
    free(text);
    free(out);
}
END_TEST

START_TEST(without_pid_in_the_name_parent_and_child_append_to_one_file)
{
    char dir[] = "/tmp/recap-log-XXXXXX", cmd[9100], path[512], want[512];
    long parent, child;
    int status, version;
    char *out, *text;

    if (recap_driver_version(&version) != RECAP_OK)
        return;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/recap.log", dir);
    snprintf(cmd, sizeof(cmd), CLEAN "%s RECAP_LOG=info RECAP_LOG_FILE=%s tests/log_client",
             preload(), path);
    out = tu_shell(cmd, &status);
    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(sscanf(out, "%ld %ld", &parent, &child), 2);
    text = slurp(path);
    ck_assert_int_eq(count_lines(text), 2);
    snprintf(want, sizeof(want), ":%ld:%ld " FRONT_END_LINE "\n", parent, parent);
    ck_assert_msg(strstr(text, want) != NULL, "%s", text);
    snprintf(want, sizeof(want), ":%ld:%ld recap INFO loaded CUDA driver", child, child);
    ck_assert_msg(strstr(text, want) != NULL, "%s", text);
    unlink(path);
    rmdir(dir);
    free(text);
    free(out);
}
END_TEST

/* A RECAP_CUPTI_PATH that does not load is said once; recap goes on to the usual names. */
START_TEST(cupti_path_that_does_not_load_warns_once)
{
    int status;
    char *err = stderr_of("RECAP_CUPTI_PATH=/nonexistent/libcupti.so",
                          PROBE " --check hooks", &status);

    ck_assert_msg(count_lines(err) == 1, "%s", err);
    ck_assert_msg(strstr(err, " recap WARN RECAP_CUPTI_PATH=/nonexistent/libcupti.so: cannot "
                         "load it (") != NULL, "%s", err);
    free(err);
}
END_TEST

START_TEST(unknown_values_warn_once_even_with_logging_off)
{
    static const char *const cases[][2] = {
        {"RECAP_HOOKS=prelaod", "RECAP_HOOKS=prelaod not understood (auto|preload|cupti|off): "
                                "using auto\n"},
        {"RECAP_LOG=verbose", "RECAP_LOG=verbose not understood (off|warn|info|debug|0): "
                              "using warn\n"},
        {"RECAP_LOG_TIME=yes", "RECAP_LOG_TIME=yes not understood (0|1): using 0\n"},
    };
    size_t i;
    int status;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        /* recap-probe's hooks check reads RECAP_HOOKS again: still one warning */
        char *err = stderr_of(cases[i][0], PROBE " --check hooks", &status);

        ck_assert_msg(count_lines(err) == 1, "%s: %s", cases[i][0], err);
        ck_assert_msg(strstr(err, " recap WARN ") != NULL && strstr(err, cases[i][1]) != NULL,
                      "%s: %s", cases[i][0], err);
        free(err);
    }
}
END_TEST

START_TEST(known_values_are_quiet_in_any_case)
{
    int status;
    char *err = stderr_of("RECAP_LOG=OFF RECAP_HOOKS=Auto RECAP_LOG_TIME=0",
                          "src/tools/recap-selfcheck --version", &status);

    ck_assert_int_eq(status, 0);
    ck_assert_str_eq(err, "");
    free(err);
}
END_TEST

START_TEST(log_lines_never_reach_stdout)
{
    char cmd[9100];
    int status;
    char *out;

    snprintf(cmd, sizeof(cmd), CLEAN "RECAP_LOG=debug RECAP_HOOKS=prelaod %s 2>/dev/null",
             PROBE_HOOKS);
    out = tu_shell(cmd, &status);
    ck_assert_int_eq(status, 0);
    ck_assert_ptr_nonnull(strstr(out, "front end: preload"));
    ck_assert_ptr_null(strstr(out, " recap "));
    free(out);
}
END_TEST

/* One line per message: a setting's value holding a newline is named on one line. */
START_TEST(setting_value_with_a_newline_is_warned_about_on_one_line)
{
    int status;
    char *err = stderr_of("RECAP_HOOKS=\"$(printf 'pre\\nlaod')\"", PROBE " --check hooks",
                          &status);

    ck_assert_msg(count_lines(err) == 1, "%s", err);
    ck_assert_msg(strstr(err, " recap WARN RECAP_HOOKS=pre\\nlaod not understood") != NULL, "%s",
                  err);
    free(err);
}
END_TEST

/* Issue 46: a host's line is in recap's log file, with recap's time, host:pid:tid and rank. */
START_TEST(host_line_lands_in_the_log_file_with_time_and_rank)
{
    char dir[] = "/tmp/recap-log-XXXXXX", cmd[512], want[512], path[512];
    int status;
    long pid;
    char *out, *name, *text;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(cmd, sizeof(cmd), CLEAN "RANK=3 RECAP_LOG=warn RECAP_LOG_TIME=1 "
             "RECAP_LOG_FILE=%s/%%p.log " LINE_CLIENT " 1 'the host says this' 2>&1", dir);
    out = tu_shell(cmd, &status);
    ck_assert_int_eq(status, 0);
    ck_assert_str_eq(out, "0\n"); /* RECAP_OK, and nothing on stderr */
    name = only_file(dir);
    ck_assert_ptr_nonnull(name);
    ck_assert_int_eq(sscanf(name, "%ld.log", &pid), 1);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    text = slurp(path);
    ck_assert_int_eq(count_lines(text), 1);
    snprintf(want, sizeof(want), "%s:%ld:%ld [3] recap WARN the host says this\n", host(), pid,
             pid);
    ck_assert_str_eq(after_time(text), want);
    unlink(path);
    rmdir(dir);
    free(out);
    free(name);
    free(text);
}
END_TEST

/* A host cannot forge lines: newlines and other control characters are written escaped. */
START_TEST(host_message_with_newlines_stays_one_line)
{
    int status;
    char *err = stderr_of("RECAP_LOG=warn", LINE_CLIENT " 1 \"$(printf 'one\\nh:1:1 recap WARN "
                          "forged\\r\\t\\033[0m\\\\')\"", &status);
    const char *msg = strstr(err, " recap WARN ");

    ck_assert_int_eq(status, 0);
    ck_assert_msg(count_lines(err) == 1 && msg != NULL, "%s", err);
    ck_assert_str_eq(msg, " recap WARN one\\nh:1:1 recap WARN forged\\r\\t\\x1b[0m\\\n");
    free(err);
}
END_TEST

/* A level RECAP_LOG leaves out is nothing to do, not an error. */
START_TEST(host_line_below_the_level_is_not_written_and_not_an_error)
{
    static const char *const cases[][2] = {
        {"RECAP_LOG=warn", "2"}, {"RECAP_LOG=info", "3"}, {"RECAP_LOG=off", "1"}, {"", "1"},
    };
    char cmd[256];
    size_t i;
    int status;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out;

        snprintf(cmd, sizeof(cmd), CLEAN "%s " LINE_CLIENT " %s 'not written' 2>&1", cases[i][0],
                 cases[i][1]);
        out = tu_shell(cmd, &status);
        ck_assert_int_eq(status, 0);
        ck_assert_msg(strcmp(out, "0\n") == 0, "%s level %s: %s", cases[i][0], cases[i][1], out);
        free(out);
    }
}
END_TEST

/* RECAP_LOG_WARN_UNLESS_OFF: a warning also when RECAP_LOG is unset or empty; off and 0 silence
 * it, and a level that shows warnings shows it as one. */
START_TEST(host_warning_unless_off_shows_by_default)
{
    static const struct {
        const char *env;
        int shown;
    } cases[] = {{"", 1}, {"RECAP_LOG=", 1}, {"RECAP_LOG=warn", 1}, {"RECAP_LOG=debug", 1},
                 {"RECAP_LOG=off", 0}, {"RECAP_LOG=0", 0}};
    char cmd[256];
    size_t i;
    int status;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out;

        snprintf(cmd, sizeof(cmd), CLEAN "%s " LINE_CLIENT " 4 'said by default' 2>&1",
                 cases[i].env);
        out = tu_shell(cmd, &status);
        ck_assert_int_eq(status, 0);
        ck_assert_msg((strstr(out, " recap WARN said by default\n") != NULL) == cases[i].shown,
                      "%s: %s", cases[i].env, out);
        ck_assert_msg(strstr(out, "0\n") != NULL, "%s: %s", cases[i].env, out);
        free(out);
    }
}
END_TEST

START_TEST(host_line_with_a_bad_level_or_no_message_is_invalid)
{
    static const int bad[] = {0, 5, -1, 1000};
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(recap_log_write((recap_log_level_t)bad[i], "x"), RECAP_ERR_INVALID_ARG);
        ck_assert_msg(strstr(recap_last_error(), "is not RECAP_LOG_WARN") != NULL, "%d: %s",
                      bad[i], recap_last_error());
    }
    ck_assert_int_eq(recap_log_write(RECAP_LOG_WARN, NULL), RECAP_ERR_INVALID_ARG);
    ck_assert_str_eq(recap_last_error(), "recap_log_write: message is NULL");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, line_names_host_pid_and_thread);
    tcase_add_test(tc, rank_comes_from_the_first_launcher_variable_set);
    tcase_add_test(tc, time_comes_first_with_RECAP_LOG_TIME);
    tcase_add_test(tc, log_file_names_host_and_pid);
    tcase_add_test(tc, unwritable_log_file_warns_once_then_logs_to_stderr);
    tcase_add_test(tc, forked_child_logs_to_its_own_file_with_pid_in_the_name);
    tcase_add_test(tc, without_pid_in_the_name_parent_and_child_append_to_one_file);
    tcase_add_test(tc, cupti_path_that_does_not_load_warns_once);
    tcase_add_test(tc, unknown_values_warn_once_even_with_logging_off);
    tcase_add_test(tc, known_values_are_quiet_in_any_case);
    tcase_add_test(tc, log_lines_never_reach_stdout);
    tcase_add_test(tc, setting_value_with_a_newline_is_warned_about_on_one_line);
    tcase_add_test(tc, host_line_lands_in_the_log_file_with_time_and_rank);
    tcase_add_test(tc, host_message_with_newlines_stays_one_line);
    tcase_add_test(tc, host_line_below_the_level_is_not_written_and_not_an_error);
    tcase_add_test(tc, host_warning_unless_off_shows_by_default);
    tcase_add_test(tc, host_line_with_a_bad_level_or_no_message_is_invalid);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
