"""ctest ep_kernels_lib: libmooncake_ep_kernels.so as python/mooncake/ep/_kernels.py loads it.

Usage: check_kernels_lib.py PATH. Checks that the library exports exactly the C interface of
mooncake-ep/include/mooncake_ep/ep_kernels.h, needs no dynamic CUDA runtime (cudart is linked
statically, so only the driver is needed at run time), loads with ctypes on this host, reports
itself as the CUDA build, and answers bad shapes with its own error before touching a device.
"""

from __future__ import annotations

import ctypes
import re
import subprocess
import sys

EXPORTS = {
    "mc_ep_combine",
    "mc_ep_dispatch_count",
    "mc_ep_dispatch_pack",
    "mc_ep_dispatch_recv",
    "mc_ep_kernels_device",
    "mc_ep_kernels_last_error",
}


def main() -> int:
    path = sys.argv[1]
    nm = subprocess.run(["nm", "-D", "--defined-only", path], check=True, capture_output=True, text=True).stdout
    exported = {line.split()[-1] for line in nm.splitlines() if re.search(r" [TDB] ", line)}
    ours = {s for s in exported if s.startswith("mc_ep_")}
    assert ours == EXPORTS, f"exports differ from ep_kernels.h: {sorted(ours ^ EXPORTS)}"
    needed = subprocess.run(["readelf", "-d", path], check=True, capture_output=True, text=True).stdout
    assert "libcudart" not in needed, f"links the CUDA runtime dynamically:\n{needed}"
    lib = ctypes.CDLL(path)
    lib.mc_ep_kernels_last_error.restype = ctypes.c_char_p
    assert lib.mc_ep_kernels_device() == 1
    i64, i32 = ctypes.c_int64, ctypes.c_int32
    rc = lib.mc_ep_combine(None, None, None, i64(4), i32(0), i64(128), i32(1), None, None, None, None)
    err = lib.mc_ep_kernels_last_error().decode()
    assert rc == -1 and err == "mc_ep_combine: num_topk must be >= 1", (rc, err)
    rc = lib.mc_ep_dispatch_count(None, i64(-1), i32(2), i32(8), None, None, None)
    err = lib.mc_ep_kernels_last_error().decode()
    assert rc == -1 and "num_tokens out of range" in err, (rc, err)
    print(f"{path}: exports {sorted(ours)}, static cudart, loads, rejects bad shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
