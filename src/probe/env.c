/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE /* dladdr */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <strings.h>

#include "base/dl.h"
#include "base/env.h"
#include "base/error.h"
#include "base/settings.h"
#include "probe/probe.h"

typedef int (*runtime_version_fn)(int *);

/* The CUDA runtime a host job would most likely load, by the names cudart ships under, newest
 * first. The handle stays open: cudart may register exit handlers, and unloading it under a
 * host that also uses it is never worth the risk. Returns 0 when one answered. */
static int runtime_version(int *version_p, const char **path_p)
{
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    runtime_version_fn fn;
    Dl_info info;
    size_t i;
    void *lib;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL)
            continue;
        fn = (runtime_version_fn)recap__dlsym(lib, "cudaRuntimeGetVersion");
        if (fn == NULL || fn(version_p) != 0)
            continue;
        *path_p = dladdr((void *)fn, &info) != 0 && info.dli_fname != NULL ? info.dli_fname
                                                                            : names[i];
        return 0;
    }
    return -1;
}

void recap__probe_driver(recap__probe_out_t *out)
{
    char dbuf[16], rbuf[16];
    const char *rpath = NULL;
    int dv = 0, rv = 0, have_rt = runtime_version(&rv, &rpath) == 0;

    if (recap_driver_version(&dv) != RECAP_OK) {
        out->status = RECAP_PROBE_NA;
        recap__probe_say(out, "not applicable: no CUDA driver (%s)", recap_last_error());
        if (have_rt)
            recap__probe_say(out, "; runtime %s (%s) found", recap__probe_version(rv, rbuf, 16),
                             rpath);
        return;
    }
    recap__probe_say(out, "driver %s (%d)", recap__probe_version(dv, dbuf, 16), dv);
    if (!have_rt) {
        recap__probe_say(out, "; runtime: not applicable (no libcudart.so.13, libcudart.so.12 "
                         "or libcudart.so on the library path)");
        return;
    }
    recap__probe_say(out, ", runtime %s (%d, %s)", recap__probe_version(rv, rbuf, 16), rv, rpath);
    if (dv >= rv)
        recap__probe_say(out, ": the driver supports the runtime");
    else
        recap__probe_fail(out, ": the driver is older than the runtime, whose calls will fail "
                          "with cudaErrorInsufficientDriver (update the driver or use a "
                          "runtime <= %s)", dbuf);
}

void recap__probe_devices(recap__probe_out_t *out)
{
    const recap__device_t *dev;
    char name[128];
    int d, count = 0, major, minor;
    size_t mem;

    if (recap_device_count(&count) != RECAP_OK) {
        recap__probe_fail(out, "cannot count devices: %s", recap_last_error());
        return;
    }
    if (count < 1) {
        recap__probe_fail(out, "the driver loaded but reports no CUDA device");
        return;
    }
    for (d = 0; d < count; d++) {
        recap__probe_say(out, "%s%d: ", d ? "; " : "", d);
        if (recap_device_info(d, name, sizeof(name), &major, &minor, &mem) != RECAP_OK) {
            recap__probe_fail(out, "query failed: %s", recap_last_error());
            continue;
        }
        recap__probe_say(out, "%s, sm_%d%d, %.1f GiB", name, major, minor,
                         (double)mem / (1u << 30));
        /* Loading recap's kernels is the real test: it fails on a GPU they were not built for. */
        if (recap__device_get(d, &dev) != RECAP_OK)
            recap__probe_fail(out, ", recap's kernels do not load: %s", recap_last_error());
    }
}

/* The framework generators and capture subscribers this process registered (a framework that
 * runs the probe in its own process, e.g. from Python, sees its own). */
static void probe_frameworks(recap__probe_out_t *out)
{
    recap_framework_info_t info[8];
    size_t n = 0, subs = 0, i;

    if (recap_framework_generators(info, 8, &n) != RECAP_OK ||
        recap_capture_subscribers(&subs) != RECAP_OK) {
        recap__probe_fail(out, "; framework query failed: %s", recap_last_error());
        return;
    }
    recap__probe_say(out, "; framework generators: %zu", n);
    for (i = 0; i < n && i < 8; i++)
        recap__probe_say(out, "%s%s (device %d, %s, %d tracker%s)", i ? ", " : " (",
                         info[i].name, info[i].device,
                         info[i].graph_safe ? "value and graph-safe" : "value only",
                         info[i].trackers, info[i].trackers == 1 ? "" : "s");
    recap__probe_say(out, "%s; capture subscribers: %zu", n > 0 ? ")" : "", subs);
}

/* CUPTI held by another subscriber: named when CUPTI names it (cuptiSubscribe_v2). */
static void cupti_held(recap__probe_out_t *out)
{
    char who[64] = "";

    recap_cupti_holder(who, sizeof(who));
    if (who[0] != '\0')
        recap__probe_say(out, "; CUPTI: held by \"%s\" (recap's CUPTI front end cannot "
                         "subscribe; LD_PRELOAD still works)", who);
    else
        recap__probe_say(out, "; CUPTI: held by another subscriber (a profiler?)");
}

/* Whether RECAP_HOOKS says `choice` (off, cupti). */
static int hooks_set_to(const char *choice)
{
    const char *v = recap__env("RECAP_HOOKS");

    return v != NULL && strcasecmp(v, choice) == 0;
}

/* A RECAP_HOOKS value recap does not take is named: the front end shown is auto's. */
static void hooks_not_understood(recap__probe_out_t *out)
{
    const char *v = recap__env("RECAP_HOOKS");
    char entry[256], why[128];

    if (v == NULL)
        return;
    snprintf(entry, sizeof(entry), "RECAP_HOOKS=%s", v);
    if (recap__setting_check(entry, why, sizeof(why)) != RECAP__SETTING_OK)
        recap__probe_say(out, "; RECAP_HOOKS=%s %s (auto used)", v, why);
}

void recap__probe_hooks(recap__probe_out_t *out)
{
    recap_hooks_t hooks;
    recap_status_t st;
    int free_ = 0;

    if (recap_hooks_active(&hooks) != RECAP_OK) {
        recap__probe_fail(out, "recap_hooks_active: %s", recap_last_error());
        return;
    }
    /* No front end is a warning, never a pass: a job run the same way gets its captures seen
     * only where its own code reports them, and nothing here can tell whether it does. */
    if (hooks == RECAP_HOOKS_NONE) {
        out->status = RECAP_PROBE_WARN;
        recap__probe_say(out, "front end: none active");
    } else {
        recap__probe_say(out, "front end: %s", recap_hooks_name(hooks));
    }
    if (hooks == RECAP_HOOKS_NONE && hooks_set_to("off"))
        recap__probe_say(out, " (RECAP_HOOKS=%s turns recap's front ends off: recap sees a "
                         "capture only when the host reports it or calls "
                         "recap_capture_prime)", recap__env("RECAP_HOOKS"));
    else if (hooks == RECAP_HOOKS_NONE && hooks_set_to("cupti"))
        recap__probe_say(out, " (RECAP_HOOKS=%s, but recap's CUPTI front end did not subscribe: "
                         "CUPTI's state follows; recap sees a capture only when the host reports "
                         "it or calls recap_capture_prime)", recap__env("RECAP_HOOKS"));
    else if (hooks == RECAP_HOOKS_NONE)
        recap__probe_say(out, " (explicit mode: recap sees a capture only when the host reports "
                         "it or calls recap_capture_prime; for recap to see them, preload "
                         RECAP_INTERPOSER_SONAME " (LD_PRELOAD, or run the job under recap-probe "
                         "--run), set RECAP_HOOKS=cupti (CUPTI), or report captures explicitly "
                         "(recap_capture_*))");
    hooks_not_understood(out);
    st = recap_cupti_is_free(&free_);
    if (st == RECAP_OK && !free_ && hooks != RECAP_HOOKS_CUPTI && hooks != RECAP_HOOKS_INJECTION)
        cupti_held(out);
    else if (st == RECAP_OK)
        recap__probe_say(out, "; CUPTI: %s", free_ ? "free" : "held by recap");
    else if (st == RECAP_ERR_BUSY)
        recap__probe_say(out, "; CUPTI: held by another subscriber (%s)", recap_last_error());
    else if (st == RECAP_ERR_UNSUPPORTED || st == RECAP_ERR_NO_DRIVER)
        recap__probe_say(out, "; CUPTI: not applicable (%s)", recap_last_error());
    else
        recap__probe_fail(out, "; CUPTI query failed: %s", recap_last_error());
    probe_frameworks(out);
}

void recap__probe_registration(recap__probe_out_t *out)
{
    recap_status_t st;
    int needs = 0;

    st = recap_capture_needs_registration(&needs);
    if (st == RECAP_ERR_NO_DRIVER || st == RECAP_ERR_NO_DEVICE) {
        out->status = RECAP_PROBE_NA;
        recap__probe_say(out, "not applicable: %s", recap_last_error());
    } else if (st != RECAP_OK) {
        recap__probe_fail(out, "the registration probe failed: %s", recap_last_error());
    } else if (needs) {
        recap__probe_say(out, "needed: a draw on an unregistered generator inside a capture is "
                         "rejected because no hook reports captures in this process; hosts must "
                         "report captures (recap_capture_*) or call recap_capture_prime first "
                         "thing in each capture");
    } else {
        recap__probe_say(out, "not needed: recap's hooks see captures begin and prime every "
                         "generator before them");
    }
}
