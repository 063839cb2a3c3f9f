/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "probe/probe.h"

/* What a check needs before it can mean anything; the gate answers "not applicable" for it, so
 * every device check says the same thing, in the same words, on a machine without a GPU. */
enum gate { GATE_NONE, GATE_DRIVER, GATE_DEVICE };

/* What each check is (public, recap_probe_checks hands this array out) ... */
static const recap_probe_check_info_t infos[] = {
    {"driver", "CUDA driver and runtime (libcudart) versions; the driver must be at least as new "
     "as the runtime"},
    {"devices", "each device's name, compute capability and memory, and whether recap's kernels "
     "load on it"},
    {"hooks", "which interception front end reports this process's captures, whether CUPTI is "
     "free or held by another subscriber (named when CUPTI names it), and the framework "
     "generators and capture subscribers this process registered"},
    {"registration", "whether generators need explicit registration for captures (a draw on an "
     "unregistered generator inside a private capture)"},
    {"capture-modes", "an empty stream capture on a private stream in global, thread-local and "
     "relaxed mode"},
    {"captured-event", "the captured-event hazard: an event recorded on a stream, queried after "
     "that stream began a capture"},
    {"graph-features", "capture-to-graph, conditional nodes, device-side graph launch and graph "
     "upload"},
    {"philox", "Philox4x32-10 against Random123's known answers; the host fill, the device fill "
     "and cuRAND against the word layout computed from Philox"},
    {"replay", "a captured RNG graph launched K times draws what K eager runs draw, fresh numbers "
     "each launch"},
    {"graph-child", "a captured RNG graph as a child graph node (nested, twice, the parent "
     "cloned): launches equal eager runs"},
    {"graph-update", "cuGraphExecUpdate and cuGraphExecChildGraphNodeSetParams: launches follow "
     "the new graph's draws"},
    {"graph-order", "two unordered child graph nodes drawing from one generator are refused"},
    {"graph-nodes", "recap's captured kernel node copied into a graph without its advance "
     "node is refused"},
    {"graph-cond", "a conditional node whose body draws is refused"},
    {"graph-devlaunch", "an exec instantiated for device-side launch that draws is refused"},
    {"graph-streams", "upload before the first launch, and launches of one generator's graph "
     "alternating between two streams, equal eager runs"},
};

/* ... and how it runs, in the same order. */
static const struct {
    enum gate gate;
    void (*run)(recap__probe_out_t *out);
} checks[] = {
    {GATE_NONE, recap__probe_driver},
    {GATE_DRIVER, recap__probe_devices},
    {GATE_NONE, recap__probe_hooks},
    {GATE_DEVICE, recap__probe_registration},
    {GATE_DEVICE, recap__probe_capture_modes},
    {GATE_DEVICE, recap__probe_captured_event},
    {GATE_DEVICE, recap__probe_graph_features},
    {GATE_NONE, recap__probe_philox},
    {GATE_DEVICE, recap__probe_replay},
    {GATE_DEVICE, recap__probe_compose_child},
    {GATE_DEVICE, recap__probe_compose_update},
    {GATE_DEVICE, recap__probe_compose_unordered},
    {GATE_DEVICE, recap__probe_compose_node_by_node},
    {GATE_DEVICE, recap__probe_compose_conditional},
    {GATE_DEVICE, recap__probe_compose_device_launch},
    {GATE_DEVICE, recap__probe_compose_streams},
};

#define NCHECKS (sizeof(checks) / sizeof(checks[0]))
_Static_assert(sizeof(infos) / sizeof(infos[0]) == NCHECKS, "one info per check");

recap_status_t recap_probe_checks(const recap_probe_check_info_t **checks_p, size_t *count_p)
{
    RECAP_CHECK_ARG(checks_p != NULL && count_p != NULL, "checks_p or count_p is NULL");
    *checks_p = infos;
    *count_p = NCHECKS;
    return RECAP_OK;
}

const char *recap_probe_status_name(recap_probe_status_t status)
{
    switch (status) {
    case RECAP_PROBE_PASS: return "pass";
    case RECAP_PROBE_FAIL: return "fail";
    case RECAP_PROBE_NA: return "na";
    case RECAP_PROBE_WARN: return "warn";
    }
    return "?";
}

static int check_index(const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < NCHECKS; i++)
        if (strlen(infos[i].name) == len && memcmp(infos[i].name, name, len) == 0)
            return (int)i;
    return -1;
}

/* Marks the checks `only` names; RECAP_ERR_NOT_FOUND (naming the known ones) for any other. */
static recap_status_t select_checks(const char *only, int selected[NCHECKS])
{
    const char *p = only, *end;
    char known[256] = "";
    size_t i;
    int idx;

    for (i = 0; i < NCHECKS; i++)
        selected[i] = only == NULL || *only == '\0';
    while (p != NULL && *p != '\0') {
        end = strchr(p, ',');
        if (end == NULL)
            end = p + strlen(p);
        if (end > p) {
            idx = check_index(p, (size_t)(end - p));
            if (idx < 0) {
                for (i = 0; i < NCHECKS; i++)
                    snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
                             i ? ", " : "", infos[i].name);
                return recap__fail(RECAP_ERR_NOT_FOUND, "unknown check '%.*s' (checks: %s)",
                                   (int)(end - p), p, known);
            }
            selected[idx] = 1;
        }
        p = *end == ',' ? end + 1 : end;
    }
    return RECAP_OK;
}

/* Answers "not applicable" for a check whose gate is closed; returns 0 when it may run. Why
 * the driver did not load is said once per run (`said_why`), not on every row. */
static int gated(enum gate gate, recap__probe_out_t *out, int *said_why)
{
    const recap__driver_t *drv;
    int count = 0;

    if (gate == GATE_NONE)
        return 0;
    if (recap__driver_get(&drv) != RECAP_OK) {
        out->status = RECAP_PROBE_NA;
        recap__probe_say(out, "not applicable: no CUDA driver");
        if (!*said_why)
            recap__probe_say(out, " (%s)", recap_last_error());
        *said_why = 1;
        return 1;
    }
    if (gate == GATE_DEVICE && (recap__device_count(&count) != RECAP_OK || count < 1)) {
        out->status = RECAP_PROBE_NA;
        recap__probe_say(out, "not applicable: no CUDA device");
        return 1;
    }
    return 0;
}

/* One block: the results, then their detail strings, so a single free releases everything. */
static recap_status_t pack(recap__probe_out_t *outs, const int *selected, size_t n,
                           recap_probe_result_t **results_p)
{
    size_t i, k = 0, bytes = n * sizeof(recap_probe_result_t);
    recap_probe_result_t *res;
    char *text;

    for (i = 0; i < NCHECKS; i++)
        if (selected[i])
            bytes += outs[i].len + 1;
    res = malloc(bytes > 0 ? bytes : 1);
    if (res == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "probe results: out of memory");
    text = (char *)(res + n);
    for (i = 0; i < NCHECKS; i++) {
        if (!selected[i])
            continue;
        memcpy(text, outs[i].detail, outs[i].len + 1);
        res[k].name = infos[i].name;
        res[k].status = outs[i].status;
        res[k].detail = text;
        text += outs[i].len + 1;
        k++;
    }
    *results_p = res;
    return RECAP_OK;
}

recap_status_t recap_probe_run(const char *only, recap_probe_result_t **results_p, size_t *count_p)
{
    int selected[NCHECKS];
    recap__probe_out_t *outs;
    recap_status_t st;
    size_t i, n = 0;
    int said_why;

    RECAP_CHECK_ARG(results_p != NULL && count_p != NULL, "results_p or count_p is NULL");
    st = select_checks(only, selected);
    if (st != RECAP_OK)
        return st;
    said_why = selected[0]; /* the driver check, first in the table, says why itself */
    outs = calloc(NCHECKS, sizeof(*outs));
    if (outs == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "probe results: out of memory");
    for (i = 0; i < NCHECKS; i++) {
        if (!selected[i])
            continue;
        n++;
        outs[i].status = RECAP_PROBE_PASS;
        if (!gated(checks[i].gate, &outs[i], &said_why))
            checks[i].run(&outs[i]);
    }
    st = pack(outs, selected, n, results_p);
    free(outs);
    if (st == RECAP_OK)
        *count_p = n;
    return st;
}

recap_status_t recap_probe_free(recap_probe_result_t *results)
{
    free(results);
    return RECAP_OK;
}
