/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/ident.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char host[256] = "?";
static int rank = -1;

/* A rank is a plain non-negative number; anything else is not one (and not recap's to judge). */
static int parse_rank(const char *s)
{
    char *end;
    long v;

    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    v = strtol(s, &end, 10);
    return *end == '\0' && v <= 0x7fffffff ? (int)v : -1;
}

/* Both are the same in a forked child, so reading them once per process image is enough. */
static void ident_init(void)
{
    static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
                                            "PMI_RANK"};
    size_t i;

    if (gethostname(host, sizeof(host)) != 0)
        strcpy(host, "?");
    host[sizeof(host) - 1] = '\0';
    for (i = 0; i < sizeof(rank_vars) / sizeof(rank_vars[0]) && rank < 0; i++)
        rank = parse_rank(getenv(rank_vars[i]));
}

const char *recap__ident_host(void)
{
    pthread_once(&once, ident_init);
    return host;
}

long recap__ident_tid(void)
{
    return (long)syscall(SYS_gettid);
}

int recap__ident_rank(void)
{
    pthread_once(&once, ident_init);
    return rank;
}

const char *recap__ident_time(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    size_t n;

    buf[0] = '\0';
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || gmtime_r(&ts.tv_sec, &tm) == NULL)
        return buf;
    n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    if (n > 0)
        snprintf(buf + n, len - n, ".%06ldZ", ts.tv_nsec / 1000);
    return buf;
}
