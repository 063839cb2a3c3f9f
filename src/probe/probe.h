/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap-probe's checks, inside the library so they can reach the driver table. Each check fills
 * one result: a status and a detail line saying what it did and what it saw (on failure, why).
 * The table and the public entry points are in registry.c; the checks are grouped by what they
 * need: env.c (versions, devices, front ends), capture.c (capture behaviour), graph.c (graph
 * features), philox.c (the Philox self-test), replay.c (captured RNG replayed), compose.c
 * (graph composition).
 */
#ifndef RECAP_PROBE_PROBE_H
#define RECAP_PROBE_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "driver/driver.h"
#include "recap.h"

#define RECAP_PROBE_DETAIL_MAX 1024

/* A check's result while it runs: status and a detail line it appends to. */
typedef struct recap__probe_out {
    recap_probe_status_t status;
    char detail[RECAP_PROBE_DETAIL_MAX];
    size_t len;
    int cut; /* the detail filled up and ends in RECAP__TEXT_CUT */
} recap__probe_out_t;

/* Appends formatted text to the detail (never overflowing: a detail that fills up ends in
 * RECAP__TEXT_CUT, and nothing more is added). */
void recap__probe_say(recap__probe_out_t *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Marks the check failed and appends the reason. */
void recap__probe_fail(recap__probe_out_t *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Test-only fault injection: whether $RECAP_PROBE_FAIL names this check (comma-separated). */
int recap__probe_forced_failure(const char *check);
/* "13.0" for 13000; buf holds at least 16 bytes. */
const char *recap__probe_version(int version, char *buf, size_t len);
/* The driver's name for a result code ("CUDA_ERROR_..."), or its number. */
const char *recap__probe_cu_name(const recap__driver_t *drv, CUresult rc, char *buf, size_t len);

/* What device checks work with: the driver (with its capture and graph API) and device 0 with
 * its primary context current. The gate in registry.c has already made sure a driver and a
 * device exist. */
typedef struct recap__probe_dev {
    const recap__driver_t *drv;
    CUdevice dev;
    CUcontext ctx;
} recap__probe_dev_t;

/* Pushes device 0's primary context; on failure fails `out` and returns non-zero. */
int recap__probe_enter(recap__probe_dev_t *pd, recap__probe_out_t *out);
void recap__probe_leave(recap__probe_dev_t *pd);

/* The Philox self-test's reference: n words of the fill of state (seed, offset), computed from
 * the layout formula, and scratch room for n words of each implementation tested. */
typedef struct recap__probe_words {
    uint64_t seed, offset;
    size_t n;
    const uint32_t *ref;
    uint32_t *got;
} recap__probe_words_t;

/* Compares w->got with the reference: appends "; <who> = reference", or fails naming the first
 * differing word. */
void recap__probe_compare(recap__probe_out_t *out, const recap__probe_words_t *w, const char *who);
/* The cuRAND parts of the philox check (curand.c): the host generator, and the device generator
 * when `device` says device 0 is usable through the driver cuRAND itself would use. */
void recap__probe_curand(recap__probe_out_t *out, const recap__probe_words_t *w, int device);

/* The checks (registry.c lists them). */
void recap__probe_driver(recap__probe_out_t *out);
void recap__probe_devices(recap__probe_out_t *out);
void recap__probe_hooks(recap__probe_out_t *out);
void recap__probe_registration(recap__probe_out_t *out);
void recap__probe_capture_modes(recap__probe_out_t *out);
void recap__probe_captured_event(recap__probe_out_t *out);
void recap__probe_graph_features(recap__probe_out_t *out);
void recap__probe_philox(recap__probe_out_t *out);
void recap__probe_replay(recap__probe_out_t *out);
/* Graph composition (compose.c). */
void recap__probe_compose_child(recap__probe_out_t *out);
void recap__probe_compose_update(recap__probe_out_t *out);
void recap__probe_compose_unordered(recap__probe_out_t *out);
void recap__probe_compose_node_by_node(recap__probe_out_t *out);
void recap__probe_compose_conditional(recap__probe_out_t *out);
void recap__probe_compose_device_launch(recap__probe_out_t *out);
void recap__probe_compose_streams(recap__probe_out_t *out);

#endif
