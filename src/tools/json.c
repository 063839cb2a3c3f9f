/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tools/json.h"

void json_string(const char *s)
{
    size_t len = strlen(s), need = recap__json_quote(NULL, 0, s, len);
    char *buf = malloc(need + 1);

    if (buf == NULL) { /* (nothing better to print than an empty string) */
        fputs("\"\"", stdout);
        return;
    }
    recap__json_quote(buf, need + 1, s, len);
    fputs(buf, stdout);
    free(buf);
}

void json_string_or_null(const char *s)
{
    if (s == NULL)
        fputs("null", stdout);
    else
        json_string(s);
}
