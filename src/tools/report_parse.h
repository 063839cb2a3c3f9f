/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap-probe's reader of the RECAP_REPORT lines (report/report.h writes them): each line a flat
 * JSON object, summed over the processes of a --run command.
 */
#ifndef RECAP_TOOLS_REPORT_PARSE_H
#define RECAP_TOOLS_REPORT_PARSE_H

#define MAX_FIELDS 32

/* The report the library writes at exit: one flat JSON object, kept as raw key/value text. */
typedef struct {
    char key[MAX_FIELDS][64];
    char value[MAX_FIELDS][1024];
    int n;
} report_t;

/* What the whole command saw: one report of all its processes' lines, "processes" first, each
 * count summed, other values those of the last process to exit (per-process fields, pid and
 * such, left out). 0 when at least one line parsed, -1 when none did. */
int summarize_report(const char *text, report_t *r);

#endif
