/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness for recap's public ABI (tests/fuzz/fuzz.h says what it checks): one input. */
#include "tests/fuzz/fuzz.h"

static void setup(void)
{
    int i, n = 0;

    memset(&w, 0, sizeof(w));
    fz_callbacks_reset();
    w.have_device = recap_device_count(&n) == RECAP_OK && n > 0;
    if (w.have_device) {
        for (i = 0; i < NSTREAM; i++)
            REQUIRE(CALL(recap_stream_create(0, &w.stream[i])) == RECAP_OK);
        for (i = 0; i < 2; i++)
            REQUIRE(CALL(recap_device_alloc(0, DBUF_WORDS * 4, &w.dbuf[i])) == RECAP_OK);
    }
}

/* Undoes everything in an order the contract allows: captures ended, forks closed innermost
 * first, then executables, graphs, trackers, generators. */
static void teardown(void)
{
    const recap_tracker_params_t canonical = {.device = RECAP_DEVICE_HOST};
    recap_graph_t graph;
    recap_tracker_h t;
    int i;

    fz_rng_check_all(); /* before anything goes: the states the input left */
    fz_regions_teardown();
    for (i = 0; i < NSTREAM; i++)
        if (w.stream[i] != NULL && w.capturing[i]) {
            if (CALL(recap_stream_end_capture(w.stream[i], &graph)) == RECAP_OK)
                REQUIRE(CALL(recap_graph_destroy(graph)) == RECAP_OK);
        }
    for (i = 0; i < NTRK; i++)
        while (w.trk[i].h != NULL && w.trk[i].nforks > 0)
            REQUIRE(CALL(recap_tracker_unfork(w.trk[i].h, w.trk[i].forks[--w.trk[i].nforks])) ==
                    RECAP_OK);
    for (i = 0; i < NEXEC; i++)
        if (w.exec[i] != NULL)
            REQUIRE(CALL(recap_graph_exec_destroy(w.exec[i])) == RECAP_OK);
    for (i = 0; i < NGRAPH; i++)
        if (w.graph[i] != NULL)
            REQUIRE(CALL(recap_graph_destroy(w.graph[i])) == RECAP_OK);
    for (i = 0; i < DEFAULT_SLOT; i++) /* the default tracker lives on */
        if (w.trk[i].h != NULL)
            REQUIRE(CALL(recap_tracker_destroy(w.trk[i].h)) == RECAP_OK);
    for (i = 0; i < NGEN; i++)
        if (w.gen[i].h != NULL)
            REQUIRE(CALL(recap_generator_destroy(w.gen[i].h)) == RECAP_OK);
    for (i = 0; i < NSTATES; i++)
        if (w.states[i] != NULL)
            REQUIRE(CALL(recap_states_free(w.states[i])) == RECAP_OK);
    for (i = 0; i < NSNAP; i++)
        if (w.snap[i] != NULL)
            REQUIRE(CALL(recap_snapshot_destroy(w.snap[i])) == RECAP_OK);
    for (i = 0; i < NSIG; i++)
        if (w.sig[i] != NULL)
            REQUIRE(CALL(recap_signature_destroy(w.sig[i])) == RECAP_OK);
    for (i = 0; i < NSTREAM; i++)
        if (w.stream[i] != NULL) {
            REQUIRE(CALL(recap_stream_synchronize(w.stream[i])) == RECAP_OK);
            REQUIRE(CALL(recap_stream_destroy(w.stream[i])) == RECAP_OK);
        }
    for (i = 0; i < 2; i++)
        if (w.dbuf[i] != NULL)
            REQUIRE(CALL(recap_device_free(0, w.dbuf[i])) == RECAP_OK);
    /* The next input finds the same default tracker: a fresh one of fixed options, so each
     * input replays alone as it ran here. */
    REQUIRE(CALL(recap_default_tracker_initialize(&canonical, 1, &t)) == RECAP_OK);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
#ifdef RECAP_FUZZ_DOUBLE
    setenv("RECAP_CUDA_DRIVER", RECAP_FUZZ_DOUBLE, 0); /* the test double, unless told */
#endif
#ifdef RECAP_FUZZ_NCCL
    setenv("RECAP_NCCL_LIB", RECAP_FUZZ_NCCL, 0); /* the fake NCCL of tests/double */
#endif
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static void (*const ops[])(input_t *) = {
        op_gen_create,      op_gen_destroy,    op_gen_state,       op_reserve,
        op_fill,            op_tracker_create, op_tracker_destroy, op_default_tracker,
        op_tracker_query,   op_tracker_add,    op_tracker_fork,    op_tracker_unfork,
        op_tracker_reset_or_seed, op_states,   op_convert,         op_snapshot,
        op_capture,         op_graph,          op_signature,       op_misc,
        op_plain,           op_region,         op_manager,         op_checkpoint,
        op_region,          op_checkpoint,     op_nccl,            op_probe,
        op_rng_check,       op_nest,           op_output,
        op_callbacks,
    };
    input_t in = {data, size};
    recap_capture_stats_t before, after;
    int n = 0;

    REQUIRE(CALL(recap_capture_stats(&before)) == RECAP_OK);
    setup();
    while (in.n > 0 && n++ < MAX_OPS)
        ops[u8(&in) % (sizeof(ops) / sizeof(ops[0]))](&in);
    teardown();
    REQUIRE(CALL(recap_capture_stats(&after)) == RECAP_OK);
    REQUIRE(after.live_records == before.live_records);
    return 0;
}
