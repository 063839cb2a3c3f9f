/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/env.h"
#include "base/sink.h"

/* Whether the file recap opened as `opened` is one of the process's standard streams
 * (/dev/stderr and such). A standard stream the process had closed is none: open() may have
 * handed recap that very number (sed, for one, closes its stdout before exit handlers run). */
static int standard_stream(int opened, const struct stat *st)
{
    struct stat s;
    int fd;

    for (fd = 0; fd <= 2; fd++)
        if (fd != opened && fstat(fd, &s) == 0 && s.st_dev == st->st_dev &&
            s.st_ino == st->st_ino)
            return 1;
    return 0;
}

static int dev_null(const struct stat *st)
{
    struct stat s;

    return S_ISCHR(st->st_mode) && stat("/dev/null", &s) == 0 && S_ISCHR(s.st_mode) &&
           s.st_rdev == st->st_rdev;
}

static const char *kind_of(const struct stat *st)
{
    if (S_ISFIFO(st->st_mode))
        return "a FIFO (named pipe)";
    if (S_ISSOCK(st->st_mode))
        return "a socket";
    if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
        return "a device";
    if (S_ISDIR(st->st_mode))
        return "a directory";
    return "not a regular file";
}

int recap__sink_open(const char *var, const char *spec, const char *path, int flags,
                     const char *fallback)
{
    struct stat st;
    int fd;

    /* O_NONBLOCK: a FIFO with no reader fails at once (ENXIO) instead of waiting for one */
    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | flags, 0666);
    if (fd < 0) {
        int err = errno;
        recap__env_warn(var, "%s=%s: cannot open %s: %s; %s", var, spec, path,
                        err == ENXIO ? "a FIFO (named pipe) nobody reads, and recap does not "
                                       "wait for one" : strerror(err), fallback);
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        recap__env_warn(var, "%s=%s: cannot inspect %s: %s; %s", var, spec, path, strerror(errno),
                        fallback);
        close(fd);
        return -1;
    }
    if (S_ISREG(st.st_mode) || dev_null(&st))
        return fd; /* never blocks (O_NONBLOCK changes nothing there) */
    if (isatty(fd) || standard_stream(fd, &st)) {
        /* the process's own terminal or stream: written as the process writes to it */
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        return fd;
    }
    recap__env_warn(var, "%s=%s: %s is %s, where recap's writes could block the process; recap "
                    "writes only to a regular file, a terminal or a standard stream; %s", var,
                    spec, path, kind_of(&st), fallback);
    close(fd);
    return -1;
}
