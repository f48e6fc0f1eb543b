"""mooncake.spdk_tgt_create: target strings, arguments, and a host that cannot be reached
(a closed loopback port: a real failed SSH connection, reported, not raised)."""

import socket

import pytest

spdk = pytest.importorskip("mooncake.spdk_tgt_create", reason="needs paramiko (the spdk extra)")


def test_parses_targets_and_pci_lists():
    c = spdk.SPDKTgtCreator(["ip:10.0.0.5 path:/opt/spdk pci:0000:01:00.0,0000:02:00.0 0000:03:00.0",
                             "ip:10.0.0.6 path:/opt/my spdk"])
    assert c.target_configs[0]["pci_devices"] == ["0000:01:00.0", "0000:02:00.0", "0000:03:00.0"]
    assert c.target_configs[1] == {"ip": "10.0.0.6", "path": "/opt/my spdk", "pci_devices": []}


@pytest.mark.parametrize("info, msg", [("path:/opt/spdk", "'ip'"), ("ip:1.2.3.4", "'path'"),
                                       ("bogus ip:1.2.3.4 path:/x", "unexpected")])
def test_bad_target_strings(info, msg):
    with pytest.raises(ValueError, match=msg):
        spdk.SPDKTgtCreator([info])
    assert spdk.main(["--spdk_target_info", info]) == 2


def test_arguments():
    a = spdk.parse_arguments(["--spdk_target_info", "ip:1.2.3.4 path:/x", "--port", "2222",
                              "--max-io-size", "8192"])
    assert (a.port, a.max_io_size, a.transport_type) == (2222, 8192, "RDMA")
    with pytest.raises(SystemExit):
        spdk.parse_arguments(["--port", "22"])  # --spdk_target_info is required


def test_unreachable_host_fails_that_target_only():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    c = spdk.SPDKTgtCreator(["ip:127.0.0.1 path:/opt/spdk pci:0000:01:00.0"], port=port)
    assert c.deploy_all_targets() is False
