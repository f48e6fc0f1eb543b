"""Set up SPDK NVMe-oF targets on remote hosts over SSH (the reference's ``spdk_tgt_create``).

    python -m mooncake.spdk_tgt_create \
        --spdk_target_info="ip:10.0.0.5 path:/opt/spdk pci:0000:01:00.0,0000:02:00.0" \
        --spdk_target_info="ip:10.0.0.6 path:/opt/spdk"

For each target it logs in (``--username``, ``--port``, password or key file), binds the NVMe
drives to SPDK (``scripts/setup.sh`` with ``PCI_ALLOWED``), starts ``build/bin/nvmf_tgt``, and
through ``scripts/rpc.py`` creates the transport, one bdev per drive, the subsystem
``nqn.2016-06.io.spdk:cnode1`` with those namespaces and a listener on the host's IP, port 4420.
Without ``pci:`` it takes the host's NVMe drives that nothing has mounted. The SPDK tree and the
drives are on the remote hosts; this machine needs only ``paramiko`` (the ``spdk`` extra).
Exit status 0 when every target was set up.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import time
from typing import Any, Dict, List, Optional, Tuple

try:
    import paramiko
except ImportError as error:  # pragma: no cover - exercised where paramiko is absent
    raise ImportError(
        "mooncake.spdk_tgt_create logs in to the SPDK hosts with paramiko: "
        "pip install 'mooncake-c[spdk]'"
    ) from error

__all__ = ["SPDKTgtCreator", "parse_arguments", "main"]

SUBSYSTEM_NQN = "nqn.2016-06.io.spdk:cnode1"
LISTEN_PORT = 4420


class SPDKTgtCreator:
    """Deploys one SPDK NVMe-oF target per ``"ip:<ip> path:<spdk> [pci:<a>,<b>]"`` string."""

    DEFAULT_TRANSPORT_OPTIONS: Dict[str, Any] = {
        "trtype": "RDMA",
        "max_queue_depth": 128,
        "max_io_qpairs_per_ctrlr": 127,
        "max_io_size": 4096,
        "in_capsule_data_size": 131072,
        "io_unit_size": 131072,
        "max_aq_depth": 128,
        "num_shared_buffers": 4096,
        "buf_cache_size": 32,
    }
    # rpc.py nvmf_create_transport's short options, by the names above.
    TRANSPORT_RPC_FLAGS = {
        "trtype": "-t", "max_queue_depth": "-q", "max_io_qpairs_per_ctrlr": "-m",
        "max_io_size": "-c", "in_capsule_data_size": "-i", "io_unit_size": "-u",
        "max_aq_depth": "-a", "num_shared_buffers": "-n", "buf_cache_size": "-b",
    }

    def __init__(self, spdk_targets: List[str], transport_options: Optional[Dict[str, Any]] = None,
                 core_mask: str = "0xff", port: int = 22, username: str = "root",
                 password: Optional[str] = None, key_file: Optional[str] = None):
        self.spdk_targets = list(spdk_targets)
        self.core_mask = core_mask
        self.port = port
        self.username = username
        self.password = password
        self.key_file = key_file
        self.transport_options = {**self.DEFAULT_TRANSPORT_OPTIONS, **(transport_options or {})}
        unknown = set(self.transport_options) - set(self.TRANSPORT_RPC_FLAGS)
        if unknown:
            raise ValueError(f"unknown transport options: {sorted(unknown)}")
        self.logger = logging.getLogger("SPDKTgtCreator")
        self.target_configs = [self._parse_target(t) for t in self.spdk_targets]

    @staticmethod
    def _parse_target(info: str) -> Dict[str, Any]:
        """``ip:``, ``path:`` and ``pci:`` fields, space separated; a PCI list may go on after
        ``pci:`` in further words, and a path may hold spaces."""
        target: Dict[str, Any] = {"ip": None, "path": None, "pci_devices": []}
        current = None
        for word in info.split():
            key, sep, value = word.partition(":")
            if sep and key in ("ip", "path", "pci"):
                current = key
                if key == "pci":
                    target["pci_devices"] += [p for p in value.split(",") if p.strip()]
                else:
                    target[key] = value.strip()
            elif current == "pci":
                target["pci_devices"] += [p for p in word.split(",") if p.strip()]
            elif current == "path":
                target["path"] += " " + word
            else:
                raise ValueError(f"spdk_target_info {info!r}: unexpected {word!r}")
        if not target["ip"]:
            raise ValueError("Each spdk_target_info must contain 'ip' field")
        if not target["path"]:
            raise ValueError("Each spdk_target_info must contain 'path' field")
        return target

    def _ssh_connect(self, ip: str, username: str = "root", password: Optional[str] = None,
                     key_file: Optional[str] = None, port: int = 22) -> "paramiko.SSHClient":
        ssh = paramiko.SSHClient()
        ssh.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        if key_file:
            ssh.connect(ip, port=port, username=username, key_filename=key_file)
        else:
            ssh.connect(ip, port=port, username=username, password=password)
        return ssh

    def _run(self, ssh, command: str, sudo: bool = False, timeout: Optional[int] = 60) -> Tuple[str, str]:
        if sudo and self.username != "root":
            command = "sudo " + command
        _, stdout, stderr = ssh.exec_command(command, timeout=timeout)
        status = stdout.channel.recv_exit_status()
        out, err = stdout.read().decode(errors="replace"), stderr.read().decode(errors="replace")
        if status != 0:
            raise RuntimeError(f"{command!r} exited {status}: {(err or out).strip()}")
        return out, err

    def _unmounted_nvme_pcis(self, ssh) -> List[str]:
        """PCI addresses of NVMe controllers none of whose namespaces is mounted."""
        script = (
            "for c in /sys/class/nvme/nvme*; do [ -e \"$c/address\" ] || continue; "
            "n=$(basename $c); grep -q \"^/dev/${n}n\" /proc/mounts && continue; cat $c/address; done"
        )
        out, _ = self._run(ssh, script)
        pcis = [line.strip() for line in out.splitlines() if line.strip()]
        if not pcis:
            raise RuntimeError("No SPDK-ready or unmounted NVMe PCI devices found on the target host")
        return pcis

    def _rpc(self, ssh, path: str, args: str) -> None:
        self._run(ssh, f"{shlex.quote(path + '/scripts/rpc.py')} {args}", sudo=True)

    def deploy_target(self, target: Dict[str, Any]) -> bool:
        ip, path = target["ip"], target["path"]
        ssh = None
        try:
            ssh = self._ssh_connect(ip, username=self.username, password=self.password,
                                    key_file=self.key_file, port=self.port)
            pcis = target["pci_devices"] or self._unmounted_nvme_pcis(ssh)
            q = shlex.quote
            self._run(ssh, f"PCI_ALLOWED={q(' '.join(pcis))} {q(path + '/scripts/setup.sh')}",
                      sudo=True, timeout=300)
            self._run(ssh, f"nohup {q(path + '/build/bin/nvmf_tgt')} -m {q(self.core_mask)} "
                           f"> {q(path + '/tgt.log')} 2>&1 &", sudo=True)
            # nvmf_tgt answers RPCs once its socket is up: poll it, bounded.
            deadline = time.monotonic() + 60
            while True:
                try:
                    self._rpc(ssh, path, "spdk_get_version")
                    break
                except RuntimeError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"nvmf_tgt on {ip} did not answer within 60 s")
                    time.sleep(1)
            opts = " ".join(f"{self.TRANSPORT_RPC_FLAGS[k]} {q(str(v))}"
                            for k, v in self.transport_options.items())
            self._rpc(ssh, path, f"nvmf_create_transport {opts}")
            self._rpc(ssh, path, f"nvmf_create_subsystem {SUBSYSTEM_NQN} -a -s SPDK00000000000001 -m 12")
            for i, pci in enumerate(pcis):
                self._rpc(ssh, path, f"bdev_nvme_attach_controller -b Nvme{i} -t PCIe -a {q(pci)}")
                self._rpc(ssh, path, f"nvmf_subsystem_add_ns {SUBSYSTEM_NQN} Nvme{i}n1")
            trtype = q(str(self.transport_options["trtype"]))
            self._rpc(ssh, path, f"nvmf_subsystem_add_listener {SUBSYSTEM_NQN} -t {trtype} "
                                 f"-a {q(ip)} -s {LISTEN_PORT}")
            self.logger.info("SPDK target on %s serves %s (%s)", ip, SUBSYSTEM_NQN, ", ".join(pcis))
            return True
        except Exception as error:  # one bad host must not stop the others
            self.logger.error("Failed to deploy SPDK target on %s: %s", ip, error)
            return False
        finally:
            if ssh is not None:
                ssh.close()

    def deploy_all_targets(self) -> bool:
        results = [self.deploy_target(t) for t in self.target_configs]
        self.logger.info("SPDK targets: %d of %d deployed", sum(results), len(results))
        return all(results)


def parse_arguments(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="spdk_tgt_create", description=__doc__.split("\n\n")[0])
    p.add_argument("--spdk_target_info", action="append", required=True,
                   help='"ip:<ip> path:<spdk dir> [pci:<addr>,<addr>]" (repeat per host)')
    p.add_argument("--core-mask", default="0xff")
    defaults = SPDKTgtCreator.DEFAULT_TRANSPORT_OPTIONS
    p.add_argument("--transport-type", default=defaults["trtype"])
    for name in list(defaults)[1:]:
        p.add_argument("--" + name.replace("_", "-"), type=int, default=defaults[name])
    p.add_argument("--username", default="root")
    p.add_argument("--port", type=int, default=22, help="SSH port")
    p.add_argument("--password")
    p.add_argument("--key-file")
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = parse_arguments(argv)
    options = {"trtype": args.transport_type}
    for name in list(SPDKTgtCreator.DEFAULT_TRANSPORT_OPTIONS)[1:]:
        options[name] = getattr(args, name)
    try:
        creator = SPDKTgtCreator(args.spdk_target_info, options, core_mask=args.core_mask,
                                 port=args.port, username=args.username,
                                 password=args.password, key_file=args.key_file)
    except ValueError as error:
        logging.error("%s", error)
        return 2
    return 0 if creator.deploy_all_targets() else 1


if __name__ == "__main__":
    raise SystemExit(main())
