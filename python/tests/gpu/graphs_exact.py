# SPDX-License-Identifier: Apache-2.0
"""Graphs on = graphs off, on a GPU (scripts/gpu-check): training with CUDA graphs reproduces
eager training bit for bit, dropout included, with recap's exact-capture scope.

    python graphs_exact.py

1. torch.cuda.make_graphed_callables (recap.torch.install() makes torch's own function recap's)
   on an MLP with two dropouts and on a transformer encoder layer (fp32): 20 training steps
   graphed and eager, losses and parameters compared; the anchor is torch's own function.
2. A hand-written warm-up and torch.cuda.graph inside ``with recap.torch.warmup():``: K replays
   equal K eager steps.
3. Checkpoint/restart: the generators and the model saved at step N of an eager run, restored
   into a graphed run: the remaining steps equal the eager run's.
4. The scope's costs: per-replay time with and without it, entering+leaving it from Python.
Exit status 0 when every check holds.
"""
import ctypes
import os
import statistics
import subprocess
import sys
import time

# Eager training must first be reproducible by itself: cuBLAS picks its reduction order by
# workspace, and graph capture runs on other streams, so the workspace is fixed as PyTorch's
# reproducibility notes ask (RECAP_GRAPHS_DETERMINISTIC=0 leaves torch's defaults).
DETERMINISTIC = os.environ.get("RECAP_GRAPHS_DETERMINISTIC", "1") != "0"
if DETERMINISTIC:
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402

if DETERMINISTIC:
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False

import recap.megatron  # noqa: F401 - trackers; install() below
import recap.torch as rt

FAILS = []
STEPS = 20


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILS.append(what)


class MLP(torch.nn.Module):
    """Two dropouts: the first draws from torch's default generator, the second inside a fork of
    recap.megatron's tracker (graph-safe states, as Megatron's attention dropout draws)."""

    def __init__(self, p=0.1):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 64)
        self.p = p

    def forward(self, x):
        h = torch.nn.functional.dropout(torch.relu(self.fc1(x)), self.p, training=True)
        with recap.megatron.get_cuda_rng_tracker().fork():
            return torch.nn.functional.dropout(self.fc2(h), self.p, training=True)


def seed_all():
    """torch's default generator and the tracker's states, the same for every run."""
    recap.megatron.model_parallel_cuda_manual_seed(
        1234, use_cudagraphable_rng=True, tp_rank=0, ep_rank=0, etp_rank=0, force_reset_rng=True)


def block(p=0.1):
    return torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                            dropout=p, batch_first=True)


def data(shape):
    g = torch.Generator(device="cuda").manual_seed(3)
    return torch.randn(*shape, device="cuda", generator=g)


def train(make, shape, graphed, graph_fn, steps=STEPS, start=None):
    """Losses of `steps` SGD steps, the final parameters and the first step's gradients.
    start: a checkpoint() to resume from."""
    torch.manual_seed(0)
    model = make().cuda()
    seed_all()
    if start is not None:
        model.load_state_dict(start[0])
        torch.cuda.set_rng_state(start[1])
        recap.megatron.get_cuda_rng_tracker().set_states(start[2])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = data(shape)
    run = graph_fn(model, (x,)) if graphed else model
    losses, grads1 = [], None
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = (run(x) ** 2).mean()
        loss.backward()
        if grads1 is None:  # (grads go to None each step, as in torch's make_graphed_callables
            # example: with zeroed grads kept, even dropout-0 runs through torch's own graphs,
            # recap not involved, parted from eager at step 3 on the H200)
            grads1 = [p.grad.detach().clone() for p in model.parameters()]
        opt.step()
        losses.append(loss.detach().clone())
    return torch.stack(losses), [p.detach().clone() for p in model.parameters()], grads1


def equal(a, b):
    return torch.equal(a[0], b[0]) and all(torch.equal(p, q) for p, q in zip(a[1], b[1]))


def first_diff(a, b):
    d = (a[0] != b[0]).nonzero()
    return int(d[0]) + 1 if len(d) else None


def explain(name, a, b):
    """Where two runs part: the first step whose loss differs, and the first step's gradients."""
    if equal(a, b):
        return
    gd = [float((x - y).abs().max()) for x, y in zip(a[2], b[2])]
    print(f"info  {name}: losses differ from step {first_diff(a, b)}; step-1 gradients' largest "
          f"differences per parameter {['%.3g' % v for v in gd]}")


def graphed_training():
    torch_fn = rt._orig_make_graphed_callables or torch.cuda.make_graphed_callables
    print(f"info  deterministic settings: {DETERMINISTIC} "
          f"(CUBLAS_WORKSPACE_CONFIG={os.environ.get('CUBLAS_WORKSPACE_CONFIG')})")
    base = (train(MLP, (32, 64), False, None), train(MLP, (32, 64), False, None))
    explain("baseline", *base)
    check(equal(*base), "baseline: two eager runs are identical")
    for name, make, shape in (("MLP with two dropouts", MLP, (32, 64)),
                              ("transformer encoder layer, dropout 0.1", block, (8, 16, 64))):
        eager = train(make, shape, False, None)
        ours = train(make, shape, True, torch.cuda.make_graphed_callables)
        anchor = train(make, shape, True, torch_fn)
        check(equal(eager, ours), f"{name}: {STEPS} steps graphed (recap) = eager, losses and "
              "parameters bit for bit")
        explain(f"{name}, recap", eager, ours)
        print(f"info  {name}: torch's own make_graphed_callables differs from eager from step "
              f"{first_diff(eager, anchor)} (the anchor)")
        check(not equal(eager, anchor), f"{name}: the anchor differs (the scope is what fixes it)")
    control = (train(lambda: MLP(0.0), (32, 64), False, None),
               train(lambda: MLP(0.0), (32, 64), True, torch_fn))
    check(equal(*control), "control: dropout 0, torch's own graphs = eager")
    explain("control", *control)


def step_graph(model, x, warmups):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with rt.warmup():
        with torch.cuda.stream(s):
            for _ in range(warmups):
                model(x).sum().backward()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = model(x)
            y.sum().backward()
    return g, y


def hand_warmup(k=4, before=2):
    """`before` eager steps, then warm-up and capture inside recap.torch.warmup(), then k
    replays; the reference: before + k eager steps of the same model."""
    torch.manual_seed(0)
    m = MLP().cuda()
    x = data((32, 64))
    seed_all()
    with torch.no_grad():
        for _ in range(before):
            m(x)
    g, y = step_graph(m, x, 3)
    replays = []
    for _ in range(k):
        g.replay()
        replays.append(y.detach().clone())
    torch.manual_seed(0)
    e = MLP().cuda()
    seed_all()
    with torch.no_grad():
        eager = [e(x) for _ in range(before + k)][before:]
    check(all(torch.equal(a, b) for a, b in zip(replays, eager)),
          f"hand-written warm-up + torch.cuda.graph in recap.torch.warmup() after {before} eager "
          f"steps: {k} replays = the next {k} eager steps")
    check(not torch.equal(replays[0], replays[1]), "replays draw fresh masks")
    return g


def checkpoint(model):
    """What a training checkpoint holds of the model and the generators."""
    return ({k: v.clone() for k, v in model.state_dict().items()}, torch.cuda.get_rng_state(),
            recap.megatron.get_cuda_rng_tracker().get_states())


def restart():
    n = 7
    full = train(MLP, (32, 64), False, None, steps=STEPS)
    torch.manual_seed(0)
    m = MLP().cuda()
    seed_all()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = data((32, 64))
    for _ in range(n):
        opt.zero_grad(set_to_none=True)
        (m(x) ** 2).mean().backward()
        opt.step()
    saved = checkpoint(m)
    rest = train(MLP, (32, 64), True, torch.cuda.make_graphed_callables, steps=STEPS - n,
                 start=saved)
    check(torch.equal(rest[0], full[0][n:]) and
          all(torch.equal(p, q) for p, q in zip(rest[1], full[1])),
          f"checkpoint (model, torch's generator, the tracker's states) at step {n} of an eager "
          f"run, restored into a graphed run: steps {n + 1}..{STEPS} equal the eager run's")


def costs(g):
    def per_replay(graph, reps=2000):
        for _ in range(20):
            graph.replay()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            graph.replay()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1000 / reps

    torch.manual_seed(0)
    m = MLP().cuda()
    x = data((32, 64))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            m(x).sum().backward()
    torch.cuda.current_stream().wait_stream(s)
    plain = torch.cuda.CUDAGraph()
    with torch.cuda.graph(plain):
        m(x).sum().backward()
    pairs = [(per_replay(g), per_replay(plain)) for _ in range(7)]  # interleaved
    with_scope = statistics.median(a for a, _ in pairs)
    without = statistics.median(b for _, b in pairs)
    print(f"| graphed MLP step, us per replay | captured in the scope {with_scope:.2f} | without "
          f"{without:.2f} | ratio {with_scope / without:.3f} |")
    info = (recap._abi.FrameworkInfo * 8)()
    n = ctypes.c_size_t()
    recap._lib.call("recap_framework_generators", info, 8, ctypes.byref(n))
    print("info  framework generators now: " + ", ".join(
        f"{info[i].name.decode()} driven by {info[i].trackers} tracker(s)"
        for i in range(min(n.value, 8))))
    check(rt.generator(0).fast, "torch's generators take their value operations from "
          "recap._C (torch's own C++ calls)")
    for env, what in (({}, "C operations"), ({"RECAP_TORCH_EXT": "0"}, "Python operations")):
        p = subprocess.run([sys.executable, __file__, "scope-cost"], capture_output=True,
                           text=True, env=dict(os.environ, **env), timeout=120)
        line = [x for x in p.stdout.splitlines() if x.startswith("|")]
        print(line[0].replace("| enter+leave", f"| {what}: enter+leave") if line else
              f"FAIL  scope-cost ({what}): {p.stdout[-500:]} {p.stderr[-1500:]}")


def scope_cost():
    """In a process of its own: one tracker with 8 graph-safe states (Megatron's three, five
    more) on torch's default generator; entering and leaving the scope, from Python."""
    def per_call(fn, n=5000):
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            times.append((time.perf_counter() - t0) / n * 1e6)
        return statistics.median(times)

    def scope():
        with rt.exact_capture():
            pass

    seed_all()
    t = recap.megatron.get_cuda_rng_tracker()
    for i in range(5):
        t.add(f"extra-{i}", 100 + i)
    scope()
    floor = per_call(recap._lib.lib().recap_abi_version)  # one ctypes call: the anchor
    took = per_call(scope)
    print(f"| enter+leave the scope from Python, {len(t.get_states())} graph-safe tracker states "
          f"+ torch's default generator | {took:.2f} us | one ctypes call {floor:.2f} us | "
          f"target 2 us |")


if __name__ == "__main__":
    rt.install()
    if sys.argv[1:] == ["scope-cost"]:
        scope_cost()
        sys.exit(0)
    graphed_training()
    g = hand_warmup()
    restart()
    costs(g)
    if FAILS:
        print(f"graphs_exact: {len(FAILS)} check(s) failed")
        sys.exit(1)
    print("graphs_exact: all checks hold")
