/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Random123's kat_vectors for philox4x32 with 10 rounds, kept once: recap-probe's self-test
 * (src/probe/philox.c) and the suite (tests/rng/test_philox.c) both check recap_philox4x32_10
 * against them. Each row: counter (4 words), key (2 words), answer (4 words).
 */
#ifndef RECAP_RNG_PHILOX_KAT_H
#define RECAP_RNG_PHILOX_KAT_H

#include <stdint.h>

#define RECAP__PHILOX_KAT_COUNT 3

static const uint32_t recap__philox_kat[RECAP__PHILOX_KAT_COUNT][10] = {
    {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
    {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
     0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
    {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
     0x94fdcceb, 0x5001e420, 0x24126ea1},
};

#endif
