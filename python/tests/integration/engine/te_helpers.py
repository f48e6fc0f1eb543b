"""Helpers shared by the Transfer Engine integration tests: the peer process driver, initiator
buffers, deterministic data and checksums."""

import hashlib
import os
import queue
import random
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from mooncake.engine import TransferEngine

PEER_SCRIPT = Path(__file__).with_name("peer.py")
REPLY_TIMEOUT_S = 30.0


def pattern(seed: int, length: int) -> bytes:
    return random.Random(seed).randbytes(length)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def libfabric_installed() -> bool:
    """Whether libfabric.so.1 loads here (Debian: libfabric1; tools/dev/install-deps.sh installs
    it): the only reason a fabric test may skip."""
    import ctypes

    try:
        ctypes.CDLL("libfabric.so.1")
    except OSError:
        return False
    return True


class fabric_env:
    """MC_FABRIC_PROVIDER=tcp (libfabric's tcp provider, which runs on loopback) for the engines
    made and the peer processes started inside it."""

    def __init__(self, provider: str = "tcp"):
        self.provider, self.old = provider, None

    def __enter__(self):
        self.old = os.environ.get("MC_FABRIC_PROVIDER")
        os.environ["MC_FABRIC_PROVIDER"] = self.provider
        return self

    def __exit__(self, *exc):
        if self.old is None:
            os.environ.pop("MC_FABRIC_PROVIDER", None)
        else:
            os.environ["MC_FABRIC_PROVIDER"] = self.old


def free_port() -> int:
    """A port nobody listens on right now. Only for names that must carry a port before the
    engine binds it (non-P2P metadata); P2PHANDSHAKE picks its own."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LinePeer:
    """A helper process driven line by line over its stdin and stdout: it prints ``READY ...``
    once started, then one line per command; its stderr goes to a file under tmp_dir."""

    def __init__(self, tmp_dir: Path, argv, what: str, env=None):
        self.what = what
        self.stderr_path = tmp_dir / f"{what}-{os.getpid()}-{random.getrandbits(32):08x}.err"
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True,
            bufsize=1, env={**os.environ, **env} if env else None)
        self._lines: "queue.Queue[str | None]" = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.ready = self.line()
        assert self.ready.startswith("READY "), \
            f"{what} failed to start: {self.ready!r}\n{self.stderr()}"

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def line(self) -> str:
        """The next line the process prints (AssertionError when it is silent or gone)."""
        try:
            line = self._lines.get(timeout=REPLY_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"{self.what} did not answer in {REPLY_TIMEOUT_S}s\n"
                                 f"{self.stderr()}")
        if line is None:
            raise AssertionError(f"{self.what} exited ({self.proc.poll()})\n{self.stderr()}")
        return line

    def send(self, text: str) -> str:
        """Writes one command line and returns the answer line."""
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self.line()

    def no_more_lines(self) -> bool:
        return self._lines.empty()

    def stderr(self) -> str:
        self._err.flush()
        return self.stderr_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("QUIT\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self._err.close()


class Peer(LinePeer):
    """A peer.py process: its own engine with one managed buffer, driven line by line."""

    def __init__(self, tmp_dir: Path, protocol: str, metadata: str, size: int, host: str,
                 prefix=(), env=None):
        """prefix: a command the peer runs under (e.g. ``ip netns exec NS``); env: extra
        environment variables."""
        super().__init__(tmp_dir, [*prefix, sys.executable, str(PEER_SCRIPT), "--protocol",
                                   protocol, "--metadata", metadata, "--size", str(size),
                                   "--host", host], "peer", env)
        _, self.name, addr, size_s = self.ready.split()
        self.addr, self.size = int(addr), int(size_s)

    def cmd(self, *words) -> str:
        line = self.send(" ".join(str(w) for w in words))
        assert line.startswith("OK"), f"peer command {words} failed: {line}"
        return line[3:]

    def fill(self, off: int, n: int, seed: int) -> str:
        return self.cmd("FILL", off, n, seed)

    def sha(self, off: int, n: int) -> str:
        return self.cmd("SHA", off, n)


class LocalBuffer:
    """Initiator memory registered with an engine: managed, or plain (ctypes) + register_memory."""

    def __init__(self, engine: TransferEngine, size: int, managed: bool):
        import ctypes

        self.engine, self.size, self.managed = engine, size, managed
        if managed:
            self.addr = engine.allocate_managed_buffer(size)
            assert self.addr != 0
        else:
            self._mem = ctypes.create_string_buffer(size)
            self.addr = ctypes.addressof(self._mem)
            assert engine.register_memory(self.addr, size, "cpu:0") == 0

    def put(self, off: int, data: bytes) -> str:
        assert self.engine.write_bytes_to_buffer(self.addr + off, data, len(data)) == 0
        return sha(data)

    def sha(self, off: int, n: int) -> str:
        return sha(self.engine.read_bytes_from_buffer(self.addr + off, n))

    def release(self) -> None:
        if self.managed:
            self.engine.free_managed_buffer(self.addr, self.size)
        else:
            self.engine.unregister_memory(self.addr)


def peer_host(metadata: str) -> str:
    # With P2PHANDSHAKE the engine picks a port and names itself host:port; with a metadata
    # server the name is what we pass, so it must be unique per process.
    return "127.0.0.1" if metadata == "P2PHANDSHAKE" else f"127.0.0.1:{free_port()}"
