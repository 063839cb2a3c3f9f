/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for recap's public ABI: each input is decoded into a sequence of operations on
 * generators (host and device 0 of the CUDA test double), trackers (value, graph-safe, inference,
 * the default one), states objects, snapshots and their blobs (serialized ones and fuzz bytes, with
 * and without a valid checksum), reservations and fills, per-rank seeding, captures, graphs and
 * executables, and signatures; with names and seeds of any bytes, and wrong kinds, orders and
 * tokens (a host generator where a device one belongs, an unfork of a token that is not the
 * innermost, a capture ended that never began). Handles are only ever ones this harness created
 * and has not destroyed (anything else is undefined by contract).
 *
 * What must hold: no crash, leak or undefined behaviour (AddressSanitizer, LeakSanitizer,
 * UndefinedBehaviorSanitizer), every failing call leaves a message in recap_last_error(),
 * statuses are known ones, failed calls leave their outputs and the objects they were given as
 * they were, and each input leaves recap as it found it (no capture records left).
 *
 * Built by `make tests/fuzz/fuzz_api` (clang, -fsanitize=fuzzer): scripts/fuzz runs it,
 * scripts/ci-sanitize runs it for a minute in CI.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" /* recap__fail, to clear the calling thread's message between calls */
#include "recap.h"

#define NGEN 6
#define NTRK 4 /* slot NTRK - 1 holds the default tracker when the input initializes it */
#define DEFAULT_SLOT (NTRK - 1)
#define NSTATES 3
#define NSNAP 3
#define NSTREAM 2
#define NGRAPH 3
#define NEXEC 3
#define NSIG 2
#define NFORKS 16
#define DBUF_WORDS 8192 /* device buffers for fills (u32 words) */
#define HBUF_WORDS 4096
#define MAX_OPS 400

/* ---------------------------------------------------------------- reading the input */

typedef struct {
    const uint8_t *p;
    size_t n;
} input_t;

static uint8_t u8(input_t *in)
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
static uint64_t num(input_t *in)
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
static const char *name(input_t *in, char *buf, size_t cap)
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

/* ---------------------------------------------------------------- checking each call */

static int known_status(recap_status_t st)
{
    return st <= RECAP_OK && st >= RECAP_ERR_BUSY;
}

/* Clears the thread's message, so a failure must write its own. */
static void clear_error(void)
{
    recap__fail(RECAP_OK, "%s", "");
}

static recap_status_t checked(recap_status_t st, const char *what)
{
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

/* Every recap call of the harness goes through CALL: clear, call, check. */
#define CALL(expr) (clear_error(), checked((expr), #expr))

#define REQUIRE(cond)                                                              \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "%s:%d: %s (%s)\n", __FILE__, __LINE__, #cond,         \
                    recap_last_error());                                           \
            abort();                                                               \
        }                                                                          \
    } while (0)

/* ---------------------------------------------------------------- what the input created */

typedef struct {
    recap_generator_h h;
    int device;
    int users; /* trackers created with it: it must outlive them */
} gen_slot_t;

typedef struct {
    recap_tracker_h h;
    int inference; /* 1, 0, or -1 when not known (a default tracker fetched) */
    int gen, host_gen; /* slots of the generators given at creation, or -1 */
    recap_fork_token_t forks[NFORKS];
    int nforks;
} trk_slot_t;

static struct {
    gen_slot_t gen[NGEN];
    trk_slot_t trk[NTRK];
    recap_states_h states[NSTATES];
    recap_snapshot_h snap[NSNAP];
    recap_stream_t stream[NSTREAM];
    int capturing[NSTREAM];
    recap_graph_t graph[NGRAPH];
    recap_graph_exec_t exec[NEXEC];
    recap_signature_h sig[NSIG];
    void *dbuf[2];
    uint32_t hbuf[HBUF_WORDS];
    int have_device;
} w;

static int pick(input_t *in, int n)
{
    return u8(in) % n;
}

static recap_generator_h gen_of(int slot)
{
    return slot >= 0 ? w.gen[slot].h : NULL;
}

static int free_gen_slot(void)
{
    int i;

    for (i = 0; i < NGEN; i++)
        if (w.gen[i].h == NULL)
            return i;
    return -1;
}

/* ---------------------------------------------------------------- operations */

static void op_gen_create(input_t *in)
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

static void op_gen_destroy(input_t *in)
{
    int s = pick(in, NGEN);

    if (w.gen[s].h == NULL || w.gen[s].users > 0)
        return;
    REQUIRE(CALL(recap_generator_destroy(w.gen[s].h)) == RECAP_OK);
    w.gen[s].h = NULL;
}

static void op_gen_state(input_t *in)
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

static void op_reserve(input_t *in)
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

static void op_fill(input_t *in)
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

static void op_tracker_create(input_t *in)
{
    static const uint32_t flags[] = {0, RECAP_TRACKER_GRAPH_SAFE, RECAP_TRACKER_INFERENCE,
                                     RECAP_TRACKER_GRAPH_SAFE | RECAP_TRACKER_INFERENCE, 0x80};
    static const int devices[] = {RECAP_DEVICE_HOST, 0, 3, -9};
    recap_tracker_params_t p;
    recap_tracker_h t = (recap_tracker_h)0x1;
    int slot = pick(in, DEFAULT_SLOT), g = -1, hg = -1;

    if (w.trk[slot].h != NULL)
        return;
    memset(&p, 0, sizeof(p));
    p.flags = flags[u8(in) % 5];
    p.device = devices[u8(in) % 4];
    if (u8(in) % 2) {
        g = pick(in, NGEN);
        if (w.gen[g].h == NULL)
            g = -1;
    }
    if (u8(in) % 3 == 0) {
        hg = pick(in, NGEN);
        if (w.gen[hg].h == NULL)
            hg = -1;
    }
    p.generator = gen_of(g);
    p.host_generator = gen_of(hg);
    if (CALL(recap_tracker_create(&p, &t)) != RECAP_OK) {
        REQUIRE(t == (recap_tracker_h)0x1);
        return;
    }
    w.trk[slot].h = t;
    w.trk[slot].inference = (p.flags & RECAP_TRACKER_INFERENCE) != 0;
    w.trk[slot].gen = g;
    w.trk[slot].host_gen = hg;
    w.trk[slot].nforks = 0;
    if (g >= 0)
        w.gen[g].users++;
    if (hg >= 0)
        w.gen[hg].users++;
}

static void trk_forget(int slot)
{
    if (w.trk[slot].gen >= 0)
        w.gen[w.trk[slot].gen].users--;
    if (w.trk[slot].host_gen >= 0)
        w.gen[w.trk[slot].host_gen].users--;
    memset(&w.trk[slot], 0, sizeof(w.trk[slot]));
}

static void op_tracker_destroy(input_t *in)
{
    int slot = pick(in, DEFAULT_SLOT);
    recap_status_t st;

    if (w.trk[slot].h == NULL)
        return;
    st = CALL(recap_tracker_destroy(w.trk[slot].h));
    /* Refused exactly while forks are open. */
    REQUIRE((st == RECAP_OK) == (w.trk[slot].nforks == 0));
    if (st == RECAP_OK)
        trk_forget(slot);
}

/* The default tracker: initialized with params of no generator of ours (it outlives the input),
 * replaced with force_reset, or fetched. */
static void op_default_tracker(input_t *in)
{
    static const uint32_t flags[] = {0, RECAP_TRACKER_GRAPH_SAFE, RECAP_TRACKER_INFERENCE};
    recap_tracker_params_t p;
    recap_tracker_h t = (recap_tracker_h)0x1;
    trk_slot_t *d = &w.trk[DEFAULT_SLOT];
    int force = u8(in) % 4 == 0;

    memset(&p, 0, sizeof(p));
    p.flags = flags[u8(in) % 3];
    p.device = u8(in) % 2 ? RECAP_DEVICE_HOST : 0;
    if (u8(in) % 2) {
        if (CALL(recap_default_tracker_get(&t)) != RECAP_OK)
            return;
    } else if (CALL(recap_default_tracker_initialize(&p, force, &t)) != RECAP_OK) {
        REQUIRE(t == (recap_tracker_h)0x1);
        return;
    }
    if (d->h != t) { /* a new one: the old handle (if any) was destroyed with no fork open */
        REQUIRE(d->h == NULL || d->nforks == 0);
        memset(d, 0, sizeof(*d));
        d->h = t;
        d->inference = -1;
        d->gen = d->host_gen = -1;
    }
}

static trk_slot_t *any_tracker(input_t *in)
{
    trk_slot_t *t = &w.trk[pick(in, NTRK)];

    return t->h != NULL ? t : NULL;
}

static void op_tracker_query(input_t *in)
{
    trk_slot_t *t = any_tracker(in);
    recap_generator_h g;
    const char *cur;
    int v;

    if (t == NULL)
        return;
    switch (u8(in) % 4) {
    case 0:
        REQUIRE(CALL(recap_tracker_is_initialized(t->h, &v)) == RECAP_OK && (v == 0 || v == 1));
        break;
    case 1:
        REQUIRE(CALL(recap_tracker_is_graph_safe(t->h, &v)) == RECAP_OK && (v == 0 || v == 1));
        break;
    case 2:
        REQUIRE(CALL(recap_tracker_current_name(t->h, &cur)) == RECAP_OK && cur != NULL);
        REQUIRE(strlen(cur) <= RECAP_NAME_MAX);
        break;
    default:
        REQUIRE(CALL(recap_tracker_generator(t->h, &g)) == RECAP_OK && g != NULL);
        break;
    }
}

static size_t states_count_of(recap_tracker_h t)
{
    recap_states_h s;
    size_t n = 0;

    REQUIRE(CALL(recap_tracker_get_states(t, &s)) == RECAP_OK);
    REQUIRE(CALL(recap_states_count(s, &n)) == RECAP_OK);
    REQUIRE(CALL(recap_states_free(s)) == RECAP_OK);
    return n;
}

static void op_tracker_add(input_t *in)
{
    trk_slot_t *t = any_tracker(in);
    char buf[160];
    const char *nm = name(in, buf, sizeof(buf));
    uint64_t seed = num(in);
    size_t before;

    if (t == NULL)
        return;
    before = states_count_of(t->h);
    if (CALL(recap_tracker_add(t->h, nm, seed)) != RECAP_OK)
        REQUIRE(states_count_of(t->h) == before); /* a failed add records nothing */
}

static void op_tracker_fork(input_t *in)
{
    trk_slot_t *t = any_tracker(in);
    recap_fork_token_t tok = 0x5a5a;
    char buf[160];
    const char *nm = name(in, buf, sizeof(buf));

    if (t == NULL || t->nforks == NFORKS)
        return;
    if (CALL(recap_tracker_fork(t->h, nm, &tok)) == RECAP_OK)
        t->forks[t->nforks++] = tok;
    else
        REQUIRE(tok == 0x5a5a);
}

static void op_tracker_unfork(input_t *in)
{
    trk_slot_t *t = any_tracker(in);
    recap_fork_token_t tok;
    recap_status_t st;
    uint8_t k = u8(in);

    if (t == NULL)
        return;
    /* The innermost token, an outer one (refused), or any number (refused unless it is the
     * innermost). */
    if (t->nforks > 0 && k < 160)
        tok = t->forks[t->nforks - 1];
    else if (t->nforks > 0 && k < 220)
        tok = t->forks[k % t->nforks];
    else
        tok = num(in);
    st = CALL(recap_tracker_unfork(t->h, tok));
    REQUIRE((st == RECAP_OK) == (t->nforks > 0 && tok == t->forks[t->nforks - 1]));
    if (st == RECAP_OK)
        t->nforks--;
}

static void op_tracker_reset_or_seed(input_t *in)
{
    trk_slot_t *t = any_tracker(in);
    recap_parallel_ranks_t r;
    int64_t seed;
    int *f = (int *)&r;
    size_t i;

    if (t == NULL)
        return;
    if (u8(in) % 3 == 0) {
        REQUIRE((CALL(recap_tracker_reset(t->h)) == RECAP_OK) == (t->nforks == 0));
        return;
    }
    seed = (int64_t)(num(in) - (u8(in) % 8 == 0 ? UINT64_C(1) << 20 : 0)); /* <= 0 too */
    for (i = 0; i < sizeof(r) / sizeof(int); i++) {
        uint8_t k = u8(in);
        f[i] = k < 240 ? k % 4 + (i % 2) : (int)(int8_t)u8(in); /* sizes odd slots: mostly >= 1 */
    }
    CALL(recap_tracker_seed_parallel(t->h, seed, u8(in) % 16 ? &r : NULL));
}

static void op_states(input_t *in)
{
    int s = pick(in, NSTATES);
    trk_slot_t *t;
    recap_states_h copy;
    uint8_t st[RECAP_STATE_BYTES];
    const char *nm;
    char buf[160];
    size_t n;

    switch (u8(in) % 6) {
    case 0:
        t = any_tracker(in);
        if (t == NULL || w.states[s] != NULL)
            return;
        REQUIRE(CALL(recap_tracker_get_states(t->h, &w.states[s])) == RECAP_OK);
        break;
    case 1:
        t = any_tracker(in);
        if (t == NULL || w.states[s] == NULL)
            return;
        /* Refused while forks are open (an inference tracker ignores it). */
        if (CALL(recap_tracker_set_states(t->h, w.states[s])) == RECAP_OK)
            REQUIRE(t->nforks == 0 || t->inference != 0);
        else
            REQUIRE(t->nforks > 0);
        break;
    case 2:
        if (w.states[s] == NULL)
            return;
        REQUIRE(CALL(recap_states_free(w.states[s])) == RECAP_OK);
        w.states[s] = NULL;
        break;
    case 3:
        if (w.states[s] == NULL)
            return;
        REQUIRE(CALL(recap_states_copy(w.states[s], &copy)) == RECAP_OK);
        REQUIRE(CALL(recap_states_free(copy)) == RECAP_OK);
        break;
    case 4:
        if (w.states[s] == NULL)
            return;
        REQUIRE(CALL(recap_states_count(w.states[s], &n)) == RECAP_OK);
        nm = (const char *)0x1;
        if (CALL(recap_states_name(w.states[s], num(in), &nm)) != RECAP_OK)
            REQUIRE(nm == (const char *)0x1);
        else
            REQUIRE(nm != NULL && strlen(nm) <= RECAP_NAME_MAX);
        break;
    default:
        if (w.states[s] == NULL)
            return;
        if (CALL(recap_states_lookup(w.states[s], name(in, buf, sizeof(buf)), st)) == RECAP_OK)
            REQUIRE((st[8] & 3) == 0); /* stored offsets are multiples of 4 */
        break;
    }
}

static void op_convert(input_t *in)
{
    trk_slot_t *t = any_tracker(in);
    uint8_t st[RECAP_STATE_BYTES], back[RECAP_STATE_BYTES];
    recap_generator_h g = (recap_generator_h)0x1;
    int slot = free_gen_slot(), device;
    size_t i;

    if (t == NULL || slot < 0)
        return;
    for (i = 0; i < sizeof(st); i++)
        st[i] = u8(in);
    if (CALL(recap_state_to_graph_safe(t->h, st, &g)) != RECAP_OK) {
        REQUIRE(g == (recap_generator_h)0x1);
        return;
    }
    REQUIRE(CALL(recap_generator_device(g, &device)) == RECAP_OK);
    if (CALL(recap_state_from_graph_safe(g, back)) == RECAP_OK)
        REQUIRE(memcmp(st, back, sizeof(st)) == 0);
    w.gen[slot].h = g;
    w.gen[slot].device = device;
    w.gen[slot].users = 0;
}

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

static void op_snapshot(input_t *in)
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

static int stream_slot(input_t *in)
{
    int s = pick(in, NSTREAM);

    return w.stream[s] != NULL ? s : -1;
}

static int free_graph_slot(void)
{
    int i;

    for (i = 0; i < NGRAPH; i++)
        if (w.graph[i] == NULL)
            return i;
    return -1;
}

static void op_capture(input_t *in)
{
    int s = stream_slot(in), g;
    recap_graph_t graph = (recap_graph_t)0x1;
    recap_status_t st;

    if (s < 0)
        return;
    switch (u8(in) % 4) {
    case 0: /* begin, in any mode value (valid ones mostly) */
        st = CALL(recap_stream_begin_capture(w.stream[s], (recap_capture_mode_t)(u8(in) % 4)));
        if (st == RECAP_OK)
            w.capturing[s] = 1;
        break;
    case 1: /* end, also of a stream that is not capturing */
        g = free_graph_slot();
        if (g < 0)
            return;
        st = CALL(recap_stream_end_capture(w.stream[s], &graph));
        if (st == RECAP_OK)
            w.graph[g] = graph;
        else
            REQUIRE(graph == (recap_graph_t)0x1);
        if (w.capturing[s] || st == RECAP_OK)
            w.capturing[s] = 0; /* ended either way */
        break;
    case 2:
        CALL(recap_capture_prime(w.stream[s]));
        break;
    default: /* events out of order */
        CALL(recap_capture_began(w.stream[s]));
        CALL(recap_capture_will_end(w.stream[s]));
        break;
    }
}

static void op_graph(input_t *in)
{
    int gi = pick(in, NGRAPH), ei = pick(in, NEXEC), s;
    recap_graph_exec_t e = (recap_graph_exec_t)0x1;
    recap_graph_t c = (recap_graph_t)0x1;

    switch (u8(in) % 5) {
    case 0:
        if (w.graph[gi] == NULL || w.exec[ei] != NULL)
            return;
        if (CALL(recap_graph_instantiate(w.graph[gi], &e)) == RECAP_OK)
            w.exec[ei] = e;
        break;
    case 1:
        if (w.exec[ei] == NULL || (s = stream_slot(in)) < 0)
            return;
        CALL(recap_graph_launch(w.exec[ei], w.stream[s]));
        break;
    case 2: {
        int free_slot = free_graph_slot();

        if (w.graph[gi] == NULL || free_slot < 0)
            return;
        if (CALL(recap_graph_clone(w.graph[gi], &c)) == RECAP_OK)
            w.graph[free_slot] = c;
        break;
    }
    case 3: /* the driver may refuse (inside a global capture): the graph stays */
        if (w.graph[gi] != NULL && CALL(recap_graph_destroy(w.graph[gi])) == RECAP_OK)
            w.graph[gi] = NULL;
        break;
    default:
        if (w.exec[ei] != NULL && CALL(recap_graph_exec_destroy(w.exec[ei])) == RECAP_OK)
            w.exec[ei] = NULL;
        break;
    }
}

static void op_signature(input_t *in)
{
    recap_type_t types[RECAP_MAX_ARGS + 4];
    recap_signature_h sig = (recap_signature_h)0x1;
    int s = pick(in, NSIG);
    size_t n = u8(in) % (RECAP_MAX_ARGS + 3), i;

    if (w.sig[s] != NULL) {
        REQUIRE(CALL(recap_signature_destroy(w.sig[s])) == RECAP_OK);
        w.sig[s] = NULL;
        return;
    }
    for (i = 0; i < n; i++)
        types[i] = (recap_type_t)(u8(in) % 12);
    if (CALL(recap_signature_create((recap_type_t)(u8(in) % 12), n ? types : NULL, n, &sig)) ==
        RECAP_OK)
        w.sig[s] = sig;
    else
        REQUIRE(sig == (recap_signature_h)0x1);
}

static void op_misc(input_t *in)
{
    recap_capture_stats_t cs;
    recap_hooks_t hooks;
    char devname[64];
    size_t mem;
    void *p;
    int v, a, b;

    switch (u8(in) % 7) {
    case 0:
        REQUIRE(recap_strerror((recap_status_t)(int)num(in)) != NULL);
        break;
    case 1:
        REQUIRE(CALL(recap_capture_stats(&cs)) == RECAP_OK);
        break;
    case 2:
        REQUIRE(CALL(recap_hooks_active(&hooks)) == RECAP_OK && hooks == RECAP_HOOKS_NONE);
        break;
    case 3:
        CALL(recap_device_info((int)(num(in) % 5) - 1, u8(in) % 2 ? devname : NULL,
                               1 + u8(in) % sizeof(devname), &a, &b, &mem));
        break;
    case 4:
        CALL(recap_driver_version(&v));
        break;
    case 5: /* device memory that no fill uses */
        if (CALL(recap_device_alloc((int)(u8(in) % 3) - 1, (size_t)(num(in) % 100000), &p)) ==
            RECAP_OK)
            REQUIRE(CALL(recap_device_free(0, p)) == RECAP_OK);
        break;
    default:
        if (w.dbuf[0] != NULL) {
            size_t n = (size_t)(num(in) % (HBUF_WORDS * 4));
            if (u8(in) % 2)
                CALL(recap_memcpy_to_host(0, w.hbuf, w.dbuf[0], n));
            else
                CALL(recap_memcpy_to_device(0, w.dbuf[0], w.hbuf, n));
        }
        break;
    }
}

/* ---------------------------------------------------------------- one input */

static void setup(void)
{
    int i, n = 0;

    memset(&w, 0, sizeof(w));
    w.have_device = recap_device_count(&n) == RECAP_OK && n > 0;
    if (w.have_device) {
        for (i = 0; i < NSTREAM; i++)
            REQUIRE(CALL(recap_stream_create(0, &w.stream[i])) == RECAP_OK);
        for (i = 0; i < 2; i++)
            REQUIRE(CALL(recap_device_alloc(0, DBUF_WORDS * 4, &w.dbuf[i])) == RECAP_OK);
    }
}

/* Undoes everything in an order the contract allows: captures ended, forks closed innermost
 * first, then executables, graphs, trackers, generators. */
static void teardown(void)
{
    const recap_tracker_params_t canonical = {.device = RECAP_DEVICE_HOST};
    recap_graph_t graph;
    recap_tracker_h t;
    int i;

    for (i = 0; i < NSTREAM; i++)
        if (w.stream[i] != NULL && w.capturing[i]) {
            if (CALL(recap_stream_end_capture(w.stream[i], &graph)) == RECAP_OK)
                REQUIRE(CALL(recap_graph_destroy(graph)) == RECAP_OK);
        }
    for (i = 0; i < NTRK; i++)
        while (w.trk[i].h != NULL && w.trk[i].nforks > 0)
            REQUIRE(CALL(recap_tracker_unfork(w.trk[i].h, w.trk[i].forks[--w.trk[i].nforks])) ==
                    RECAP_OK);
    for (i = 0; i < NEXEC; i++)
        if (w.exec[i] != NULL)
            REQUIRE(CALL(recap_graph_exec_destroy(w.exec[i])) == RECAP_OK);
    for (i = 0; i < NGRAPH; i++)
        if (w.graph[i] != NULL)
            REQUIRE(CALL(recap_graph_destroy(w.graph[i])) == RECAP_OK);
    for (i = 0; i < DEFAULT_SLOT; i++) /* the default tracker lives on */
        if (w.trk[i].h != NULL)
            REQUIRE(CALL(recap_tracker_destroy(w.trk[i].h)) == RECAP_OK);
    for (i = 0; i < NGEN; i++)
        if (w.gen[i].h != NULL)
            REQUIRE(CALL(recap_generator_destroy(w.gen[i].h)) == RECAP_OK);
    for (i = 0; i < NSTATES; i++)
        if (w.states[i] != NULL)
            REQUIRE(CALL(recap_states_free(w.states[i])) == RECAP_OK);
    for (i = 0; i < NSNAP; i++)
        if (w.snap[i] != NULL)
            REQUIRE(CALL(recap_snapshot_destroy(w.snap[i])) == RECAP_OK);
    for (i = 0; i < NSIG; i++)
        if (w.sig[i] != NULL)
            REQUIRE(CALL(recap_signature_destroy(w.sig[i])) == RECAP_OK);
    for (i = 0; i < NSTREAM; i++)
        if (w.stream[i] != NULL) {
            REQUIRE(CALL(recap_stream_synchronize(w.stream[i])) == RECAP_OK);
            REQUIRE(CALL(recap_stream_destroy(w.stream[i])) == RECAP_OK);
        }
    for (i = 0; i < 2; i++)
        if (w.dbuf[i] != NULL)
            REQUIRE(CALL(recap_device_free(0, w.dbuf[i])) == RECAP_OK);
    /* The next input finds the same default tracker: a fresh one of fixed options, so each
     * input replays alone as it ran here. */
    REQUIRE(CALL(recap_default_tracker_initialize(&canonical, 1, &t)) == RECAP_OK);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
#ifdef RECAP_FUZZ_DOUBLE
    setenv("RECAP_CUDA_DRIVER", RECAP_FUZZ_DOUBLE, 0); /* the test double, unless told */
#endif
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static void (*const ops[])(input_t *) = {
        op_gen_create,      op_gen_destroy,    op_gen_state,       op_reserve,
        op_fill,            op_tracker_create, op_tracker_destroy, op_default_tracker,
        op_tracker_query,   op_tracker_add,    op_tracker_fork,    op_tracker_unfork,
        op_tracker_reset_or_seed, op_states,   op_convert,         op_snapshot,
        op_capture,         op_graph,          op_signature,       op_misc,
    };
    input_t in = {data, size};
    recap_capture_stats_t before, after;
    int n = 0;

    REQUIRE(CALL(recap_capture_stats(&before)) == RECAP_OK);
    setup();
    while (in.n > 0 && n++ < MAX_OPS)
        ops[u8(&in) % (sizeof(ops) / sizeof(ops[0]))](&in);
    teardown();
    REQUIRE(CALL(recap_capture_stats(&after)) == RECAP_OK);
    REQUIRE(after.live_records == before.live_records);
    return 0;
}
