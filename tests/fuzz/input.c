/* SPDX-License-Identifier: Apache-2.0 */
/* Reading the input, checking each call, and the objects the input created. */
#include "tests/fuzz/fuzz.h"

world_t w;

uint8_t u8(input_t *in)
{
    uint8_t v = 0;

    if (in->n > 0) {
        v = *in->p++;
        in->n--;
    }
    return v;
}

static uint64_t uN(input_t *in, int bytes)
{
    uint64_t v = 0;
    int i;

    for (i = 0; i < bytes; i++)
        v |= (uint64_t)u8(in) << (8 * i);
    return v;
}

/* Small numbers mostly, sometimes any 64-bit value. */
uint64_t num(input_t *in)
{
    uint8_t k = u8(in);

    switch (k & 3) {
    case 0: return k >> 2;
    case 1: return uN(in, 2);
    case 2: return uN(in, 4);
    default: return uN(in, 8);
    }
}

/* A name of any bytes (NUL-terminated at a length the input picks; sometimes longer than
 * RECAP_NAME_MAX), or one of the names the tracker uses. */
const char *name(input_t *in, char *buf, size_t cap)
{
    static const char *const known[] = {RECAP_RNG_DEFAULT, RECAP_RNG_MODEL_PARALLEL,
                                        RECAP_RNG_EXPERT_PARALLEL, RECAP_RNG_DATA_PARALLEL,
                                        RECAP_RNG_GTP_REMAT, "a", "b", ""};
    uint8_t k = u8(in);
    size_t len, i;

    if (k < 200)
        return known[k % 8];
    len = k == 255 ? 130 + u8(in) % 20 : (size_t)(k - 200);
    if (len >= cap)
        len = cap - 1;
    for (i = 0; i < len; i++)
        buf[i] = (char)u8(in);
    buf[len] = '\0';
    return buf;
}

static int known_status(recap_status_t st)
{
    return st <= RECAP_OK && st >= RECAP_ERR_BUSY;
}

/* Clears the thread's message, so a failure must write its own. */
void clear_error(void)
{
    recap__fail(RECAP_OK, "%s", "");
}

recap_status_t checked(recap_status_t st, const char *what)
{
    static int trace = -1; /* RECAP_FUZZ_TRACE=1: every call and its status, to read an input */

    if (trace < 0)
        trace = getenv("RECAP_FUZZ_TRACE") != NULL;
    if (trace)
        fprintf(stderr, "%d %s\n", (int)st, what);
    if (!known_status(st)) {
        fprintf(stderr, "%s returned unknown status %d\n", what, (int)st);
        abort();
    }
    if (st != RECAP_OK && recap_last_error()[0] == '\0') {
        fprintf(stderr, "%s failed with %d (%s) and left no message\n", what, (int)st,
                recap_strerror(st));
        abort();
    }
    return st;
}

int pick(input_t *in, int n)
{
    return u8(in) % n;
}

recap_generator_h gen_of(int slot)
{
    return slot >= 0 ? w.gen[slot].h : NULL;
}

int free_gen_slot(void)
{
    int i;

    for (i = 0; i < NGEN; i++)
        if (w.gen[i].h == NULL)
            return i;
    return -1;
}
