"""Ratios and markdown tables from a results document (see run.py for its layout).

Ratios compare like with like: ours over the reference on the same protocol (tcp), ours over Redis
for the same op, value size and batch (Redis has no zero-copy API, so zero-copy rows compare against
Redis's plain numbers and say so), and ours over the machine's limit for the transport used
(tcp and fabric -> one TCP stream (iperf3 where installed), shm -> single-thread memcpy). All ratios are of GB/s, which for
equal sizes equals the ratio of ops/s.
"""

KiB, MiB = 1 << 10, 1 << 20
# fabric: on hosts without RDMA its provider is libfabric's tcp one, whose limit is the TCP stream;
# on an RDMA host that ratio says how far past a TCP stream it goes
LIMIT_FOR = {"tcp": "tcp", "shm": "memcpy", "fabric": "tcp"}


def human(n):
    for unit, div in (("MiB", MiB), ("KiB", KiB)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def _ok(r):
    return "error" not in r and r.get("gbps", 0) > 0


def _key(r):
    if r["bench"] == "te":
        return ("te", r["op"], r["block"], r["threads"])
    return ("store", r["op"], r["size"], r["batch"], bool(r["zc"]))


def _find(results, system, protocol, key):
    for r in results:
        if r.get("system") == system and _ok(r) and (protocol is None or r.get("protocol") == protocol):
            if _key(r) == key:
                return r
    return None


def ratios(doc):
    res = doc["results"]
    lim = doc.get("limits", {})
    out = []
    for r in res:
        if r.get("system") != "ours" or not _ok(r):
            continue
        k = _key(r)
        base = {"bench": r["bench"], "protocol": r["protocol"], "op": r["op"],
                "size": r.get("block", r.get("size")), "threads": r.get("threads"),
                "batch": r.get("batch"), "zc": r.get("zc"), "ours_gbps": r["gbps"]}
        ref = _find(res, "reference", r["protocol"], k)
        if ref:
            out.append({**base, "vs": "reference", "other_gbps": ref["gbps"], "ratio": r["gbps"] / ref["gbps"]})
        if r["bench"] == "store":
            red = _find(res, "redis", None, ("store", r["op"], r["size"], r["batch"], False))
            if red:
                out.append({**base, "vs": "redis", "other_gbps": red["gbps"],
                            "other_plain": bool(r["zc"]), "ratio": r["gbps"] / red["gbps"]})
        lname = LIMIT_FOR.get(r["protocol"])
        if lname and lim.get(lname, {}).get("gbps", 0) > 0:
            g = lim[lname]["gbps"]
            out.append({**base, "vs": f"limit:{lname}", "other_gbps": g, "ratio": r["gbps"] / g})
    return out


def _cell(r):
    if r is None:
        return "—"
    if "error" in r:
        return "error"
    ops = r["ops_per_s"]
    ops_s = f"{ops / 1e3:.1f}k" if ops >= 1e4 else f"{ops:.0f}"
    return f"{r['gbps']:.2f} GB/s, {ops_s} op/s, {_us(r['p50_us'])} / {_us(r['p99_us'])}"


def _us(x):
    if x >= 1e4:
        return f"{x / 1e3:.1f} ms"
    return f"{x:.0f} µs" if x >= 10 else f"{x:.1f} µs"


def _ratio_of(rats, key, vs):
    for q in rats:
        if q["vs"] == vs and q["bench"] == key["bench"] and q["protocol"] == key["protocol"] and \
                q["op"] == key["op"] and q["size"] == key["size"] and q.get("threads") == key.get("threads") \
                and q.get("batch") == key.get("batch") and q.get("zc") == key.get("zc"):
            r = q["ratio"]
            return f"{r:.3f}" if r < 0.1 else f"{r:.2f}"
    return "—"


def _variants(res, bench):
    seen = []
    for r in res:
        if r.get("bench") == bench and "op" in r:
            v = (r["system"], r["protocol"])
            if v not in seen:
                seen.append(v)
    order = {"ours": 0, "reference": 1, "redis": 2}
    return sorted(seen, key=lambda v: (order.get(v[0], 9), v[1] != "tcp", v[1]))


def markdown(doc):
    res = doc["results"]
    rats = doc.get("ratios", [])
    m = doc["machine"]
    L = []
    L.append("# Comparison benchmark results\n")
    L.append(f"Run {doc.get('started', '?')}, {doc.get('elapsed_s', 0):.0f} s; "
             f"{m['cpu_model']}, {m['cores']} cores, kernel {m['kernel']}.\n")
    L.append("Each cell: throughput in GB/s (1e9 bytes/s) and ops/s, then p50 / p99 latency per call "
             "(a batched call moves `batch` values). Ratios are of throughput.\n")
    L.append("## Machine limits (same run)\n")
    L.append("| limit | GB/s | measured with |")
    L.append("|---|---|---|")
    for k, v in doc.get("limits", {}).items():
        name = {"memcpy": "single-thread memcpy, 1 MiB blocks",
                "tcp": "one TCP stream over loopback"}.get(k, k)
        L.append(f"| {name} | {v['gbps']:.2f} | {v['source']} |")
    L.append("")
    L.append("## Systems\n")
    L.append("| system | status | version / reason |")
    L.append("|---|---|---|")
    for k, v in doc.get("systems", {}).items():
        if v.get("status") == "ok":
            extra = [f"{part} unavailable: {v[part + '_reason']}" for part in ("engine", "store")
                     if v.get(part) is False and v.get(part + "_reason")]
            detail = str(v.get("version", "")) + ("; " + "; ".join(extra) if extra else "")
            if v.get("note"):
                detail += f" ({v['note']})"
            L.append(f"| {k} | ok | {detail} |")
        else:
            L.append(f"| {k} | **not run** | {v.get('reason', '?')} |")
    L.append("")
    errs = [r for r in res if "error" in r]
    if errs:
        L.append("## Failures\n")
        for r in errs:
            what = " ".join(str(x) for x in (r.get("bench"), r.get("system"), r.get("protocol"),
                                              r.get("op", ""), human(r["block"]) if "block" in r else
                                              (human(r["size"]) if "size" in r else "")) if x)
            L.append(f"- {what}: {r['error']}")
        L.append("")

    te_vars = _variants(res, "te")
    if te_vars:
        L.append("## Transfer Engine, Python API (two processes, one block per `transfer_sync_*` call)\n")
        for op in ("write", "read"):
            for th in sorted({r["threads"] for r in res if r.get("bench") == "te" and "threads" in r}):
                blocks = sorted({r["block"] for r in res if r.get("bench") == "te" and r.get("op") == op
                                 and r.get("threads") == th})
                if not blocks:
                    continue
                L.append(f"### TE {op}, {th} thread{'s' if th > 1 else ''}\n")
                hdr = ["block"] + [f"{s} {p}" for s, p in te_vars]
                rcols = []
                if ("ours", "tcp") in te_vars and ("reference", "tcp") in te_vars:
                    rcols.append(("ours/ref (tcp)", "tcp", "reference"))
                if ("ours", "tcp") in te_vars:
                    rcols.append(("ours tcp/TCP stream", "tcp", "limit:tcp"))
                if ("ours", "shm") in te_vars:
                    rcols.append(("ours shm/memcpy", "shm", "limit:memcpy"))
                if ("ours", "fabric") in te_vars:
                    rcols.append(("ours fabric/TCP stream", "fabric", "limit:tcp"))
                hdr += [c[0] for c in rcols]
                L.append("| " + " | ".join(hdr) + " |")
                L.append("|" + "---|" * len(hdr))
                for b in blocks:
                    row = [human(b)]
                    for s, p in te_vars:
                        row.append(_cell(next((r for r in res if r.get("bench") == "te" and r["system"] == s
                                               and r["protocol"] == p and r.get("op") == op
                                               and r.get("threads") == th and r.get("block") == b), None)))
                    for _, proto, vs in rcols:
                        row.append(_ratio_of(rats, {"bench": "te", "protocol": proto, "op": op, "size": b,
                                                    "threads": th, "batch": None, "zc": None}, vs))
                    L.append("| " + " | ".join(row) + " |")
                L.append("")

    st_vars = _variants(res, "store")
    if st_vars:
        L.append("## Store, Python API (master + storage client + client, 3 processes; Redis: server + "
                 "redis-py client)\n")
        for zc in (False, True):
            for batched in (False, True):
                for op in ("put", "get"):
                    rows = sorted({r["size"] for r in res if r.get("bench") == "store" and r.get("op") == op
                                   and bool(r.get("zc")) == zc and (r.get("batch", 1) > 1) == batched})
                    if not rows:
                        continue
                    api = {("put", False, False): "put", ("put", True, False): "put_batch",
                           ("get", False, False): "get", ("get", True, False): "get_batch",
                           ("put", False, True): "put_from", ("put", True, True): "batch_put_from",
                           ("get", False, True): "get_into", ("get", True, True): "batch_get_into"}[
                        (op, batched, zc)]
                    redis_api = {"put": "SET", "get": "GET"}[op] + (" (pipelined)" if batched else "")
                    L.append(f"### Store {op}, {'batched' if batched else 'single'}, "
                             f"{'zero-copy' if zc else 'plain'} (`{api}`; Redis {redis_api}"
                             f"{', plain: no zero-copy API' if zc else ''})\n")
                    hdr = ["value"] + (["batch"] if batched else []) + [f"{s} {p}" for s, p in st_vars]
                    rcols = []
                    if ("ours", "tcp") in st_vars and ("reference", "tcp") in st_vars:
                        rcols.append(("ours/ref (tcp)", "tcp", "reference"))
                    if any(s == "redis" for s, _ in st_vars):
                        for s, p in st_vars:
                            if s == "ours":
                                rcols.append((f"ours {p}/Redis", p, "redis"))
                    if ("ours", "tcp") in st_vars:
                        rcols.append(("ours tcp/TCP stream", "tcp", "limit:tcp"))
                    if ("ours", "shm") in st_vars:
                        rcols.append(("ours shm/memcpy", "shm", "limit:memcpy"))
                    hdr += [c[0] for c in rcols]
                    L.append("| " + " | ".join(hdr) + " |")
                    L.append("|" + "---|" * len(hdr))
                    for size in rows:
                        recs = {}
                        for s, p in st_vars:
                            want_zc = zc and s != "redis"
                            recs[(s, p)] = next((r for r in res if r.get("bench") == "store" and r["system"] == s
                                                 and r["protocol"] == p and r.get("op") == op
                                                 and r.get("size") == size and bool(r.get("zc")) == want_zc
                                                 and (r.get("batch", 1) > 1) == batched), None)
                        batch = next((r["batch"] for r in recs.values() if r), 1)
                        row = [human(size)] + ([str(batch)] if batched else [])
                        row += [_cell(recs[v]) for v in st_vars]
                        for _, proto, vs in rcols:
                            row.append(_ratio_of(rats, {"bench": "store", "protocol": proto, "op": op,
                                                        "size": size, "threads": None, "batch": batch,
                                                        "zc": zc}, vs))
                        L.append("| " + " | ".join(row) + " |")
                    L.append("")
    L += fair_markdown(doc)
    if doc.get("plots"):
        L.append("## Plots\n")
        for p in doc["plots"]:
            L.append(f"![{p}]({p})")
        L.append("")
    elif doc.get("plots_skipped"):
        L.append(f"Plots not drawn: {doc['plots_skipped']}\n")
    v = doc.get("versions", {})
    if v:
        L.append("## Versions\n")
        for k, x in v.items():
            L.append(f"- {k}: {', '.join(x) if isinstance(x, list) else x}")
        L.append("")
    return "\n".join(L)


# ---- the fair baselines (issue 26): C against C, repeats, targets --------------------------------

FAIR_LABEL = {"ours-c": "ours (C, store.h)", "redis-c": "Redis (redis-benchmark, C)",
              "redis-c-procs": "Redis, one redis-benchmark -c 1 per process",
              "reference-py": "reference (Python API)", "iperf3": "one iperf3 stream",
              "memcpy": "memcpy (one thread)", "ours-disk": "ours disk tier", "dd-direct": "dd iflag=direct"}


def _stats(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return {"median": med, "min": xs[0], "max": xs[-1], "n": n}


def _spread(st, fmt="{:.2f}"):
    if st is None:
        return "—"
    s = fmt.format(st["median"])
    if st["n"] > 1:
        s += " [" + fmt.format(st["min"]) + "–" + fmt.format(st["max"]) + "]"
    return s


def _rate(x):
    return f"{x / 1e3:.1f}k" if x >= 1e4 else f"{x:.0f}"


def _fair_index(fair):
    """{(system, kind, op, size, batch, procs, zc): {repeat: record}} of the records that worked."""
    idx = {}
    for r in fair.get("records", []):
        if "error" in r or not r.get("gbps"):
            continue
        k = (r["system"], r["kind"], r.get("op"), r.get("size"), r.get("batch"), r.get("procs"),
             bool(r.get("zc")))
        idx.setdefault(k, {})[r["repeat"]] = r
    return idx


def _limit_by_repeat(fair, system):
    return {r["repeat"]: r["gbps"] for r in fair.get("records", [])
            if r.get("system") == system and r.get("kind") == "limit" and "error" not in r}


def _paired(a, b, key="gbps"):
    """Per-repeat ratios a/b over the repeats both have (b may be {repeat: number})."""
    out = []
    for rep, ra in a.items():
        rb = b.get(rep)
        if rb is None:
            continue
        vb = rb if isinstance(rb, (int, float)) else rb.get(key)
        if vb:
            out.append(ra[key] / vb)
    return out


def _target(rows, group, what, ratios, goal):
    st = _stats(ratios)
    row = {"target": group, "what": what, "goal": goal, "ratios": ratios}
    if st:
        row.update(median=st["median"], min=st["min"], max=st["max"], met=st["median"] >= goal)
    else:
        row.update(met=None)
    rows.append(row)


def fair_targets(doc):
    """Issue 26's must-show rows, each with its per-repeat ratios and whether the median meets it."""
    fair = doc.get("fair") or {}
    idx = _fair_index(fair)
    rows = []
    procs = fair.get("procs") or [1]
    ends = sorted({procs[0], procs[-1]})
    batch = {int(k): v for k, v in (fair.get("batch") or {}).items()}
    ours_ops = (("put", "put"), ("get_first", "get"), ("get_cached", "get"))
    for size in fair.get("sizes", []):
        for b in (1, batch.get(size, 1)):
            for op, base_op in ours_ops:
                for n in ends:
                    ours = idx.get(("ours-c", "store", op, size, b, n, False), {})
                    mode = "single" if b == 1 else f"batch x{b}"
                    what = f"{op} {human(size)} {mode}, {n} proc(s)"
                    red = idx.get(("redis-c", "store", base_op, size, b, n, False), {})
                    _target(rows, "store vs Redis C client (>= 1.0x)", what,
                            _paired(ours, red, "ops_per_s"), 1.0)
                    same = idx.get(("redis-c-procs", "store", base_op, size, b, n, False), {})
                    if same:
                        _target(rows, "informative: store vs Redis C client with one process per "
                                "client, as ours (>= 1.0x)", what, _paired(ours, same, "ops_per_s"), 1.0)
                    ref = idx.get(("reference-py", "store", base_op, size, b, n, False), {})
                    if fair.get("reference_asked", True):
                        _target(rows, "store vs reference (>= 2.0x)", what,
                                _paired(ours, ref, "ops_per_s"), 2.0)
                if len(procs) > 1:
                    one = idx.get(("ours-c", "store", op, size, b, procs[0], False), {})
                    many = idx.get(("ours-c", "store", op, size, b, procs[-1], False), {})
                    _target(rows, f"aggregate at {procs[-1]} procs vs 1 (>= 1.0x)",
                            f"{op} {human(size)} {'single' if b == 1 else f'batch x{b}'}",
                            _paired(many, one, "ops_per_s"), 1.0)
    iperf = _limit_by_repeat(fair, "iperf3")
    for op in ("write", "read"):
        for blk in fair.get("te_blocks", []):
            te = idx.get(("ours-c", "te", op, blk, 1, 1, False), {})
            _target(rows, "TE tcp vs one iperf3 stream (>= 0.9x)", f"{op} {human(blk)}, one thread",
                    _paired(te, iperf), 0.9)
    for size in fair.get("large", []):
        for zc in (False, True):
            for op in ("get_first", "get_cached"):
                st = idx.get(("ours-c", "store", op, size, 1, 1, zc), {})
                _target(rows, "store get vs one iperf3 stream (>= 0.8x)",
                        f"{op} {human(size)} {'registered' if zc else 'heap'}", _paired(st, iperf), 0.8)
    disk = idx.get(("ours-disk", "disk", None, 64 * KiB, None, None, False), {})
    dd = idx.get(("dd-direct", "disk", None, 64 * KiB, None, None, False), {})
    if disk or dd or any(m["what"].startswith("disk") for m in fair.get("missing", [])):
        _target(rows, "disk 64 KiB get vs dd iflag=direct (>= 0.7x)", "one reader", _paired(disk, dd), 0.7)
    return rows


def _verdict(row):
    if row.get("met") is None:
        return "no data"
    if row["met"]:
        return "met"
    return f"missed by {(1 - row['median'] / row['goal']) * 100:.0f}%"


def fair_markdown(doc):
    fair = doc.get("fair")
    if not fair:
        return []
    idx = _fair_index(fair)
    L = [f"## Fair baselines (issue 26): C against C, {fair['repeats']} alternating repeat(s)\n"]
    la, lb = fair.get("loadavg_start"), fair.get("loadavg_end")
    L.append(f"Load average at the start {la}, at the end {lb} ({doc['machine']['cores']} cores). "
             "Each repeat runs ours, then the baselines (A B A B ...); every figure is the median of "
             "the repeats with their min–max spread in brackets. `redis-benchmark` multiplexes its "
             "`-c` clients in one process, where ours are separate processes with a store client each "
             "(the targets are judged against that, the stronger baseline; beside it, single calls are "
             "also run as one `redis-benchmark -c 1` process per client, the same shape as ours, "
             "informative only); "
             "the reference is driven through its Python API. Gets: *get_cached* re-reads keys within "
             "the replica-location cache window (no master call), *get_first* reads keys whose location "
             "the client's cache no longer holds (every get asks the master; docs/benchmarks.md).\n")
    if fair.get("missing"):
        L.append("Baselines not run: " + "; ".join(f"{m['what']}: {m['reason']}" for m in fair["missing"]) + "\n")
    errs = [r for r in fair.get("records", []) if "error" in r]
    if errs:
        L.append("Failed rows: " + "; ".join(
            f"r{r['repeat']} {r['system']} {r.get('op', '')} {human(r['size']) if r.get('size') else ''} "
            f"{r.get('procs', '')}p: {r['error']}" for r in errs) + "\n")
    iperf = _limit_by_repeat(fair, "iperf3")
    mem = _limit_by_repeat(fair, "memcpy")
    L.append("### Limits\n")
    L.append("| limit | GB/s | per repeat |")
    L.append("|---|---|---|")
    for name, d in (("iperf3", iperf), ("memcpy", mem)):
        L.append(f"| {FAIR_LABEL[name]} | {_spread(_stats(list(d.values())))} | "
                 f"{', '.join(f'{v:.2f}' for _, v in sorted(d.items())) or '—'} |")
    L.append("")
    # our C rows with their limit ratios
    L.append("### Ours through store.h and the TE's C bench (ratios to iperf3 and memcpy)\n")
    L.append("| what | procs | op/s | GB/s | p50 / p99 µs | ÷ iperf3 | ÷ memcpy |")
    L.append("|---|---|---|---|---|---|---|")
    for k in sorted((k for k in idx if k[0] == "ours-c"), key=lambda k: (k[1], k[2], k[3], k[4], k[6], k[5])):
        recs = idx[k]
        _, kind, op, size, b, n, zc = k
        what = (f"TE tcp {op} {human(size)}" if kind == "te" else
                f"{op} {human(size)} {'single' if b == 1 else f'x{b}'} {'registered' if zc else 'heap'}")
        ops = _stats([r["ops_per_s"] for r in recs.values()])
        gb = _stats([r["gbps"] for r in recs.values()])
        p50 = _stats([r.get("p50_us") for r in recs.values()])
        p99 = _stats([r.get("p99_us") for r in recs.values()])
        L.append(f"| {what} | {n} | {_spread(ops, '{:.0f}')} | {_spread(gb, '{:.3f}')} | "
                 f"{_spread(p50, '{:.0f}') if p50 else '—'} / {_spread(p99, '{:.0f}') if p99 else '—'} | "
                 f"{_spread(_stats(_paired(recs, iperf)), '{:.3f}')} | "
                 f"{_spread(_stats(_paired(recs, mem)), '{:.3f}')} |")
    L.append("")
    # the concurrency sweep
    procs = fair.get("procs", [])
    if procs:
        L.append("### Concurrency sweep: aggregate op/s by client processes\n")
        hdr = ["op", "value", "call"] + [f"{FAIR_LABEL[s]} " + "/".join(str(p) for p in procs)
                                         for s in ("ours-c", "redis-c", "redis-c-procs", "reference-py")]
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|" + "---|" * len(hdr))
        batch = {int(k): v for k, v in (fair.get("batch") or {}).items()}
        for size in fair.get("sizes", []):
            for b in (1, batch.get(size, 1)):
                for op in ("put", "get_first", "get_cached"):
                    cells = []
                    for system in ("ours-c", "redis-c", "redis-c-procs", "reference-py"):
                        sop = op if system == "ours-c" else ("put" if op == "put" else "get")
                        vals = []
                        for n in procs:
                            st = _stats([r["ops_per_s"] for r in idx.get((system, "store", sop, size, b, n, False),
                                                                         {}).values()])
                            vals.append(_rate(st["median"]) if st else "—")
                        cells.append(" / ".join(vals))
                    L.append(f"| {op} | {human(size)} | {'single' if b == 1 else f'x{b}'} | " + " | ".join(cells) + " |")
        L.append("")
    disk = idx.get(("ours-disk", "disk", None, 64 * KiB, None, None, False), {})
    dd = idx.get(("dd-direct", "disk", None, 64 * KiB, None, None, False), {})
    if disk or dd:
        fs = next((r.get("fs") for r in list(disk.values()) + list(dd.values())), "?")
        L.append(f"Disk tier 64 KiB gets, one reader ({fs}): ours {_spread(_stats([r['gbps'] * 1e3 for r in disk.values()]), '{:.0f}')} MB/s, "
                 f"`dd iflag=direct bs=64K` {_spread(_stats([r['gbps'] * 1e3 for r in dd.values()]), '{:.0f}')} MB/s.\n")
    # the targets
    rows = doc.get("fair_targets") or fair_targets(doc)
    L.append("## Issue 26 targets (median ratio of the repeats [min–max])\n")
    groups = []
    for r in rows:
        if r["target"] not in groups:
            groups.append(r["target"])
    for g in groups:
        L.append(f"### {g}\n")
        L.append("| row | ratio | per repeat | verdict |")
        L.append("|---|---|---|---|")
        for r in rows:
            if r["target"] != g:
                continue
            st = _stats(r["ratios"])
            L.append(f"| {r['what']} | {_spread(st)} | {', '.join(f'{x:.2f}' for x in r['ratios']) or '—'} | "
                     f"{_verdict(r)} |")
        L.append("")
    return L
