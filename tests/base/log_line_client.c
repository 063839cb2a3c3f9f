/* SPDX-License-Identifier: Apache-2.0 */
/*
 * For test_log and tests/base/log_lines.sh: a host that writes through recap's log, in a process of
 * its own (recap reads RECAP_LOG* and the rank once, at load).
 *   log_line_client LEVEL MESSAGE   recap_log_write(LEVEL, MESSAGE); prints the status on stdout
 *   log_line_client names NAME      a framework generator named NAME (an INFO line names it) and
 *                                   a look-up of state NAME in an empty states object (a failure:
 *                                   a DEBUG line names it); prints "2" (the lines due at debug)
 * The lines go where recap's own lines go.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recap.h"
#include "tests/support/value_framework.h"

static int names(const char *name)
{
    static uint8_t state[RECAP_STATE_BYTES];
    recap_framework_ops_t ops = vf_ops(name);
    recap_generator_h gen;
    recap_states_h states;

    if (recap_generator_create_framework(&ops, state, RECAP_DEVICE_HOST, &gen) != RECAP_OK ||
        recap_generator_destroy(gen) != RECAP_OK || recap_states_create(&states) != RECAP_OK ||
        recap_states_lookup(states, name, state) != RECAP_ERR_NOT_FOUND)
        return 1;
    recap_states_free(states);
    printf("2\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: log_line_client LEVEL MESSAGE | names NAME\n");
        return 2;
    }
    if (strcmp(argv[1], "names") == 0)
        return names(argv[2]);
    printf("%d\n", (int)recap_log_write((recap_log_level_t)atoi(argv[1]), argv[2]));
    return 0;
}
