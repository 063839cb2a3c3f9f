/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A framework with its own Philox generator, for the tests: what a training framework (torch's
 * CUDA generator) is to recap. Its generator has a current state object; its kernel draws from
 * the current state and advances it; state objects are reference counted so the tests can check
 * that recap gives back every reference it took. Any operation can be made to fail, and one can
 * be made to call back into recap, to test all-or-nothing and re-entrancy.
 */
#ifndef RECAP_TESTS_FAKE_FRAMEWORK_H
#define RECAP_TESTS_FAKE_FRAMEWORK_H

#include <stddef.h>
#include <stdint.h>

#include "recap.h"

typedef struct ff_obj {
    int refs;
    uint64_t seed, offset;
} ff_obj_t;

typedef struct ff {
    ff_obj_t *current;
    int live;               /* objects alive (including current) */
    int calls;              /* operations recap called */
    const char *fail_op;    /* this operation fails... */
    int fail_after;         /* ...after this many more successful calls of it */
    recap_tracker_h reenter; /* when set, get_state calls recap_tracker_fork on it */
    recap_status_t reenter_status;
    int needs_registration;
    recap_generator_h gen;
} ff_t;

/* A framework on `device` (RECAP_DEVICE_HOST or a CUDA ordinal), its generator at (seed, 0), and
 * its recap generator (value form only when graph_safe is 0). */
ff_t *ff_new(int device, uint64_t seed, int graph_safe);
/* Destroys the recap generator and the framework; returns the objects still alive beyond its
 * current one (0 when recap gave back every reference). */
int ff_free(ff_t *f);
/* The ops table ff_new uses (graph_safe: with the graph-safe form). */
recap_framework_ops_t ff_ops(int graph_safe);

/* The framework's own kernel: thread t of n/4 draws four words with curand_init(seed, t, offset)
 * from the current state, which then advances by 4 (n <= 262144, a multiple of 4): exactly the
 * words of cuRAND's host generator at that state. */
void ff_draw(ff_t *f, uint32_t *w, size_t n);
void ff_current_value(const ff_t *f, uint64_t *seed, uint64_t *offset);

/* The framework generator ff made for `gen`, or NULL (for tests that run on either kind). */
ff_t *ff_of(recap_generator_h gen);

#endif
