# SPDX-License-Identifier: Apache-2.0
# An unmodified PyTorch job that captures and replays CUDA graphs with dropout inside. Run it
# plain and with LD_PRELOAD=librecap-preload.so: the outputs must be identical and the replay time within
# 2 %. Writes the outputs and the median replay time to the file given as argv[1].
import statistics
import sys
import time

import torch


def main(out_path):
    torch.manual_seed(1234)
    dev = "cuda"
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Dropout(0.1),
        torch.nn.Linear(1024, 512), torch.nn.Dropout(0.1)).to(dev)
    x = torch.randn(256, 512, device=dev)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm-up, as torch.cuda.graph recommends
            model(x)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        y = model(x)
    outs = []
    for _ in range(5):
        g.replay()
        outs.append(y.clone())
    torch.cuda.synchronize()
    times = []
    for _ in range(21):
        t0 = time.perf_counter()
        for _ in range(200):
            g.replay()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / 200 * 1e6)
    fresh = all(not torch.equal(outs[i], outs[i + 1]) for i in range(len(outs) - 1))
    torch.save({"outs": [o.cpu() for o in outs], "replay_us": statistics.median(times),
                "fresh": fresh}, out_path)
    print(f"torch_graphs: replay {statistics.median(times):.2f} us, masks fresh each replay: {fresh}")


if __name__ == "__main__":
    main(sys.argv[1])
