/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The RECAP_REPORT line, defined once: its writer (src/report/report.c) and its reader (recap-probe
 * --run, src/tools/probe.c, which sums a command's processes) both expand this list. A line is
 * one flat JSON object, these fields in this order.
 *
 * X(name, type, merge): type is how the value is written (STR a string, escaped to valid UTF-8
 * JSON whatever its bytes; JSON a JSON value given as text, already valid; INT a signed and U64 an
 * unsigned number); merge is what the reader does with it across processes (PROCESS: says whose
 * the line is, left out of the sum; LAST: the last process's value; SUM: summed).
 *
 * `schema` is RECAP__REPORT_SCHEMA: raised when a field goes away or changes meaning or type (new
 * fields do not raise it). A list holds whole entries only; its `_left_out` field says how many it
 * had no room for (the line must stay one write, and recap-probe --run reads values of up to
 * 1 KiB). 2: lists are JSON arrays (`frameworks` was one comma-separated string
 * in 1, which had no `schema` field) and every string is escaped.
 */
#ifndef RECAP_HOOKS_REPORT_H
#define RECAP_HOOKS_REPORT_H

#define RECAP__REPORT_FIELDS(X)              \
    X(schema, INT, LAST)                     \
    X(recap, STR, LAST)                      \
    X(time, STR, PROCESS)                    \
    X(host, STR, PROCESS)                    \
    X(pid, INT, PROCESS)                     \
    X(rank, JSON, PROCESS) /* null outside a job */ \
    X(hooks, STR, LAST)                      \
    X(captures, U64, SUM)                    \
    X(graphs_with_rng, U64, SUM)             \
    X(launches, U64, SUM)                    \
    X(slot_writes, U64, SUM)                 \
    X(states_primed, U64, SUM)               \
    X(live_records, U64, SUM)                \
    X(framework_generators, U64, SUM)        \
    X(frameworks, JSON, LAST) /* an array of strings */ \
    X(frameworks_left_out, U64, LAST) /* names `frameworks` had no room for */ \
    X(subscriptions, U64, SUM) \
    /* an array: RECAP_* variables unknown or with a value not taken */ \
    X(settings_flagged, JSON, LAST)          \
    X(settings_flagged_left_out, U64, LAST) /* names `settings_flagged` had no room for */

/* The C type of each value type, and its printf format. */
#define RECAP__REPORT_CTYPE_STR const char *
#define RECAP__REPORT_CTYPE_JSON const char *
#define RECAP__REPORT_CTYPE_INT long long
#define RECAP__REPORT_CTYPE_U64 unsigned long long
#define RECAP__REPORT_FMT_JSON "%s"
#define RECAP__REPORT_FMT_INT "%lld"
#define RECAP__REPORT_FMT_U64 "%llu"

enum { RECAP__REPORT_PROCESS, RECAP__REPORT_LAST, RECAP__REPORT_SUM };

#define RECAP__REPORT_SCHEMA 2

#endif
