/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cost of the tracker's hot paths from C, on a host-generator tracker with 8 named states:
 * a fork+unfork pair and a snapshot take+restore, in value and graph-safe mode. Each figure is
 * the median of REPS timed batches of BATCH operations; anchors measured in the same run put
 * the numbers in proportion to the machine (targets: fork+unfork <= 50 ns, take+restore of 8
 * states <= 200 ns).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "recap.h"

#define REPS 31
#define BATCH 100000
#define NSTATES 8

static const char *const names[NSTATES] = {
    RECAP_RNG_DATA_PARALLEL, RECAP_RNG_MODEL_PARALLEL, RECAP_RNG_EXPERT_PARALLEL,
    RECAP_RNG_GTP_REMAT, RECAP_RNG_EGTP_REMAT, "pipeline-rng", "context-parallel-rng",
    "vision-tower-rng"};

typedef struct {
    recap_tracker_h t;
    recap_generator_h gen;  /* the anchor's */
    recap_generator_h host; /* the tracker's host generator, included in snapshots */
    recap_snapshot_h snap;
    pthread_mutex_t mutex;
    const char *fork_name;
} bench_ctx_t;

typedef void (*batch_fn)(bench_ctx_t *c);

static void die(const char *what, recap_status_t st)
{
    fprintf(stderr, "bench_tracker: %s: %s (%s)\n", what, recap_strerror(st), recap_last_error());
    exit(1);
}

#define CHECK(call)                         \
    do {                                    \
        recap_status_t st_ = (call);        \
        if (st_ != RECAP_OK)                \
            die(#call, st_);                \
    } while (0)

static void fork_unfork(bench_ctx_t *c)
{
    recap_fork_token_t tok;
    int i;

    for (i = 0; i < BATCH; i++) {
        CHECK(recap_tracker_fork(c->t, c->fork_name, &tok));
        CHECK(recap_tracker_unfork(c->t, tok));
    }
}

static void take_restore(bench_ctx_t *c)
{
    int i;

    for (i = 0; i < BATCH; i++) {
        CHECK(recap_snapshot_take(c->t, c->snap));
        CHECK(recap_snapshot_restore(c->t, c->snap));
    }
}

static void get_set_state(bench_ctx_t *c)
{
    uint8_t st[RECAP_STATE_BYTES];
    int i;

    for (i = 0; i < BATCH; i++) {
        CHECK(recap_generator_get_state(c->gen, st));
        CHECK(recap_generator_set_state(c->gen, st));
    }
}

static void mutex_pair(bench_ctx_t *c)
{
    int i;

    for (i = 0; i < BATCH; i++) {
        pthread_mutex_lock(&c->mutex);
        pthread_mutex_unlock(&c->mutex);
    }
}

#include "median.h"

static void setup(bench_ctx_t *c, uint32_t flags)
{
    recap_tracker_params_t p = {.flags = flags, .device = RECAP_DEVICE_HOST};
    int i;

    CHECK(recap_generator_create(RECAP_DEVICE_HOST, &c->host));
    p.host_generator = c->host;
    CHECK(recap_tracker_create(&p, &c->t));
    for (i = 0; i < NSTATES; i++)
        CHECK(recap_tracker_add(c->t, names[i], 1000 + (uint64_t)i));
    CHECK(recap_snapshot_create(&c->snap));
    c->fork_name = RECAP_RNG_MODEL_PARALLEL;
}

static void teardown(bench_ctx_t *c)
{
    CHECK(recap_snapshot_destroy(c->snap));
    CHECK(recap_tracker_destroy(c->t));
    CHECK(recap_generator_destroy(c->host));
}

int main(void)
{
    static const struct {
        const char *what;
        batch_fn fn;
        uint32_t flags;
    } ops[] = {
        {"fork+unfork (value mode)", fork_unfork, 0},
        {"fork+unfork (graph-safe mode)", fork_unfork, RECAP_TRACKER_GRAPH_SAFE},
        {"snapshot take+restore, 8 states (value mode)", take_restore, 0},
        {"snapshot take+restore, 8 states (graph-safe mode)", take_restore,
         RECAP_TRACKER_GRAPH_SAFE},
    };
    bench_ctx_t c = {0};
    double anchor, mutex, ns;
    size_t i;

    pthread_mutex_init(&c.mutex, NULL);
    CHECK(recap_generator_create(RECAP_DEVICE_HOST, &c.gen));
    anchor = median_ns(get_set_state, &c);
    mutex = median_ns(mutex_pair, &c);
    printf("| operation | median ns | anchor | ratio |\n|---|---:|---|---:|\n");
    printf("| generator get_state+set_state pair | %.1f | (anchor) | 1.00 |\n", anchor);
    printf("| uncontended pthread mutex lock+unlock | %.1f | get+set pair %.1f ns | %.2f |\n",
           mutex, anchor, mutex / anchor);
    for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        setup(&c, ops[i].flags);
        ns = median_ns(ops[i].fn, &c);
        printf("| %s | %.1f | get+set pair %.1f ns | %.2f |\n", ops[i].what, ns, anchor,
               ns / anchor);
        teardown(&c);
    }
    printf("\n%d batches of %d operations each, median; %d named states.\n", REPS, BATCH,
           NSTATES);
    recap_generator_destroy(c.gen);
    pthread_mutex_destroy(&c.mutex);
    return 0;
}
