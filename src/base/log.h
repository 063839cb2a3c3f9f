/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap's log, silent unless RECAP_LOG=warn|info|debug asks; never on stdout. Lines follow
 * NCCL_DEBUG's conventions, since jobs of many ranks interleave them:
 *     [TIME ]HOST:PID:TID [RANK] recap LEVEL message
 * TIME (UTC, ISO 8601) with RECAP_LOG_TIME=1; [RANK] when the launcher set one (base/ident.h).
 * They go to stderr, or to RECAP_LOG_FILE (%h: host name, %p: pid), appended, one write each,
 * and each is one line: control characters and bytes that are not UTF-8 in a message are written
 * escaped (base/text.h: a message holding a name or value a host gave recap must not be able to
 * add lines that look like recap's); a message too long for a line ends in RECAP__TEXT_CUT.
 */
#ifndef RECAP_BASE_LOG_H
#define RECAP_BASE_LOG_H

#include <stdarg.h>

#include "base/atfork.h"
#include "recap.h" /* the levels, RECAP_LOG_WARN..RECAP_LOG_DEBUG: hosts log through recap too */

/* The level RECAP_LOG asks for: a RECAP_LOG_* level, or 0 (off, below every level). */
int recap__log_level(void);
void recap__log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line on stderr whatever RECAP_LOG and RECAP_LOG_FILE say (warnings about recap's settings). */
void recap__log_stderr(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* recap__log_stderr with its arguments in `ap` (recap__env_warn's). */
void recap__log_vstderr(int level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
void recap__log_atfork(recap__atfork_t when);

/* The level test is inline so a disabled log costs one load and a branch. */
#define recap__log(level, ...)                       \
    do {                                             \
        if (recap__log_level() >= (level))           \
            recap__log_write((level), __VA_ARGS__);  \
    } while (0)

#endif
