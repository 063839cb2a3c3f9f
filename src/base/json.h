/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON text from bytes (RFC 8259), for everything recap writes as JSON (the RECAP_REPORT line,
 * recap-probe --json): any bytes in, a valid UTF-8 JSON string out. Quotes, backslashes and
 * control characters are escaped; bytes that are not UTF-8 become U+FFFD, one per maximal
 * invalid subpart (as Unicode recommends and Python's "replace" decodes), so a name or value
 * holding a newline or a stray byte never splits a line or makes the document invalid.
 */
#ifndef RECAP_BASE_JSON_H
#define RECAP_BASE_JSON_H

#include <stddef.h>

/* Writes s[0 .. len) as a JSON string literal, quotes included, into dst (NUL-terminated, cut to
 * cap bytes like snprintf). Returns the literal's whole length, which may exceed cap - 1. */
size_t recap__json_quote(char *dst, size_t cap, const char *s, size_t len);

/* The names (each ended by a NUL, len bytes in all) as a JSON array of strings in buf (cap bytes,
 * its NUL included; "" when cap < 3). Names are whole or left out: returns how many were left out.
 * A shorter name after one left out may still fit. */
size_t recap__json_array(char *buf, size_t cap, const char *names, size_t len);

/* Length of the valid UTF-8 sequence at s (at most len bytes), or 0 when s[0] does not start one;
 * *bad_p then gets how many bytes make its maximal invalid subpart (at least 1). */
size_t recap__utf8_seq(const unsigned char *s, size_t len, size_t *bad_p);

#endif
