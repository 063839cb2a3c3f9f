/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fork() while another thread is inside an object's critical section: a thread keeps forking
 * and unforking a tracker and filling from generators while the main thread forks again and
 * again; each child uses the objects it inherited (the tracker, its generator, a host generator)
 * and must finish within a timeout with consistent answers. Before the spinlocks knew about fork
 * a child forked while the thread held one of those locks spun forever.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define FORKS 40
#define WORDS 64

static recap_tracker_h tracker;
static recap_generator_h host_gen;
static volatile int stop;

static void *hammer(void *arg)
{
    recap_generator_h g;
    uint32_t buf[WORDS];
    uint8_t state[RECAP_STATE_BYTES];
    unsigned long rounds = 0;

    (void)arg;
    if (recap_tracker_generator(tracker, &g) != RECAP_OK)
        return NULL;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        recap_fork_token_t a, b;
        recap_states_h states;

        if (recap_tracker_fork(tracker, "a", &a) != RECAP_OK)
            break;
        recap_generator_fill_u32(g, NULL, buf, WORDS);
        if (recap_tracker_fork(tracker, "b", &b) == RECAP_OK) {
            recap_generator_fill_u32(g, NULL, buf, WORDS);
            recap_tracker_unfork(tracker, b);
        }
        recap_tracker_unfork(tracker, a);
        recap_generator_fill_u32(host_gen, NULL, buf, WORDS);
        recap_generator_get_state(host_gen, state);
        if (recap_tracker_get_states(tracker, &states) == RECAP_OK)
            recap_states_free(states);
        rounds++;
    }
    return (void *)rounds;
}

/* Replaying a state gives the same words: the object works and its state is one. */
static int replays(recap_generator_h g)
{
    uint8_t s0[RECAP_STATE_BYTES], s1[RECAP_STATE_BYTES], s2[RECAP_STATE_BYTES];
    uint32_t w1[WORDS], w2[WORDS];

    if (recap_generator_get_state(g, s0) != RECAP_OK ||
        recap_generator_fill_u32(g, NULL, w1, WORDS) != RECAP_OK ||
        recap_generator_get_state(g, s1) != RECAP_OK ||
        recap_generator_set_state(g, s0) != RECAP_OK ||
        recap_generator_fill_u32(g, NULL, w2, WORDS) != RECAP_OK ||
        recap_generator_get_state(g, s2) != RECAP_OK)
        return 0;
    return memcmp(w1, w2, sizeof(w1)) == 0 && memcmp(s1, s2, sizeof(s1)) == 0 &&
           memcmp(s0, s1, sizeof(s0)) != 0;
}

/* In the child: every inherited object still answers. */
static int child_uses_inherited_objects(void)
{
    recap_fork_token_t a;
    recap_generator_h g;
    recap_states_h states;
    const char *name;

    if (recap_tracker_generator(tracker, &g) != RECAP_OK)
        return 10;
    if (recap_tracker_fork(tracker, "a", &a) != RECAP_OK)
        return 11;
    if (!replays(g))
        return 12;
    if (recap_tracker_current_name(tracker, &name) != RECAP_OK || strcmp(name, "a") != 0)
        return 13;
    if (recap_tracker_unfork(tracker, a) != RECAP_OK)
        return 14;
    if (!replays(host_gen))
        return 15;
    if (recap_tracker_get_states(tracker, &states) != RECAP_OK)
        return 16;
    recap_states_free(states);
    return 0;
}

/* The child's exit status, or -1 when it had not finished after 20 s (it is killed). */
static int wait_child(pid_t pid)
{
    struct timespec t0, t;
    int status;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);

        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 20) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(1000);
    }
}

START_TEST(children_forked_mid_critical_section_use_inherited_objects)
{
    recap_tracker_params_t params;
    pthread_t t;
    void *rounds;
    int i, hung = 0, failed = 0;

    memset(&params, 0, sizeof(params));
    params.device = RECAP_DEVICE_HOST;
    ck_assert_ok(recap_tracker_create(&params, &tracker));
    ck_assert_ok(recap_tracker_add(tracker, "a", 5));
    ck_assert_ok(recap_tracker_add(tracker, "b", 7));
    ck_assert_ok(recap_generator_create(RECAP_DEVICE_HOST, &host_gen));
    ck_assert_ok(recap_generator_manual_seed(host_gen, 11));
    stop = 0;
    ck_assert_int_eq(pthread_create(&t, NULL, hammer, NULL), 0);
    for (i = 0; i < FORKS; i++) {
        pid_t pid;
        int st;

        usleep(200 + (useconds_t)tu_rand_below(800));
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            _exit(child_uses_inherited_objects());
        st = wait_child(pid);
        hung += st == -1;
        failed += st != 0 && st != -1;
        ck_assert_msg(st == 0, "child %d: %s (status %d)", i, st == -1 ? "hung" : "failed", st);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    pthread_join(t, &rounds);
    ck_assert_int_eq(hung, 0);
    ck_assert_int_eq(failed, 0);
    ck_assert_msg(rounds != NULL, "the thread never ran");
    ck_assert_ok(recap_generator_destroy(host_gen));
    ck_assert_ok(recap_tracker_destroy(tracker));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fork_objects");
    TCase *tc = tcase_create("fork_objects");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, children_forked_mid_critical_section_use_inherited_objects);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
