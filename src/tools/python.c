/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/text.h"
#include "tools/manual.h"
#include "tools/python.h"

#define DEFAULT_TIMEOUT 10

/* One "key value" line each; torch's lines only when it imports. */
static const char code[] =
    "import sys\n"
    "print('python', sys.version.split()[0], flush=True)\n"
    "import torch\n"
    "print('torch', torch.__version__)\n"
    "print('torch_cuda', torch.version.cuda or '', flush=True)\n"
    /* which path recap.torch runs here, and whether automatic registration can work */
    "def one(s): return ' '.join(str(s).split())\n"
    "try:\n"
    "    import recap.torch as rt\n"
    "    b = rt.backend()\n"
    "except Exception as e:\n"
    "    print('recap_torch absent')\n"
    "    print('recap_torch_why', one(f'{type(e).__name__}: {e}'))\n"
    "else:\n"
    "    print('recap_torch', b['ops'])\n"
    "    print('recap_torch_why', one(b['why']))\n"
    "    print('recap_torch_registration', one(b['registration']))\n";

int python_timeout(void)
{
    const char *s = getenv("RECAP_PROBE_PYTHON_TIMEOUT");
    char *end;
    long v;

    if (s == NULL || *s == '\0')
        return DEFAULT_TIMEOUT;
    v = strtol(s, &end, 10);
    if (*end != '\0' || v < 0 || v > 3600) {
        fputs("recap-probe: RECAP_PROBE_PYTHON_TIMEOUT=", stderr);
        tool_text(stderr, s);
        fprintf(stderr, " not understood (seconds, 0-3600): using %d\n", DEFAULT_TIMEOUT);
        return DEFAULT_TIMEOUT;
    }
    return (int)v;
}

/* python3 -c code, stdout into a pipe, stdin and stderr on /dev/null. */
static pid_t start(int *out_fd)
{
    int fds[2], null = open("/dev/null", O_RDWR | O_CLOEXEC);
    pid_t pid = -1;

    if (null >= 0 && pipe2(fds, O_CLOEXEC) == 0) {
        fflush(NULL);
        pid = fork();
        if (pid == 0) {
            setpgid(0, 0); /* its own group: what it starts is killed with it */
            dup2(null, STDIN_FILENO);
            dup2(fds[1], STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
            execlp("python3", "python3", "-c", code, (char *)NULL);
            _exit(127);
        }
        close(fds[1]);
        if (pid > 0)
            setpgid(pid, pid); /* (also here: whichever runs first) */
        if (pid > 0)
            *out_fd = fds[0];
        else
            close(fds[0]);
    }
    if (null >= 0)
        close(null);
    return pid;
}

static long ms_since(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* What python printed before its output ended or the time (from t0) ran out; 1 when its output
 * ended in time. */
static int collect(int fd, char *buf, size_t cap, int timeout_s, const struct timespec *t0)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    size_t len = 0;
    ssize_t got = 1;

    while (got != 0) {
        long left = timeout_s * 1000L - ms_since(t0);
        int rc = left > 0 ? poll(&pfd, 1, (int)left) : 0;

        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            break;
        got = read(fd, buf + len, cap - 1 - len);
        if (got < 0 && errno != EINTR)
            break;
        len += got > 0 ? (size_t)got : 0;
        if (len + 1 >= cap)
            break;
    }
    buf[len] = '\0';
    return got == 0;
}

static void field(const char *text, const char *key, char *dst, size_t cap)
{
    size_t klen = strlen(key);
    const char *p;

    for (p = text; p != NULL && *p != '\0'; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, key, klen) == 0 && p[klen] == ' ') {
            size_t n = strcspn(p + klen + 1, "\n"), keep = cap - sizeof(RECAP__TEXT_CUT);

            if (n < cap) {
                snprintf(dst, cap, "%.*s", (int)n, p + klen + 1);
                return;
            }
            /* too long for the field: cut where a character starts, and say so */
            while (keep > 0 && ((unsigned char)p[klen + 1 + keep] & 0xC0) == 0x80)
                keep--;
            snprintf(dst, cap, "%.*s%s", (int)keep, p + klen + 1, RECAP__TEXT_CUT);
            return;
        }
}

/* Waits for pid until the time (from t0) runs out; 1 when it exited. A python3 that closed its
 * output and keeps running (or never ends) costs the time limit, no more. */
static int reap(pid_t pid, int *ws, int timeout_s, const struct timespec *t0)
{
    for (;;) {
        pid_t got = waitpid(pid, ws, WNOHANG);
        struct timespec pause = {0, 5 * 1000 * 1000};

        if (got == pid || (got < 0 && errno != EINTR))
            return got == pid;
        if (ms_since(t0) >= timeout_s * 1000L)
            return 0;
        nanosleep(&pause, NULL);
    }
}

void python_probe(probe_python_t *p, int timeout_s)
{
    struct timespec t0;
    char out[4096];
    int fd, ended, exited, ws = 0;
    pid_t pid;

    memset(p, 0, sizeof(*p));
    if (timeout_s == 0) {
        snprintf(p->why, sizeof(p->why), "not asked (RECAP_PROBE_PYTHON_TIMEOUT=0)");
        return;
    }
    pid = start(&fd);
    if (pid < 0) {
        snprintf(p->why, sizeof(p->why), "cannot start python3: %s", strerror(errno));
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ended = collect(fd, out, sizeof(out), timeout_s, &t0);
    close(fd);
    exited = ended && reap(pid, &ws, timeout_s, &t0);
    /* the group, so nothing it started outlives the probe; then the child, killed if need be */
    kill(-pid, SIGKILL);
    if (!exited) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
            ;
    }
    field(out, "python", p->version, sizeof(p->version));
    field(out, "torch", p->torch, sizeof(p->torch));
    field(out, "torch_cuda", p->torch_cuda, sizeof(p->torch_cuda));
    field(out, "recap_torch", p->recap_torch, sizeof(p->recap_torch));
    field(out, "recap_torch_why", p->recap_torch_why, sizeof(p->recap_torch_why));
    field(out, "recap_torch_registration", p->recap_registration,
          sizeof(p->recap_registration));
    p->ran = p->version[0] != '\0';
    if (!ended)
        snprintf(p->why, sizeof(p->why), "python3 did not answer within %d s", timeout_s);
    else if (!exited)
        snprintf(p->why, sizeof(p->why), "python3 did not exit within %d s", timeout_s);
    else if (!p->ran)
        snprintf(p->why, sizeof(p->why), "%s", WIFEXITED(ws) && WEXITSTATUS(ws) == 127
                                                    ? "no python3 on PATH" : "python3 failed");
    else if (p->torch[0] == '\0')
        snprintf(p->why, sizeof(p->why), "torch does not import");
}
