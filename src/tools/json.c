/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "tools/json.h"

void json_string(const char *s)
{
    putchar('"');
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

void json_string_or_null(const char *s)
{
    if (s == NULL)
        fputs("null", stdout);
    else
        json_string(s);
}
