/* SPDX-License-Identifier: Apache-2.0 */
/* stderr logging, silent unless RECAP_LOG=warn|info|debug asks. recap never prints to stdout. */
#ifndef RECAP_BASE_LOG_H
#define RECAP_BASE_LOG_H

enum { RECAP_LOG_OFF = 0, RECAP_LOG_WARN = 1, RECAP_LOG_INFO = 2, RECAP_LOG_DEBUG = 3 };

int recap__log_level(void);
void recap__log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The level test is inline so a disabled log costs one load and a branch. */
#define recap__log(level, ...)                       \
    do {                                             \
        if (recap__log_level() >= (level))           \
            recap__log_write((level), __VA_ARGS__);  \
    } while (0)

#endif
