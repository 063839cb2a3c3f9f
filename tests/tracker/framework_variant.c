/* SPDX-License-Identifier: Apache-2.0 */
/* The framework variant of the tracker, seeding and snapshot suites (see testutil.h). */
#include <stdio.h>
#include <stdlib.h>

#include "fake_framework.h"
#include "recap.h"

/* PyTorch's default seed, as a fresh framework generator would have. */
#define DEFAULT_SEED 67280421310721ULL

recap_status_t tu_tracker_create(const recap_tracker_params_t *params, recap_tracker_h *tracker_p);
recap_status_t tu_tracker_destroy(recap_tracker_h tracker);

recap_status_t tu_tracker_create(const recap_tracker_params_t *params, recap_tracker_h *tracker_p)
{
    recap_tracker_params_t p;
    recap_status_t st;
    ff_t *f;

    if (params == NULL || tracker_p == NULL || params->generator != NULL)
        return recap_tracker_create(params, tracker_p);
    f = ff_new(params->device, DEFAULT_SEED, 1);
    p = *params;
    p.generator = f->gen;
    st = recap_tracker_create(&p, tracker_p);
    if (st != RECAP_OK)
        ff_free(f);
    return st;
}

recap_status_t tu_tracker_destroy(recap_tracker_h tracker)
{
    recap_generator_h gen = NULL;
    recap_status_t st;
    ff_t *f;
    int left;

    if (tracker != NULL)
        recap_tracker_generator(tracker, &gen);
    st = recap_tracker_destroy(tracker);
    f = gen != NULL ? ff_of(gen) : NULL;
    if (st != RECAP_OK || f == NULL)
        return st;
    left = ff_free(f);
    if (left != 0) {
        fprintf(stderr, "recap kept %d framework state object(s) after the tracker went\n", left);
        abort();
    }
    return st;
}
