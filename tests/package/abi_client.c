/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A program built against the headers and the library of this tree (tests/package/abi.sh builds
 * it): it calls a function of each ABI version's node, so abi.sh can check that each reference the
 * linker recorded is at the node that added the function, then runs it and compares the ABI
 * version it prints with configure's.
 */
#include <stdio.h>

#include "recap.h"

#define CHECK(call)                                            \
    do {                                                       \
        if ((call) != RECAP_OK) {                              \
            fprintf(stderr, "abi_client: %s failed\n", #call); \
            return 1;                                          \
        }                                                      \
    } while (0)

int main(void)
{
    recap_generator_h gen;                /* 1.0 */
    recap_states_h states;                /* 1.2 */
    recap_exact_scope_h scope;            /* 1.4 */
    recap_plain_engine_h engine;          /* 1.5 */
    char holder[64];
    void *mem;
    int abi = recap_abi_version();

    CHECK(recap_generator_create(RECAP_DEVICE_HOST, &gen));
    CHECK(recap_generator_destroy(gen));
    CHECK(recap_host_alloc(0, 64, &mem)); /* 1.1 (the CUDA test double in make check) */
    CHECK(recap_host_free(0, mem));
    CHECK(recap_states_create(&states));
    CHECK(recap_states_free(states));
    CHECK(recap_cupti_holder(holder, sizeof(holder))); /* 1.3 */
    CHECK(recap_exact_capture_enter(&scope));
    CHECK(recap_exact_capture_leave(scope));
    CHECK(recap_plain_engine_create(RECAP_DEVICE_HOST, 0, &engine));
    CHECK(recap_plain_engine_destroy(engine));
    CHECK(recap_log_write(RECAP_LOG_DEBUG, "abi_client")); /* 1.6 (silent unless RECAP_LOG asks) */
    printf("%d.%d\n", abi >> 16, abi & 0xffff);
    return 0;
}
