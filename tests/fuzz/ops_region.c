/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Operations on recompute regions, managers and checkpoints over the plain engine (host memory,
 * and device 0 of the test double for the NCCL wrapper, ops_nccl.c), and the plain engine's own
 * calls. The recorded function (fz_fn) draws from the tracker it is given and logs, per run, a
 * hash of its input, of the words it drew and of its output: a recompute that ran with the first
 * run's input must have drawn and written exactly what the first run did (bit for bit), and the
 * rebuilt output buffer must hold what the recompute wrote. Inside the function it also tries the
 * lifecycle calls on its own region, which must be refused with RECAP_ERR_STATE.
 */
#include "tests/fuzz/fuzz.h"

region_world_t rw;

/* ---------------------------------------------------------------- the recorded function */

typedef struct {
    int ran;            /* runs logged, per pass */
    uint64_t in, draw, out;
    int forked;         /* the fork inside succeeded */
    int refused;        /* a draw was refused (RECAP_ERR_STATE) */
} run_log_t;

static run_log_t logs[NLOG][2];
static int cur_pass; /* which pass the harness expects the function to run in */

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
}

static uint64_t hash_words(const uint32_t *p, uint64_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;

    while (n--)
        h = mix(h, *p++);
    return h;
}

/* Draws n words through recap_generator_reserve from the tracker's current generator (a host or
 * device generator, by value outside a capture): the words are Philox's for the (seed, offset)
 * reserve reports, so equal reservations draw equal words. */
static uint64_t draw_into(recap_tracker_h t, uint32_t *y, uint64_t n, uint64_t h, int *refused)
{
    recap_philox_args_t a = {0};
    recap_philox_stream_t ps;
    recap_generator_h g;
    recap_status_t st;
    uint64_t i;

    if (recap_tracker_generator(t, &g) != RECAP_OK)
        return mix(h, 1);
    st = recap_generator_reserve(g, NULL, n, &a);
    if (getenv("RECAP_FUZZ_TRACE"))
        fprintf(stderr, "fz_fn pass %d: tracker %p reserve %llu from %p: %d seed %llu offset %llu%s\n",
                cur_pass, (void *)t, (unsigned long long)n, (void *)g, (int)st,
                (unsigned long long)a.seed, (unsigned long long)a.offset,
                a.captured ? " (captured)" : "");
    h = mix(h, (uint64_t)(int64_t)st);
    if (st == RECAP_ERR_STATE)
        *refused = 1;
    if (st != RECAP_OK || a.captured)
        return h;
    h = mix(mix(h, a.seed), a.offset);
    recap_philox_init(a.seed, 0, a.offset, &ps);
    for (i = 0; i < n; i++)
        y[i] ^= recap_philox_next(&ps);
    return h;
}

static uint64_t fz_fn(const uint32_t *x, uint32_t *y, uint64_t n, uint32_t id, recap_tracker_h t,
               recap_region_h self, uint32_t mode)
{
    run_log_t *lg = &logs[id % NLOG][cur_pass];
    recap_fork_token_t tok;
    uint64_t i, in = hash_words(x, n), draw = 0;
    int c = 0, forked = 0, refused = 0;

    REQUIRE(recap_is_checkpointing(&c) == RECAP_OK && c == 1);
    if (self != NULL && (mode & 2)) { /* re-entrancy: refused, nothing changed */
        REQUIRE(recap_region_destroy(self) == RECAP_ERR_STATE);
        REQUIRE(recap_region_rebuild(self) == RECAP_ERR_STATE);
        REQUIRE(recap_region_release(self, NULL) == RECAP_ERR_STATE);
        REQUIRE(recap_region_finish(self) == RECAP_ERR_STATE);
    }
    for (i = 0; i < n; i++)
        y[i] = x[i] ^ id;
    if (t != NULL) {
        draw = draw_into(t, y, n, draw, &refused);
        if ((mode & 1) && recap_tracker_fork(t, RECAP_RNG_MODEL_PARALLEL, &tok) == RECAP_OK) {
            forked = 1;
            draw = draw_into(t, y, n, draw, &refused);
            REQUIRE(recap_tracker_unfork(t, tok) == RECAP_OK);
        }
    }
    lg->ran++;
    lg->in = in;
    lg->draw = draw;
    lg->forked = forked;
    lg->refused = refused;
    lg->out = hash_words(y, n);
    return lg->out ^ draw;
}

static recap_signature_h fz_sig(void)
{
    static const recap_type_t types[] = {RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT,
                                         RECAP_TYPE_UINT64, RECAP_TYPE_UINT32,
                                         RECAP_TYPE_POINTER, RECAP_TYPE_POINTER,
                                         RECAP_TYPE_UINT32};

    if (rw.sig == NULL)
        REQUIRE(CALL(recap_signature_create(RECAP_TYPE_UINT64, types, 7, &rw.sig)) == RECAP_OK);
    return rw.sig;
}

/* The recompute of log id ran with the first run's input: it drew and wrote the same. */
static void check_recompute(int id)
{
    run_log_t *a = &logs[id][0], *b = &logs[id][1];

    REQUIRE(a->ran >= 1 && b->ran >= 1);
    if (a->in != b->in || !rw.managed[id])
        return;
    /* A draw refused while a capture holds the generator (RECAP_ERR_STATE: its value is the
     * capture's, include/recap.h, recap_generator_reserve) is an error the function saw; it
     * never draws other numbers. */
    if (a->refused || b->refused)
        return;
    REQUIRE(a->forked == b->forked);
    REQUIRE(a->draw == b->draw);
    REQUIRE(a->out == b->out);
}

static void logs_reset(int id)
{
    memset(logs[id], 0, sizeof(logs[id]));
}

void fz_set_pass(int pass)
{
    cur_pass = pass;
}

/* ---------------------------------------------------------------- engines and buffers */

recap_plain_engine_h fz_engine(int e, input_t *in)
{
    static const uint32_t flags[] = {0, RECAP_PLAIN_KEEP_FREED, RECAP_PLAIN_REUSE_FREED, 0};

    if (rw.eng[e] == NULL) {
        if (e == 1 && !w.have_device)
            return NULL;
        REQUIRE(CALL(recap_plain_engine_create(e == 0 ? RECAP_DEVICE_HOST : 0,
                                               flags[u8(in) % 4], &rw.eng[e])) == RECAP_OK);
        if (rw.plain_ops == NULL)
            REQUIRE(CALL(recap_plain_engine_ops(&rw.plain_ops)) == RECAP_OK);
    }
    return rw.eng[e];
}

static int free_buf_slot(void)
{
    int i;

    for (i = 0; i < NBUF; i++)
        if (rw.buf[i].h == NULL)
            return i;
    return -1;
}

/* Adopts a buffer the engine handed out (backward's outputs); frees it when no slot is left. */
void fz_adopt(recap_buffer_t b, int e)
{
    int s = free_buf_slot();

    if (s < 0) {
        REQUIRE(CALL(recap_plain_buffer_destroy(b)) == RECAP_OK);
        return;
    }
    rw.buf[s].h = b;
    rw.buf[s].eng = e;
    rw.buf[s].gen++;
}

/* A buffer's words (0 while it has no storage). */
static uint64_t words_of(recap_buffer_t b)
{
    size_t bytes = 0;

    REQUIRE(CALL(recap_plain_buffer_bytes(b, &bytes)) == RECAP_OK);
    return bytes / 4;
}

static uint32_t *data_of(recap_buffer_t b)
{
    void *d = (void *)0x1;

    REQUIRE(CALL(recap_plain_buffer_data(b, &d)) == RECAP_OK);
    return d;
}

/* Whether slot s holds the output of a region or of a checkpoint not yet back-propagated: its
 * handle must stay valid (release frees its storage and rebuild gives it new storage;
 * recap_checkpoint_backward takes it as the template of the recomputed one). */
static int held_output(int s)
{
    int c;

    for (c = 0; c < NREG; c++)
        if (rw.reg[c].h != NULL && rw.reg[c].yslot == s)
            return 1;

    for (c = 0; c < NCKPT; c++)
        if (rw.ck[c].h != NULL && !rw.ck[c].done && rw.ck[c].yslot == s)
            return 1;
    return 0;
}

void op_plain(input_t *in)
{
    int s = pick(in, NBUF), e = u8(in) % 4 == 0;
    recap_plain_engine_h eng = fz_engine(e, in);
    recap_plain_stats_t st;
    uint32_t *d;
    size_t n, i;
    int v;

    if (eng == NULL)
        return;
    switch (u8(in) % 6) {
    case 0: /* a buffer of words that depend on the input (written once, never again) */
        if (rw.buf[s].h != NULL)
            return;
        n = 1 + (size_t)(num(in) % MAXWORDS);
        if (CALL(recap_plain_buffer_create(eng, n * 4, u8(in) % 4 != 0, &rw.buf[s].h)) !=
            RECAP_OK)
            return;
        rw.buf[s].eng = e;
        rw.buf[s].gen++;
        d = data_of(rw.buf[s].h);
        REQUIRE(d != NULL);
        for (i = 0; i < n; i++)
            d[i] = (uint32_t)(i * 0x9e3779b9u) ^ u8(in);
        break;
    case 1: /* the engine's handle goes; saved inputs and released outputs keep the storage */
        if (rw.buf[s].h == NULL || held_output(s))
            return;
        REQUIRE(CALL(recap_plain_buffer_destroy(rw.buf[s].h)) == RECAP_OK);
        rw.buf[s].h = NULL;
        break;
    case 2:
        if (rw.buf[s].h != NULL)
            REQUIRE(CALL(recap_plain_buffer_set_needs_grad(rw.buf[s].h, u8(in) % 2)) == RECAP_OK);
        break;
    case 3: /* the gradient arrives: the triggers armed on it run (a rebuild, say) */
        if (rw.buf[s].h == NULL)
            return;
        fz_set_pass(1);
        CALL(recap_plain_buffer_fire(rw.buf[s].h));
        fz_regions_check();
        break;
    case 4:
        REQUIRE(CALL(recap_plain_engine_stats(eng, &st)) == RECAP_OK);
        REQUIRE(st.allocs >= st.frees && st.context_depth == 0 && st.context_pass == -1);
        REQUIRE(st.peak_bytes >= st.live_bytes);
        if (u8(in) % 2) {
            REQUIRE(CALL(recap_plain_engine_reset_peak(eng)) == RECAP_OK);
            REQUIRE(CALL(recap_plain_engine_stats(eng, &st)) == RECAP_OK);
            REQUIRE(st.peak_bytes == st.live_bytes);
        }
        break;
    default:
        REQUIRE(CALL(recap_plain_is_recording(&v)) == RECAP_OK && v == 1);
        break;
    }
}

/* The output buffer (if the input still holds it) has the words the recompute wrote: the
 * release freed its storage and the rebuild gave it the recompute's (no other run since). */
static void check_output(int slot, unsigned gen, uint64_t out, uint64_t n, int same)
{
    uint32_t *d;

    if (same || slot < 0 || rw.buf[slot].h == NULL || rw.buf[slot].gen != gen)
        return;
    d = data_of(rw.buf[slot].h);
    REQUIRE(d != NULL && hash_words(d, n) == out);
}

/* ---------------------------------------------------------------- regions */

/* A tracker for a region (not the default one, which force_reset may replace under it). */
static int region_tracker(input_t *in)
{
    int t = pick(in, DEFAULT_SLOT + 1);

    return t < DEFAULT_SLOT && w.trk[t].h != NULL ? t : -1;
}

static recap_tracker_h trk_h(int t)
{
    return t >= 0 ? w.trk[t].h : NULL;
}

static void use_tracker(int t, int d)
{
    if (t >= 0)
        w.trk[t].regions += d;
}

static void use_arg(int t, int d)
{
    if (t >= 0)
        w.trk[t].args += d;
}

/* Checks each region the last call rebuilt, once. */
void fz_regions_check(void)
{
    recap_region_state_t st;
    int i;

    for (i = 0; i < NREG; i++) {
        if (rw.reg[i].h == NULL || rw.reg[i].checked)
            continue;
        REQUIRE(CALL(recap_region_state(rw.reg[i].h, &st)) == RECAP_OK);
        if (st < RECAP_REGION_REBUILT)
            continue;
        rw.reg[i].checked = 1;
        if (!rw.reg[i].plain)
            check_recompute(i);
    }
}

static void region_forget(int i)
{
    use_tracker(rw.reg[i].trk, -1);
    use_arg(rw.reg[i].arg_trk, -1);
    memset(&rw.reg[i], 0, sizeof(rw.reg[i]));
    rw.managed[i] = 0;
}

static void region_create(input_t *in, int i)
{
    recap_region_params_t p;
    recap_region_h r = (recap_region_h)0x1;
    int e = u8(in) % 8 == 0 && rw.nccl_ops != NULL, m = pick(in, NMGR + 1);

    memset(&p, 0, sizeof(p));
    if (e) { /* through the NCCL wrapper (its engine is the device engine) */
        p.ops = rw.nccl_ops;
        p.host = rw.nccl_engine;
    } else {
        if (fz_engine(0, in) == NULL)
            return;
        p.ops = rw.plain_ops;
        p.host = rw.eng[0];
    }
    rw.reg[i].trk = region_tracker(in);
    p.tracker = trk_h(rw.reg[i].trk);
    p.manager = m < NMGR ? rw.mgr[m].h : NULL;
    p.flags = u8(in) % 8; /* DISTRIBUTE (checkpoints only) included */
    if (CALL(recap_region_create(&p, &r)) != RECAP_OK) {
        REQUIRE(r == (recap_region_h)0x1);
        rw.reg[i].trk = -1;
        return;
    }
    rw.reg[i].h = r;
    rw.reg[i].eng = e;
    rw.reg[i].yslot = -1;
    rw.reg[i].arg_trk = -1;
    use_tracker(rw.reg[i].trk, 1);
}

/* Arguments for fz_fn over two buffers of the pool: n words, at most what both hold. */
static int fz_args(input_t *in, recap_value_t *v, int *arg_trk, int own_trk, int id, void *self,
            int *ys_p)
{
    int xs = pick(in, NBUF), ys = u8(in) % 8 == 0 ? xs : pick(in, NBUF);
    uint64_t n;

    if (rw.buf[xs].h == NULL || rw.buf[ys].h == NULL)
        return 0;
    n = words_of(rw.buf[xs].h);
    if (words_of(rw.buf[ys].h) < n)
        n = words_of(rw.buf[ys].h);
    *arg_trk = u8(in) % 4 == 0 ? region_tracker(in) : own_trk; /* the region's, mostly */
    v[0].buf = rw.buf[xs].h;
    v[1].buf = rw.buf[ys].h;
    v[2].u64 = n;
    v[3].u32 = (uint32_t)id;
    v[4].ptr = trk_h(*arg_trk);
    v[5].ptr = self;
    v[6].u32 = u8(in) % 4;
    *ys_p = xs == ys ? -1 : ys;
    return 1;
}

static void region_record(input_t *in, int i)
{
    recap_value_t v[8];
    recap_value_t ret;
    run_log_t keep[2];
    int at, ys, plain = 0;
    recap_status_t st;

    if (!fz_args(in, v, &at, rw.reg[i].trk, i, rw.reg[i].h, &ys))
        return;
    memcpy(keep, logs[i], sizeof(keep));
    logs_reset(i);
    fz_set_pass(0);
    st = CALL(recap_region_record(rw.reg[i].h, fz_sig(), (recap_func_t)fz_fn, v,
                                  u8(in) % 16 ? 7 : (size_t)(u8(in) % 9)));
    if (st != RECAP_OK) { /* a region recorded before keeps its runs */
        memcpy(logs[i], keep, sizeof(keep));
        return;
    }
    use_arg(at, 1);
    use_arg(rw.reg[i].arg_trk, -1);
    rw.reg[i].arg_trk = at;
    REQUIRE(logs[i][0].ran == 1);
    REQUIRE(CALL(recap_region_return_value(rw.reg[i].h, &ret)) == RECAP_OK);
    REQUIRE(ret.u64 == (logs[i][0].out ^ logs[i][0].draw));
    REQUIRE(CALL(recap_region_is_plain(rw.reg[i].h, &plain)) == RECAP_OK);
    rw.reg[i].plain = plain;
    rw.reg[i].ys = ys;
    for (rw.reg[i].yslot = 0; rw.buf[rw.reg[i].yslot].h != v[1].buf; rw.reg[i].yslot++)
        ;
    rw.reg[i].ygen = ys >= 0 ? rw.buf[ys].gen : 0;
    rw.reg[i].n = v[2].u64;
    rw.reg[i].same = ys < 0;
    /* Draws are only repeatable through the region's own tracker. */
    rw.managed[i] = at >= 0 && at == rw.reg[i].trk;

}

static void region_rebuild(int i)
{
    recap_region_state_t st;

    fz_set_pass(1);
    if (CALL(recap_region_rebuild(rw.reg[i].h)) != RECAP_OK)
        return;
    REQUIRE(CALL(recap_region_state(rw.reg[i].h, &st)) == RECAP_OK && st == RECAP_REGION_REBUILT);
    rw.reg[i].checked = 1;
    if (rw.reg[i].plain)
        return;
    check_recompute(i);
    check_output(rw.reg[i].ys, rw.reg[i].ygen, logs[i][1].out, rw.reg[i].n, rw.reg[i].same);
}

void op_region(input_t *in)
{
    int i = pick(in, NREG), s;
    recap_region_state_t st;
    recap_value_t val;

    if (rw.reg[i].h == NULL) {
        region_create(in, i);
        return;
    }
    switch (u8(in) % 8) {
    case 0:
        region_record(in, i);
        break;
    case 1:
        s = pick(in, NBUF + 1);
        CALL(recap_region_release(rw.reg[i].h, s < NBUF ? rw.buf[s].h : NULL));
        break;
    case 2:
        region_rebuild(i);
        break;
    case 3:
        CALL(recap_region_finish(rw.reg[i].h));
        break;
    case 4:
        REQUIRE(CALL(recap_region_state(rw.reg[i].h, &st)) == RECAP_OK);
        REQUIRE(st >= RECAP_REGION_NEW && st <= RECAP_REGION_DONE);
        CALL(recap_region_return_value(rw.reg[i].h, &val));
        break;
    case 5:
        s = pick(in, NMGR);
        if (rw.mgr[s].h != NULL)
            CALL(recap_manager_add(rw.mgr[s].h, rw.reg[i].h));
        break;
    default:
        REQUIRE(CALL(recap_region_destroy(rw.reg[i].h)) == RECAP_OK);
        region_forget(i);
        break;
    }
}

void op_manager(input_t *in)
{
    int m = pick(in, NMGR), s;
    size_t n;

    if (rw.mgr[m].h == NULL) {
        int e = u8(in) % 8 == 0 && rw.nccl_ops != NULL;
        if (!e && fz_engine(0, in) == NULL)
            return;
        if (CALL(recap_manager_create(e ? rw.nccl_ops : rw.plain_ops,
                                      e ? rw.nccl_engine : (void *)rw.eng[0], &rw.mgr[m].h)) !=
            RECAP_OK)
            rw.mgr[m].h = NULL;
        rw.mgr[m].eng = e;
        return;
    }
    switch (u8(in) % 5) {
    case 0:
        REQUIRE(CALL(recap_manager_count(rw.mgr[m].h, &n)) == RECAP_OK && n <= NREG);
        break;
    case 1:
        s = pick(in, NBUF + 1);
        CALL(recap_manager_release(rw.mgr[m].h, s < NBUF ? rw.buf[s].h : NULL));
        break;
    case 2:
        fz_set_pass(1);
        CALL(recap_manager_rebuild(rw.mgr[m].h));
        fz_regions_check();
        break;
    case 3:
        s = pick(in, NREG);
        if (rw.reg[s].h != NULL)
            CALL(recap_manager_add(rw.mgr[m].h, rw.reg[s].h));
        break;
    default:
        REQUIRE(CALL(recap_manager_destroy(rw.mgr[m].h)) == RECAP_OK);
        rw.mgr[m].h = NULL;
        break;
    }
}

/* ---------------------------------------------------------------- checkpoints */

static void ckpt_run(input_t *in, int c)
{
    recap_region_params_t p;
    recap_checkpoint_h h = (recap_checkpoint_h)0x1;
    recap_value_t v[8], ret;
    int at, ys, e = u8(in) % 3 == 0 && rw.nccl_ops != NULL, id = NREG + c;

    memset(&p, 0, sizeof(p));
    if (e) {
        p.ops = rw.nccl_ops;
        p.host = rw.nccl_engine;
    } else {
        if (fz_engine(0, in) == NULL)
            return;
        p.ops = rw.plain_ops;
        p.host = rw.eng[0];
    }
    p.tracker = trk_h(rw.ck[c].trk = region_tracker(in));
    p.flags = u8(in) % 8;
    if (u8(in) % 16 == 0)
        p.manager = rw.mgr[0].h; /* refused */
    if (!fz_args(in, v, &at, rw.ck[c].trk, id, NULL, &ys))
        return;
    logs_reset(id);
    fz_set_pass(0);
    if (CALL(recap_checkpoint_run(&p, fz_sig(), (recap_func_t)fz_fn, v,
                                  u8(in) % 16 ? 7 : (size_t)(u8(in) % 9), &h)) != RECAP_OK) {
        REQUIRE(h == (recap_checkpoint_h)0x1);
        return;
    }
    rw.ck[c].h = h;
    rw.ck[c].arg_trk = at;
    rw.ck[c].eng = e;
    rw.ck[c].n = v[2].u64;
    for (rw.ck[c].yslot = 0; rw.buf[rw.ck[c].yslot].h != v[1].buf; rw.ck[c].yslot++)
        ;
    use_tracker(rw.ck[c].trk, 1);
    use_arg(at, 1);
    rw.managed[id] = at >= 0 && at == rw.ck[c].trk;
    REQUIRE(CALL(recap_checkpoint_return_value(h, &ret)) == RECAP_OK);
    REQUIRE(ret.u64 == (logs[id][0].out ^ logs[id][0].draw));
}

static void ckpt_backward(input_t *in, int c)
{
    recap_buffer_t out[2] = {NULL, NULL};
    size_t n = u8(in) % 8 ? 1 : u8(in) % 3;
    int id = NREG + c, fresh = logs[id][1].ran == 0;
    uint32_t *d;

    fz_set_pass(1);
    if (CALL(recap_checkpoint_backward(rw.ck[c].h, out, n)) != RECAP_OK)
        return;
    REQUIRE(n == 1 && out[0] != NULL && fresh);
    rw.ck[c].done = 1;
    check_recompute(id);
    /* The recomputed output holds the recompute's words. */
    d = data_of(out[0]);
    REQUIRE(d != NULL && words_of(out[0]) >= rw.ck[c].n);
    REQUIRE(hash_words(d, rw.ck[c].n) == logs[id][1].out);
    fz_adopt(out[0], rw.ck[c].eng);
}

static void ckpt_destroy(int c)
{
    REQUIRE(CALL(recap_checkpoint_destroy(rw.ck[c].h)) == RECAP_OK);
    use_tracker(rw.ck[c].trk, -1);
    use_arg(rw.ck[c].arg_trk, -1);
    memset(&rw.ck[c], 0, sizeof(rw.ck[c]));
}

void op_checkpoint(input_t *in)
{
    int c = pick(in, NCKPT);
    recap_value_t v;

    if (rw.ck[c].h == NULL) {
        ckpt_run(in, c);
        return;
    }
    switch (u8(in) % 4) {
    case 0:
    case 1:
        ckpt_backward(in, c);
        break;
    case 2:
        REQUIRE(CALL(recap_checkpoint_return_value(rw.ck[c].h, &v)) == RECAP_OK);
        break;
    default:
        ckpt_destroy(c);
        break;
    }
}

/* ---------------------------------------------------------------- the end of an input */

/* Everything regions hold goes, then the buffers; the engines must then be empty (no leak of
 * storage or handles through any sequence). */
void fz_regions_teardown(void)
{
    recap_plain_stats_t st;
    int i;

    for (i = 0; i < NCKPT; i++)
        if (rw.ck[i].h != NULL)
            ckpt_destroy(i);
    for (i = 0; i < NREG; i++)
        if (rw.reg[i].h != NULL) {
            REQUIRE(CALL(recap_region_destroy(rw.reg[i].h)) == RECAP_OK);
            region_forget(i);
        }
    for (i = 0; i < NMGR; i++)
        if (rw.mgr[i].h != NULL)
            REQUIRE(CALL(recap_manager_destroy(rw.mgr[i].h)) == RECAP_OK);
    for (i = 0; i < NBUF; i++)
        if (rw.buf[i].h != NULL)
            REQUIRE(CALL(recap_plain_buffer_destroy(rw.buf[i].h)) == RECAP_OK);
    fz_nccl_teardown();
    for (i = 0; i < 2; i++)
        if (rw.eng[i] != NULL) {
            REQUIRE(CALL(recap_plain_engine_stats(rw.eng[i], &st)) == RECAP_OK);
            REQUIRE(st.live_buffers == 0 && st.live_bytes == 0 && st.allocs == st.frees);
            REQUIRE(st.context_depth == 0 && st.saves == st.drops);
            REQUIRE(CALL(recap_plain_engine_destroy(rw.eng[i])) == RECAP_OK);
        }
    if (rw.sig != NULL)
        REQUIRE(CALL(recap_signature_destroy(rw.sig)) == RECAP_OK);
    for (i = 0; i < DEFAULT_SLOT; i++)
        REQUIRE(w.trk[i].regions == 0 && w.trk[i].args == 0);
    memset(&rw, 0, sizeof(rw));
}
