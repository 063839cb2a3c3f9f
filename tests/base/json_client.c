/* SPDX-License-Identifier: Apache-2.0 */
/*
 * For tests/base/test_json.c (through tests/base/json_check.py): what recap writes as JSON from
 * bytes.
 *   json_client quote SEED N   N random byte strings, one line each: their hex, a tab, and
 *                              recap's JSON string of them (src/base/json.c)
 *   json_client array SEED N   N random lists of names (no NUL), each written as a JSON array
 *                              into every size from 0 to 4 past what it needs
 *                              (recap__json_array): a line each, the size, a tab, the names' hex
 *                              joined by commas, a tab, how many were left out, a tab, the array;
 *                              exits 1 if a byte past the size changed
 *   json_client names HEX...   creates a framework generator named by each HEX's bytes, destroys
 *                              it, exits: the RECAP_REPORT line (when set) lists the names
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "recap.h"
#include "tests/support/value_framework.h"

static uint64_t rng;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Bytes that matter most often: controls, quotes, backslashes, bytes past 0x7f, valid sequences
 * of every length, sequences cut short, surrogates, overlong forms. */
static size_t random_bytes(unsigned char *b, size_t cap)
{
    static const char *const pieces[] = {"\n", "\r", "\t", "\"", "\\", "\x01", "\x1f", "\x7f",
                                         "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xc3",
                                         "\xe2\x82", "\xf0\x9f\x98", "\xed\xa0\x80", "\xc0\xaf",
                                         "\xe0\x80\xaf", "\xf4\x90\x80\x80", "\xf8", "\xff", ",",
                                         "a", "/", "\xef\xbf\xbd"};
    size_t n = 0, want = next() % 24;

    while (n < want) {
        if (next() % 3 == 0) {
            b[n++] = (unsigned char)next(); /* any byte, NUL included */
        } else {
            const char *p = pieces[next() % (sizeof(pieces) / sizeof(pieces[0]))];
            size_t len = strlen(p);
            if (n + len > cap)
                break;
            memcpy(b + n, p, len);
            n += len;
        }
    }
    return n;
}

static int quote(uint64_t seed, long count)
{
    unsigned char b[64];
    char out[512];
    long k;

    rng = seed | 1;
    for (k = 0; k < count; k++) {
        size_t n = random_bytes(b, sizeof(b)), i, len = recap__json_quote(out, sizeof(out),
                                                                          (const char *)b, n);
        if (len >= sizeof(out))
            return 1;
        for (i = 0; i < n; i++)
            printf("%02x", b[i]);
        printf("\t%s\n", out);
    }
    return 0;
}

static int array(uint64_t seed, long count)
{
    /* 12 names of up to 32 bytes, each byte escaped to at most 6, with quotes and commas */
    enum { CANARY = 16, NAMES = 12 * 33, MOST = 12 * (32 * 6 + 3) + 3 };
    unsigned char canary[CANARY], b[32];
    char names[NAMES], out[MOST + CANARY];
    size_t len, cap, i, need;
    long k;

    memset(canary, 0xa5, sizeof(canary));
    rng = seed | 1;
    for (k = 0; k < count; k++) {
        size_t count_names = 1 + next() % 12;

        for (len = 0, i = 0; i < count_names; i++) {
            size_t n = random_bytes(b, sizeof(b)), j;
            for (j = 0; j < n; j++)
                if (b[j] != 0)
                    names[len++] = (char)b[j];
            names[len++] = '\0';
        }
        if (recap__json_array(out, MOST, names, len) != 0)
            return 1; /* MOST holds any list this makes */
        need = strlen(out) + 1;
        for (cap = 0; cap <= need + 4; cap++) {
            size_t left_out;

            memset(out, 0xa5, sizeof(out));
            left_out = recap__json_array(out, cap, names, len);
            if (memcmp(out + cap, canary, CANARY) != 0) {
                fprintf(stderr, "json_client: recap__json_array wrote past %zu bytes\n", cap);
                return 1;
            }
            if (cap > 0 && memchr(out, '\0', cap) == NULL) {
                fprintf(stderr, "json_client: no NUL within %zu bytes\n", cap);
                return 1;
            }
            printf("%zu\t", cap);
            for (i = 0; i < len; i++)
                if (names[i] != '\0')
                    printf("%02x", (unsigned char)names[i]);
                else if (i + 1 < len)
                    putchar(',');
            printf("\t%zu\t%s\n", left_out, cap > 0 ? out : "");
        }
    }
    return 0;
}

static int names(int argc, char **argv)
{
    uint8_t state[RECAP_STATE_BYTES] = {0};
    int i;

    for (i = 0; i < argc; i++) {
        char name[256];
        size_t n = 0;
        recap_framework_ops_t ops;
        unsigned v;
        recap_generator_h gen;

        while (n + 1 < sizeof(name) && sscanf(argv[i] + 2 * n, "%2x", &v) == 1)
            name[n++] = (char)v;
        name[n] = '\0';
        ops = vf_ops(name);
        if (recap_generator_create_framework(&ops, state, RECAP_DEVICE_HOST, &gen) != RECAP_OK ||
            recap_generator_destroy(gen) != RECAP_OK) {
            fprintf(stderr, "json_client: %s\n", recap_last_error());
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "quote") == 0)
        return quote(strtoull(argv[2], NULL, 0), atol(argv[3]));
    if (argc == 4 && strcmp(argv[1], "array") == 0)
        return array(strtoull(argv[2], NULL, 0), atol(argv[3]));
    if (argc >= 2 && strcmp(argv[1], "names") == 0)
        return names(argc - 2, argv + 2);
    fprintf(stderr, "usage: json_client quote SEED N | array SEED N | names HEX...\n");
    return 2;
}
