/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A program as it was built before librecap's map had a node per ABI version: tests/abi.sh links
 * it against a stand-in library whose every recap_* symbol is at RECAP_1.0 (the old map), so
 * each reference below is name@RECAP_1.0, then runs it against the library just built. It
 * declares what it calls itself, as the headers of that time did, and uses functions that moved
 * to later nodes (1.1 to 1.4) and names the headers have since replaced (recap_plain_host_*).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int recap_abi_version(void);
int recap_host_alloc(int device, size_t bytes, void **ptr_p);          /* RECAP_1.1 */
int recap_host_free(int device, void *ptr);                             /* RECAP_1.1 */
int recap_states_create(void **states_p);                               /* RECAP_1.2 */
int recap_states_free(void *states);
int recap_cupti_holder(char *name, size_t name_len);                    /* RECAP_1.3 */
int recap_exact_capture_enter(void **scope_p);                          /* RECAP_1.4 */
int recap_exact_capture_leave(void *scope);                             /* RECAP_1.4 */
int recap_plain_host_create(int device, uint32_t flags, void **host_p); /* now plain_engine */
int recap_plain_host_destroy(void *host);

#define CHECK(call)                                          \
    do {                                                     \
        if ((call) != 0) {                                   \
            fprintf(stderr, "abi_client: %s failed\n", #call); \
            return 1;                                        \
        }                                                    \
    } while (0)

int main(void)
{
    void *states, *scope, *host, *mem;
    char holder[64];

    if (recap_abi_version() >> 16 != 1) {
        fprintf(stderr, "abi_client: ABI major %d\n", recap_abi_version() >> 16);
        return 1;
    }
    CHECK(recap_host_alloc(0, 64, &mem));
    CHECK(recap_host_free(0, mem));
    CHECK(recap_states_create(&states));
    CHECK(recap_states_free(states));
    CHECK(recap_cupti_holder(holder, sizeof(holder)));
    CHECK(recap_exact_capture_enter(&scope));
    CHECK(recap_exact_capture_leave(scope));
    CHECK(recap_plain_host_create(-1, 0, &host));
    CHECK(recap_plain_host_destroy(host));
    printf("abi_client: ran against the new library through RECAP_1.0 references\n");
    return 0;
}
