"""Ratios and markdown tables from a results document (see run.py for its layout).

Ratios compare like with like: ours over the reference on the same protocol (tcp), ours over Redis
for the same op, value size and batch (Redis has no zero-copy API, so zero-copy rows compare against
Redis's plain numbers and say so), and ours over the machine's limit for the transport used
(tcp and fabric -> the single-stream TCP pump, shm -> single-thread memcpy). All ratios are of GB/s, which for
equal sizes equals the ratio of ops/s.
"""

KiB, MiB = 1 << 10, 1 << 20
# fabric: on hosts without RDMA its provider is libfabric's tcp one, whose limit is the TCP pump;
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
                "tcp": "single-stream TCP pump over loopback, 1 MiB writes"}.get(k, k)
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
        L.append("## Transfer Engine (two processes, one block per `transfer_sync_*` call)\n")
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
                    rcols.append(("ours tcp/TCP pump", "tcp", "limit:tcp"))
                if ("ours", "shm") in te_vars:
                    rcols.append(("ours shm/memcpy", "shm", "limit:memcpy"))
                if ("ours", "fabric") in te_vars:
                    rcols.append(("ours fabric/TCP pump", "fabric", "limit:tcp"))
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
        L.append("## Store (master + storage client + client, 3 processes; Redis: server + client)\n")
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
                        rcols.append(("ours tcp/TCP pump", "tcp", "limit:tcp"))
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
