/* SPDX-License-Identifier: Apache-2.0 */
/* recap add-on: the diagnostics behind recap-probe.
 * Part of the one public API: <recap.h> includes this file. */
#ifndef RECAP_PROBE_H
#define RECAP_PROBE_H

#ifndef RECAP_H
#error "include <recap.h>, which includes <recap/probe.h>"
#endif

/* ---------------------------------------------------------------- diagnostics (recap-probe) */

/*
 * The checks behind the recap-probe tool: what this process's CUDA stack does with graph capture
 * and RNG (driver and runtime versions, devices, the interception front end, registration,
 * capture modes, the captured-event hazard, graph features, a Philox self-test against
 * Random123, the device and cuRAND, and a captured-graph replay test). Checks that need a GPU
 * report RECAP_PROBE_NA without a driver or device; the host checks always run. RECAP_PROBE_WARN:
 * nothing failed, but a job run this way would miss something (the hooks check when no front end
 * reports captures); the detail says what to do. The checks create their own streams, graphs and
 * generators on device 0 and leave nothing behind, but begin captures (global mode included) and
 * may load libcudart and libcurand: run them from a tool or at start-up, not while the process
 * captures graphs.
 */
typedef enum recap_probe_status {
    RECAP_PROBE_PASS = 0,
    RECAP_PROBE_FAIL = 1,
    RECAP_PROBE_NA = 2,  /* not applicable here (no driver, device, library or entry point) */
    RECAP_PROBE_WARN = 3 /* nothing failed, but something is missing (see above) */
} recap_probe_status_t;

typedef struct recap_probe_result {
    const char *name;   /* the check's name */
    recap_probe_status_t status;
    const char *detail; /* what was found and how; on failure, why */
} recap_probe_result_t;

typedef struct recap_probe_check_info {
    const char *name;
    const char *summary; /* one line: what the check probes */
} recap_probe_check_info_t;

/* The checks, in the order recap_probe_run runs them (a static table). */
RECAP_API recap_status_t recap_probe_checks(const recap_probe_check_info_t **checks_p,
                                            size_t *count_p);
/* Runs the checks named in `only` (comma-separated; NULL or "" for all), each once, in table
 * order. RECAP_ERR_NOT_FOUND, running nothing, when a name is unknown. *results_p is one
 * allocation holding the results and their text: release it with recap_probe_free. */
RECAP_API recap_status_t recap_probe_run(const char *only, recap_probe_result_t **results_p,
                                         size_t *count_p);
RECAP_API recap_status_t recap_probe_free(recap_probe_result_t *results); /* NULL is fine */
/* Short lower-case text for a result status ("pass", "fail", "na", "warn"). */
RECAP_API const char *recap_probe_status_name(recap_probe_status_t status);

#endif /* RECAP_PROBE_H */
