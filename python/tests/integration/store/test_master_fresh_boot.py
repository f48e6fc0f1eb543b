"""The master on a host that booted a minute ago. Its clocks are monotonic and count from boot, so
a time that stands for "long ago" (0, or now minus a timeout) is only long ago on a host that has
been up longer than the timeout; every fresh CI machine is not. The master runs in a time
namespace whose monotonic and boot clocks read about 60 s, whatever this host's uptime."""

import os
import shutil
import signal
import subprocess

import pytest
from store_helpers import Master, Worker, wait_for

FRESH_S = 60


def _fresh_boot_prefix():
    with open("/proc/uptime") as f:
        up = int(float(f.read().split()[0]))
    off = max(up - FRESH_S, 0)
    return ["unshare", "--time", f"--monotonic=-{off}", f"--boottime=-{off}", "--fork",
            "--kill-child"]


def _can_unshare_time():
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "--time", "--fork", "true"],
                          capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _can_unshare_time(),
                                reason="needs root and unshare --time (CI runs as root)")


def _master_uptime_s(master):
    """The master's monotonic clock, through its time namespace's offsets."""
    child = subprocess.run(["pgrep", "-P", str(master.proc.pid)], capture_output=True,
                           text=True).stdout.split()
    with open(f"/proc/{child[0]}/timens_offsets") as f:
        off = {ln.split()[0]: int(ln.split()[1]) for ln in f}
    with open("/proc/uptime") as f:
        return float(f.read().split()[0]) + off["monotonic"]


def test_forced_remove_gives_the_space_back_on_a_fresh_host():
    """Leased objects forced out by remove_all go to the graveyard until their lease is over.
    Before the fix they stayed there until put_start_release_timeout (600 s) after boot: a
    forced remove_all of a full pool left it full with 0 objects, and the next puts failed."""
    master = Master("--default_kv_lease_ttl=2000", "--eviction_high_watermark_ratio=1.0",
                    prefix=_fresh_boot_prefix())
    w = Worker()
    try:
        assert _master_uptime_s(master) < 600, "the namespace did not take"
        w.setup(master, segment=64 << 20)
        assert w.run("import os\n"
                     "ns['vals'] = [os.urandom(1 << 20) for _ in range(60)]\n"
                     "result = [store.put(f'k{i}', v) for i, v in enumerate(ns['vals'])]") \
            == [0] * 60
        # every object read (leased) just before the forced removal
        assert w.run("result = True\n"
                     "for i, v in enumerate(ns['vals']):\n"
                     "    result = result and store.get(f'k{i}') == v")
        assert w.run("result = store.remove_all(True)") == 60
        assert master.metric("mooncake_master_objects") == 0
        assert wait_for(lambda: master.metric("mooncake_master_used_bytes") == 0, timeout=60), \
            f"used bytes stay {master.metric('mooncake_master_used_bytes')} with 0 objects"
        # and the pool takes a full load again
        assert w.run("result = [store.put(f'n{i}', os.urandom(1 << 20)) for i in range(60)]") \
            == [0] * 60
    finally:
        w.close()
        master.stop()


def test_an_abandoned_put_is_released_after_its_timeout_on_a_fresh_host():
    """The space of a put discarded as abandoned comes back put_start_release_timeout after the
    put started: counted from the put, not from boot."""
    master = Master("--put_start_discard_timeout_sec=1", "--put_start_release_timeout_sec=3",
                    "--eviction_high_watermark_ratio=1.0", prefix=_fresh_boot_prefix())
    w = Worker(env={"MC_FAILPOINTS": "store_put_after_start=stop"})
    try:
        w.setup(master, segment=8 << 20)
        w.send("import os\nresult = store.put('abandoned', os.urandom(8 << 20))")
        assert wait_for(w.stopped, timeout=60)  # between its placement and its bytes
        assert master.metric("mooncake_master_used_bytes") == 8 << 20
        assert wait_for(lambda: master.metric("mooncake_master_discarded_puts_total") == 1,
                        timeout=60)
        assert wait_for(lambda: master.metric("mooncake_master_used_bytes") == 0, timeout=60)
        w.signal(signal.SIGCONT)
        assert w.reply() != 0  # its end finds its placement gone: the put fails, nothing lost
    finally:
        w.close()
        master.stop()
