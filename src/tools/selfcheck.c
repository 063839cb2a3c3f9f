/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap-selfcheck: prints what recap finds on this machine (library, driver, devices) and runs a
 * fill on the host and on each device, checking the device words against the host's.
 * Exit 0 when every check that applies passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recap.h"

#define WORDS (1u << 20)

static int check_device(int d, const uint32_t *host_words, uint64_t seed)
{
    recap_generator_h gen = NULL;
    uint32_t *dev_words = NULL, *back = malloc(WORDS * sizeof(uint32_t));
    recap_status_t st;
    int ok = 0;

    st = recap_generator_create(d, &gen);
    if (st == RECAP_OK)
        st = recap_generator_manual_seed(gen, seed);
    if (st == RECAP_OK)
        st = recap_device_alloc(d, WORDS * sizeof(uint32_t), (void **)&dev_words);
    if (st == RECAP_OK)
        st = recap_generator_fill_u32(gen, NULL, dev_words, WORDS);
    if (st == RECAP_OK && back != NULL)
        st = recap_memcpy_to_host(d, back, dev_words, WORDS * sizeof(uint32_t));
    if (st != RECAP_OK || back == NULL) {
        printf("  device %d fill: FAILED: %s: %s\n", d, recap_strerror(st), recap_last_error());
    } else {
        ok = memcmp(back, host_words, WORDS * sizeof(uint32_t)) == 0;
        printf("  device %d fill: %u words, %s the host fill\n", d, WORDS,
               ok ? "identical to" : "DIFFERENT FROM");
    }
    if (dev_words != NULL)
        recap_device_free(d, dev_words);
    if (gen != NULL)
        recap_generator_destroy(gen);
    free(back);
    return ok;
}

int main(void)
{
    const uint64_t seed = 20261202;
    recap_generator_h host = NULL;
    uint32_t *words = malloc(WORDS * sizeof(uint32_t));
    int version, count = 0, d, failures = 0;
    recap_status_t st;

    printf("recap %s (ABI %d.%d)\n", recap_version_string(), recap_abi_version() >> 16,
           recap_abi_version() & 0xffff);
    if (words == NULL || recap_generator_create(RECAP_DEVICE_HOST, &host) != RECAP_OK ||
        recap_generator_manual_seed(host, seed) != RECAP_OK ||
        recap_generator_fill_u32(host, NULL, words, WORDS) != RECAP_OK) {
        printf("host fill: FAILED: %s\n", recap_last_error());
        return 1;
    }
    printf("host fill: %u words, seed %llu: %08x %08x %08x %08x ...\n", WORDS,
           (unsigned long long)seed, words[0], words[1], words[2], words[3]);

    st = recap_driver_version(&version);
    if (st != RECAP_OK) {
        printf("CUDA driver: not available (%s); device checks skipped\n", recap_last_error());
        goto out;
    }
    recap_device_count(&count);
    printf("CUDA driver: %d.%d, %d device%s\n", version / 1000, version % 1000 / 10, count,
           count == 1 ? "" : "s");
    for (d = 0; d < count; d++) {
        char name[256] = "?";
        int major = 0, minor = 0;
        size_t mem = 0;

        recap_device_info(d, name, sizeof(name), &major, &minor, &mem);
        printf("  device %d: %s, sm_%d%d, %.1f GiB\n", d, name, major, minor,
               (double)mem / (1u << 30));
        failures += !check_device(d, words, seed);
    }
out:
    recap_generator_destroy(host);
    free(words);
    printf("%s\n", failures ? "selfcheck: FAILED" : "selfcheck: ok");
    return failures ? 1 : 0;
}
