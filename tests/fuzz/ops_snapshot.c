/* SPDX-License-Identifier: Apache-2.0 */
/* Operations on snapshots and their blobs. */
#include "tests/fuzz/fuzz.h"

static uint64_t fnv1a64(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;

    while (n--)
        h = (h ^ *p++) * 0x100000001b3ULL;
    return h;
}

/* The serialized form of snap, or NULL when it has none (never taken). */
static uint8_t *blob_of(recap_snapshot_h snap, size_t *len_p)
{
    size_t len = 0;
    uint8_t *b;

    if (CALL(recap_snapshot_serialize(snap, NULL, 0, &len)) != RECAP_OK)
        return NULL;
    b = malloc(len);
    REQUIRE(b != NULL);
    REQUIRE(CALL(recap_snapshot_serialize(snap, b, len, len_p)) == RECAP_OK && *len_p == len);
    return b;
}

/* Deserializes into snap; on failure snap must be unchanged. */
static void deserialize_checked(const uint8_t *blob, size_t len, recap_snapshot_h snap)
{
    size_t l0 = 0, l1 = 0;
    uint8_t *b0 = blob_of(snap, &l0), *b1;

    if (CALL(recap_snapshot_deserialize(blob, len, snap)) != RECAP_OK) {
        b1 = blob_of(snap, &l1);
        REQUIRE((b0 == NULL) == (b1 == NULL));
        REQUIRE(b0 == NULL || (l0 == l1 && memcmp(b0, b1, l0) == 0));
        free(b1);
    } else {
        /* A blob accepted is one serialize gives back byte for byte. */
        b1 = blob_of(snap, &l1);
        REQUIRE(b1 != NULL && l1 == len && memcmp(b1, blob, len) == 0);
        free(b1);
    }
    free(b0);
}

void op_snapshot(input_t *in)
{
    int s = pick(in, NSNAP);
    trk_slot_t *t;
    uint8_t *blob, raw[512];
    size_t len, i, cap;

    if (w.snap[s] == NULL) {
        REQUIRE(CALL(recap_snapshot_create(&w.snap[s])) == RECAP_OK);
        return;
    }
    switch (u8(in) % 7) {
    case 0:
        REQUIRE(CALL(recap_snapshot_destroy(w.snap[s])) == RECAP_OK);
        w.snap[s] = NULL;
        break;
    case 1:
        if ((t = any_tracker(in)) != NULL)
            REQUIRE(CALL(recap_snapshot_take(t->h, w.snap[s])) == RECAP_OK);
        break;
    case 2:
        if ((t = any_tracker(in)) != NULL)
            CALL(recap_snapshot_restore(t->h, w.snap[s]));
        break;
    case 3: /* serialize into a buffer of the input's size */
        cap = (size_t)(num(in) % 600);
        blob = malloc(cap + 1);
        REQUIRE(blob != NULL);
        len = 0x5a5a;
        /* With no buffer: OK and the size needed; too small: refused, the size needed. */
        if (CALL(recap_snapshot_serialize(w.snap[s], cap ? blob : NULL, cap, &len)) == RECAP_OK)
            REQUIRE(cap == 0 || len <= cap);
        else
            REQUIRE(len == 0x5a5a || len > cap);
        free(blob);
        break;
    case 4: /* a real blob with some bytes changed */
        if ((blob = blob_of(w.snap[s], &len)) != NULL) {
            uint8_t flips = u8(in) % 4;
            while (flips--)
                blob[num(in) % len] ^= (uint8_t)(1u << (u8(in) % 8));
            if (u8(in) % 4 == 0)
                len = (size_t)(num(in) % (len + 1)); /* truncated */
            deserialize_checked(blob, len, w.snap[(s + 1) % NSNAP] ? w.snap[(s + 1) % NSNAP]
                                                                     : w.snap[s]);
            free(blob);
        }
        break;
    case 5: /* fuzz bytes behind a valid header and checksum: reaches the parser's checks */
        len = 56 + (size_t)(u8(in) % 200);
        memset(raw, 0, sizeof(raw));
        memcpy(raw, "RCAP", 4);
        raw[4] = u8(in) % 8 == 0 ? u8(in) : 1;
        for (i = 12; i < len; i++)
            raw[i] = u8(in);
        raw[16] = raw[16] % 8; /* a plausible count, mostly */
        raw[17] = raw[18] = raw[19] = 0;
        raw[8] = (uint8_t)(len + 8);
        raw[9] = (uint8_t)((len + 8) >> 8);
        if (u8(in) % 8 == 0)
            raw[8] ^= u8(in);
        {
            uint64_t h = fnv1a64(raw, len);
            for (i = 0; i < 8; i++)
                raw[len + i] = (uint8_t)(h >> (8 * i));
        }
        deserialize_checked(raw, len + 8, w.snap[s]);
        break;
    default: /* raw fuzz bytes */
        len = (size_t)(u8(in) % 200);
        if (len > in->n)
            len = in->n;
        deserialize_checked(in->p, len, w.snap[s]);
        in->p += len;
        in->n -= len;
        break;
    }
}
