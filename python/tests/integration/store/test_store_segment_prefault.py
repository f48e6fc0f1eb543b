"""A storage client's segment faulted in ahead of use (docs/store.md): with
MC_STORE_SEGMENT_PREFAULT=sync its pages are resident when setup returns, with background soon
after, with off (the default) only as values land; values put into a faulted-in segment read back
whole; an unknown value is warned about and taken as the default."""

from store_helpers import wait_for

SEG = 64 << 20


def _rss_shmem(w):
    """The worker process's resident shared memory (the segment is a memfd), in bytes."""
    return w.run("for line in open('/proc/self/status'):\n"
                 "    if line.startswith('RssShmem:'):\n"
                 "        result = int(line.split()[1]) * 1024")


def _set_up(w, master):
    """Sets w up as a storage client of SEG bytes; returns how much its shared memory grew since,
    as a function to ask again."""
    base = _rss_shmem(w)
    w.setup(master, segment=SEG, buffer=1 << 20)
    return lambda: _rss_shmem(w) - base


def test_sync_faults_the_segment_in_before_setup_returns(make_master, make_worker):
    master = make_master()
    node = make_worker(env={"MC_STORE_SEGMENT_PREFAULT": "sync"})
    assert _set_up(node, master)() >= SEG
    client = make_worker()
    client.setup(master, segment=0)
    assert client.run("v = pattern(1 << 20, 'pf')\n"
                      "assert store.put('pf', v) == 0\n"
                      "result = sha(store.get('pf')) == sha(v)")


def test_background_faults_it_in_soon_and_off_leaves_it(make_master, make_worker):
    master = make_master()
    lazy = make_worker(env={"MC_STORE_SEGMENT_PREFAULT": "off"})
    unset = make_worker()  # the default
    eager = make_worker(env={"MC_STORE_SEGMENT_PREFAULT": "background"})
    lazy_grown, eager_grown = _set_up(lazy, master), _set_up(eager, master)
    unset_grown = _set_up(unset, master)
    # a generous deadline for a busy host
    assert wait_for(lambda: eager_grown() >= SEG, timeout=120)
    assert lazy_grown() < SEG // 2
    assert unset_grown() < SEG // 2


def test_an_unknown_value_is_warned_about_and_taken_as_the_default(make_master, make_worker,
                                                                   tmp_path):
    master = make_master()
    log = tmp_path / "worker.err"
    with open(log, "w") as err:
        node = make_worker(env={"MC_STORE_SEGMENT_PREFAULT": "eager"}, stderr=err)
        grown = _set_up(node, master)
        assert grown() < SEG // 2
    text = log.read_text()
    assert "MC_STORE_SEGMENT_PREFAULT=eager is not one of background, sync, off; using off" in text
