/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/atfork.h"
#include "base/dl.h"
#include "base/env.h"
#include "base/error.h"
#include "base/log.h"
#include "driver/driver.h"
#include "hooks/hooks.h"

static int active = RECAP_HOOKS_NONE;
static _Thread_local int depth;

recap_hooks_cfg_t recap__hooks_config(void)
{
    /* In the order of recap_hooks_cfg_t. */
    static const char *const choices[] = {"auto", "preload", "cupti", "off", NULL};
    static int cfg = -1;

    if (cfg < 0)
        cfg = recap__env_choice("RECAP_HOOKS", choices, RECAP_HOOKS_CFG_AUTO, RECAP_HOOKS_CFG_AUTO);
    return (recap_hooks_cfg_t)cfg;
}

/* Whether this librecap came in through LD_PRELOAD (its path or file name is listed there). A
 * program that merely links librecap also interposes the CUDA names, but only a preloaded recap
 * reports through them unless RECAP_HOOKS=preload says otherwise. */
static int preloaded(void)
{
    static int cached = -1;
    const char *env, *base, *tok;
    Dl_info info;
    size_t blen;

    if (cached >= 0)
        return cached;
    cached = 0;
    env = getenv("LD_PRELOAD");
    if (env == NULL || dladdr((void *)preloaded, &info) == 0 || info.dli_fname == NULL)
        return cached;
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
            cached = 1;
    }
    return cached;
}

int recap__hooks_preload_enabled(void)
{
    recap_hooks_cfg_t cfg = recap__hooks_config();

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

void recap__hooks_atfork(recap_atfork_t when)
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

/* RECAP_REPORT's file for this process: each "%p" replaced by the pid. Returns 1 when the name
 * has a "%p" (a file of this process alone), 0 when processes share it, -1 when it does not fit. */
static int report_path(const char *spec, char *buf, size_t len)
{
    size_t n = 0;
    int own = 0, w;

    for (; *spec != '\0'; spec++) {
        if (spec[0] == '%' && spec[1] == 'p') {
            w = snprintf(buf + n, len - n, "%ld", (long)getpid());
            if (w < 0 || (size_t)w >= len - n)
                return -1;
            n += (size_t)w;
            own = 1;
            spec++;
        } else {
            if (n + 1 >= len)
                return -1;
            buf[n++] = *spec;
        }
    }
    buf[n] = '\0';
    return own;
}

/* RECAP_REPORT=FILE: what recap saw, written at exit, for recap-probe --run. Processes that
 * share FILE (a forked child, the ranks of a job) each append their line with one write, so
 * none overwrites or splits another's; with "%p" in FILE each process writes its own file. */
__attribute__((destructor)) static void write_report(void)
{
    const char *spec = getenv("RECAP_REPORT");
    char path[PATH_MAX], line[512];
    recap_capture_stats_t s;
    int n, own, fd;

    if (spec == NULL || *spec == '\0' || recap_capture_stats(&s) != RECAP_OK)
        return;
    own = report_path(spec, path, sizeof(path));
    if (own < 0)
        return;
    n = snprintf(line, sizeof(line),
                 "{\"hooks\":\"%s\",\"captures\":%llu,\"graphs_with_rng\":%llu,\"launches\":%llu,"
                 "\"slot_writes\":%llu,\"states_primed\":%llu,\"live_records\":%llu}\n",
                 recap_hooks_name(current_front_end()),
                 (unsigned long long)s.captures, (unsigned long long)s.graphs_with_rng,
                 (unsigned long long)s.launches, (unsigned long long)s.slot_writes,
                 (unsigned long long)s.states_primed, (unsigned long long)s.live_records);
    if (n < 0 || (size_t)n >= sizeof(line))
        return;
    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (own ? O_TRUNC : O_APPEND), 0666);
    if (fd < 0)
        return;
    if (write(fd, line, (size_t)n) != n)
        recap__log(RECAP_LOG_WARN, "RECAP_REPORT: short write to %s", path);
    close(fd);
}
