# SPDX-License-Identifier: Apache-2.0
"""recap.megatron against Megatron-Core's own tensor_parallel.random in a real two-process
torch.distributed world: backend gloo, both ranks on cuda:0, Megatron's parallel_state initialized
with tensor_model_parallel_size=2 (scripts/gpu-check).

    python megatron_2ranks.py          (PYTHONPATH with recap, megatron-core; RECAP_LIB set)

It spawns the two ranks itself. Each rank runs the same script once through Megatron's module and
once through recap.megatron, parallel_state destroyed and initialized again between them:
model_parallel_cuda_manual_seed(seed) with no ranks given (they come from parallel_state), draws
under forks of the model-, data- and expert-parallel states, and
checkpoint(fn, True, x, w) (distribute_saved_activations: x is split across the TP group in the
forward and gathered back with Megatron's gather_split_1d_tensor in the backward) whose fn draws
dropout inside a fork, forward and backward. The ranks save what they got; this process then
compares, bit for bit, everything drawn, the outputs, the gradients and the final tracker states of
the two modules per rank, and across ranks what must differ (model-/expert-parallel states: their
seeds hold the rank) or agree (data-parallel state, default generator).

Why gloo: NCCL refuses two ranks of one communicator on one device (ncclCommInitRank: "Duplicate
GPU detected : rank 1 and rank 0 both on CUDA device ...", ncclInvalidUsage). torch's gloo backend
serves CUDA tensors itself: torch.distributed.all_gather_into_tensor, the collective Megatron's
gather calls, goes to ProcessGroupGloo::_allgather_base, which chunks the output and runs its CUDA
allgather (copies through pinned host memory on side streams, the caller's stream waits on them).
Megatron's code path is unchanged; the only wrappers are recorders that call the real function:
around the module global megatron.core.tensor_parallel.utils.dist_all_gather_func that both
modules' gathers call, and around torch.distributed's collectives, so every collective that ran
is printed and compared. Exit status 0 when every check holds.
"""
import datetime
import os
import socket
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2
SEED = 1234
X_SHAPE = (32, 64)  # the checkpointed input: 2048 elements, 1024 kept per rank
W_SHAPE = (64, 48)

FAILS = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILS.append(what)

# ------------------------------------------------------------------ in each rank


# Every collective torch.distributed offers, wrapped where code looks it up at call time.
COLLECTIVES = ("all_gather_into_tensor", "_all_gather_base", "all_gather", "all_gather_object",
               "all_reduce", "reduce", "broadcast", "broadcast_object_list", "reduce_scatter",
               "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter",
               "send", "recv", "isend", "irecv", "barrier")


class CollectiveLog:
    """Records each collective call and makes the real one: Megatron's all-gather (the module
    global megatron.core.tensor_parallel.utils.dist_all_gather_func, bound at import, that its
    gather looks up at each call) and torch.distributed's functions."""

    def __init__(self, utils):
        self.calls = []
        self._wrap(utils, "dist_all_gather_func", "megatron.core.tensor_parallel.utils")
        for name in COLLECTIVES:
            if hasattr(dist, name):
                self._wrap(dist, name, "torch.distributed")

    def _wrap(self, owner, attr, where):
        real = getattr(owner, attr)

        def recorded(*args, **kwargs):
            tensors = [a for a in list(args) + list(kwargs.values()) if torch.is_tensor(a)]
            group = kwargs.get("group")
            if group is None:
                group = next((a for a in args if isinstance(a, dist.ProcessGroup)),
                             dist.group.WORLD)
            try:
                pg = type(group._get_backend(tensors[0].device)).__name__
            except Exception as e:  # noqa: BLE001 - only for the report
                pg = f"? ({type(e).__name__})"
            self.calls.append({
                "fn": getattr(real, "__name__", attr), "via": where,
                "backend": str(dist.get_backend(group)), "pg": pg,
                "group": list(dist.get_process_group_ranks(group)),
                "device": str(tensors[0].device) if tensors else "-",
                "dtype": str(tensors[0].dtype) if tensors else "-",
                "numels": [int(t.numel()) for t in tensors]})
            return real(*args, **kwargs)
        setattr(owner, attr, recorded)


def values(states):
    """name -> a CPU copy of the state's 16 bytes (tensors, or torch.Generator objects)."""
    out = {}
    for n, v in states.items():
        if isinstance(v, torch.Generator):
            v = v.get_state()
        out[n] = v.detach().to("cpu").clone()
    return out


def seeded_state(seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return g.get_state()


def checkpoint_inputs(rank, differ):
    """x (equal on both ranks, as Megatron's callers give it, or differing by rank so that what
    the gather brings back shows the other rank's data) and w."""
    g = torch.Generator(device="cuda").manual_seed(11)
    x = torch.randn(*X_SHAPE, device="cuda", generator=g)
    w = torch.randn(*W_SHAPE, device="cuda", generator=g)
    if differ:
        x = x + (rank + 1)
    return x, w


def script(mod, graph_safe, ckpt, rank, log):
    """One run through ``mod``: seeding, draws under forks, the block (plain, or checkpointed
    with distribute_saved_activations); returns everything, on the CPU, by name."""
    F = torch.nn.functional
    MP, DP, EP = (mod._MODEL_PARALLEL_RNG_TRACKER_NAME, mod._DATA_PARALLEL_RNG_TRACKER_NAME,
                  mod._EXPERT_PARALLEL_RNG_TRACKER_NAME)
    out = {}
    n0 = len(log.calls)
    torch.manual_seed(7)
    mod.model_parallel_cuda_manual_seed(SEED, use_cudagraphable_rng=graph_safe,
                                        force_reset_rng=True)
    t = mod.get_cuda_rng_tracker()
    for n, v in values(t.get_states()).items():
        out[f"seeded.{n}"] = v
    out["seeded.default"] = torch.cuda.get_rng_state()
    ones = torch.ones(4096, device="cuda")
    with t.fork(MP):
        out["draw.mp.dropout"] = F.dropout(ones, 0.3)
        out["draw.mp.randn"] = torch.randn(257, device="cuda")
    with t.fork(DP):
        out["draw.dp.dropout"] = F.dropout(ones, 0.3)
    with t.fork(EP):
        out["draw.ep.rand"] = torch.rand(300, device="cuda")
    with t.fork(MP):
        out["draw.mp.outer"] = F.dropout(ones, 0.5)
        with t.fork(DP):
            out["draw.dp.nested"] = torch.randn(129, device="cuda")
            with t.fork(EP):
                out["draw.ep.nested"] = torch.randn(129, device="cuda")
        out["draw.mp.after"] = torch.randn(129, device="cuda")
    out["draw.default.randn"] = torch.randn(100, device="cuda")

    def block(x, w):  # dropout inside a model-parallel fork, then on the default generator
        with t.fork(MP):
            h = F.dropout(torch.relu(x @ w), 0.3)
        return F.dropout(torch.tanh(h), 0.1)

    if ckpt is not None:
        x0, w0 = checkpoint_inputs(rank, ckpt == "differ")
        x = x0.clone().requires_grad_(True)
        w = w0.clone().requires_grad_(True)
        if ckpt == "plain":
            y = block(x, w)
        else:
            y = mod.checkpoint(block, True, x, w)
            out["ckpt.kept"] = x.detach().clone()  # the forward left this rank's 1-D chunk
        loss = (y * y).sum()
        loss.backward()
        out["ckpt.x_in"] = x0
        out["ckpt.y"] = y.detach()
        out["ckpt.loss"] = loss.detach()
        out["ckpt.grad_x"] = x.grad
        out["ckpt.grad_w"] = w.grad
        out["ckpt.x_after"] = x.detach().clone()  # the backward gathered it back
    with t.fork(MP):
        out["draw.mp.last"] = torch.randn(65, device="cuda")
    for n, v in values(t.get_states()).items():
        out[f"final.{n}"] = v
    out["final.default"] = torch.cuda.get_rng_state()
    out["final.cpu"] = torch.get_rng_state()
    torch.cuda.synchronize()
    return {k: v.detach().to("cpu").clone() for k, v in out.items()}, log.calls[n0:]


RUNS = (("value, plain", False, "plain"), ("value, checkpoint", False, "same"),
        ("value, checkpoint, x differs by rank", False, "differ"),
        ("graph-safe, forks only", True, None))


def rank_main(rank, port, outdir):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one host: the loopback interface
    torch.cuda.set_device(0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=120))
    import megatron.core.parallel_state as ps
    import megatron.core.tensor_parallel.random as meg
    import megatron.core.tensor_parallel.utils as tpu
    import recap.megatron as rec
    assert meg is not rec and meg.__name__ == "megatron.core.tensor_parallel.random", meg
    log = CollectiveLog(tpu)
    res = {"rank": rank, "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
           "world_backend": str(dist.get_backend())}
    for name, mod in (("megatron", meg), ("recap", rec)):
        ps.initialize_model_parallel(tensor_model_parallel_size=WORLD,
                                     distributed_timeout_minutes=2)
        assert ps.get_tensor_model_parallel_world_size() == WORLD
        res[f"{name}.ranks"] = {
            "tp": ps.get_tensor_model_parallel_rank(), "ep": ps.get_expert_model_parallel_rank(),
            "etp": ps.get_expert_tensor_parallel_rank(), "dp": ps.get_data_parallel_rank(),
            "tp_group": list(dist.get_process_group_ranks(ps.get_tensor_model_parallel_group())),
            "tp_backend": str(dist.get_backend(ps.get_tensor_model_parallel_group()))}
        for label, graph_safe, ckpt in RUNS:
            res[f"{name}/{label}"] = script(mod, graph_safe, ckpt, rank, log)
        ps.destroy_model_parallel()
    # Megatron's arithmetic with this rank as TP and expert-TP rank, expert-model rank 0.
    res["expected"] = {meg._DATA_PARALLEL_RNG_TRACKER_NAME: seeded_state(SEED),
                       meg._MODEL_PARALLEL_RNG_TRACKER_NAME: seeded_state(SEED + 2718 + rank),
                       meg._EXPERT_PARALLEL_RNG_TRACKER_NAME: seeded_state(SEED + 1024 + rank),
                       "default": seeded_state(SEED)}
    res["names"] = (meg._MODEL_PARALLEL_RNG_TRACKER_NAME, meg._DATA_PARALLEL_RNG_TRACKER_NAME,
                    meg._EXPERT_PARALLEL_RNG_TRACKER_NAME)
    torch.save(res, os.path.join(outdir, f"rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()

# ------------------------------------------------------------------ this process


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(outdir, limit_s=240):
    """Spawns the two ranks; True when both ended cleanly within limit_s."""
    ctx = mp.start_processes(rank_main, args=(free_port(), outdir), nprocs=WORLD, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + limit_s
    try:
        while not ctx.join(timeout=5):
            if time.monotonic() > deadline:
                for p in ctx.processes:  # the two processes started here, by object
                    if p.is_alive():
                        p.terminate()
                check(False, f"the two ranks ended within {limit_s} s")
                return False
    except Exception as e:  # noqa: BLE001 - a rank's exception, with its traceback
        print(str(e))
        check(False, f"both ranks ran to the end ({type(e).__name__})")
        return False
    return True


def differing(a, b):
    keys = sorted(set(a) | set(b))
    return [k for k in keys if k not in a or k not in b or not torch.equal(a[k], b[k])]


def fmt(c):
    return (f"{c['via']}: {c['fn']}({c['device']} {c['dtype']}, numels {c['numels']}, "
            f"group {c['group']}, backend {c['backend']}: {c['pg']})")


def compare(res):
    r0 = res[0]
    MP, DP, EP = r0["names"]
    print(f"info  torch {r0['torch']}, {r0['device']}; world: {WORLD} processes, backend "
          f"{r0['world_backend']}, both on cuda:0")
    for r, R in enumerate(res):
        for mod in ("megatron", "recap"):
            ranks = R[f"{mod}.ranks"]
            check(ranks["tp"] == r and ranks["etp"] == r and ranks["ep"] == 0
                  and ranks["tp_group"] == [0, 1] and ranks["tp_backend"] == "gloo",
                  f"rank {r}, {mod}: parallel_state gives TP rank {ranks['tp']}, expert-TP "
                  f"{ranks['etp']}, expert-model {ranks['ep']}, TP group {ranks['tp_group']} "
                  f"({ranks['tp_backend']})")
    for r, R in enumerate(res):
        for label, graph_safe, ckpt in RUNS:
            (m, mc), (c, cc) = R[f"megatron/{label}"], R[f"recap/{label}"]
            bad = differing(m, c)
            check(not bad, f"rank {r}, {label}: {len(m)} tensors (seeded and final states, "
                  f"draws{', output, loss, gradients' if ckpt else ''}) equal Megatron's, bit "
                  f"for bit{'' if not bad else ': differ ' + ', '.join(bad[:6])}")
            want = R["expected"]
            got_m = {n: m.get(f"seeded.{n}") for n in (MP, DP, EP)}
            got_m["default"] = m.get("seeded.default")
            got_c = {n: c.get(f"seeded.{n}") for n in (MP, DP, EP)}
            got_c["default"] = c.get("seeded.default")
            ok = all(got_m[k] is not None and torch.equal(got_m[k], want[k]) and
                     got_c[k] is not None and torch.equal(got_c[k], want[k]) for k in want)
            check(ok, f"rank {r}, {label}: seeded states are Megatron's arithmetic with the ranks "
                  f"from parallel_state (data {SEED}, model {SEED}+2718+{r}, expert "
                  f"{SEED}+1024+{r}), both modules")
            if ckpt in ("same", "differ"):
                for mod, calls in (("megatron", mc), ("recap", cc)):
                    for c_ in calls:
                        print(f"info  rank {r}, {label}, {mod}: {fmt(c_)}")
                n = X_SHAPE[0] * X_SHAPE[1]
                one = (len(mc) == 1 and mc[0]["fn"] == "all_gather_into_tensor"
                       and mc[0]["via"] == "megatron.core.tensor_parallel.utils"
                       and mc[0]["backend"] == "gloo" and mc[0]["device"].startswith("cuda")
                       and mc[0]["group"] == [0, 1] and mc[0]["numels"] == [n, n // 2])
                check(one and mc == cc, f"rank {r}, {label}: the only collective of Megatron's "
                      "run is its backward's all_gather_into_tensor of CUDA tensors over the gloo "
                      f"TP group; recap's run makes the same ({len(mc)} and {len(cc)} calls)")
                for mod, o in (("megatron", m), ("recap", c)):
                    kept = o["ckpt.kept"]
                    check(kept.shape == (n // 2,) and torch.equal(
                        kept, o["ckpt.x_in"].flatten()[r * n // 2:(r + 1) * n // 2]),
                        f"rank {r}, {label}, {mod}: the forward kept this rank's chunk of x "
                        f"({tuple(kept.shape)})")
            if ckpt in (None, "plain"):
                for mod, calls in (("megatron", mc), ("recap", cc)):
                    for c_ in calls:
                        print(f"info  rank {r}, {label}, {mod}: {fmt(c_)}")
                check(not mc and not cc, f"rank {r}, {label}: no collective ran (either module)")
        plain_m, plain_c = R["megatron/value, plain"][0], R["recap/value, plain"][0]
        for mod, plain in (("megatron", plain_m), ("recap", plain_c)):
            same = R[f"{mod}/value, checkpoint"][0]
            bad = differing(plain, {k: v for k, v in same.items() if k != "ckpt.kept"})
            check(not bad, f"rank {r}, {mod}: checkpoint(..., True) with x gathered back equals "
                  "the block not checkpointed (output, loss, gradients, final states)"
                  f"{'' if not bad else ': differ ' + ', '.join(bad[:6])}")
    # Across ranks: x gathered back is rank 0's first half and rank 1's second half, on both.
    half = X_SHAPE[0] * X_SHAPE[1] // 2
    lab = "value, checkpoint, x differs by rank"
    for mod in ("megatron", "recap"):
        xs = [res[r][f"{mod}/{lab}"][0]["ckpt.x_in"].flatten() for r in range(WORLD)]
        mixed = torch.cat([xs[0][:half], xs[1][half:]]).view(X_SHAPE)
        check(not torch.equal(xs[0], xs[1]) and all(
            torch.equal(res[r][f"{mod}/{lab}"][0]["ckpt.x_after"], mixed) for r in range(WORLD)),
            f"{mod}, {lab}: after the backward x is rank 0's first half and rank 1's second "
            "half on both ranks (the gather carried the other rank's data)")
        for r in range(WORLD):
            same = res[r][f"{mod}/value, checkpoint"][0]
            check(torch.equal(same["ckpt.x_after"], same["ckpt.x_in"]),
                  f"rank {r}, {mod}, value, checkpoint: x gathered back equals x")
    # Across ranks: what holds the rank differs, what does not agrees.
    for label, graph_safe, ckpt in RUNS:
        for mod in ("megatron", "recap"):
            a, b = res[0][f"{mod}/{label}"][0], res[1][f"{mod}/{label}"][0]
            differ = [f"seeded.{MP}", f"seeded.{EP}", "draw.mp.dropout", "draw.mp.randn",
                      "draw.ep.rand", "draw.mp.outer", "draw.ep.nested", "draw.mp.after",
                      "draw.mp.last", f"final.{MP}", f"final.{EP}"]
            agree = [f"seeded.{DP}", "seeded.default", "draw.dp.dropout", "draw.dp.nested",
                     "draw.default.randn", f"final.{DP}", "final.default", "final.cpu"]
            if ckpt in ("plain", "same"):  # equal x, a dropout mask in a model-parallel fork
                differ += ["ckpt.y", "ckpt.loss", "ckpt.grad_x", "ckpt.grad_w"]
            bad = [k for k in differ if torch.equal(a[k], b[k])] + \
                [k for k in agree if not torch.equal(a[k], b[k])]
            block = " (the block's output and gradients too)" if ckpt in ("plain", "same") else ""
            check(not bad, f"{mod}, {label}: across ranks the model- and expert-parallel states "
                  f"and what they drew differ{block}, the data-parallel and default ones agree"
                  f"{'' if not bad else ': ' + str(bad)}")


def main():
    try:
        mode = subprocess.run(["nvidia-smi", "--query-gpu=compute_mode", "--format=csv,noheader",
                               "-i", "0"], capture_output=True, text=True, timeout=20)
        print(f"info  GPU 0 compute mode: {mode.stdout.strip() or mode.stderr.strip()}")
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"info  nvidia-smi: {e}")
    with tempfile.TemporaryDirectory() as outdir:
        if launch(outdir):
            res = [torch.load(os.path.join(outdir, f"rank{r}.pt"), weights_only=False)
                   for r in range(WORLD)]
            compare(res)
    if FAILS:
        print(f"megatron_2ranks: {len(FAILS)} check(s) failed")
        sys.exit(1)
    print("megatron_2ranks: all checks hold")


if __name__ == "__main__":
    main()
