"""transfer_engine_topology_dump: this host's topology (one key per NUMA node from sysfs), a
custom matrix file, and what users get wrong (a bad file, the TENT backend this build lacks)."""

import glob
import json
import subprocess
import sys


def _run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "mooncake.transfer_engine_topology_dump", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_discover_lists_this_hosts_numa_nodes():
    r = _run()
    assert r.returncode == 0, r.stderr
    prefix = "Local topology [te/discover]: "
    assert r.stdout.startswith(prefix)
    topo = json.loads(r.stdout[len(prefix):])
    nodes = glob.glob("/sys/devices/system/node/node[0-9]*")
    assert sorted(topo) == sorted(f"cpu:{p.rsplit('node', 1)[1]}" for p in nodes) or (not nodes and topo)
    assert all(len(v) == 2 for v in topo.values())


def test_custom_matrix_and_filter(tmp_path):
    f = tmp_path / "topo.json"
    f.write_text(json.dumps({"cpu:0": [["mlx5_0"], ["mlx5_1"]], "cuda:0": [["mlx5_1"], []]}))
    r = _run("--custom-topo-json", str(f), "--device-name", "mlx5_1")
    assert r.returncode == 0, r.stderr
    topo = json.loads(r.stdout.split(": ", 1)[1])
    assert topo == {"cpu:0": [[], ["mlx5_1"]], "cuda:0": [["mlx5_1"], []]}


def test_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"cpu:0": ["mlx5_0"]}')
    r = _run("--custom-topo-json", str(bad))
    assert r.returncode == 1 and "[[preferred NICs], [other NICs]]" in r.stderr
    r = _run("--custom-topo-json", str(tmp_path / "missing.json"))
    assert r.returncode == 1 and "failed to dump topology" in r.stderr
    r = _run("--backend", "tent")
    assert r.returncode == 1 and "TENT" in r.stderr
    r = _run("--use-custom-topo", env={k: v for k, v in __import__("os").environ.items()
                                        if k != "MC_CUSTOM_TOPO_JSON"})
    assert r.returncode == 1 and "MC_CUSTOM_TOPO_JSON" in r.stderr
    assert _run("--backend", "nope").returncode == 2
