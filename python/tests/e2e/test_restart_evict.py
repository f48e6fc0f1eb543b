"""Acknowledged objects survive a master restart or failover while the storage nodes are paused
(issue 24): the restored master must not evict them to make room for new puts it cannot place
anyway, and those puts wait for the nodes (bounded) instead of failing.

- test_restart_evict: master with --metadata_dir, two 256 MiB storage nodes (mooncake_client),
  100 x 1 MiB objects acknowledged; both nodes SIGSTOPped; the master killed -9 and started
  again on the same port and directory; 0.5 s later 200 puts of 256 KiB from a pure client;
  the nodes SIGCONTed once those puts were all answered or 1 s after they started. Then: no
  eviction, all 100 objects byte-exact, all 200 puts succeeded (once the nodes checked in).
- test_failover_evict: the same on a 3-member etcd with two HA masters (60 objects, the leader
  killed -9, the standby takes over).
- test_a_put_in_flight_is_failed_or_kept: many puts cut by kill -9 / restart (nodes paused
  around some of them): each put's rc is recorded, and every put that answered 0 reads back
  byte-exact afterwards (a put in flight either fails or its object is there; never rc 0 and
  missing).

Pool use stays far below the eviction watermark (100 MiB + 50 MiB of 512 MiB), so no eviction
is ever needed: any eviction is the defect."""

import signal
import time
import uuid

import pytest
from ack_helpers import (check, ha_metric, install_checker, leader_of, pause, resume, tally,
                         wait_for, wait_new_leader)
from etcd_helpers import EtcdCluster
from ha_helpers import HaAddress, HaMaster, current_leader
from node_helpers import Node
from store_helpers import Master, Worker

LEASE = "--default_kv_lease_ttl=200"  # leases are not what keeps objects alive here
EVICTIONS = "mooncake_master_evictions_total"
MIB = 1 << 20

# The pure client's 200 puts, on a thread of the worker so that the test can resume the nodes
# while they run; returns once the thread is about to send the first.
PUTS = r"""
import time
ns['started'] = threading.Event()
ns['rcs'] = rcs = []
def run():
    t0 = time.monotonic()
    ns['started'].set()
    for i in range({n}):
        rcs.append(store.put(f'after{{i}}', pattern({size}, f'after{{i}}')))
    ns['puts'] = [rcs, time.monotonic() - t0]
ns['thread'] = threading.Thread(target=run, daemon=True)
ns['thread'].start()
ns['started'].wait()
result = 0
"""
N_AFTER, AFTER_SIZE = 200, 256 << 10


def _put_objects(worker, n):
    """Puts n 1 MiB objects (contents derived from the key); {key: [size, [digest]]}."""
    rcs = worker.run(f"result = [store.put(f'obj{{i}}', pattern({MIB}, f'obj{{i}}')) "
                     f"for i in range({n})]")
    assert rcs == [0] * n, f"the acknowledged puts themselves failed: {rcs}"
    return worker.run(f"result = {{f'obj{{i}}': [{MIB}, [sha(pattern({MIB}, f'obj{{i}}'))]] "
                      f"for i in range({n})}}")


def _after_expect(worker, rcs):
    """The expectations for the 200 puts that answered 0."""
    keys = [f"after{i}" for i, rc in enumerate(rcs) if rc == 0]
    return worker.run(f"result = {{k: [{AFTER_SIZE}, [sha(pattern({AFTER_SIZE}, k))]] "
                      f"for k in {keys!r}}}")


def _resume_after_puts(putter, nodes):
    """The scenario's "then SIGCONT the nodes": once the puts have all been answered, or 1 s
    after they started, whichever comes first (a store that makes puts wait for the nodes
    answers none of them while the nodes are stopped). Returns how many were answered before."""
    wait_for(lambda: putter.run("result = len(ns['rcs'])") >= N_AFTER, timeout=1.0, step=0.02)
    answered = putter.run("result = len(ns['rcs'])")
    resume([n.proc for n in nodes])
    return answered


def _verdict(name, n, verdicts, after_verdicts, rcs, secs, evictions, answered):
    counts, codes, examples = tally(verdicts)
    failed = {}
    for rc in rcs:
        if rc != 0:
            failed[rc] = failed.get(rc, 0) + 1
    after_counts, after_codes, after_examples = tally(after_verdicts)
    lost = counts.get("lost", 0) + counts.get("error", 0)
    wrong = counts.get("wrong", 0)
    text = (f"{name}: acknowledged={n} lost={lost} wrong={wrong} (left intact "
            f"{counts.get('ok', 0)} of {n}; not ok by code {codes}, e.g. {examples}); "
            f"evictions={evictions:g}; puts after the restart: {len(rcs) - sum(failed.values())} "
            f"of {len(rcs)} succeeded in {secs:.1f} s ({answered} answered while the nodes were "
            f"stopped), failed by code {failed}; "
            f"their objects read back {after_counts} {after_codes} {after_examples}")
    print(text)
    got = {"lost": lost, "wrong": wrong, "evictions": evictions,
           "failed puts": sum(failed.values()),
           "succeeded puts not readable": len(after_verdicts) - after_counts.get("ok", 0)}
    assert got == {"lost": 0, "wrong": 0, "evictions": 0, "failed puts": 0,
                   "succeeded puts not readable": 0}, text


def test_restart_evict(tmp_path):
    d = str(tmp_path / "meta")
    master = Master(LEASE, f"--metadata_dir={d}")
    nodes, workers = [], []
    try:
        nodes = [Node(master, segment="256mb") for _ in range(2)]
        writer, putter = Worker(), Worker()
        workers += [writer, putter]
        writer.setup(master, segment=0)
        putter.setup(master, segment=0)
        install_checker(writer)
        expect = _put_objects(writer, 100)
        assert master.metric(EVICTIONS) == 0

        pause([n.proc for n in nodes])
        port = master.port
        master.stop(signal.SIGKILL)
        master = Master(LEASE, f"--metadata_dir={d}", port=port)
        time.sleep(0.5)  # the scenario (not a wait for anything): the puts come 0.5 s later
        putter.run(PUTS.format(n=N_AFTER, size=AFTER_SIZE))
        answered = _resume_after_puts(putter, nodes)
        rcs, secs = putter.run("ns['thread'].join()\nresult = ns['puts']")

        verdicts = check(writer, expect)
        after = check(writer, _after_expect(writer, rcs))
        _verdict("restart", 100, verdicts, after, rcs, secs, master.metric(EVICTIONS),
                 answered)
    finally:
        for w in workers:
            w.close()
        for n in nodes:
            n.proc.send_signal(signal.SIGCONT)
            n.stop()
        master.stop()


# --- failover ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def etcd():
    e = EtcdCluster(3)
    yield e
    e.stop()


def test_failover_evict(etcd):
    cid = f"evict-{uuid.uuid4().hex[:8]}"
    env = {"MC_STORE_CLUSTER_ID": cid}
    masters = [HaMaster(etcd.endpoints, cid) for _ in range(2)]
    nodes, workers = [], []
    try:
        assert wait_for(lambda: leader_of(masters) is not None
                        and current_leader(etcd, cid) == leader_of(masters).addr, timeout=60)
        nodes = [Node(HaAddress(etcd), segment="256mb", env=env) for _ in range(2)]
        writer, putter = Worker(env=env), Worker(env=env)
        workers += [writer, putter]
        writer.setup(HaAddress(etcd), segment=0)
        putter.setup(HaAddress(etcd), segment=0)
        install_checker(writer)
        expect = _put_objects(writer, 60)
        old = leader_of(masters)
        assert ha_metric(old, EVICTIONS) == 0

        pause([n.proc for n in nodes])
        old.kill()
        new = wait_new_leader(etcd, cid, masters, old)
        time.sleep(0.5)  # the scenario (not a wait for anything): the puts come 0.5 s later
        putter.run(PUTS.format(n=N_AFTER, size=AFTER_SIZE))
        answered = _resume_after_puts(putter, nodes)
        rcs, secs = putter.run("ns['thread'].join()\nresult = ns['puts']")

        verdicts = check(writer, expect)
        after = check(writer, _after_expect(writer, rcs))
        _verdict("failover", 60, verdicts, after, rcs, secs, ha_metric(new, EVICTIONS),
                 answered)
    finally:
        for w in workers:
            w.close()
        for n in nodes:
            n.proc.send_signal(signal.SIGCONT)
            n.stop()
        for m in masters:
            m.stop()


# --- puts in flight across a restart ------------------------------------------------------------

# Four threads put new keys (32-128 KiB, contents derived from the key) while ns['go'] is set,
# recording each put's rc and when it started and returned (time.monotonic: one clock for the
# host, so the test's kill times compare). After an error a thread waits a little, not to spin
# while the master is away.
#
# Space: a thread stops at ns['allow'] acknowledged puts, which the test raises by PHASE_ALLOW at
# the start of each of the 8 phases (4 cycles, before and after each kill): at most 8 x 37 = 296
# a thread, with 8 threads under 60 % of the pool however fast the machine, so nothing ever needs
# evicting. A budget per phase, not one for the whole test, so that a fast machine cannot spend it
# all early and leave a later phase nothing to show its progress with. The short pause between
# puts keeps each phase's budget from being spent before the test pauses the nodes or kills the
# master, so that puts are in flight then.
INFLIGHT = r"""
import random, time
ns['go'] = threading.Event()
ns['quit'] = False
ns['log'] = []
ns['ok'] = 0
ns['allow'] = 0
def run(t):
    rng = random.Random(t)
    i = ok = 0
    while not ns['quit']:
        if not ns['go'].wait(0.05):
            continue
        if ok >= ns['allow']:
            time.sleep(0.01)
            continue
        k = f'p{os.getpid()}-{t}-{i}'
        i += 1
        size = rng.randrange(32 << 10, (128 << 10) + 1)
        t0 = time.monotonic()
        rc = store.put(k, pattern(size, k))
        ns['log'].append([k, size, rc, t0, time.monotonic()])
        if rc == 0:
            ns['ok'] += 1
            ok += 1
            time.sleep(0.005)
        else:
            time.sleep(0.02)
ns['threads'] = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(4)]
for th in ns['threads']:
    th.start()
result = 0
"""
PHASE_ALLOW = 37


def test_a_put_in_flight_is_failed_or_kept(tmp_path):
    d = str(tmp_path / "meta")
    master = Master(LEASE, f"--metadata_dir={d}")
    nodes, workers = [], []
    kills = []  # (killed at, restarted at)
    try:
        nodes = [Node(master, segment="256mb") for _ in range(2)]
        putters = [Worker(), Worker()]
        reader = Worker()
        workers += [*putters, reader]
        for w in [*putters, reader]:
            w.setup(master, segment=0)
        install_checker(reader)
        for w in putters:
            w.run(INFLIGHT)

        def ok_count(w):
            return w.run("result = ns['ok']")

        def progress(more):
            """Opens a phase (PHASE_ALLOW more puts a thread) and waits until each putter has
            had `more` of them acknowledged."""
            base = [ok_count(w) for w in putters]
            for w in putters:
                w.run(f"ns['allow'] += {PHASE_ALLOW}\nresult = 0")
            return wait_for(lambda: all(ok_count(w) >= b + more for w, b in zip(putters, base)),
                            timeout=60, step=0.1)

        stalled = 0
        evictions = 0.0  # summed over the master's lives (each starts its counter at 0)
        for cycle in range(4):
            for w in putters:
                w.run("ns['go'].set()\nresult = 0")
            stalled += not progress(20)
            paused = cycle % 2 == 1
            if paused:
                pause([n.proc for n in nodes])
            port = master.port
            evictions += master.metric(EVICTIONS)
            t_kill = time.monotonic()
            master.stop(signal.SIGKILL)
            master = Master(LEASE, f"--metadata_dir={d}", port=port)
            kills.append((t_kill, time.monotonic()))
            if paused:
                time.sleep(1.0)  # the scenario: nodes resumed about 1 s after the restart
                resume([n.proc for n in nodes])
            stalled += not progress(20)
            for w in putters:
                w.run("ns['go'].clear()\nresult = 0")

        log = []
        for w in putters:
            log += w.run("ns['quit'] = True\nfor th in ns['threads']:\n    th.join()\n"
                         "result = ns['log']")
        acked = [e for e in log if e[2] == 0]
        expect = reader.run("result = {k: [size, [sha(pattern(size, k))]] for k, size in "
                            + repr([[e[0], e[1]] for e in acked]) + "}")
        verdicts = check(reader, expect)
        counts, codes, examples = tally(verdicts)
        evictions += master.metric(EVICTIONS)

        def across(e):
            return any(e[3] < killed and e[4] > killed for killed, _ in kills)

        spanned = [e for e in log if across(e)]
        spanned_ok = [e for e in spanned if e[2] == 0]
        spanned_bad = [e[0] for e in spanned_ok if verdicts[e[0]][0] != "ok"]
        failed = {}
        for e in log:
            if e[2] != 0:
                failed[e[2]] = failed.get(e[2], 0) + 1
        lost = counts.get("lost", 0) + counts.get("error", 0)
        wrong = counts.get("wrong", 0)
        text = (f"puts in flight: acknowledged={len(acked)} lost={lost} wrong={wrong} "
                f"(of {len(log)} puts; failed by code {failed}; not ok by code {codes}, "
                f"e.g. {examples}; across a kill: {len(spanned)}, of which answered 0: "
                f"{len(spanned_ok)}, not readable: {len(spanned_bad)}; stalled cycles {stalled}; "
                f"evictions {evictions:g})")
        print(text)
        assert (lost, wrong) == (0, 0), text
        assert spanned, "no put was in flight across a kill (the test proved nothing): " + text
        assert stalled == 0, "puts did not resume after a restart: " + text
    finally:
        for w in workers:
            w.close()
        for n in nodes:
            n.proc.send_signal(signal.SIGCONT)
            n.stop()
        master.stop()
