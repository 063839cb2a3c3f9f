/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/settings.h"
#include "tools/facts.h"
#include "tools/json.h"
#include "tools/manual.h"

extern char **environ;

/* The runtime a job would load, looked up as the driver check does (src/probe/env.c): by the
 * names cudart ships under, newest first. The handle stays open, as there. */
static void runtime(probe_facts_t *f)
{
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    int (*version)(int *);
    Dl_info info;
    size_t i;
    void *lib;

    for (i = 0; i < sizeof(names) / sizeof(names[0]) && f->runtime_version == 0; i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        version = lib != NULL ? (int (*)(int *))dlsym(lib, "cudaRuntimeGetVersion") : NULL;
        if (version == NULL || version(&f->runtime_version) != 0) {
            f->runtime_version = 0;
            continue;
        }
        snprintf(f->runtime_path, sizeof(f->runtime_path), "%s",
                 dladdr((void *)version, &info) != 0 && info.dli_fname ? info.dli_fname
                                                                       : names[i]);
    }
}

static void devices(probe_facts_t *f)
{
    int d, count = 0;

    if (recap_driver_version(&f->driver_version) != RECAP_OK) {
        f->driver_version = 0;
        return;
    }
    if (recap_device_count(&count) != RECAP_OK || count < 1 ||
        (f->devices = calloc((size_t)count, sizeof(*f->devices))) == NULL)
        return;
    for (d = 0; d < count; d++) {
        probe_device_t *dev = &f->devices[f->ndevices];

        if (recap_device_info(d, dev->name, sizeof(dev->name), &dev->cc_major, &dev->cc_minor,
                              &dev->memory) == RECAP_OK)
            f->ndevices++;
    }
}

static void cupti(probe_facts_t *f)
{
    recap_hooks_t hooks = RECAP_HOOKS_NONE;
    recap_status_t st;
    int free_ = 0;

    recap_hooks_active(&hooks);
    f->front_end = recap_hooks_name(hooks);
    st = recap_cupti_is_free(&free_);
    if (st == RECAP_OK)
        f->cupti = free_ ? "free" : hooks == RECAP_HOOKS_CUPTI || hooks == RECAP_HOOKS_INJECTION
                                        ? "held by recap" : "held";
    else
        f->cupti = st == RECAP_ERR_BUSY ? "held" : "unavailable";
    if (st != RECAP_OK)
        snprintf(f->cupti_detail, sizeof(f->cupti_detail), "%s", recap_last_error());
    if (strcmp(f->cupti, "held") == 0)
        recap_cupti_holder(f->cupti_holder, sizeof(f->cupti_holder));
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void settings(probe_facts_t *f)
{
    size_t i, n = 0;

    for (i = 0; environ[i] != NULL; i++)
        n += strncmp(environ[i], "RECAP_", 6) == 0;
    f->settings = calloc(n + 1, sizeof(*f->settings));
    if (f->settings == NULL)
        return;
    for (i = 0, n = 0; environ[i] != NULL; i++)
        if (strncmp(environ[i], "RECAP_", 6) == 0)
            f->settings[n++] = environ[i];
    qsort(f->settings, n, sizeof(*f->settings), by_name);
}

static const recap_probe_result_t *ran(const recap_probe_result_t *r, size_t n, const char *name)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (strcmp(r[i].name, name) == 0)
            return &r[i];
    return NULL;
}

void facts_collect(probe_facts_t *f, const recap_probe_result_t *r, size_t n)
{
    const recap_probe_result_t *reg = ran(r, n, "registration");
    int needs = 0;

    memset(f, 0, sizeof(*f));
    runtime(f);
    devices(f);
    if (ran(r, n, "hooks") != NULL)
        cupti(f);
    /* The check ran the probe, whose answer recap caches: asking again runs nothing. */
    f->registration_needed = reg != NULL && reg->status != RECAP_PROBE_NA &&
                                     recap_capture_needs_registration(&needs) == RECAP_OK
                                 ? needs : -1;
    python_probe(&f->python, python_timeout());
    settings(f);
}

void facts_free(probe_facts_t *f)
{
    free(f->devices);
    free(f->settings); /* the strings are environ's */
}

static void json_version(const char *key, int version, const char *path)
{
    printf(",\"%s\":", key);
    if (version == 0) {
        fputs("null", stdout);
        return;
    }
    printf("{\"version\":%d,\"major\":%d,\"minor\":%d", version, version / 1000,
           version % 1000 / 10);
    if (path != NULL) {
        fputs(",\"path\":", stdout);
        json_string(path);
    }
    putchar('}');
}

static void json_devices(const probe_facts_t *f)
{
    int d;

    fputs(",\"devices\":[", stdout);
    for (d = 0; d < f->ndevices; d++) {
        const probe_device_t *dev = &f->devices[d];

        printf("%s{\"index\":%d,\"name\":", d ? "," : "", d);
        json_string(dev->name);
        printf(",\"compute_capability\":\"%d.%d\",\"cc_major\":%d,\"cc_minor\":%d,"
               "\"memory_bytes\":%zu}", dev->cc_major, dev->cc_minor, dev->cc_major,
               dev->cc_minor, dev->memory);
    }
    putchar(']');
}

static void json_python(const probe_python_t *p)
{
    fputs(",\"python\":{\"version\":", stdout);
    json_string_or_null(p->version[0] ? p->version : NULL);
    fputs(",\"torch\":", stdout);
    json_string_or_null(p->torch[0] ? p->torch : NULL);
    fputs(",\"torch_cuda\":", stdout);
    json_string_or_null(p->torch[0] ? p->torch_cuda : NULL);
    fputs(",\"note\":", stdout);
    json_string_or_null(p->why[0] ? p->why : NULL);
    fputs(",\"recap_torch\":", stdout);
    if (p->recap_torch[0] == '\0') {
        fputs("null", stdout);
    } else {
        fputs("{\"ops\":", stdout);
        json_string_or_null(p->recap_torch);
        fputs(",\"why\":", stdout);
        json_string_or_null(p->recap_torch_why[0] ? p->recap_torch_why : NULL);
        fputs(",\"registration\":", stdout);
        json_string_or_null(p->recap_registration[0] ? p->recap_registration : NULL);
        putchar('}');
    }
    putchar('}');
}

/* The settings recap does not take (src/base/settings.c), by name, with why. */
static void json_settings_flagged(char *const *settings)
{
    size_t i, n = 0;
    char why[256];

    fputs(",\"settings_flagged\":{", stdout);
    for (i = 0; settings != NULL && settings[i] != NULL; i++) {
        char *name = strndup(settings[i], strcspn(settings[i], "=")); /* whole, any length */

        if (recap__setting_check(settings[i], why, sizeof(why)) == RECAP__SETTING_OK) {
            free(name);
            continue;
        }
        printf("%s", n++ ? "," : "");
        json_string(name != NULL ? name : "?");
        free(name);
        putchar(':');
        json_string(why);
    }
    putchar('}');
}

static void json_settings(char *const *settings)
{
    size_t i;

    fputs(",\"settings\":{", stdout);
    for (i = 0; settings != NULL && settings[i] != NULL; i++) {
        const char *eq = strchr(settings[i], '=');
        char *name = strndup(settings[i], (size_t)(eq - settings[i])); /* whole, any length */

        printf("%s", i ? "," : "");
        json_string(name != NULL ? name : "?");
        free(name);
        putchar(':');
        json_string(eq + 1);
    }
    putchar('}');
}

void facts_json(const probe_facts_t *f)
{
    json_version("driver", f->driver_version, NULL);
    json_version("runtime", f->runtime_version, f->runtime_path);
    json_devices(f);
    fputs(",\"hooks\":", stdout);
    if (f->front_end == NULL) {
        fputs("null", stdout);
    } else {
        fputs("{\"front_end\":", stdout);
        json_string(f->front_end);
        fputs(",\"cupti\":", stdout);
        json_string(f->cupti);
        fputs(",\"cupti_holder\":", stdout);
        json_string_or_null(f->cupti_holder[0] ? f->cupti_holder : NULL);
        fputs(",\"cupti_detail\":", stdout);
        json_string_or_null(f->cupti_detail[0] ? f->cupti_detail : NULL);
        putchar('}');
    }
    printf(",\"registration_needed\":%s", f->registration_needed < 0 ? "null"
                                          : f->registration_needed ? "true" : "false");
    json_python(&f->python);
    json_settings(f->settings);
    json_settings_flagged(f->settings);
}

/* The table's fact lines start where its details do. */
#define FACT_COL 24

static void table_python(const probe_python_t *p, int width)
{
    char text[1280];

    if (!p->ran)
        snprintf(text, sizeof(text), "not applicable: %s", p->why);
    else if (p->torch[0] == '\0')
        snprintf(text, sizeof(text), "python %s; torch: %s", p->version, p->why);
    else
        snprintf(text, sizeof(text), "python %s, torch %s (%s%s)", p->version, p->torch,
                 p->torch_cuda[0] ? "CUDA " : "CPU build", p->torch_cuda);
    printf("%-*s", FACT_COL, "python");
    tool_wrap(stdout, text, FACT_COL, FACT_COL, width);
    if (p->recap_torch[0] == '\0')
        return;
    snprintf(text, sizeof(text), "%s%s%s%s%s", p->recap_torch,
             p->recap_torch_why[0] ? ": " : "", p->recap_torch_why,
             p->recap_registration[0] ? "; automatic registration: " : "",
             p->recap_registration);
    printf("%-*s", FACT_COL, "recap.torch");
    tool_wrap(stdout, text, FACT_COL, FACT_COL, width);
}

static void table_settings(char *const *settings, int width)
{
    char *text = NULL, why[256];
    size_t i, len = 0;
    FILE *f = open_memstream(&text, &len); /* every setting whole, however long */

    for (i = 0; f != NULL && settings != NULL && settings[i] != NULL; i++) {
        fprintf(f, "%s%s", i ? " " : "", settings[i]);
        if (recap__setting_check(settings[i], why, sizeof(why)) != RECAP__SETTING_OK)
            fprintf(f, " (%s)", why);
    }
    if (f != NULL)
        fclose(f);
    printf("%-*s", FACT_COL, "settings");
    tool_wrap(stdout, text == NULL ? "(out of memory)" : len > 0 ? text
                      : "none (no RECAP_* variable is set)", FACT_COL, FACT_COL, width);
    free(text);
}

void facts_table(const probe_facts_t *f, int width)
{
    putchar('\n');
    table_python(&f->python, width);
    table_settings(f->settings, width);
}
