# SPDX-License-Identifier: Apache-2.0
"""CPU checks of recap_torch (no GPU needed): the Philox reference against Random123's known
answers and against include/recap/philox.h compiled with cc, the Triton dropout kernel run by
Triton's interpreter against the reference (by value and through captured slot pointers), the
tracker bindings, and recap's region API driving torch's autograd on CPU tensors (recompute vs
plain: bit-equal losses and masks, storage released and rebuilt, plain regions).

Usage: RECAP_LIB=/path/to/librecap.so python3 check_cpu.py   (needs torch and triton installed)
"""
import os
import shutil
import subprocess
import sys
import tempfile

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import recap_torch as rt  # noqa: E402
import train  # noqa: E402

results = []


def check(ok, text):
    results.append(bool(ok))
    print(f"{'ok  ' if ok else 'FAIL'}  {text}", flush=True)


def check_kat():
    kat = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
           ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
           ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
            (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    check(all(rt.philox4x32_10(c, k) == want for c, k, want in kat),
          "Philox4x32-10 reference == Random123 known answers")


CASES = [(0, 0, 0, 9), (1234, 7, 13, 11), (0x1234_5678_9ABC_DEF1, 2**33 + 5, (5 << 34) + 6, 10),
         (42, 2**64 - 1, 2**64 - 8, 12), (67280421310721, 1, 2**64 - 1, 7)]

C_PROG = r"""
#include <stdio.h>
#include <stdlib.h>
#include "recap/philox.h"
int main(int argc, char **argv) {
    recap_philox_stream_t st;
    unsigned long long seed = strtoull(argv[1], 0, 0), sub = strtoull(argv[2], 0, 0),
                       off = strtoull(argv[3], 0, 0);
    int n = atoi(argv[4]), i;
    recap_philox_init(seed, sub, off, &st);
    for (i = 0; i < n; i++) printf("%u\n", recap_philox_next(&st));
    return 0;
}
"""


def check_header():
    cc = shutil.which("cc") or shutil.which("gcc")
    inc = os.path.join(HERE, "..", "..", "include")
    if cc is None or not os.path.exists(os.path.join(inc, "recap", "philox.h")):
        print("skip  philox.h comparison (no cc or header)")
        return
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "p.c"), os.path.join(d, "p")
        open(src, "w").write(C_PROG)
        subprocess.run([cc, "-O1", "-I", inc, src, "-o", exe], check=True)
        ok = True
        for seed, sub, off, n in CASES:
            out = subprocess.run([exe, str(seed), str(sub), str(off), str(n)], check=True,
                                 capture_output=True, text=True).stdout.split()
            ok = ok and [int(w) for w in out] == rt.curand_words(seed, sub, off, n)
    check(ok, f"curand_words == recap_philox_init/next of include/recap/philox.h "
              f"({len(CASES)} cases: word skips, 64-bit seeds, subsequences and offsets)")


HOST_SHIM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#define __global__
struct dim { unsigned x; };
static dim blockIdx, threadIdx, blockDim;
#include "kernel.cu"
int main(int argc, char **argv) {
    long long n = atoll(argv[1]);
    unsigned long long seed = strtoull(argv[2], 0, 0), off = strtoull(argv[3], 0, 0);
    unsigned long long base = strtoull(argv[4], 0, 0), rel = strtoull(argv[5], 0, 0);
    int captured = atoi(argv[6]);
    unsigned thresh = (unsigned)strtoul(argv[7], 0, 0);
    float *x = (float *)calloc(n, 4), *y = (float *)calloc(n, 4);
    signed char *m = (signed char *)calloc(n, 1);
    uint64_t slot[2] = {seed, base};
    blockDim.x = 256;
    for (blockIdx.x = 0; blockIdx.x < (n + 1023) / 1024; blockIdx.x++)
        for (threadIdx.x = 0; threadIdx.x < 256; threadIdx.x++)
            recap_dropout_f32((uintptr_t)x, (uintptr_t)y, (uintptr_t)m, seed, off,
                              (uintptr_t)&slot[0], (uintptr_t)&slot[1], rel, captured, thresh,
                              2.0f, n);
    for (long long e = 0; e < n; e++) putchar('0' + m[e]);
    return 0;
}
"""


def check_cuda_source():
    """The CUDA C backend's kernel (recap_torch._CUDA_SRC): compiled by NVRTC when CuPy is
    installed, and compiled for the host with c++ and run against the reference."""
    try:
        from cupy.cuda import nvrtc
        prog = nvrtc.createProgram(rt._CUDA_SRC, "k.cu", [], [])
        try:
            nvrtc.compileProgram(prog, list(rt._cuda_options()) + ["--gpu-architecture=compute_90"])
            check(True, "CUDA C dropout kernel compiles with NVRTC (the CuPy backend)")
        except Exception as e:  # noqa: BLE001
            check(False, f"CUDA C dropout kernel compiles with NVRTC: {e}: "
                         f"{nvrtc.getProgramLog(prog)}")
    except ImportError:
        print("skip  NVRTC compile of the CUDA C kernel (no CuPy)")
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        print("skip  host run of the CUDA C kernel (no c++)")
        return
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "kernel.cu"), "w").write(rt._CUDA_SRC.replace('extern "C"', ""))
        open(os.path.join(d, "shim.cc"), "w").write(HOST_SHIM)
        exe = os.path.join(d, "shim")
        subprocess.run([cxx, "-O1", "-I", rt.include_dir(), "-I", d, os.path.join(d, "shim.cc"),
                        "-o", exe], check=True)
        ok = True
        for n, seed, off, base, rel, cap, p in ((4099, 3952, 16, 0, 0, 0, 0.3),
                                                (1001, 0x1234_5678_9ABC_DEF1, (7 << 34) + 8, 0,
                                                 0, 0, 0.5),
                                                (2050, 0x0FED_CBA9_8765_4321, 0, (3 << 34) + 8,
                                                 40, 1, 0.5)):
            out = subprocess.run([exe, str(n), str(seed), str(off), str(base), str(rel),
                                  str(cap), str(rt.dropout_threshold(p))], check=True,
                                 capture_output=True, text=True).stdout
            want = rt.reference_keep(seed, base + rel if cap else off, n, p)
            ok = ok and [c == "1" for c in out] == want
    check(ok, "CUDA C dropout kernel (host-compiled) == reference: by value, 64-bit, captured")


def check_kernel(tracker):
    n = 4099
    x = torch.randn(n)
    y, m = torch.empty_like(x), torch.empty(n, dtype=torch.int8)
    with tracker.fork(rt.MODEL_PARALLEL):
        a = tracker.reserve(4)
    rt.launch_dropout(x, y, a, 0.3, m)
    ref = rt.reference_keep(a.seed, a.offset, n, 0.3)
    check(m.bool().tolist() == ref and
          torch.equal(y, torch.where(torch.tensor(ref), x * (1.0 / 0.7), 0.0)),
          f"Triton kernel (interpreted) == reference, reserved by value {a}")
    big = rt.PhiloxArgs(seed=0x1234_5678_9ABC_DEF1, offset=(7 << 34) + 4 * 12345)
    rt.launch_dropout(x, y, big, 0.5, m)
    check(m.bool().tolist() == rt.reference_keep(big.seed, big.offset, n, 0.5),
          "Triton kernel == reference with 64-bit seed and offset")
    slot = torch.tensor([0x0FED_CBA9_8765_4321, (3 << 34) + 8], dtype=torch.int64)
    cap = rt.PhiloxArgs(captured=1, offset_intragraph=40)
    rt.launch_dropout(x, y, cap, 0.5, m, slot=(slot[0:1], slot[1:2]))
    check(m.bool().tolist() == rt.reference_keep(0x0FED_CBA9_8765_4321, (3 << 34) + 48, n, 0.5),
          "Triton kernel == reference with captured arguments (slot seed, base + intragraph)")
    keep = sum(rt.reference_keep(1, 0, 40000, 0.25)) / 40000
    check(abs(keep - 0.75) < 0.01, f"keep rate {keep:.4f} for p = 0.25")


def check_tracker(tracker):
    ranks = rt.ParallelRanks(tp=(1, 2), ep=(1, 2), gtp_remat=(0, 2))
    tracker.seed_parallel(100, ranks)
    st = tracker.states()
    check(st[rt.MODEL_PARALLEL] == (100 + 2718 + 1, 0) and st[rt.DATA_PARALLEL] == (100, 0) and
          st[rt.EXPERT_PARALLEL] == (100 + 1024 + 100, 0),
          f"seed_parallel with ranks (tp 1/2, ep 1/2): {st}")
    with tracker.fork(rt.MODEL_PARALLEL):
        inner = tracker.current_name()
        tracker.reserve(8)
    check(inner == rt.MODEL_PARALLEL and tracker.current_name() == rt.DEFAULT and
          tracker.states()[rt.MODEL_PARALLEL] == (2819, 8),
          "fork/unfork: the forked state advanced")
    try:
        with tracker.fork("no-such-rng"):
            pass
        check(False, "fork of an unknown name refused")
    except rt.RecapError as e:
        check("fork(no-such-rng)" in str(e), f"fork of an unknown name refused: {e}")
    # Unforking out of order is refused by recap (tokens) and changes nothing.
    outer = tracker.fork_begin(rt.MODEL_PARALLEL)
    inner = tracker.fork_begin(rt.DATA_PARALLEL)
    try:
        tracker.fork_end(outer)
        check(False, "unfork of the outer fork first refused")
    except rt.RecapError as e:
        check(e.status == rt.RECAP_ERR_STATE and tracker.current_name() == rt.DATA_PARALLEL,
              "unfork of the outer fork first refused (RECAP_ERR_STATE), nothing changed")
    tracker.fork_end(inner)
    tracker.fork_end(outer)
    check(tracker.current_name() == rt.DEFAULT, "forks ended innermost first")


def check_regions(host, tracker):
    torch.manual_seed(0)
    d, hidden, layers, batch, steps = 32, 64, 2, 8, 3
    net_a = train.Net(d, hidden, layers, host, tracker, recompute=True)
    net_b = train.Net(d, hidden, layers, host, tracker, recompute=False)
    w0 = {k: v.clone() for k, v in net_a.state_dict().items()}
    for n in (net_a, net_b):
        n.blocks[0].make_probes(batch)
    gen = torch.Generator().manual_seed(1)
    xs = [torch.randn(batch, d, generator=gen) for _ in range(steps)]
    ts = [torch.randn(batch, d, generator=gen) for _ in range(steps)]
    ranks = rt.ParallelRanks()
    la, pa = train.run_eager(net_a, w0, tracker, ranks, xs, ts)
    lb, pb = train.run_eager(net_b, w0, tracker, ranks, xs, ts)
    check(torch.equal(la, lb), f"regions: losses with recompute == without, bit-equal "
                               f"({la.tolist()})")
    check(all(torch.equal(p["first"], p["recompute"]) for p in pa) and
          train.same_probes(pa, pb, "first") and train.same_probes(pa, pb, "res"),
          "regions: each recompute redrew its forward's mask (RNG snapshot restored)")
    check(all(not torch.equal(pa[i]["first"], pa[i + 1]["first"]) for i in range(steps - 1)),
          "regions: masks differ from step to step")
    check(host.stats["first"] == host.stats["recompute"] == layers * steps and
          host.stats["triggers"] == layers * steps and not host.bufs and not host.regions,
          f"regions: {host.stats}; nothing left behind")

    # Release frees the output's storage; the trigger rebuilds it before it is needed.
    region = rt.RecomputeRegion(host, tracker)
    u = torch.randn(4, 16, requires_grad=True)
    h = region.checkpoint(lambda v: torch.nn.functional.gelu(v) * 2, u)
    ref = (torch.nn.functional.gelu(u) * 2).detach()
    view = h[1:3]
    z = h * 3
    z2 = z.sum(dim=1)
    region.discard_output_and_register_recompute(z)
    released = h.untyped_storage().nbytes() == 0 and region.state() == "RELEASED"
    seen = {}
    z.register_hook(lambda g: seen.setdefault("state", None))
    z2.sum().backward()
    check(released and torch.equal(h, ref) and torch.equal(view, ref[1:3]),
          "regions: output storage released, rebuilt in place (views see it), same values")
    gelu_grad = torch.func.grad(lambda v: (torch.nn.functional.gelu(v) * 6).sum())(u.detach())
    check(torch.allclose(u.grad, gelu_grad), "regions: gradient routed through the rebuilt graph")

    # No input needs a gradient: a plain call, nothing kept or released.
    region = rt.RecomputeRegion(host, tracker)
    with torch.no_grad():
        out = region.checkpoint(lambda v: v + 1, torch.zeros(3))
    region.discard_output_and_register_recompute(out)
    check(torch.equal(out, torch.ones(3)) and region.handle is None and not host.bufs,
          "regions: a plain region runs once and keeps nothing")

    # A failing function surfaces as a Python exception, and the region is not left recorded.
    region = rt.RecomputeRegion(host, tracker)
    try:
        region.checkpoint(lambda v: 1 / 0, torch.zeros(3, requires_grad=True))
        check(False, "regions: an exception in the function reaches the caller")
    except RuntimeError as e:
        check("ZeroDivisionError" in repr(e.__cause__), "regions: an exception in the function "
                                                         "reaches the caller")
    region.close()
    check(not host.bufs, "regions: closed regions leave no buffers")


def main():
    R = rt.Runtime.get()
    print(f"librecap {R.version} from {R.path}; torch {torch.__version__}; "
          f"triton {rt.triton.__version__} (interpreter)")
    check_kat()
    check_header()
    check_cuda_source()
    tracker = rt.Tracker(device=rt.RECAP_DEVICE_HOST)
    tracker.seed_parallel(train.SEED)
    check_kernel(tracker)
    check_tracker(tracker)
    host = rt.TorchHost(R)
    check_regions(host, tracker)
    tracker.close()
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
