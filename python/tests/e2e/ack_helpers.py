"""What the acknowledged-loss tests share (test_restart_evict.py, test_kill_storm.py): the store
and etcd helpers on sys.path, a checker that reads keys back in a store worker process and sorts
them into ok / lost / wrong, and the storm writer, which models what each key may hold.

The writer's model: for each key the set of values it may legitimately hold, by digest, with
None for "absent". An acknowledged put or upsert (rc 0) makes it exactly {new value}, an
acknowledged remove exactly {absent}. An operation whose answer was an error may or may not have
happened (the master may have been killed after it applied it), so it only adds: the new value
for a put or upsert, "absent" for a remove. A key is then correct when what it holds is in its
set; an acknowledged value missing (a get or remove answering OBJECT_NOT_FOUND while "absent" is
not in the set) is lost, and bytes that are none of its possible values are wrong."""

import re
import signal
import sys
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration" / "store"))
sys.path.insert(0, str(HERE.parent / "integration" / "engine"))

from ha_helpers import current_leader  # noqa: E402
from store_helpers import wait_for  # noqa: E402

OBJECT_NOT_FOUND = -704

# Installs check(expect, timeout) in a worker: expect is {key: [size, [digests or None]]}. A read
# that fails with anything but OBJECT_NOT_FOUND (a node still paused, a master restarting) is
# tried again until timeout; what still fails then is reported as 'error' with its code.
CHECKER = r"""
import time
def check(expect, timeout):
    cap = max([1] + [v[0] for v in expect.values()])
    buf = ctypes.create_string_buffer(cap)
    out, pending = {}, sorted(expect)
    deadline = time.monotonic() + timeout
    while pending:
        again = []
        for k in pending:
            size, allowed = expect[k]
            n = store.get_into(k, ctypes.addressof(buf), cap)
            if n >= 0:
                out[k] = ['ok' if sha(buf.raw[:n]) in allowed else 'wrong', n]
            elif n == -704:
                out[k] = ['ok' if None in allowed else 'lost', n]
            else:
                out[k] = ['error', n]
                again.append(k)
        pending = again
        if pending:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
    return out
ns['check'] = check
result = 0
"""


def ha_metric(master, name):
    """A metric of an HA master, from the metrics port it printed when it last became leader."""
    port = re.findall(r"metrics on [\d.]+:(\d+)", master.output())[-1]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines()
               if ln.startswith(name + " ") or ln.startswith(name + "{"))


def leader_of(masters):
    lead = [m for m in masters if m.leading]
    return lead[0] if len(lead) == 1 else None


def wait_new_leader(etcd, cid, masters, old, timeout=60):
    """Waits until a master other than old leads and the master view names it; returns it."""
    def ok():
        now = [m for m in masters if m is not old and m.leading]
        return len(now) == 1 and current_leader(etcd, cid) == now[0].addr
    assert wait_for(ok, timeout=timeout), "no new leader:\n" + "\n".join(
        m.output()[-2000:] for m in masters)
    return leader_of([m for m in masters if m is not old])


def install_checker(worker):
    worker.run(CHECKER)


def check(worker, expect, timeout=60):
    """{key: [verdict, n or code]} for expect {key: [size, allowed digests (None: absent)]}."""
    return worker.run(f"result = ns['check']({expect!r}, {timeout})")


def tally(verdicts):
    """(counts by verdict, {code: count} of what was not ok, a few examples)."""
    counts, codes, examples = {}, {}, []
    for k, (v, n) in sorted(verdicts.items()):
        counts[v] = counts.get(v, 0) + 1
        if v != "ok":
            codes[n] = codes.get(n, 0) + 1
            if len(examples) < 8:
                examples.append((k, v, n))
    return counts, codes, examples


def pause(procs):
    """SIGSTOPs each process and waits until the kernel shows it stopped."""
    for p in procs:
        p.send_signal(signal.SIGSTOP)
    assert wait_for(lambda: all(_stopped(p.pid) for p in procs), timeout=30)


def resume(procs):
    for p in procs:
        p.send_signal(signal.SIGCONT)


def _stopped(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


# The storm writer, run in its own store worker process on a thread of its own (so that the test
# can watch its progress): put a new key, upsert, remove (forced: a reader's lease must not make
# it fail) or get one of its own keys, chosen at random. Every key belongs to one writer, and the
# writer does one operation at a time, so its model of a key is complete. A slot whose key was
# removed (acknowledged) takes a new key, so plain puts always go to keys never used before (a
# put of an existing key keeps the first value and answers 0). After an error it waits a little,
# not to spin while the master is away.
WRITER = r"""
import random, time
W, NSLOTS, MINSZ, MAXSZ = {w}, {nslots}, {minsz}, {maxsz}
rng = random.Random({seed})
model, sizes = {{}}, {{}}
slots, gens = [None] * NSLOTS, [0] * NSLOTS
st = dict(ops=0, acked=0, codes={{}}, lost_seen=[], wrong_seen=[])
stop = threading.Event()
buf = ctypes.create_string_buffer(MAXSZ)

def note(op, rc):
    c = st['codes'].setdefault(op, {{}})
    c[str(rc)] = c.get(str(rc), 0) + 1

def value(k):
    v = pattern(rng.randrange(MINSZ, MAXSZ + 1), f"{{k}}#{{st['ops']}}")
    sizes[k] = max(sizes.get(k, 0), len(v))
    return v, sha(v)

def step():
    i = rng.randrange(NSLOTS)
    k = slots[i]
    r = rng.random()
    st['ops'] += 1
    if k is None or model[k] == {{None}}:
        k = slots[i] = f'w{{W}}-{{i}}-{{gens[i]}}'
        gens[i] += 1
        model[k] = {{None}}
        v, d = value(k)
        rc = store.put(k, v)
        note('put', rc)
        if rc == 0:
            model[k] = {{d}}
        else:
            model[k].add(d)
    elif r < 0.45:
        v, d = value(k)
        rc = store.upsert(k, v)
        note('upsert', rc)
        if rc == 0:
            model[k] = {{d}}
        else:
            model[k].add(d)
    elif r < 0.65:
        rc = store.remove(k, True)
        note('remove', rc)
        # Not found: the key is absent now. For a key that held a value this is no loss: a
        # remove whose reply the master's death cut off is sent again to the new master, which
        # answers that the key (removed by the first send) is not there. A real loss shows in
        # the gets and in the end reads, which never change anything.
        if rc == -704 and None not in model[k]:
            st['remove_not_found'] = st.get('remove_not_found', 0) + 1
        if rc in (0, -704):
            model[k] = {{None}}
        else:
            model[k].add(None)
    else:
        n = store.get_into(k, ctypes.addressof(buf), MAXSZ)
        rc = 0 if n >= 0 else n
        note('get', rc)
        if n >= 0 and sha(buf.raw[:n]) not in model[k]:
            st['wrong_seen'].append(k)
        if n == -704 and None not in model[k]:
            st['lost_seen'].append(k)
            model[k].add(None)  # counted once
        return rc
    if rc == 0:
        st['acked'] += 1
    return rc

def loop():
    while not stop.is_set():
        if step() not in (0, -704):
            time.sleep(0.02)

ns.update(st=st, stop=stop, model=model, sizes=sizes)
ns['thread'] = threading.Thread(target=loop, daemon=True)
ns['thread'].start()
result = 0
"""


def start_writer(worker, w, seed, nslots=32, minsz=4096, maxsz=65536):
    worker.run(WRITER.format(w=w, seed=seed, nslots=nslots, minsz=minsz, maxsz=maxsz))


def acked(worker):
    return worker.run("result = ns['st']['acked']")


def wait_progress(writers, more, timeout=60):
    """Waits until every writer has `more` acknowledged operations beyond its count now; False
    when one did not within timeout."""
    base = [acked(w) for w in writers]
    return wait_for(lambda: all(acked(w) >= b + more for w, b in zip(writers, base)),
                    timeout=timeout, step=0.1)


def stop_writer(worker):
    """Stops the writer; (its model as {key: [size, allowed]}, its stats)."""
    return worker.run(
        "ns['stop'].set()\n"
        "ns['thread'].join()\n"
        "result = [{k: [ns['sizes'].get(k, 1), sorted(v, key=lambda d: d or '')]\n"
        "           for k, v in ns['model'].items()}, ns['st']]")


def storm_report(name, models, stats, verdicts, extra=""):
    """Prints and returns (acknowledged, lost, wrong, text) for a storm's end state.

    acknowledged: keys that must hold a value (their model has no "absent"); lost: those whose
    value is gone (read back OBJECT_NOT_FOUND, or unreadable at the end) or that a writer saw
    gone meanwhile; wrong: bytes that are none of the key's possible values (a removed key back
    from the dead is wrong too), at the end or meanwhile."""
    lost_seen = {k for s in stats for k in s["lost_seen"]}
    # (a writer that saw a value gone adds "absent" to the key's model, not to count it twice)
    must = {k for k, (_, allowed) in models.items() if None not in allowed} | lost_seen
    wrong_seen = {k for s in stats for k in s["wrong_seen"]}
    lost = {k for k in must if verdicts[k][0] in ("lost", "error")} | lost_seen
    wrong = {k for k, (v, _) in verdicts.items() if v == "wrong"} | wrong_seen
    codes = {}
    for s in stats:
        for op, c in s["codes"].items():
            for rc, n in c.items():
                codes.setdefault(op, {}).setdefault(rc, 0)
                codes[op][rc] += n
    ops = sum(s["ops"] for s in stats)
    acked_ops = sum(s["acked"] for s in stats)
    counts, bad_codes, examples = tally(verdicts)
    text = (f"{name}: acknowledged={len(must)} lost={len(lost)} wrong={len(wrong)} "
            f"(keys={len(models)} ops={ops} acknowledged_ops={acked_ops}; "
            f"lost meanwhile={len(lost_seen)} wrong meanwhile={len(wrong_seen)}; "
            f"removes answered not found (resent after a kill)="
            f"{sum(s.get('remove_not_found', 0) for s in stats)}; "
            f"end reads {counts}, codes of the bad ones {bad_codes}, e.g. {examples}; "
            f"op codes {codes}{extra})")
    print(text)
    return len(must), len(lost), len(wrong), text
