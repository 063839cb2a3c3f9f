/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What recap-probe reports beside its checks, as values rather than prose: the driver and
 * runtime versions, the devices, the front end and CUPTI, whether registration is needed, Python
 * and torch, and every RECAP_* setting. The facts of the costly checks (hooks subscribes to
 * CUPTI, registration runs a capture) are known only when that check ran.
 */
#ifndef RECAP_TOOLS_FACTS_H
#define RECAP_TOOLS_FACTS_H

#include <limits.h>
#include <stddef.h>

#include "recap.h"
#include "tools/python.h"

typedef struct probe_device {
    char name[256];
    int cc_major, cc_minor;
    size_t memory;
} probe_device_t;

typedef struct probe_facts {
    int driver_version;       /* 0: no CUDA driver */
    int runtime_version;      /* 0: no libcudart */
    char runtime_path[PATH_MAX];
    int ndevices;
    probe_device_t *devices;
    const char *front_end;    /* NULL: the hooks check did not run */
    const char *cupti;        /* "free", "held by recap", "held", "unavailable" (or NULL) */
    char cupti_holder[64];    /* who holds it, as CUPTI names it ("" when it does not say) */
    char cupti_detail[512];   /* why it is unavailable */
    int registration_needed;  /* 1, 0, or -1: unknown (not run, or not applicable) */
    probe_python_t python;
    char **settings;          /* "RECAP_X=value", sorted; NULL-terminated */
} probe_facts_t;

void facts_collect(probe_facts_t *f, const recap_probe_result_t *r, size_t n);
void facts_free(probe_facts_t *f);
/* The facts as JSON members, each preceded by a comma. */
void facts_json(const probe_facts_t *f);
/* The facts the table's checks do not show: Python and torch, and the settings. */
void facts_table(const probe_facts_t *f, int width);

#endif
