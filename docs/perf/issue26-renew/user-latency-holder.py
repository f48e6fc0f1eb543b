"""The holder of user-latency.sh: a client that only contributes 512 MiB (usage: PORT)."""
import sys, time
from mooncake.store import MooncakeDistributedStore
s = MooncakeDistributedStore()
assert s.setup("127.0.0.1", "P2PHANDSHAKE", 512 << 20, 16 << 20, "tcp", "", f"127.0.0.1:{sys.argv[1]}") == 0
print("ready", flush=True)
time.sleep(3600)
