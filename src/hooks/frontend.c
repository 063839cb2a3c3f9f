/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/capture.h"
#include "base/dl.h"
#include "base/env.h"
#include "base/error.h"
#include "base/log.h"
#include "base/settings.h"
#include "driver/driver.h"
#include "hooks/hooks.h"

static int active = RECAP_HOOKS_NONE;
static _Thread_local int depth;

recap__hooks_cfg_t recap__hooks_config(void)
{
    static int cfg = -1;
    int c = __atomic_load_n(&cfg, __ATOMIC_ACQUIRE);

    if (c < 0) {
        /* The choices are in the order of recap__hooks_cfg_t (src/base/settings.c). */
        c = recap__env_choice("RECAP_HOOKS", recap__setting_choices("RECAP_HOOKS"),
                              RECAP_HOOKS_CFG_AUTO, RECAP_HOOKS_CFG_AUTO);
        __atomic_store_n(&cfg, c, __ATOMIC_RELEASE);
    }
    return (recap__hooks_cfg_t)c;
}

/* Whether LD_PRELOAD lists the object loaded from `path` (by its path or file name: the name up to
 * its first '.' is compared, so librecap.so, .so.1 and .so.1.5.0 all match). */
static int preload_lists(const char *path)
{
    const char *env = getenv("LD_PRELOAD"), *base, *tok;
    size_t blen;
    int found = 0;

    if (env == NULL || path == NULL)
        return 0;
    base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    blen = strcspn(base, ".");
    for (tok = env; *tok != '\0'; tok += strcspn(tok, " :")) {
        size_t len;
        const char *name;

        tok += strspn(tok, " :");
        len = strcspn(tok, " :");
        name = tok;
        for (const char *q = tok; q < tok + len; q++)
            if (*q == '/')
                name = q + 1;
        if ((size_t)(tok + len - name) >= blen && strncmp(name, base, blen) == 0 &&
            (name[blen] == '.' || name + blen == tok + len))
            found = 1;
    }
    return found;
}

/* dl_iterate_phdr callback: the interposer's state from its path (see find_interposer). */
static int interposer_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    const char *name = info->dlpi_name, *base;

    (void)size;
    if (name == NULL)
        return 0;
    base = strrchr(name, '/');
    if (strcmp(base != NULL ? base + 1 : name, RECAP_INTERPOSER_SONAME) != 0)
        return 0;
    *(int *)data = preload_lists(name);
    return 1;
}

/* The interposer object (librecap-preload.so, built beside librecap from src/hooks/): -1 when it is
 * not loaded, 1 when LD_PRELOAD brought it in, 0 when it came otherwise (a program linked with it,
 * a dlopen). librecap itself interposes nothing, so a program linked with -lrecap for the API keeps
 * its own dlsym and CUDA entry points. Found in the loader's list, not with dlopen(RTLD_NOLOAD):
 * asked from librecap's exit handler (the RECAP_REPORT line), a dlopen would run the
 * constructors of objects already finalized again. */
static int find_interposer(void)
{
    int state = -1;

    dl_iterate_phdr(interposer_cb, &state);
    return state;
}

/* Threads ask at once from their first interposed calls: each sees the final answer only. */
static int interposer(void)
{
    static int cached = -2;
    int c = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);

    if (c == -2) {
        c = find_interposer();
        __atomic_store_n(&cached, c, __ATOMIC_RELEASE);
    }
    return c;
}

/* LD_PRELOAD=librecap.so, the line from when librecap was also its own interposer: it interposes
 * nothing now, so that line would leave a job silently in explicit mode. Said once on stderr,
 * naming the object to preload. */
__attribute__((constructor)) static void warn_old_preload_line(void)
{
    Dl_info info;

    if (dladdr((void *)warn_old_preload_line, &info) != 0 && preload_lists(info.dli_fname) &&
        interposer() < 0)
        recap__env_warn("LD_PRELOAD", "LD_PRELOAD names %s, which interposes nothing: preload "
                        RECAP_INTERPOSER_SONAME " (in the same directory) for recap's LD_PRELOAD "
                        "front end; captures are not seen, recap stays in explicit mode",
                        info.dli_fname);
}

int recap__hooks_preload_enabled(void)
{
    recap__hooks_cfg_t cfg = recap__hooks_config();
    int i = interposer();

    return i >= 0 && (cfg == RECAP_HOOKS_CFG_PRELOAD || (cfg == RECAP_HOOKS_CFG_AUTO && i == 1));
}

static int allowed(recap_hooks_t which)
{
    if (which == RECAP_HOOKS_PRELOAD)
        return recap__hooks_preload_enabled();
    switch (recap__hooks_config()) {
    case RECAP_HOOKS_CFG_OFF: return 0;
    case RECAP_HOOKS_CFG_PRELOAD: return which == RECAP_HOOKS_PRELOAD;
    case RECAP_HOOKS_CFG_CUPTI: return which == RECAP_HOOKS_CUPTI || which == RECAP_HOOKS_INJECTION;
    default: return 1;
    }
}

int recap__hooks_claim(recap_hooks_t which)
{
    int none = RECAP_HOOKS_NONE;

    if (!allowed(which))
        return 0;
    if (__atomic_compare_exchange_n(&active, &none, (int)which, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        recap__log(RECAP_LOG_INFO, "interception front end: %s", recap_hooks_name(which));
        return 1;
    }
    return none == (int)which;
}

void recap__hooks_release(recap_hooks_t which)
{
    int w = (int)which;

    __atomic_compare_exchange_n(&active, &w, RECAP_HOOKS_NONE, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
}

int recap__hooks_reporting(recap_hooks_t which)
{
    int a = __atomic_load_n(&active, __ATOMIC_ACQUIRE);

    if (a == (int)which)
        return 1;
    return a == RECAP_HOOKS_NONE && which == RECAP_HOOKS_PRELOAD && recap__hooks_claim(which);
}

int recap__hooks_enter(void)
{
    return depth++;
}

void recap__hooks_leave(void)
{
    depth--;
}

static pthread_mutex_t failed_lock = PTHREAD_MUTEX_INITIALIZER;

void recap__hooks_atfork(recap__atfork_t when)
{
    recap__atfork_mutex(&failed_lock, when);
}

void recap__hooks_event_failed(const char *where, recap_status_t st)
{
    /* Once per call site: a hook that cannot do its part must not flood the host's stderr. */
    static const char *seen[64];
    static int nseen;
    int i, first = 1;

    pthread_mutex_lock(&failed_lock);
    for (i = 0; i < nseen; i++)
        if (seen[i] == where)
            first = 0;
    if (first && nseen < 64)
        seen[nseen++] = where;
    pthread_mutex_unlock(&failed_lock);
    if (first)
        recap__log(RECAP_LOG_WARN, "%s: %s: %s (the CUDA call goes on unchanged)", where,
                   recap_strerror(st), recap_last_error());
}

void recap__hooks_no_runtime(const char *name)
{
    recap__log(RECAP_LOG_WARN, "%s: no CUDA runtime defines it; the call fails", name);
}

void *recap__hooks_real_driver(const char *name)
{
    void *lib = recap__driver_lib();

    return lib != NULL ? recap__dlsym(lib, name) : NULL;
}

static recap_hooks_t current_front_end(void)
{
    /* A preloaded recap reports from its first interposed call; say so before that call too. */
    if (__atomic_load_n(&active, __ATOMIC_ACQUIRE) == RECAP_HOOKS_NONE &&
        recap__hooks_preload_enabled())
        recap__hooks_claim(RECAP_HOOKS_PRELOAD);
    return (recap_hooks_t)__atomic_load_n(&active, __ATOMIC_ACQUIRE);
}

recap_status_t recap_hooks_active(recap_hooks_t *hooks_p)
{
    RECAP_CHECK_ARG(hooks_p != NULL, "hooks_p is NULL");
    *hooks_p = current_front_end();
    return RECAP_OK;
}

const char *recap_hooks_name(recap_hooks_t hooks)
{
    switch (hooks) {
    case RECAP_HOOKS_PRELOAD: return "preload";
    case RECAP_HOOKS_CUPTI: return "cupti";
    case RECAP_HOOKS_INJECTION: return "injection";
    case RECAP_HOOKS_NONE: return "none";
    }
    return "unknown";
}
