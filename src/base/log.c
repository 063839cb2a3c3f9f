/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

/* -1 until the environment has been read; a benign race (every reader computes the same). */
static volatile int log_level = -1;

static int parse_level(const char *s)
{
    if (s == NULL || *s == '\0' || strcmp(s, "off") == 0 || strcmp(s, "0") == 0)
        return RECAP_LOG_OFF;
    if (strcmp(s, "debug") == 0)
        return RECAP_LOG_DEBUG;
    if (strcmp(s, "info") == 0)
        return RECAP_LOG_INFO;
    return RECAP_LOG_WARN; /* "warn" and anything unrecognised: the user asked for some output */
}

int recap__log_level(void)
{
    int level = log_level;

    if (level < 0) {
        level = parse_level(getenv("RECAP_LOG"));
        log_level = level;
    }
    return level;
}

void recap__log_write(int level, const char *fmt, ...)
{
    static const char *const names[] = {"", "warn", "info", "debug"};
    char line[640];
    va_list ap;
    int n;

    n = snprintf(line, sizeof(line), "recap: %s: ", names[level]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    /* One write per line so lines of concurrent threads do not interleave. */
    fprintf(stderr, "%s\n", line);
}
