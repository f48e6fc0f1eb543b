"""An RpcInterface server process for the RPC tests, driven over stdin/stdout.

It serves on --listen (port 0: a free one) and prints ``READY <port>``, then one line per
message its callbacks receive, with a SHA-256 of the bytes as the callback saw them:

    DATA <source> <length> <sha>
    TENSOR <source> <dtype> <shape as json> <total_bytes> <sha>

Commands: ``RAISE 1|0`` (callbacks raise after printing, or not) -> ``OK``; ``QUIT`` stops the
server (stop_server) and exits 0.
"""

import argparse
import hashlib
import json
import sys
import threading


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--blocking", action="store_true", help="serve with start_server() in a thread")
    args = ap.parse_args()

    from mooncake.engine import RpcInterface

    out_lock = threading.Lock()
    state = {"raise": False}

    def say(line: str) -> None:
        with out_lock:
            print(line, flush=True)

    def on_data(msg):
        data = msg["data"]
        say(f"DATA {msg['source']} {len(data)} {hashlib.sha256(data).hexdigest()}")
        if state["raise"]:
            raise RuntimeError("callback failure on purpose")

    def on_tensor(t):
        data = t.get_data_as_bytes()
        assert t.get_data_size() == len(data) == t.total_bytes == len(t.get_memory_view())
        shape = json.dumps(t.shape, separators=(",", ":"))
        say(f"TENSOR {t.source_address} {t.dtype} {shape} {t.total_bytes} "
            f"{hashlib.sha256(data).hexdigest()}")
        if state["raise"]:
            raise RuntimeError("callback failure on purpose")

    server = RpcInterface()
    if not server.initialize_server(args.listen, thread_count=4):
        say("ERR initialize_server")
        return 1
    server.set_data_receive_callback(on_data)
    server.set_tensor_receive_callback(on_tensor)
    if args.blocking:
        done = {}
        th = threading.Thread(target=lambda: done.setdefault("rc", server.start_server()))
        th.start()
        while server.get_server_port() <= 0 and th.is_alive():
            th.join(0.01)
    elif not server.start_server_async():
        say("ERR start_server_async")
        return 1
    say(f"READY {server.get_server_port()}")
    for line in sys.stdin:
        cmd, *a = line.split()
        if cmd == "RAISE":
            state["raise"] = a[0] == "1"
            say("OK")
        elif cmd == "QUIT":
            break
    server.stop_server()
    if args.blocking:
        th.join()
        say(f"STOPPED {done.get('rc')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
