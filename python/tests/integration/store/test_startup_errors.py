"""When a program cannot start, its last line names the cause: the storage node whose Transfer
Engine cannot start says so (not just the reference's INVALID_PARAMS code), and a master whose
port is taken names the port."""

import subprocess

from mooncake.cli import binary_path
from store_helpers import Master


def node_last_line(*flags):
    res = subprocess.run([binary_path("mooncake_client"), "--global_segment_size=16mb", *flags],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    return res.stderr.strip().splitlines()[-1]


def test_node_names_an_engine_that_cannot_start():
    m = Master()
    try:
        # 192.0.2.1 (TEST-NET-1) is no address of this host: the engine cannot listen there
        line = node_last_line(f"--master_server_address={m.addr}", "--host=192.0.2.1",
                              "--metadata_server=P2PHANDSHAKE")
        assert "the transfer engine could not start on 192.0.2.1" in line, line
        assert "socket error" in line, line
        # the reference's default metadata server (http://127.0.0.1:8080/metadata) is not running
        line = node_last_line(f"--master_server_address={m.addr}")
        assert "could not start" in line and "metadata" in line, line
    finally:
        m.stop()


def test_node_names_an_unreachable_master():
    line = node_last_line("--master_server_address=127.0.0.1:1", "--metadata_server=P2PHANDSHAKE")
    assert "cannot reach the master at 127.0.0.1:1" in line, line


def test_master_names_the_port_it_cannot_bind():
    m = Master()
    try:
        res = subprocess.run([binary_path("mooncake_master"), "--port=0",
                              "--rpc_address=127.0.0.1", f"--metrics_port={m.metrics_port}"],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 1
        assert f"admin/metrics (--metrics_port) port 127.0.0.1:{m.metrics_port}" in res.stderr
        res = subprocess.run([binary_path("mooncake_master"), f"--port={m.port}",
                              "--rpc_address=127.0.0.1", "--metrics_port=0"],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 1
        assert f"rpc port 127.0.0.1:{m.port}" in res.stderr, res.stderr
    finally:
        m.stop()
