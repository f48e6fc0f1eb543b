"""Soak: 8 processes (a master, 3 storage nodes, 4 clients) under mixed 4 KiB-4 MiB
put/get/exist/remove while faults hit them: a node stopped (SIGSTOP) briefly, a node killed
(kill -9) and replaced, the master restarted, and a node stopped past client_ttl (expired, then
remounted as a new incarnation). Every returned byte is checked; the run reports 0 wrong bytes,
the result codes per operation, and memory that stays flat.

MC_SOAK_SECONDS sets the length (CI: 40 s; nightly runs it longer)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STORE_TESTS = HERE.parent / "integration" / "store"
sys.path.insert(0, str(STORE_TESTS))

from store_helpers import Master, Worker, rss_mib, wait_for  # noqa: E402


def test_soak_no_wrong_bytes_under_faults():
    seconds = float(os.environ.get("MC_SOAK_SECONDS", "40"))
    master = Master("--client_ttl=3")
    nodes = [Worker() for _ in range(3)]
    clients = []
    try:
        for n in nodes:
            n.setup(master, segment=256 << 20, buffer=0, protocol="auto")
        env = dict(os.environ)
        clients = [subprocess.Popen([sys.executable, str(HERE / "soak_client.py"), master.addr,
                                     str(seconds), str(i + 1)], stdout=subprocess.PIPE,
                                    text=True, env=env) for i in range(4)]
        t0 = time.monotonic()

        def at(fraction):
            time.sleep(max(0.0, t0 + seconds * fraction - time.monotonic()))

        at(0.15)
        rss_early = {n.proc.pid: rss_mib(n.proc.pid) for n in nodes}
        nodes[1].signal(signal.SIGSTOP)  # shorter than client_ttl: nothing expires
        time.sleep(1.5)
        nodes[1].signal(signal.SIGCONT)
        at(0.35)
        nodes[2].kill()  # kill -9, and a new node takes its place
        nodes[2] = Worker()
        nodes[2].setup(master, segment=256 << 20, buffer=0, protocol="auto")
        at(0.55)
        port = master.port
        master.stop()
        master.port = port
        master.start()
        at(0.65)
        master_rss_start = rss_mib(master.proc.pid)
        nodes[0].signal(signal.SIGSTOP)  # past client_ttl: expired, then a new incarnation
        time.sleep(5)
        nodes[0].signal(signal.SIGCONT)
        results = []
        for c in clients:
            out, _ = c.communicate(timeout=seconds + 120)
            assert c.returncode == 0, out
            results.append(json.loads(out.strip().splitlines()[-1]))
        master_rss_end = rss_mib(master.proc.pid)
        assert wait_for(lambda: master.metric("mooncake_master_segments") == 3, timeout=20)
        node_growth = {pid: rss_mib(pid) - early for pid, early in rss_early.items()
                       if os.path.exists(f"/proc/{pid}")}
    finally:
        for c in clients:
            if c.poll() is None:
                c.kill()
        for n in nodes:
            n.close()
        master.stop()

    wrong = sum(r["wrong_bytes"] for r in results)
    verified = sum(r["verified_bytes"] for r in results)
    codes = {}
    for r in results:
        for op, by_code in r["codes"].items():
            for code, count in by_code.items():
                codes.setdefault(op, {}).setdefault(code, 0)
                codes[op][code] += count
    print(f"\nsoak {seconds:.0f} s: verified {verified / 2**20:.0f} MiB, wrong bytes {wrong}")
    print("result codes by operation:", json.dumps(codes, sort_keys=True))
    print(f"master RSS after its restart {master_rss_start:.0f} -> {master_rss_end:.0f} MiB; "
          f"node RSS growth {', '.join(f'{g:+.0f}' for g in node_growth.values())} MiB; "
          f"client peak RSS {max(r['max_rss_kib'] for r in results) / 1024:.0f} MiB")
    assert wrong == 0
    assert verified > 0
    assert sum(codes.get("put", {}).values()) > 100
    assert codes["put"].get("0", 0) > 0 and codes["get"].get("0", 0) > 0
    assert master_rss_end - master_rss_start < 64
    assert all(g < 64 for g in node_growth.values()), node_growth
