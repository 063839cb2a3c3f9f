/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/env.h"
#include "base/ident.h"
#include "base/log.h"

#define MAX_WARNED 32

/* The variables warned about so far. Lock-free (a compare-and-swap per slot) so a warning is safe
 * from any thread, and in a child forked while another thread was warning. */
static const char *warned[MAX_WARNED];

static int warned_before(const char *name)
{
    size_t i;

    for (i = 0; i < MAX_WARNED; i++) {
        const char *w = NULL;

        if (__atomic_compare_exchange_n(&warned[i], &w, name, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return 0;
        if (strcmp(w, name) == 0)
            return 1;
    }
    return 1; /* the table is full: stay quiet rather than repeat */
}

const char *recap__env(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && *v != '\0' ? v : NULL;
}

void recap__env_warn(const char *name, const char *fmt, ...)
{
    va_list ap;

    if (warned_before(name))
        return;
    va_start(ap, fmt); /* formatted by the log itself: a value too long is cut with a mark */
    recap__log_vstderr(RECAP_LOG_WARN, fmt, ap);
    va_end(ap);
}

int recap__env_choice(const char *name, const char *const *choices, int unset, int unknown)
{
    const char *v = recap__env(name);
    char known[256] = "";
    int i;

    if (v == NULL)
        return unset;
    for (i = 0; choices[i] != NULL; i++)
        if (strcasecmp(v, choices[i]) == 0)
            return i;
    for (i = 0; choices[i] != NULL; i++)
        snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s", i ? "|" : "",
                 choices[i]);
    recap__env_warn(name, "%s=%s not understood (%s): using %s", name, v, known,
                    choices[unknown]);
    return unknown;
}

/* Appends `s` at *n; 0, or -1 when it does not fit. */
static int append(char *buf, size_t len, size_t *n, const char *s)
{
    size_t k = strlen(s);

    if (*n + k >= len)
        return -1;
    memcpy(buf + *n, s, k);
    *n += k;
    return 0;
}

int recap__env_path(const char *spec, char *buf, size_t len)
{
    char pid[24], one[2] = {0, 0};
    size_t n = 0;
    int own = 0, rc = 0;

    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    for (; *spec != '\0' && rc == 0; spec++) {
        if (spec[0] == '%' && spec[1] == 'p') {
            rc = append(buf, len, &n, pid);
            own = 1;
            spec++;
        } else if (spec[0] == '%' && spec[1] == 'h') {
            rc = append(buf, len, &n, recap__ident_host());
            spec++;
        } else {
            one[0] = *spec;
            rc = append(buf, len, &n, one);
        }
    }
    if (rc != 0 || len == 0)
        return -1;
    buf[n] = '\0';
    return own;
}
