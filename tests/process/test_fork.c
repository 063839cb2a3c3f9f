/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fork() of a process using recap: while another thread keeps taking recap's module locks (the
 * slot registry, the default tracker, the graph maps, a generator's own lock) and holds a capture
 * open, the process forks; the child creates generators, fills, uses the default tracker and
 * captures, launches and checks a graph on the CUDA test double, and exits 0. Without recap's
 * fork handlers a child forked while one of those locks was held would wait forever (the test
 * kills it after a timeout and fails). Against a real driver (CUDA is not usable in a forked
 * child) the child does the host part only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define HOST_WORDS 4096
#define DEVICE_WORDS 3000
#define FORKS 12

static int on_double(void)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    void *lib;
    int n, yes;

    if (path == NULL || *path == '\0' || recap_device_count(&n) != RECAP_OK || n < 1)
        return 0;
    lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    yes = lib != NULL && dlsym(lib, "recap_double_fail_next") != NULL;
    if (lib != NULL)
        dlclose(lib);
    return yes;
}

/* ---------------------------------------------------------------- the busy thread */

typedef struct {
    int stop, ready;
    int device;           /* use device 0 too (the double) */
    recap_generator_h g;  /* a host generator it fills over and over */
    recap_stream_t s;     /* its capture stays open while the forks happen */
    unsigned long rounds;
} busy_t;

static void *busy(void *arg)
{
    busy_t *b = arg;
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    recap_capture_stats_t cs;
    uint32_t words[64];
    recap_tracker_h t;
    recap_graph_t graph;

    /* A capture of this thread, open across the forks: in a child it belongs to no thread and is
     * dropped. Relaxed, so the child's own calls do not invalidate it there. */
    if (b->device && recap_stream_begin_capture(b->s, RECAP_CAPTURE_RELAXED) != RECAP_OK)
        abort();
    __atomic_store_n(&b->ready, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE)) {
        /* The default tracker's lock, held while a tracker is created and the old one
         * destroyed. */
        if (recap_default_tracker_initialize(&p, 1, &t) != RECAP_OK)
            abort();
        /* The generator's own lock. */
        if (recap_generator_fill_u32(b->g, NULL, words, 64) != RECAP_OK)
            abort();
        if (recap_capture_stats(&cs) != RECAP_OK) /* the graph maps' lock */
            abort();
        if (b->device) { /* the slot registry's lock; no driver call that takes a lock */
            recap_generator_h d;

            if (recap_generator_create(0, &d) != RECAP_OK || recap_generator_destroy(d) != RECAP_OK)
                abort();
        }
        __atomic_add_fetch(&b->rounds, 1, __ATOMIC_RELAXED);
    }
    if (b->device) { /* the parent's capture was never disturbed */
        if (recap_stream_end_capture(b->s, &graph) != RECAP_OK || recap_graph_destroy(graph) != RECAP_OK)
            abort();
    }
    return NULL;
}

/* ---------------------------------------------------------------- the child */

#define CHILD_CHECK(cond)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "child: %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, \
                    recap_last_error());                                         \
            _exit(1);                                                            \
        }                                                                        \
    } while (0)

/* A graph on the double: begin, fill, end, instantiate, two launches each equal to an eager fill
 * of a twin generator. */
static void child_capture(void)
{
    uint32_t *ha = malloc(DEVICE_WORDS * 4), *hb = malloc(DEVICE_WORDS * 4);
    uint8_t st[RECAP_STATE_BYTES];
    recap_generator_h g, twin;
    recap_graph_exec_t exec;
    recap_graph_t graph;
    recap_stream_t s;
    void *a, *b;
    int k;

    CHILD_CHECK(ha != NULL && hb != NULL);
    CHILD_CHECK(recap_generator_create(0, &g) == RECAP_OK);
    CHILD_CHECK(recap_generator_create(0, &twin) == RECAP_OK);
    CHILD_CHECK(recap_generator_manual_seed(g, 777) == RECAP_OK);
    CHILD_CHECK(recap_stream_create(0, &s) == RECAP_OK);
    CHILD_CHECK(recap_device_alloc(0, DEVICE_WORDS * 4, &a) == RECAP_OK);
    CHILD_CHECK(recap_device_alloc(0, DEVICE_WORDS * 4, &b) == RECAP_OK);
    CHILD_CHECK(recap_stream_begin_capture(s, RECAP_CAPTURE_GLOBAL) == RECAP_OK);
    CHILD_CHECK(recap_generator_fill_u32(g, s, a, DEVICE_WORDS) == RECAP_OK);
    CHILD_CHECK(recap_stream_end_capture(s, &graph) == RECAP_OK);
    CHILD_CHECK(recap_graph_instantiate(graph, &exec) == RECAP_OK);
    for (k = 0; k < 2; k++) {
        CHILD_CHECK(recap_generator_get_state(g, st) == RECAP_OK);
        CHILD_CHECK(recap_generator_set_state(twin, st) == RECAP_OK);
        CHILD_CHECK(recap_graph_launch(exec, s) == RECAP_OK);
        CHILD_CHECK(recap_generator_fill_u32(twin, s, b, DEVICE_WORDS) == RECAP_OK);
        CHILD_CHECK(recap_stream_synchronize(s) == RECAP_OK);
        CHILD_CHECK(recap_memcpy_to_host(0, ha, a, DEVICE_WORDS * 4) == RECAP_OK);
        CHILD_CHECK(recap_memcpy_to_host(0, hb, b, DEVICE_WORDS * 4) == RECAP_OK);
        CHILD_CHECK(memcmp(ha, hb, DEVICE_WORDS * 4) == 0);
    }
    free(ha);
    free(hb);
}

static void child(const uint32_t *expect, int device)
{
    uint32_t *words = malloc(HOST_WORDS * 4);
    recap_fork_token_t tok;
    recap_generator_h g;
    recap_tracker_h t;

    CHILD_CHECK(words != NULL);
    CHILD_CHECK(recap_generator_create(RECAP_DEVICE_HOST, &g) == RECAP_OK);
    CHILD_CHECK(recap_generator_manual_seed(g, 4242) == RECAP_OK);
    CHILD_CHECK(recap_generator_fill_u32(g, NULL, words, HOST_WORDS) == RECAP_OK);
    CHILD_CHECK(memcmp(words, expect, HOST_WORDS * 4) == 0);
    CHILD_CHECK(recap_default_tracker_get(&t) == RECAP_OK);
    CHILD_CHECK(recap_tracker_add(t, RECAP_RNG_MODEL_PARALLEL, 99) == RECAP_OK);
    CHILD_CHECK(recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok) == RECAP_OK);
    CHILD_CHECK(recap_tracker_unfork(t, tok) == RECAP_OK);
    if (device)
        child_capture();
    /* _exit: the busy thread's objects are unreachable here (its stack did not come along), so
     * an exit-time leak check would be meaningless. */
    _exit(0);
}

/* Waits up to 30 s for the child; kills it when it hangs. Returns its exit status, or -1. */
static int wait_child(pid_t pid)
{
    struct timespec nap = {0, 2000000};
    int status, i;

    for (i = 0; i < 15000; i++) {
        pid_t r = waitpid(pid, &status, WNOHANG);

        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        nanosleep(&nap, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

START_TEST(forked_child_works_while_another_thread_uses_recap)
{
    uint32_t *expect = malloc(HOST_WORDS * 4);
    recap_tracker_params_t p = {.device = RECAP_DEVICE_HOST};
    struct timespec nap = {0, 1000000};
    busy_t b = {0};
    recap_tracker_h t;
    pthread_t th;
    int k;

    ck_assert_ptr_nonnull(expect);
    b.device = on_double();
    /* The child's expected host words, drawn here before any fork. */
    {
        recap_generator_h g;

        ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &g));
        ck_assert_ok(recap_generator_manual_seed(g, 4242));
        ck_assert_ok(recap_generator_fill_u32(g, NULL, expect, HOST_WORDS));
        ck_assert_ok(recap_generator_destroy(g));
    }
    ck_assert_ok(recap_default_tracker_initialize(&p, 0, &t));
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &b.g));
    if (b.device)
        ck_assert_ok(recap_stream_create(0, &b.s));
    ck_assert_int_eq(pthread_create(&th, NULL, busy, &b), 0);
    while (!__atomic_load_n(&b.ready, __ATOMIC_ACQUIRE))
        nanosleep(&nap, NULL);
    for (k = 0; k < FORKS; k++) {
        pid_t pid;
        int status;

        nap.tv_nsec = 1000000 + 500000 * (long)tu_rand_below(8);
        nanosleep(&nap, NULL);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            child(expect, b.device);
        status = wait_child(pid);
        ck_assert_msg(status == 0, "fork %d: the child %s", k,
                      status < 0 ? "hung (a lock held at the fork)" : "failed");
    }
    __atomic_store_n(&b.stop, 1, __ATOMIC_RELEASE);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_uint_gt(b.rounds, 0);
    if (b.device)
        ck_assert_ok(recap_stream_destroy(b.s));
    ck_assert_ok(recap_generator_destroy(b.g));
    free(expect);
}
END_TEST

/* ---------------------------------------------------------------- RECAP_REPORT across forks */

/* Forks n children that exit normally (so librecap's exit handler writes the report) and reaps
 * them; pids[] gets their ids. */
static void fork_exiting_children(int n, pid_t *pids)
{
    int i, status;

    fflush(NULL);
    for (i = 0; i < n; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0)
            exit(0);
    }
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
        ck_assert(WIFEXITED(status));
    }
}

/* The lines of a report file, each checked to be one whole report (and, with pid > 0, to be
 * that process's). */
static int report_lines(const char *path, pid_t pid)
{
    char line[1024], mine[32];
    FILE *f = fopen(path, "r");
    int n = 0;

    ck_assert_msg(f != NULL, "no report %s", path);
    snprintf(mine, sizeof(mine), ",\"pid\":%d,", (int)pid);
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t len = strlen(line);

        ck_assert_msg(line[0] == '{' && strstr(line, "\"hooks\":") != NULL && len >= 2 &&
                          strcmp(line + len - 2, "}\n") == 0,
                      "%s: not a whole report line: %s", path, line);
        ck_assert_msg(pid <= 0 || strstr(line, mine) != NULL, "%s: not %d's: %s", path,
                      (int)pid, line);
        n++;
    }
    fclose(f);
    return n;
}

/* Processes sharing one RECAP_REPORT file (forks, ranks) each add their line to what is there:
 * none overwrites another's. */
START_TEST(processes_sharing_a_report_file_each_append_a_line)
{
    char dir[] = "/tmp/recap-report-XXXXXX", path[64];
    pid_t pids[4];
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/report", dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"hooks\":\"an earlier run\"}\n", f);
    fclose(f);
    setenv("RECAP_REPORT", path, 1);
    fork_exiting_children(4, pids);
    unsetenv("RECAP_REPORT"); /* this process's own exit writes none */
    ck_assert_int_eq(report_lines(path, 0), 1 + 4);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* "%p" in RECAP_REPORT is the pid: each process writes its own file, holding its one report. */
START_TEST(pid_in_the_report_path_gives_each_process_its_own_file)
{
    char dir[] = "/tmp/recap-report-XXXXXX", spec[64], path[64];
    pid_t pids[3];
    int i;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(spec, sizeof(spec), "%s/r.%%p.json", dir);
    setenv("RECAP_REPORT", spec, 1);
    fork_exiting_children(3, pids);
    unsetenv("RECAP_REPORT");
    ck_assert_msg(access(spec, F_OK) != 0, "%s was written as named", spec);
    for (i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/r.%d.json", dir, (int)pids[i]);
        ck_assert_int_eq(report_lines(path, pids[i]), 1);
        unlink(path);
    }
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fork");
    TCase *tc = tcase_create("fork");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, forked_child_works_while_another_thread_uses_recap);
    tcase_add_test(tc, processes_sharing_a_report_file_each_append_a_line);
    tcase_add_test(tc, pid_in_the_report_path_gives_each_process_its_own_file);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
