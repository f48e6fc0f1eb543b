import hashlib
import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from release_helpers import SHA, make_dist, run_tool, write_pyproject

VERSION = "0.4.0rc1"


@pytest.fixture
def release(tmp_path):
    """A candidate as the build workflow leaves it: dist/ plus its manifest, and the tagged pyproject."""
    dist = tmp_path / "dist"
    names = make_dist(dist, VERSION)
    manifest = tmp_path / "manifest" / "manifest.json"
    r = run_tool("write_manifest.py", "--dist", dist, "--out", manifest, "--source-sha", SHA, "--version", VERSION)
    assert r.returncode == 0, r.stderr
    pp = write_pyproject(tmp_path / "pyproject.toml", VERSION)
    return tmp_path, dist, manifest, pp, names


def verify(release, *extra, tag=f"v{VERSION}"):
    tmp, dist, manifest, pp, _ = release
    return run_tool("verify_publish.py", "--tag", tag, "--manifest", manifest, "--dist", dist,
                    "--pyproject", pp, "--source-sha", SHA, *extra)


def test_untouched_candidate_passes_and_uploads_everything(release):
    tmp, dist, _, _, names = release
    up = tmp / "upload"
    r = verify(release, "--upload-dir", up)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in up.iterdir()) == sorted(names)
    for n in names:
        assert (up / n).read_bytes() == (dist / n).read_bytes()


def test_mismatching_tag_fails(release):
    r = verify(release, tag="v0.4.0")
    assert r.returncode == 1 and "pyproject.toml says" in r.stderr


def test_manifest_from_another_commit_fails(release):
    tmp, dist, manifest, pp, _ = release
    r = run_tool("verify_publish.py", "--tag", f"v{VERSION}", "--manifest", manifest, "--dist", dist,
                 "--pyproject", pp, "--source-sha", "f" * 40)
    assert r.returncode == 1 and "built from" in r.stderr


def test_manifest_version_differs_from_pyproject(release):
    tmp, dist, manifest, _, _ = release
    pp = write_pyproject(tmp / "other.toml", "0.4.1")
    r = run_tool("verify_publish.py", "--tag", "v0.4.1", "--manifest", manifest, "--dist", dist, "--pyproject", pp)
    assert r.returncode == 1 and "manifest version" in r.stderr


def test_missing_file_fails(release):
    tmp, dist, _, _, names = release
    (dist / names[1]).unlink()
    r = verify(release, "--upload-dir", tmp / "upload")
    assert r.returncode == 1 and f"missing: {names[1]}" in r.stderr
    assert not (tmp / "upload").exists() or not any((tmp / "upload").iterdir())


def test_tampered_digest_fails(release):
    _, dist, _, _, names = release
    p = dist / names[0]
    data = bytearray(p.read_bytes())
    data[100] ^= 0x01  # same size, different bytes
    p.write_bytes(bytes(data))
    r = verify(release)
    assert r.returncode == 1 and f"digest: {names[0]}" in r.stderr


def test_resized_file_fails(release):
    _, dist, _, _, names = release
    with open(dist / names[2], "ab") as f:
        f.write(b"\0")
    r = verify(release)
    assert r.returncode == 1 and f"size: {names[2]}" in r.stderr


def test_extra_file_fails(release):
    _, dist, _, _, _ = release
    (dist / f"mooncake_c-{VERSION}-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"late addition")
    r = verify(release)
    assert r.returncode == 1 and "extra: mooncake_c" in r.stderr


def test_corrupt_manifest_fails(release):
    _, _, manifest, _, _ = release
    manifest.chmod(0o644)
    m = json.loads(manifest.read_text())
    m["files"][0]["sha256"] = "xyz"
    manifest.write_text(json.dumps(m))
    r = verify(release)
    assert r.returncode == 1 and "files[0]" in r.stderr


def digests(dist, names):
    return {n: hashlib.sha256((dist / n).read_bytes()).hexdigest() for n in names}


def test_rerun_with_matching_published_digests_uploads_only_the_rest(release):
    tmp, dist, _, _, names = release
    published = tmp / "published.json"
    published.write_text(json.dumps(digests(dist, names[:2])))
    up = tmp / "upload"
    r = verify(release, "--published", published, "--upload-dir", up)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in up.iterdir()) == sorted(names[2:])
    assert "2 already published" in r.stdout


def test_rerun_with_published_directory(release):
    tmp, dist, _, _, names = release
    pub = tmp / "pub"
    pub.mkdir()
    shutil.copy2(dist / names[0], pub / names[0])
    r = verify(release, "--published", pub)
    assert r.returncode == 0, r.stderr
    (pub / names[0]).write_bytes(b"a different build of the same name")
    r = verify(release, "--published", pub)
    assert r.returncode == 1 and f"published: {names[0]}" in r.stderr


def test_rerun_with_mismatching_published_digest_fails(release):
    tmp, dist, _, _, names = release
    d = digests(dist, names)
    d[names[1]] = "0" * 64
    published = tmp / "published.json"
    published.write_text(json.dumps(d))
    r = verify(release, "--published", published)
    assert r.returncode == 1 and "a re-run must not change a release" in r.stderr


def test_rerun_with_published_file_missing_from_manifest_fails(release):
    tmp, _, _, _, _ = release
    published = tmp / "published.json"
    published.write_text(json.dumps([{"filename": f"mooncake_c-{VERSION}-cp39-cp39-linux_x86_64.whl",
                                      "hashes": {"sha256": "a" * 64}}]))
    r = verify(release, "--published", published)
    assert r.returncode == 1 and "not in this manifest" in r.stderr


class _Index(BaseHTTPRequestHandler):
    files: list = []

    def do_GET(self):  # noqa: N802
        if self.path.rstrip("/") != "/simple/mooncake-c":
            self.send_error(404)
            return
        body = json.dumps({"meta": {"api-version": "1.0"}, "name": "mooncake-c", "files": self.files}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_fetch_published_reads_the_index_then_verify_uses_it(release):
    tmp, dist, _, _, names = release
    d = digests(dist, names)
    _Index.files = [{"filename": names[0], "hashes": {"sha256": d[names[0]]}},
                    {"filename": "mooncake_c-0.3.0.tar.gz", "hashes": {"sha256": "b" * 64}}]
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/simple"
        out = tmp / "published.json"
        r = run_tool("fetch_published.py", "--version", VERSION, "--out", out, "--index-url", url)
        assert r.returncode == 0, r.stderr
        assert json.loads(out.read_text()) == {names[0]: d[names[0]]}
        r = verify(release, "--published", out)
        assert r.returncode == 0, r.stderr
        r = run_tool("fetch_published.py", "--version", VERSION, "--out", tmp / "none.json",
                     "--index-url", f"http://127.0.0.1:{srv.server_address[1]}/nothing-here")
        assert r.returncode == 0 and json.loads((tmp / "none.json").read_text()) == {}
    finally:
        srv.shutdown()
        srv.server_close()
