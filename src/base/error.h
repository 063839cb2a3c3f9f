/* SPDX-License-Identifier: Apache-2.0 */
/* Status and last-error plumbing shared by every layer. */
#ifndef RECAP_BASE_ERROR_H
#define RECAP_BASE_ERROR_H

#include "recap.h"

/* Records a formatted message for the calling thread and returns `status`, so a failing path
 * reads `return recap__fail(RECAP_ERR_X, "what and why", ...)`. */
recap_status_t recap__fail(recap_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define RECAP_CHECK_ARG(cond, ...)                                  \
    do {                                                            \
        if (!(cond))                                                \
            return recap__fail(RECAP_ERR_INVALID_ARG, __VA_ARGS__); \
    } while (0)

#endif
