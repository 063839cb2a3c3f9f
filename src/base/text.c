/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE /* vasprintf */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/text.h"

/* The escape of s[0 .. n) (one character or one invalid byte) into esc; its length, 0 when the
 * bytes stand as they are. */
static size_t escape_of(const unsigned char *s, size_t n, char esc[16])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char c = s[0];
    size_t i, k = 0;

    if (n == 1 && (c == '\n' || c == '\r' || c == '\t')) {
        esc[0] = '\\';
        esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        return 2;
    }
    /* C0 and DEL; C1 (C2 80..C2 9F); U+2028, U+2029 (E2 80 A8, E2 80 A9); n == 0: not UTF-8 */
    if (!(n == 1 && (c < 0x20 || c == 0x7f)) && !(n == 2 && c == 0xC2 && s[1] < 0xA0) &&
        !(n == 3 && c == 0xE2 && s[1] == 0x80 && (s[2] == 0xA8 || s[2] == 0xA9)) && n != 0)
        return 0;
    for (i = 0; i < (n != 0 ? n : 1); i++) {
        esc[k++] = '\\';
        esc[k++] = 'x';
        esc[k++] = hex[s[i] >> 4];
        esc[k++] = hex[s[i] & 0xf];
    }
    return k;
}

size_t recap__text_escape(char *dst, size_t cap, const char *s, size_t len, size_t *used_p)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, off = 0;

    while (i < len) {
        size_t bad = 0, n = recap__utf8_seq(u + i, len - i, &bad), k, step = n != 0 ? n : 1;
        char esc[16];
        const char *out = esc;

        /* an invalid subpart is escaped a byte at a time (bad is its length; one byte a step) */
        k = escape_of(u + i, n, esc);
        if (k == 0) {
            out = s + i;
            k = n;
        }
        if (dst == NULL ? 0 : off + k > cap - 1)
            break;
        if (dst != NULL)
            memcpy(dst + off, out, k);
        off += k;
        i += step;
    }
    if (dst != NULL)
        dst[off] = '\0';
    if (used_p != NULL)
        *used_p = i;
    return off;
}

size_t recap__text_escaped_len(const char *s, size_t len)
{
    return recap__text_escape(NULL, 0, s, len, NULL);
}

char *recap__text_printf(const char *fmt, ...)
{
    va_list ap;
    char *out;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&out, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : out;
}
