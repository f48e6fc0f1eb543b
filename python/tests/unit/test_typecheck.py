"""The typecheck tier: mypy over the package and its extension stubs ([tool.mypy] in
pyproject.toml) finds nothing, and the stubs' types reach a user's code: a call with a wrong
argument type is reported."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def mypy(*args, cwd=ROOT, cache):
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def test_package_typechecks(tmp_path):
    res = mypy(cache=tmp_path / "cache")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Success: no issues found" in res.stdout


def test_stub_types_reach_user_code(tmp_path):
    user = tmp_path / "user.py"
    user.write_text(
        "from mooncake.store import MooncakeDistributedStore\n"
        "s = MooncakeDistributedStore()\n"
        "rc: int = s.put('k', b'v')\n"           # fine
        "s.put(1, b'v')\n"                        # a key is a str
        "s.batch_put_from(['k'], [1], ['4096'])\n"  # sizes are ints
        "data: str = s.get('k')\n")               # get returns bytes
    res = mypy("--config-file", str(ROOT / "pyproject.toml"), str(user), cwd=tmp_path,
               cache=tmp_path / "cache")
    out = res.stdout
    assert res.returncode == 1, out + res.stderr
    assert "user.py:4: error" in out and '"put"' in out, out
    assert "user.py:5: error" in out, out
    assert "user.py:6: error" in out, out
    assert "user.py:3" not in out, out
