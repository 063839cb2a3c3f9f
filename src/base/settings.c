/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/settings.h"

extern char **environ;

/* The index of each value is what the reader uses: keep the orders. */
static const char *const hooks[] = {"auto", "preload", "cupti", "off", NULL};    /* hooks.h */
static const char *const log_levels[] = {"off", "warn", "info", "debug", "0", NULL}; /* log.c */
static const char *const flag[] = {"0", "1", NULL};
static const char *const on_off[] = {"1", "0", NULL};
static const char *const verify[] = {"raise", "warn", "off", "0", NULL}; /* recap/_verify.py */

typedef struct {
    const char *name; /* a name, or a family's prefix ending in '_' */
    const char *const *choices; /* NULL: any value */
} setting_t;

static const setting_t table[] = {
    /* the library */
    {"RECAP_HOOKS", hooks},
    {"RECAP_LOG", log_levels},
    {"RECAP_LOG_FILE", NULL},
    {"RECAP_LOG_TIME", flag},
    {"RECAP_REPORT", NULL},
    {"RECAP_CUPTI_PATH", NULL},
    {"RECAP_CUDA_DRIVER", NULL},
    {"RECAP_NCCL_LIB", NULL},
    {"RECAP_EXACT_CAPTURE", on_off},
    /* recap-probe */
    {"RECAP_PROBE_PYTHON_TIMEOUT", NULL},
    {"RECAP_PROBE_FAIL", NULL},
    /* the Python package (python/recap) and its build */
    {"RECAP_LIB", NULL},
    {"RECAP_MEGATRON", NULL},
    {"RECAP_TORCH_REPLAY", NULL},
    {"RECAP_TORCH_EXT", NULL},
    {"RECAP_VERIFY_GRAPHS", verify},
    {"RECAP_SITE", NULL},
    {"RECAP_TORCH_KERNEL", NULL},
    {"RECAP_INCLUDE", NULL},
    {"RECAP_PYTHON_OPS", NULL},
    {"RECAP_BUNDLE_LIB", NULL},
    /* tests, CI and the GPU suite */
    {"RECAP_REQUIRE_TORCH", NULL},
    {"RECAP_TEST_", NULL},
    {"RECAP_DOUBLE_", NULL},
    {"RECAP_FUZZ_", NULL},
    {"RECAP_GPU_", NULL},
    {"RECAP_CUDA_DOUBLE", NULL},
    {"RECAP_GRAPHS_DETERMINISTIC", NULL},
    {"RECAP_REQUIRE_CMAKE", NULL},
    {"RECAP_SANITIZE_DIR", NULL},
};

/* The row of `name` (`nlen` bytes of it). */
static const setting_t *row(const char *name, size_t nlen)
{
    size_t i, k;

    for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        k = strlen(table[i].name);
        if (table[i].name[k - 1] == '_' ? nlen > k && strncmp(name, table[i].name, k) == 0
                                        : nlen == k && strncmp(name, table[i].name, k) == 0)
            return &table[i];
    }
    return NULL;
}

const char *const *recap__setting_choices(const char *name)
{
    const setting_t *r = row(name, strlen(name));

    return r != NULL ? r->choices : NULL;
}

recap__setting_check_t recap__setting_check(const char *entry, char *why, size_t len)
{
    const char *eq = strchr(entry, '=');
    const setting_t *r = row(entry, eq != NULL ? (size_t)(eq - entry) : strlen(entry));
    size_t i, n;

    if (r == NULL) {
        if (why != NULL && len > 0)
            snprintf(why, len, "unknown setting");
        return RECAP__SETTING_UNKNOWN;
    }
    if (r->choices == NULL || eq == NULL || eq[1] == '\0')
        return RECAP__SETTING_OK;
    for (i = 0; r->choices[i] != NULL; i++)
        if (strcasecmp(eq + 1, r->choices[i]) == 0)
            return RECAP__SETTING_OK;
    if (why != NULL && len > 0) {
        n = (size_t)snprintf(why, len, "not understood:");
        for (i = 0; r->choices[i] != NULL && n < len; i++)
            n += (size_t)snprintf(why + n, len - n, "%s%s", i ? "|" : " ", r->choices[i]);
    }
    return RECAP__SETTING_INVALID;
}

void recap__settings_flagged(char *buf, size_t len)
{
    size_t i, n = 0;
    const char *c;

    if (len == 0)
        return;
    buf[0] = '\0';
    for (i = 0; environ != NULL && environ[i] != NULL; i++) {
        if (strncmp(environ[i], "RECAP_", 6) != 0 ||
            recap__setting_check(environ[i], NULL, 0) == RECAP__SETTING_OK)
            continue;
        if (n > 0 && n + 1 < len)
            buf[n++] = ' ';
        for (c = environ[i]; *c != '\0' && *c != '=' && n + 1 < len; c++)
            buf[n++] = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                               (*c >= '0' && *c <= '9') || *c == '_' ? *c : '?';
        buf[n] = '\0';
    }
}
