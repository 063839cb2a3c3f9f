/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Output that stays valid: every string recap writes into JSON, whatever its bytes (control
 * characters, quotes, backslashes, invalid UTF-8), comes out as valid UTF-8 JSON, checked by
 * Python's strict parser (tests/base/json_check.py): recap's JSON strings of random bytes, lists of
 * random names as arrays in every size up to what they need (whole names, nothing written past
 * the size), the
 * RECAP_REPORT line of a process whose framework generators have random byte names (one line, a
 * `schema` field, `frameworks` an array), recap-probe --json with RECAP_* values of random
 * bytes, and recap-probe --json --run of such a process. Seeds come from RECAP_TEST_SEED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define CHECK "python3 " RECAP_SRCDIR "/tests/base/json_check.py "
#define CLIENT RECAP_BUILDDIR "/tests/json_client"
#define PROBE RECAP_BUILDDIR "/src/tools/recap-probe"

static void check(const char *args)
{
    char cmd[1024];
    int status;
    char *out;

    snprintf(cmd, sizeof(cmd), CHECK "%s %llu 2>&1", args, (unsigned long long)tu_rand());
    out = tu_shell(cmd, &status);
    ck_assert_msg(status == 0, "%s: %s", cmd, out);
    free(out);
}

START_TEST(strings_of_random_bytes_are_valid_json)
{
    check("quote " CLIENT);
}
END_TEST

START_TEST(arrays_of_random_names_hold_whole_names_in_any_size)
{
    check("array " CLIENT);
}
END_TEST

START_TEST(report_line_of_random_framework_names_is_valid_json)
{
    int i;

    for (i = 0; i < 8; i++)
        check("report " CLIENT);
}
END_TEST

START_TEST(probe_json_of_random_settings_is_valid_json)
{
    int i;

    for (i = 0; i < 4; i++)
        check("probe " PROBE);
}
END_TEST

START_TEST(probe_run_of_random_framework_names_is_valid_json)
{
    int i;

    for (i = 0; i < 4; i++)
        check("run " PROBE " " CLIENT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, strings_of_random_bytes_are_valid_json);
    tcase_add_test(tc, arrays_of_random_names_hold_whole_names_in_any_size);
    tcase_add_test(tc, report_line_of_random_framework_names_is_valid_json);
    tcase_add_test(tc, probe_json_of_random_settings_is_valid_json);
    /* --run preloads librecap into another program: not a sanitizer-built one, whose runtime
     * must come first (as in tests/probe/test_probe.c) */
    if (getenv("RECAP_TEST_NO_PRELOAD") == NULL && getenv("RECAP_TEST_PRELOAD_FIRST") == NULL)
        tcase_add_test(tc, probe_run_of_random_framework_names_is_valid_json);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
