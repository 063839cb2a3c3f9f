/* SPDX-License-Identifier: Apache-2.0 */
/* The fill contract, checked the same way for host generators and device generators. */
#ifndef RECAP_FILL_CASES_H
#define RECAP_FILL_CASES_H

#include "testutil.h"

/* Adds the fill tests for generators on `device` (RECAP_DEVICE_HOST or a CUDA ordinal). */
void fill_cases_add(TCase *tc, int device);

#endif
