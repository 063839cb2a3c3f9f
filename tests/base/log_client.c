/* SPDX-License-Identifier: Apache-2.0 */
/*
 * For test_log: a process that logs, forks, and has its child log something of its own, so the
 * suite can see where each process's lines went (RECAP_LOG_FILE with and without %p). Under the
 * LD_PRELOAD front end with RECAP_LOG=info the parent logs the front end it claims; the child
 * loads the CUDA driver ($RECAP_CUDA_DRIVER) and logs that. Prints the two pids on stdout.
 */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "recap.h"

int main(void)
{
    recap_hooks_t hooks;
    int version, ws;
    pid_t child;

    if (recap_hooks_active(&hooks) != RECAP_OK)
        return 1;
    fflush(stdout);
    child = fork();
    if (child == 0)
        _exit(recap_driver_version(&version) == RECAP_OK ? 0 : 1);
    if (child < 0 || waitpid(child, &ws, 0) != child)
        return 1;
    printf("%ld %ld\n", (long)getpid(), (long)child);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 1;
}
