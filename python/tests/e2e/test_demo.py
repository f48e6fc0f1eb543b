"""The README's first command ends in `mooncake_demo`: run it small and check what it reports."""

import re
import subprocess
import sys


def test_demo_moves_and_verifies_data():
    proc = subprocess.run(
        [sys.executable, "-m", "mooncake.cli.demo", "--segment-mib=32", "--per-size=2"],
        capture_output=True, text=True, timeout=120)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert re.search(r"put 8 objects \(\d+\.\d MiB, 2 replicas each\)", out), out
    # read back three times: before the kill, with one replica gone, after the master's expiry
    assert len(re.findall(r"read 8 objects back .* every byte verified", out)) == 3, out
    assert "master expired the dead client: segments 1, objects 8" in out, out
    assert re.search(r"transfer engine: wrote 16 MiB .* contents verified", out), out
    assert out.rstrip().endswith("demo finished: all data verified"), out


def test_demo_rejects_bad_arguments():
    proc = subprocess.run([sys.executable, "-m", "mooncake.cli.demo", "--per-size=lots"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "--per-size" in proc.stderr
