/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap-selfcheck, run as a subprocess: its conventions (--help, --man, --version, usage errors
 * exit 2), the run without a driver (host fill, device part skipped, exit 0) and with the driver
 * the suite runs on (the CUDA test double in CI: every device's fill equals the host's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define TOOL "src/tools/recap-selfcheck"
#define NO_DRIVER "RECAP_CUDA_DRIVER=/nonexistent "

static char *selfcheck(const char *env, const char *args, int merge, int *status_p)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd), "%s %s %s %s", env, TOOL, args, merge ? "2>&1" : "2>/dev/null");
    return tu_shell(cmd, status_p);
}

START_TEST(help_prints_the_manual_and_exits_0)
{
    static const char *const sections[] = {"RECAP-SELFCHECK(1)", "NAME", "SYNOPSIS",
                                           "DESCRIPTION", "OPTIONS", "EXIT STATUS", "--version"};
    int status;
    char *out = selfcheck(NO_DRIVER, "--help", 0, &status);
    size_t i;

    ck_assert_int_eq(status, 0);
    for (i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
        ck_assert_msg(strstr(out, sections[i]) != NULL, "no %s in:\n%s", sections[i], out);
    ck_assert_ptr_null(strstr(out, "host fill:")); /* the manual, not a run */
    free(out);
}
END_TEST

START_TEST(version_prints_the_library_version)
{
    char want[128];
    int status;
    char *out = selfcheck(NO_DRIVER, "--version", 0, &status);

    snprintf(want, sizeof(want), "recap-selfcheck (recap %s, ABI %d.%d)\n",
             recap_version_string(), recap_abi_version() >> 16, recap_abi_version() & 0xffff);
    ck_assert_int_eq(status, 0);
    ck_assert_str_eq(out, want);
    free(out);
}
END_TEST

/* The man page is the manual --help prints: the same sections, as roff. */
START_TEST(man_is_the_manual_as_roff)
{
    static const char *const sections[] = {".SH NAME", ".SH SYNOPSIS", ".SH DESCRIPTION",
                                           ".SH OPTIONS", ".SH EXIT STATUS", ".SH SEE ALSO"};
    int status;
    char *out = selfcheck(NO_DRIVER, "--man", 0, &status);
    size_t i;

    ck_assert_int_eq(status, 0);
    ck_assert_msg(strncmp(out, ".TH RECAP-SELFCHECK 1 ", 22) == 0, "%.80s", out);
    for (i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
        ck_assert_msg(strstr(out, sections[i]) != NULL, "no %s", sections[i]);
    ck_assert_ptr_nonnull(strstr(out, "\\fB\\-\\-version\\fR"));
    free(out);
}
END_TEST

START_TEST(unknown_options_and_arguments_exit_2)
{
    static const char *const bad[] = {"--no-such-option", "-x", "stray", "--help=yes"};
    size_t i;
    int status;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *out = selfcheck(NO_DRIVER, bad[i], 1, &status);

        ck_assert_msg(status == 2, "'%s' exited %d", bad[i], status);
        ck_assert_msg(strstr(out, "Try 'recap-selfcheck --help'") != NULL, "'%s': %s", bad[i],
                      out);
        ck_assert_msg(strstr(out, "host fill") == NULL, "'%s' ran the check", bad[i]);
        free(out);
    }
}
END_TEST

START_TEST(without_driver_the_host_fill_runs_and_devices_are_skipped)
{
    int status;
    char *out = selfcheck(NO_DRIVER, "", 0, &status);

    ck_assert_int_eq(status, 0);
    ck_assert_ptr_nonnull(strstr(out, "host fill: 1048576 words"));
    ck_assert_ptr_nonnull(strstr(out, "CUDA driver: not available"));
    ck_assert_ptr_nonnull(strstr(out, "selfcheck: ok"));
    free(out);
}
END_TEST

START_TEST(with_driver_every_device_fill_equals_the_host_fill)
{
    int status, count = 0;
    char *out;

    if (recap_device_count(&count) != RECAP_OK || count < 1)
        return; /* run by hand on a machine without a driver */
    out = selfcheck("", "", 0, &status);
    ck_assert_msg(status == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "device 0 fill: 1048576 words, identical to the host fill"));
    ck_assert_ptr_null(strstr(out, "DIFFERENT"));
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("selfcheck");
    TCase *tc = tcase_create("selfcheck");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, help_prints_the_manual_and_exits_0);
    tcase_add_test(tc, version_prints_the_library_version);
    tcase_add_test(tc, man_is_the_manual_as_roff);
    tcase_add_test(tc, unknown_options_and_arguments_exit_2);
    tcase_add_test(tc, without_driver_the_host_fill_runs_and_devices_are_skipped);
    tcase_add_test(tc, with_driver_every_device_fill_equals_the_host_fill);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
