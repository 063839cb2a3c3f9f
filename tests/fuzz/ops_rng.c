/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RNG-state invariants: after any sequence of operations, a draw from a generator equals
 * include/recap/philox.h's reference for the (seed, offset) recap reports for it, and the offset
 * then advances by what recap.h promises; a fork installs exactly the state the tracker's states
 * report for the name. Checked by an operation (op_rng_check) and on every generator and tracker
 * the input still holds at its end (fz_rng_check_all).
 */
#include "tests/fuzz/fuzz.h"

#include "recap/philox.h"

#define BIG_WORDS (262144 + 64) /* crosses the first offset step of a fill */

/* Word w of a fill from (seed, offset): cuRAND's PHILOX4_32_10 layout, generator offset
 * 65536 * offset (recap.h): block b = w / 4 drawn at counter (b / 65536 + offset / 4,
 * b mod 65536), key = seed. */
static uint32_t ref_word(uint64_t seed, uint64_t offset, uint64_t word)
{
    uint64_t b = word / 4, c = b / 65536 + offset / 4;
    uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), (uint32_t)(b % 65536), 0};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, out[4];

    recap_philox4x32_10(ctr, key, out);
    return out[word % 4];
}

static int capturing_any(void)
{
    int i;

    for (i = 0; i < NSTREAM; i++)
        if (w.capturing[i])
            return 1;
    return 0;
}

/* Fills n words from g (host memory, or device 0 of the double through a stream that is not
 * capturing) into out; 0 when the fill cannot run here or is refused (an offset at the end of its
 * range). */
static int draw(recap_generator_h g, uint32_t *out, size_t n)
{
    int dev = -2, s;

    REQUIRE(CALL(recap_generator_device(g, &dev)) == RECAP_OK);
    if (dev == RECAP_DEVICE_HOST) /* refused near the end of the offsets */
        return CALL(recap_generator_fill_u32(g, NULL, out, n)) == RECAP_OK;
    if (dev != 0 || !w.have_device || n > DBUF_WORDS || capturing_any())
        return 0;
    for (s = 0; s < NSTREAM; s++)
        if (w.stream[s] != NULL)
            break;
    if (s == NSTREAM || CALL(recap_generator_fill_u32(g, w.stream[s], w.dbuf[0], n)) != RECAP_OK)
        return 0;
    REQUIRE(CALL(recap_stream_synchronize(w.stream[s])) == RECAP_OK);
    REQUIRE(CALL(recap_memcpy_to_host(0, out, w.dbuf[0], n * 4)) == RECAP_OK);
    return 1;
}

/* A draw of n words from g equals the reference for the state g reports; the offset advances by
 * 4 * ceil(n / 262144), the seed stays. */
static void check_gen(recap_generator_h g, size_t n)
{
    uint64_t seed = 0, offset = 1, seed2 = 0, offset2 = 1, i;
    uint32_t *buf = malloc(n * sizeof(uint32_t));

    REQUIRE(buf != NULL);
    REQUIRE(CALL(recap_generator_seed(g, &seed)) == RECAP_OK);
    REQUIRE(CALL(recap_generator_offset(g, &offset)) == RECAP_OK);
    REQUIRE(offset % 4 == 0);
    if (draw(g, buf, n)) {
        for (i = 0; i < n; i++)
            if (buf[i] != ref_word(seed, offset, i)) {
                fprintf(stderr, "word %llu of a fill at seed %llu offset %llu: %08x, "
                        "reference %08x\n", (unsigned long long)i, (unsigned long long)seed,
                        (unsigned long long)offset, buf[i], ref_word(seed, offset, i));
                abort();
            }
        REQUIRE(CALL(recap_generator_seed(g, &seed2)) == RECAP_OK && seed2 == seed);
        REQUIRE(CALL(recap_generator_offset(g, &offset2)) == RECAP_OK);
        REQUIRE(offset2 == offset + 4 * ((n + 262143) / 262144));
    } else { /* a fill refused or not run changed nothing */
        REQUIRE(CALL(recap_generator_seed(g, &seed2)) == RECAP_OK && seed2 == seed);
        REQUIRE(CALL(recap_generator_offset(g, &offset2)) == RECAP_OK && offset2 == offset);
    }
    free(buf);
}

/* Forks into one of the tracker's names: the generator then reports the state the tracker's
 * states hold for it, and draws it. */
static void check_fork(trk_slot_t *t, input_t *in)
{
    uint8_t st[RECAP_STATE_BYTES];
    recap_states_h s;
    recap_fork_token_t tok;
    recap_generator_h g;
    uint64_t seed = 0, offset = 0, want_seed, want_offset;
    const char *nm;
    char name[RECAP_NAME_MAX + 1];
    size_t n = 0;
    int i;

    if (t->inference != 0 || t->nforks > 0 || capturing_any())
        return;
    REQUIRE(CALL(recap_tracker_get_states(t->h, &s)) == RECAP_OK);
    REQUIRE(CALL(recap_states_count(s, &n)) == RECAP_OK);
    if (n == 0) {
        REQUIRE(CALL(recap_states_free(s)) == RECAP_OK);
        return;
    }
    REQUIRE(CALL(recap_states_name(s, u8(in) % n, &nm)) == RECAP_OK);
    REQUIRE(CALL(recap_states_lookup(s, nm, st)) == RECAP_OK);
    snprintf(name, sizeof(name), "%s", nm);
    REQUIRE(CALL(recap_states_free(s)) == RECAP_OK);
    want_seed = want_offset = 0;
    for (i = 7; i >= 0; i--) {
        want_seed = want_seed << 8 | st[i];
        want_offset = want_offset << 8 | st[8 + i];
    }
    REQUIRE(CALL(recap_tracker_fork(t->h, name, &tok)) == RECAP_OK);
    REQUIRE(CALL(recap_tracker_generator(t->h, &g)) == RECAP_OK);
    REQUIRE(CALL(recap_generator_seed(g, &seed)) == RECAP_OK && seed == want_seed);
    REQUIRE(CALL(recap_generator_offset(g, &offset)) == RECAP_OK && offset == want_offset);
    check_gen(g, 1 + u8(in) % 64);
    REQUIRE(CALL(recap_tracker_unfork(t->h, tok)) == RECAP_OK);
}

void op_rng_check(input_t *in)
{
    recap_generator_h g;
    trk_slot_t *t;
    uint8_t k = u8(in);
    size_t n = k < 250 ? 1 + (size_t)(num(in) % HBUF_WORDS) : BIG_WORDS;

    switch (u8(in) % 3) {
    case 0:
        if ((g = w.gen[pick(in, NGEN)].h) != NULL)
            check_gen(g, n);
        break;
    case 1:
        if ((t = any_tracker(in)) != NULL) {
            REQUIRE(CALL(recap_tracker_generator(t->h, &g)) == RECAP_OK);
            check_gen(g, n);
        }
        break;
    default:
        if ((t = any_tracker(in)) != NULL)
            check_fork(t, in);
        break;
    }
}

void fz_rng_check_all(void)
{
    recap_generator_h g;
    int i;

    for (i = 0; i < NGEN; i++)
        if (w.gen[i].h != NULL)
            check_gen(w.gen[i].h, 5);
    for (i = 0; i < NTRK; i++)
        if (w.trk[i].h != NULL) {
            REQUIRE(CALL(recap_tracker_generator(w.trk[i].h, &g)) == RECAP_OK);
            check_gen(g, 9);
        }
}
