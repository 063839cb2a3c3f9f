/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap-probe: tells an engineer, before a long training job, what this machine's CUDA stack
 * does with graph capture and RNG. The checks live in librecap (recap_probe_run); this tool
 * prints them as a table or JSON, and runs commands under recap's preload hooks (--run).
 * `recap-probe --help` is the manual.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hooks/report.h"
#include "recap.h"
#include "tools/facts.h"
#include "base/json.h"
#include "tools/json.h"
#include "tools/manual.h"

#define EXIT_USAGE 2
/* The --json document's schema: raised when a member goes away or changes meaning (new members
 * may appear without it). */
#define PROBE_JSON_SCHEMA 1
#define NAME_COL 16 /* the table's detail starts at NAME_COL + RESULT_COL */
#define RESULT_COL 8

extern char **environ;

/* ---------------------------------------------------------------- the manual */

static void manual(man_format_t format)
{
    const recap_probe_check_info_t *checks;
    size_t i, n = 0;
    man_t m;

    recap_probe_checks(&checks, &n);
    man_begin(&m, stdout, format, "recap-probe", "1", recap_version_string(),
              "what this machine's CUDA stack does with graph capture and RNG");
    man_section(&m, "SYNOPSIS");
    man_lines(&m, "recap-probe [--json] [--strict] [--check NAME]...\n"
                  "recap-probe [--json] --run [--] COMMAND [ARG]...\n"
                  "recap-probe --help | --man | --version");
    man_section(&m, "DESCRIPTION");
    man_para(&m, "Runs recap's checks in this process, on the driver, runtime and devices a job "
             "started here would get, and prints a table (check, result, detail) or, with "
             "--json, one JSON document. Results are PASS, FAIL (the detail says why), WARN "
             "(nothing failed, but a job run this way would miss something, and the detail says "
             "what to do: the hooks check when no interception front end is active) or N/A "
             "(not applicable: no CUDA driver, device, library or entry point). Without a GPU "
             "or CUDA driver the device checks are N/A and the host checks still run.");
    man_para(&m, "After the checks come the Python and PyTorch a job here would get (python3 from "
             "PATH, asked with a time limit) and every RECAP_* variable set. With --json the "
             "document also holds the facts the checks state in prose, as values: driver and "
             "runtime versions, the devices (name, compute capability, memory), the front end "
             "and CUPTI's state (the latter two when the hooks check ran), whether registration "
             "is needed (when that check ran), Python and torch, and the RECAP_* settings (those "
             "recap does not know or whose value it does not take named in settings_flagged, "
             "and marked so in the table's settings line). Its "
             "\"schema\" number changes when a member goes away or changes meaning; new "
             "members may appear without it. Detail lines wrap to the terminal's width "
             "(COLUMNS, else the tty's); written to a file or a pipe they do not wrap.");
    man_para(&m, "With --run, runs COMMAND with recap preloaded (LD_PRELOAD=the "
             RECAP_INTERPOSER_SONAME " beside the librecap this tool uses, before any LD_PRELOAD "
             "already set) and RECAP_REPORT=a temporary file, waits for it (as long as it runs: "
             "bound it with timeout(1) if need be), and prints what recap saw in it by its exit: "
             "the interception front "
             "end, captures, graphs drawing random numbers, their launches, launches that "
             "rewrote device slots, generator states primed and RNG records still live. The "
             "command's own output goes where it would; recap-probe's comes after it (with "
             "--json, as the last line). Every process that loads librecap adds its report at its "
             "exit: for a command that starts others the counts are summed over them "
             "(\"processes\" says how many reported) and other values are the last one's to "
             "exit; the fields that name one process (time, host, pid, rank) are left out. Every "
             "string is printed as valid UTF-8 JSON, whatever bytes the report or a RECAP_* "
             "value holds (invalid UTF-8 becomes U+FFFD). recap.torch adds a line of its own "
             "when the first replay of a graph it made differs from the same step run eagerly: "
             "graph_mismatches counts them and graph_mismatch says what differed in the last "
             "one (a PyTorch job under recap-run; the command runs with "
             "RECAP_VERIFY_GRAPHS=warn unless it is set).");
    man_section(&m, "OPTIONS");
    man_item(&m, "--check NAME", "Run only this check; repeat, or give NAME,NAME..., for more "
             "(default: all).");
    man_item(&m, "--json", "Print one JSON document instead of the table.");
    man_item(&m, "--strict", "Fail (exit 1) when there is no CUDA driver or no CUDA device, "
             "or a check warned, as a job script's preflight: without it those checks are just "
             "N/A or WARN. Run it the way the job runs (under LD_PRELOAD=" RECAP_INTERPOSER_SONAME
             ", RECAP_HOOKS=cupti, ...), or the hooks check warns that no front end is active.");
    man_item(&m, "--run", "Run COMMAND under recap's preload hooks and report (see above).");
    man_item(&m, "-h, --help", "Print this manual.");
    man_item(&m, "--man", "Print this manual as a man page (roff): the recap-probe.1 make "
             "installs.");
    man_item(&m, "--version", "Print recap's version and ABI.");
    man_section(&m, "CHECKS");
    for (i = 0; i < n; i++)
        man_item(&m, checks[i].name, checks[i].summary);
    man_section(&m, "ENVIRONMENT");
    man_item(&m, "RECAP_CUDA_DRIVER", "The CUDA driver library to load instead of libcuda.so.1.");
    man_item(&m, "RECAP_LOG", "warn, info or debug: recap's log, on stderr (lines as "
             "NCCL_DEBUG's: HOST:PID:TID [RANK] recap LEVEL message).");
    man_item(&m, "RECAP_LOG_FILE", "The log's file instead of stderr (%h: host name, %p: "
             "process id).");
    man_item(&m, "RECAP_LOG_TIME", "1: each log line starts with the UTC time.");
    man_item(&m, "RECAP_PROBE_PYTHON_TIMEOUT", "Seconds to wait for python3 to report its and "
             "torch's versions (default 10; 0: do not ask). The bound is on the whole run: a "
             "python3 that closes its output and runs on, or leaves a process holding it, is "
             "killed at the limit, with everything it started (its process group).");
    man_item(&m, "COLUMNS", "The width the table and this manual wrap to.");
    man_item(&m, "RECAP_PROBE_FAIL", "Test only: checks to fail on purpose, comma-separated "
             "(philox: flips a bit of one host-fill word).");
    man_section(&m, "EXIT STATUS");
    man_item(&m, "0", "every check passed, warned or was not applicable");
    man_item(&m, "1", "a check failed (or the checks could not run); with --strict, also no "
             "CUDA driver or device, or a check that warned");
    man_item(&m, "2", "usage error (unknown option or check name)");
    man_para(&m, "With --run: COMMAND's exit status; 128+N when a signal N ended it; 127 when it "
             "could not be started.");
    man_section(&m, "EXAMPLES");
    man_lines(&m, "recap-probe\n"
                  "recap-probe --check philox --check replay\n"
                  "recap-probe --json > probe.json\n"
                  "recap-probe --strict --check devices || exit 1\n"
                  "recap-probe --run -- python train.py --steps 20");
    man_section(&m, "SEE ALSO");
    man_para(&m, "recap-selfcheck(1)");
}

/* `fmt` has one %s, for `arg` (escaped: it may be any argument the tool was given). */
static int usage_error(const char *fmt, const char *arg)
{
    char *e = tool_text_dup(arg);

    fputs("recap-probe: ", stderr);
    fprintf(stderr, fmt, e != NULL ? e : "?");
    fputs("\nTry 'recap-probe --help'.\n", stderr);
    free(e);
    return EXIT_USAGE;
}

/* ---------------------------------------------------------------- the checks */

/* What --strict asks of a preflight: a driver, a device and no check that warned (a warning is
 * something the job would miss). NULL when all is well; otherwise the first thing missing, the
 * checks that warned named in `buf`. */
static const char *strict_failure(const probe_facts_t *f, const recap_probe_result_t *r, size_t n,
                                  char *buf, size_t len)
{
    size_t i, used = 0;

    if (f->driver_version == 0)
        return "no CUDA driver";
    if (f->ndevices == 0)
        return "no CUDA device";
    buf[0] = '\0';
    for (i = 0; i < n; i++)
        if (r[i].status == RECAP_PROBE_WARN && used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "warned: ",
                                     r[i].name);
    return buf[0] != '\0' ? buf : NULL;
}

/* The results as the table shows them, by status (include/recap/probe.h's order). */
static const char *const shown[] = {"PASS", "FAIL", "N/A", "WARN"};
#define NSTATUS (sizeof(shown) / sizeof(shown[0]))

static void print_table(const recap_probe_result_t *r, size_t n, const probe_facts_t *f,
                        const char *strict)
{
    size_t i, counts[NSTATUS] = {0};
    int width = tool_term_width(); /* 0 (no wrapping) when stdout is not a terminal */

    printf("recap %s: %zu check%s\n\n%-*s%-*s%s\n", recap_version_string(), n, n == 1 ? "" : "s",
           NAME_COL, "CHECK", RESULT_COL, "RESULT", "DETAIL");
    for (i = 0; i < n; i++) {
        counts[r[i].status]++;
        printf("%-*s%-*s", NAME_COL, r[i].name, RESULT_COL, shown[r[i].status]); /* recap's */
        tool_wrap(stdout, r[i].detail, NAME_COL + RESULT_COL, NAME_COL + RESULT_COL, width);
    }
    facts_table(f, width);
    printf("\n%zu passed, %zu warned, %zu failed, %zu not applicable\n", counts[RECAP_PROBE_PASS],
           counts[RECAP_PROBE_WARN], counts[RECAP_PROBE_FAIL], counts[RECAP_PROBE_NA]);
    if (strict != NULL)
        printf("--strict: %s\n", strict); /* recap's check names */
}

static void print_json(const recap_probe_result_t *r, size_t n, const probe_facts_t *f,
                       const char *strict, int exit_status)
{
    size_t i, counts[NSTATUS] = {0};

    printf("{\"tool\":\"recap-probe\",\"schema\":%d,\"version\":", PROBE_JSON_SCHEMA);
    json_string(recap_version_string());
    printf(",\"abi\":\"%d.%d\"", recap_abi_version() >> 16, recap_abi_version() & 0xffff);
    facts_json(f);
    printf(",\"checks\":[");
    for (i = 0; i < n; i++) {
        counts[r[i].status]++;
        printf("%s{\"name\":", i ? "," : "");
        json_string(r[i].name);
        printf(",\"result\":\"%s\",\"detail\":", recap_probe_status_name(r[i].status));
        json_string(r[i].detail);
        putchar('}');
    }
    printf("],\"passed\":%zu,\"warned\":%zu,\"failed\":%zu,\"not_applicable\":%zu,"
           "\"strict_failure\":", counts[RECAP_PROBE_PASS], counts[RECAP_PROBE_WARN],
           counts[RECAP_PROBE_FAIL], counts[RECAP_PROBE_NA]);
    json_string_or_null(strict);
    printf(",\"exit_status\":%d}\n", exit_status);
}

static int run_checks(const char *only, int json, int strict)
{
    recap_probe_result_t *r;
    probe_facts_t facts;
    const char *strict_why = NULL;
    char warned[256];
    size_t i, n;
    int status = EXIT_SUCCESS;
    recap_status_t st = recap_probe_run(only, &r, &n);

    if (st == RECAP_ERR_NOT_FOUND)
        return usage_error("%s", recap_last_error());
    if (st != RECAP_OK) {
        fprintf(stderr, "recap-probe: %s: ", recap_strerror(st));
        tool_text(stderr, recap_last_error());
        fputc('\n', stderr);
        return EXIT_FAILURE;
    }
    for (i = 0; i < n; i++)
        if (r[i].status == RECAP_PROBE_FAIL)
            status = EXIT_FAILURE;
    facts_collect(&facts, r, n);
    if (strict && (strict_why = strict_failure(&facts, r, n, warned, sizeof(warned))) != NULL) {
        status = EXIT_FAILURE;
        fprintf(stderr, "recap-probe: --strict: %s\n", strict_why);
    }
    if (json)
        print_json(r, n, &facts, strict_why, status);
    else
        print_table(r, n, &facts, strict_why);
    facts_free(&facts);
    recap_probe_free(r);
    return status;
}

/* ---------------------------------------------------------------- --run */

#define MAX_FIELDS 32

/* The report the library writes at exit: one flat JSON object, kept as raw key/value text. */
typedef struct {
    char key[MAX_FIELDS][64];
    char value[MAX_FIELDS][1024];
    int n;
} report_t;

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static int hex4(const char *p, unsigned *v)
{
    int i;

    *v = 0;
    for (i = 0; i < 4; i++) {
        char c = p[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16;
        if (d == 16)
            return 0;
        *v = *v << 4 | d;
    }
    return 1;
}

/* Appends code point cp as UTF-8 (U+FFFD for a lone surrogate) to out[*n]. */
static void put_utf8(char *out, size_t *n, unsigned cp)
{
    if (cp >= 0xD800 && cp <= 0xDFFF)
        cp = 0xFFFD;
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | cp >> 6);
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | cp >> 12);
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | cp >> 18);
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* A JSON string at p (its opening quote), decoded, then written again as recap writes strings
 * (src/base/json.h): whatever bytes a report holds (another library's, a damaged file), what
 * this tool prints is valid UTF-8 JSON. Returns the position after it, or NULL. */
static const char *string_value(const char *p, char *dst, size_t cap)
{
    char raw[1024];
    size_t n = 0;

    for (p++; *p != '"'; p++) {
        unsigned cp, lo;

        if (*p == '\0' || (unsigned char)*p < 0x20 || n + 4 > sizeof(raw))
            return NULL;
        if (*p != '\\') {
            raw[n++] = *p;
            continue;
        }
        switch (*++p) {
        case '"': case '\\': case '/': raw[n++] = *p; break;
        case 'b': raw[n++] = '\b'; break;
        case 'f': raw[n++] = '\f'; break;
        case 'n': raw[n++] = '\n'; break;
        case 'r': raw[n++] = '\r'; break;
        case 't': raw[n++] = '\t'; break;
        case 'u':
            if (!hex4(p + 1, &cp))
                return NULL;
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && p[1] == '\\' && p[2] == 'u' && hex4(p + 3, &lo) &&
                lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            put_utf8(raw, &n, cp);
            break;
        default:
            return NULL;
        }
    }
    return recap__json_quote(dst, cap, raw, n) < cap ? p + 1 : NULL;
}

/* The end of the JSON number at p (RFC 8259's grammar), or NULL. */
static const char *number_end(const char *p)
{
    size_t d;

    p += *p == '-';
    if (*p == '0')
        p++;
    else if ((d = strspn(p, "0123456789")) > 0)
        p += d;
    else
        return NULL;
    if (*p == '.') {
        if ((d = strspn(p + 1, "0123456789")) == 0)
            return NULL;
        p += 1 + d;
    }
    if (*p == 'e' || *p == 'E') {
        p += 1 + (p[1] == '+' || p[1] == '-');
        if ((d = strspn(p, "0123456789")) == 0)
            return NULL;
        p += d;
    }
    return p;
}

/* Copies one JSON scalar (a string, number, true, false, null) or an array of them as JSON text
 * (strings written again: string_value); returns the position after it, or NULL when it is not
 * one or does not fit. */
static const char *scalar(const char *p, char *dst, size_t cap)
{
    const char *start = p;
    size_t len;

    if (*p == '"')
        return string_value(p, dst, cap);
    if (*p == '[') {
        size_t off = 1;

        if (cap < 3)
            return NULL;
        dst[0] = '[';
        p = skip_ws(p + 1);
        while (*p != ']') {
            if (off > 1) {
                if (*p++ != ',')
                    return NULL;
                p = skip_ws(p);
                dst[off++] = ',';
            }
            if (*p == '[' || off + 2 >= cap || (p = scalar(p, dst + off, cap - off - 1)) == NULL)
                return NULL;
            off += strlen(dst + off);
            p = skip_ws(p);
        }
        dst[off++] = ']';
        dst[off] = '\0';
        return p + 1;
    }
    if (strncmp(p, "true", 4) == 0 || strncmp(p, "null", 4) == 0) {
        p += 4;
    } else if (strncmp(p, "false", 5) == 0) {
        p += 5;
    } else if ((p = number_end(p)) == NULL) {
        return NULL;
    }
    len = (size_t)(p - start);
    if (len >= cap)
        return NULL;
    memcpy(dst, start, len);
    dst[len] = '\0';
    return p;
}

static int parse_report(const char *text, report_t *r)
{
    const char *p = skip_ws(text);

    r->n = 0;
    if (*p++ != '{')
        return -1;
    p = skip_ws(p);
    if (*p == '}')
        return *skip_ws(p + 1) == '\0' ? 0 : -1;
    for (;;) {
        if (r->n == MAX_FIELDS || *p != '"' || (p = scalar(p, r->key[r->n], 64)) == NULL)
            return -1;
        p = skip_ws(p);
        if (*p++ != ':' || (p = scalar(skip_ws(p), r->value[r->n], sizeof(r->value[0]))) == NULL)
            return -1;
        r->n++;
        p = skip_ws(p);
        if (*p == '}')
            return *skip_ws(p + 1) == '\0' ? 0 : -1;
        if (*p++ != ',')
            return -1;
        p = skip_ws(p);
    }
}

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

static int is_count(const char *v)
{
    return *v >= '0' && *v <= '9' && v[strspn(v, "0123456789")] == '\0';
}

/* How the processes' values of a field (its key, with quotes) make the command's: hooks/report.h
 * says; a field it does not list (another version's library) is summed when it is a count. */
static int merge_of(const char *key, const char *value)
{
    static const struct {
        const char *key;
        int merge;
    } fields[] = {
#define FIELD(name, type, merge) {"\"" #name "\"", RECAP__REPORT_##merge},
        RECAP__REPORT_FIELDS(FIELD)
#undef FIELD
    };
    size_t i;

    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (strcmp(fields[i].key, key) == 0)
            return fields[i].merge;
    return is_count(value) ? RECAP__REPORT_SUM : RECAP__REPORT_LAST;
}

/* What the whole command saw: one report of all its processes' lines, "processes" first, each
 * count summed, other values those of the last process to exit (per-process fields, pid and
 * such, left out). 0 when at least one line parsed, -1 when none did. */
static int summarize_report(const char *text, report_t *r)
{
    report_t *one = calloc(1, sizeof(*one));
    char *copy = strdup(text), *line, *save = NULL;
    unsigned long long processes = 0, findings = 0;
    int i, j;

    if (one == NULL || copy == NULL) {
        free(one);
        free(copy);
        return -1;
    }
    r->n = 1;
    snprintf(r->key[0], sizeof(r->key[0]), "\"processes\"");
    for (line = strtok_r(copy, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        int finding = 0;

        if (parse_report(line, one) != 0)
            continue;
        /* A line another part of recap adds ("source": recap.torch's check of a graph's first
         * replay) is a finding of a process its librecap line counts already. */
        for (i = 0; i < one->n; i++)
            finding |= strcmp(one->key[i], "\"source\"") == 0;
        if (finding)
            findings++;
        else
            processes++;
        for (i = 0; i < one->n; i++) {
            int merge = merge_of(one->key[i], one->value[i]);

            if (merge == RECAP__REPORT_PROCESS || strcmp(one->key[i], "\"source\"") == 0)
                continue;
            for (j = 1; j < r->n && strcmp(r->key[j], one->key[i]) != 0; j++)
                ;
            if (j == r->n) {
                if (r->n == MAX_FIELDS)
                    continue;
                snprintf(r->key[j], sizeof(r->key[j]), "%s", one->key[i]);
                snprintf(r->value[j], sizeof(r->value[j]), "0");
                r->n++;
            }
            if (merge == RECAP__REPORT_SUM && is_count(one->value[i]) && is_count(r->value[j]))
                snprintf(r->value[j], sizeof(r->value[j]), "%llu",
                         strtoull(r->value[j], NULL, 10) + strtoull(one->value[i], NULL, 10));
            else
                snprintf(r->value[j], sizeof(r->value[j]), "%s", one->value[i]);
        }
    }
    free(one);
    free(copy);
    snprintf(r->value[0], sizeof(r->value[0]), "%llu", processes);
    return processes + findings > 0 ? 0 : -1;
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

/* --run: the command's exit status, or 128 + the signal that ended it (as shells do). */
static int run_command(char **argv, int json)
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

/* ---------------------------------------------------------------- main */

/* Adds a --check name to the comma-separated list recap_probe_run takes. */
static int add_check(char **only, const char *name)
{
    size_t have = *only != NULL ? strlen(*only) : 0;
    char *grown;

    /* An empty name anywhere (",,,", "a,,b", "a,") would run nothing, or less than asked. */
    if (*name == '\0' || *name == ',' || name[strlen(name) - 1] == ',' || strstr(name, ",,"))
        return usage_error("%s", "--check needs check names (an empty name in the list)");
    grown = realloc(*only, have + strlen(name) + 2);
    if (grown == NULL)
        return EXIT_FAILURE;
    sprintf(grown + have, "%s%s", have ? "," : "", name);
    *only = grown;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"check", required_argument, NULL, 'c'}, {"json", no_argument, NULL, 'j'},
        {"run", no_argument, NULL, 'r'},         {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},     {"man", no_argument, NULL, 'm'},
        {"strict", no_argument, NULL, 's'},      {NULL, 0, NULL, 0},
    };
    char *only = NULL;
    int c, json = 0, run = 0, strict = 0, rc = -1;

    opterr = 0; /* our own message, then exit status 2 */
    /* "+": stop at the first non-option, so COMMAND's own options are left alone. */
    while (rc < 0 && (c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': {
            int err = add_check(&only, optarg);
            if (err != 0)
                rc = err;
            break;
        }
        case 'j': json = 1; break;
        case 'r': run = 1; break;
        case 's': strict = 1; break;
        case 'h': manual(MAN_TEXT); rc = EXIT_SUCCESS; break;
        case 'm': manual(MAN_ROFF); rc = EXIT_SUCCESS; break;
        case 'V':
            printf("recap-probe (recap %s, ABI %d.%d)\n", recap_version_string(),
                   recap_abi_version() >> 16, recap_abi_version() & 0xffff);
            rc = EXIT_SUCCESS;
            break;
        default: rc = usage_error("bad option or missing argument: %s", argv[optind - 1]); break;
        }
    }
    /* Every way out frees the --check list (a usage error used to leak it). */
    if (rc >= 0)
        ; /* an option settled it */
    else if (run && (only != NULL || strict))
        rc = usage_error("%s", "--check and --strict do not go with --run");
    else if (run && optind >= argc)
        rc = usage_error("%s", "--run needs a COMMAND");
    else if (run)
        rc = run_command(argv + optind, json);
    else if (optind < argc)
        rc = usage_error("unexpected argument '%s'", argv[optind]);
    else
        rc = run_checks(only, json, strict);
    free(only);
    /* A report that did not reach its reader is a failure (--json >/dev/full exited 0). */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "recap-probe: cannot write the output: %s\n", strerror(errno));
        if (rc == EXIT_SUCCESS)
            rc = EXIT_FAILURE;
    }
    return rc;
}
