/* SPDX-License-Identifier: Apache-2.0 */
/*
 * For tests/package/unload.sh: librecap (argv[1]) dlopened by a program that does not link it, as a
 * framework plugin loads it, and dlclosed while threads that used it are still alive. Each thread
 * runs a random order of tracker calls (create, add, fork/unfork, snapshots, a checkpoint, which
 * caches snapshots per thread, a failing call, which leaves a per-thread message; destroy), then
 * waits; the main thread dlcloses recap and lets the threads end, forks a child that exits, then
 * loads and uses recap again. Every thread-exit destructor, fork handler or exit handler recap
 * left with glibc runs after the dlclose: an unloaded librecap makes them jump into unmapped code.
 * argv[2]: the seed (the thread count and every order follow from it).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "recap.h"
#include "recap/plain.h"

#define MAX_THREADS 8
#define MAX_OPS 16

/* The API, looked up in each load of the library (its addresses may change between loads). */
#define API(X)                                                                                   \
    X(recap_last_error) X(recap_tracker_create) X(recap_tracker_destroy) X(recap_tracker_add)    \
    X(recap_tracker_fork) X(recap_tracker_unfork) X(recap_tracker_generator)                     \
    X(recap_generator_fill_u32) X(recap_snapshot_create) X(recap_snapshot_destroy)               \
    X(recap_snapshot_take) X(recap_snapshot_restore) X(recap_signature_create)                   \
    X(recap_signature_destroy) X(recap_checkpoint_run) X(recap_checkpoint_destroy)               \
    X(recap_plain_engine_create) X(recap_plain_engine_destroy) X(recap_plain_engine_ops)         \
    X(recap_plain_buffer_create) X(recap_plain_buffer_destroy)
static struct {
#define FIELD(name) __typeof__(&name) name;
    API(FIELD)
#undef FIELD
} api;

static int load(void **lib_p, const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);

    if (lib == NULL) {
        fprintf(stderr, "unload: %s\n", dlerror());
        return 0;
    }
#define LOOKUP(name)                                                                             \
    if ((*(void **)&api.name = dlsym(lib, #name)) == NULL) {                                     \
        fprintf(stderr, "unload: no %s in %s\n", #name, path);                                   \
        return 0;                                                                                \
    }
    API(LOOKUP)
#undef LOOKUP
    *lib_p = lib;
    return 1;
}

static uint64_t next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---------------------------------------------------------------- one thread's calls */

enum { OP_ADD, OP_FORK, OP_SNAPSHOT, OP_CHECKPOINT, OP_FAIL, OP_RECREATE, NOPS };

typedef struct {
    uint64_t rng;
    recap_tracker_h t;
    int nadded;
    int runs;                /* the checkpoint's function, run by this thread */
    const char *err;
} worker_t;

static const char *const names[] = {"a", "b", "c", "d", "e", "f", "g", "h"};

#define CHECK(cond, what)                                                                        \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            w->err = what;                                                                       \
            return;                                                                              \
        }                                                                                        \
    } while (0)

static void tracker_new(worker_t *w)
{
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};

    CHECK(api.recap_tracker_create(&p, &w->t) == RECAP_OK, "tracker_create failed");
    w->nadded = 0;
}

static void op_add(worker_t *w)
{
    if (w->nadded == (int)(sizeof(names) / sizeof(names[0])))
        return;
    CHECK(api.recap_tracker_add(w->t, names[w->nadded], 1000 + (uint64_t)w->nadded) == RECAP_OK,
          "tracker_add failed");
    w->nadded++;
}

static void op_fork(worker_t *w)
{
    recap_fork_token_t tok;
    recap_generator_h g;
    uint32_t words[4];

    CHECK(api.recap_tracker_fork(w->t, "never-added", &tok) == RECAP_ERR_NOT_FOUND,
          "a fork of a name never added did not fail");
    if (w->nadded == 0)
        op_add(w);
    if (w->err != NULL)
        return;
    CHECK(api.recap_tracker_fork(w->t, names[next(&w->rng) % (uint64_t)w->nadded], &tok) ==
              RECAP_OK, "tracker_fork failed");
    CHECK(api.recap_tracker_generator(w->t, &g) == RECAP_OK &&
              api.recap_generator_fill_u32(g, NULL, words, 4) == RECAP_OK,
          "a draw inside a fork failed");
    CHECK(api.recap_tracker_unfork(w->t, tok) == RECAP_OK, "tracker_unfork failed");
}

/* A restored snapshot draws again what it drew. */
static void op_snapshot(worker_t *w)
{
    recap_snapshot_h s;
    recap_generator_h g;
    uint32_t a[4], b[4];
    int ok;

    CHECK(api.recap_snapshot_create(&s) == RECAP_OK, "snapshot_create failed");
    ok = api.recap_snapshot_take(w->t, s) == RECAP_OK &&
         api.recap_tracker_generator(w->t, &g) == RECAP_OK &&
         api.recap_generator_fill_u32(g, NULL, a, 4) == RECAP_OK &&
         api.recap_snapshot_restore(w->t, s) == RECAP_OK &&
         api.recap_generator_fill_u32(g, NULL, b, 4) == RECAP_OK;
    api.recap_snapshot_destroy(s);
    CHECK(ok, "a snapshot's take, draw or restore failed");
    CHECK(memcmp(a, b, sizeof(a)) == 0, "a restored snapshot drew other numbers");
}

static __thread int *runs_here;

static void checkpointed(void *data)
{
    (void)data;
    ++*runs_here;
}

/* A checkpoint snapshots its tracker through the calling thread's snapshot cache. */
static void op_checkpoint(worker_t *w)
{
    static const recap_type_t args[] = {RECAP_TYPE_BUFFER};
    const recap_engine_ops_t *ops;
    recap_plain_engine_h e = NULL;
    recap_signature_h sig = NULL;
    recap_checkpoint_h ck = NULL;
    recap_value_t v = {0};
    int ok, before = w->runs;

    runs_here = &w->runs;
    ok = api.recap_plain_engine_ops(&ops) == RECAP_OK &&
         api.recap_plain_engine_create(RECAP_DEVICE_HOST, 0, &e) == RECAP_OK &&
         api.recap_plain_buffer_create(e, 64, 1, &v.buf) == RECAP_OK &&
         api.recap_signature_create(RECAP_TYPE_VOID, args, 1, &sig) == RECAP_OK;
    if (ok) {
        recap_region_params_t p = {.ops = ops, .host = e, .tracker = w->t};

        ok = api.recap_checkpoint_run(&p, sig, (recap_func_t)checkpointed, &v, 1, &ck) ==
                 RECAP_OK &&
             api.recap_checkpoint_destroy(ck) == RECAP_OK;
    }
    if (sig != NULL)
        api.recap_signature_destroy(sig);
    if (v.buf != NULL)
        api.recap_plain_buffer_destroy(v.buf);
    if (e != NULL && api.recap_plain_engine_destroy(e) != RECAP_OK)
        ok = 0;
    CHECK(ok, "a checkpoint on the plain engine failed");
    CHECK(w->runs == before + 1, "a checkpoint did not run its function once");
}

/* A failure leaves a message of the calling thread's own. */
static void op_fail(worker_t *w)
{
    CHECK(api.recap_tracker_add(w->t, "", 7) == RECAP_ERR_INVALID_ARG,
          "tracker_add of an empty name did not fail");
    CHECK(*api.recap_last_error() != '\0', "a failure left no message");
}

static void op_recreate(worker_t *w)
{
    CHECK(api.recap_tracker_destroy(w->t) == RECAP_OK, "tracker_destroy failed");
    w->t = NULL;
    tracker_new(w);
}

static void (*const op_fns[NOPS])(worker_t *) = {op_add,  op_fork, op_snapshot, op_checkpoint,
                                                 op_fail, op_recreate};

/* Every operation once, then some more, shuffled. */
static void work(worker_t *w)
{
    int order[MAX_OPS], n = NOPS + (int)(next(&w->rng) % (MAX_OPS - NOPS + 1)), i;

    for (i = 0; i < n; i++)
        order[i] = i < NOPS ? i : (int)(next(&w->rng) % NOPS);
    for (i = n - 1; i > 0; i--) {
        int j = (int)(next(&w->rng) % (uint64_t)(i + 1)), k = order[i];

        order[i] = order[j];
        order[j] = k;
    }
    tracker_new(w);
    for (i = 0; i < n && w->err == NULL; i++)
        op_fns[order[i]](w);
    if (w->t != NULL && api.recap_tracker_destroy(w->t) != RECAP_OK && w->err == NULL)
        w->err = "tracker_destroy failed";
}

/* ---------------------------------------------------------------- the threads and the unload */

static pthread_barrier_t done, go;

static void *worker(void *arg)
{
    work(arg);
    pthread_barrier_wait(&done); /* used recap ... */
    pthread_barrier_wait(&go);   /* ... and ends once it is unloaded */
    return NULL;
}

static int run_threads(uint64_t *rng, int n, void *lib, const char **err)
{
    worker_t w[MAX_THREADS] = {{0}};
    pthread_t t[MAX_THREADS];
    int i;

    if (pthread_barrier_init(&done, NULL, (unsigned)n + 1) != 0 ||
        pthread_barrier_init(&go, NULL, (unsigned)n + 1) != 0)
        return 0;
    for (i = 0; i < n; i++) {
        w[i].rng = next(rng);
        if (pthread_create(&t[i], NULL, worker, &w[i]) != 0)
            return 0;
    }
    pthread_barrier_wait(&done);
    if (dlclose(lib) != 0) {
        *err = "dlclose failed";
        return 0;
    }
    pthread_barrier_wait(&go);
    for (i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&done);
    pthread_barrier_destroy(&go);
    for (i = 0; i < n; i++)
        if (w[i].err != NULL)
            *err = w[i].err;
    return *err == NULL;
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : (uint64_t)getpid(), rng = seed;
    const char *err = NULL;
    worker_t w = {0};
    void *lib;
    int n, status;
    pid_t pid;

    if (argc < 2) {
        fprintf(stderr, "usage: unload LIB [SEED]\n");
        return 2;
    }
    n = 2 + (int)(next(&rng) % (MAX_THREADS - 1));
    if (!load(&lib, argv[1]) || !run_threads(&rng, n, lib, &err))
        goto fail;
    /* recap's fork handlers, if it left any, run in both processes. */
    pid = fork();
    if (pid == 0)
        exit(0);
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        err = "a child forked after the dlclose did not exit 0";
        goto fail;
    }
    /* Loaded again, on the main thread and on threads of its own. */
    w.rng = next(&rng);
    if (!load(&lib, argv[1]))
        goto fail;
    work(&w);
    if ((err = w.err) != NULL || !run_threads(&rng, 2, lib, &err))
        goto fail;
    printf("unload: %d threads used recap, dlclosed under them; forked, loaded again (seed %llu)\n",
           n, (unsigned long long)seed);
    return 0;
fail:
    fprintf(stderr, "unload: %s (seed %llu, %d threads)\n", err != NULL ? err : "failed",
            (unsigned long long)seed, n);
    return 1;
}
