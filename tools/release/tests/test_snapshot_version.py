"""tools/release/snapshot_version.py: X.Y.Z.devYYYYMMDDHHMM from the commit's time, written into
pyproject.toml; pre-release and dev bases refused."""

from release_helpers import run_tool, write_pyproject

T = 1796300000  # 2026-12-03 ... UTC


def test_snapshot_version_is_a_dev_release_of_the_next_version(tmp_path):
    pp = write_pyproject(tmp_path / "pyproject.toml", "0.2.0")
    res = run_tool("snapshot_version.py", "--pyproject", pp, "--commit-time", T, "--write")
    assert res.returncode == 0, res.stderr
    v = res.stdout.strip()
    assert v.startswith("0.2.0.dev2026") and len(v) == len("0.2.0.dev") + 12, v
    assert f'version = "{v}"' in pp.read_text()
    from packaging.version import Version
    assert Version("0.1.9") < Version(v) < Version("0.2.0")
    again = run_tool("snapshot_version.py", "--pyproject", pp, "--commit-time", T + 60)
    assert again.returncode == 1  # already a dev version: refused
    assert "not a plain release version" in again.stderr


def test_later_commits_sort_later(tmp_path):
    pp = write_pyproject(tmp_path / "pyproject.toml", "1.0.0")
    a = run_tool("snapshot_version.py", "--pyproject", pp, "--commit-time", T).stdout.strip()
    b = run_tool("snapshot_version.py", "--pyproject", pp, "--commit-time", T + 3600).stdout.strip()
    from packaging.version import Version
    assert Version(a) < Version(b)
