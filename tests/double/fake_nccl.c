/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake libnccl.so.2 for CI (no GPU, no NCCL): the few entry points recap resolves, over
 * in-process "communicators" whose ranks are threads of the test. ncclAllGather is a real
 * rendezvous: every rank's call waits for the others, then copies every rank's send buffer into
 * its own receive buffer, so a rank that gathers with another rank's arguments, too early or
 * with the wrong size shows up in the data. Device memory is the CUDA test double's, which is
 * host memory, so the copies are plain memcpy.
 *
 * recap finds it through RECAP_NCCL_LIB (test-only); the test drives it through the fake_nccl_*
 * exports. Never installed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recap.h" /* RECAP_API, the one export macro */
#define MAX_RANKS 8
#define COMM_MAGIC 0x66616b656e63636cULL /* "fakenccl" */
/* Long enough for a loaded CI machine, short enough to fail inside Check's test timeout. */
#define WAIT_SECONDS 10

/* ncclResult_t and ncclDataType_t values of nccl.h (NCCL 2.x). */
enum {
    SUCCESS = 0, SYSTEM_ERROR = 2, INTERNAL_ERROR = 3, INVALID_ARGUMENT = 4, INVALID_USAGE = 5,
    IN_PROGRESS = 7
};
enum { INT8 = 0, UINT8 = 1 };

typedef struct group {
    int nranks;
    int refs; /* comms not destroyed */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
    unsigned long generation;
    const void *send[MAX_RANKS];
    size_t count[MAX_RANKS];
    int dtype[MAX_RANKS];
} group_t;

typedef struct comm {
    uint64_t magic;
    group_t *g;
    int rank, device;
    int polls; /* ncclInProgress answers left for ncclCommGetAsyncError */
} comm_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int fail_result, fail_count, in_progress_polls;
static unsigned long allgathers;

RECAP_API int fake_nccl_group_create(int nranks, const int *devices, void **comms);
RECAP_API void fake_nccl_comm_destroy(void *comm);
RECAP_API void fake_nccl_fail_next(int result, int count);
RECAP_API void fake_nccl_in_progress_next(int polls);
RECAP_API unsigned long fake_nccl_allgathers(void);
/* The NCCL entry points, with nccl.h's ABI (ncclComm_t a pointer, the enums ints). */
RECAP_API int ncclAllGather(const void *send, void *recv, size_t count, int dtype, void *comm,
                         void *stream);
RECAP_API int ncclCommGetAsyncError(void *comm, int *result);
RECAP_API const char *ncclGetErrorString(int result);
RECAP_API int ncclCommCount(const void *comm, int *count);
RECAP_API int ncclCommUserRank(const void *comm, int *rank);
RECAP_API int ncclCommCuDevice(const void *comm, int *device);
RECAP_API int ncclGetVersion(int *version);

/* A group of nranks communicators, comms[r] on devices[r]. */
RECAP_API int fake_nccl_group_create(int nranks, const int *devices, void **comms)
{
    group_t *g;
    int r;

    if (nranks < 1 || nranks > MAX_RANKS || devices == NULL || comms == NULL)
        return INVALID_ARGUMENT;
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return SYSTEM_ERROR;
    g->nranks = g->refs = nranks;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    for (r = 0; r < nranks; r++) {
        comm_t *c = calloc(1, sizeof(*c));

        if (c == NULL)
            abort(); /* a test fixture: nothing sensible to unwind */
        c->magic = COMM_MAGIC;
        c->g = g;
        c->rank = r;
        c->device = devices[r];
        comms[r] = c;
    }
    return SUCCESS;
}

RECAP_API void fake_nccl_comm_destroy(void *comm)
{
    comm_t *c = comm;
    group_t *g = c->g;
    int last;

    pthread_mutex_lock(&g->mu);
    last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    c->magic = 0;
    free(c);
    if (last) {
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
        free(g);
    }
}

/* The next `count` ncclAllGather calls (of any rank) fail with `result` before meeting the
 * others: fail every rank's call of one collective so none waits for a missing peer. */
RECAP_API void fake_nccl_fail_next(int result, int count)
{
    pthread_mutex_lock(&lock);
    fail_result = result;
    fail_count = count;
    pthread_mutex_unlock(&lock);
}

/* The next ncclAllGather answers ncclInProgress (as a non-blocking communicator does) and
 * ncclCommGetAsyncError says so `polls` times before reporting success. */
RECAP_API void fake_nccl_in_progress_next(int polls)
{
    pthread_mutex_lock(&lock);
    in_progress_polls = polls;
    pthread_mutex_unlock(&lock);
}

RECAP_API unsigned long fake_nccl_allgathers(void)
{
    unsigned long n;

    pthread_mutex_lock(&lock);
    n = allgathers;
    pthread_mutex_unlock(&lock);
    return n;
}

static int check_comm(const void *comm)
{
    return comm != NULL && ((const comm_t *)comm)->magic == COMM_MAGIC;
}

/* Waits until every rank of the group arrived; under g->mu. */
static int barrier_locked(group_t *g)
{
    unsigned long gen = g->generation;
    struct timespec until;

    if (++g->arrived == g->nranks) {
        g->arrived = 0;
        g->generation++;
        pthread_cond_broadcast(&g->cv);
        return SUCCESS;
    }
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_SECONDS;
    while (g->generation == gen)
        if (pthread_cond_timedwait(&g->cv, &g->mu, &until) == ETIMEDOUT)
            return SYSTEM_ERROR; /* a rank never came: the test fails instead of hanging */
    return SUCCESS;
}

RECAP_API int ncclAllGather(const void *send, void *recv, size_t count, int dtype, void *comm,
                         void *stream)
{
    comm_t *c = comm;
    group_t *g;
    int rc = SUCCESS, r, polls;

    (void)stream; /* the double runs stream work at once: everything before is done */
    if (!check_comm(comm) || send == NULL || recv == NULL)
        return INVALID_ARGUMENT;
    if (dtype != INT8 && dtype != UINT8)
        return INVALID_ARGUMENT; /* recap moves bytes only */
    pthread_mutex_lock(&lock);
    if (fail_count > 0) {
        fail_count--;
        rc = fail_result;
    }
    polls = in_progress_polls;
    in_progress_polls = 0;
    pthread_mutex_unlock(&lock);
    if (rc != SUCCESS)
        return rc;
    g = c->g;
    pthread_mutex_lock(&g->mu);
    g->send[c->rank] = send;
    g->count[c->rank] = count;
    g->dtype[c->rank] = dtype;
    rc = barrier_locked(g);
    for (r = 0; rc == SUCCESS && r < g->nranks; r++)
        if (g->count[r] != count || g->dtype[r] != dtype)
            rc = INVALID_USAGE; /* NCCL would hang or corrupt: the test sees an error */
    pthread_mutex_unlock(&g->mu);
    /* Every rank copies while the others' send buffers are held by the second barrier. */
    for (r = 0; rc == SUCCESS && r < g->nranks; r++)
        memcpy((char *)recv + (size_t)r * count, g->send[r], count);
    pthread_mutex_lock(&g->mu);
    if (rc == SUCCESS)
        rc = barrier_locked(g);
    pthread_mutex_unlock(&g->mu);
    if (rc != SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    allgathers++;
    pthread_mutex_unlock(&lock);
    if (polls > 0) {
        c->polls = polls;
        return IN_PROGRESS;
    }
    return SUCCESS;
}

RECAP_API int ncclCommGetAsyncError(void *comm, int *result)
{
    comm_t *c = comm;

    if (!check_comm(comm) || result == NULL)
        return INVALID_ARGUMENT;
    *result = c->polls > 0 ? IN_PROGRESS : SUCCESS;
    if (c->polls > 0)
        c->polls--;
    return SUCCESS;
}

RECAP_API const char *ncclGetErrorString(int result)
{
    switch (result) {
    case SUCCESS: return "no error";
    case SYSTEM_ERROR: return "fake system error";
    case INTERNAL_ERROR: return "fake internal error";
    case INVALID_ARGUMENT: return "fake invalid argument";
    case INVALID_USAGE: return "fake invalid usage";
    case IN_PROGRESS: return "NCCL operation in progress";
    }
    return "unknown result code";
}

RECAP_API int ncclCommCount(const void *comm, int *count)
{
    if (!check_comm(comm) || count == NULL)
        return INVALID_ARGUMENT;
    *count = ((const comm_t *)comm)->g->nranks;
    return SUCCESS;
}

RECAP_API int ncclCommUserRank(const void *comm, int *rank)
{
    if (!check_comm(comm) || rank == NULL)
        return INVALID_ARGUMENT;
    *rank = ((const comm_t *)comm)->rank;
    return SUCCESS;
}

RECAP_API int ncclCommCuDevice(const void *comm, int *device)
{
    if (!check_comm(comm) || device == NULL)
        return INVALID_ARGUMENT;
    *device = ((const comm_t *)comm)->device;
    return SUCCESS;
}

RECAP_API int ncclGetVersion(int *version)
{
    if (version == NULL)
        return INVALID_ARGUMENT;
    *version = 22800; /* "2.28.0": a version real recap users have */
    return SUCCESS;
}
