# SPDX-License-Identifier: Apache-2.0
"""recap.megatron against Megatron-Core's own tensor_parallel.random, on a GPU (scripts/gpu-check).

    python megatron_gpu.py identity   masks, losses and gradients of one script through both
                                      modules: eager and captured, value and graph-safe
    python megatron_gpu.py autoreg    a captured step with no register_generator_state anywhere:
                                      K replays == K eager steps with recap; Megatron's own module
                                      fails there (the anchor)
    python megatron_gpu.py bench      fork+exit from Python through both modules, both modes

Both modules are imported side by side (recap.megatron is not installed over Megatron's here);
each run starts from the same seeds. Exit status 0 when every check holds.
"""
import statistics
import sys
import time

import torch

import megatron.core.tensor_parallel.random as meg
import recap.megatron as rec
import replay_plans  # python/tests/gpu: the replay timer

FAILS = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILS.append(what)


def seed_all(mod, graph_safe, tp, ep):
    torch.manual_seed(7)
    mod.model_parallel_cuda_manual_seed(1234, use_cudagraphable_rng=graph_safe, tp_rank=tp,
                                        ep_rank=ep, etp_rank=0, force_reset_rng=True)
    return mod.get_cuda_rng_tracker()


def ckpt_without_output(mod):
    # Megatron's CheckpointWithoutOutput(fp8=False) turns fp8 on (needs TE); None means off.
    return mod.CheckpointWithoutOutput(None if mod is meg else False)


def step(mod, graph_safe, x, w1, w2, checkpointed):
    """A two-layer block: dropout under nested forks, an MLP checkpointed (optionally) with
    checkpoint() and CheckpointWithoutOutput; returns loss and everything drawn."""
    t = mod.get_cuda_rng_tracker()
    out = {}
    with t.fork(mod._MODEL_PARALLEL_RNG_TRACKER_NAME):
        out["mask_mp"] = torch.nn.functional.dropout(torch.ones(4096, device="cuda"), 0.1)
        with t.fork(mod._EXPERT_PARALLEL_RNG_TRACKER_NAME):
            out["mask_ep"] = torch.nn.functional.dropout(torch.ones(4096, device="cuda"), 0.3)
            with t.fork(mod._MODEL_PARALLEL_RNG_TRACKER_NAME):
                out["randn_mp"] = torch.randn(257, device="cuda")
        out["mask_mp2"] = torch.nn.functional.dropout(torch.ones(4096, device="cuda"), 0.2)

    def layer1(h, w):
        with t.fork(mod._MODEL_PARALLEL_RNG_TRACKER_NAME):
            return torch.nn.functional.dropout(torch.relu(h @ w), 0.25)

    def layer2(h, w):
        return torch.nn.functional.dropout(torch.nn.functional.gelu(h @ w), 0.15)

    if checkpointed:
        h = mod.checkpoint(layer1, False, x, w1)
        c = ckpt_without_output(mod)
        y = c.checkpoint(layer2, h, w2)
        z = y * 1.0
        loss = (z * z).sum()
        c.discard_output_and_register_recompute(loss)
    else:
        h = layer1(x, w1)
        y = layer2(h, w2)
        z = y * 1.0
        loss = (z * z).sum()
    loss.backward()
    out["loss"] = loss.detach()
    return out


def inputs():
    g = torch.Generator(device="cuda").manual_seed(11)
    x = torch.randn(64, 128, device="cuda", generator=g)
    w1 = torch.randn(128, 256, device="cuda", generator=g, requires_grad=True)
    w2 = torch.randn(256, 64, device="cuda", generator=g, requires_grad=True)
    return x, w1, w2


def run_eager(mod, graph_safe, tp, ep, checkpointed, steps=3):
    seed_all(mod, graph_safe, tp, ep)
    x, w1, w2 = inputs()
    res = []
    for _ in range(steps):
        w1.grad = w2.grad = None
        o = step(mod, graph_safe, x, w1, w2, checkpointed)
        o["g1"], o["g2"] = w1.grad.clone(), w2.grad.clone()
        res.append(o)
    return res


def same(a, b):
    return all(torch.equal(a[i][k], b[i][k]) for i in range(len(a)) for k in a[i])


def identity():
    for graph_safe in (False, True):
        mode = "graph-safe" if graph_safe else "value"
        for tp, ep in ((0, 0), (3, 1), (1, 5)):
            a = run_eager(meg, graph_safe, tp, ep, checkpointed=False)
            b = run_eager(rec, graph_safe, tp, ep, checkpointed=False)
            check(same(a, b), f"identity, eager, {mode}, tp {tp} ep {ep}: masks, randn, losses, "
                  "gradients equal Megatron's")
        oracle = run_eager(rec, graph_safe, 1, 0, checkpointed=False)
        ours = run_eager(rec, graph_safe, 1, 0, checkpointed=True)
        check(same(oracle, ours), f"checkpoint + CheckpointWithoutOutput, {mode}: recap's "
              "recompute equals the non-checkpointed run")
        theirs = run_eager(meg, graph_safe, 1, 0, checkpointed=True)
        if graph_safe:
            print(f"info  Megatron's checkpoint, graph-safe: equals the non-checkpointed run: "
                  f"{same(oracle, theirs)} (its recompute restores state objects that advanced)")
        else:
            check(same(theirs, ours), f"checkpoint + CheckpointWithoutOutput, {mode}: equal "
                  "Megatron's")
    captured_identity()


def captured_forward(mod, register):
    """A forward with dropout under forks, captured (graph-safe tracker) and replayed 3 times."""
    seed_all(mod, True, 2, 1)
    t = mod.get_cuda_rng_tracker()
    x = torch.ones(8192, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    if register:
        for st in mod.get_all_rng_states().values():
            g.register_generator_state(st)
    with torch.cuda.graph(g, stream=s):
        with t.fork(mod._MODEL_PARALLEL_RNG_TRACKER_NAME):
            y1 = torch.nn.functional.dropout(x, 0.5)
            with t.fork(mod._DATA_PARALLEL_RNG_TRACKER_NAME):
                y2 = torch.nn.functional.dropout(x, 0.5)
        y3 = torch.nn.functional.dropout(x, 0.5)
    outs = []
    for _ in range(3):
        g.replay()
        torch.cuda.synchronize()
        outs.append({"y1": y1.clone(), "y2": y2.clone(), "y3": y3.clone()})
    return outs


def eager_forward(mod, steps=3):
    seed_all(mod, True, 2, 1)
    t = mod.get_cuda_rng_tracker()
    x = torch.ones(8192, device="cuda")
    outs = []
    for _ in range(steps):
        with t.fork(mod._MODEL_PARALLEL_RNG_TRACKER_NAME):
            y1 = torch.nn.functional.dropout(x, 0.5)
            with t.fork(mod._DATA_PARALLEL_RNG_TRACKER_NAME):
                y2 = torch.nn.functional.dropout(x, 0.5)
        y3 = torch.nn.functional.dropout(x, 0.5)
        outs.append({"y1": y1, "y2": y2, "y3": y3})
    return outs


def captured_identity():
    theirs = captured_forward(meg, register=True)
    ours = captured_forward(rec, register=False)
    check(same(theirs, ours), "identity, captured, graph-safe: 3 replays equal Megatron's "
          "(Megatron registered by hand, recap automatically)")


def autoreg():
    eager = eager_forward(rec)
    ours = captured_forward(rec, register=False)
    check(same(eager, ours), "automatic registration: 3 replays of a captured step with no "
          "register_generator_state equal 3 eager steps")
    check(not same(ours[:1], ours[1:2]), "automatic registration: replays draw fresh numbers")
    try:
        captured_forward(meg, register=False)
        check(False, "anchor: Megatron's own module without registration should fail")
    except Exception as e:  # noqa: BLE001 - the anchor's failure is the point
        print(f"anchor Megatron's own module without registration fails: {type(e).__name__}: "
              f"{str(e).splitlines()[0]}")
    torch.cuda.synchronize()


def time_forks(mod, graph_safe, n=2000, reps=15):
    torch.ones(1, device="cuda").sum().item()  # a live CUDA context, as in any training job
    seed_all(mod, graph_safe, 0, 0)
    t = mod.get_cuda_rng_tracker()
    name = mod._MODEL_PARALLEL_RNG_TRACKER_NAME
    FORK_KIND[mod.__name__, graph_safe] = type(t.fork(name)).__name__
    for _ in range(200):
        with t.fork(name):
            pass
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            with t.fork(name):
                pass
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(samples)


FORK_KIND = {}


def time_states(mod, graph_safe, n=2000, reps=15):
    """get_states() + set_states() of a tracker of Megatron's three states, from Python."""
    seed_all(mod, graph_safe, 0, 0)
    t = mod.get_cuda_rng_tracker()
    for _ in range(200):
        t.set_states(t.get_states())
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            t.set_states(t.get_states())
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(samples)


def replay_us(g, reps=2000, rounds=7, by_torch=False):
    """Median event-timed replay time (replay_plans.replay_us); by_torch: torch's own replay
    (recap.torch, once imported, replays the graphs it can account for itself)."""
    fn = (lambda: torch._C._CUDAGraph.replay(g)) if by_torch else g.replay
    return replay_plans.replay_us(fn, reps, rounds)


def tracker_graph(mod, states, register_by_hand):
    """A graph drawing from one state of a graph-safe tracker holding `states` states."""
    torch.manual_seed(7)
    mod.initialize_rng_tracker(use_cudagraphable_rng=True, force_reset=True)
    t = mod.get_cuda_rng_tracker()
    for i in range(states):
        t.add(f"s{i}", 1000 + i)
    x = torch.ones(1024, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    if register_by_hand:
        for st in t.get_states().values():
            g.register_generator_state(st)
    with torch.cuda.graph(g, stream=s):
        with t.fork("s0"):
            y = torch.nn.functional.dropout(x, 0.5)
    g._keep = (x, y)
    return g


def bench():
    print("| fork+exit from Python | Megatron-Core 0.19.2 us | recap.megatron us | ratio |")
    print("|---|---:|---:|---:|")
    for graph_safe in (False, True):
        m = time_forks(meg, graph_safe)
        r = time_forks(rec, graph_safe)
        mode = "graph-safe" if graph_safe else "value"
        print(f"| {mode} mode | {m:.2f} | {r:.2f} | {r / m:.2f} |")
    print(f"info  fork objects: {FORK_KIND}")
    for graph_safe in (False, True):
        m, r = time_states(meg, graph_safe), time_states(rec, graph_safe)
        mode = "graph-safe" if graph_safe else "value"
        print(f"| get_states+set_states, {mode} mode (Megatron's: dict copies, no generator "
              f"work) | {m:.2f} | {r:.2f} | {r / m:.2f} |")
    print()
    print("| tracker states (graph draws from 1) | registered by hand, torch's replay us | "
          "recap, automatic us | ratio | registered by hand, recap's replay us |")
    print("|---|---:|---:|---:|---:|")
    for states in (1, 4, 8):
        hg, ag = tracker_graph(meg, states, True), tracker_graph(rec, states, False)
        rounds = [(replay_us(hg, 1000, 3, by_torch=True), replay_us(ag, 1000, 3),
                   replay_us(hg, 1000, 3)) for _ in range(5)]  # interleaved
        hand, auto, hand_recap = (statistics.median(r[i] for r in rounds) for i in range(3))
        print(f"| {states} | {hand:.2f} | {auto:.2f} | {auto / hand:.2f} | {hand_recap:.2f} |")
    from recap import _replay
    check(_replay.stats().get("replays", 0) > 0,
          f"recap replayed these graphs itself: {_replay.stats()}"
          + (f"; off: {_replay.why}" if _replay.why else ""))


def unmodified():
    """What a Megatron user's script does (no recap in it): under recap-run the module is
    recap's, and the captured step needs no registration."""
    print(f"tensor_parallel.random is {meg.__name__}")
    check(meg.__name__ == "recap.megatron", "recap-run put recap.megatron in place of Megatron's")
    eager = eager_forward(meg)
    check(same(eager, captured_forward(meg, register=False)),
          "unmodified script: 3 replays of its captured step equal 3 eager steps")


# ------------------------------------------------------------------ recap.torch's extension
# Each sequence below runs through Megatron's own module (torch's API calls) and through
# recap.megatron (recap._C's operations) from the same start; every outcome must agree.

CAPTURE_OPS = ("get_set_states", "fork_dropout", "nested_forks", "snapshot_restore",
               "fork_rng", "default_dropout", "get_cuda_state", "set_cuda_state")


def _op(mod, t, op, x, outs):
    name = mod._MODEL_PARALLEL_RNG_TRACKER_NAME
    if op == "get_set_states":
        t.set_states(t.get_states())
    elif op == "fork_dropout":
        with t.fork(name):
            outs.append(torch.nn.functional.dropout(x, 0.5))
    elif op == "nested_forks":
        with t.fork(name):
            with t.fork(mod._DATA_PARALLEL_RNG_TRACKER_NAME):
                outs.append(torch.nn.functional.dropout(x, 0.3))
            outs.append(torch.randn(129, device="cuda"))
    elif op == "snapshot_restore":
        saved = mod._get_all_rng_states()
        with t.fork(name):
            outs.append(torch.nn.functional.dropout(x, 0.5))
        mod._set_all_rng_states(*saved)
    elif op == "fork_rng":
        with mod._fork_rng():
            outs.append(torch.nn.functional.dropout(x, 0.4))
    elif op == "default_dropout":
        outs.append(torch.nn.functional.dropout(x, 0.2))
    elif op == "get_cuda_state":
        mod._get_cuda_rng_state(graph_safe=t.use_cudagraphable_rng)
    elif op == "set_cuda_state":
        mod._set_cuda_rng_state(mod._get_cuda_rng_state(graph_safe=t.use_cudagraphable_rng),
                                graph_safe=t.use_cudagraphable_rng)


def _states_now(t):
    out = {}
    for k, v in t.get_states().items():
        out[k] = (v.get_state() if isinstance(v, torch.Generator) else v).clone()
    out["_default"] = torch.cuda.default_generators[0].get_state()
    return out


def _path():
    """Which operations recap.torch runs here (RECAP_TORCH_EXT=0: the Python ones)."""
    import recap.torch as rt
    b = rt.backend()
    return "recap._C" if b["ops"] == "extension" else f"the Python operations ({b['why']})"


def capture_sequence(mod, graph_safe, ops, captured=True, replays=3):
    """ops inside torch.cuda.graph (each one's outcome: ok or torch's error), then replays with
    eager draws between, then every state; captured=False runs the ops eagerly instead of each
    replay (the oracle: graphs on = graphs off)."""
    seed_all(mod, graph_safe, 1, 0)
    t = mod.get_cuda_rng_tracker()
    x = torch.ones(4096, device="cuda")
    trace, outs, got = [], [], []
    if captured:
        g = torch.cuda.CUDAGraph()
        if mod is meg and graph_safe:  # Megatron needs its states registered by hand; recap not
            for st in t.get_states().values():
                g.register_generator_state(st)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        try:
            with torch.cuda.graph(g, stream=s):
                for op in ops:
                    try:
                        _op(mod, t, op, x, outs)
                        trace.append(op + ": ok")
                    except Exception as e:  # noqa: BLE001 - the outcome is compared
                        trace.append(f"{op}: {type(e).__name__}")
        except Exception as e:  # noqa: BLE001
            trace.append(f"capture: {type(e).__name__}: {str(e).splitlines()[0]}")
            torch.cuda.synchronize()
            return trace, [], {}
        torch.cuda.current_stream().wait_stream(s)
    for k in range(replays):
        if captured:
            g.replay()
            got.extend(o.clone() for o in outs)
        else:
            for op in ops:
                _op(mod, t, op, x, got)
        _op(mod, t, CAPTURE_OPS[1 + k % 2], x, got)
    torch.cuda.synchronize()
    return trace, got, _states_now(t)


def _same_run(a, b):
    return len(a[1]) == len(b[1]) and all(torch.equal(u, v) for u, v in zip(a[1], b[1])) and \
        a[2].keys() == b[2].keys() and all(torch.equal(a[2][k], b[2][k]) for k in a[2])


def capture_ops():
    """Value mode: every outcome, output and state equals Megatron's module, i.e. torch's own
    get_state/set_state calls (which refuse inside a capture). Graph-safe mode: every outcome
    equals torch's API (Megatron's module), and the values equal the same ops run eagerly, the
    oracle (Megatron's graph-safe snapshots keep references to state objects that advance, so
    its values are not one)."""
    import random
    rng = random.Random(int(__import__("os").environ.get("RECAP_TEST_SEED", "1")))
    cases = [list(CAPTURE_OPS)] + [[rng.choice(CAPTURE_OPS) for _ in range(rng.randrange(1, 7))]
                                   for _ in range(12)]
    for graph_safe in (False, True):
        mode = "graph-safe" if graph_safe else "value"
        agree = meg_oracle = 0
        for ops in cases:
            a = capture_sequence(meg, graph_safe, ops)
            b = capture_sequence(rec, graph_safe, ops)
            if graph_safe:
                oracle = capture_sequence(rec, graph_safe, ops, captured=False)
                ok = a[0] == b[0] and _same_run(b, oracle)
                meg_oracle += _same_run(a, capture_sequence(meg, graph_safe, ops, captured=False))
            else:
                ok = a[0] == b[0] and _same_run(a, b)
            if not ok:
                print(f"      {mode} {ops}:\n        torch's API: {a[0]}\n        recap:       {b[0]}")
            agree += ok
        print(f"info  {mode}, inside a capture, the first sequence's outcomes through torch's API: "
              f"{capture_sequence(meg, graph_safe, cases[0])[0]}")
        if graph_safe:
            print(f"info  Megatron's own module, graph-safe: captured = eager in {meg_oracle}/"
                  f"{len(cases)} sequences")
            what = "outcomes = torch's API, replays and states = the ops run eagerly"
        else:
            what = "outcomes, replays, later eager draws and every state = torch's API"
        check(agree == len(cases), f"inside torch.cuda.graph, {mode}: {len(cases)} sequences of "
              f"get/set_states, forks, snapshots, _fork_rng through {_path()}: {what}: "
              f"{agree}/{len(cases)}")


def lstm_step(mod, reseed_every):
    """cuDNN LSTM with dropout, the tracker's states set between steps: cuDNN re-reads the
    generator only when torch's set_state cleared its RNN flag."""
    seed_all(mod, False, 0, 0)
    t = mod.get_cuda_rng_tracker()
    torch.manual_seed(3)
    lstm = torch.nn.LSTM(64, 128, num_layers=3, dropout=0.4).cuda()
    x = torch.randn(20, 8, 64, device="cuda")
    outs = []
    for k in range(6):
        if k % reseed_every == 0:
            t.set_states(t.get_states())
            mod._set_cuda_rng_state(mod._get_cuda_rng_state())
        with t.fork():
            y, _ = lstm(x)
        outs.append(y.detach().clone())
    return outs


def lstm():
    check(torch.backends.cudnn.is_available(), "cuDNN is available (the LSTM runs its kernels)")
    for every in (1, 2, 5):
        a, b = lstm_step(meg, every), lstm_step(rec, every)
        check(all(torch.equal(u, v) for u, v in zip(a, b)), f"nn.LSTM(dropout=0.4), states set "
              f"every {every} step(s): writes through {_path()} give torch's outputs (cuDNN's RNN "
              "flag)")


def threads():
    """Four threads, each with its own graph-safe tracker on torch's one default generator,
    forking (a dropout inside), reading and setting their states at once, 300 times each. recap
    refuses a fork while another tracker's fork is open on the generator (RECAP_ERR_STATE):
    every call either works or is refused so. Afterwards each tracker's states equal a tracker
    that made the same successful forks alone: no draw went to another thread's state and no
    reference was lost."""
    import threading

    from recap._lib import RecapStateError  # RECAP_ERR_STATE

    x = torch.ones(1024, device="cuda")
    errors = []

    def make(seed):
        t = rec.CudaRNGStatesTracker(use_cudagraphable_rng=True)
        t.add("a", seed)
        t.add("b", seed + 1)
        return t

    def work(t, n, done):
        try:
            for k in range(n):
                name = "a" if k % 2 else "b"
                try:
                    with t.fork(name):
                        torch.nn.functional.dropout(x, 0.5)
                    done[name] += 1
                    t.set_states(t.get_states())
                except RecapStateError:
                    pass
        except Exception as e:  # noqa: BLE001 - anything else fails the check
            errors.append(repr(e))

    n = 300
    trackers = [make(100 + 10 * i) for i in range(4)]
    done = [{"a": 0, "b": 0} for _ in trackers]
    ths = [threading.Thread(target=work, args=(t, n, d)) for t, d in zip(trackers, done)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    torch.cuda.synchronize()
    same = True
    for i, (t, d) in enumerate(zip(trackers, done)):
        alone = make(100 + 10 * i)
        for name, count in d.items():
            for _ in range(count):
                with alone.fork(name):
                    torch.nn.functional.dropout(x, 0.5)
        got, want = t.get_states(), alone.get_states()
        same &= all(torch.equal(got[k].get_state(), want[k].get_state()) for k in want)
    forks = sum(d["a"] + d["b"] for d in done)
    print(f"info  forks kept: {forks} of {4 * n} calls; {errors[:3]}")
    check(not errors and same, f"4 threads x {n} forks/gets/sets on their own trackers: every "
          "call works or is refused with RECAP_ERR_STATE; each tracker's states equal the same "
          "successful forks made alone")



def firstuse():
    """recap's first use inside a user's capture: nothing to bind, nothing written into a live
    generator; the operations run in recap._C from then on."""
    import recap.torch as rt
    torch.cuda.init()  # as the user's capture would have (default_generators is empty before)
    before = torch.cuda.default_generators[0].get_state()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, stream=s):
        gen = rt.generator(0)
        y = torch.nn.functional.dropout(torch.ones(1024, device="cuda"), 0.5)
    torch.cuda.synchronize()
    check(torch.equal(before, torch.cuda.default_generators[0].get_state()),
          "recap's first use inside a capture left the eager generator state as it was")
    check(gen.fast and rt.backend()["ops"] == "extension",
          f"after a first use inside a capture the operations run in recap._C: {rt.backend()}")
    g.replay()
    a = y.clone()
    g.replay()
    check(not torch.equal(a, y), "the graph captured around recap's first use draws fresh "
          "numbers at each replay")
    a = run_eager(rec, False, 0, 0, checkpointed=False, steps=2)
    b = run_eager(meg, False, 0, 0, checkpointed=False, steps=2)
    check(same(a, b), "value-mode training steps after it equal Megatron's module")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "identity"
    {"identity": identity, "autoreg": autoreg, "bench": bench, "unmodified": unmodified,
     "capture": capture_ops, "lstm": lstm, "threads": threads, "firstuse": firstuse}[what]()
    if FAILS:
        print(f"megatron_gpu {what}: {len(FAILS)} check(s) failed")
        sys.exit(1)
    print(f"megatron_gpu {what}: all checks hold")
