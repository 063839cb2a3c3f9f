/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap-probe's reader of the RECAP_REPORT lines (report_parse.h): a small JSON reader for the
 * report's one flat object per line, and the sum of a command's processes' lines.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "report/report.h"
#include "tools/report_parse.h"

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static int hex4(const char *p, unsigned *v)
{
    int i;

    *v = 0;
    for (i = 0; i < 4; i++) {
        char c = p[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16;
        if (d == 16)
            return 0;
        *v = *v << 4 | d;
    }
    return 1;
}

/* Appends code point cp as UTF-8 (U+FFFD for a lone surrogate) to out[*n]. */
static void put_utf8(char *out, size_t *n, unsigned cp)
{
    if (cp >= 0xD800 && cp <= 0xDFFF)
        cp = 0xFFFD;
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | cp >> 6);
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | cp >> 12);
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | cp >> 18);
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* A JSON string at p (its opening quote), decoded, then written again as recap writes strings
 * (src/base/json.h): whatever bytes a report holds (another library's, a damaged file), what
 * this tool prints is valid UTF-8 JSON. Returns the position after it, or NULL. */
static const char *string_value(const char *p, char *dst, size_t cap)
{
    char raw[1024];
    size_t n = 0;

    for (p++; *p != '"'; p++) {
        unsigned cp, lo;

        if (*p == '\0' || (unsigned char)*p < 0x20 || n + 4 > sizeof(raw))
            return NULL;
        if (*p != '\\') {
            raw[n++] = *p;
            continue;
        }
        switch (*++p) {
        case '"': case '\\': case '/': raw[n++] = *p; break;
        case 'b': raw[n++] = '\b'; break;
        case 'f': raw[n++] = '\f'; break;
        case 'n': raw[n++] = '\n'; break;
        case 'r': raw[n++] = '\r'; break;
        case 't': raw[n++] = '\t'; break;
        case 'u':
            if (!hex4(p + 1, &cp))
                return NULL;
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && p[1] == '\\' && p[2] == 'u' && hex4(p + 3, &lo) &&
                lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            put_utf8(raw, &n, cp);
            break;
        default:
            return NULL;
        }
    }
    return recap__json_quote(dst, cap, raw, n) < cap ? p + 1 : NULL;
}

/* The end of the JSON number at p (RFC 8259's grammar), or NULL. */
static const char *number_end(const char *p)
{
    size_t d;

    p += *p == '-';
    if (*p == '0')
        p++;
    else if ((d = strspn(p, "0123456789")) > 0)
        p += d;
    else
        return NULL;
    if (*p == '.') {
        if ((d = strspn(p + 1, "0123456789")) == 0)
            return NULL;
        p += 1 + d;
    }
    if (*p == 'e' || *p == 'E') {
        p += 1 + (p[1] == '+' || p[1] == '-');
        if ((d = strspn(p, "0123456789")) == 0)
            return NULL;
        p += d;
    }
    return p;
}

/* Copies one JSON scalar (a string, number, true, false, null) or an array of them as JSON text
 * (strings written again: string_value); returns the position after it, or NULL when it is not
 * one or does not fit. */
static const char *scalar(const char *p, char *dst, size_t cap)
{
    const char *start = p;
    size_t len;

    if (*p == '"')
        return string_value(p, dst, cap);
    if (*p == '[') {
        size_t off = 1;

        if (cap < 3)
            return NULL;
        dst[0] = '[';
        p = skip_ws(p + 1);
        while (*p != ']') {
            if (off > 1) {
                if (*p++ != ',')
                    return NULL;
                p = skip_ws(p);
                dst[off++] = ',';
            }
            if (*p == '[' || off + 2 >= cap || (p = scalar(p, dst + off, cap - off - 1)) == NULL)
                return NULL;
            off += strlen(dst + off);
            p = skip_ws(p);
        }
        dst[off++] = ']';
        dst[off] = '\0';
        return p + 1;
    }
    if (strncmp(p, "true", 4) == 0 || strncmp(p, "null", 4) == 0) {
        p += 4;
    } else if (strncmp(p, "false", 5) == 0) {
        p += 5;
    } else if ((p = number_end(p)) == NULL) {
        return NULL;
    }
    len = (size_t)(p - start);
    if (len >= cap)
        return NULL;
    memcpy(dst, start, len);
    dst[len] = '\0';
    return p;
}

static int parse_report(const char *text, report_t *r)
{
    const char *p = skip_ws(text);

    r->n = 0;
    if (*p++ != '{')
        return -1;
    p = skip_ws(p);
    if (*p == '}')
        return *skip_ws(p + 1) == '\0' ? 0 : -1;
    for (;;) {
        if (r->n == MAX_FIELDS || *p != '"' || (p = scalar(p, r->key[r->n], 64)) == NULL)
            return -1;
        p = skip_ws(p);
        if (*p++ != ':' || (p = scalar(skip_ws(p), r->value[r->n], sizeof(r->value[0]))) == NULL)
            return -1;
        r->n++;
        p = skip_ws(p);
        if (*p == '}')
            return *skip_ws(p + 1) == '\0' ? 0 : -1;
        if (*p++ != ',')
            return -1;
        p = skip_ws(p);
    }
}

static int is_count(const char *v)
{
    return *v >= '0' && *v <= '9' && v[strspn(v, "0123456789")] == '\0';
}

/* How the processes' values of a field (its key, with quotes) make the command's: report/report.h
 * says; a field it does not list (another version's library) is summed when it is a count. */
static int merge_of(const char *key, const char *value)
{
    static const struct {
        const char *key;
        int merge;
    } fields[] = {
#define FIELD(name, type, merge) {"\"" #name "\"", RECAP__REPORT_##merge},
        RECAP__REPORT_FIELDS(FIELD)
#undef FIELD
    };
    size_t i;

    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (strcmp(fields[i].key, key) == 0)
            return fields[i].merge;
    return is_count(value) ? RECAP__REPORT_SUM : RECAP__REPORT_LAST;
}

int summarize_report(const char *text, report_t *r)
{
    report_t *one = calloc(1, sizeof(*one));
    char *copy = strdup(text), *line, *save = NULL;
    unsigned long long processes = 0, findings = 0;
    int i, j;

    if (one == NULL || copy == NULL) {
        free(one);
        free(copy);
        return -1;
    }
    r->n = 1;
    snprintf(r->key[0], sizeof(r->key[0]), "\"processes\"");
    for (line = strtok_r(copy, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        int finding = 0;

        if (parse_report(line, one) != 0)
            continue;
        /* A line another part of recap adds ("source": recap.torch's check of a graph's first
         * replay) is a finding of a process its librecap line counts already. */
        for (i = 0; i < one->n; i++)
            finding |= strcmp(one->key[i], "\"source\"") == 0;
        if (finding)
            findings++;
        else
            processes++;
        for (i = 0; i < one->n; i++) {
            int merge = merge_of(one->key[i], one->value[i]);

            if (merge == RECAP__REPORT_PROCESS || strcmp(one->key[i], "\"source\"") == 0)
                continue;
            for (j = 1; j < r->n && strcmp(r->key[j], one->key[i]) != 0; j++)
                ;
            if (j == r->n) {
                if (r->n == MAX_FIELDS)
                    continue;
                snprintf(r->key[j], sizeof(r->key[j]), "%s", one->key[i]);
                snprintf(r->value[j], sizeof(r->value[j]), "0");
                r->n++;
            }
            if (merge == RECAP__REPORT_SUM && is_count(one->value[i]) && is_count(r->value[j]))
                snprintf(r->value[j], sizeof(r->value[j]), "%llu",
                         strtoull(r->value[j], NULL, 10) + strtoull(one->value[i], NULL, 10));
            else
                snprintf(r->value[j], sizeof(r->value[j]), "%s", one->value[i]);
        }
    }
    free(one);
    free(copy);
    snprintf(r->value[0], sizeof(r->value[0]), "%llu", processes);
    return processes + findings > 0 ? 0 : -1;
}
