/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Text for a line a person reads (recap's log lines, recap-probe's and recap-selfcheck's
 * reports): whatever bytes a name or value holds, it stays on its line and cannot paint one that
 * looks like recap's. One rule for every such line, here: control characters (C0, DEL, and
 * C1 U+0080..U+009F, which some terminals act on), the Unicode line and paragraph separators
 * (U+2028, U+2029, lines to Python's splitlines) and bytes that are not UTF-8 are written as
 * escapes: \n, \r, \t, else \xNN for each byte. Everything else, valid UTF-8 included, stays.
 * Backslashes stay too: the text is for reading, and no escape can end a line.
 */
#ifndef RECAP_BASE_TEXT_H
#define RECAP_BASE_TEXT_H

#include <stddef.h>

/* What a line shows where it left out the end of a message that did not fit. */
#define RECAP__TEXT_CUT "\xe2\x80\xa6(cut)"

/* Writes s[0 .. len) escaped into dst (NUL-terminated, cap > 0 bytes), each escape whole or not
 * at all. Returns the bytes written (at most cap - 1); *used_p (when not NULL) gets how many bytes
 * of s they stand for: less than len when the text was cut. */
size_t recap__text_escape(char *dst, size_t cap, const char *s, size_t len, size_t *used_p);

/* The escaped length of s[0 .. len), so a caller can size dst to fit. */
size_t recap__text_escaped_len(const char *s, size_t len);

/* printf into memory of its own size (free() it), for a message that holds a name or path of any
 * length; NULL when memory is short. */
char *recap__text_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
