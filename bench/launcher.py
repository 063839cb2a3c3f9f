# SPDX-License-Identifier: Apache-2.0
"""What recap-run costs a Python process that imports neither torch nor megatron (a data-loader
or compile worker, a tokenizer script, a shell-out to Python): `recap-run python -c pass`
against plain `python -c pass`, 20 runs of each, interleaved, medians (wall time of the whole
command, recap-run's own interpreter start included).

    python3 bench/launcher.py [RUNS]

recap-run is the installed command where it is on PATH, else `python -m recap.run` (the same
code behind the console script); the package must be importable (PYTHONPATH). Prints a markdown
row; exit status 0."""
import shutil
import statistics
import subprocess
import sys
import time


def wall(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t0


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    py = sys.executable
    tool = shutil.which("recap-run")
    launcher = [tool] if tool else [py, "-m", "recap.run"]
    plain = [py, "-c", "pass"]
    under = launcher + [py, "-c", "pass"]
    for _ in range(3):  # file caches warm
        wall(plain), wall(under)
    a, b = [], []
    for _ in range(runs):
        a.append(wall(plain))
        b.append(wall(under))
    pa, pb = statistics.median(a) * 1e3, statistics.median(b) * 1e3
    print("| launcher | python -c pass | recap-run python -c pass | added |")
    print("|---|---:|---:|---:|")
    print(f"| {' '.join(launcher[-2:]) if not tool else 'recap-run'} | {pa:.1f} ms | "
          f"{pb:.1f} ms | {pb - pa:+.1f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
