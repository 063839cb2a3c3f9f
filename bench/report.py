#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/report.py RUN_DIR [--results FILE] [--chart FILE]

Reads the outputs of one GPU run of the benchmarks (bench/run-all or scripts/gpu-check put them
in one folder: bench-fill.md, bench-launch.md, bench-launch-torch.md, bench-tracker.md and, when
present, bench-fill-torch.md, bench-region.md, gpu.txt, date.txt) and writes its section of
bench/RESULTS.md (between marker comments: the rest of the file, hand-written, is kept; without
markers the section is appended): device, driver, date, and each figure next to its anchor
measured in the same run, with their ratio; and bench/chart.png (matplotlib; skipped with a note when it is not installed): per-launch
RNG overhead against the number of generators (recap and PyTorch, log scale) and fill bandwidth
(recap, cuRAND, PyTorch, the memset ceiling).
"""
import argparse
import datetime
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def read(d, name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return None
    with open(p, encoding="utf-8", errors="replace") as f:
        text = f.read()
    return text if text.strip() else None  # an empty output: the benchmark failed


def tables(text):
    """The Markdown tables of a text: [(header cells, [row cells])]."""
    out, cur = [], None
    for line in (text or "").splitlines():
        s = line.strip()
        if s.startswith("|") and s.endswith("|"):
            cells = [c.strip() for c in s[1:-1].split("|")]
            if cur is None:
                cur = (cells, [])
                out.append(cur)
            elif all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
                continue
            else:
                cur[1].append(cells)
        else:
            cur = None
    return out


def blocks(text):
    """[(header, rows, notes)]: each table with the plain lines that follow it (build noise
    such as make's "CC" lines left out)."""
    out, cur = [], None
    for line in (text or "").splitlines():
        s = line.strip()
        if s.startswith("|") and s.endswith("|"):
            cells = [c.strip() for c in s[1:-1].split("|")]
            if cur is None or cur[2]:
                cur = (cells, [], [])
                out.append(cur)
            elif not all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
                cur[1].append(cells)
        elif s and cur is not None and not s.startswith(("CC ", "CCLD ", "make")):
            cur[2].append(s)
    return [(h, r, n) for h, r, n in out]


def table_of(text, first_header):
    for head, rows in tables(text):
        if head and head[0].lower().startswith(first_header.lower()):
            return head, rows
    return None


def num(s):
    m = re.search(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", s or "")
    return float(m.group(0)) if m else None


def column(head, rows, name):
    """{first cell: number in the column whose header starts with name}."""
    idx = next((i for i, h in enumerate(head) if h.lower().startswith(name.lower())), None)
    if idx is None:
        return {}
    return {r[0]: num(r[idx]) for r in rows if idx < len(r)}


def row(rows, prefix):
    return next((r for r in rows if r[0].startswith(prefix)), None)


def fmt_ratio(a, b, digits=3):
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.{digits}f}"


class Run:
    def __init__(self, d):
        self.dir = d
        self.fill = read(d, "bench-fill.md")
        self.launch = read(d, "bench-launch.md")
        self.launch_torch = read(d, "bench-launch-torch.md")
        self.tracker = read(d, "bench-tracker.md")
        self.fill_torch = read(d, "bench-fill-torch.md")
        self.region = read(d, "bench-region.md")
        self.gpu = (read(d, "gpu.txt") or "").strip()
        self.date_txt = (read(d, "date.txt") or "").strip()
        missing = [n for n, v in (("bench-fill.md", self.fill), ("bench-launch.md", self.launch),
                                  ("bench-launch-torch.md", self.launch_torch),
                                  ("bench-tracker.md", self.tracker)) if v is None]
        self.missing = missing

    def device(self):
        """(name, driver, memory, SMs) from gpu.txt (nvidia-smi) and bench-fill.md's first line."""
        name = driver = mem = sms = None
        if self.gpu and "," in self.gpu:
            parts = [p.strip() for p in self.gpu.splitlines()[0].split(",")]
            name = parts[0]
            driver = parts[1] if len(parts) > 1 else None
            mem = parts[2] if len(parts) > 2 else None
        m = re.search(r"^device: ([^,;]+)(?:, (\d+) SMs)?", self.fill or "", re.M)
        if m:
            name = name or m.group(1).strip()
            sms = m.group(2)
        return name, driver, mem, sms

    def date(self):
        if self.date_txt:
            return self.date_txt, "run date"
        for n in ("bench-fill.md", "bench-launch.md", "bench-tracker.md"):
            p = os.path.join(self.dir, n)
            if os.path.exists(p):
                t = datetime.datetime.fromtimestamp(os.path.getmtime(p), datetime.timezone.utc)
                return t.strftime("%Y-%m-%d %H:%M UTC"), "date of the output files"
        return "unknown", "no date recorded"

    def torch_version(self):
        m = re.search(r"done (\S+)", self.launch_torch or "")
        if m:
            return m.group(1)
        m = re.search(r"torch (\S+?);", self.fill_torch or "")
        return m.group(1) if m else None

    # --- the figures
    def launch_rows(self):
        """[(G, recap added, plain launch, will_launch alone, slot writes, torch added,
        torch plain replay)]."""
        t = self._launch_table("generators")
        tt = table_of(self.launch_torch, "generators")
        if t is None:
            return []
        rows, added, plain, alone = t
        slots = {r[0]: r[-1] for r in rows}
        t_added = t_plain = {}
        if tt is not None:
            t_added, t_plain = column(tt[0], tt[1], "added"), column(tt[0], tt[1], "plain")
        out = []
        for r in rows:
            g = r[0]
            out.append((int(num(g)), added.get(g), plain.get(g), alone.get(g), slots.get(g),
                        t_added.get(g), t_plain.get(g)))
        return out

    def launch_child_rows(self):
        """[(G, recap added, plain parent launch, will_launch alone, slot writes)] for parents
        whose G child graph nodes draw from one generator each."""
        t = self._launch_table("child graphs")
        if t is None:
            return []
        rows, added, plain, alone = t
        return [(int(num(r[0])), added.get(r[0]), plain.get(r[0]), alone.get(r[0]), r[-1])
                for r in rows]

    def _launch_table(self, first):
        """bench/launch.cu's table whose first heading starts with `first`: (rows, added, plain
        launch, will_launch alone) by row key, or None."""
        t = table_of(self.launch, first)
        if t is None:
            return None
        head, rows = t
        return (rows, column(head, rows, "added"), column(head, rows, "plain"),
                column(head, rows, "recap_graph_will_launch"))

    def fill_rows(self):
        """{label: (GB/s, ms)} for recap, cuRAND, memset, and PyTorch's when measured."""
        out = {}
        t = table_of(self.fill, "fill of")
        if t is not None:
            head, rows = t
            gbs, ms = column(head, rows, "GB/s"), column(head, rows, "ms")
            for key, prefix in (("recap", "recap_generator_fill_uniform"),
                                ("cuRAND", "curandGenerateUniform"),
                                ("memset", "cudaMemsetAsync (write ceiling)")):
                r = row(rows, prefix)
                if r:
                    out[key] = (gbs[r[0]], ms[r[0]], r[0])
        t = table_of(self.fill_torch, "fill of")
        if t is not None:
            head, rows = t
            gbs, ms = column(head, rows, "GB/s"), column(head, rows, "ms")
            for key, prefix in (("torch", "torch.Tensor.uniform_"),
                                ("torch zero_", "torch.Tensor.zero_")):
                r = row(rows, prefix)
                if r:
                    out[key] = (gbs[r[0]], ms[r[0]], r[0])
        return out


def results_md(run, chart_name):
    name, driver, mem, sms = run.device()
    date, date_kind = run.date()
    tv = run.torch_version()
    lines = ["## Measured run (generated by bench/report.py)", ""]
    dev = name or "unknown device"
    extra = ", ".join(x for x in ((f"{sms} SMs" if sms else None), mem) if x)
    lines.append(f"Measured on **{dev}**" + (f" ({extra})" if extra else "") +
                 f", driver {driver or 'not recorded'}, {date} ({date_kind})" +
                 (f"; PyTorch {tv}" if tv else "") + ".")
    lines.append("")
    lines.append("From the outputs of one GPU run "
                 "(`make bench`, i.e. `bench/run-all`, or `scripts/gpu-check`). Every figure "
                 "stands next to an anchor measured in the same run, and their ratio.")
    if run.missing:
        lines.append("")
        lines.append("Missing from this run: " + ", ".join(run.missing) + ".")
    if chart_name:
        lines += ["", f"![Per-launch RNG overhead and fill bandwidth]({chart_name})"]

    lr = run.launch_rows()
    if lr:
        lines += ["", "### CUDA-graph launch: host cost of random numbers", "",
                  "Host time added per graph launch when the graph's kernels draw from G "
                  "generators, over the same graph without random numbers (recap: "
                  "`bench/launch.cu`, a plain graph with as many kernel nodes as anchor; "
                  "PyTorch: `bench/launch_torch.py`, generators registered with "
                  "`register_generator_state`, a graph of fills as anchor). recap's target is "
                  "under 0.5 µs added per launch whatever G.", "",
                  "| G | recap added (µs) | anchor: plain launch (µs) | added / anchor | "
                  "`recap_graph_will_launch` alone (µs) | slot writes in steady state | "
                  "PyTorch added (µs) | anchor: plain replay (µs) | added / anchor | "
                  "PyTorch added / recap added |",
                  "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
        for g, add, plain, alone, slots, tadd, tplain in lr:
            def f(v, d=3):
                return "n/a" if v is None else f"{v:+.{d}f}" if v < 0 else f"{v:.{d}f}"
            ratio_rt = "n/a"
            if add is not None and tadd is not None:
                ratio_rt = f"{tadd / add:.0f}" if add > 0 else "recap adds nothing measurable"
            lines.append(f"| {g} | {f(add)} | {f(plain)} | {fmt_ratio(add, plain)} | {f(alone)} | "
                         f"{slots or 'n/a'} | {f(tadd)} | {f(tplain)} | "
                         f"{fmt_ratio(tadd, tplain)} | {ratio_rt} |")
        worst = max((x[1] for x in lr if x[1] is not None), default=None)
        if worst is not None:
            lines += ["", f"Largest recap addition: {worst:.3f} µs "
                          f"({'meets' if worst < 0.5 else 'misses'} the 0.5 µs target)."]
    cr = run.launch_child_rows()
    if cr:
        lines += ["", "### CUDA-graph launch: parents with child graphs", "",
                  "The same measure for a parent graph whose G child graph nodes are captured "
                  "graphs drawing from one generator each, chained in order (`bench/launch.cu`); "
                  "the anchor is the same parent built from children without random numbers "
                  "and as many kernel nodes. The bound is the same as for a captured graph.", "",
                  "| G | recap added (µs) | anchor: plain parent launch (µs) | added / anchor | "
                  "`recap_graph_will_launch` alone (µs) | slot writes in steady state |",
                  "|---:|---:|---:|---:|---:|---|"]
        for g, add, plain, alone, slots in cr:
            def f(v, d=3):
                return "n/a" if v is None else f"{v:+.{d}f}" if v < 0 else f"{v:.{d}f}"
            lines.append(f"| {g} | {f(add)} | {f(plain)} | {fmt_ratio(add, plain)} | {f(alone)} "
                         f"| {slots or 'n/a'} |")
        worst = max((x[1] for x in cr if x[1] is not None), default=None)
        if worst is not None:
            lines += ["", f"Largest recap addition with child graphs: {worst:.3f} µs "
                          f"({'meets' if worst < 0.5 else 'misses'} the 0.5 µs target)."]

    fr = run.fill_rows()
    if fr:
        lines += ["", "### Fill bandwidth, 1 GiB of uniform float32", "",
                  "Medians of event-timed runs (`bench/fill.cu`; PyTorch: "
                  "`bench/fill_torch.py`). The anchor of each fill is the write ceiling measured "
                  "in the same process (`cudaMemsetAsync`; for PyTorch `zero_`).", "",
                  "| fill | ms | GB/s | anchor | anchor GB/s | fill / anchor |",
                  "|---|---:|---:|---|---:|---:|"]
        mem_ = fr.get("memset")
        for key in ("recap", "cuRAND", "torch"):
            if key not in fr:
                continue
            gbs, ms, label = fr[key]
            anc = fr.get("torch zero_") if key == "torch" else mem_
            lines.append(f"| {label} | {ms:.4f} | {gbs:.0f} | {anc[2] if anc else 'n/a'} | "
                         f"{anc[0]:.0f} | {fmt_ratio(gbs, anc[0])} |" if anc else
                         f"| {label} | {ms:.4f} | {gbs:.0f} | n/a | n/a | n/a |")
        if "recap" in fr and "cuRAND" in fr:
            lines += ["", f"recap / cuRAND (same process): "
                          f"{fmt_ratio(fr['recap'][0], fr['cuRAND'][0])}×."]
        if "recap" in fr and "torch" in fr:
            own_recap = fmt_ratio(fr["recap"][0], mem_[0]) if mem_ else "n/a"
            own_torch = (fmt_ratio(fr["torch"][0], fr["torch zero_"][0])
                         if "torch zero_" in fr else "n/a")
            lines += [f"recap / PyTorch `uniform_` (separate processes, same run): "
                      f"{fmt_ratio(fr['recap'][0], fr['torch'][0])}×; each against its own "
                      f"ceiling: {own_recap} vs {own_torch}."]

    # bench-tracker.md may also hold the region benchmark's table (scripts/gpu-check runs every
    # bench/bench_* program into it): each table goes where its rows say it belongs.
    tracker_blocks, region_blocks = [], []
    for text in (run.tracker, run.region):
        for blk in blocks(text):
            cells = " ".join(r[0] for r in blk[1]).lower()
            if "region" in cells or "ffi_call" in cells or "checkpoint" in cells:
                if blk not in region_blocks:
                    region_blocks.append(blk)
            elif "fork" in cells or "get_state" in cells:
                if blk not in tracker_blocks:
                    tracker_blocks.append(blk)
    for title, intro, found in (
            ("Tracker operations (host)",
             "`bench/tracker.c`: median nanoseconds per operation, anchored on a generator "
             "get_state+set_state pair measured in the same run (alternated with each row).",
             tracker_blocks),
            ("Recompute regions (host)",
             "`bench/region.c`: median nanoseconds per region lifecycle, anchored on a bare "
             "ffi_call and a snapshot take+restore measured in the same run.", region_blocks)):
        if not found:
            continue
        lines += ["", f"### {title}", "", intro]
        for head, rows, notes in found:
            lines += ["", "| " + " | ".join(head) + " |",
                      "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"]
            lines += ["| " + " | ".join(r) + " |" for r in rows]
            if notes:
                lines += [""] + notes
    return "\n".join(lines).rstrip() + "\n"


def chart(run, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: chart skipped"
    lr = run.launch_rows()
    fr = run.fill_rows()
    if not lr and not fr:
        return "no launch or fill figures in this run: chart skipped"
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    name = run.device()[0] or "GPU"
    if lr:
        gs = [x[0] for x in lr]
        floor = 0.001
        rec = [max(x[1], floor) if x[1] is not None else None for x in lr]
        alone = [x[3] for x in lr]
        tor = [x[5] for x in lr]
        if all(v is not None for v in tor):
            a1.plot(gs, tor, "o-", color="tab:red", label="PyTorch (registered generators)")
        a1.plot(gs, rec, "s-", color="tab:blue", label="recap (graph launch, added)")
        if all(v is not None for v in alone):
            a1.plot(gs, alone, "s--", color="tab:blue", alpha=0.5,
                    label="recap_graph_will_launch alone")
        a1.axhline(0.5, color="gray", lw=0.8, ls=":")
        a1.text(gs[0], 0.55, "recap target 0.5 µs", color="gray", fontsize=8)
        a1.set_yscale("log")
        a1.set_xscale("log", base=2)
        a1.set_xticks(gs)
        a1.set_xticklabels([str(g) for g in gs])
        a1.set_xlabel("generators drawing in the graph")
        a1.set_ylabel("host time added per launch (µs, log)")
        a1.set_title("Per-launch RNG overhead")
        a1.legend(fontsize=8, loc="center right")
        a1.grid(True, which="both", alpha=0.3)
    bars = [(k, lbl) for k, lbl in (("recap", "recap"), ("cuRAND", "cuRAND"),
                                    ("torch", "PyTorch\nuniform_"), ("memset", "memset\n(ceiling)"))
            if k in fr]
    if bars:
        vals = [fr[k][0] for k, _ in bars]
        colors = {"recap": "tab:blue", "cuRAND": "tab:green", "torch": "tab:red",
                  "memset": "tab:gray"}
        b = a2.bar([lbl for _, lbl in bars], vals, color=[colors[k] for k, _ in bars])
        for rect, v in zip(b, vals):
            a2.text(rect.get_x() + rect.get_width() / 2, v, f"{v:.0f}", ha="center",
                    va="bottom", fontsize=8)
        a2.set_ylabel("GB/s")
        a2.set_title("Fill of 1 GiB uniform float32")
        a2.set_ylim(0, max(vals) * 1.15)
        a2.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"recap on {name} ({run.date()[0]})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"))
    ap.add_argument("--chart", default=os.path.join(HERE, "chart.png"))
    a = ap.parse_args()
    run = Run(a.run_dir)
    if all(v is None for v in (run.fill, run.launch, run.launch_torch, run.fill_torch,
                                run.tracker, run.region)):
        print(f"report.py: no benchmark outputs in {a.run_dir}", file=sys.stderr)
        return 2
    why = chart(run, a.chart)
    rel = os.path.relpath(a.chart, os.path.dirname(os.path.abspath(a.results)))
    md = results_md(run, None if why else rel)
    if why:
        md += f"\n(Chart: {why}.)\n"
    how = merge(a.results, md)
    print(f"report.py: {how} {a.results}; " + (f"chart {a.chart}" if not why else why))
    return 0


BEGIN, END = "<!-- bench/report.py: begin -->", "<!-- bench/report.py: end -->"


def merge(path, md):
    """Puts the generated section into `path` between the markers, keeping whatever else the
    file says (hand-written notes); appends it when the file has no markers yet."""
    block = f"{BEGIN}\n{md.rstrip()}\n{END}\n"
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write("# Benchmark results\n\n" + block)
        return "wrote"
    with open(path, encoding="utf-8") as f:
        old = f.read()
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        new, how = head + block + ("\n" + tail if tail else ""), "updated the generated section of"
    else:
        new, how = old.rstrip() + "\n\n" + block, "appended the generated section to"
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)
    return how


if __name__ == "__main__":
    sys.exit(main())
