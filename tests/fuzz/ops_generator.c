/* SPDX-License-Identifier: Apache-2.0 */
/* Operations on generators: creation, state, reservations, fills. */
#include "tests/fuzz/fuzz.h"

void op_gen_create(input_t *in)
{
    static const int devices[] = {RECAP_DEVICE_HOST, 0, RECAP_DEVICE_HOST, 0, 1, 7, -2, 1 << 20};
    recap_generator_h g = (recap_generator_h)0x1;
    int slot = free_gen_slot(), device = devices[u8(in) % 8];

    if (slot < 0)
        return;
    if (CALL(recap_generator_create(device, &g)) != RECAP_OK) {
        REQUIRE(g == (recap_generator_h)0x1);
        return;
    }
    w.gen[slot].h = g;
    w.gen[slot].device = device;
    w.gen[slot].users = 0;
}

void op_gen_destroy(input_t *in)
{
    int s = pick(in, NGEN);

    if (w.gen[s].h == NULL || w.gen[s].users > 0)
        return;
    REQUIRE(CALL(recap_generator_destroy(w.gen[s].h)) == RECAP_OK);
    w.gen[s].h = NULL;
}

void op_gen_state(input_t *in)
{
    recap_generator_h g = w.gen[pick(in, NGEN)].h;
    uint8_t st[RECAP_STATE_BYTES], before[RECAP_STATE_BYTES], after[RECAP_STATE_BYTES];
    uint64_t seed = 0, offset = 0;
    size_t i;

    if (g == NULL)
        return;
    switch (u8(in) % 4) {
    case 0:
        CALL(recap_generator_manual_seed(g, num(in)));
        break;
    case 1:
        for (i = 0; i < sizeof(st); i++)
            st[i] = u8(in);
        REQUIRE(CALL(recap_generator_get_state(g, before)) == RECAP_OK);
        if (CALL(recap_generator_set_state(g, st)) != RECAP_OK) {
            REQUIRE(CALL(recap_generator_get_state(g, after)) == RECAP_OK);
            REQUIRE(memcmp(before, after, sizeof(before)) == 0);
        }
        break;
    default:
        REQUIRE(CALL(recap_generator_seed(g, &seed)) == RECAP_OK);
        REQUIRE(CALL(recap_generator_offset(g, &offset)) == RECAP_OK);
        REQUIRE(offset % 4 == 0);
        break;
    }
}

static recap_stream_t stream_for(input_t *in)
{
    uint8_t k = u8(in) % 4;

    return k < NSTREAM ? w.stream[k] : NULL;
}

void op_reserve(input_t *in)
{
    recap_generator_h g = w.gen[pick(in, NGEN)].h;
    recap_philox_args_t args, sentinel;
    recap_stream_t s = stream_for(in);
    uint64_t n = num(in);

    if (g == NULL)
        return;
    memset(&sentinel, 0xA5, sizeof(sentinel));
    args = sentinel;
    if (CALL(recap_generator_reserve(g, s, n, &args)) != RECAP_OK)
        REQUIRE(memcmp(&args, &sentinel, sizeof(args)) == 0);
}

void op_fill(input_t *in)
{
    int slot = pick(in, NGEN), kind = u8(in) % 3, wrong = u8(in) % 8 == 0;
    recap_generator_h g = w.gen[slot].h;
    recap_stream_t s = stream_for(in);
    size_t n = (size_t)(num(in) % (DBUF_WORDS + 1));
    void *buf;

    if (g == NULL)
        return;
    if (w.gen[slot].device == RECAP_DEVICE_HOST) {
        /* A host generator fills host memory; sometimes it is handed a stream (refused). */
        buf = w.hbuf;
        if (n > HBUF_WORDS)
            n = HBUF_WORDS;
    } else {
        /* A device generator fills device memory; sometimes host memory (refused). */
        buf = wrong ? (void *)w.hbuf : w.dbuf[u8(in) % 2];
        if (wrong && n > HBUF_WORDS)
            n = HBUF_WORDS;
        if (buf == NULL)
            return;
    }
    if (kind == 2)
        n /= 2; /* doubles: two words each */
    switch (kind) {
    case 0: CALL(recap_generator_fill_u32(g, s, buf, n)); break;
    case 1: CALL(recap_generator_fill_uniform(g, s, buf, n)); break;
    default: CALL(recap_generator_fill_uniform_double(g, s, buf, n)); break;
    }
}
