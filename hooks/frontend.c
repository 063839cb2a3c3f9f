/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
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
#include "driver/driver.h"
#include "hooks/hooks.h"

static int active = RECAP_HOOKS_NONE;
static _Thread_local int depth;

recap__hooks_cfg_t recap__hooks_config(void)
{
    /* In the order of recap__hooks_cfg_t. */
    static const char *const choices[] = {"auto", "preload", "cupti", "off", NULL};
    static int cfg = -1;
    int c = __atomic_load_n(&cfg, __ATOMIC_ACQUIRE);

    if (c < 0) {
        c = recap__env_choice("RECAP_HOOKS", choices, RECAP_HOOKS_CFG_AUTO, RECAP_HOOKS_CFG_AUTO);
        __atomic_store_n(&cfg, c, __ATOMIC_RELEASE);
    }
    return (recap__hooks_cfg_t)c;
}

/* Whether this librecap came in through LD_PRELOAD (its path or file name is listed there). A
 * program that merely links librecap also interposes the CUDA names, but only a preloaded recap
 * reports through them unless RECAP_HOOKS=preload says otherwise. */
static int find_preloaded(void)
{
    const char *env, *base, *tok;
    Dl_info info;
    size_t blen;
    int found = 0;

    env = getenv("LD_PRELOAD");
    if (env == NULL || dladdr((void *)find_preloaded, &info) == 0 || info.dli_fname == NULL)
        return 0;
    base = strrchr(info.dli_fname, '/');
    base = base != NULL ? base + 1 : info.dli_fname;
    blen = strcspn(base, "."); /* librecap.so, librecap.so.1, librecap.so.1.0.0 all match */
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

/* Threads ask at once from their first interposed calls: each sees the final answer only. */
static int preloaded(void)
{
    static int cached = -1;
    int c = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);

    if (c < 0) {
        c = find_preloaded();
        __atomic_store_n(&cached, c, __ATOMIC_RELEASE);
    }
    return c;
}

int recap__hooks_preload_enabled(void)
{
    recap__hooks_cfg_t cfg = recap__hooks_config();

    return cfg == RECAP_HOOKS_CFG_PRELOAD || (cfg == RECAP_HOOKS_CFG_AUTO && preloaded());
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
