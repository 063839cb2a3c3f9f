/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cost of the tracker's hot paths from C, on a host-generator tracker with 8 named states:
 * a fork+unfork pair and a snapshot take+restore, in value and graph-safe mode; the same pair
 * through a framework generator implemented in C (the table a framework adapter gives recap),
 * beside recap's own; and a capture event with no subscriber beside the same lookup without one. Each figure is
 * the median of REPS timed batches of BATCH operations; anchors measured in the same run put
 * the numbers in proportion to the machine (targets: fork+unfork <= 50 ns, take+restore of 8
 * states <= 200 ns).
 *
 * `bench_tracker scale [MAX]` instead gives how those costs grow with the number of named states
 * (1k, 10k, ... up to MAX, default 1M): the time to add them all, a fork+unfork of a random name
 * and a snapshot take+restore of them all, beside the 8-state figures of the same run.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recap.h"

#define REPS 31
#define BATCH 100000
#define NSTATES 8

static const char *const names[NSTATES] = {
    RECAP_RNG_DATA_PARALLEL, RECAP_RNG_MODEL_PARALLEL, RECAP_RNG_EXPERT_PARALLEL,
    RECAP_RNG_GTP_REMAT, RECAP_RNG_EGTP_REMAT, "pipeline-rng", "context-parallel-rng",
    "vision-tower-rng"};

/* A framework's generator in C, as small as one can be: a current state object and objects with
 * reference counts, what torch's CUDA generator offers through its C++ API. */
typedef struct bfw_obj {
    int refs;
    uint64_t seed, offset;
} bfw_obj_t;

typedef struct {
    bfw_obj_t *current;
} bfw_t;

/* The state layout is little-endian, as the hosts are (torch copies it the same way). */
static void put64(uint8_t *b, uint64_t v)
{
    memcpy(b, &v, sizeof(v));
}

static uint64_t get64(const uint8_t *b)
{
    uint64_t v;

    memcpy(&v, b, sizeof(v));
    return v;
}

static recap_status_t bfw_get_state(void *fw, uint8_t st[RECAP_STATE_BYTES])
{
    const bfw_obj_t *o = ((bfw_t *)fw)->current;

    put64(st, o->seed);
    put64(st + 8, o->offset);
    return RECAP_OK;
}

static recap_status_t bfw_set_state(void *fw, const uint8_t st[RECAP_STATE_BYTES])
{
    bfw_obj_t *o = ((bfw_t *)fw)->current;

    o->seed = get64(st);
    o->offset = get64(st + 8);
    return RECAP_OK;
}

static recap_status_t bfw_create(void *fw, uint64_t seed, void **obj_p)
{
    bfw_obj_t *o = calloc(1, sizeof(*o));

    if (o == NULL)
        return RECAP_ERR_NO_MEMORY;
    o->refs = 1;
    o->seed = seed;
    *obj_p = o;
    return RECAP_OK;
}

static recap_status_t bfw_clone(void *fw, void *obj, void **clone_p)
{
    const bfw_obj_t *o = obj;
    recap_status_t st = bfw_create(fw, o->seed, clone_p);

    if (st == RECAP_OK)
        ((bfw_obj_t *)*clone_p)->offset = o->offset;
    return st;
}

static void bfw_release(void *fw, void *obj)
{
    bfw_obj_t *o = obj;

    if (--o->refs == 0)
        free(o);
}

static recap_status_t bfw_install(void *fw, void *obj)
{
    bfw_t *f = fw;

    ((bfw_obj_t *)obj)->refs++;
    bfw_release(fw, f->current);
    f->current = obj;
    return RECAP_OK;
}

static recap_status_t bfw_current(void *fw, void **obj_p)
{
    *obj_p = ((bfw_t *)fw)->current;
    return RECAP_OK;
}

static recap_status_t bfw_retain(void *fw, void *obj)
{
    ((bfw_obj_t *)obj)->refs++;
    return RECAP_OK;
}

static recap_status_t bfw_obj_get(void *fw, void *obj, uint8_t st[RECAP_STATE_BYTES])
{
    const bfw_obj_t *o = obj;

    put64(st, o->seed);
    put64(st + 8, o->offset);
    return RECAP_OK;
}

static recap_status_t bfw_obj_set(void *fw, void *obj, const uint8_t st[RECAP_STATE_BYTES])
{
    bfw_obj_t *o = obj;

    o->seed = get64(st);
    o->offset = get64(st + 8);
    return RECAP_OK;
}

static const recap_framework_ops_t bfw_ops = {
    RECAP_FRAMEWORK_OPS_VERSION, "bench framework", bfw_get_state, bfw_set_state, bfw_create,
    bfw_clone, bfw_install, bfw_current, bfw_obj_get, bfw_obj_set, bfw_release, bfw_retain, NULL};

typedef struct {
    recap_tracker_h t;
    recap_generator_h gen;  /* the anchor's */
    recap_generator_h host; /* the tracker's host generator, included in snapshots */
    recap_snapshot_h snap;
    pthread_mutex_t mutex;
    const char *fork_name;
    bfw_t fw;
    recap_generator_h fw_gen; /* the tracker's generator when the framework's */
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

/* A capture event with no subscriber (a launch of a graph recap holds no record for) beside the
 * same record lookup made by a call that emits no event. */
static void launch_event(bench_ctx_t *c)
{
    int i;

    for (i = 0; i < BATCH; i++)
        CHECK(recap_graph_will_launch((recap_graph_exec_t)c, NULL));
}

static void launch_failed_lookup(bench_ctx_t *c)
{
    int i;

    for (i = 0; i < BATCH; i++)
        CHECK(recap_graph_launch_failed((recap_graph_exec_t)c));
}

#include "median.h"

static void setup_on(bench_ctx_t *c, uint32_t flags, int framework)
{
    recap_tracker_params_t p = {.flags = flags, .device = RECAP_DEVICE_HOST};
    int i;

    c->fw_gen = NULL;
    if (framework) {
        void *obj;
        CHECK(bfw_create(&c->fw, 1, &obj));
        c->fw.current = obj;
        CHECK(recap_generator_create_framework(&bfw_ops, &c->fw, RECAP_DEVICE_HOST, &c->fw_gen));
        p.generator = c->fw_gen;
    }
    CHECK(recap_generator_create(RECAP_DEVICE_HOST, &c->host));
    p.host_generator = c->host;
    CHECK(recap_tracker_create(&p, &c->t));
    for (i = 0; i < NSTATES; i++)
        CHECK(recap_tracker_add(c->t, names[i], 1000 + (uint64_t)i));
    CHECK(recap_snapshot_create(&c->snap));
    c->fork_name = RECAP_RNG_MODEL_PARALLEL;
}

static void setup(bench_ctx_t *c, uint32_t flags)
{
    setup_on(c, flags, 0);
}

static void teardown(bench_ctx_t *c)
{
    CHECK(recap_snapshot_destroy(c->snap));
    CHECK(recap_tracker_destroy(c->t));
    CHECK(recap_generator_destroy(c->host));
    if (c->fw_gen != NULL) {
        CHECK(recap_generator_destroy(c->fw_gen));
        bfw_release(&c->fw, c->fw.current);
    }
}

/* fork+unfork through a framework generator beside the same pair on recap's own, per mode. */
static void framework_rows(bench_ctx_t *c)
{
    static const uint32_t modes[2] = {0, RECAP_TRACKER_GRAPH_SAFE};
    double own, fw;
    int m;

    for (m = 0; m < 2; m++) {
        setup_on(c, modes[m], 0);
        own = median_ns(fork_unfork, c);
        teardown(c);
        setup_on(c, modes[m], 1);
        fw = median_ns(fork_unfork, c);
        teardown(c);
        printf("| fork+unfork through a framework generator in C (%s mode) | %.1f | recap's own "
               "generator %.1f ns | %.2f |\n", m ? "graph-safe" : "value", fw, own, fw / own);
    }
}

/* Another thread forking its own tracker meanwhile: objects shared by nothing, so only state
 * common to all locks (a shared counter of the fork gate, say) makes the pair slower. */
static void *other_thread(void *arg)
{
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_fork_token_t tok;
    recap_tracker_h t;
    int *stop = arg;

    CHECK(recap_tracker_create(&p, &t));
    CHECK(recap_tracker_add(t, RECAP_RNG_MODEL_PARALLEL, 1234));
    while (!__atomic_load_n(stop, __ATOMIC_RELAXED)) {
        CHECK(recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok));
        CHECK(recap_tracker_unfork(t, tok));
    }
    CHECK(recap_tracker_destroy(t));
    return NULL;
}

/* A row: fn's batches alternated with the get+set pair's (the anchor of every row). */
static void anchored_row(const char *what, batch_fn fn, bench_ctx_t *c)
{
    double ns, anchor, ratio = median_ratio(fn, get_set_state, c, &ns, &anchor);

    printf("| %s | %.1f | get+set pair %.1f ns | %.2f |\n", what, ns, anchor, ratio);
}

static void two_thread_row(bench_ctx_t *c)
{
    pthread_t th;
    int stop = 0;

    setup(c, 0);
    if (pthread_create(&th, NULL, other_thread, &stop) != 0) {
        teardown(c);
        return;
    }
    anchored_row("fork+unfork (value mode) while another thread forks its own tracker",
                 fork_unfork, c);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    teardown(c);
}

static void event_rows(bench_ctx_t *c)
{
    double ev = median_ns(launch_event, c), look = median_ns(launch_failed_lookup, c);
    size_t subs;

    CHECK(recap_capture_subscribers(&subs));
    printf("| graph launch event, %zu subscribers (unknown graph) | %.1f | the same lookup without "
           "an event %.1f ns | %.2f |\n", subs, ev, look, ev / look);
}

/* The scaling curve. Names look like a large model's (one state per layer and kind), so their
 * length and shared prefixes are what a lookup meets there. */
#define SCALE_REPS 15
#define SCALE_FORKS 1000

typedef struct {
    recap_tracker_h t;
    recap_generator_h host;
    recap_snapshot_h snap;
    char (*names)[48];
    size_t n;
    size_t *picks; /* SCALE_FORKS random indices */
} scale_ctx_t;

static uint64_t scale_rng = 0x9E3779B97F4A7C15ULL;

/* splitmix64: the picks are the same in every run, before and after a change. */
static uint64_t scale_rand(void)
{
    uint64_t z = (scale_rng += 0x9E3779B97F4A7C15ULL);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Median of `reps` timings of fn, ns per call of fn divided by `per`. */
static double scale_median(void (*fn)(scale_ctx_t *), scale_ctx_t *c, int reps, double per)
{
    double t[SCALE_REPS];
    int r;

    fn(c);
    for (r = 0; r < reps; r++) {
        double t0 = now_ns();
        fn(c);
        t[r] = (now_ns() - t0) / per;
    }
    qsort(t, (size_t)reps, sizeof(t[0]), cmp_double);
    return t[reps / 2];
}

static void scale_forks(scale_ctx_t *c)
{
    recap_fork_token_t tok;
    int i;

    for (i = 0; i < SCALE_FORKS; i++) {
        CHECK(recap_tracker_fork(c->t, c->names[c->picks[i]], &tok));
        CHECK(recap_tracker_unfork(c->t, tok));
    }
}

static void scale_same_fork(scale_ctx_t *c)
{
    recap_fork_token_t tok;
    int i;

    for (i = 0; i < SCALE_FORKS; i++) {
        CHECK(recap_tracker_fork(c->t, c->names[1], &tok));
        CHECK(recap_tracker_unfork(c->t, tok));
    }
}

static void scale_snapshot(scale_ctx_t *c)
{
    CHECK(recap_snapshot_take(c->t, c->snap));
    CHECK(recap_snapshot_restore(c->t, c->snap));
}

/* A value-mode tracker with n states, as bench_ctx_t's: the seconds its adds took. */
static double scale_setup(scale_ctx_t *c, size_t n)
{
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    double t0;
    size_t i;

    c->n = n;
    c->names = malloc(n * sizeof(*c->names));
    c->picks = malloc(SCALE_FORKS * sizeof(*c->picks));
    if (c->names == NULL || c->picks == NULL)
        die("scale names", RECAP_ERR_NO_MEMORY);
    for (i = 0; i < n; i++)
        snprintf(c->names[i], sizeof(c->names[i]), "layer-%07zu-dropout-rng", i);
    for (i = 0; i < SCALE_FORKS; i++)
        c->picks[i] = (size_t)(scale_rand() % n);
    CHECK(recap_generator_create(RECAP_DEVICE_HOST, &c->host));
    p.host_generator = c->host;
    CHECK(recap_tracker_create(&p, &c->t));
    CHECK(recap_snapshot_create(&c->snap));
    t0 = now_ns();
    for (i = 0; i < n; i++)
        CHECK(recap_tracker_add(c->t, c->names[i], 1000 + (uint64_t)i));
    return (now_ns() - t0) / 1e9;
}

static void scale_teardown(scale_ctx_t *c)
{
    CHECK(recap_snapshot_destroy(c->snap));
    CHECK(recap_tracker_destroy(c->t));
    CHECK(recap_generator_destroy(c->host));
    free(c->names);
    free(c->picks);
}

/* The 8-state rows of the main table first, the anchor of the curve measured in the same run. */
static double anchor_rows(bench_ctx_t *b)
{
    double fork_ns, anchor, ratio;

    CHECK(recap_generator_create(RECAP_DEVICE_HOST, &b->gen));
    setup(b, 0);
    ratio = median_ratio(fork_unfork, get_set_state, b, &fork_ns, &anchor);
    printf("| fork+unfork (value mode), 8 states | %.1f | get+set pair %.1f ns | %.2f |\n",
           fork_ns, anchor, ratio);
    anchored_row("snapshot take+restore, 8 states (value mode)", take_restore, b);
    teardown(b);
    recap_generator_destroy(b->gen);
    printf("\n");
    return fork_ns;
}

static int scale_main(size_t max)
{
    scale_ctx_t c = {0};
    bench_ctx_t b = {0};
    double add_s, same, rnd, snap, fork8;
    size_t n;

    printf("| operation | median ns | anchor (alternated with it) | median ratio |\n"
           "|---|---:|---|---:|\n");
    fork8 = anchor_rows(&b);
    printf("| named states | add all (s) | add per state (ns) | fork+unfork, same name (ns) | "
           "fork+unfork, random name (ns) | random / 8-state fork | snapshot take+restore (us) |\n"
           "|---:|---:|---:|---:|---:|---:|---:|\n");
    for (n = 8; n <= max; n = n == 8 ? 1000 : n * 10) {
        add_s = scale_setup(&c, n);
        same = scale_median(scale_same_fork, &c, SCALE_REPS, SCALE_FORKS);
        rnd = scale_median(scale_forks, &c, SCALE_REPS, SCALE_FORKS);
        /* Fewer rounds where one is long, so the curve's last row takes seconds. */
        snap = scale_median(scale_snapshot, &c, n >= 1000000 ? 5 : SCALE_REPS, 1e3);
        printf("| %zu | %.4f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", n, add_s,
               add_s * 1e9 / (double)n, same, rnd, rnd / fork8, snap);
        fflush(stdout);
        scale_teardown(&c);
    }
    printf("\nValue mode, host generator included in snapshots; medians of %d rounds of %d "
           "fork+unfork pairs (random names: the same %d picks per size in every run), of %d "
           "take+restore pairs (5 at 1M); the add time is one run.\n", SCALE_REPS, SCALE_FORKS,
           SCALE_FORKS, SCALE_REPS);
    return 0;
}

int main(int argc, char **argv)
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
    size_t i;

    if (argc > 1 && strcmp(argv[1], "scale") == 0)
        return scale_main(argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : 1000000);
    pthread_mutex_init(&c.mutex, NULL);
    CHECK(recap_generator_create(RECAP_DEVICE_HOST, &c.gen));
    printf("| operation | median ns | anchor (alternated with it) | median ratio |\n"
           "|---|---:|---|---:|\n");
    printf("| generator get_state+set_state pair | %.1f | (anchor) | 1.00 |\n",
           median_ns(get_set_state, &c));
    anchored_row("uncontended pthread mutex lock+unlock", mutex_pair, &c);
    for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        setup(&c, ops[i].flags);
        anchored_row(ops[i].what, ops[i].fn, &c);
        teardown(&c);
    }
    two_thread_row(&c);
    framework_rows(&c);
    event_rows(&c);
    printf("\n%d batches of %d operations each, median; a row with the anchor alternates their "
           "batches and gives the median of the %d ratios; %d named states.\n", REPS, BATCH,
           REPS, NSTATES);
    recap_generator_destroy(c.gen);
    pthread_mutex_destroy(&c.mutex);
    return 0;
}
