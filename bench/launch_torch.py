# SPDX-License-Identifier: Apache-2.0
# PyTorch's per-replay host cost for graphs whose kernels draw from registered CUDA generators
# (register_generator_state), with 1, 4 and 16 generators, against the same graph without RNG,
# measured the same way as bench/launch (host time around replay() calls, medians of batches).
import statistics
import time

import torch


def per_replay_us(g, batches=31, per=200):
    for _ in range(20):
        g.replay()
    torch.cuda.synchronize()
    t = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(per):
            g.replay()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t.append((t1 - t0) / per * 1e6)
    return statistics.median(t)


def main():
    torch.cuda.init()
    s = torch.cuda.Stream()
    print("| generators in graph | plain graph replay (us) | torch RNG graph replay (us) | added (us) |")
    print("|---|---|---|---|")
    for n in (1, 4, 16):
        bufs = [torch.empty(1024, device="cuda") for _ in range(n)]
        gens = [torch.Generator(device="cuda") for _ in range(n)]
        for i, g in enumerate(gens):
            g.manual_seed(1000 + i)
        plain = torch.cuda.CUDAGraph()
        with torch.cuda.graph(plain, stream=s):
            for b in bufs:
                b.fill_(0.0)
        rng = torch.cuda.CUDAGraph()
        for g in gens:
            rng.register_generator_state(g)
        with torch.cuda.graph(rng, stream=s):
            for b, g in zip(bufs, gens):
                b.uniform_(generator=g)
        tp = per_replay_us(plain)
        tr = per_replay_us(rng)
        print(f"| {n} | {tp:.3f} | {tr:.3f} | {tr - tp:+.3f} |")
    print("\nbench_launch_torch: done", torch.__version__)


if __name__ == "__main__":
    main()
