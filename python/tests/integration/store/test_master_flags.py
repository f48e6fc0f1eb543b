"""The real mooncake_master binary with a reference deployment's flags and config files: what it
accepts, what it refuses (exit 2, one clear line naming the flag or the missing feature), and that
a clean client close is a leave while a killed client is still an expiry."""

import re
import subprocess
import threading
import time
import urllib.request

import pytest
from mooncake.cli import binary_path
from store_helpers import wait_for

# Our own miniature of the reference's sample configs: the same kinds of keys and values (its
# feature switches off, HA endpoints, a key this master does not know).
SAMPLE_JSON = """{
  "enable_metric_reporting": true,
  "metrics_port": 9003,
  "rpc_port": 50051,
  "rpc_thread_num": 16,
  "rpc_address": "127.0.0.1",
  "rpc_interface": "",
  "rpc_conn_timeout_seconds": 0,
  "rpc_enable_tcp_no_delay": true,
  "default_kv_lease_ttl": "7s",
  "default_kv_soft_pin_ttl": 1800000,
  "max_kv_soft_pin_ttl": 86400000,
  "eviction_ratio": 0.1,
  "eviction_high_watermark_ratio": 1.0,
  "dynamic_replication_mode": "off",
  "enable_ha": false,
  "enable_oplog": false,
  "etcd_endpoints": "http://localhost:2379",
  "root_fs_dir": "",
  "cluster_id": "json_cluster",
  "memory_allocator": "offset",
  "client_live_ttl_sec": 42,
  "enable_http_metadata_server": false,
  "enable_kv_events": false,
  "kv_events_bind_endpoint": "tcp://0.0.0.0:5557",
  "favourite_colour": "blue"
}
"""

SAMPLE_YAML = """# a master for the tests
enable_metric_reporting: true
metrics_port: 9003
rpc_port: 50051
rpc_thread_num: 16
rpc_address: "127.0.0.1"
rpc_interface: ""
rpc_conn_timeout_seconds: 0

default_kv_lease_ttl: 1500ms
default_kv_soft_pin_ttl: 30m
allow_evict_soft_pinned_objects: true
eviction_ratio: 0.1
# 1.0: no eviction before a put finds no room
eviction_high_watermark_ratio: 1.0

dynamic_replication_mode: "off"
enable_multi_tenants: false
tenant_quota_connector_type: 'file'

enable_ha: false
etcd_endpoints: "http://localhost:2379"
cluster_id: yaml_cluster
client_live_ttl_sec: 33
enable_oplog: false   # HA only
oplog_poll_interval_ms: 1000
favourite_colour: blue
"""


def run_master(*args, timeout=60):
    """Runs the binary to its end (for flags that must stop it); (code, stdout, stderr)."""
    p = subprocess.run([binary_path("mooncake_master"), *args], capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class LoggedMaster:
    """A running master whose output (stdout and stderr together) is kept in lines."""

    def __init__(self, *flags):
        cmd = [binary_path("mooncake_master"), "--port=0", "--metrics_port=0",
               "--rpc_address=127.0.0.1", *flags]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines = []
        self.port = self.metrics_port = None
        deadline = time.monotonic() + 60  # a loaded machine starts it slowly
        while time.monotonic() < deadline and not (self.port and self.metrics_port):
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line.rstrip("\n"))
            if m := re.search(r"listening on rpc [\d.]+:(\d+)", line):
                self.port = int(m.group(1))
            if m := re.search(r"metrics on [\d.]+:(\d+)", line):
                self.metrics_port = int(m.group(1))
        if not (self.port and self.metrics_port):
            self.stop()
            raise RuntimeError("mooncake_master did not start:\n" + "\n".join(self.lines))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def addr(self):
        return f"127.0.0.1:{self.port}"

    def output(self):
        return "\n".join(self.lines)

    def http(self, path):
        url = f"http://127.0.0.1:{self.metrics_port}{path}"
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.read().decode()

    def metric(self, name):
        for line in self.http("/metrics").splitlines():
            if line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"no metric {name}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def logged_master():
    masters = []

    def make(*flags):
        m = LoggedMaster(*flags)
        masters.append(m)
        return m

    yield make
    for m in masters:
        m.stop()


def summary(m):
    """The start line that shows what the master made of its configuration."""
    lines = [ln for ln in m.lines if "cluster_id=" in ln]
    assert lines, m.output()
    return lines[0]


def test_reference_command_line_starts(logged_master):
    # A reference deployment's command line: new and deprecated names, units, HA and offload
    # switches off with their endpoints still passed.
    m = logged_master("--rpc_port=0", "--rpc_thread_num=0", "--max_threads=4",
                      "--metrics_host=127.0.0.1", "--cluster_id=prod-a",
                      "--enable_metric_reporting=true", "--default_kv_lease_ttl=10s",
                      "--default_kv_soft_pin_ttl=30m", "--max_kv_soft_pin_ttl=24h",
                      "--client_ttl=10", "--eviction_ratio=0.05",
                      "--eviction_high_watermark_ratio=0.95", "--enable_ha=false",
                      "--etcd_endpoints=http://127.0.0.1:2379", "--enable_offload=false",
                      "--enable_cxl=false", "--memory_allocator=offset",
                      "--put_start_discard_timeout_sec=30", "--put_start_release_timeout_sec=600",
                      "--rpc_conn_timeout_seconds=0", "--rpc_enable_tcp_no_delay")
    assert '"status":"ok"' in m.http("/health")
    line = summary(m)
    assert "cluster_id=prod-a" in line
    assert "lease_ttl=10000ms" in line
    threads = int(re.search(r"rpc_thread_num=(\d+)", line).group(1))
    assert 1 <= threads <= 4  # 0: max_threads, at most the CPUs
    # A flag with no effect here says so; a switch left off says nothing.
    assert "--etcd_endpoints has no effect" in m.output()
    assert "enable_ha" not in m.output()


@pytest.mark.parametrize("value,ms", [("500ms", 500), ("2s", 2000), ("1m", 60000),
                                      ("1500", 1500), (" 3 S ", 3000)])
def test_duration_units(logged_master, value, ms):
    m = logged_master(f"--default_kv_lease_ttl={value}")
    assert f"lease_ttl={ms}ms" in summary(m)


@pytest.mark.parametrize("args,needle", [
    (["--no_such_flag=1"], "unknown flag 'no_such_flag'"),
    (["--port=abc"], "'--port'"),
    (["--rpc_port=70000"], "--rpc_port must be in 0..65535"),
    (["--rpc_thread_num=-1"], "--rpc_thread_num must be in 0..1024"),
    (["--max_threads=0"], "--max_threads must be in 1..1024"),
    (["--default_kv_lease_ttl=10x"], "'--default_kv_lease_ttl'"),
    (["--default_kv_lease_ttl=1.5s"], "'--default_kv_lease_ttl'"),
    (["--default_kv_soft_pin_ttl=-1"], "'--default_kv_soft_pin_ttl'"),
    (["--max_kv_soft_pin_ttl=1s"], "--max_kv_soft_pin_ttl must be >="),
    (["--eviction_ratio=2"], "--eviction_ratio must be in [0, 1]"),
    (["--client_ttl=0"], "--client_ttl must be >= 1"),
    (["--enable_metric_reporting=perhaps"], "'--enable_metric_reporting'"),
    (["--rpc_interface=no-such-if0"], "--rpc_interface=no-such-if0: no such interface"),
    (["--memory_allocator=malloc"], "--memory_allocator must be cachelib or offset"),
    (["--dynamic_replication_mode=often"], "--dynamic_replication_mode must be one of"),
    (["--offloading_queue_limit=0"], "--offloading_queue_limit must be in"),
    (["--config_path=/nonexistent/master.json"], "cannot read config file"),
    (["--port"], "needs a value"),
    (["positional"], "unexpected argument"),
])
def test_bad_flags_exit_2(args, needle):
    code, out, err = run_master(*args)
    assert code == 2, (args, code, err)
    assert needle in err, err
    assert out == ""  # it never listened
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("flag,feature", [
    ("--enable_cxl", "CXL memory"),
    ("--allocation_strategy=cxl", "CXL memory"),
    ("--allocation_strategy=ssd_free_ratio_first", "disk tier"),
    ("--enable_multi_tenants", "multi-tenant"),
    ("--memory_allocator=cachelib", "cachelib allocator"),
    ("--dynamic_replication_mode=observe", "dynamic replication"),
    ("--enable_metadata_cleanup_on_timeout", "metadata cleanup"),
])
def test_missing_features_are_refused_by_name(flag, feature):
    code, out, err = run_master(flag)
    assert code == 2, err
    assert feature in err and "not supported" in err, err
    assert "unknown flag" not in err
    assert out == ""


def test_help_lists_reference_flags():
    code, out, _ = run_master("--help")
    assert code == 0
    for name in ("rpc_port", "max_threads", "metrics_host", "cluster_id", "enable_cxl",
                 "enable_ha", "etcd_endpoints", "root_fs_dir", "max_kv_soft_pin_ttl"):
        assert f"--{name} " in out, name


@pytest.mark.parametrize("name,text,cluster,ttl,lease", [
    ("master.json", SAMPLE_JSON, "json_cluster", 42, 7000),
    ("master.yaml", SAMPLE_YAML, "yaml_cluster", 33, 1500),
    ("master.yml", SAMPLE_YAML, "yaml_cluster", 33, 1500),
])
def test_sample_config_files_load(logged_master, tmp_path, name, text, cluster, ttl, lease):
    path = tmp_path / name
    path.write_text(text)
    # --rpc_port=0 on the command line wins over the file's 50051 (then --port=0: any port).
    m = logged_master(f"--config_path={path}", "--rpc_port=0")
    assert '"status":"ok"' in m.http("/health")
    line = summary(m)
    assert f"cluster_id={cluster}" in line
    assert f"client_ttl={ttl}s" in line  # the file's client_live_ttl_sec
    assert f"lease_ttl={lease}ms" in line
    out = m.output()
    assert "unknown key 'favourite_colour' ignored" in out
    assert "--etcd_endpoints has no effect" in out


def test_command_line_wins_over_the_file(logged_master, tmp_path):
    path = tmp_path / "master.yaml"
    path.write_text(SAMPLE_YAML)
    m = logged_master(f"--config_path={path}", "--rpc_port=0", "--cluster_id=override",
                      "--client_ttl=5", "--default_kv_lease_ttl=2s")
    line = summary(m)
    assert "cluster_id=override" in line
    assert "client_ttl=5s" in line
    assert "lease_ttl=2000ms" in line


@pytest.mark.parametrize("name,text,needle", [
    ("bad.yaml", "rpc_port: 1\nnested:\n  key: 1\n", "line 3: indented line"),
    ("bad.yaml", "- a\n- b\n", "line 1: sequences"),
    ("bad.yaml", "cluster_id: \"open\n", "line 1: unterminated"),
    ("bad.yaml", "rpc_port: [1, 2]\n", "flow collections"),
    ("bad.yml", "metrics_port:\n", "'metrics_port' has no value"),
    ("bad.yaml", "default_kv_lease_ttl: soon\n", ":1: invalid value 'soon'"),
    ("bad.yaml", "enable_cxl: true\n", "CXL memory"),
    ("bad.json", "{\"rpc_port\": 5", "not a JSON object"),
    ("bad.json", "{\"default_kv_lease_ttl\": \"10 days\"}", "'default_kv_lease_ttl'"),
    ("bad.json", "{\"metrics_port\": {\"a\": 1}}", "must be a single value"),
    ("bad.json", "{\"enable_ha\": true}", "--enable_ha needs --etcd_endpoints"),
    ("bad.json", "{\"rpc_port\": 70000}", "--rpc_port must be in 0..65535"),
])
def test_bad_config_files(tmp_path, name, text, needle):
    path = tmp_path / name
    path.write_text(text)
    code, out, err = run_master(f"--config_path={path}")
    assert code == 2, err
    assert needle in err, err
    assert out == ""


# Clients heartbeat every second: a TTL of a few of those survives a loaded machine's stalls, so
# only the killed client below can be expired.
EXPIRY_TTL = 5


def test_clean_close_is_a_leave_and_a_kill_is_an_expiry(logged_master, make_worker):
    m = logged_master(f"--client_ttl={EXPIRY_TTL}")
    leaving, killed = make_worker(), make_worker()
    name = leaving.setup(m, segment=16 << 20)
    killed.setup(m, segment=16 << 20)
    cfg = f"ReplicateConfig(preferred_segment={name!r})"
    assert leaving.run(f"result = store.put('on-leaving', pattern(1000, 'l'), config={cfg})") == 0
    assert m.metric("mooncake_master_segments") == 2
    assert leaving.run("result = store.close()") == 0
    # Gone at once, not a client_ttl later; counted as a leave.
    assert m.metric("mooncake_master_segments") == 1
    assert name not in m.http("/get_all_segments")
    assert m.metric("mooncake_master_left_clients_total") == 1
    assert killed.run("result = store.is_exist('on-leaving')") == 0
    # Well past client_ttl (a sleep that can only last longer, never shorter): still nobody
    # expired, and nothing logged as an expiry.
    time.sleep(EXPIRY_TTL + 1.5)
    assert m.metric("mooncake_master_expired_clients_total") == 0
    assert "client expired" not in m.output()
    # A client that dies without a word is still an expiry.
    killed.kill()
    assert wait_for(lambda: m.metric("mooncake_master_expired_clients_total") == 1, timeout=60)
    assert wait_for(lambda: m.metric("mooncake_master_segments") == 0, timeout=60)
    assert m.metric("mooncake_master_left_clients_total") == 1
    assert "client expired" in m.output()
