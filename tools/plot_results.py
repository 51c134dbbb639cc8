#!/usr/bin/python3
"""Turn gdte's benchmark CSVs in bench/results/ into PNG plots beside them.

  pack-<device>.csv      bars: GB/s per layout and method, pack and unpack, with the ratio to
                         cudaMemcpy of the same bytes
  pingpong-<device>.csv  bandwidth per layout/protocol against fragment size
  halo3d-<device>.csv    time per exchange against grid size, per method
  mpi-<device>.csv       bench/mpi: latency and bandwidth against message size per layout, each
                         MPI run (mpi column) beside its raw CUDA IPC baseline, and the ratios
  mpi-remote-<device>.csv  bench/mpi across a forced node boundary: fragments (remote-frags) against
                         one MPI_PACKED message (remote-packed), each alternation a point, and the
                         ratio of their times
  engine-cpu.csv         host pack: gdte vs MPI_Pack
  coll-<device>.csv      bench/coll: time per call against size per benchmark, gdte (per MPI run)
                         beside the expert version (hand kernels + raw CUDA IPC)
Uses Debian's python3-matplotlib (/usr/bin/python3). Usage: plot_results.py [results-dir]
"""
import csv
import glob
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fnum(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def plot_pack(path):
    data = rows(path)
    if not data:
        return
    device = data[0].get("device", "?")
    layouts = list(dict.fromkeys(r["layout"] for r in data))
    methods = list(dict.fromkeys(r["method"] for r in data))
    fig, axes = plt.subplots(1, 2, figsize=(14, 5), sharey=True)
    for ax, direction in zip(axes, ("pack", "unpack")):
        width = 0.8 / max(1, len(methods))
        for i, m in enumerate(methods):
            ys = []
            for lay in layouts:
                v = [fnum(r["gbps"]) for r in data if r["layout"] == lay and r["method"] == m and r["direction"] == direction]
                ys.append(v[0] if v else 0.0)
            xs = [k + i * width for k in range(len(layouts))]
            ax.bar(xs, ys, width, label=m)
            if m == "gdte":
                for x, lay in zip(xs, layouts):
                    rr = [r for r in data if r["layout"] == lay and r["method"] == m and r["direction"] == direction]
                    if rr and rr[0].get("ratio_to_memcpy"):
                        ax.annotate(f"{fnum(rr[0]['ratio_to_memcpy']):.2f}", (x, fnum(rr[0]["gbps"])), ha="center",
                                    va="bottom", fontsize=7)
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(layouts))])
        ax.set_xticklabels(layouts, rotation=30)
        ax.set_yscale("log")
        ax.set_title(f"{direction} on {device} (labels: gdte / cudaMemcpy of the same bytes)")
        ax.set_ylabel("GB/s of packed bytes")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path[:-4] + ".png", dpi=110)
    plt.close(fig)


def plot_pingpong(path):
    """Per GPU count, the default settings (frag 0, depth 4): ratio to the contiguous message of
    the same bytes, bars per message (layout, size) and protocol; the first row of a (gpus,
    layout, bytes, protocol) key wins (the pull run comes before the ring run)."""
    data = rows(path)
    if not data:
        return
    device = data[0].get("device", "?")
    keep = {}
    for r in data:
        if r["layout"] in ("contig", "rawcopy", "rawipc") or r["protocol"].startswith("model_bound"):
            continue
        if fnum(r["frag_size"]) != 0 or r["depth"] not in ("4",):
            continue
        key = (r.get("gpus", ""), r["layout"], int(fnum(r["bytes"])), r["protocol"])
        keep.setdefault(key, r)
    gpus_list = sorted({k[0] for k in keep})
    if not gpus_list:
        return
    fig, axes = plt.subplots(1, len(gpus_list), figsize=(7 * len(gpus_list), 5.5), squeeze=False)
    protos = sorted({k[3] for k in keep})
    for ax, g in zip(axes[0], gpus_list):
        msgs = sorted({(k[1], k[2]) for k in keep if k[0] == g})
        width = 0.8 / max(len(protos), 1)
        for i, pr in enumerate(protos):
            xs, ys = [], []
            for j, (lay, nb) in enumerate(msgs):
                r = keep.get((g, lay, nb, pr))
                if r:
                    xs.append(j + i * width)
                    ys.append(min(fnum(r["ratio_to_contig"]), 2.0))
            ax.bar(xs, ys, width=width, label=pr)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(msgs))])
        ax.set_xticklabels([f"{lay}\n{nb >> 20} MiB" for lay, nb in msgs], fontsize=8)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(0.9, color="gray", lw=0.6, ls="--")
        ax.set_ylabel("time of a contiguous message / time of this one (capped at 2)")
        ax.set_title(f"{g} GPU(s): default fragment size, depth 4")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    fig.suptitle(f"ping-pong on {device}: non-contiguous vs contiguous through gdte (rdma: ring or shortcut)")
    fig.tight_layout()
    fig.savefig(path[:-4] + ".png", dpi=110)
    plt.close(fig)


def plot_halo(path):
    data = rows(path)
    if not data:
        return
    device = data[0].get("device", "?")
    groups = defaultdict(list)
    for r in data:
        groups[(r.get("gpus", ""), r["method"])].append(r)
    fig, ax = plt.subplots(figsize=(9, 6))
    for (gpus, m), rr in sorted(groups.items()):
        rr = sorted(rr, key=lambda r: fnum(r["n"]))
        ax.plot([fnum(r["n"]) for r in rr], [fnum(r["median_us"]) for r in rr], marker="o", label=f"{m} gpus={gpus}")
    ax.set_yscale("log")
    ax.set_xlabel("grid edge n (n^3 doubles per rank)")
    ax.set_ylabel("time per exchange (us)")
    ax.set_title(f"3-D halo exchange, 2 ranks, on {device}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path[:-4] + ".png", dpi=110)
    plt.close(fig)


def _size_label(b):
    b = int(b)
    for unit, sh in (("M", 20), ("K", 10)):
        if b >= 1 << sh and b % (1 << sh) == 0:
            return f"{b >> sh}{unit}"
    return str(b)


def plot_mpi(path):
    """bench/mpi: a row per benchmark (latency, bw); a column per layout with each run (the mpi
    column, plus gpus when the file mixes GPU counts) as a solid line and its raw CUDA IPC baseline
    (layout "raw", same colour) dashed; a last column with ratio_to_raw and the issue's targets."""
    data = [r for r in rows(path) if r.get("benchmark") in ("latency", "bw")]
    if not data:
        return
    device = data[0].get("device", "?")
    multi_gpus = len({r.get("gpus", "") for r in data}) > 1
    run_of = (lambda r: f"{r['mpi']} gpus={r.get('gpus', '')}") if multi_gpus else (lambda r: r["mpi"])
    runs = list(dict.fromkeys(run_of(r) for r in data))
    layouts = [x for x in ("contig", "vector", "indexed") if any(r["layout"] == x for r in data)]
    layouts += [x for x in dict.fromkeys(r["layout"] for r in data) if x not in layouts and x != "raw"]
    colors = {run: f"C{i % 10}" for i, run in enumerate(runs)}
    styles = ["-", "--", ":", "-."]
    series = defaultdict(list)
    for r in data:
        series[(r["benchmark"], run_of(r), r["layout"])].append(r)
    for v in series.values():
        v.sort(key=lambda r: fnum(r["bytes"]))
    benches = [b for b in ("latency", "bw") if any(r["benchmark"] == b for r in data)]
    ncol = len(layouts) + 1
    fig, axes = plt.subplots(len(benches), ncol, figsize=(4.6 * ncol, 4.2 * len(benches)), squeeze=False)
    all_bytes = sorted({int(fnum(r["bytes"])) for r in data})
    targets = {"latency": {"1 KiB target": 0.80}, "bw": {"4 MiB: contig": 0.85, "vector": 0.80, "indexed": 0.75}}
    for i, b in enumerate(benches):
        ykey = "median_us" if b == "latency" else "gbps"
        for j, lay in enumerate(layouts):
            ax = axes[i][j]
            for run in runs:
                for lay2, ls, lab in ((lay, "-", run), ("raw", "--", f"raw ({run})")):
                    rr = series.get((b, run, lay2), [])
                    if rr:
                        ax.plot([fnum(r["bytes"]) for r in rr], [fnum(r[ykey]) for r in rr], ls, marker="o", ms=3,
                                color=colors[run], label=lab)
            ax.set_title(f"{b}, {lay}")
            ax.set_ylabel("one-way time per message (us)" if b == "latency" else "GB/s of payload")
        ax = axes[i][ncol - 1]
        any_ratio = False
        for run in runs:
            for k, lay in enumerate(layouts):
                rr = [r for r in series.get((b, run, lay), []) if r.get("ratio_to_raw")]
                if rr:
                    any_ratio = True
                    ax.plot([fnum(r["bytes"]) for r in rr], [fnum(r["ratio_to_raw"]) for r in rr],
                            styles[k % len(styles)], marker="o", ms=3, color=colors[run], label=f"{run} {lay}")
        for k, (name, y) in enumerate(targets[b].items()):
            ax.axhline(y, color="gray", lw=0.7, ls=styles[(k + 1) % len(styles)])
            ax.annotate(f"{name} {y}", (all_bytes[0] if all_bytes else 1, y), fontsize=6, color="gray", va="bottom")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_title(f"{b}: raw time / this time")
        ax.set_ylabel("ratio to raw CUDA IPC")
        if not any_ratio:
            ax.text(0.5, 0.5, "no raw baseline (host memory)", transform=ax.transAxes, ha="center", fontsize=8)
        for ax in axes[i]:
            if ax is not axes[i][ncol - 1]:
                ax.set_yscale("log")
            _size_axis(ax, all_bytes)
    commits = ", ".join(dict.fromkeys(r.get("commit", "") for r in data))
    fig.suptitle(f"bench/mpi on {device} (commit {commits}): 2 ranks, solid = through the MPI run, dashed = raw CUDA IPC")
    fig.tight_layout()
    fig.savefig(path[:-4] + ".png", dpi=110)
    plt.close(fig)


def _size_axis(ax, sizes):
    """A log2 x axis of payload sizes labelled 1K, 4M..., a grid, and the legend if any."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([_size_label(x) for x in sizes], fontsize=7, rotation=45)
    ax.minorticks_off()
    ax.set_xlabel("payload bytes")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6)


def plot_remote(path):
    """Fragments against one MPI_PACKED message per benchmark and layout: time per message against
    size (each alternation a point, the line through their medians), and MPI_PACKED time / fragments
    time (above 1: fragments faster)."""
    data = [r for r in rows(path) if r.get("layout") != "raw"]
    if not data:
        return
    benches = [b for b in ("latency", "bw") if any(r["benchmark"] == b for r in data)]
    layouts = list(dict.fromkeys(r["layout"] for r in data))
    runs = ("remote-frags", "remote-packed")
    fig, axes = plt.subplots(len(benches), len(layouts) + 1, figsize=(4.2 * (len(layouts) + 1), 3.8 * len(benches)),
                             squeeze=False)
    pts = defaultdict(list)
    for r in data:
        pts[(r["benchmark"], r["mpi"], r["layout"], int(r["bytes"]))].append(fnum(r["median_us"]))
    sizes = sorted({int(r["bytes"]) for r in data})

    def med(v):
        v = sorted(v)
        return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2

    for i, b in enumerate(benches):
        for j, lay in enumerate(layouts):
            ax = axes[i][j]
            for k, run in enumerate(runs):
                xs = [n for n in sizes if pts.get((b, run, lay, n))]
                for n in xs:
                    ax.plot([n] * len(pts[(b, run, lay, n)]), pts[(b, run, lay, n)], "o", ms=3, color="C%d" % k)
                ax.plot(xs, [med(pts[(b, run, lay, n)]) for n in xs], "-", color="C%d" % k,
                        label="fragments" if run == "remote-frags" else "one MPI_PACKED message")
            ax.set_title(f"{b}, {lay}")
            ax.set_ylabel("us per message" + (" (one way)" if b == "latency" else " (window of 64)"))
            ax.set_yscale("log")
        ax = axes[i][len(layouts)]
        for j, lay in enumerate(layouts):
            xs, ys = [], []
            for n in sizes:
                f, p_ = pts.get((b, "remote-frags", lay, n)), pts.get((b, "remote-packed", lay, n))
                if f and p_:
                    xs.append(n)
                    ys.append(med(p_) / med(f))
            ax.plot(xs, ys, "o-", ms=3, color="C%d" % (j + 2), label=lay)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_title(f"{b}: MPI_PACKED time / fragments time")
        for ax in axes[i]:
            _size_axis(ax, sizes)
    device = data[0].get("device", "")
    gpus = data[0].get("gpus", "")
    commits = ", ".join(dict.fromkeys(r.get("commit", "") for r in data))
    fig.suptitle(f"device messages to another node (forced) on {gpus} x {device} (commit {commits}): "
                 "fragments against one MPI_PACKED message")
    fig.tight_layout()
    fig.savefig(path[:-4] + ".png", dpi=110)
    plt.close(fig)


def plot_engine(path):
    data = [r for r in rows(path) if r.get("metric") in ("gbps", "GB/s")]
    if not data:
        return
    cases = list(dict.fromkeys(r["case"] for r in data))
    methods = list(dict.fromkeys(r["method"] for r in data))
    fig, ax = plt.subplots(figsize=(10, 5))
    width = 0.8 / max(1, len(methods))
    for i, m in enumerate(methods):
        ys = []
        for c in cases:
            v = [fnum(r["value"]) for r in data if r["case"] == c and r["method"] == m]
            ys.append(v[0] if v else 0.0)
        ax.bar([k + i * width for k in range(len(cases))], ys, width, label=m)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(cases))])
    ax.set_xticklabels(cases, rotation=30)
    ax.set_ylabel("GB/s")
    ax.set_title("host pack: gdte vs Open MPI's MPI_Pack")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path[:-4] + ".png", dpi=110)
    plt.close(fig)


def plot_coll(path):
    """bench/coll: a column per benchmark; each MPI run of the benchmark's newest commit solid (gdte)
    with its expert dashed, and its oldest commit's gdte dotted as the "before" where it has several."""
    data = rows(path)
    if not data:
        return
    benches = sorted({r["benchmark"] for r in data})
    fig, axes = plt.subplots(1, len(benches), figsize=(5 * len(benches), 4), squeeze=False)
    for ax, b in zip(axes[0], benches):
        sel = [r for r in data if r["benchmark"] == b]
        commits = list(dict.fromkeys(r["commit"] for r in sel))  # per benchmark: file order
        newest, oldest = commits[-1], commits[0]
        for i, mpi in enumerate(sorted({r["mpi"] for r in sel})):
            color = "C%d" % i
            pts = sorted((fnum(r["size"]), fnum(r["median_us"]), fnum(r["expert_us"]))
                         for r in sel if r["mpi"] == mpi and r["commit"] == newest)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color,
                        label="gdte %s (%s)" % (newest, mpi))
                ax.plot([p[0] for p in pts], [p[2] for p in pts], "x--", color=color,
                        label="expert (%s run)" % mpi)
            old = sorted((fnum(r["size"]), fnum(r["median_us"]))
                         for r in sel if r["mpi"] == mpi and r["commit"] == oldest)
            if old and oldest != newest:
                ax.plot([p[0] for p in old], [p[1] for p in old], "s:", color=color, alpha=0.6,
                        label="gdte %s (%s, before)" % (oldest, mpi))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes per rank" if b in ("allgather", "bcast") else "grid edge")
        ax.set_ylabel("us per call (slowest rank, median)")
        ax.set_title(b)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path[:-4] + ".png", dpi=110)
    plt.close(fig)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "bench", "results")
    plotted = []
    for pattern, fn in (("pack-*.csv", plot_pack), ("pingpong-*.csv", plot_pingpong), ("halo3d-*.csv", plot_halo),
                        ("mpi-*.csv", plot_mpi), ("engine-cpu.csv", plot_engine),
                        ("coll-*.csv", plot_coll)):
        for p in sorted(glob.glob(os.path.join(d, pattern))):
            # mpi-remote-*: two runs against each other, not against one baseline
            (plot_remote if fn is plot_mpi and os.path.basename(p).startswith("mpi-remote-") else fn)(p)
            plotted.append(os.path.basename(p))
    print("plotted:", ", ".join(plotted) if plotted else "nothing")


if __name__ == "__main__":
    main()
