"""Start one process per rank of an EP worker script and collect their output (shared by the EP
tests): ``SCRIPT RANK WORLD INIT_FILE OUT_DIR [extra...]``, every rank killed if still running."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

DEADLINE_S = 240  # generous: a busy 2-core host; a hung collective ends at the workers' own 60 s timeout


def run_ranks(
    script: Path, world: int, out: Path, extra: Sequence[str] = (), env: Optional[Dict[str, str]] = None
) -> List[str]:
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(r), str(world), str(out / "store"), str(out), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )
        for r in range(world)
    ]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=DEADLINE_S)[0].decode(errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return logs
