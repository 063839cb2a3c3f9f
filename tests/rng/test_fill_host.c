/* SPDX-License-Identifier: Apache-2.0 */
/* Host generators: fills bit-exact with cuRAND's host generator. */
#include "fill_cases.h"

int main(void)
{
    Suite *s = suite_create("fill_host");
    TCase *tc = tcase_create("host");

    tcase_set_timeout(tc, 300);
    fill_cases_add(tc, RECAP_DEVICE_HOST);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
