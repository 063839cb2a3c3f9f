/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sinks that could block: RECAP_LOG_FILE and RECAP_REPORT naming a FIFO nobody reads, a FIFO
 * somebody reads, a device, a directory, /dev/null, a standard stream or a regular file, in random
 * combinations. recap never blocks its host on its own output: every process exits (a process
 * still running after a generous bound counts as hung: killed, and the test fails; nothing here
 * measures time), and what is not a regular file, a terminal, /dev/null or a standard stream gets
 * one warning per variable on stderr, the log then going to stderr and no report written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

/* The program itself, not libtool's wrapper script, whose helpers (sed, ls) would load recap too. */
#define PROBE RECAP_BUILDDIR "/src/tools/.libs/recap-probe"
/* The preload front end reports only where the interposer object is loaded. */
#define PRELOAD RECAP_BUILDDIR "/src/.libs/librecap-preload.so"
#define HUNG_AFTER_S 60 /* far beyond what a run takes: only a process that waits forever */
/* recap-probe --check hooks with RECAP_HOOKS=preload logs exactly this at info. */
#define FRONT_END_LINE "recap INFO interception front end: preload"

enum { FIFO_UNREAD, FIFO_READ, DEVICE, DIRECTORY, DEV_NULL, STD_STREAM, REGULAR, NKINDS };
static const char *const kind_names[] = {"FIFO nobody reads", "FIFO read", "device", "directory",
                                         "/dev/null", "standard stream", "regular file"};

/* Runs recap-probe --check hooks with `extra` added to a clean environment; its stderr (free
 * it). Fails the test when it has not exited after HUNG_AFTER_S. */
static char *run_probe(char *const *extra, int *status_p)
{
    char errpath[] = "/tmp/recap-sinks-err-XXXXXX", *err;
    char *argv[] = {(char *)PROBE, (char *)"--check", (char *)"hooks", NULL};
    char *envp[64];
    int n = 0, i, errfd = mkstemp(errpath), waited = 0;
    pid_t pid;
    FILE *f;
    long len;

    ck_assert_int_ge(errfd, 0);
    for (i = 0; environ[i] != NULL && n < 40; i++)
        if (strncmp(environ[i], "RECAP_", 6) != 0 && strncmp(environ[i], "RANK=", 5) != 0 &&
            strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            envp[n++] = environ[i];
    envp[n++] = (char *)"RECAP_CUDA_DRIVER=/nonexistent";
    envp[n++] = (char *)"RECAP_PROBE_PYTHON_TIMEOUT=0";
    envp[n++] = (char *)"RECAP_HOOKS=preload";
    envp[n++] = (char *)"RECAP_LOG=info";
    envp[n++] = (char *)tu_preload_env(PRELOAD);
    envp[n++] = (char *)"LD_LIBRARY_PATH=" RECAP_BUILDDIR "/src/.libs";
    for (i = 0; extra[i] != NULL; i++)
        envp[n++] = extra[i];
    envp[n] = NULL;
    pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(errfd, 2);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    ck_assert_int_gt(pid, 0);
    while (waitpid(pid, status_p, WNOHANG) == 0) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        if (++waited > HUNG_AFTER_S * 100) {
            kill(pid, SIGKILL);
            waitpid(pid, status_p, 0);
            unlink(errpath);
            ck_abort_msg("recap-probe hung writing to its sinks");
        }
        nanosleep(&ts, NULL);
    }
    f = fdopen(errfd, "r");
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    rewind(f);
    err = calloc(1, (size_t)len + 1);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq((long)fread(err, 1, (size_t)len, f), len);
    fclose(f);
    unlink(errpath);
    return err;
}

static int count(const char *s, const char *what)
{
    int n = 0;

    for (; (s = strstr(s, what)) != NULL; s++)
        n++;
    return n;
}

/* A sink of `kind` in dir, named `name`: its path. *reader gets a reading end (FIFO_READ). */
static char *make_sink(const char *dir, const char *name, int kind, int *reader)
{
    static char paths[2][512];
    static int which;
    char *path = paths[which++ % 2];

    *reader = -1;
    snprintf(path, sizeof(paths[0]), "%s/%s", dir, name);
    switch (kind) {
    case FIFO_UNREAD:
    case FIFO_READ:
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        if (kind == FIFO_READ)
            ck_assert_int_ge(*reader = open(path, O_RDONLY | O_NONBLOCK), 0);
        break;
    case DEVICE:
        snprintf(path, sizeof(paths[0]), "/dev/full"); /* a character device */
        break;
    case DIRECTORY:
        ck_assert_int_eq(mkdir(path, 0700), 0);
        break;
    case DEV_NULL:
        snprintf(path, sizeof(paths[0]), "/dev/null");
        break;
    case STD_STREAM:
        snprintf(path, sizeof(paths[0]), "/dev/stderr");
        break;
    default:
        break;
    }
    return path;
}

static int refused(int kind)
{
    return kind == FIFO_UNREAD || kind == FIFO_READ || kind == DEVICE || kind == DIRECTORY;
}

START_TEST(sinks_that_could_block_never_hang_the_host)
{
    int round;

    for (round = 0; round < 14; round++) {
        char dir[] = "/tmp/recap-sinks-XXXXXX", logvar[600], repvar[600], *extra[3] = {NULL};
        int lk = (int)tu_rand_below(NKINDS), rk = (int)tu_rand_below(NKINDS);
        int which = (int)tu_rand_below(3), use_log = which != 1, use_rep = which != 0, n = 0;
        int lreader = -1, rreader = -1, status;
        char *lpath, *rpath, *err, buf[64];

        if (round < 2) { /* the case of the issue, every run: a FIFO nobody reads */
            lk = rk = FIFO_UNREAD;
            use_log = round == 0;
            use_rep = round == 1;
        }
        ck_assert_ptr_nonnull(mkdtemp(dir));
        lpath = make_sink(dir, "log", lk, &lreader);
        snprintf(logvar, sizeof(logvar), "RECAP_LOG_FILE=%s", lpath);
        rpath = make_sink(dir, "report", rk, &rreader);
        snprintf(repvar, sizeof(repvar), "RECAP_REPORT=%s", rpath);
        if (use_log)
            extra[n++] = logvar;
        if (use_rep)
            extra[n++] = repvar;
        err = run_probe(extra, &status);
        ck_assert_msg(WIFEXITED(status), "round %d: killed", round);
        ck_assert_msg(count(err, "RECAP_LOG_FILE=") == (use_log && refused(lk)),
                      "log to a %s: %s", kind_names[lk], err);
        ck_assert_msg(count(err, "RECAP_REPORT=") == (use_rep && refused(rk)),
                      "report to a %s: %s", kind_names[rk], err);
        if (use_log && refused(lk)) /* the log went to stderr instead */
            ck_assert_msg(strstr(err, FRONT_END_LINE) != NULL && strstr(err, "logging to stderr"),
                          "%s", err);
        if (use_rep && refused(rk))
            ck_assert_msg(strstr(err, "no report written") != NULL, "%s", err);
        if (lreader >= 0) { /* nothing went into a FIFO */
            ck_assert_msg(read(lreader, buf, sizeof(buf)) <= 0, "round %d: the log went into a "
                          "FIFO (report: %s %d): %s", round, kind_names[rk], use_rep, err);
            close(lreader);
        }
        if (rreader >= 0) {
            ck_assert_msg(read(rreader, buf, sizeof(buf)) <= 0, "round %d: a report went into a "
                          "FIFO (log: %s %d): %s", round, kind_names[lk], use_log, err);
            close(rreader);
        }
        free(err);
        snprintf(logvar, sizeof(logvar), "rm -rf %s", dir);
        ck_assert_int_eq(system(logvar), 0);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sinks");
    TCase *tc = tcase_create("sinks");

    tcase_set_timeout(tc, 14 * HUNG_AFTER_S + 60);
    tcase_add_test(tc, sinks_that_could_block_never_hang_the_host);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
