"""A user's first gets while another thread of the same client reads a hot set (whose entries the
renewer keeps renewing): the first gets' latency percentiles. Run by user-latency.sh.
usage: python user-latency.py PORT HOT_KEYS SECONDS   (a master on 127.0.0.1:PORT, a holder up)"""
import os, sys, threading, time
from mooncake.store import MooncakeDistributedStore
port, nhot, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
s = MooncakeDistributedStore()
assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", f"127.0.0.1:{port}") == 0
val = b"x" * 4096
hot = [f"hot{i}" for i in range(nhot)]
for k in hot:
    assert s.put(k, val) == 0
cold = [f"cold{os.getpid()}_{i}" for i in range(20000)]
for k in cold:
    assert s.put(k, val) == 0
stop = False
def reader():
    while not stop:
        for k in hot:
            s.get(k)
            if stop:
                break
t = threading.Thread(target=reader)
if nhot:
    t.start()
    time.sleep(1.0)
lat = []
end = time.monotonic() + secs
i = 0
while time.monotonic() < end and i < len(cold):
    t0 = time.perf_counter_ns()
    s.get(cold[i])
    lat.append((time.perf_counter_ns() - t0) / 1000)
    i += 1
    time.sleep(0.0005)
stop = True
if nhot:
    t.join()
lat.sort()
n = len(lat)
print(f"hot={nhot} renew={os.environ.get('MC_STORE_CACHE_RENEW','1')} n={n} p50={lat[n//2]:.0f} p99={lat[int(n*.99)]:.0f} p999={lat[int(n*.999)]:.0f} max={lat[-1]:.0f} us")
s.close()
