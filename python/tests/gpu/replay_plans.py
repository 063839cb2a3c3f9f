# SPDX-License-Identifier: Apache-2.0
"""recap.torch's graph replays (recap/_replay.py) on a GPU (scripts/gpu-check).

Each case captures a graph whose kernels draw from some of the graph-safe states of a tracker
that recap registers automatically (and from the default generator's own state), then replays
it K times with eager draws and state resets in between, and compares every output, and every
state at the end, with the same K steps run eagerly from the same start (the oracle). The cases
also take the graph through what recap must follow without being told: an instantiate of a kept
graph, a reset and a new capture from other states, a state registered through torch._C, a
second graph sharing a state, recap.torch uninstalled and installed again; and a replay inside
another capture, which torch refuses. Last, per-replay cost: the same graphs replayed by torch
and by recap, for trackers of S = 1, 4, 8 states of which the graph draws from one.
Where recap's replay does not run (a torch release it was not checked on), the same oracle
cases go through torch's replay, and the bench measures torch's replay alone (bench_torch).
Exit status 0 when every check holds.
"""
import random
import statistics
import sys
import time
import zlib

import torch

import recap.torch as rt
from recap import _replay

FAILS = []
K = 12


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILS.append(what)


class Tracker:
    """The least a tracker needs to be part of automatic registration."""

    def __init__(self, n, seed):
        gen = torch.cuda.default_generators[0]
        self.states = []
        for i in range(n):
            s = gen.clone_state()
            s.manual_seed(seed + i)
            self.states.append(s)
        rt.register_tracker(self)

    def graph_safe_generators(self):
        return list(self.states)


HOME = -1  # in `drawn`: the default generator's own state (torch's capture_begin registers it)


def body(x, states, drawn):
    """Draws from states[i] for i in drawn (dropout, randn, bernoulli) through torch's default
    generator, as Megatron's graph-safe tracker does; HOME draws from the default state."""
    gen = torch.cuda.default_generators[0]
    home = gen.graphsafe_get_state()
    outs = []
    for j, i in enumerate(drawn):
        gen.graphsafe_set_state(home if i == HOME else states[i])
        if j % 3 == 0:
            outs.append(torch.nn.functional.dropout(x, 0.5))
        elif j % 3 == 1:
            outs.append(torch.randn(x.numel() + 17 * max(i, 0), device="cuda"))
        else:
            outs.append(torch.bernoulli(torch.full_like(x, 0.3)))
    gen.graphsafe_set_state(home)
    return outs


def between(k, states, drawn, rng_seq):
    """Eager work between steps: a draw from one drawn state, or a state set anew."""
    gen = torch.cuda.default_generators[0]
    home = gen.graphsafe_get_state()
    kind, i = rng_seq[k]
    pick = drawn[i % len(drawn)]
    target = home if pick == HOME else states[pick]
    if kind == "draw":
        gen.graphsafe_set_state(target)
        out = torch.rand(1000 + 4 * k, device="cuda")
        gen.graphsafe_set_state(home)
        return out
    if kind == "set":
        v = target.get_state().clone()
        off = int.from_bytes(bytes(v[8:].tolist()), "little") + 4 * 37
        v[8:] = torch.tensor(list(off.to_bytes(8, "little")), dtype=torch.uint8)
        target.set_state(v)
    return None


def capture(g, x, states, drawn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, stream=side):
        outs = body(x, states, drawn)
    torch.cuda.current_stream().wait_stream(side)
    return outs


def drawn_in_table(g):
    """How many states torch's table says the graph draws from (recap reads the same)."""
    pairs = _replay.graph_states(g)
    return None if pairs is None else sum(1 for _, inc in pairs if inc)


def run_case(name, n_states, drawn, keep_graph=False, sneak=False, second=False,
             recapture=None, reinstall=False, torch_every=0):
    """K graph replays vs K eager steps, from the same start, with eager draws and state resets
    between steps; returns the graph and its plan. recapture: after K // 2 replays, reset the
    graph and capture it again drawing from these states (eager does the same from there).
    second: a second graph drawing from drawn[0], replayed in turn ("foreign": one made,
    registered and captured through torch._C, which recap does not see). torch_every: every
    that many replays go through torch's own replay."""
    rng = random.Random(zlib.crc32(name.encode()))
    seq = [(rng.choice(["draw", "set", "none"]), rng.randrange(8)) for _ in range(K)]
    tracker = Tracker(n_states, 100 + 10 * n_states)
    states = tracker.states
    gen = torch.cuda.default_generators[0]
    extra = None
    if sneak:  # a state registered through torch._C: recap.torch's wrappers do not see it
        extra = gen.clone_state()
        extra.manual_seed(999)
        states = states + [extra]
        drawn = drawn + [len(states) - 1]
    x = torch.ones(2048, device="cuda")
    everything = states + [gen]
    start = [s.get_state() for s in everything]

    def now(k):
        return recapture if recapture is not None and k >= K // 2 else drawn

    eager = []
    for k in range(K):
        eager.append(([o.clone() for o in body(x, states, now(k))],
                      between(k, states, now(k), seq)))
        if second:
            eager[-1] += (body(x, states, drawn[:1])[0].clone(),)
    end_eager = [s.get_state() for s in everything]
    for s, v in zip(everything, start):
        s.set_state(v)

    g = torch.cuda.CUDAGraph(keep_graph=keep_graph)
    if extra is not None:
        torch._C._CUDAGraph.register_generator_state(g, extra)
    outs = capture(g, x, states, drawn)
    g2 = outs2 = None
    if second == "foreign":  # made, registered and captured behind recap's back
        g2 = torch._C._CUDAGraph()
        for st in states:
            g2.register_generator_state(st)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            g2.capture_begin(None, "global")
            outs2 = body(x, states, drawn[:1])
            g2.capture_end()
        torch.cuda.current_stream().wait_stream(side)
    elif second:  # a second graph drawing from the first drawn state, replayed in turn
        g2 = torch.cuda.CUDAGraph()
        outs2 = capture(g2, x, states, drawn[:1])
    same = True
    for k in range(K):
        if recapture is not None and k == K // 2:
            g.reset()
            outs = capture(g, x, states, recapture)
        if keep_graph and k == K // 2:
            g.instantiate()  # a new exec
        if reinstall and k == K // 3:
            rt.uninstall()
        if reinstall and k == 2 * K // 3:
            rt.install()
        if torch_every and k % torch_every == torch_every - 1:
            torch._C._CUDAGraph.replay(g)
        else:
            g.replay()
        got = [o.clone() for o in outs]
        mid = between(k, states, now(k), seq)
        want_outs, want_mid = eager[k][0], eager[k][1]
        same &= all(torch.equal(a, b) for a, b in zip(got, want_outs))
        same &= (mid is None) == (want_mid is None) and (mid is None or torch.equal(mid, want_mid))
        if second:
            g2.replay()
            same &= torch.equal(outs2[0], eager[k][2])
    same &= all(torch.equal(a.get_state(), b) for a, b in zip(everything, end_eager))
    check(same, f"{name}: {K} replays = {K} eager steps, and the states end where eager left them")
    g._keep = (tracker, x, outs, g2, outs2)
    return g, _replay.plan_of(g), g2


def correctness():
    # Bound as programs bind it: on the first capture, inside torch.cuda.graph's capture_begin.
    g, p, _ = run_case("8 states, draws from 1", 8, [5])
    check(_replay._bound is True, "recap.torch bound its replay to this torch on the first "
          "capture (probe replay through recap = torch's replay)"
          f"{': ' + _replay.why if _replay.why else ''}")
    check(p is not None and p.replays == K and drawn_in_table(g) == 1,
          f"recap did the {K} replays; the table says 1 state drawn from "
          f"(got {p and p.replays}, {drawn_in_table(g)})")
    g, p, _ = run_case("4 states, draws from 3 (one twice) and the default state", 4,
                       [0, 2, 3, 2, HOME])
    check(p is not None and p.replays == K and drawn_in_table(g) == 4,
          "recap did the replays; 4 states drawn from")
    g, p, _ = run_case("keep_graph=True (instantiated at the first replay, again halfway)", 3,
                       [1], keep_graph=True)
    check(p is not None and p.replays == K - 1, "torch's replay first (it instantiates), recap's "
          f"after it, across the new exec (got {p and p.replays})")
    g, p, g2 = run_case("two graphs sharing a state, replayed in turn", 4, [1, 3], second=True)
    p2 = _replay.plan_of(g2)
    check(p is not None and p2 is not None and p.replays == K and p2.replays == K,
          "recap replayed both graphs")
    g, p, g2 = run_case("a graph captured through torch._C sharing a state, replayed in turn",
                        4, [2, 0], second="foreign")
    check(p is not None and p.replays == K and p.advanced == 2 and _replay.plan_of(g2) is None,
          "recap replayed its graph (its node advancing 2 states), torch the other")
    g, p, _ = run_case("torch's own replay every third replay", 3, [1, HOME], torch_every=3)
    check(p is not None and p.replays == K - K // 3, "recap's replays and torch's, in turn")
    g, p, _ = run_case("a state registered through torch._C", 3, [0], sneak=True)
    check(p is not None and p.replays == K and drawn_in_table(g) == 2,
          "recap replayed it, the state it was not told of included (read from torch's table)")
    g, p, _ = run_case("reset and captured again from other states halfway", 5, [0, 1],
                       recapture=[3, HOME])
    check(p is not None and p.replays == K, "recap replayed both captures")
    g, p, _ = run_case("recap.torch uninstalled and installed again in between", 2, [1],
                       reinstall=True)
    check(p is not None and p.replays == K - (2 * K // 3 - K // 3),
          "torch's replay while uninstalled, recap's before and after")

    g, p, _ = run_case("1 state", 1, [0])
    refused = None
    before = p.replays if p is not None else None
    try:
        g3 = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            g3.capture_begin(capture_error_mode="relaxed")
            try:
                g.replay()
            finally:
                try:
                    g3.capture_end()
                except RuntimeError:
                    pass
    except RuntimeError as e:
        refused = str(e).splitlines()[0]
    torch.cuda.synchronize()
    check(refused is not None and p is not None and p.replays == before,
          f"a replay inside a capture goes to torch, which refuses it ({refused})")


def replay_us(fn, reps=2000, rounds=7):
    """Median over rounds of the event-timed mean time of fn() (a replay), after a warm-up."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000 / reps)
    return statistics.median(times)


def host_us(fn, batches=31, per=200):
    """Median over batches of the host time per fn() call (a replay), the device drained
    between batches: what a launch costs the host (bench/launch's method)."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(per):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        times.append((t1 - t0) / per * 1e6)
    return statistics.median(times)


def graph_pair(n):
    """A plain graph (a fill) and one drawing from the first of a new tracker's n states (a
    uniform fill through torch's default generator), captured on a side stream."""
    tracker = Tracker(n, 500 + n)
    # small enough that the device runs a replay faster than the host issues one: the host
    # columns are then what a replay costs the host, not the device's pace
    buf = torch.empty(1 << 12, device="cuda")
    gen = torch.cuda.default_generators[0]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    plain, rng = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(plain, stream=side):
        buf.fill_(1.0)
    with torch.cuda.graph(rng, stream=side):
        home = gen.graphsafe_get_state()
        gen.graphsafe_set_state(tracker.states[0])
        buf.uniform_()
        gen.graphsafe_set_state(home)
    torch.cuda.current_stream().wait_stream(side)
    rng._keep = plain._keep = (tracker, buf)
    return plain, rng


def bench():
    """Per replay, a graph drawing from 1 of a tracker's S states (all registered by recap)
    against a plain graph of the same kernels (a fill where the other draws): recap's replay and
    torch's. Medians of 5 interleaved rounds."""
    print()
    print("Per replay (us), host time around replay() (medians of 31 batches of 200) and "
          "event-timed (3 loops of 1000); medians of 5 interleaved rounds")
    print()
    print("| S | plain, recap's replay | RNG, recap's replay | recap added | plain, torch's "
          "replay | RNG, torch's replay | torch added | event-timed: plain / RNG recap / RNG "
          "torch | slot writes |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    worst = 0.0
    # The GPU's clocks up first (the first S measured ran at a slower device in an earlier
    # run: its plain graph took 3.5 us event-timed against 2.3 us for the others).
    warm = torch.cuda.CUDAGraph()
    wbuf = torch.empty(1 << 12, device="cuda")
    with torch.cuda.graph(warm):
        wbuf.fill_(1.0)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        for _ in range(1000):
            warm.replay()
        torch.cuda.synchronize()
    for n in (1, 4, 8, 16):
        plain, rng = graph_pair(n)
        p = _replay.plan_of(rng)
        check(p is not None and p.advanced == 1 and drawn_in_table(rng) == 1,
              f"S={n}: recap replays the graph, whose own node advances the 1 state it draws")
        torch_replay = torch._C._CUDAGraph.replay
        w0 = _replay.stats()["slot_writes"]
        rounds = []
        for _ in range(5):
            rounds.append((host_us(plain.replay), host_us(rng.replay),
                           host_us(lambda: torch_replay(plain)), host_us(lambda: torch_replay(rng)),
                           replay_us(plain.replay, reps=1000, rounds=3),
                           replay_us(rng.replay, reps=1000, rounds=3),
                           replay_us(lambda: torch_replay(rng), reps=1000, rounds=3)))
        pr, rr, pt, rt_, ep, er, et = (statistics.median(r[i] for r in rounds) for i in range(7))
        writes = _replay.stats()["slot_writes"] - w0
        # torch's replays in between move the state behind recap: one write after each of them
        print(f"| {n} | {pr:.2f} | {rr:.2f} | {rr - pr:+.2f} | {pt:.2f} | {rt_:.2f} | "
              f"{rt_ - pt:+.2f} | {ep:.2f} / {er:.2f} / {et:.2f} | {writes} |")
        worst = max(worst, rr - pr)
    print(f"\ninfo  recap's added host cost per replay, worst S: {worst:+.2f} us "
          "(issue bound: 0.5 us)")
    steady = Tracker(2, 900)
    buf = torch.empty(1024, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        gen = torch.cuda.default_generators[0]
        home = gen.graphsafe_get_state()
        gen.graphsafe_set_state(steady.states[1])
        buf.uniform_()
        gen.graphsafe_set_state(home)
    g._keep = (steady, buf)
    g.replay()
    w0 = _replay.stats()["slot_writes"]
    for _ in range(1000):
        g.replay()
    torch.cuda.synchronize()
    w = _replay.stats()["slot_writes"] - w0
    check(w == 0, f"steady state: 1000 replays in a row wrote no slot (wrote {w})")


def torch_replays():
    """Where recap's replay does not run (a torch it was not checked on, RECAP_TORCH_REPLAY=0):
    the same cases through torch's replay, every output and state against the eager oracle."""
    print(f"info  recap's replay is off here ({_replay.why}): torch replays every graph")
    for name, n, drawn, kw in (("8 states, draws from 1", 8, [5], {}),
                               ("4 states, draws from 3 and the default state", 4,
                                [0, 2, 3, 2, HOME], {}),
                               ("keep_graph=True", 3, [1], {"keep_graph": True}),
                               ("two graphs sharing a state", 4, [1, 3], {"second": True}),
                               ("reset and captured again", 5, [0, 1],
                                {"recapture": [3, HOME]})):
        g, p, _ = run_case(name, n, drawn, **kw)
        check(p is None, f"{name}: no plan of recap's (torch replayed it)")


def bench_torch():
    """Per replay where torch replays (torch 2.12 on, or RECAP_TORCH_REPLAY=0): a graph drawing
    from 1 of a tracker's S states against a plain graph, through torch's replay, and how many
    states torch's table holds (all S registered before 2.14; only the drawn one where torch
    registers lazily, 2.14 on). Whether recap's replay would still pay off is the "torch added"
    column against recap's +0.05 us of torch 2.11 (bench/RESULTS.md)."""
    print()
    print(f"torch {torch.__version__}: per replay (us), host time around replay() (medians of 31 "
          "batches of 200), event-timed (3 loops of 1000); medians of 5 interleaved rounds")
    print()
    print("| S | states in torch's table | plain | RNG | torch added | event-timed: plain / RNG |")
    print("|---:|---:|---:|---:|---:|---|")
    for n in (1, 4, 8, 16):
        plain, rng = graph_pair(n)
        pairs = _replay.graph_states(rng)
        rounds = [(host_us(plain.replay), host_us(rng.replay),
                   replay_us(plain.replay, reps=1000, rounds=3),
                   replay_us(rng.replay, reps=1000, rounds=3)) for _ in range(5)]
        pr, rr, ep, er = (statistics.median(r[i] for r in rounds) for i in range(4))
        print(f"| {n} | {'?' if pairs is None else len(pairs)} | {pr:.2f} | {rr:.2f} | "
              f"{rr - pr:+.2f} | {ep:.2f} / {er:.2f} |")


def main():
    rt.install()
    torch.cuda.init()
    b = rt.backend()
    print("info  recap.torch:", {k: b[k] for k in ("hooks", "patched", "layout", "registration",
                                                   "replay")})
    from recap import _graph_hooks
    check(b["hooks"] == ("torch" if _graph_hooks.torch_has_hooks() else "shim"),
          f"graphs followed through {b['hooks']} hooks")
    if _replay._bound:
        correctness()
    else:
        torch_replays()
    if "bench" in sys.argv[1:]:
        bench() if _replay._bound else bench_torch()
    print(f"{len(FAILS)} failed" if FAILS else "all checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
