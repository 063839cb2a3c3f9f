/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap-probe: tells an engineer, before a long training job, what this machine's CUDA stack
 * does with graph capture and RNG. The checks live in librecap (recap_probe_run); this tool
 * prints them as a table or JSON, and runs commands under recap's preload hooks (--run: run.c,
 * which reads their report with report_parse.c). `recap-probe --help` is the manual.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recap.h"
#include "tools/facts.h"
#include "tools/json.h"
#include "tools/manual.h"
#include "tools/run.h"

#define EXIT_USAGE 2
#define NAME_COL 16 /* the table's detail starts at NAME_COL + RESULT_COL */
#define RESULT_COL 8

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
