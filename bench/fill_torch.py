# SPDX-License-Identifier: Apache-2.0
# PyTorch's fill of 1 GiB of uniform float32 (Tensor.uniform_, its Philox generator), timed as
# bench/fill times recap's: medians of 31 CUDA-event-timed runs after a warm-up, with the same
# buffer's zero_ (a memset) timed in the same run as its anchor. Prints a Markdown table.
import statistics

import torch

N = 1 << 28  # 1 GiB of float32
REPS = 31


def median_ms(f):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(REPS):
        a.record()
        f()
        b.record()
        b.synchronize()
        t.append(a.elapsed_time(b))
    return statistics.median(t)


def main():
    buf = torch.empty(N, dtype=torch.float32, device="cuda")
    gb = N * 4 / 1e9
    t_uniform = median_ms(lambda: buf.uniform_())
    t_zero = median_ms(lambda: buf.zero_())
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; buffer 1 GiB "
          f"float32; medians of {REPS} event-timed runs\n")
    print("| fill of 1 GiB float32 | ms | GB/s | uniform_ / this |")
    print("|---|---|---|---|")
    print(f"| torch.Tensor.uniform_ (PyTorch Philox) | {t_uniform:.4f} | {gb / t_uniform * 1e3:.0f}"
          f" | 1.00 |")
    print(f"| torch.Tensor.zero_ (write ceiling) | {t_zero:.4f} | {gb / t_zero * 1e3:.0f} | "
          f"{t_zero / t_uniform:.3f} |")
    print(f"\nbench_fill_torch: uniform_ {gb / t_uniform * 1e3:.0f} GB/s = "
          f"{t_zero / t_uniform:.3f} x zero_")


if __name__ == "__main__":
    main()
