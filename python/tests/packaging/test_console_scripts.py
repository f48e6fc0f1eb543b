"""Every console script of the installed wheel works and answers --version with the package version."""

import os
import stat
import subprocess
from pathlib import Path

import pytest

from mooncake.cli import binary_path


def test_every_console_script_is_installed(console_scripts, scripts_dir):
    assert console_scripts, "the distribution declares no console scripts"
    for name, _target in console_scripts:
        p = scripts_dir / name
        assert p.is_file() and os.access(p, os.X_OK), f"console script {name} missing from {scripts_dir}"


def test_every_console_script_answers_version(console_scripts, scripts_dir, dist_version):
    failures = []
    for name, target in console_scripts:
        r = subprocess.run([str(scripts_dir / name), "--version"], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
        first = (r.stdout.strip().splitlines() or [""])[0]
        if r.returncode != 0 or not first or first.split()[-1] != dist_version:
            failures.append(f"{name} ({target}): exit {r.returncode}, stdout {r.stdout.strip()[:80]!r}, "
                            f"stderr {r.stderr.strip()[:160]!r}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", ["mooncake_master", "mooncake_client", "mooncake_conductor",
                                  "mooncake_http_metadata_server"])
def test_bundled_binaries(name, dist_version):
    p = Path(binary_path(name))
    import mooncake

    assert p.parent == Path(mooncake.__file__).parent / "bin"
    assert p.stat().st_mode & stat.S_IXUSR
    r = subprocess.run([str(p), "--version"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [name, dist_version]


def test_binary_path_rejects_unknown_names():
    with pytest.raises(FileNotFoundError):
        binary_path("no_such_binary")


def test_launcher_reports_missing_binary(tmp_path):
    """With MOONCAKE_BIN_DIR pointing at an empty directory the launcher exits 127 with a message."""
    import sys

    env = dict(os.environ, MOONCAKE_BIN_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", "from mooncake.cli import mooncake_master; mooncake_master()"],
                       capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 127
    assert "mooncake_master" in r.stderr
