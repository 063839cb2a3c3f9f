/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every RECAP_* variable recap reads, listed once (src/base/settings.c): the library's,
 * recap-probe's, the Python package's and those of the test and CI scripts, with the values each
 * takes. The library reads its choices from here (recap__env_choice), and whatever lists settings
 * (recap-probe, the RECAP_REPORT line) flags by name a RECAP_* variable that is in no row, or
 * whose value the row does not take: a typo must not pass for a default.
 */
#ifndef RECAP_BASE_SETTINGS_H
#define RECAP_BASE_SETTINGS_H

#include <stddef.h>

/* The values `name` takes, NULL-terminated, in the order its reader indexes them (compared
 * without case); NULL when the row takes any value or there is no row. */
const char *const *recap__setting_choices(const char *name);

typedef enum {
    RECAP__SETTING_OK,      /* a known variable with a value it takes (or any value) */
    RECAP__SETTING_UNKNOWN, /* a RECAP_* name in no row: a misspelt name does nothing */
    RECAP__SETTING_INVALID  /* a known variable with a value it does not take */
} recap__setting_check_t;

/* Checks "NAME=value" (an environ entry). For UNKNOWN and INVALID, `why` (if not NULL) says
 * what is wrong in a few words ("unknown setting", "not understood: auto|preload|cupti|off"). */
recap__setting_check_t recap__setting_check(const char *entry, char *why, size_t len);

/* The RECAP_* names in the environment that recap__setting_check flags, space-separated, in
 * environment order ("" when none). Names only (letters, digits, '_'; anything else as '?'), so
 * the text is safe in JSON and in a log line. Whole names only: returns how many flagged names
 * did not fit in `len` bytes and were left out. */
size_t recap__settings_flagged(char *buf, size_t len);

#endif
