/* SPDX-License-Identifier: Apache-2.0 */
/* recap-probe --run (run.h): the command under the preloaded interposer, and its report. */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report/report.h"
#include "recap.h"
#include "tools/json.h"
#include "tools/manual.h"
#include "tools/report_parse.h"
#include "tools/run.h"

extern char **environ;

/* The interposer object beside the librecap this tool runs with: the one to preload into the
 * command (librecap itself interposes nothing). */
static int library_path(char *buf, size_t len)
{
    void *sym = dlsym(RTLD_DEFAULT, "recap_probe_run");
    char lib[PATH_MAX];
    const char *slash;
    Dl_info info;

    if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL)
        return -1;
    if (info.dli_fname[0] == '/' || realpath(info.dli_fname, lib) == NULL)
        snprintf(lib, sizeof(lib), "%s", info.dli_fname);
    slash = strrchr(lib, '/');
    snprintf(buf, len, "%.*s" RECAP_INTERPOSER_SONAME, slash != NULL ? (int)(slash - lib + 1) : 0,
             lib);
    return access(buf, R_OK) == 0 ? 0 : -1;
}

/* The environment with LD_PRELOAD (recap first) and RECAP_REPORT set. */
static char **child_env(const char *lib, const char *report)
{
    const char *old = getenv("LD_PRELOAD"), *verify = getenv("RECAP_VERIFY_GRAPHS");
    size_t n = 0, k = 0;
    char **env;

    while (environ[n] != NULL)
        n++;
    env = calloc(n + 4, sizeof(*env));
    if (env == NULL)
        return NULL;
    for (n = 0; environ[n] != NULL; n++)
        if (strncmp(environ[n], "LD_PRELOAD=", 11) != 0 &&
            strncmp(environ[n], "RECAP_REPORT=", 13) != 0 &&
            strncmp(environ[n], "RECAP_VERIFY_GRAPHS=", 20) != 0)
            env[k++] = environ[n];
    /* recap.torch's check of new graphs warns and reports instead of raising, unless the user
     * chose: the command runs to its end and the finding is in the report. */
    if (asprintf(&env[k++], "LD_PRELOAD=%s%s%s", lib, old != NULL && *old ? ":" : "",
                 old != NULL ? old : "") < 0 ||
        asprintf(&env[k++], "RECAP_REPORT=%s", report) < 0 ||
        asprintf(&env[k++], "RECAP_VERIFY_GRAPHS=%s", verify != NULL && *verify ? verify
                                                                                  : "warn") < 0)
        return NULL;
    return env;
}

static void free_child_env(char **env)
{
    size_t n = 0;

    while (env[n] != NULL)
        n++;
    if (n >= 3) { /* the three child_env made come last; the others are environ's */
        free(env[n - 1]);
        free(env[n - 2]);
        free(env[n - 3]);
    }
    free(env);
}

/* Runs argv with env and waits, as system() does: the tool ignores ^C and ^\ meanwhile so the
 * command gets them and the report is still printed. Returns the wait status, or -1. */
static int run_and_wait(char **argv, char **env)
{
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit;
    int wstatus = -1, err;
    pid_t pid;

    sigemptyset(&ign.sa_mask);
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGQUIT, &old_quit, NULL);
        execvpe(argv[0], argv, env);
        err = errno;
        fputs("recap-probe: cannot run ", stderr);
        tool_text(stderr, argv[0]);
        fprintf(stderr, ": %s\n", strerror(err));
        _exit(err == ENOENT ? 127 : 126);
    }
    if (pid < 0)
        fprintf(stderr, "recap-probe: fork: %s\n", strerror(errno));
    while (pid > 0 && waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
        ;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    return pid > 0 ? wstatus : -1;
}

/* The report file's text (NUL-terminated, trailing blanks cut), or NULL when none was written.
 * Every process of the command that loads librecap appends its line at exit. Only the file's
 * last 64 KiB are read; a line cut by that is skipped by summarize_report. */
static char *read_report(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text = calloc(1, 65536);
    size_t len = 0;

    if (f != NULL && text != NULL) {
        if (fseek(f, -65535L, SEEK_END) != 0)
            rewind(f); /* a shorter file */
        len = fread(text, 1, 65535, f);
    }
    if (f != NULL)
        fclose(f);
    while (len > 0 && strchr(" \t\r\n", text[len - 1]) != NULL)
        text[--len] = '\0';
    if (len == 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* The summed report as one JSON object. */
static void print_report_json(const report_t *r)
{
    int i;

    printf("{");
    for (i = 0; i < r->n; i++)
        printf("%s%s:%s", i ? "," : "", r->key[i], r->value[i]);
    printf("}");
}

static void print_run_table(char **argv, const char *lib, int code, int sig, const char *text,
                            const report_t *r, int parsed)
{
    int i;

    printf("\nrecap-probe: "); /* the command's words, escaped: each report line stays one */
    for (i = 0; argv[i] != NULL; i++) {
        fputs(i ? " " : "", stdout);
        tool_text(stdout, argv[i]);
    }
    if (sig)
        printf(" was killed by signal %d (%s)\n", sig, strsignal(sig));
    else
        printf(" exited with status %d\n", code);
    fputs("preloaded: ", stdout);
    tool_text(stdout, lib);
    putchar('\n');
    if (text == NULL) {
        printf("what recap saw: no report was written (the command did not load librecap, or "
               "ended without running exit handlers: a signal, _exit)\n");
        return;
    }
    if (!parsed) {
        /* any bytes: its lines joined, escaped, as one (\n between them) */
        fputs("what recap saw: an unreadable report:\n", stdout);
        tool_text(stdout, text);
        putchar('\n');
        return;
    }
    printf("what recap saw by its exit (the command's processes together: counts summed, other "
           "values the last process's):\n");
    for (i = 0; i < r->n; i++) { /* keys and string values shown without their quotes */
        const char *k = r->key[i], *v = r->value[i];
        int klen = (int)strlen(k) - 2, vlen = (int)strlen(v);

        printf("  %.*s%*s", klen, k + 1, klen < 18 ? 18 - klen : 1, "");
        if (v[0] == '"')
            printf("%.*s\n", vlen - 2, v + 1);
        else
            printf("%s\n", v);
    }
}

/* Whether what is already on stdout ends a line (or is empty). The command wrote to the same
 * stdout: --json's document must start a line of its own to stay the last line whole. Known for
 * a regular file (read back through /proc); for a pipe or a terminal, assumed not. */
static int stdout_at_line_start(void)
{
    struct stat st;
    char last = 0;
    int fd, ok;

    fflush(stdout);
    if (fstat(STDOUT_FILENO, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    if (st.st_size == 0)
        return 1;
    fd = open("/proc/self/fd/1", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ok = pread(fd, &last, 1, st.st_size - 1) == 1 && last == '\n';
    close(fd);
    return ok;
}

static void print_run_json(char **argv, const char *lib, int code, int sig, const char *text,
                           const report_t *r, int parsed)
{
    int i;

    if (!stdout_at_line_start())
        putchar('\n');
    printf("{\"tool\":\"recap-probe\",\"schema\":%d,\"command\":[", PROBE_JSON_SCHEMA);
    for (i = 0; argv[i] != NULL; i++) {
        printf("%s", i ? "," : "");
        json_string(argv[i]);
    }
    printf("],\"library\":");
    json_string(lib);
    printf(",\"exit_status\":%d,\"signal\":%d,\"report\":", code, sig);
    if (parsed)
        print_report_json(r);
    else
        printf("null");
    if (text != NULL && !parsed) {
        printf(",\"report_error\":");
        json_string("unreadable report");
    }
    printf("}\n");
}

int run_command(char **argv, int json)
{
    char lib[PATH_MAX], report[PATH_MAX], *text, **env;
    const char *tmp = getenv("TMPDIR");
    int fd, wstatus, code = 0, sig = 0, parsed = 0;
    report_t *r = calloc(1, sizeof(*r));

    if (library_path(lib, sizeof(lib)) != 0) {
        fprintf(stderr, "recap-probe: cannot find " RECAP_INTERPOSER_SONAME " beside the librecap "
                "this tool uses\n");
        return EXIT_FAILURE;
    }
    snprintf(report, sizeof(report), "%s/recap-report-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    fd = mkstemp(report);
    if (fd < 0 || r == NULL || (env = child_env(lib, report)) == NULL) {
        int err = errno;

        fputs("recap-probe: cannot prepare the report file ", stderr);
        tool_text(stderr, report); /* TMPDIR's */
        fprintf(stderr, ": %s\n", strerror(err));
        return EXIT_FAILURE;
    }
    close(fd);
    wstatus = run_and_wait(argv, env);
    free_child_env(env);
    if (wstatus == -1)
        code = EXIT_FAILURE;
    else if (WIFSIGNALED(wstatus))
        sig = WTERMSIG(wstatus), code = 128 + sig;
    else
        code = WEXITSTATUS(wstatus);
    text = read_report(report);
    unlink(report);
    parsed = text != NULL && summarize_report(text, r) == 0;
    if (json)
        print_run_json(argv, lib, code, sig, text, r, parsed);
    else
        print_run_table(argv, lib, code, sig, text, r, parsed);
    free(text);
    free(r);
    return code;
}
