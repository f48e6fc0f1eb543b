import hashlib
import json
import os
import stat

from release_helpers import SHA, make_dist, run_tool


def test_manifest_records_every_file(tmp_path):
    names = make_dist(tmp_path / "dist", "0.3.0")
    out = tmp_path / "m" / "manifest.json"
    r = run_tool("write_manifest.py", "--dist", tmp_path / "dist", "--out", out, "--source-sha", SHA,
                 "--version", "0.3.0", "--profile", "default")
    assert r.returncode == 0, r.stderr
    m = json.loads(out.read_text())
    assert m["version"] == "0.3.0" and m["profile"] == "default" and m["source_sha"] == SHA
    assert m["name"] == "mooncake-c" and m["schema"] == 1
    assert [f["name"] for f in m["files"]] == sorted(names)
    for f in m["files"]:
        data = (tmp_path / "dist" / f["name"]).read_bytes()
        assert f["size"] == len(data)
        assert f["sha256"] == hashlib.sha256(data).hexdigest()
    assert not os.stat(out).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def test_sha_from_environment(tmp_path):
    make_dist(tmp_path / "dist", "0.3.0")
    out = tmp_path / "manifest.json"
    r = run_tool("write_manifest.py", "--dist", tmp_path / "dist", "--out", out, "--version", "0.3.0",
                 env={"GITHUB_SHA": SHA})
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["source_sha"] == SHA


def test_manifest_is_never_replaced(tmp_path):
    make_dist(tmp_path / "dist", "0.3.0")
    out = tmp_path / "manifest.json"
    out.write_text("{}")
    r = run_tool("write_manifest.py", "--dist", tmp_path / "dist", "--out", out, "--source-sha", SHA, "--version", "0.3.0")
    assert r.returncode == 1 and "never replaced" in r.stderr
    assert out.read_text() == "{}"


def test_manifest_inside_dist_is_not_listed(tmp_path):
    names = make_dist(tmp_path / "dist", "0.3.0")
    out = tmp_path / "dist" / "manifest.json"
    r = run_tool("write_manifest.py", "--dist", tmp_path / "dist", "--out", out, "--source-sha", SHA, "--version", "0.3.0")
    assert r.returncode == 0, r.stderr
    assert [f["name"] for f in json.loads(out.read_text())["files"]] == sorted(names)


def test_rejects_foreign_or_wrong_version_files(tmp_path):
    make_dist(tmp_path / "dist", "0.3.0")
    (tmp_path / "dist" / "notes.txt").write_text("x")
    r = run_tool("write_manifest.py", "--dist", tmp_path / "dist", "--out", tmp_path / "m.json",
                 "--source-sha", SHA, "--version", "0.3.0")
    assert r.returncode == 1 and "notes.txt" in r.stderr
    (tmp_path / "dist" / "notes.txt").unlink()
    make_dist(tmp_path / "dist", "0.2.9", wheels=("cp311-abi3-manylinux_2_28_x86_64",))
    r = run_tool("write_manifest.py", "--dist", tmp_path / "dist", "--out", tmp_path / "m.json",
                 "--source-sha", SHA, "--version", "0.3.0")
    assert r.returncode == 1 and "0.2.9" in r.stderr
    assert not (tmp_path / "m.json").exists()


def test_rejects_bad_sha_profile_and_incomplete_release(tmp_path):
    make_dist(tmp_path / "dist", "0.3.0")
    args = ["--dist", tmp_path / "dist", "--version", "0.3.0"]
    r = run_tool("write_manifest.py", *args, "--out", tmp_path / "a.json", "--source-sha", "abc")
    assert r.returncode == 1 and "commit id" in r.stderr
    r = run_tool("write_manifest.py", *args, "--out", tmp_path / "b.json", "--source-sha", SHA, "--profile", "gpu-magic")
    assert r.returncode == 1 and "profile" in r.stderr
    r = run_tool("write_manifest.py", *args, "--out", tmp_path / "c.json")
    assert r.returncode == 1 and "GITHUB_SHA" in r.stderr
    only_wheels = tmp_path / "w"
    make_dist(only_wheels, "0.3.0")
    (only_wheels / "mooncake_c-0.3.0.tar.gz").unlink()
    r = run_tool("write_manifest.py", "--dist", only_wheels, "--version", "0.3.0", "--out", tmp_path / "d.json", "--source-sha", SHA)
    assert r.returncode == 1 and "sdist" in r.stderr
