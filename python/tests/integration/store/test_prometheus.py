"""monitoring/ against the real thing: a real Prometheus (started here on loopback with a
generated config, an ephemeral port and a temporary storage directory) scrapes a real master
under traffic from a real store client, and every dashboard expression of a job we can start
returns data through Prometheus's HTTP API. Also: promtool lints the master's /metrics and the
shipped scrape config.

Expressions are grouped by the job they select (job="..."). TARGETS names the jobs this file
starts a target for; the dashboard's expressions for any other job must be listed in PENDING,
so nothing goes unchecked silently. The "mooncake_node" target is a real mooncake_client with a
dummy client driving traffic through it."""

import json
import math
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from store_helpers import Master, Worker, free_port, wait_for

ROOT = Path(__file__).resolve().parents[4]
DASHBOARD = ROOT / "monitoring" / "grafana" / "mooncake-dashboard.json"
SCRAPE_CONFIG = ROOT / "monitoring" / "prometheus" / "prometheus.yml"
ALERTS = ROOT / "monitoring" / "prometheus" / "alerts.yml"
SCRAPE_INTERVAL_S = 1

# Dashboard expressions of jobs without a target here (none: every job has one).
PENDING = []

# Alert expressions of jobs without a target, likewise.
PENDING_ALERTS = []


# The reference master's metrics we expose, by the type we declare (docs/operations.md says why
# some are untyped): a dashboard written for the reference finds each of them.
_SINGLE = ["put_start", "put_end", "put_revoke", "get_replica_list", "exist_key", "remove",
           "remove_all", "remove_by_regex", "mount_segment", "unmount_segment", "ping",
           "query_task", "fetch_tasks", "update_task", "create_copy_task", "create_move_task"]
_BATCH = ["put_start", "put_end", "put_revoke", "get_replica_list", "exist_key", "replica_clear"]
REFERENCE_METRICS = {
    "counter": [f"master_{op}_{k}_total" for op in _SINGLE for k in ("requests", "failures")]
    + [f"master_batch_{op}_{k}_total" for op in _BATCH
       for k in ("requests", "failures", "partial_successes", "items", "failed_items")]
    + ["master_put_start_alloc_failures_total", "master_put_start_partial_allocations_total",
       "mem_cache_hit_bytes_total", "master_successful_evictions_total",
       "master_attempted_evictions_total"],
    "gauge": ["master_allocated_bytes", "master_total_capacity_bytes", "segment_allocated_bytes",
              "segment_total_capacity_bytes", "master_active_clients", "mem_cache_nums_",
              "master_put_start_discarded_staging_size"],
    "untyped": ["master_key_count", "master_soft_pin_key_count", "mem_cache_hit_nums_",
                "valid_get_nums_", "total_get_nums_", "master_evicted_key_count",
                "master_evicted_size_bytes", "master_successful_evictions_mem",
                "master_attempted_evictions_mem", "master_evicted_key_count_mem",
                "master_evicted_size_bytes_mem", "master_put_start_discard_cnt",
                "master_put_start_release_cnt"],
    "histogram": ["master_value_size_bytes"],
}
PROCESS_METRICS = {"counter": ["process_cpu_seconds_total"],
                   "gauge": ["process_resident_memory_bytes", "process_virtual_memory_bytes",
                             "process_start_time_seconds", "process_open_fds", "process_max_fds"]}


def tool(name):
    path = shutil.which(name)
    if not path:
        pytest.fail(f"{name} is not installed: run tools/dev/install-deps.sh (Debian package "
                    "prometheus)")
    return path


def dashboard_exprs():
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p.get("targets", [])]


def alerts():
    """{expression: alert name} of monitoring/prometheus/alerts.yml."""
    return {e: a for a, e in re.findall(r"- alert: (\S+)\n\s+expr: (.+)", ALERTS.read_text())}


def alert_exprs():
    exprs = re.findall(r"^\s+expr: (.+)$", ALERTS.read_text(), re.M)
    assert len(exprs) == len(alerts())
    return exprs


def job_of(expr):
    jobs = set(re.findall(r'job="([^"]+)"', expr))
    assert len(jobs) == 1, f"an expression must select exactly one job: {expr}"
    return jobs.pop()


def start_master_target():
    """A master and a storage client that drives every kind of request through it."""
    master = Master()
    worker = Worker()
    name = worker.setup(master, segment=32 << 20)
    return {"targets": [f"127.0.0.1:{master.metrics_port}"], "master": master, "worker": worker,
            "segment": name, "stop": [worker.close, master.stop]}


def start_node_target():
    """A storage node (mooncake_client, on a master of its own so that the master job's counts
    stay exactly its traffic's) with a disk tier (so the mooncake_disk_* panels and alerts read
    real series), and a dummy client of it."""
    import tempfile

    from node_helpers import Node, dummy_setup

    master = Master()
    disk = tempfile.mkdtemp(prefix="mc-prom-disk-")
    node = Node(master, segment="64mb", http=True,
                extra=(f"--root_fs_dir={disk}", "--disk_capacity=64mb", "--disk_sync=false"))
    worker = Worker()
    dummy_setup(worker, node)
    return {"targets": [f"127.0.0.1:{node.http_port}"], "node": node, "worker": worker,
            "traffic": NODE_TRAFFIC,
            "stop": [worker.close, node.stop, master.stop, lambda: shutil.rmtree(disk, True)]}


NODE_TRAFFIC = """
for i in range(10):
    assert store.put(f"node-prom-{i}", pattern(20000 * (i + 1), i)) == 0
for i in range(10):
    assert sha(store.get(f"node-prom-{i}")) == sha(pattern(20000 * (i + 1), i))
assert store.batch_is_exist(["node-prom-0", "node-prom-missing"]) == [1, 0]
assert store.put_batch([f"node-prom-b{i}" for i in range(4)], [b"v" * 5000] * 4) == 0
assert [len(v) for v in store.get_batch([f"node-prom-b{i}" for i in range(4)])] == [5000] * 4
result = True
"""

TARGETS = {"mooncake_master": start_master_target, "mooncake_node": start_node_target}

TRAFFIC = """
cfg = ReplicateConfig(replica_num=1)
for i in range(20):
    assert store.put(f"prom-{i}", pattern(1000 * (i + 1), i), config=cfg) == 0
assert store.put_batch([f"prom-b{i}" for i in range(8)], [b"v" * 5000] * 8) == 0
for i in range(20):
    assert sha(store.get(f"prom-{i}")) == sha(pattern(1000 * (i + 1), i))
assert store.get("prom-missing") == b""
assert store.is_exist("prom-0") == 1
assert store.batch_is_exist(["prom-0", "prom-missing"]) == [1, 0]
assert store.put("prom-pin", b"p" * 300, config=ReplicateConfig(with_soft_pin=True)) == 0
assert store.put("prom-r", b"r" * 100, config=cfg) == 0
assert store.remove("prom-r") == 0  # not read, so no lease holds it
assert store.remove("prom-missing") < 0
assert store.remove_by_regex("^prom-b") == 8
assert store.create_copy_task("prom-missing", ["nowhere:1"])[1] < 0
assert store.create_move_task("prom-missing", "a:1", "b:1")[1] < 0
assert store.query_task((1, 2))[1] < 0
result = True
"""


class Prometheus:
    def __init__(self, tmp, jobs):
        cfg = ["global:", f"  scrape_interval: {SCRAPE_INTERVAL_S}s",
               f"  evaluation_interval: {SCRAPE_INTERVAL_S}s",
               f"rule_files: [{json.dumps(str(ALERTS))}]", "scrape_configs:"]
        for job, targets in jobs.items():
            cfg += [f"  - job_name: {job}", "    static_configs:",
                    f"      - targets: {json.dumps(targets)}"]
        (tmp / "prometheus.yml").write_text("\n".join(cfg) + "\n")
        self.port = free_port()
        self.log = open(tmp / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            [tool("prometheus"), f"--config.file={tmp / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--log.level=warn"], stdout=self.log, stderr=subprocess.STDOUT)
        if not wait_for(self.ready, timeout=20, step=0.2):
            self.stop()
            raise RuntimeError("prometheus did not become ready: "
                               + (tmp / "prometheus.log").read_text()[-2000:])

    def ready(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, expr):
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": expr}))
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]["result"]

    def api(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
            return json.loads(r.read())

    def scrapes(self, job):
        got = self.query(f'count_over_time(up{{job="{job}"}}[10m])')
        return int(float(got[0]["value"][1])) if got else 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    """Prometheus scraping one target of each job in TARGETS, after traffic went through them."""
    started = {job: start() for job, start in TARGETS.items()}
    prom = None
    try:
        prom = Prometheus(tmp_path_factory.mktemp("prometheus"),
                          {job: t["targets"] for job, t in started.items()})
        for job in started:
            assert wait_for(lambda j=job: prom.scrapes(j) >= 1, timeout=15, step=0.2)
        master = started["mooncake_master"]
        assert master["worker"].run(TRAFFIC) is True
        for t in started.values():
            if "traffic" in t:
                assert t["worker"].run(t["traffic"]) is True
        # two more scrapes after the traffic: every rate() window holds it
        for job in started:
            seen = prom.scrapes(job)
            assert wait_for(lambda j=job, s=seen: prom.scrapes(j) >= s + 2, timeout=15,
                            step=0.2)
        yield prom, started
    finally:
        if prom:
            prom.stop()
        for t in started.values():
            for stop in t["stop"]:
                stop()


def test_dashboard_and_scrape_config_name_the_same_jobs():
    exprs = dashboard_exprs()
    assert exprs and all(e.strip() for e in exprs)
    dash_jobs = {job_of(e) for e in exprs}
    config_jobs = set(re.findall(r"job_name:\s*(\S+)", SCRAPE_CONFIG.read_text()))
    assert dash_jobs == config_jobs == {"mooncake_master", "mooncake_node"}
    panels = json.loads(DASHBOARD.read_text())["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]


def test_pending_lists_exactly_the_expressions_of_jobs_without_a_target():
    unchecked = sorted(e for e in dashboard_exprs() if job_of(e) not in TARGETS)
    assert unchecked == PENDING


def test_shipped_scrape_config_and_alerts_are_valid():
    r = subprocess.run([tool("promtool"), "check", "config", str(SCRAPE_CONFIG)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr  # it also checks the rule file it names
    assert "alerts.yml" in r.stdout


def test_pending_alerts_are_exactly_those_of_jobs_without_a_target():
    assert sorted(e for e in alert_exprs() if job_of(e) not in TARGETS) == sorted(PENDING_ALERTS)


@pytest.mark.parametrize("expr", sorted(e for e in alert_exprs() if job_of(e) in TARGETS))
def test_alert_reads_series_that_exist(scraped, expr):
    """Each metric an alert reads is scraped (a misspelt name would never fire), and the rule
    evaluates without error."""
    prom, _ = scraped
    job = job_of(expr)
    names = re.findall(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\{job="' + job + '"', expr)
    assert names
    for name in names:
        assert prom.query(f'{name}{{job="{job}"}}'), f"{expr}: no series {name}"
    assert wait_for(lambda: rule_health(prom, alerts()[expr]) == "ok", timeout=10, step=0.2)


def rule_health(prom, name):
    rules = [r for g in prom.api("/api/v1/rules")["data"]["groups"] for r in g["rules"]]
    return next(r["health"] for r in rules if r["name"] == name)


def test_promtool_check_metrics_is_clean(scraped):
    _, started = scraped
    master = started["mooncake_master"]["master"]
    text = master.http("/metrics")
    r = subprocess.run([tool("promtool"), "check", "metrics"], input=text, capture_output=True,
                       text=True)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
    # ... and it carries what the dashboard needs: the segment's own series among them
    seg = started["mooncake_master"]["segment"]
    assert f'segment_total_capacity_bytes{{segment="{seg}"}} {32 << 20}' in text


def test_master_declares_the_reference_metrics_and_process_metrics(scraped):
    _, started = scraped
    text = started["mooncake_master"]["master"].http("/metrics")
    declared = dict(line.split()[2:4] for line in text.splitlines()
                    if line.startswith("# TYPE "))
    for table in (REFERENCE_METRICS, PROCESS_METRICS):
        for kind, names in table.items():
            for name in names:
                assert declared.get(name) == kind, f"{name}: {declared.get(name)}, not {kind}"


@pytest.mark.parametrize(
    "expr", sorted({e for e in dashboard_exprs() if job_of(e) in TARGETS}))
def test_dashboard_expression_returns_data(scraped, expr):
    prom, _ = scraped
    result = prom.query(expr)
    assert result, f"no data for {expr}"
    values = [float(s["value"][1]) for s in result]
    assert any(math.isfinite(v) for v in values), f"{expr}: {values}"


def test_counters_count_what_was_done(scraped):
    """The reference's request counters against the traffic this file sent."""
    prom, _ = scraped

    def value(expr):
        (s,) = prom.query(expr)
        return float(s["value"][1])

    m = 'job="mooncake_master"'
    assert value(f"master_put_start_requests_total{{{m}}}") == 22
    assert value(f"master_batch_put_start_requests_total{{{m}}}") == 1
    assert value(f"master_batch_put_start_items_total{{{m}}}") == 8
    assert value(f"total_get_nums_{{{m}}}") == 21
    assert value(f"valid_get_nums_{{{m}}}") == 20
    assert value(f"master_get_replica_list_failures_total{{{m}}}") == 1
    assert value(f"master_batch_exist_key_items_total{{{m}}}") == 2
    assert value(f"master_remove_requests_total{{{m}}}") == 2
    assert value(f"master_remove_failures_total{{{m}}}") == 1
    assert value(f"master_remove_by_regex_requests_total{{{m}}}") == 1
    assert value(f"master_key_count{{{m}}}") == 21
    assert value(f"master_soft_pin_key_count{{{m}}}") == 1
    assert value(f"master_value_size_bytes_count{{{m}}}") == 30
    # sizes 1000..4000, 300 and 100 fall into the first bucket
    assert value(f"master_value_size_bytes_bucket{{{m},le=\"4096\"}}") == 6
    assert value(f"master_active_clients{{{m}}}") == 1
    for kind in ("copy", "move"):
        assert value(f"master_create_{kind}_task_requests_total{{{m}}}") == 1
        assert value(f"master_create_{kind}_task_failures_total{{{m}}}") == 1
    assert value(f"master_query_task_requests_total{{{m}}}") == 1
    assert value(f"master_query_task_failures_total{{{m}}}") == 1
    assert value(f"mooncake_master_build_info{{{m}}}") == 1
    assert value(f"process_resident_memory_bytes{{{m}}}") > 1 << 20
    start = value(f"process_start_time_seconds{{{m}}}")
    assert time.time() - 600 < start <= time.time()
