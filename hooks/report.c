/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RECAP_REPORT=FILE: what recap saw, written at exit, for recap-probe --run and for people
 * reading the reports of a job's ranks. Processes that share FILE (a forked child, the ranks of
 * a job) each append their line with one write, so none overwrites or splits another's; each
 * line says whose it is (recap version, time, host, pid, rank). With "%p" in FILE each process
 * writes its own file; "%h" is the host name. hooks/report.h defines the line.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/env.h"
#include "base/ident.h"
#include "base/log.h"
#include "base/settings.h"
#include "capture/capture.h"
#include "hooks/report.h"
#include "recap.h"

/* The host name as a JSON string's content: host names are letters, digits, '.', '-' (and '_'
 * in practice); anything else, which would need escaping, shows as '?'. */
static void json_host(char *buf, size_t len)
{
    size_t i;

    snprintf(buf, len, "%s", recap__ident_host());
    for (i = 0; buf[i] != '\0'; i++)
        if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_", buf[i]) ==
            NULL)
            buf[i] = '?';
}

/* One line's values (hooks/report.h lists them). */
typedef struct {
#define FIELD(name, type, merge) RECAP__REPORT_CTYPE_##type name;
    RECAP__REPORT_FIELDS(FIELD)
#undef FIELD
} report_t;

/* Appends `"name":value` to the line at *off (after "{" or ","); -1 when it does not fit. */
#define PUT(name, type, merge)                                                                \
    n = snprintf(line + off, len - off, "%s\"" #name "\":" RECAP__REPORT_FMT_##type,           \
                 off == 0 ? "{" : ",", r->name);                                              \
    if (n < 0 || (size_t)n >= len - off)                                                      \
        return -1;                                                                            \
    off += (size_t)n;

/* The report line (with its newline); its length, or -1 when it does not fit. */
static int format_line(char *line, size_t len, const report_t *r)
{
    size_t off = 0;
    int n;

    RECAP__REPORT_FIELDS(PUT)
    n = snprintf(line + off, len - off, "}\n");
    return n > 0 && (size_t)n < len - off ? (int)(off + (size_t)n) : -1;
}

static int report_line(char *line, size_t len, const recap_capture_stats_t *s)
{
    char host[256], when[40], rank[16] = "null", names[160], flagged[256];
    recap_hooks_t hooks = RECAP_HOOKS_NONE;
    uint64_t frameworks;
    report_t r;

    json_host(host, sizeof(host));
    recap__ident_time(when, sizeof(when));
    if (recap__ident_rank() >= 0)
        snprintf(rank, sizeof(rank), "%d", recap__ident_rank());
    recap_hooks_active(&hooks);
    recap__fw_seen(&frameworks, names, sizeof(names));
    recap__settings_flagged(flagged, sizeof(flagged));
    r = (report_t){.recap = recap_version_string(), .time = when, .host = host,
                   .pid = (long long)getpid(), .rank = rank, .hooks = recap_hooks_name(hooks),
                   .captures = s->captures, .graphs_with_rng = s->graphs_with_rng,
                   .launches = s->launches, .slot_writes = s->slot_writes,
                   .states_primed = s->states_primed, .live_records = s->live_records,
                   .framework_generators = frameworks, .frameworks = names,
                   .subscriptions = recap__events_subscribed(), .settings_flagged = flagged};
    return format_line(line, len, &r);
}

__attribute__((destructor)) static void write_report(void)
{
    const char *spec = recap__env("RECAP_REPORT");
    char path[PATH_MAX], line[1024];
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
    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (own ? O_TRUNC : O_APPEND), 0666);
    if (fd < 0) {
        recap__env_warn("RECAP_REPORT", "RECAP_REPORT=%s: cannot open %s: %s; no report written",
                        spec, path, strerror(errno));
        return;
    }
    if (write(fd, line, (size_t)n) != n)
        recap__env_warn("RECAP_REPORT", "RECAP_REPORT=%s: short write to %s", spec, path);
    close(fd);
}
