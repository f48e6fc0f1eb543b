"""A real etcd on loopback for the tests that use ``etcd://`` metadata: ephemeral ports, a
temporary data dir, stopped at the end. The binary is $MC_ETCD_BIN or ``etcd`` on PATH (Debian's
etcd-server package); keys are read back through etcd's JSON gateway, not through our client."""

import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def etcd_binary():
    return os.environ.get("MC_ETCD_BIN") or shutil.which("etcd")


class Etcd:
    def __init__(self):
        binary = etcd_binary()
        if not binary:
            raise RuntimeError("no etcd binary: install etcd-server or set MC_ETCD_BIN")
        self.dir = tempfile.mkdtemp(prefix="mc-etcd-")
        self.port, peer = free_port(), free_port()
        client_url, peer_url = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{peer}"
        self.log = open(os.path.join(self.dir, "log"), "wb")
        self.proc = subprocess.Popen(
            [binary, "--name", "t", "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", f"t={peer_url}", "--log-level", "error"],
            stdout=self.log, stderr=self.log)
        self.endpoint = f"127.0.0.1:{self.port}"
        self.url = f"etcd://{self.endpoint}"
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(client_url + "/health", timeout=1) as r:
                    if b"true" in r.read():
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("etcd did not become healthy")
            time.sleep(0.05)

    def _call(self, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                     data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def get(self, key: str):
        """The key's kv (value decoded, lease as int), or None."""
        kvs = self._call("/v3/kv/range", {"key": base64.b64encode(key.encode()).decode()})
        kvs = kvs.get("kvs", [])
        if not kvs:
            return None
        kv = kvs[0]
        return {"value": base64.b64decode(kv.get("value", "")),
                "lease": int(kv.get("lease", 0))}

    def keys(self, prefix: str):
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        r = self._call("/v3/kv/range", {"key": base64.b64encode(prefix.encode()).decode(),
                                        "range_end": base64.b64encode(end.encode()).decode(),
                                        "keys_only": True})
        return sorted(base64.b64decode(kv["key"]).decode() for kv in r.get("kvs", []))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class EtcdCluster:
    """Three etcd members on loopback (one cluster): ``endpoints`` is "h:p,h:p,h:p"; members
    can be killed and restarted, and ``leader()`` names the member etcd elected."""

    def __init__(self, size=3):
        binary = etcd_binary()
        if not binary:
            raise RuntimeError("no etcd binary: install etcd-server or set MC_ETCD_BIN")
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="mc-etcd3-")
        self.names = [f"e{i}" for i in range(size)]
        self.client = {n: free_port() for n in self.names}
        self.peer = {n: free_port() for n in self.names}
        self.initial = ",".join(f"{n}=http://127.0.0.1:{self.peer[n]}" for n in self.names)
        self.procs = {}
        self.logs = {}
        for n in self.names:
            self.start(n, state="new")
        self.endpoints = ",".join(f"127.0.0.1:{self.client[n]}" for n in self.names)
        self.url = f"etcd://{self.endpoints}"
        deadline = time.monotonic() + 30
        while not all(self.healthy(n) for n in self.names):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the etcd cluster did not become healthy")
            time.sleep(0.1)

    def start(self, name, state="existing"):
        log = self.logs.get(name) or open(os.path.join(self.dir, f"{name}.log"), "ab")
        self.logs[name] = log
        c, p = f"http://127.0.0.1:{self.client[name]}", f"http://127.0.0.1:{self.peer[name]}"
        self.procs[name] = subprocess.Popen(
            [self.binary, "--name", name, "--data-dir", os.path.join(self.dir, name),
             "--listen-client-urls", c, "--advertise-client-urls", c,
             "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
             "--initial-cluster", self.initial, "--initial-cluster-state", state,
             "--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "error"],
            stdout=log, stderr=log)

    def _post(self, name, path, body, timeout=2):
        req = urllib.request.Request(f"http://127.0.0.1:{self.client[name]}{path}",
                                     data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def healthy(self, name):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.client[name]}/health",
                                        timeout=1) as r:
                return b"true" in r.read()
        except OSError:
            return False

    def _live(self):
        return [n for n in self.names if self.procs[n].poll() is None]

    def _post_any(self, path, body):
        """The answer of the first live member that gives one."""
        for n in self._live():
            try:
                return self._post(n, path, body)
            except OSError:
                continue
        raise RuntimeError("no etcd member answers")

    def leader(self):
        """The name of the member that leads the cluster now (None while there is none)."""
        ids, leads = {}, set()
        for n in self._live():
            try:
                st = self._post(n, "/v3/maintenance/status", {})
            except OSError:
                continue
            ids[st["header"]["member_id"]] = n
            leads.add(st.get("leader"))
        named = [ids[lead] for lead in leads if lead in ids]
        return named[0] if len(named) == 1 else None

    def kill(self, name):
        self.procs[name].kill()
        self.procs[name].wait()

    def get(self, key):
        """The key's value (bytes) or None, read from any live member."""
        r = self._post_any("/v3/kv/range", {"key": base64.b64encode(key.encode()).decode()})
        kvs = r.get("kvs", [])
        return base64.b64decode(kvs[0].get("value", "")) if kvs else None

    def keys(self, prefix):
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        r = self._post_any("/v3/kv/range", {"key": base64.b64encode(prefix.encode()).decode(),
                                            "range_end": base64.b64encode(end.encode()).decode(),
                                            "keys_only": True})
        return sorted(base64.b64decode(kv["key"]).decode() for kv in r.get("kvs", []))

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
        for log in self.logs.values():
            log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
