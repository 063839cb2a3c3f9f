/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap-probe --run: runs a command with recap's interposer preloaded and prints what recap saw
 * (its RECAP_REPORT lines, summed), as a table or JSON.
 */
#ifndef RECAP_TOOLS_RUN_H
#define RECAP_TOOLS_RUN_H

/* The schema of recap-probe's --json documents (the checks' and --run's): raised when a member
 * goes away or changes meaning (new members may appear without it). */
#define PROBE_JSON_SCHEMA 1

/* --run: the command's exit status, or 128 + the signal that ended it (as shells do). */
int run_command(char **argv, int json);

#endif
