/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap's RECAP_* settings. A value recap does not understand gets one warning on stderr, whatever
 * RECAP_LOG says: a misspelt setting that silently does nothing (RECAP_HOOKS=prelaod) costs more
 * than one line of noise.
 */
#ifndef RECAP_BASE_ENV_H
#define RECAP_BASE_ENV_H

#include <stddef.h>

/* The variable's value; NULL when it is unset or empty. */
const char *recap__env(const char *name);

/* The index of the variable's value in `choices` (NULL-terminated, compared without case):
 * `unset` when it is unset or empty; an unknown value warns and gives `unknown`. */
int recap__env_choice(const char *name, const char *const *choices, int unset, int unknown);

/* One warning about variable `name` on stderr, the first time only (per variable and process). */
void recap__env_warn(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A file name from a setting: each "%h" replaced by the host name and each "%p" by the process
 * id. Returns 1 when it had a "%p" (a file of this process alone), 0 when not, -1 when the result
 * does not fit in `len` bytes. */
int recap__env_path(const char *spec, char *buf, size_t len);

#endif
