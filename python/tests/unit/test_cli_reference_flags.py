"""The reference's command-line surface on our binaries: gflags' built-ins (--flagfile, --fromenv,
--undefok, --helpshort), transfer_engine_bench's report/NIC/backend flags, and
mooncake_http_metadata_server --log-level; each with what users get wrong."""

import os
import subprocess

from mooncake.cli import binary_path


def _run(name, *args, env=None, timeout=120):
    return subprocess.run([binary_path(name), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _serves(args, env=None):
    """Starts the metadata server with args; True when it says it listens (then stops it)."""
    p = subprocess.Popen([binary_path("mooncake_http_metadata_server"), *args], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        return line.startswith("listening on 127.0.0.1:"), p
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_gflags_builtins(tmp_path):
    ff = tmp_path / "flags"
    ff.write_text("# the reference's deployments keep flags in a file\n--host=127.0.0.1\n--port=0\n")
    ok, _ = _serves([f"--flagfile={ff}"])
    assert ok
    ok, _ = _serves(["--fromenv=host", "--port=0"], env={**os.environ, "FLAGS_host": "127.0.0.1"})
    assert ok
    ok, _ = _serves(["--host=127.0.0.1", "--port=0", "--v=2", "--undefok=v"])
    assert ok
    assert _run("mooncake_http_metadata_server", "--helpshort").returncode == 0
    r = _run("mooncake_http_metadata_server", "--fromenv=host",
             env={k: v for k, v in os.environ.items() if k != "FLAGS_host"})
    assert r.returncode == 2 and "FLAGS_host is not set" in r.stderr
    r = _run("mooncake_http_metadata_server", f"--flagfile={tmp_path / 'missing'}")
    assert r.returncode == 2 and "cannot read --flagfile" in r.stderr
    r = _run("mooncake_http_metadata_server", "--v=2")
    assert r.returncode == 2 and "unknown flag 'v'" in r.stderr


def test_metadata_server_log_level():
    ok, _ = _serves(["--host=127.0.0.1", "--port=0", "--log-level=INFO"])
    assert ok
    r = _run("mooncake_http_metadata_server", "--log-level=LOUD")
    assert r.returncode == 2 and "--log-level" in r.stderr


def test_bench_reference_flags():
    r = _run("mooncake_transfer_bench", "--duration=0.3", "--report_limits=false",
             "--report_unit=MiB", "--report_precision=1", "--device_name=mlx5_0",
             "--auto_discovery", "--nic_priority_matrix={}", "--backend=classic",
             "--buffer_size=8mb", "--block_size=64kb")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if "throughput" in x)
    value = line.split(":", 1)[1].split()[0]
    assert "MiB/s" in line and len(value.split(".")[1]) == 1
    r = _run("mooncake_transfer_bench", "--backend=tent")
    assert r.returncode == 2 and "TENT" in r.stderr
    for bad in ("--report_unit=XB", "--report_precision=12"):
        r = _run("mooncake_transfer_bench", bad)
        assert r.returncode == 2 and "--report_unit" in r.stderr


def test_reference_cli_modules():
    """mooncake.cli_client / mooncake.cli_bench (the reference's modules behind its console
    scripts) run the bundled binaries with the arguments passed through."""
    import sys

    r = subprocess.run([sys.executable, "-m", "mooncake.cli_bench", "--version"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("mooncake_transfer_bench ")
    r = subprocess.run([sys.executable, "-m", "mooncake.cli_client", "--port=0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--port" in r.stderr
