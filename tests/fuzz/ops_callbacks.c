/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Forks and re-entry from inside the host's callbacks (issue 29): a framework generator driven by
 * a tracker and read by exact-capture scopes, and a capture subscriber, called from a helper
 * thread running an input-chosen script. At input-chosen callback calls a callback forks, or
 * makes an input-chosen public call (which must come back with a status); the main thread forks
 * at an input-chosen moment too. Every child, from whichever thread, uses the registries, the
 * subscription and the tracker it inherited under an alarm, and must exit 0: a child that hangs
 * (a lock or in-flight count of a thread it does not have) or a call that waits for its own
 * thread fails the input.
 */
#include "tests/fuzz/fuzz.h"

#undef NSIG /* fuzz.h's count of signatures, unused here: <signal.h> has its own */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <sanitizer/common_interface_defs.h> /* the harness is always built with sanitizers */
#include <time.h>
#include <unistd.h>

#define SCRIPT 12
#define CHILD_ALARM_S 10

static struct {
    uint8_t script[SCRIPT];
    int len;
    int fork_at, reenter_at, reenter_what; /* callback calls, counted from 1 (0: never) */
    int calls;                             /* atomic */
    uint8_t value[RECAP_STATE_BYTES];
    recap_generator_h gen;
    recap_tracker_h t;
    recap_subscription_h sub;
    int done; /* atomic: the helper finished its script */
    int park_req, parked; /* atomic: the main thread's fork waits for the helper in a callback */
} cw;

static __thread int in_child; /* a child forked inside a callback, back in the helper */
static __thread int is_helper;
static int ran; /* once per input: a thread and forks cost far more than the other ops */

void fz_callbacks_reset(void)
{
    ran = 0;
}

static recap_status_t cw_get(void *fw, uint8_t st[RECAP_STATE_BYTES]);
static recap_status_t cw_set(void *fw, const uint8_t st[RECAP_STATE_BYTES]);
static recap_status_t cw_event(const recap_capture_event_info_t *info, void *arg);

static const recap_framework_ops_t cw_ops = {.version = RECAP_FRAMEWORK_OPS_VERSION,
                                             .name = "fuzz callbacks",
                                             .get_state = cw_get,
                                             .set_state = cw_set};

/* A child still running at its alarm says where it is stuck (a lock of recap's, or one of the
 * sanitizer runtime's that another thread of the parent held at the fork), then dies as the
 * alarm would have it. */
static void child_hung(int sig)
{
    static const char msg[] = "fuzz: a forked child hung; where:\n";

    (void)sig;
    if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
    }
    __sanitizer_print_stack_trace();
    _exit(128 + SIGALRM);
}

/* A child's whole life: what it inherited must work, within the alarm. */
static void child_checks(void)
{
    recap_framework_info_t info[4];
    recap_exact_scope_h scope;
    recap_fork_token_t tok;
    recap_generator_h g;
    recap_status_t st;
    size_t n;

    in_child = 1; /* its callbacks neither fork nor re-enter */
    signal(SIGALRM, child_hung);
    alarm(CHILD_ALARM_S);
    REQUIRE(CALL(recap_generator_create_framework(&cw_ops, NULL, RECAP_DEVICE_HOST, &g)) ==
            RECAP_OK);
    REQUIRE(CALL(recap_generator_destroy(g)) == RECAP_OK);
    REQUIRE(CALL(recap_framework_generators(info, 4, &n)) == RECAP_OK);
    REQUIRE(CALL(recap_capture_unsubscribe(cw.sub)) == RECAP_OK);
    st = CALL(recap_exact_capture_enter(&scope));
    REQUIRE(st == RECAP_OK || st == RECAP_ERR_STATE); /* refused inside the input's capture */
    if (st == RECAP_OK)
        REQUIRE(CALL(recap_exact_capture_leave(scope)) == RECAP_OK);
    st = CALL(recap_tracker_fork(cw.t, RECAP_RNG_MODEL_PARALLEL, &tok));
    REQUIRE(st == RECAP_OK || st == RECAP_ERR_STATE); /* a fork of the parent's may be open */
    if (st == RECAP_OK)
        REQUIRE(CALL(recap_tracker_unfork(cw.t, tok)) == RECAP_OK);
    _exit(0);
}

/* Waits for a child for a bounded time; its exit status, or -1 when it hung. */
static int wait_bounded(pid_t pid)
{
    struct timespec nap = {0, 100000};
    int status, i;

    for (i = 0; i < (CHILD_ALARM_S + 10) * 10000; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        nanosleep(&nap, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* A child's end: 0, or what went wrong (its status, or that it was killed hung). */
static void require_child(pid_t pid)
{
    int st = wait_bounded(pid);

    if (st != 0)
        fprintf(stderr, "fuzz: child %d %s (status %d)\n", (int)pid,
                st < 0 ? "still ran after its alarm: killed" : "failed", st);
    REQUIRE(st == 0);
}

static void fork_and_check(void)
{
    pid_t pid = fork();

    if (pid == 0) {
        in_child = 1;
        signal(SIGALRM, child_hung); /* from here: the way back out of the callback counts too */
        alarm(CHILD_ALARM_S);
        return;
    }
    REQUIRE(pid > 0);
    require_child(pid);
}

/* A public call, from the helper's script or from inside a callback (there: a status, never a
 * wait for this thread's own locks). */
static void public_call(int what)
{
    recap_framework_info_t info[4];
    recap_exact_scope_h scope;
    recap_subscription_h s;
    recap_fork_token_t tok;
    recap_generator_h g;
    recap_tracker_h t;
    uint8_t st[RECAP_STATE_BYTES];
    size_t n;

    switch (what % 8) {
    case 0:
        CALL(recap_framework_generators(info, 4, &n));
        break;
    case 1:
        if (CALL(recap_exact_capture_enter(&scope)) == RECAP_OK)
            CALL(recap_exact_capture_leave(scope));
        break;
    case 2:
        if (CALL(recap_tracker_fork(cw.t, RECAP_RNG_MODEL_PARALLEL, &tok)) == RECAP_OK)
            CALL(recap_tracker_unfork(cw.t, tok));
        break;
    case 3:
        if (CALL(recap_generator_create_framework(&cw_ops, NULL, RECAP_DEVICE_HOST, &g)) ==
            RECAP_OK)
            CALL(recap_generator_destroy(g));
        break;
    case 4:
        if (CALL(recap_capture_subscribe(RECAP_EVENT_MASK_ALL, cw_event, NULL, &s)) == RECAP_OK)
            CALL(recap_capture_unsubscribe(s));
        break;
    case 5:
        CALL(recap_generator_get_state(cw.gen, st));
        break;
    case 6:
        CALL(recap_default_tracker_get(&t));
        break;
    default:
        CALL(recap_graph_will_launch((recap_graph_exec_t)(uintptr_t)0xca11, NULL));
        break;
    }
}

static void callback(void)
{
    int call = __atomic_add_fetch(&cw.calls, 1, __ATOMIC_RELAXED);

    if (in_child)
        return;
    if (is_helper && __atomic_load_n(&cw.park_req, __ATOMIC_ACQUIRE)) {
        struct timespec nap = {0, 100000};
        int i;

        __atomic_store_n(&cw.parked, 1, __ATOMIC_RELEASE);
        for (i = 0; i < 20000 && __atomic_load_n(&cw.park_req, __ATOMIC_ACQUIRE); i++)
            nanosleep(&nap, NULL);
        __atomic_store_n(&cw.parked, 0, __ATOMIC_RELEASE);
    }
    if (call == cw.reenter_at)
        public_call(cw.reenter_what);
    if (call == cw.fork_at)
        fork_and_check();
}

static recap_status_t cw_get(void *fw, uint8_t st[RECAP_STATE_BYTES])
{
    callback();
    memcpy(st, cw.value, RECAP_STATE_BYTES);
    return RECAP_OK;
}

static recap_status_t cw_set(void *fw, const uint8_t st[RECAP_STATE_BYTES])
{
    callback();
    memcpy(cw.value, st, RECAP_STATE_BYTES);
    return RECAP_OK;
}

static recap_status_t cw_event(const recap_capture_event_info_t *info, void *arg)
{
    callback();
    return RECAP_OK;
}

static void *helper(void *arg)
{
    /* the calls that reach the callbacks: a scope, a tracker fork, a launch event */
    static const int calls[3] = {1, 2, 7};
    int i;

    is_helper = 1;
    for (i = 0; i < cw.len; i++) {
        public_call(calls[cw.script[i] % 3]);
        if (in_child)
            child_checks();
    }
    __atomic_store_n(&cw.done, 1, __ATOMIC_RELEASE);
    return arg;
}

void op_callbacks(input_t *in)
{
    recap_tracker_params_t tp = {.device = RECAP_DEVICE_HOST};
    int main_fork = u8(in) % 16, i;
    pthread_t th;

    if (ran++)
        return;
    main_fork = main_fork < 8 ? 0 : main_fork - 7; /* half the time, no fork of its own */
    memset(&cw, 0, sizeof(cw));
    cw.len = 1 + u8(in) % SCRIPT;
    for (i = 0; i < cw.len; i++)
        cw.script[i] = u8(in);
    cw.fork_at = u8(in) % 32; /* beyond the calls made: no fork */
    cw.reenter_at = u8(in) % 16;
    cw.reenter_what = u8(in);
    REQUIRE(CALL(recap_generator_create_framework(&cw_ops, NULL, RECAP_DEVICE_HOST, &cw.gen)) ==
            RECAP_OK);
    tp.generator = cw.gen;
    REQUIRE(CALL(recap_tracker_create(&tp, &cw.t)) == RECAP_OK);
    REQUIRE(CALL(recap_tracker_add(cw.t, RECAP_RNG_DATA_PARALLEL, 3)) == RECAP_OK);
    REQUIRE(CALL(recap_tracker_add(cw.t, RECAP_RNG_MODEL_PARALLEL, 4)) == RECAP_OK);
    REQUIRE(CALL(recap_capture_subscribe(RECAP_EVENT_MASK_ALL, cw_event, NULL, &cw.sub)) ==
            RECAP_OK);
    REQUIRE(pthread_create(&th, NULL, helper, NULL) == 0);
    /* The main thread's fork: after an input-chosen number of yields, while the helper runs. */
    for (i = 0; main_fork > 0 && i < main_fork * 4 && !__atomic_load_n(&cw.done, __ATOMIC_ACQUIRE);
         i++)
        sched_yield();
    if (main_fork > 0) {
        pid_t pid;

        /* The fork happens while the helper is inside a callback (the case under test), not at
         * any point of its run: there it can land while the helper holds a lock of the
         * sanitizer's allocator (clang 14's ASan does not take them around fork; CI's children
         * hung in SizeClassAllocator64::GetFromAllocator, not in recap). A helper that finished
         * first runs nothing at the fork either. */
        __atomic_store_n(&cw.park_req, 1, __ATOMIC_RELEASE);
        for (i = 0; i < 200000 && !__atomic_load_n(&cw.parked, __ATOMIC_ACQUIRE) &&
                    !__atomic_load_n(&cw.done, __ATOMIC_ACQUIRE);
             i++)
            sched_yield();
        pid = fork();
        __atomic_store_n(&cw.park_req, 0, __ATOMIC_RELEASE);

        if (pid == 0)
            child_checks();
        REQUIRE(pid > 0);
        require_child(pid);
    }
    REQUIRE(pthread_join(th, NULL) == 0);
    REQUIRE(CALL(recap_capture_unsubscribe(cw.sub)) == RECAP_OK);
    REQUIRE(CALL(recap_tracker_destroy(cw.t)) == RECAP_OK);
    REQUIRE(CALL(recap_generator_destroy(cw.gen)) == RECAP_OK);
}
