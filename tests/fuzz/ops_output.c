/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What recap writes about itself: hostile names and hostile sinks. Any bytes (a framework
 * generator's name, a value) become one valid UTF-8 JSON string (checked here by a decoder of
 * its own, which also checks that valid UTF-8 comes back unchanged); RECAP_LOG_FILE and
 * RECAP_REPORT sinks of any kind (a FIFO read or not, a device, a directory, a regular file,
 * /dev/null) open at once or are refused, never waited on (libFuzzer's -timeout catches a wait).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json.h"
#include "base/sink.h"
#include "tests/fuzz/fuzz.h"
#include "tests/value_framework.h"

/* Independent of src/base/json.c: the length of the UTF-8 sequence at s, 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    uint32_t cp;
    size_t len, i;

    if (s[0] < 0x80)
        return 1;
    len = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    cp = s[0] & (0x7F >> len);
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* Checks that q (n bytes) is one JSON string literal of valid UTF-8; decodes its content into out
 * (the escapes of ASCII only, as recap writes; \ufffd stays as its 6 characters). */
static size_t check_literal(const char *q, size_t n, char *out)
{
    const unsigned char *u = (const unsigned char *)q;
    size_t i = 1, k = 0, len;

    REQUIRE(n >= 2 && q[0] == '"' && q[n - 1] == '"');
    while (i < n - 1) {
        REQUIRE(u[i] >= 0x20 && u[i] != '"');
        if (u[i] == '\\') {
            REQUIRE(i + 1 < n - 1 && strchr("\"\\nrtu", q[i + 1]) != NULL);
            if (q[i + 1] == 'u') {
                REQUIRE(i + 5 < n - 1);
                if (strncmp(q + i, "\\ufffd", 6) != 0) {
                    unsigned v;
                    REQUIRE(sscanf(q + i + 2, "%4x", &v) == 1 && (v < 0x20 || v == 0x7f));
                    out[k++] = (char)v;
                } else {
                    memcpy(out + k, "\\ufffd", 6);
                    k += 6;
                }
                i += 6;
            } else {
                out[k++] = q[i + 1] == 'n' ? '\n' : q[i + 1] == 'r' ? '\r' : q[i + 1] == 't' ? '\t'
                                                                                       : q[i + 1];
                i += 2;
            }
            continue;
        }
        REQUIRE((len = utf8_len(u + i, n - 1 - i)) > 0);
        memcpy(out + k, q + i, len);
        k += len;
        i += len;
    }
    return k;
}

static void json_of(input_t *in)
{
    char raw[256], quoted[256 * 6 + 3], back[256 * 6 + 3];
    size_t n = u8(in), i, len, valid = 1;

    for (i = 0; i < n; i++)
        raw[i] = (char)u8(in);
    len = recap__json_quote(quoted, sizeof(quoted), raw, n);
    REQUIRE(len < sizeof(quoted) && strlen(quoted) == len);
    REQUIRE(recap__json_quote(NULL, 0, raw, n) == len);
    len = check_literal(quoted, len, back);
    for (i = 0; i < n && valid; i += valid) /* valid UTF-8 in: the same bytes out */
        valid = raw[i] != '\0' && raw[i] != 0x7f && (unsigned char)raw[i] >= 0x20
                    ? utf8_len((const unsigned char *)raw + i, n - i)
                    : 1;
    if (valid)
        REQUIRE(len == n && memcmp(back, raw, n) == 0);
}

/* A framework generator named by any bytes: the report lists the name, escaped (json_of). */
static void named_framework(input_t *in)
{
    static uint8_t state[RECAP_STATE_BYTES];
    char buf[160];
    recap_framework_ops_t ops = vf_ops(name(in, buf, sizeof(buf)));
    recap_generator_h gen;

    if (CALL(recap_generator_create_framework(&ops, state, RECAP_DEVICE_HOST, &gen)) == RECAP_OK)
        REQUIRE(CALL(recap_generator_destroy(gen)) == RECAP_OK);
}

static char dir[64];

static void remove_dir(void)
{
    rmdir(dir);
}

static void sink(input_t *in)
{
    char path[128];
    const char *target = path; /* what recap opens: path (in dir, removed after) or a device */
    int kind = u8(in) % 6, reader = -1, fd;

    if (dir[0] == '\0') {
        snprintf(dir, sizeof(dir), "/tmp/recap-fuzz-sinks-XXXXXX");
        REQUIRE(mkdtemp(dir) != NULL);
        atexit(remove_dir);
    }
    snprintf(path, sizeof(path), "%s/%d", dir, kind);
    switch (kind) {
    case 0: /* a FIFO nobody reads */
    case 1: /* a FIFO somebody reads */
        REQUIRE(mkfifo(path, 0600) == 0);
        if (kind == 1)
            REQUIRE((reader = open(path, O_RDONLY | O_NONBLOCK)) >= 0);
        break;
    case 2:
        target = "/dev/full"; /* a character device */
        break;
    case 3:
        REQUIRE(mkdir(path, 0700) == 0);
        break;
    case 4:
        target = "/dev/null";
        break;
    default: /* a regular file, made by the open */
        break;
    }
    fd = recap__sink_open(u8(in) % 2 ? "RECAP_LOG_FILE" : "RECAP_REPORT", target, target,
                          u8(in) % 2 ? O_APPEND : O_TRUNC, "fuzz");
    REQUIRE((fd >= 0) == (kind >= 4)); /* regular files and /dev/null only */
    if (fd >= 0)
        close(fd);
    if (reader >= 0)
        close(reader);
    if (kind == 3)
        REQUIRE(rmdir(path) == 0);
    else if (target == path)
        REQUIRE(unlink(path) == 0);
}

void op_output(input_t *in)
{
    switch (u8(in) % 3) {
    case 0:
        json_of(in);
        break;
    case 1:
        named_framework(in);
        break;
    default:
        sink(in);
        break;
    }
}
