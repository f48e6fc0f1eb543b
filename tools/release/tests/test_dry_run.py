"""tools/release/dry_run.py on a candidate directory: prints the manifest, shows the publish
step's uploads with the manifest's digests, and shows a rebuilt file refused."""

import json

from release_helpers import SHA, make_dist, run_tool
from relcommon import pyproject_version


def test_dry_run_promotes_exactly_the_candidate(tmp_path):
    version = pyproject_version()
    names = make_dist(tmp_path / "cand", version)
    res = run_tool("dry_run.py", "--dist", tmp_path / "cand", "--source-sha", SHA)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    manifest = json.loads(out[out.index("{"):out.index("\n== 3.")])
    assert manifest["source_sha"] == SHA and manifest["version"] == version
    assert sorted(f["name"] for f in manifest["files"]) == sorted(names)
    for f in manifest["files"]:
        assert f"manifest {f['sha256']}\n    upload   {f['sha256']}  same digest" in out
    assert f"uploads exactly the {len(names)} validated files" in out
    assert "refused, as it must be" in out
    assert "digest:" in out  # verify_publish.py's reason for the refusal


def test_dry_run_fails_on_a_candidate_of_another_version(tmp_path):
    make_dist(tmp_path / "cand", "9.9.9")
    res = run_tool("dry_run.py", "--dist", tmp_path / "cand", "--source-sha", SHA)
    assert res.returncode == 1
    assert "release dry run FAILED" in res.stderr
