/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "base/json.h"

size_t recap__utf8_seq(const unsigned char *s, size_t len, size_t *bad_p)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t need, i;

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF)
        need = 2;
    else if (c >= 0xF0 && c <= 0xF4)
        need = 3;
    else {
        *bad_p = 1; /* a continuation byte or a lead that is never valid */
        return 0;
    }
    /* the second byte's range excludes overlong forms, surrogates and code points past U+10FFFF */
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    for (i = 1; i <= need; i++) {
        if (i >= len || s[i] < lo || s[i] > hi) {
            *bad_p = i; /* the lead and the continuations that were valid so far */
            return 0;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    return need + 1;
}

/* Appends n bytes of p at *off (whatever fits in cap - 1); *off counts them all. */
static void put(char *dst, size_t cap, size_t *off, const char *p, size_t n)
{
    if (*off < cap) {
        size_t room = cap - 1 - *off;
        memcpy(dst + *off, p, n < room ? n : room);
    }
    *off += n;
}

size_t recap__json_quote(char *dst, size_t cap, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t off = 0, i = 0;

    put(dst, cap, &off, "\"", 1);
    while (i < len) {
        size_t bad = 0, n = recap__utf8_seq(u + i, len - i, &bad);
        char esc[8];

        if (n == 0) {
            put(dst, cap, &off, "\\ufffd", 6);
            i += bad;
            continue;
        }
        if (u[i] == '"' || u[i] == '\\') {
            esc[0] = '\\';
            esc[1] = (char)u[i];
            put(dst, cap, &off, esc, 2);
        } else if (u[i] == '\n') {
            put(dst, cap, &off, "\\n", 2);
        } else if (u[i] == '\t') {
            put(dst, cap, &off, "\\t", 2);
        } else if (u[i] == '\r') {
            put(dst, cap, &off, "\\r", 2);
        } else if (u[i] < 0x20 || u[i] == 0x7f) {
            snprintf(esc, sizeof(esc), "\\u%04x", u[i]);
            put(dst, cap, &off, esc, 6);
        } else {
            put(dst, cap, &off, s + i, n);
        }
        i += n;
    }
    put(dst, cap, &off, "\"", 1);
    if (cap > 0)
        dst[off < cap ? off : cap - 1] = '\0';
    return off;
}

size_t recap__json_array(char *buf, size_t cap, const char *names, size_t len)
{
    size_t off = 0, at, left_out = 0;

    if (cap < 3) { /* not even "[]" and its NUL: every name is left out */
        for (at = 0; at < len; at += strlen(names + at) + 1)
            left_out++;
        if (cap > 0)
            buf[0] = '\0';
        return left_out;
    }
    buf[off++] = '[';
    for (at = 0; at < len; at += strlen(names + at) + 1) {
        size_t sep = off > 1, room, n;

        /* a full array leaves no room even for the separator, "]" and the NUL after */
        if (off + sep + 2 >= cap) {
            left_out++;
            continue;
        }
        room = cap - off - sep - 2;
        n = recap__json_quote(buf + off + sep, room + 1, names + at, strlen(names + at));
        if (n > room) {
            left_out++;
            continue;
        }
        if (sep)
            buf[off] = ',';
        off += sep + n;
    }
    buf[off++] = ']';
    buf[off] = '\0';
    return left_out;
}
