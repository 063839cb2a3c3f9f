/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RECAP_REPORT=FILE: what recap saw, written at exit, for recap-probe --run and for people
 * reading the reports of a job's ranks. Processes that share FILE (a forked child, the ranks of
 * a job) each append their line with one write, so none overwrites or splits another's; each
 * line says whose it is (recap version, time, host, pid, rank). With "%p" in FILE each process
 * writes its own file; "%h" is the host name. src/report/report.h defines the line.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/env.h"
#include "base/ident.h"
#include "base/json.h"
#include "base/log.h"
#include "base/sink.h"
#include "base/settings.h"
#include "capture/capture.h"
#include "report/report.h"
#include "recap.h"

/* One line's values (src/report/report.h lists them). */
typedef struct {
#define FIELD(name, type, merge) RECAP__REPORT_CTYPE_##type name;
    RECAP__REPORT_FIELDS(FIELD)
#undef FIELD
} report_t;

/* Each type's value as JSON text at *off; 0 when it does not fit. */
static int put_text(char *line, size_t len, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int put_text(char *line, size_t len, size_t *off, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line + *off, len - *off, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len - *off)
        return 0;
    *off += (size_t)n;
    return 1;
}

static int put_STR(char *line, size_t len, size_t *off, const char *v)
{
    size_t n = recap__json_quote(line + *off, len - *off, v, strlen(v));

    if (n >= len - *off)
        return 0;
    *off += n;
    return 1;
}

static int put_JSON(char *line, size_t len, size_t *off, const char *v)
{
    return put_text(line, len, off, "%s", v);
}

static int put_INT(char *line, size_t len, size_t *off, long long v)
{
    return put_text(line, len, off, "%lld", v);
}

static int put_U64(char *line, size_t len, size_t *off, unsigned long long v)
{
    return put_text(line, len, off, "%llu", v);
}

/* Appends `"name":value` to the line at off (after "{" or ","); -1 when it does not fit. */
#define PUT(name, type, merge)                                                                \
    if (!put_text(line, len, &off, "%s\"" #name "\":", off == 0 ? "{" : ",") ||               \
        !put_##type(line, len, &off, r->name))                                                \
        return -1;

/* The report line (with its newline); its length, or -1 when it does not fit. */
static int format_line(char *line, size_t len, const report_t *r)
{
    size_t off = 0;

    RECAP__REPORT_FIELDS(PUT)
    return put_text(line, len, &off, "}\n") ? (int)off : -1;
}

static int report_line(char *line, size_t len, const recap_capture_stats_t *s)
{
    /* names and flagged hold names of any length whole, until full; each list's JSON stays under
     * the 1 KiB a value of recap-probe --run's may take (names escaped can grow 6 times) */
    char when[40], rank[16] = "null", names[160], list[1000];
    char flagged[1000], flagged_list[1000];
    size_t flen, i, flagged_left_out;
    recap_hooks_t hooks = RECAP_HOOKS_NONE;
    uint64_t frameworks, frameworks_left_out;
    size_t nlen;
    report_t r;

    recap__ident_time(when, sizeof(when));
    if (recap__ident_rank() >= 0)
        snprintf(rank, sizeof(rank), "%d", recap__ident_rank());
    recap_hooks_active(&hooks);
    recap__fw_seen(&frameworks, names, sizeof(names), &nlen, &frameworks_left_out);
    frameworks_left_out += recap__json_array(list, sizeof(list), names, nlen);
    /* the flagged names, space-separated and plain: as a JSON array too */
    flagged_left_out = recap__settings_flagged(flagged, sizeof(flagged));
    flen = strlen(flagged);
    for (i = 0; i < flen; i++)
        if (flagged[i] == ' ')
            flagged[i] = '\0';
    flagged_left_out += recap__json_array(flagged_list, sizeof(flagged_list), flagged,
                                   flen ? flen + 1 : 0);
    r = (report_t){.schema = RECAP__REPORT_SCHEMA, .recap = recap_version_string(), .time = when,
                   .host = recap__ident_host(), .pid = (long long)getpid(), .rank = rank,
                   .hooks = recap_hooks_name(hooks), .captures = s->captures,
                   .graphs_with_rng = s->graphs_with_rng, .launches = s->launches,
                   .slot_writes = s->slot_writes, .states_primed = s->states_primed,
                   .live_records = s->live_records, .framework_generators = frameworks,
                   .frameworks = list, .frameworks_left_out = frameworks_left_out,
                   .subscriptions = recap__events_subscribed(), .settings_flagged = flagged_list,
                   .settings_flagged_left_out = flagged_left_out};
    return format_line(line, len, &r);
}

__attribute__((destructor)) static void write_report(void)
{
    const char *spec = recap__env("RECAP_REPORT");
    char path[PATH_MAX], line[4096];
    recap_capture_stats_t s;
    int n, own, fd;

    if (spec == NULL || recap_capture_stats(&s) != RECAP_OK)
        return;
    own = recap__env_path(spec, path, sizeof(path));
    n = report_line(line, sizeof(line), &s);
    if (own < 0 || n < 0) {
        recap__env_warn("RECAP_REPORT", "RECAP_REPORT=%s: the name or the report is too long; no "
                        "report written", spec);
        return;
    }
    fd = recap__sink_open("RECAP_REPORT", spec, path, own ? O_TRUNC : O_APPEND,
                          "no report written");
    if (fd < 0)
        return;
    if (write(fd, line, (size_t)n) != n)
        recap__env_warn("RECAP_REPORT", "RECAP_REPORT=%s: short write to %s", spec, path);
    close(fd);
}
