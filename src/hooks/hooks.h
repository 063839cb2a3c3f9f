/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interception front ends (internal). Each turns the host's CUDA graph calls into the capture
 * module's events (src/capture) and holds no RNG logic itself. Exactly one reports events.
 */
#ifndef RECAP_HOOKS_HOOKS_H
#define RECAP_HOOKS_HOOKS_H

#include "recap.h"
#include "base/atfork.h"

/* What the interposer object (librecap-preload.so: src/hooks/preload*.c, procaddress.c, lookup.c)
 * calls in librecap: exported in src/librecap.map's RECAP_PRIVATE node, for the interposer of the
 * same build only (no compatibility promise, as GLIBC_PRIVATE). */
#define RECAP_PRIVATE_API __attribute__((visibility("default")))

/* Whether `which` may report events now. The preload front end claims the role the first time
 * an interposed entry point runs while RECAP_HOOKS allows it; CUPTI and injection claim it when
 * installed. */
int recap__hooks_reporting(recap_hooks_t which);
/* Claims the reporting role for `which`; returns 1 when it is (now) the active front end. */
int recap__hooks_claim(recap_hooks_t which);
void recap__hooks_release(recap_hooks_t which);
/* Whether the LD_PRELOAD front end works in this process: the interposer object is loaded, by
 * LD_PRELOAD (or otherwise with RECAP_HOOKS=preload), and RECAP_HOOKS does not turn it off. */
RECAP_PRIVATE_API int recap__hooks_preload_enabled(void);
/* The RECAP_HOOKS setting: auto, preload, cupti or off. */
typedef enum { RECAP_HOOKS_CFG_AUTO, RECAP_HOOKS_CFG_PRELOAD, RECAP_HOOKS_CFG_CUPTI, RECAP_HOOKS_CFG_OFF } recap__hooks_cfg_t;
recap__hooks_cfg_t recap__hooks_config(void);

/* Per-thread depth of interposed calls: a runtime wrapper's own driver calls (made by cudart
 * underneath) must not report the same event twice. */
int recap__hooks_enter(void);
void recap__hooks_leave(void);

/* Logs a failed event once per call site and lets the host call go on untouched. */
void recap__hooks_event_failed(const char *where, recap_status_t st);

/* The real driver entry point `name` (from the driver library recap loads). */
RECAP_PRIVATE_API void *recap__hooks_real_driver(const char *name);
/* Logs that an interposed runtime entry point has no runtime to forward to. */
RECAP_PRIVATE_API void recap__hooks_no_runtime(const char *name);

/* CUPTI front end (cupti.c). */
recap_status_t recap__cupti_install(recap_hooks_t as);

/* Fork handlers (called by src/process/atfork.c). */
void recap__cupti_atfork(recap__atfork_t when);  /* cupti.c */
void recap__hooks_atfork(recap__atfork_t when);  /* frontend.c */

#endif
