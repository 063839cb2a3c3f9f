# SPDX-License-Identifier: Apache-2.0
"""Graphs on = graphs off on Megatron-Core's own CUDA-graph path (scripts/gpu-check).

    python megatron_gpt_graphs.py            # every run below, then the checks
    python megatron_gpt_graphs.py run MODULE GRAPHS DROPOUT   # one run: its losses as JSON

A GPT model (local layer spec, 2 layers, fp32, hidden and attention dropout), one GPU, 30
training steps, with cuda_graph_impl="local" (graphs on) or "none" (graphs off). Megatron's
graphs accumulate weight gradients into param.main_grad, so every parameter has one, as
Megatron's DDP gives it; eager gradients are moved there after each backward, then plain SGD.
After the first step create_cudagraphs() runs, as Megatron's schedules call it; its warm-ups and
captures are what move the generators.

MODULE is "recap" (recap.megatron.install(): create_cudagraphs inside the exact-capture scope) or
"megatron" (Megatron's own tensor_parallel.random). Each run is a process of its own (Megatron's
graph records, memory pool and tracker are process-wide). Checks: with recap, graphed losses =
eager losses bit for bit at dropout 0.1; with Megatron's module they differ from step 2 (the
anchor); at dropout 0 (the control) graphed = eager with either module. recap's check at capture
(on by default) verifies both layers' graphs in every recap graphed run, and fails the run whose
second layer reads a host flag under capture (GPT_HOST_FLAG=1), naming that layer.
"""
import json
import os
import subprocess
import sys

STEPS = 30
SEQ, BATCH, VOCAB = 32, 4, 128


def one_run(module, graphs, dropout):
    import torch

    if module == "recap":
        import recap.megatron
        recap.megatron.install()
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.tensor_parallel import random as mrandom
    from megatron.core.transformer import cuda_graphs
    from megatron.core.transformer.transformer_config import TransformerConfig

    torch.distributed.init_process_group("nccl", init_method="tcp://127.0.0.1:29571",
                                         rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    torch.manual_seed(7)
    mrandom.model_parallel_cuda_manual_seed(1234, use_cudagraphable_rng=True)
    config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4,
                               hidden_dropout=dropout, attention_dropout=dropout,
                               cuda_graph_impl="local" if graphs else "none",
                               params_dtype=torch.float32)
    model = GPTModel(config, get_gpt_layer_local_spec(), vocab_size=VOCAB,
                     max_sequence_length=SEQ).cuda()
    model.train()
    if os.environ.get("GPT_HOST_FLAG") == "1":  # the negative control: layer 2 reads a host
        # flag (another branch under capture), as code testing is_current_stream_capturing()
        def host_flag(mod, args, out):
            s = 2.0 if torch.cuda.is_current_stream_capturing() else 1.0
            return (out[0] * s,) + tuple(out[1:]) if isinstance(out, tuple) else out * s
        model.decoder.layers[1].register_forward_hook(host_flag)
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.main_grad = torch.zeros_like(p)
    cpu = torch.Generator().manual_seed(3)  # data without touching the CUDA generators
    batches = []
    for _ in range(4):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=cpu)
        batches.append((tokens[:, :-1].cuda(), tokens[:, 1:].cuda()))
    pos = torch.arange(SEQ, device="cuda").unsqueeze(0).expand(BATCH, -1).contiguous()
    mask = torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool, device="cuda"),
                      diagonal=1).view(1, 1, SEQ, SEQ)
    losses, marks = [], []
    for step in range(STEPS):
        if step >= 5:  # step time, event-timed, once the graphs exist and have run
            marks.append(torch.cuda.Event(enable_timing=True))
            marks[-1].record()
        inp, labels = batches[step % len(batches)]
        loss = model(inp, pos, mask, labels=labels).float().mean()
        loss.backward()
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    p.main_grad.add_(p.grad)
                    p.grad = None
        if step == 0 and graphs:
            try:
                cuda_graphs.create_cudagraphs()  # what Megatron's schedules call after a step
            except Exception as e:  # noqa: BLE001 - recap's check at capture, reported
                if type(e).__name__ != "GraphMismatch":
                    raise
                print("MISMATCH " + json.dumps(str(e)))
                torch.distributed.destroy_process_group()
                return
            if module == "recap":
                from recap import _verify_megatron
                print("VERIFY " + json.dumps(_verify_megatron.stats))
        with torch.no_grad():
            for p in params:
                p.add_(p.main_grad, alpha=-0.05)
                p.main_grad.zero_()
        losses.append(loss.detach())
    marks.append(torch.cuda.Event(enable_timing=True))
    marks[-1].record()
    torch.cuda.synchronize()
    step_us = sorted(a.elapsed_time(b) * 1000 for a, b in zip(marks, marks[1:]))
    print(f"STEPUS {step_us[len(step_us) // 2]:.1f}")
    out = [float(x) for x in torch.stack(losses).cpu()]
    print("LOSSES " + json.dumps([x.hex() for x in out]))
    if "recap._replay" in sys.modules:  # graphs recap replayed itself vs left to torch
        print("PLANS " + json.dumps(sys.modules["recap._replay"].stats()))
    torch.distributed.destroy_process_group()


PLANS = {}
STEP_US = {}
VERIFY = {}
MISMATCH = {}


def run(module, graphs, dropout, extra_env=None):
    env = dict(os.environ, **(extra_env or {}))
    p = subprocess.run([sys.executable, __file__, "run", module, str(int(graphs)), str(dropout)],
                       capture_output=True, text=True, env=env, timeout=240)
    for line in p.stdout.splitlines():
        if line.startswith("PLANS "):
            PLANS[module, dropout, graphs] = json.loads(line[6:])
        if line.startswith("STEPUS "):
            STEP_US[module, dropout, graphs] = float(line[7:])
        if line.startswith("VERIFY "):
            VERIFY[module, dropout, graphs] = json.loads(line[7:])
        if line.startswith("MISMATCH "):
            MISMATCH[module, dropout, graphs] = json.loads(line[9:])
            return None
    for line in p.stdout.splitlines():
        if line.startswith("LOSSES "):
            return [float.fromhex(x) for x in json.loads(line[7:])]
    sys.stderr.write(p.stdout[-3000:] + p.stderr[-6000:])
    raise RuntimeError(f"run {module} graphs={graphs} dropout={dropout}: exit {p.returncode}")


def first_diff(a, b):
    return next((i + 1 for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def main():
    fails = []

    def check(cond, what):
        print(("ok    " if cond else "FAIL  ") + what)
        if not cond:
            fails.append(what)

    res = {}
    # GPT_CONTROLS=0 leaves out the dropout-0 controls (half the runs) when device time
    # is short.
    controls = os.environ.get("GPT_CONTROLS", "1") != "0"
    for module in ("megatron", "recap"):
        for dropout in ((0.1, 0.0) if controls else (0.1,)):
            for graphs in (False, True):
                res[module, dropout, graphs] = run(module, graphs, dropout)
    e, g = res["recap", 0.1, False], res["recap", 0.1, True]
    check(e == g, f"recap.megatron, dropout 0.1: {STEPS} steps graphed = eager, losses bit for bit"
          + ("" if e == g else f" (first differs at step {first_diff(e, g)})"))
    me, mg = res["megatron", 0.1, False], res["megatron", 0.1, True]
    d = first_diff(me, mg)
    print(f"info  Megatron's own module, dropout 0.1: graphed differs from eager from step {d} "
          "(the anchor)")
    check(d is not None, "the anchor: with Megatron's own module graphed != eager at dropout 0.1")
    check(me == e, "eager runs: recap.megatron = Megatron's module, bit for bit")
    for module in ("megatron", "recap") if controls else ():
        a, b = res[module, 0.0, False], res[module, 0.0, True]
        check(a == b, f"control, dropout 0, {module}: graphed = eager"
              + ("" if a == b else f" (first differs at step {first_diff(a, b)})"))
    print(f"info  losses, step 1/2/{STEPS}: eager {e[0]:.6f} {e[1]:.6f} {e[-1]:.6f}; "
          f"graphed (recap) {g[0]:.6f} {g[1]:.6f} {g[-1]:.6f}; graphed (Megatron) "
          f"{mg[0]:.6f} {mg[1]:.6f} {mg[-1]:.6f}")
    t = {k: STEP_US.get(k) for k in (("megatron", 0.1, True), ("recap", 0.1, True),
                                     ("megatron", 0.1, False), ("recap", 0.1, False))}
    # GPT_TIME_ROUNDS=N (N > 1): N graphed runs of each module in turn, their step times'
    # medians compared (one run each, as above, can differ by a few percent between processes)
    rounds = int(os.environ.get("GPT_TIME_ROUNDS", "1"))
    if rounds > 1 and all(t.values()):
        times = {"megatron": [t["megatron", 0.1, True]], "recap": [t["recap", 0.1, True]]}
        for _ in range(rounds - 1):
            for module in ("megatron", "recap"):
                run(module, True, 0.1)
                times[module].append(STEP_US[module, 0.1, True])
        med = {m: sorted(v)[len(v) // 2] for m, v in times.items()}
        print(f"info  graphed step time, medians of {rounds} runs each, alternated: "
              f"{med['recap']:.1f} us with recap.megatron vs {med['megatron']:.1f} us with "
              f"Megatron's module ({med['recap'] / med['megatron']:.2f}); runs: "
              f"recap {[round(x, 1) for x in times['recap']]}, "
              f"Megatron {[round(x, 1) for x in times['megatron']]}")
    if all(t.values()):
        print(f"info  step time, median of steps 6-{STEPS} (event-timed), dropout 0.1: graphed "
              f"{t['recap', 0.1, True]:.1f} us with recap.megatron vs "
              f"{t['megatron', 0.1, True]:.1f} us with Megatron's module "
              f"({t['recap', 0.1, True] / t['megatron', 0.1, True]:.2f}); eager "
              f"{t['recap', 0.1, False]:.1f} vs {t['megatron', 0.1, False]:.1f} us")
    # recap's check at capture (on by default): every layer's graphs against the layer eager
    for dropout in ((0.1, 0.0) if controls else (0.1,)):
        got = VERIFY.get(("recap", dropout, True))
        check(got == {"verified": 2, "skipped": 0, "mismatches": 0},
              f"check at capture, dropout {dropout}: both layers' forward and backward graphs "
              f"replayed once = the layers run eagerly, bit for bit ({got})")
    run("recap", True, 0.1, {"GPT_HOST_FLAG": "1"})
    msg = MISMATCH.get(("recap", 0.1, True), "")
    check("layer 1 (TransformerLayer 2)" in msg and "output 0" in msg,
          "check at capture: a layer that reads a host flag under capture fails "
          "create_cudagraphs, naming the layer and its output")
    if msg:
        print("info  the message: " + msg.splitlines()[0] + " / " + msg.splitlines()[1].strip())
    plans = PLANS.get(("recap", 0.1, True))
    if plans is not None:
        print(f"info  graphed run with recap.megatron: {plans['plans']} graph(s) replayed by "
              f"recap, {plans['replays']} replays by recap, {plans['to_torch']} by torch, "
              f"{plans.get('advanced_captures')} captures advancing their states themselves, "
              f"{plans.get('slot_writes')} slot writes")
    if fails:
        print(f"megatron_gpt_graphs: {len(fails)} check(s) failed")
        sys.exit(1)
    print("megatron_gpt_graphs: all checks hold")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        one_run(sys.argv[2], sys.argv[3] == "1", float(sys.argv[4]))
    else:
        main()
