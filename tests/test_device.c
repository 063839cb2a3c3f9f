/*
 * Device generators through the driver: in CI against the CUDA test double, on the GPU machine
 * (scripts/gpu-check, RECAP_CUDA_DRIVER empty) against the real driver. Same assertions.
 */
#include <stdlib.h>
#include <string.h>

#include "fill_cases.h"

static int device_count(void)
{
    int n = 0;

    ck_assert_ok(recap_device_count(&n));
    ck_assert_int_ge(n, 1);
    return n;
}

START_TEST(driver_and_devices_are_reported)
{
    char name[128];
    int v = 0, major = 0, minor = 0, n = device_count();
    size_t mem = 0;

    ck_assert_ok(recap_driver_version(&v));
    ck_assert_int_ge(v, 11030);
    ck_assert_ok(recap_device_info(0, name, sizeof(name), &major, &minor, &mem));
    ck_assert_int_ge(major, 7);
    ck_assert_uint_gt(mem, 0);
    ck_assert_int_gt((int)strlen(name), 0);
    ck_assert_status(recap_device_info(n, name, sizeof(name), NULL, NULL, NULL), RECAP_ERR_NO_DEVICE);
}
END_TEST

START_TEST(generator_on_missing_device_is_rejected)
{
    recap_generator_h g = NULL;
    int n = device_count();

    ck_assert_status(recap_generator_create(n, &g), RECAP_ERR_NO_DEVICE);
    ck_assert_ptr_null(g);
    ck_assert_status(recap_generator_create(-7, &g), RECAP_ERR_NO_DEVICE);
}
END_TEST

START_TEST(device_fill_rejects_host_memory)
{
    recap_generator_h g;
    uint32_t host[64];

    ck_assert_ok(recap_generator_create(0, &g));
    ck_assert_status(recap_generator_fill_u32(g, NULL, host, 64), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

START_TEST(device_fill_rejects_buffer_of_other_device)
{
    recap_generator_h g;
    void *buf;

    if (device_count() < 2)
        return; /* the GPU machine has one device; CI's double has two and runs this */
    ck_assert_ok(recap_device_alloc(1, 256, &buf));
    ck_assert_ok(recap_generator_create(0, &g));
    ck_assert_status(recap_generator_fill_u32(g, NULL, buf, 64), RECAP_ERR_WRONG_DEVICE);
    ck_assert_ok(recap_generator_destroy(g));
    ck_assert_ok(recap_device_free(1, buf));
}
END_TEST

START_TEST(host_generator_takes_no_stream)
{
    recap_generator_h g;
    uint32_t host[8];

    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_status(recap_generator_fill_u32(g, (recap_stream_t)0x10, host, 8), RECAP_ERR_INVALID_ARG);
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

/* Without a driver, device calls say so and host generators still work. */
START_TEST(missing_driver_gives_no_driver_status)
{
    recap_generator_h g = NULL;
    uint32_t w[4];
    int n;

    setenv("RECAP_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    ck_assert_status(recap_device_count(&n), RECAP_ERR_NO_DRIVER);
    ck_assert_ptr_nonnull(strstr(recap_last_error(), "/nonexistent/libcuda.so.1"));
    ck_assert_status(recap_generator_create(0, &g), RECAP_ERR_NO_DRIVER);
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, w, 4));
    ck_assert_ok(recap_generator_destroy(g));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("device");
    TCase *nodrv = tcase_create("no_driver");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, driver_and_devices_are_reported);
    tcase_add_test(tc, generator_on_missing_device_is_rejected);
    tcase_add_test(tc, device_fill_rejects_host_memory);
    tcase_add_test(tc, device_fill_rejects_buffer_of_other_device);
    tcase_add_test(tc, host_generator_takes_no_stream);
    fill_cases_add(tc, 0);
    suite_add_tcase(s, tc);
    /* Each Check test runs in a forked child, so the driver is loaded afresh there. */
    tcase_add_test(nodrv, missing_driver_gives_no_driver_status);
    suite_add_tcase(s, nodrv);
    return tu_run(s);
}
