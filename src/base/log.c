/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/env.h"
#include "base/error.h"
#include "base/ident.h"
#include "base/log.h"
#include "base/sink.h"
#include "base/settings.h"
#include "base/text.h"

#define SINK_UNOPENED (-2)
#define LOG_OFF 0 /* below every level */
#define LINE_MAX_BYTES 1024

/* -1 until the environment has been read; a benign race (every reader computes the same). */
static volatile int log_level = -1;
static int log_time;
static int log_unset; /* RECAP_LOG is not set (or empty): RECAP_LOG_WARN_UNLESS_OFF lines show */

/* RECAP_LOG_FILE, opened at the first line (a process that logs nothing creates no file). */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static int sink_fd = SINK_UNOPENED;
static int sink_per_process; /* the name has a %p: a forked child opens its own */

static void read_settings(void)
{
    /* Indexes are the RECAP_LOG_* levels; "0" (after them) is off too (src/base/settings.c). */
    const char *const *levels = recap__setting_choices("RECAP_LOG");
    const char *const *flags = recap__setting_choices("RECAP_LOG_TIME");
    int level;

    const char *asked = recap__env("RECAP_LOG");

    log_time = recap__env_choice("RECAP_LOG_TIME", flags, 0, 0); /* first: warnings show it */
    log_unset = asked == NULL || *asked == '\0';
    level = recap__env_choice("RECAP_LOG", levels, 0, RECAP_LOG_WARN);
    /* An unknown value (warned about) still asked for some output: warnings. */
    log_level = level > RECAP_LOG_DEBUG ? LOG_OFF : level;
}

int recap__log_level(void)
{
    if (log_level < 0)
        read_settings();
    return log_level;
}

/* Read at load, so a RECAP_LOG or RECAP_LOG_TIME recap does not understand is reported even
 * when nothing is ever logged. */
__attribute__((constructor)) static void log_settings_at_load(void)
{
    recap__log_level();
}

void recap__log_atfork(recap__atfork_t when)
{
    recap__atfork_mutex(&sink_lock, when);
    if (when == RECAP_ATFORK_CHILD && sink_per_process && sink_fd >= 0) {
        close(sink_fd); /* the parent's file: the child names its own at its first line */
        sink_fd = SINK_UNOPENED;
    }
}

static int open_sink(void)
{
    const char *spec = recap__env("RECAP_LOG_FILE");
    char path[PATH_MAX];
    int own, fd;

    if (spec == NULL)
        return STDERR_FILENO;
    own = recap__env_path(spec, path, sizeof(path));
    if (own < 0) {
        recap__env_warn("RECAP_LOG_FILE", "RECAP_LOG_FILE=%s: the name is too long; logging "
                        "to stderr", spec);
        return STDERR_FILENO;
    }
    fd = recap__sink_open("RECAP_LOG_FILE", spec, path, O_APPEND, "logging to stderr");
    if (fd < 0)
        return STDERR_FILENO;
    sink_per_process = own;
    return fd;
}

static int sink(void)
{
    int fd;

    pthread_mutex_lock(&sink_lock);
    if (sink_fd == SINK_UNOPENED)
        sink_fd = open_sink();
    fd = sink_fd;
    pthread_mutex_unlock(&sink_lock);
    return fd;
}

/* "[TIME ]HOST:PID:TID [RANK] recap LEVEL "; returns its length. */
static int prefix(char *buf, size_t len, int level)
{
    static const char *const names[] = {"", "WARN", "INFO", "DEBUG"};
    char rank[24] = "", when[40];
    int n = 0;

    if (log_time && *recap__ident_time(when, sizeof(when)) != '\0')
        n = snprintf(buf, len, "%s ", when);
    if (recap__ident_rank() >= 0)
        snprintf(rank, sizeof(rank), "[%d] ", recap__ident_rank());
    n += snprintf(buf + n, len - (size_t)n, "%s:%ld:%ld %srecap %s ", recap__ident_host(),
                  (long)getpid(), recap__ident_tid(), rank, names[level]);
    return n;
}

/* One write per line, so the lines of threads and of processes sharing a file never mix; one
 * line per write, so a message (a host's, or holding a name a host gave) never adds lines: the
 * message is written escaped (base/text.h), and one too long for the line ends in a mark that
 * says so rather than stopping mid-word unannounced. */
static void emit(int fd, int level, const char *fmt, va_list ap)
{
    char line[LINE_MAX_BYTES], msg[LINE_MAX_BYTES];
    int n = prefix(line, sizeof(line) - 1, level), m;
    size_t room, used, len;

    if (n > (int)sizeof(line) - 2 - (int)sizeof(RECAP__TEXT_CUT))
        n = (int)sizeof(line) - 2 - (int)sizeof(RECAP__TEXT_CUT);
    m = vsnprintf(msg, sizeof(msg), fmt, ap);
    len = m < 0 ? 0 : strlen(msg);
    room = sizeof(line) - 1 - (size_t)n; /* the newline's byte kept */
    len = recap__text_escape(line + n, room + 1, msg, len, &used);
    if (used < strlen(msg) || (m >= 0 && (size_t)m >= sizeof(msg))) {
        len = recap__text_escape(line + n, room + 1 - (sizeof(RECAP__TEXT_CUT) - 1), msg, used,
                                 NULL);
        memcpy(line + n + len, RECAP__TEXT_CUT, sizeof(RECAP__TEXT_CUT) - 1);
        len += sizeof(RECAP__TEXT_CUT) - 1;
    }
    n += (int)len;
    line[n++] = '\n';
    while (write(fd, line, (size_t)n) < 0 && errno == EINTR)
        ;
}

void recap__log_write(int level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    emit(sink(), level, fmt, ap);
    va_end(ap);
}

void recap__log_stderr(int level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    emit(STDERR_FILENO, level, fmt, ap);
    va_end(ap);
}

void recap__log_vstderr(int level, const char *fmt, va_list ap)
{
    emit(STDERR_FILENO, level, fmt, ap);
}

recap_status_t recap_log_write(recap_log_level_t level, const char *message)
{
    int l = (int)level; /* the enum may be unsigned: a bad value is judged as the host passed it */

    RECAP_CHECK_ARG(l >= RECAP_LOG_WARN && l <= RECAP_LOG_WARN_UNLESS_OFF,
                    "recap_log_write: level %d is not RECAP_LOG_WARN, _INFO, _DEBUG or "
                    "_WARN_UNLESS_OFF", l);
    RECAP_CHECK_ARG(message != NULL, "recap_log_write: message is NULL");
    if (l == RECAP_LOG_WARN_UNLESS_OFF) {
        /* A warning also when RECAP_LOG says nothing (its level is read first: log_unset too). */
        if (recap__log_level() >= RECAP_LOG_WARN || log_unset)
            recap__log_write(RECAP_LOG_WARN, "%s", message);
        return RECAP_OK;
    }
    recap__log(l, "%s", message);
    return RECAP_OK;
}
