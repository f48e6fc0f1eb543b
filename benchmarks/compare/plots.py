"""Draws the comparison plots from results.json (run by an interpreter that has matplotlib).

    python plots.py results.json OUTDIR

Prints the name of each PNG written. Plots: TE throughput against block size (one panel per op,
one line per system/protocol/threads, the memcpy and TCP limits as horizontal lines), store
throughput against value size (one panel per op and batching, plain and zero-copy lines), and
latency percentiles (p50 solid, p99 dashed) for both.
"""

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
COLORS = {"ours": "tab:blue", "reference": "tab:orange", "redis": "tab:red"}


def human(n):
    for unit, div in (("MiB", MiB), ("KiB", KiB)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit[0]}"
    return f"{n}B"


def ok(r):
    return "error" not in r and r.get("gbps", 0) > 0


def series(res, bench, **match):
    """{label: [(size, record)...]} for the records matching."""
    out = {}
    for r in res:
        if r.get("bench") != bench or not ok(r):
            continue
        if any(r.get(k) != v for k, v in match.items()):
            continue
        if bench == "te":
            label = f"{r['system']} {r['protocol']} x{r['threads']}"
            x = r["block"]
        else:
            label = f"{r['system']} {r['protocol']}" + (" zero-copy" if r.get("zc") else "")
            x = r["size"]
        out.setdefault(label, []).append((x, r))
    return {k: sorted(v, key=lambda t: t[0]) for k, v in sorted(out.items())}


def style(label):
    system = label.split()[0]
    ls = "-"
    if "shm" in label:
        ls = "-."
    if "zero-copy" in label or "x2" in label:
        ls = "--" if "shm" not in label else ":"
    marker = "o" if "x2" not in label and "zero-copy" not in label else "s"
    return {"color": COLORS.get(system, "tab:gray"), "linestyle": ls, "marker": marker}


def xaxis(ax, xs):
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([human(x) for x in xs])


def limits(ax, doc):
    lim = doc.get("limits", {})
    for k, c in (("memcpy", "black"), ("tcp", "dimgray")):
        if k in lim:
            ax.axhline(lim[k]["gbps"], color=c, linestyle="-", linewidth=2.5, alpha=0.25,
                       label=f"{k} limit {lim[k]['gbps']:.1f} GB/s")


def te_throughput(doc, out):
    res = doc["results"]
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.2), sharey=True)
    drawn = False
    for ax, op in zip(axes, ("write", "read")):
        xs = set()
        for label, pts in series(res, "te", op=op).items():
            ax.plot([p[0] for p in pts], [p[1]["gbps"] for p in pts], label=label, **style(label))
            xs |= {p[0] for p in pts}
            drawn = True
        limits(ax, doc)
        if xs:
            xaxis(ax, sorted(xs))
        ax.set_yscale("log")
        ax.set_title(f"Transfer Engine {op}")
        ax.set_xlabel("block size")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("GB/s (log)")
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, out / "te_throughput.png") if drawn else None


def store_throughput(doc, out):
    res = doc["results"]
    fig, axes = plt.subplots(2, 2, figsize=(14, 9), sharey=True)
    drawn = False
    for i, op in enumerate(("put", "get")):
        for j, batched in enumerate((False, True)):
            ax = axes[i][j]
            xs = set()
            pick = [r for r in res if r.get("bench") == "store" and (r.get("batch", 1) > 1) == batched]
            for label, pts in series(pick, "store", op=op).items():
                ax.plot([p[0] for p in pts], [p[1]["gbps"] for p in pts], label=label, **style(label))
                xs |= {p[0] for p in pts}
                drawn = True
            limits(ax, doc)
            if xs:
                xaxis(ax, sorted(xs))
            ax.set_yscale("log")
            ax.set_title(f"Store {op}, {'batched' if batched else 'single'}")
            ax.set_xlabel("value size")
            ax.grid(True, alpha=0.3)
            if j == 0:
                ax.set_ylabel("GB/s (log)")
    axes[0][1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, out / "store_throughput.png") if drawn else None


def latency(doc, out):
    res = doc["results"]
    fig, axes = plt.subplots(2, 2, figsize=(16, 9))
    drawn = False
    panels = [(axes[0][0], "te", "write", {"threads": 1}, "TE write, 1 thread"),
              (axes[0][1], "te", "read", {"threads": 1}, "TE read, 1 thread"),
              (axes[1][0], "store", "put", {"batch": 1}, "Store put, single"),
              (axes[1][1], "store", "get", {"batch": 1}, "Store get, single")]
    for ax, bench, op, match, title in panels:
        xs = set()
        for label, pts in series(res, bench, op=op, **match).items():
            st = style(label)
            st.pop("linestyle")
            ax.plot([p[0] for p in pts], [p[1]["p50_us"] for p in pts], linestyle="-",
                    label=f"{label} p50", **st)
            ax.plot([p[0] for p in pts], [p[1]["p99_us"] for p in pts], linestyle="--",
                    label=f"{label} p99", alpha=0.6, **st)
            xs |= {p[0] for p in pts}
            drawn = True
        if xs:
            xaxis(ax, sorted(xs))
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_ylabel("latency per call (µs)")
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, out / "latency.png") if drawn else None


def sweep(doc, out):
    """The fair baselines' concurrency sweep: aggregate op/s against client processes, one panel per
    op and value size (single calls), ours (C) against redis-benchmark and the reference, medians of
    the repeats with their min-max as error bars."""
    fair = doc.get("fair") or {}
    procs = fair.get("procs") or []
    sizes = fair.get("sizes") or []
    if not procs or not sizes:
        return None
    lines = (("ours-c", "put", "put", "tab:blue", "-"), ("ours-c", "get_first", "get", "tab:blue", "--"),
             ("ours-c", "get_cached", "get", "tab:cyan", ":"), ("redis-c", "put", "put", "tab:red", "-"),
             ("redis-c", "get", "get", "tab:red", "--"), ("redis-c-procs", "put", "put", "tab:pink", "-"),
             ("redis-c-procs", "get", "get", "tab:pink", "--"), ("reference-py", "put", "put", "tab:orange", "-"),
             ("reference-py", "get", "get", "tab:orange", "--"))
    fig, axes = plt.subplots(2, len(sizes), figsize=(7 * len(sizes), 9), squeeze=False)
    drawn = False
    for j, size in enumerate(sizes):
        for i, kind in enumerate(("put", "get")):
            ax = axes[i][j]
            for system, op, k, color, ls in lines:
                if k != kind:
                    continue
                xs, med, lo, hi = [], [], [], []
                for n in procs:
                    v = sorted(r["ops_per_s"] for r in fair.get("records", [])
                               if r.get("system") == system and r.get("kind") == "store" and r.get("op") == op
                               and r.get("size") == size and r.get("batch") == 1 and r.get("procs") == n
                               and "error" not in r)
                    if v:
                        m = v[len(v) // 2]
                        xs.append(n), med.append(m), lo.append(m - v[0]), hi.append(v[-1] - m)
                if xs:
                    ax.errorbar(xs, med, yerr=[lo, hi], color=color, linestyle=ls, marker="o", capsize=3,
                                label=f"{system} {op}")
                    drawn = True
            ax.set_xscale("log", base=2)
            ax.set_xticks(procs)
            ax.set_xticklabels([str(n) for n in procs])
            ax.set_title(f"{kind}, {human(size)} values, single calls")
            ax.set_xlabel("client processes (redis-benchmark: connections of one process)")
            ax.set_ylabel("aggregate op/s")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
    return save(fig, out / "sweep.png") if drawn else None


def save(fig, path):
    m = DOC["machine"]
    fig.suptitle(f"{m['cpu_model']}, {m['cores']} cores, kernel {m['kernel']} — {DOC.get('started', '')}",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


DOC = {}


def main(argv):
    global DOC
    src, out = Path(argv[0]), Path(argv[1])
    DOC = json.loads(src.read_text())
    for fn in (te_throughput, store_throughput, latency, sweep):
        name = fn(DOC, out)
        if name:
            print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
