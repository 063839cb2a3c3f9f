/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What recap writes about itself: hostile names and hostile sinks. Any bytes (a framework
 * generator's name, a value) become one valid UTF-8 JSON string (checked here by a decoder of
 * its own, which also checks that valid UTF-8 comes back unchanged); RECAP_LOG_FILE and
 * RECAP_REPORT sinks of any kind (a FIFO read or not, a device, a directory, a regular file,
 * /dev/null) open at once or are refused, never waited on (libFuzzer's -timeout catches a wait).
 * Text for people (src/base/text.h) and the log lines made of it: whatever bytes a message, name
 * or value holds, one line with recap's prefix, valid UTF-8, no control character; a cut one
 * marked.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json.h"
#include "base/log.h"
#include "base/sink.h"
#include "base/text.h"
#include "tests/fuzz/fuzz.h"
#include "tests/support/value_framework.h"

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

/* The rule of a line a person reads (src/base/text.h): valid UTF-8 (utf8_len), no C0, DEL, C1,
 * U+2028 or U+2029. */
static void check_text(const char *t, size_t n)
{
    const unsigned char *u = (const unsigned char *)t;
    size_t i = 0, len;

    while (i < n) {
        REQUIRE((len = utf8_len(u + i, n - i)) > 0);
        REQUIRE(!(len == 1 && (u[i] < 0x20 || u[i] == 0x7f)));
        REQUIRE(!(len == 2 && u[i] == 0xC2 && u[i + 1] < 0xA0));
        REQUIRE(!(len == 3 && u[i] == 0xE2 && u[i + 1] == 0x80 &&
                  (u[i + 2] == 0xA8 || u[i + 2] == 0xA9)));
        i += len;
    }
}

/* Any bytes, escaped into any room: the rule holds, escapes are never split, and with room
 * enough nothing is left out. */
static void text_of(input_t *in)
{
    char raw[256], out[256 * 4 + 1];
    size_t n = u8(in), cap = (size_t)u8(in) * 4 + 1, i, len, used, whole;

    for (i = 0; i < n; i++)
        raw[i] = (char)u8(in);
    len = recap__text_escape(out, cap, raw, n, &used);
    REQUIRE(len < cap && strlen(out) == len && used <= n);
    check_text(out, len);
    whole = recap__text_escaped_len(raw, n);
    REQUIRE(used == n ? len == whole : len < whole);
    if (cap > whole)
        REQUIRE(used == n);
}

/* A log line holding a hostile value (as a setting's warning does) and a host's hostile
 * message, read back from stderr: one line each, recap's prefix, the rule after it. */
static void log_line(input_t *in)
{
    char value[512], msg[2048], back[4096];
    size_t n = u8(in) * 2, m = (size_t)u8(in) * 8, i, got = 0;
    int pipes[2], saved, lines = 0;
    ssize_t k;

    for (i = 0; i < n; i++)
        value[i] = (char)u8(in);
    value[n] = '\0';
    for (i = 0; i < m; i++)
        msg[i] = (char)(u8(in) | 1); /* no NUL: the whole message goes in */
    msg[m] = '\0';
    fflush(stderr);
    REQUIRE(pipe(pipes) == 0 && (saved = dup(2)) >= 0 && dup2(pipes[1], 2) == 2);
    recap__log_stderr(RECAP_LOG_WARN, "RECAP_FUZZ=%s not understood", value);
    recap__log_stderr(RECAP_LOG_WARN, "%s", msg);
    REQUIRE(dup2(saved, 2) == 2);
    close(saved);
    close(pipes[1]);
    while ((k = read(pipes[0], back + got, sizeof(back) - 1 - got)) > 0)
        got += (size_t)k;
    close(pipes[0]);
    back[got] = '\0';
    for (i = 0; i < got; i++) {
        const char *eol = memchr(back + i, '\n', got - i), *p = strstr(back + i, " recap WARN ");

        REQUIRE(eol != NULL && p != NULL && p < eol); /* whole lines, each with the prefix */
        check_text(back + i, (size_t)(eol - (back + i)));
        lines++;
        i = (size_t)(eol - back);
    }
    REQUIRE(lines == 2);
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
    switch (u8(in) % 5) {
    case 0:
        json_of(in);
        break;
    case 1:
        named_framework(in);
        break;
    case 2:
        text_of(in);
        break;
    case 3:
        log_line(in);
        break;
    default:
        sink(in);
        break;
    }
}
