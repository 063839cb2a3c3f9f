/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "probe/probe.h"
#include "rng/philox_kat.h"

/*
 * The Philox self-test, from the most basic contract out: the block function against
 * Random123's known answers; recap's host fill against the word layout written down in
 * DESIGN.md (computed here straight from the block function); the device fill and cuRAND
 * (curand.c) against that same reference. Parts that need what this machine lacks say "not
 * applicable" and the rest still run.
 */

/* More than four fill units of 262144 words, ending inside a Philox block. */
#define WORDS ((1u << 20) + 6)
#define SEED 20261202ull
#define OFFSET (4ull * 12345)

static int known_answers(recap__probe_out_t *out)
{
    uint32_t got[4];
    int v;

    for (v = 0; v < RECAP__PHILOX_KAT_COUNT; v++) {
        recap_philox4x32_10(recap__philox_kat[v], recap__philox_kat[v] + 4, got);
        if (memcmp(got, recap__philox_kat[v] + 6, sizeof(got)) != 0) {
            recap__probe_fail(out, "Random123 vector %d: got %08x %08x %08x %08x", v, got[0],
                              got[1], got[2], got[3]);
            return -1;
        }
    }
    recap__probe_say(out, "Random123 known answers 3/3");
    return 0;
}

/* Word i lies in block b = i/4, drawn from subsequence b mod 65536 at counter
 * b/65536 + offset/4 (cuRAND's layout for generator offset 65536 * offset). */
static void reference_words(uint32_t *ref)
{
    const uint32_t key[2] = {(uint32_t)SEED, (uint32_t)(SEED >> 32)};
    uint32_t ctr[4], block[4];
    uint64_t b, c, i;

    for (b = 0; 4 * b < WORDS; b++) {
        c = b / 65536 + OFFSET / 4;
        ctr[0] = (uint32_t)c;
        ctr[1] = (uint32_t)(c >> 32);
        ctr[2] = (uint32_t)(b % 65536);
        ctr[3] = 0;
        recap_philox4x32_10(ctr, key, block);
        for (i = 4 * b; i < 4 * b + 4 && i < WORDS; i++)
            ref[i] = block[i % 4];
    }
}

void recap__probe_compare(recap__probe_out_t *out, const recap__probe_words_t *w, const char *who)
{
    size_t i;

    for (i = 0; i < w->n; i++)
        if (w->got[i] != w->ref[i]) {
            recap__probe_fail(out, "; %s DIFFERS at word %zu: %08x, want %08x", who, i,
                              w->got[i], w->ref[i]);
            return;
        }
    recap__probe_say(out, "; %s = reference", who);
}

static recap_status_t seeded_generator(int device, recap_generator_h *gen_p)
{
    uint8_t state[RECAP_STATE_BYTES];
    recap_status_t st;
    int i;

    for (i = 0; i < 8; i++) {
        state[i] = (uint8_t)(SEED >> (8 * i));
        state[8 + i] = (uint8_t)(OFFSET >> (8 * i));
    }
    st = recap_generator_create(device, gen_p);
    if (st == RECAP_OK && (st = recap_generator_set_state(*gen_p, state)) != RECAP_OK)
        recap_generator_destroy(*gen_p);
    return st;
}

static void host_fill(recap__probe_out_t *out, recap__probe_words_t *w)
{
    recap_generator_h gen;
    uint64_t offset = 0;
    recap_status_t st;

    st = seeded_generator(RECAP_DEVICE_HOST, &gen);
    if (st == RECAP_OK) {
        st = recap_generator_fill_u32(gen, NULL, w->got, w->n);
        if (st == RECAP_OK)
            st = recap_generator_offset(gen, &offset);
        recap_generator_destroy(gen);
    }
    if (st != RECAP_OK) {
        recap__probe_fail(out, "; host fill: %s", recap_last_error());
        return;
    }
    if (recap__probe_forced_failure("philox"))
        w->got[w->n / 2] ^= 1; /* RECAP_PROBE_FAIL=philox: proves failures reach the caller */
    recap__probe_compare(out, w, "host fill");
    if (offset != OFFSET + 4 * ((WORDS + 262143) / 262144))
        recap__probe_fail(out, " but its offset advanced to %llu", (unsigned long long)offset);
}

static void device_fill(recap__probe_out_t *out, recap__probe_words_t *w)
{
    recap_generator_h gen = NULL;
    void *buf = NULL;
    recap_status_t st;

    st = seeded_generator(0, &gen);
    if (st == RECAP_OK)
        st = recap_device_alloc(0, w->n * sizeof(uint32_t), &buf);
    if (st == RECAP_OK)
        st = recap_generator_fill_u32(gen, NULL, buf, w->n);
    if (st == RECAP_OK)
        st = recap_memcpy_to_host(0, w->got, buf, w->n * sizeof(uint32_t));
    if (st != RECAP_OK)
        recap__probe_fail(out, "; device 0 fill: %s", recap_last_error());
    else
        recap__probe_compare(out, w, "device 0 fill");
    if (buf != NULL)
        recap_device_free(0, buf);
    if (gen != NULL)
        recap_generator_destroy(gen);
}

/* Whether device 0 can be used; says why not when it cannot. */
static int have_device(recap__probe_out_t *out)
{
    const recap__driver_t *drv;
    int count = 0;

    if (recap__driver_get(&drv) != RECAP_OK) {
        recap__probe_say(out, "; device: not applicable (no CUDA driver)");
        return 0;
    }
    if (recap__device_count(&count) != RECAP_OK || count < 1) {
        recap__probe_say(out, "; device: not applicable (no CUDA device)");
        return 0;
    }
    return 1;
}

void recap__probe_philox(recap__probe_out_t *out)
{
    recap__probe_words_t w = {.seed = SEED, .offset = OFFSET, .n = WORDS};
    uint32_t *ref;
    int device;

    if (known_answers(out) != 0)
        return;
    ref = malloc(WORDS * sizeof(uint32_t));
    w.got = malloc(WORDS * sizeof(uint32_t));
    if (ref == NULL || w.got == NULL) {
        recap__probe_fail(out, "; out of memory for %u words", WORDS);
    } else {
        reference_words(ref);
        w.ref = ref;
        recap__probe_say(out, "; %u words of state (%llu, %llu)", WORDS, SEED, OFFSET);
        host_fill(out, &w);
        device = have_device(out);
        if (device)
            device_fill(out, &w);
        recap__probe_curand(out, &w, device);
    }
    free(ref);
    free(w.got);
}
