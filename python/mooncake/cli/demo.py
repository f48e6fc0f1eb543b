"""The main job on an embedded default: a master and clients on this host moving real data.

``mooncake_demo`` starts a ``mooncake_master`` on free loopback ports, two storage clients (each a
separate process contributing a memory segment) and uses this process as a pure client: it puts
objects of several sizes with two replicas, reads them back and checks every byte, kills one
storage client with SIGKILL and reads everything again from the surviving replicas, then moves
a buffer between two Transfer Engines directly. Every step prints what happened.

``mooncake_demo --cluster ADDR`` runs the same data check against a cluster that is already up
(a master's ``host:port``, or ``etcd://...`` for masters with HA): it puts objects with two
replicas as a pure client, reads every byte back and removes them; it starts and kills nothing.
The compose topology in deploy/docker runs it as its last service.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import signal
import subprocess
import sys
import time

from mooncake.cli import binary_path

MiB = 1 << 20


def _say(msg: str) -> None:
    print(msg, flush=True)


def _start_master(client_ttl: int) -> tuple[subprocess.Popen, str, int]:
    cmd = [binary_path("mooncake_master"), "--port=0", "--rpc_address=127.0.0.1",
           "--metrics_port=0", f"--client_ttl={client_ttl}",
           "--enable_metric_reporting=false"]  # its output pipe is read only at start
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None  # a pipe: stdout=PIPE
    rpc = metrics = None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (rpc is None or metrics is None):
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"listening on rpc (\S+:\d+)", line)
        if m:
            rpc = m.group(1)
        m = re.search(r"metrics on (?:http://)?\S+:(\d+)", line)
        if m:
            metrics = int(m.group(1))
    if rpc is None:
        proc.kill()
        raise RuntimeError("mooncake_master did not start")
    return proc, rpc, metrics or 0


def _start_storage(master: str, segment: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "mooncake.cli.demo", "--role=storage", f"--master={master}",
           f"--segment={segment}"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None  # a pipe: stdout=PIPE
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        proc.kill()
        raise RuntimeError(f"storage client failed to start: {line.strip()!r}")
    return proc


def _storage_main(master: str, segment: int) -> int:
    from mooncake.store import MooncakeDistributedStore

    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", "P2PHANDSHAKE", segment, 0, "tcp", "", master)
    if rc != 0:
        print(f"setup failed: {rc}", flush=True)
        return 1
    print(f"ready {store.get_hostname()}", flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
    store.close()
    return 0


def _fetch_metrics(port: int) -> dict[str, float]:
    import urllib.request

    out: dict[str, float] = {}
    if not port:
        return out
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                try:
                    out[name] = float(value)
                except ValueError:
                    pass
    return out


def _payload(key: str, size: int) -> bytes:
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def _engine_demo() -> None:
    from mooncake.engine import TransferEngine

    a, b = TransferEngine(), TransferEngine()
    for e in (a, b):
        rc = e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
        if rc != 0:
            raise RuntimeError(f"TransferEngine.initialize failed: {rc}")
    n = 16 * MiB
    src, dst = a.allocate_managed_buffer(n), b.allocate_managed_buffer(n)
    data = _payload("engine", n)
    a.write_bytes_to_buffer(src, data, n)
    t0 = time.perf_counter()
    rc = a.transfer_sync_write(f"127.0.0.1:{b.get_rpc_port()}", src, dst, n)
    dt = time.perf_counter() - t0
    ok = rc == 0 and b.read_bytes_from_buffer(dst, n) == data
    _say(f"transfer engine: wrote {n // MiB} MiB from engine A to engine B over tcp in "
         f"{dt * 1e3:.1f} ms ({n / dt / 1e9:.2f} GB/s), contents {'verified' if ok else 'WRONG'}")
    a.free_managed_buffer(src, n)
    b.free_managed_buffer(dst, n)
    if not ok:
        raise RuntimeError("engine transfer failed")


def _put_read_remove(store, per_size: int, prefix: str) -> None:
    """Puts objects of 1 KiB to 4 MiB with two replicas, reads each back byte-exact, removes them."""
    from mooncake.store import ReplicateConfig

    cfg = ReplicateConfig()
    cfg.replica_num = 2
    objects = {f"{prefix}/{s}/{i}": s for s in (1024, 64 * 1024, MiB, 4 * MiB)
               for i in range(per_size)}
    total = sum(objects.values())
    t0 = time.perf_counter()
    for key, size in objects.items():
        rc = store.put(key, _payload(key, size), cfg)
        if rc != 0:
            raise RuntimeError(f"put {key} failed: {rc}")
    dt = time.perf_counter() - t0
    _say(f"put {len(objects)} objects ({total / MiB:.1f} MiB, 2 replicas each) in {dt:.2f} s")
    t0 = time.perf_counter()
    bad = [k for k, s in objects.items() if store.get(k) != _payload(k, s)]
    if bad:
        raise RuntimeError(f"{len(bad)} objects read back wrong, e.g. {bad[0]}")
    _say(f"read {len(objects)} objects back in {time.perf_counter() - t0:.2f} s, "
         "every byte verified")
    for key in objects:
        store.remove(key)


def _cluster_main(args: argparse.Namespace) -> int:
    from mooncake.store import MooncakeDistributedStore

    _say(f"mooncake demo: checking the cluster at {args.cluster} as a pure client")
    store = MooncakeDistributedStore()
    rc = store.setup(args.host, "P2PHANDSHAKE", 0, 64 * MiB, "tcp", "", args.cluster)
    if rc != 0:
        raise RuntimeError(f"setup against {args.cluster} failed: {rc}")
    try:
        _put_read_remove(store, args.per_size, f"demo-cluster/{os.getpid()}")
    finally:
        store.close()
    _say("cluster check finished: all data verified")
    return 0


def _client_main(args: argparse.Namespace) -> int:
    from mooncake.store import MooncakeDistributedStore, ReplicateConfig

    _say("mooncake demo: one master, two storage clients, one pure client, all on this host")
    master, rpc, metrics_port = _start_master(client_ttl=2)
    _say(f"[1/6] mooncake_master pid {master.pid} serving rpc on {rpc}, metrics on port {metrics_port}")
    storages = []
    try:
        for i in range(2):
            storages.append(_start_storage(rpc, args.segment_mib * MiB))
            _say(f"[2/6] storage client {i + 1} (pid {storages[-1].pid}) contributes "
                 f"{args.segment_mib} MiB")
        store = MooncakeDistributedStore()
        rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 64 * MiB, "tcp", "", rpc)
        if rc != 0:
            raise RuntimeError(f"pure client setup failed: {rc}")
        cfg = ReplicateConfig()
        cfg.replica_num = 2
        sizes = [1024, 64 * 1024, MiB, 4 * MiB]
        objects = {f"demo/{s}/{i}": s for s in sizes for i in range(args.per_size)}
        total = sum(objects.values())
        t0 = time.perf_counter()
        for n, (key, size) in enumerate(objects.items(), 1):
            rc = store.put(key, _payload(key, size), cfg)
            if rc != 0:
                raise RuntimeError(f"put {key} failed: {rc}")
            if n % max(1, len(objects) // 4) == 0:
                _say(f"      put {n}/{len(objects)} objects")
        dt = time.perf_counter() - t0
        _say(f"[3/6] put {len(objects)} objects ({total / MiB:.1f} MiB, 2 replicas each) in "
             f"{dt:.2f} s ({total / dt / 1e6:.0f} MB/s)")

        def read_all(label: str) -> None:
            t = time.perf_counter()
            bad = [k for k, s in objects.items() if store.get(k) != _payload(k, s)]
            d = time.perf_counter() - t
            if bad:
                raise RuntimeError(f"{len(bad)} objects read back wrong, e.g. {bad[0]}")
            _say(f"{label} read {len(objects)} objects back in {d:.2f} s "
                 f"({total / d / 1e6:.0f} MB/s), every byte verified")

        read_all("[4/6]")
        victim = storages.pop(0)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        _say(f"[5/6] killed storage client 1 (pid {victim.pid}) with SIGKILL")
        read_all("      with one replica gone:")
        # The master notices the dead client once its heartbeats stop for client_ttl seconds,
        # unmounts its segment and drops its replicas; every object keeps its other replica.
        deadline = time.monotonic() + 15
        m = _fetch_metrics(metrics_port)
        while m.get("mooncake_master_segments", 1) > 1 and time.monotonic() < deadline:
            time.sleep(0.5)
            m = _fetch_metrics(metrics_port)
        _say(f"      master expired the dead client: segments "
             f"{m.get('mooncake_master_segments', float('nan')):g}, objects "
             f"{m.get('mooncake_master_objects', float('nan')):g}")
        read_all("      after the expiry:")
        store.close()
        _say("[6/6] direct Transfer Engine transfer:")
        _engine_demo()
        _say("demo finished: all data verified")
        return 0
    finally:
        for p in storages:
            if p.stdin:
                p.stdin.close()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        master.terminate()
        try:
            master.wait(timeout=5)
        except subprocess.TimeoutExpired:
            master.kill()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mooncake_demo", description=__doc__.splitlines()[0])
    from mooncake import __version__

    ap.add_argument("--version", action="version", version=f"mooncake_demo {__version__}")
    ap.add_argument("--role", choices=["client", "storage"], default="client",
                    help=argparse.SUPPRESS)
    ap.add_argument("--master", help=argparse.SUPPRESS)
    ap.add_argument("--segment", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--segment-mib", type=int, default=128,
                    help="memory each storage client contributes (MiB, default 128)")
    ap.add_argument("--per-size", type=int, default=8,
                    help="objects per value size (default 8)")
    ap.add_argument("--cluster", metavar="ADDR",
                    help="check a running cluster instead (host:port of its master, or "
                         "etcd://h1:2379,... for masters with HA; MC_STORE_CLUSTER_ID names the "
                         "cluster): put, read back and remove objects, start nothing")
    ap.add_argument("--host", default="127.0.0.1",
                    help="with --cluster: the address the cluster's nodes reach this client at")
    args = ap.parse_args(argv)
    if args.role == "storage":
        return _storage_main(args.master, args.segment)
    try:
        if args.cluster:
            return _cluster_main(args)
        return _client_main(args)
    except (RuntimeError, FileNotFoundError) as exc:
        print(f"mooncake_demo: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
