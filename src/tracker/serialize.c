/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshot blobs for training checkpoints. Format 1, every integer little-endian:
 *
 *   0   "RCAP"
 *   4   u32 format version (1)
 *   8   u32 length of the whole blob, checksum included
 *   12  u32 flags: bit 0 host generator state present, bit 1 tracker initialized
 *   16  u32 number of named states
 *   20  u32 zero
 *   24  host generator seed, offset (u64 each; zero when absent)
 *   40  tracker generator seed, offset
 *   56  per named state, in insertion order: u32 name length (1..127), the name (no NUL),
 *       u64 seed, u64 offset
 *   end FNV-1a-64 of every byte before it
 *
 * Every format version keeps the frame: the magic, the version at 4, the length at 8 and the
 * FNV-1a-64 at the end. A reader checks the frame's integrity before the version, so damage to
 * the version field reads as RECAP_ERR_CORRUPT, and RECAP_ERR_VERSION means an intact blob of
 * another version. A blob is validated whole before anything is written, so a damaged
 * checkpoint never leaves a half-restored snapshot.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/handle.h"
#include "tracker/tracker.h"

#define MAGIC "RCAP"
#define FORMAT_VERSION 1u
#define HEADER_BYTES 56u
#define ENTRY_FIXED_BYTES 20u /* name length + seed + offset */
#define SUM_BYTES 8u
/* What every format version keeps: magic, version, length and the trailing checksum. */
#define FRAME_BYTES (12u + SUM_BYTES)

static uint64_t fnv1a64(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;

    while (n--)
        h = (h ^ *p++) * 0x100000001b3ULL;
    return h;
}

static void put32(uint8_t *p, uint32_t v)
{
    int i;

    for (i = 0; i < 4; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static size_t blob_size(const struct recap_snapshot *s)
{
    size_t i, n = HEADER_BYTES + SUM_BYTES;

    for (i = 0; i < s->n; i++)
        n += ENTRY_FIXED_BYTES + s->e[i].len;
    return n;
}

static void write_blob(const struct recap_snapshot *s, uint8_t *b, size_t len)
{
    uint8_t *p = b + HEADER_BYTES;
    size_t i;

    memcpy(b, MAGIC, 4);
    put32(b + 4, FORMAT_VERSION);
    put32(b + 8, (uint32_t)len);
    put32(b + 12, s->flags);
    put32(b + 16, (uint32_t)s->n);
    put32(b + 20, 0);
    put64(b + 24, s->host_seed);
    put64(b + 32, s->host_offset);
    put64(b + 40, s->gen_seed);
    put64(b + 48, s->gen_offset);
    for (i = 0; i < s->n; i++) {
        const recap__entry_t *e = &s->e[i];
        put32(p, e->len);
        memcpy(p + 4, e->name, e->len);
        put64(p + 4 + e->len, e->seed);
        put64(p + 12 + e->len, e->offset);
        p += ENTRY_FIXED_BYTES + e->len;
    }
    put64(p, fnv1a64(b, (size_t)(p - b)));
}

recap_status_t recap_snapshot_serialize(recap_snapshot_h snap, void *buf, size_t cap,
                                        size_t *len_p)
{
    size_t need;

    RECAP_CHECK_HANDLE(snap, RECAP_MAGIC_SNAPSHOT, "snapshot");
    RECAP_CHECK_ARG(len_p != NULL, "NULL argument");
    if (!snap->valid)
        return recap__fail(RECAP_ERR_STATE, "serialize of a snapshot never taken or "
                           "deserialized");
    need = blob_size(snap);
    RECAP_CHECK_ARG(need <= UINT32_MAX, "snapshot of %zu bytes is too large", need);
    *len_p = need;
    if (buf == NULL)
        return RECAP_OK;
    RECAP_CHECK_ARG(cap >= need, "buffer of %zu bytes, the snapshot needs %zu", cap, need);
    write_blob(snap, buf, need);
    return RECAP_OK;
}

static recap_status_t corrupt(const char *what)
{
    return recap__fail(RECAP_ERR_CORRUPT, "snapshot blob: %s", what);
}

/* Magic, version, length, checksum and the fixed fields. */
static recap_status_t check_header(const uint8_t *b, size_t len, struct recap_snapshot *h)
{
    uint32_t version;

    if (len < FRAME_BYTES || memcmp(b, MAGIC, 4) != 0)
        return corrupt(len < FRAME_BYTES ? "too short for a header"
                                         : "not a recap snapshot (bad magic)");
    /* Integrity first: a damaged version field is damage, not another version. */
    if (get32(b + 8) != len)
        return corrupt("truncated (its length field disagrees with its size)");
    if (get64(b + len - SUM_BYTES) != fnv1a64(b, len - SUM_BYTES))
        return corrupt("checksum mismatch");
    version = get32(b + 4);
    if (version != FORMAT_VERSION)
        return recap__fail(RECAP_ERR_VERSION, "snapshot blob of format version %u; this "
                           "library reads version %u", (unsigned)version, FORMAT_VERSION);
    if (len < HEADER_BYTES + SUM_BYTES)
        return corrupt("truncated (shorter than a version 1 header)");
    h->flags = get32(b + 12);
    h->n = get32(b + 16);
    if ((h->flags & ~RECAP__SNAP_KNOWN_FLAGS) != 0 || get32(b + 20) != 0)
        return corrupt("unknown flags");
    h->host_seed = get64(b + 24);
    h->host_offset = get64(b + 32);
    h->gen_seed = get64(b + 40);
    h->gen_offset = get64(b + 48);
    if (!(h->flags & RECAP__SNAP_HAS_HOST) && (h->host_seed | h->host_offset) != 0)
        return corrupt("host generator state without its flag");
    if (h->host_offset % 4 != 0 || h->gen_offset % 4 != 0)
        return corrupt("generator offset not a multiple of 4");
    if (h->n > (len - HEADER_BYTES - SUM_BYTES) / (ENTRY_FIXED_BYTES + 1))
        return corrupt("more states than the blob can hold");
    return RECAP_OK;
}

static recap_status_t read_entry(const uint8_t **pp, const uint8_t *end, recap__entry_t *e)
{
    const uint8_t *p = *pp;
    uint32_t len;

    if (end - p < (ptrdiff_t)ENTRY_FIXED_BYTES)
        return corrupt("truncated state entry");
    len = get32(p);
    if (len == 0 || len > RECAP_NAME_MAX || end - p < (ptrdiff_t)(ENTRY_FIXED_BYTES + len))
        return corrupt("bad state name length");
    memset(e, 0, sizeof(*e));
    memcpy(e->name, p + 4, len);
    e->len = len;
    if (strlen(e->name) != len || strcmp(e->name, RECAP_RNG_DEFAULT) == 0)
        return corrupt("bad state name");
    e->seed = get64(p + 4 + len);
    e->offset = get64(p + 12 + len);
    if (e->offset % 4 != 0)
        return corrupt("state offset not a multiple of 4");
    *pp = p + ENTRY_FIXED_BYTES + len;
    return RECAP_OK;
}

static int by_name(const void *a, const void *b)
{
    const recap__entry_t *x = *(const recap__entry_t *const *)a, *y = *(const recap__entry_t *const *)b;

    return strcmp(x->name, y->name);
}

static recap_status_t check_unique(const recap__entry_t *e, size_t n)
{
    const recap__entry_t **v;
    recap_status_t st = RECAP_OK;
    size_t i;

    if (n < 2)
        return RECAP_OK;
    v = recap__alloc_n(n, sizeof(*v));
    if (v == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "snapshot names");
    for (i = 0; i < n; i++)
        v[i] = &e[i];
    qsort(v, n, sizeof(*v), by_name);
    for (i = 1; i < n && st == RECAP_OK; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0)
            st = corrupt("a state name appears twice");
    free(v);
    return st;
}

static recap_status_t read_entries(const uint8_t *b, size_t len, recap__entry_t *e, size_t n)
{
    const uint8_t *p = b + HEADER_BYTES, *end = b + len - SUM_BYTES;
    recap_status_t st;
    size_t i;

    for (i = 0; i < n; i++) {
        st = read_entry(&p, end, &e[i]);
        if (st != RECAP_OK)
            return st;
    }
    if (p != end)
        return corrupt("bytes after the last state");
    return check_unique(e, n);
}

recap_status_t recap_snapshot_deserialize(const void *buf, size_t len, recap_snapshot_h snap)
{
    struct recap_snapshot h = {0};
    recap_status_t st;

    RECAP_CHECK_ARG(buf != NULL && snap != NULL, "NULL argument");
    RECAP_CHECK_HANDLE(snap, RECAP_MAGIC_SNAPSHOT, "snapshot");
    st = check_header(buf, len, &h);
    if (st != RECAP_OK)
        return st;
    h.cap = h.n > RECAP__INITIAL_CAP ? h.n : RECAP__INITIAL_CAP;
    h.e = recap__alloc_n(h.cap, sizeof(*h.e));
    if (h.e == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "snapshot of %zu states", h.n);
    st = read_entries(buf, len, h.e, h.n);
    if (st != RECAP_OK) {
        free(h.e);
        return st;
    }
    free(snap->e);
    h.valid = 1;
    h.layout = 0; /* names unknown to every tracker until a restore compares them */
    h.current = -1; /* the blob keeps no forks: restored as taken outside them */
    h.magic = RECAP_MAGIC_SNAPSHOT;
    *snap = h;
    return RECAP_OK;
}
