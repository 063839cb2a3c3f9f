/* SPDX-License-Identifier: Apache-2.0 */
/* JSON output of recap-probe, on stdout. */
#ifndef RECAP_TOOLS_JSON_H
#define RECAP_TOOLS_JSON_H

/* A JSON string literal of any bytes: valid UTF-8 JSON (src/base/json.h). */
void json_string(const char *s);
/* A string literal, or null for NULL. */
void json_string_or_null(const char *s);

#endif
