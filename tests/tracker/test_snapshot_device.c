/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshots of a tracker driving a device generator: in CI against the CUDA test double, on the
 * GPU machine (scripts/gpu-check, RECAP_CUDA_DRIVER empty) against the real driver.
 */
#include "config.h"

#include <string.h>

#include "testutil.h"

#define NWORDS 4096
#define NSTATES 3

static const char *const names[NSTATES] = {RECAP_RNG_DATA_PARALLEL, RECAP_RNG_MODEL_PARALLEL,
                                           RECAP_RNG_EXPERT_PARALLEL};

/* Draws on the device from the default state and each named state, and brings the words back. */
static void step(recap_tracker_h t, uint32_t *dev, uint32_t host[(1 + NSTATES) * NWORDS])
{
    recap_fork_token_t tok;
    recap_generator_h g;
    int i;

    ck_assert_ok(recap_tracker_generator(t, &g));
    ck_assert_ok(recap_generator_fill_u32(g, NULL, dev, NWORDS));
    ck_assert_ok(recap_memcpy_to_host(0, host, dev, NWORDS * sizeof(uint32_t)));
    for (i = 0; i < NSTATES; i++) {
        ck_assert_ok(recap_tracker_fork(t, names[i], &tok));
        ck_assert_ok(recap_generator_fill_u32(g, NULL, dev, NWORDS));
        ck_assert_ok(recap_tracker_unfork(t, tok));
        ck_assert_ok(recap_memcpy_to_host(0, host + (1 + i) * NWORDS, dev,
                                          NWORDS * sizeof(uint32_t)));
    }
}

START_TEST(device_snapshot_restore_replays_the_draws)
{
    static uint32_t first[(1 + NSTATES) * NWORDS], again[(1 + NSTATES) * NWORDS];
    recap_tracker_params_t p = {.flags = _i ? RECAP_TRACKER_GRAPH_SAFE : 0, .device = 0};
    recap_parallel_ranks_t r = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
    recap_snapshot_h snap, loaded;
    recap_tracker_h t;
    uint8_t blob[1024];
    uint32_t *dev;
    size_t len;

    ck_assert_ok(recap_tracker_create(&p, &t));
    ck_assert_ok(recap_tracker_seed_parallel(t, 1 + (int64_t)tu_rand_below(1ULL << 40), &r));
    ck_assert_ok(recap_device_alloc(0, NWORDS * sizeof(uint32_t), (void **)&dev));
    step(t, dev, first);
    ck_assert_ok(recap_snapshot_create(&snap));
    ck_assert_ok(recap_snapshot_take(t, snap));
    step(t, dev, first);
    ck_assert_ok(recap_snapshot_restore(t, snap));
    step(t, dev, again);
    ck_assert_mem_eq(first, again, sizeof(first));
    /* Through the checkpoint form as well. */
    ck_assert_ok(recap_snapshot_serialize(snap, blob, sizeof(blob), &len));
    ck_assert_ok(recap_snapshot_create(&loaded));
    ck_assert_ok(recap_snapshot_deserialize(blob, len, loaded));
    ck_assert_ok(recap_snapshot_restore(t, loaded));
    memset(again, 0, sizeof(again));
    step(t, dev, again);
    ck_assert_mem_eq(first, again, sizeof(first));
    recap_snapshot_destroy(loaded);
    recap_snapshot_destroy(snap);
    ck_assert_ok(recap_device_free(0, dev));
    ck_assert_ok(recap_tracker_destroy(t));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("snapshot_device");
    TCase *tc = tcase_create("snapshot_device");

    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, device_snapshot_restore_replays_the_draws, 0, 2);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
