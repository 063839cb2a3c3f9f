/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A program from outside recap's build, compiled against an installed recap (found through
 * pkg-config or CMake's find_package by tests/install/check-installed): the headers' version
 * macros must match the library it runs with, and a host generator must draw. It says which
 * file the library was loaded from (a moved prefix must use its own).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <recap.h>
#include <stdio.h>
#include <string.h>

#ifndef CONSUMER_HOW
#define CONSUMER_HOW "?"
#endif

static int drew_the_same_twice(void)
{
    recap_generator_h a = NULL, b = NULL;
    uint32_t wa[8], wb[8];
    int same = recap_generator_create(RECAP_DEVICE_HOST, &a) == RECAP_OK &&
               recap_generator_create(RECAP_DEVICE_HOST, &b) == RECAP_OK &&
               recap_generator_manual_seed(a, 1234) == RECAP_OK &&
               recap_generator_manual_seed(b, 1234) == RECAP_OK &&
               recap_generator_fill_u32(a, NULL, wa, 8) == RECAP_OK &&
               recap_generator_fill_u32(b, NULL, wb, 8) == RECAP_OK && memcmp(wa, wb, 32) == 0;

    recap_generator_destroy(a);
    recap_generator_destroy(b);
    return same;
}

int main(void)
{
    char parts[64];
    Dl_info info;
    int ok;

    snprintf(parts, sizeof(parts), "%d.%d.%d", RECAP_VERSION_MAJOR, RECAP_VERSION_MINOR,
             RECAP_VERSION_PATCH);
    ok = strcmp(parts, RECAP_VERSION_STRING) == 0 &&
         strcmp(recap_version_string(), RECAP_VERSION_STRING) == 0 &&
         RECAP_VERSION_CODE == RECAP_VERSION(RECAP_VERSION_MAJOR, RECAP_VERSION_MINOR,
                                             RECAP_VERSION_PATCH) &&
         recap_abi_version() >> 16 >= 1 && drew_the_same_twice();
    printf("consumer (%s): headers %s (RECAP_VERSION_CODE %d), library %s, ABI %d.%d: %s\n",
           CONSUMER_HOW, RECAP_VERSION_STRING, RECAP_VERSION_CODE, recap_version_string(),
           recap_abi_version() >> 16, recap_abi_version() & 0xffff, ok ? "ok" : "MISMATCH");
    if (dladdr(dlsym(RTLD_DEFAULT, "recap_abi_version"), &info) != 0 && info.dli_fname != NULL)
        printf("consumer: library file %s\n", info.dli_fname);
    return ok ? 0 : 1;
}
