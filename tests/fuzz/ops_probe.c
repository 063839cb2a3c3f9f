/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The probe API (recap_probe_*): the table, runs of chosen checks (comma lists of known names,
 * repeats, empty items, unknown names), status names. A run answers each named check once, in
 * table order, with a known status and text; an unknown name runs nothing. The probe begins
 * captures of its own (global mode too), so it runs only while the input captures nothing.
 */
#include "tests/fuzz/fuzz.h"

static int capturing(void)
{
    int i;

    for (i = 0; i < NSTREAM; i++)
        if (w.capturing[i])
            return 1;
    return 0;
}

/* The checks that fill millions of words (half a second under the sanitizers) or replay graphs:
 * tests/probe/test_probe.c runs them; here they would cut the inputs run per second tenfold. */
static int slow(const char *check)
{
    return strcmp(check, "philox") == 0 || strcmp(check, "replay") == 0;
}

static void probe_run(input_t *in, const recap_probe_check_info_t *checks, size_t count)
{
    recap_probe_result_t *res = (recap_probe_result_t *)0x1;
    char only[256], buf[32];
    int want[16] = {0}, unknown = 0, i, items = 1 + u8(in) % 3;
    size_t n = 0x5a5a, len = 0, j, expect = 0;

    REQUIRE(count <= 16);
    only[0] = '\0';
    for (i = 0; i < items; i++) {
        uint8_t k = u8(in);
        const char *nm;

        if (k < 200) {
            j = k % count;
            if (slow(checks[j].name))
                continue;
            want[j] = 1;
            nm = checks[j].name;
        } else if (k < 230) {
            nm = ""; /* an empty item */
        } else {
            char *c;

            /* One item per name: a comma in the bytes would make it several (the items loop
             * makes the list's shape). */
            nm = name(in, buf, sizeof(buf));
            if (nm == buf)
                while ((c = strchr(buf, ',')) != NULL)
                    *c = ';';
            for (j = 0; j < count && strcmp(nm, checks[j].name) != 0; j++)
                ;
            if (j < count && slow(nm))
                continue;
            if (j < count)
                want[j] = 1;
            else if (*nm != '\0')
                unknown = 1;
        }
        len += (size_t)snprintf(only + len, sizeof(only) - len, "%s%s", i ? "," : "", nm);
        if (len >= sizeof(only))
            return;
    }
    if (only[0] == '\0')
        return; /* all of them: too slow here, see slow() */
    for (j = 0; j < count; j++)
        expect += (size_t)want[j];
    if (CALL(recap_probe_run(only, &res, &n)) != RECAP_OK) {
        REQUIRE(res == (recap_probe_result_t *)0x1 && n == 0x5a5a);
        return;
    }
    REQUIRE(!unknown); /* a list of empty items (",") names none and runs none */
    REQUIRE(n == expect);
    for (i = 0, j = 0; j < count; j++) {
        if (!want[j])
            continue;
        REQUIRE(strcmp(res[i].name, checks[j].name) == 0);
        REQUIRE((unsigned)res[i].status <= RECAP_PROBE_WARN && res[i].detail != NULL);
        i++;
    }
    REQUIRE(CALL(recap_probe_free(res)) == RECAP_OK);
}

void op_probe(input_t *in)
{
    const recap_probe_check_info_t *checks;
    size_t count = 0, i;

    REQUIRE(CALL(recap_probe_checks(&checks, &count)) == RECAP_OK && count > 0);
    for (i = 0; i < count; i++)
        REQUIRE(checks[i].name != NULL && checks[i].summary != NULL && *checks[i].name != '\0');
    switch (u8(in) % 3) {
    case 0:
        if (!capturing())
            probe_run(in, checks, count);
        break;
    case 1:
        REQUIRE(recap_probe_status_name((recap_probe_status_t)(int)num(in)) != NULL);
        break;
    default:
        REQUIRE(CALL(recap_probe_free(NULL)) == RECAP_OK);
        break;
    }
}
