"""Medians and ranges of run.sh output: one row per shape, before / after / Redis's C client.
   python3 docs/perf/issue26-put/summarize.py ab-1.txt [ab-2.txt ...]"""
import re
import statistics
import sys
from collections import defaultdict

ours = defaultdict(list)  # (label, op, clients, size, batch) -> [(ops/s, p50)]
redis = defaultdict(list)  # (op, clients, size, pipeline) -> [(ops/s, p50)]
for path in sys.argv[1:]:
    for line in open(path):
        m = re.match(r"(before|after|off) (put|get)\s+clients=(\d+) size=(\d+) batch=(\d+) ops=\d+\s+"
                     r"(\d+) op/s\s+p50 ([\d.]+) us", line)
        if m:
            ours[(m[1], m[2], int(m[3]), int(m[4]), int(m[5]))].append((float(m[6]), float(m[7])))
            continue
        m = re.match(r"redis clients=(\d+) size=(\d+) pipeline=(\d+) (SET|GET): ([\d.]+) requests "
                     r"per second, p50=([\d.]+) msec", line)
        if m:
            op = "put" if m[4] == "SET" else "get"
            redis[(op, int(m[1]), int(m[2]), int(m[3]))].append((float(m[5]),
                                                                float(m[6]) * 1000))


def fmt(v):
    if not v:
        return "-", "-"
    r = [x for x, _ in v]
    p = [y for _, y in v]
    return (f"{statistics.median(r):.0f} ({min(r):.0f}-{max(r):.0f})",
            f"{statistics.median(p):.0f}")


off = any(k[0] == "off" for k in ours)
print("| op | clients | size | batch | before op/s (range) | p50 us | after op/s (range) | p50 us"
      " | Redis C client op/s (range) | p50 us | after / before | after / Redis | n |" +
      (" slots off op/s | p50 us |" if off else ""))
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if off else ""))
for (label, op, c, size, batch) in sorted(k for k in ours if k[0] == "after"):
    b, a = ours[("before", op, c, size, batch)], ours[(label, op, c, size, batch)]
    rd = redis[(op, c, size, batch)]
    med = lambda v: statistics.median([x for x, _ in v]) if v else float("nan")  # noqa: E731
    # batched calls: ops counted per key on both sides (Redis: pipelined commands)
    print(f"| {op} | {c} | {size} | {batch} | {fmt(b)[0]} | {fmt(b)[1]} | {fmt(a)[0]} | "
          f"{fmt(a)[1]} | {fmt(rd)[0]} | {fmt(rd)[1]} | {med(a) / med(b):.2f} | "
          f"{med(a) / med(rd):.2f} | {len(a)} |" +
          (" %s | %s |" % fmt(ours[("off", op, c, size, batch)]) if off else ""))
