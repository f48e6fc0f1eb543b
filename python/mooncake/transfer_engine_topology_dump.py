"""Print this host's Transfer Engine topology (the reference's ``transfer_engine_topology_dump``).

    transfer_engine_topology_dump [--device-name mlx5_0,mlx5_1] [--custom-topo-json FILE]

The output is one line, ``Local topology [te/discover]: {"cpu:0": [[...], [...]], ...}``: per
NUMA node, the NICs the engine prefers and the others (the reference's JSON). This build drives
no RDMA NIC, so a discovered topology lists every NUMA node with empty NIC lists; that is the
true answer on a host without RDMA, not an error. ``--custom-topo-json`` (or, with
``--use-custom-topo``, the file named by ``MC_CUSTOM_TOPO_JSON``) prints the matrix that file sets,
after checking its shape. ``--backend tent`` asks for the reference's TENT engine, which this
build does not have: exit status 1 naming it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

__all__ = ["main", "parse_args", "load_custom_topology"]


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="transfer_engine_topology_dump",
                                description="Dump this host's Transfer Engine topology.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    from mooncake import __version__

    # every console script of the package answers --version (tests/packaging)
    p.add_argument("--version", action="version",
                   version=f"transfer_engine_topology_dump {__version__}")
    p.add_argument("--device-name", default="", help="keep only these NICs (comma-separated)")
    p.add_argument("--backend", choices=("auto", "te", "tent"), default="auto",
                   help="te: the Transfer Engine; tent: the reference's TENT (not in this build); "
                        "auto: tent when MC_USE_TENT/MC_USE_TEV1 is set")
    p.add_argument("--use-custom-topo", action="store_true",
                   help="print the matrix of the file named by MC_CUSTOM_TOPO_JSON")
    p.add_argument("--custom-topo-json", default=None, help="print the matrix this file sets")
    return p.parse_args(argv)


def load_custom_topology(path: str, device_filter: List[str]) -> dict:
    """A NIC priority matrix file: {"cpu:N" (or any location): [[preferred], [others]]}."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a topology is a JSON object of location -> [[NICs], [NICs]]")
    out = {}
    for location, lists in data.items():
        if (not isinstance(lists, list) or len(lists) != 2
                or not all(isinstance(x, list) and all(isinstance(n, str) for n in x) for x in lists)):
            raise ValueError(f"{path}: {location!r} must map to [[preferred NICs], [other NICs]]")
        out[location] = [[n for n in x if not device_filter or n in device_filter] for x in lists]
    return out


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    backend = args.backend
    if backend == "auto":
        backend = "tent" if os.environ.get("MC_USE_TENT") or os.environ.get("MC_USE_TEV1") else "te"
    if backend == "tent":
        print("error: failed to dump topology: the TENT engine (MC_USE_TENT) is not in this build; "
              "use --backend te", file=sys.stderr)
        return 1
    devices = [d for d in args.device_name.split(",") if d]
    path = args.custom_topo_json
    if path is None and args.use_custom_topo:
        path = os.environ.get("MC_CUSTOM_TOPO_JSON", "")
        if not path:
            print("error: --use-custom-topo requires MC_CUSTOM_TOPO_JSON", file=sys.stderr)
            return 1
    try:
        if path is not None:
            topo = json.dumps(load_custom_topology(path, devices))
            mode = f"custom ({path})"
        else:
            from mooncake.engine import TransferEngine

            topo = TransferEngine().get_local_topology(device_name=args.device_name or None)
            mode = "discover"
    except (OSError, ValueError, RuntimeError) as error:
        print(f"error: failed to dump topology: {error}", file=sys.stderr)
        return 1
    print(f"Local topology [{backend}/{mode}]: {topo}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
