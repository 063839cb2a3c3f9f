/* SPDX-License-Identifier: Apache-2.0 */
/*
 * For test_log: a host that writes one line through recap's log, recap_log_write(LEVEL,
 * MESSAGE) from its arguments, in a process of its own (recap reads RECAP_LOG* and the rank
 * once, at load). Prints the status on stdout; the line goes where recap's own lines go.
 */
#include <stdio.h>
#include <stdlib.h>

#include "recap.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: log_line_client LEVEL MESSAGE\n");
        return 2;
    }
    printf("%d\n", (int)recap_log_write((recap_log_level_t)atoi(argv[1]), argv[2]));
    return 0;
}
