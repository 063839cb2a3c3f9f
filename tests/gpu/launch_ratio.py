# SPDX-License-Identifier: Apache-2.0
"""Prints the ratio of launch_overhead's figures from its log (argument): LD_PRELOAD / plain and
CUPTI / plain, of the medians over the processes of one kind (each process's median and 10th
percentile), and whether the runtime launched through the same driver entry point in every
process (fails when not)."""
import re
import statistics
import sys

runs, entries = {}, set()
for line in open(sys.argv[1]):
    m = re.match(r"launch_overhead: (\S+): ([0-9.]+) ns .*p10 ([0-9.]+) ns; cuLaunchKernel at (\S+)", line)
    if m:
        runs.setdefault(m.group(1), []).append((float(m.group(2)), float(m.group(3))))
        entries.add(m.group(4))
plain = runs["plain"]
for mode in ("LD_PRELOAD", "--cupti"):
    if mode not in runs:
        continue
    for k, what in ((0, "median"), (1, "p10")):
        a = statistics.median(r[k] for r in runs[mode])
        b = statistics.median(r[k] for r in plain)
        print(f"launch_overhead: {mode} / plain = {a / b:.3f} by {what} "
              f"({a:.1f} vs {b:.1f} ns per launch; {len(runs[mode])} and {len(plain)} processes)")
print(f"launch_overhead: cuLaunchKernel entry point in every process: {', '.join(sorted(entries))}")
sys.exit(0 if len(entries) == 1 else 1)
