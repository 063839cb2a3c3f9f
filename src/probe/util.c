/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/text.h"
#include "probe/probe.h"

static void say(recap__probe_out_t *out, const char *fmt, va_list ap)
{
    int n;

    if (out->cut || out->len + 1 >= sizeof(out->detail))
        return;
    n = vsnprintf(out->detail + out->len, sizeof(out->detail) - out->len, fmt, ap);
    if (n > 0)
        out->len += (size_t)n;
    if (out->len >= sizeof(out->detail)) {
        /* truncated: the detail says so, cut where a character starts (a name in it may be long) */
        size_t keep = sizeof(out->detail) - sizeof(RECAP__TEXT_CUT);

        while (keep > 0 && ((unsigned char)out->detail[keep] & 0xC0) == 0x80)
            keep--;
        memcpy(out->detail + keep, RECAP__TEXT_CUT, sizeof(RECAP__TEXT_CUT));
        out->len = keep + sizeof(RECAP__TEXT_CUT) - 1;
        out->cut = 1; /* later says add nothing after the mark */
    }
}

void recap__probe_say(recap__probe_out_t *out, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    say(out, fmt, ap);
    va_end(ap);
}

void recap__probe_fail(recap__probe_out_t *out, const char *fmt, ...)
{
    va_list ap;

    out->status = RECAP_PROBE_FAIL;
    va_start(ap, fmt);
    say(out, fmt, ap);
    va_end(ap);
}

int recap__probe_forced_failure(const char *check)
{
    const char *env = getenv("RECAP_PROBE_FAIL"), *p;
    size_t len = strlen(check);

    for (p = env; p != NULL && *p != '\0'; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, check, len) == 0 && (p[len] == '\0' || p[len] == ','))
            return 1;
    return 0;
}

const char *recap__probe_version(int version, char *buf, size_t len)
{
    snprintf(buf, len, "%d.%d", version / 1000, version % 1000 / 10);
    return buf;
}

const char *recap__probe_cu_name(const recap__driver_t *drv, CUresult rc, char *buf, size_t len)
{
    const char *name = NULL;

    if (drv->cuGetErrorName(rc, &name) == CUDA_SUCCESS && name != NULL)
        return name;
    snprintf(buf, len, "CUresult %d", (int)rc);
    return buf;
}

/* Device 0's primary context (the one recap and cudart-based hosts use), entered without
 * recap's kernels: driver-only checks must not fail because recap's kernels do not load. The
 * retain is kept, as recap keeps its own, for the life of the process. */
int recap__probe_enter(recap__probe_dev_t *pd, recap__probe_out_t *out)
{
    char buf[32];
    const char *what;
    CUresult rc;

    if (recap__driver_graphs(&pd->drv) != RECAP_OK) {
        recap__probe_fail(out, "%s", recap_last_error());
        return -1;
    }
    what = "cuDeviceGet";
    rc = pd->drv->cuDeviceGet(&pd->dev, 0);
    if (rc == CUDA_SUCCESS) {
        what = "cuDevicePrimaryCtxRetain";
        rc = pd->drv->cuDevicePrimaryCtxRetain(&pd->ctx, pd->dev);
    }
    if (rc == CUDA_SUCCESS) {
        what = "cuCtxPushCurrent";
        rc = pd->drv->cuCtxPushCurrent(pd->ctx);
    }
    if (rc != CUDA_SUCCESS) {
        recap__probe_fail(out, "device 0: %s: %s", what,
                          recap__probe_cu_name(pd->drv, rc, buf, sizeof(buf)));
        return -1;
    }
    return 0;
}

void recap__probe_leave(recap__probe_dev_t *pd)
{
    CUcontext popped;

    pd->drv->cuCtxPopCurrent(&popped);
}
