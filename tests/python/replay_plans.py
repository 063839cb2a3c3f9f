# SPDX-License-Identifier: Apache-2.0
"""recap.torch's graph replays (recap/_replay.py) on a GPU (scripts/gpu-check).

Each case captures a graph whose kernels draw from some of the graph-safe states of a tracker
that recap registers automatically, then replays it K times with eager draws and state changes
in between, and compares every output with the same K steps run eagerly from the same start
(the oracle). Checked as well: which graphs got a plan (only those whose every registration
recap can account for), that the plan did the replays, and that a state registered behind
recap's back leaves the graph to torch. Last, per-replay cost: the same graphs replayed by torch
and by recap, for trackers of S = 1, 4, 8 states of which the graph draws from one.
Exit status 0 when every check holds.
"""
import random
import statistics
import sys

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


def body(x, states, drawn):
    """Draws from states[i] for i in drawn (dropout, randn, bernoulli) through torch's default
    generator, as Megatron's graph-safe tracker does."""
    gen = torch.cuda.default_generators[0]
    home = gen.graphsafe_get_state()
    outs = []
    for j, i in enumerate(drawn):
        gen.graphsafe_set_state(states[i])
        if j % 3 == 0:
            outs.append(torch.nn.functional.dropout(x, 0.5))
        elif j % 3 == 1:
            outs.append(torch.randn(x.numel() + 17 * i, device="cuda"))
        else:
            outs.append(torch.bernoulli(torch.full_like(x, 0.3)))
    gen.graphsafe_set_state(home)
    return outs


def between(k, states, drawn, rng_seq):
    """Eager work between steps: a draw from one drawn state, or a state set anew."""
    gen = torch.cuda.default_generators[0]
    home = gen.graphsafe_get_state()
    kind, i = rng_seq[k]
    if kind == "draw":
        gen.graphsafe_set_state(states[drawn[i % len(drawn)]])
        out = torch.rand(1000 + 4 * k, device="cuda")
        gen.graphsafe_set_state(home)
        return out
    if kind == "set":
        s = states[drawn[i % len(drawn)]]
        v = s.get_state().clone()
        off = int.from_bytes(bytes(v[8:].tolist()), "little") + 4 * 37
        v[8:] = torch.tensor(list(off.to_bytes(8, "little")), dtype=torch.uint8)
        s.set_state(v)
    return None


def run_case(name, n_states, drawn, keep_graph=False, sneak=False, second=False):
    """K graph replays vs K eager steps; returns the graph's plan (or None)."""
    rng = random.Random(hash(name) & 0xFFFF)
    seq = [(rng.choice(["draw", "set", "none"]), rng.randrange(8)) for _ in range(K)]
    tracker = Tracker(n_states, 100 + 10 * n_states)
    states = tracker.states
    extra = None
    if sneak:  # a state the graph draws from, registered where recap cannot see it
        extra = torch.cuda.default_generators[0].clone_state()
        extra.manual_seed(999)
        states = states + [extra]
        drawn = drawn + [len(states) - 1]
    x = torch.ones(2048, device="cuda")
    start = [s.get_state() for s in states]

    eager = []
    for k in range(K):
        eager.append(([o.clone() for o in body(x, states, drawn)],
                      between(k, states, drawn, seq)))
        if second:
            eager[-1] += (body(x, states, drawn[:1])[0].clone(),)
    end_eager = [s.get_state() for s in states]
    for s, v in zip(states, start):
        s.set_state(v)

    g = torch.cuda.CUDAGraph(keep_graph=keep_graph)
    if extra is not None:
        torch._C._CUDAGraph.register_generator_state(g, extra)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, stream=side):
        outs = body(x, states, drawn)
    g2 = outs2 = None
    if second:  # a second graph drawing from the first drawn state, replayed in turn
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2, stream=side):
            outs2 = body(x, states, drawn[:1])
    same = True
    for k in range(K):
        g.replay()
        got = [o.clone() for o in outs]
        mid = between(k, states, drawn, seq)
        want_outs, want_mid = eager[k][0], eager[k][1]
        same &= all(torch.equal(a, b) for a, b in zip(got, want_outs))
        same &= (mid is None) == (want_mid is None) and (mid is None or torch.equal(mid, want_mid))
        if second:
            g2.replay()
            same &= torch.equal(outs2[0], eager[k][2])
    same &= all(torch.equal(a.get_state(), b) for a, b in zip(states, end_eager))
    check(same, f"{name}: {K} replays = {K} eager steps, and the states end where eager left them")
    g._keep = (tracker, x, outs, g2, outs2)
    return g, _replay.plan_of(g)


def correctness():
    check(_replay.ready(rt._orig), "recap.torch bound its replay to this torch (probe replay "
          f"through a plan = torch's replay){': ' + _replay.why if _replay.why else ''}")
    g, p = run_case("8 states, draws from 1", 8, [5])
    check(p is not None and p.states == 1 and p.replays == K,
          f"plan: 1 state written per replay, {K} replays by recap "
          f"(got {p and p.states}, {p and p.replays})")
    g, p = run_case("4 states, draws from 3 (one twice)", 4, [0, 2, 3, 2])
    check(p is not None and p.states == 3 and p.replays == K, "plan: the 3 states drawn from")
    g, p = run_case("keep_graph=True (torch instantiates at the first replay)", 3, [1],
                    keep_graph=True)
    check(p is not None and p.replays == K - 1, "plan: torch's replay first, recap's after it")
    g, p = run_case("two graphs sharing a state, replayed in turn", 4, [1, 3], second=True)
    check(p is not None and p.replays == K, "plan: both graphs")
    before = _replay.stats["left_to_torch"]
    g, p = run_case("a state registered behind recap's back", 3, [0], sneak=True)
    check(p is None and _replay.stats["left_to_torch"] == before + 1,
          "no plan when torch's table holds a state recap does not know: torch replays it")

    g, p = run_case("1 state", 1, [0])
    refused = None
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
    check(refused is not None and p is not None and p.replays == K,
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


def bench():
    print()
    print("| tracker states (graph draws from 1) | torch's replay us | recap's replay us | ratio |")
    print("|---|---:|---:|---:|")
    for n in (1, 4, 8):
        tracker = Tracker(n, 500 + n)
        x = torch.ones(1024, device="cuda")
        g = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.graph(g, stream=side):
            y = body(x, tracker.states, [0])
        g._keep = (tracker, x, y)
        p = _replay.plan_of(g)
        check(p is not None and p.states == 1, f"S={n}: the graph has a plan for 1 state")
        pairs = [(replay_us(lambda: torch._C._CUDAGraph.replay(g), reps=1000, rounds=3),
                  replay_us(g.replay, reps=1000, rounds=3)) for _ in range(5)]  # interleaved
        t = statistics.median(a for a, _ in pairs)
        r = statistics.median(b for _, b in pairs)
        print(f"| {n} | {t:.2f} | {r:.2f} | {r / t:.2f} |")


def main():
    rt.install()
    torch.cuda.init()
    correctness()
    if "bench" in sys.argv[1:]:
        bench()
    print(f"{len(FAILS)} failed" if FAILS else "all checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
