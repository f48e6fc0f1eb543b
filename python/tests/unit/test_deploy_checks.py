"""The deployment files pass their static checks (tools/deploy/check_deploy.py: hadolint,
Kubernetes schemas, checkov, systemd-analyze verify and security, the compose file), and the
checks catch what they are there for: planted defects in a copy of deploy/ fail them."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CHECK = ROOT / "tools" / "deploy" / "check_deploy.py"


def check(*args):
    res = subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True,
                         timeout=900)
    return res.returncode, res.stdout + res.stderr


def test_deploy_files_pass_every_check():
    rc, out = check()
    assert rc == 0, out
    assert "deploy checks: 5 passed" in out, out


def test_planted_defects_fail_their_checks(tmp_path):
    """One copy of deploy/ with a defect for each check (one run keeps the scanners' start-up
    cost to once)."""
    d = tmp_path / "deploy"
    shutil.copytree(ROOT / "deploy", d)

    def edit(rel, old, new):
        p = d / rel
        text = p.read_text()
        assert old in text, (rel, old)
        p.write_text(text.replace(old, new, 1))

    edit("k8s/master.yaml", "  replicas: 2\n", "  replicas: 2\n  replica: 2\n")  # unknown field
    edit("docker/Dockerfile.master", "USER 10001:10001\n", "")  # runs as root
    edit("k8s/metadata.yaml", '            limits: {cpu: "1", memory: 512Mi}\n', "")  # no limits
    edit("k8s/monitoring.yaml", "master and storage nodes", "stale title")  # not regenerated
    edit("systemd/mooncake-master.service", "Restart=on-failure", "Restart=sometimes")
    edit("systemd/mooncake-node.service", "NoNewPrivileges=yes\n", "")  # weaker hardening...
    edit("systemd/mooncake-node.service", "ProtectSystem=strict\n", "")
    edit("systemd/mooncake-node.service", "ProtectHome=yes\n", "")
    edit("systemd/mooncake-node.service", "SystemCallFilter=@system-service\n", "")
    edit("systemd/mooncake-node.service", "RestrictNamespaces=yes\n", "")
    rc, out = check("--deploy-dir", str(d))
    assert rc == 1, out
    for failed in ("kubernetes-validate", "monitoring.yaml is current",
                   "checkov --framework dockerfile", "checkov --framework kubernetes",
                   "systemd-analyze verify", "systemd-analyze security mooncake-node.service"):
        assert f"[FAIL] {failed}" in out, (failed, out)
    assert "[ok] systemd-analyze security mooncake-master.service" in out, out
