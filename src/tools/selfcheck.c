/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap-selfcheck: prints what recap finds on this machine (library, driver, devices) and runs a
 * fill on the host and on each device, checking the device words against the host's.
 * Exit 0 when every check that applies passed. `recap-selfcheck --help` is the manual; the
 * options follow recap-probe's conventions (unknown ones are usage errors, exit 2).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recap.h"
#include "tools/manual.h"

#define EXIT_USAGE 2

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
        printf("  device %d fill: FAILED: %s: ", d, recap_strerror(st));
        tool_text(stdout, recap_last_error());
        putchar('\n');
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

static void manual(man_format_t format)
{
    man_t m;

    man_begin(&m, stdout, format, "recap-selfcheck", "1", recap_version_string(),
              "what recap finds on this machine, and a fill on the host and every device");
    man_section(&m, "SYNOPSIS");
    man_lines(&m, "recap-selfcheck\nrecap-selfcheck --help | --man | --version");
    man_section(&m, "DESCRIPTION");
    man_para(&m, "Prints recap's version and ABI, fills 2^20 words from a host generator, then "
             "loads the CUDA driver and, on each device it reports, prints the device's name, "
             "compute capability and memory and fills the same 2^20 words there with a device "
             "generator of the same seed: the device's words must equal the host's. Without a "
             "CUDA driver the device part is skipped and says so. recap-probe(1) checks much "
             "more; this is the short check after a build or an install.");
    man_section(&m, "OPTIONS");
    man_item(&m, "-h, --help", "Print this manual.");
    man_item(&m, "--man", "Print this manual as a man page (roff): the recap-selfcheck.1 make "
             "installs.");
    man_item(&m, "--version", "Print recap's version and ABI.");
    man_section(&m, "ENVIRONMENT");
    man_item(&m, "RECAP_CUDA_DRIVER", "The CUDA driver library to load instead of libcuda.so.1.");
    man_section(&m, "EXIT STATUS");
    man_item(&m, "0", "the host fill worked and every device's fill equals it");
    man_item(&m, "1", "a fill failed or differs");
    man_item(&m, "2", "usage error (an unknown option or an argument)");
    man_section(&m, "SEE ALSO");
    man_para(&m, "recap-probe(1)");
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "recap-selfcheck: %s '", what);
    tool_text(stderr, arg); /* any argument it was given: escaped, one line */
    fputs("'\nTry 'recap-selfcheck --help'.\n", stderr);
    return EXIT_USAGE;
}

/* The options: -1 when the self-check should run, else the exit status. */
static int options(int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'}, {"man", no_argument, NULL, 'm'},
        {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0},
    };
    int c;

    opterr = 0; /* our own message, then exit status 2 */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': manual(MAN_TEXT); return EXIT_SUCCESS;
        case 'm': manual(MAN_ROFF); return EXIT_SUCCESS;
        case 'V':
            printf("recap-selfcheck (recap %s, ABI %d.%d)\n", recap_version_string(),
                   recap_abi_version() >> 16, recap_abi_version() & 0xffff);
            return EXIT_SUCCESS;
        default: return usage_error("unknown option", argv[optind - 1]);
        }
    }
    return optind < argc ? usage_error("unexpected argument", argv[optind]) : -1;
}

static int selfcheck(void)
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
        fputs("host fill: FAILED: ", stdout);
        tool_text(stdout, recap_last_error());
        putchar('\n');
        return 1;
    }
    printf("host fill: %u words, seed %llu: %08x %08x %08x %08x ...\n", WORDS,
           (unsigned long long)seed, words[0], words[1], words[2], words[3]);

    st = recap_driver_version(&version);
    if (st != RECAP_OK) {
        fputs("CUDA driver: not available (", stdout);
        tool_text(stdout, recap_last_error());
        fputs("); device checks skipped\n", stdout);
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
        printf("  device %d: ", d);
        tool_text(stdout, name); /* the driver's bytes */
        printf(", sm_%d%d, %.1f GiB\n", major, minor, (double)mem / (1u << 30));
        failures += !check_device(d, words, seed);
    }
out:
    recap_generator_destroy(host);
    free(words);
    printf("%s\n", failures ? "selfcheck: FAILED" : "selfcheck: ok");
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    int rc = options(argc, argv);

    return rc >= 0 ? rc : selfcheck();
}
