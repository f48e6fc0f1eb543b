"""etcd over TLS with client certificates: https:// endpoints (libcurl, loaded at run time) and
the certificates named by MC_ETCD_CACERT / MC_ETCD_CERT / MC_ETCD_KEY. A real etcd serves only
TLS and demands a client certificate; a master with HA elects itself through it and a store
client finds that master through it (etcd://https://...) and moves data. Without the client
certificate, or with a certificate but no key, the master refuses to start and says why."""

import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request

import pytest
from mooncake.cli import binary_path
from store_helpers import free_port, wait_for


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(d):
    """A CA, a member certificate and a client certificate. The member's also allows clientAuth:
    with --client-cert-auth, etcd's JSON gateway calls its own gRPC server with it."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "2", "-subj", "/CN=mooncake-test-ca", cwd=d)
    for name, usage, cn in (("server", "serverAuth,clientAuth", "127.0.0.1"),
                           ("client", "clientAuth", "mc")):
        ext = d / f"{name}.ext"
        ext.write_text(f"subjectAltName=IP:127.0.0.1\nextendedKeyUsage={usage}\n")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", str(ext), cwd=d)
    return {"MC_ETCD_CACERT": str(d / "ca.crt"), "MC_ETCD_CERT": str(d / "client.crt"),
            "MC_ETCD_KEY": str(d / "client.key")}


@pytest.fixture
def tls_etcd(tmp_path):
    etcd = shutil.which("etcd") or os.environ.get("MC_ETCD_BIN")
    assert etcd and shutil.which("openssl"), "etcd-server and openssl are installed by install-deps"
    env = make_certs(tmp_path)
    port, peer = free_port(), free_port()
    url = f"https://127.0.0.1:{port}"
    log = open(tmp_path / "etcd.log", "wb")
    proc = subprocess.Popen(
        [etcd, "--name", "t", "--data-dir", str(tmp_path / "data"),
         "--listen-client-urls", url, "--advertise-client-urls", url,
         "--listen-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"t=http://127.0.0.1:{peer}",
         "--cert-file", str(tmp_path / "server.crt"), "--key-file", str(tmp_path / "server.key"),
         "--client-cert-auth", "--trusted-ca-file", str(tmp_path / "ca.crt"),
         "--log-level", "error"], stdout=log, stderr=log)
    ctx = ssl.create_default_context(cafile=env["MC_ETCD_CACERT"])
    ctx.load_cert_chain(env["MC_ETCD_CERT"], env["MC_ETCD_KEY"])

    def healthy():
        try:
            with urllib.request.urlopen(url + "/health", context=ctx, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_for(healthy, timeout=60)
        yield url, env
    finally:
        proc.kill()
        proc.wait()
        log.close()


def start_master(url, env, cluster):
    return subprocess.Popen(
        [binary_path("mooncake_master"), "--enable_ha", f"--etcd_endpoints={url}",
         f"--cluster_id={cluster}", "--rpc_address=127.0.0.1", f"--port={free_port()}",
         "--metrics_port=0"],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def read_until(proc, text, deadline_s=60):
    lines = []
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and not any(text in x for x in lines):
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
    assert any(text in x for x in lines), "".join(lines)


def test_master_and_client_through_tls_etcd(tls_etcd):
    url, env = tls_etcd
    m = start_master(url, env, "tls_cluster")
    standby = None
    try:
        read_until(m, "listening on rpc")
        code = (
            "import os, sys\n"
            "from mooncake.store import MooncakeDistributedStore\n"
            "s = MooncakeDistributedStore()\n"
            "rc = s.setup('127.0.0.1', 'P2PHANDSHAKE', 32 << 20, 8 << 20, 'tcp', '', sys.argv[1])\n"
            "assert rc == 0, rc\n"
            "assert s.put('tls-key', b'over tls' * 1000) == 0\n"
            "assert s.get('tls-key') == b'over tls' * 1000\n"
            "s.close()\n"
            "print('ok')\n")
        res = subprocess.run([sys.executable, "-c", code, f"etcd://{url}"],
                             env={**os.environ, **env, "MC_STORE_CLUSTER_ID": "tls_cluster"},
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and "ok" in res.stdout, res.stdout + res.stderr
        # A standby watches the leader's key over TLS: when the leader is killed its lease
        # lapses, the watch reports the key gone, and the standby takes over.
        standby = start_master(url, env, "tls_cluster")
        read_until(standby, "standby in cluster tls_cluster")
        m.kill()
        read_until(standby, "leader for term", deadline_s=90)
    finally:
        for p in (m, standby):
            if p and p.poll() is None:
                p.terminate()
                p.wait(timeout=30)


def test_missing_client_certificate_is_refused_with_the_reason(tls_etcd):
    url, env = tls_etcd
    # no client certificate: etcd refuses the TLS handshake, the master cannot join
    m = start_master(url, {"MC_ETCD_CACERT": env["MC_ETCD_CACERT"]}, "tls_refused")
    out, _ = m.communicate(timeout=120)
    assert m.returncode == 1, out
    assert "cannot join the HA cluster" in out, out
    # a certificate without its key: refused before any connection, naming both variables
    m = start_master(url, {**env, "MC_ETCD_KEY": ""}, "tls_refused")
    out, _ = m.communicate(timeout=60)
    assert m.returncode == 1 and "MC_ETCD_CERT and MC_ETCD_KEY go together" in out, out
    # an unreadable CA file
    m = start_master(url, {**env, "MC_ETCD_CACERT": "/nonexistent/ca.crt"}, "tls_refused")
    out, _ = m.communicate(timeout=60)
    assert m.returncode == 1 and re.search(r"MC_ETCD_CACERT=/nonexistent/ca.crt cannot be read",
                                           out), out
