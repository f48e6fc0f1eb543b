import pytest

from release_helpers import run_tool, write_pyproject
from relcommon import ReleaseError, check_tag, classify, parse_canonical, version_from_tag


@pytest.mark.parametrize("tag", ["v1.2.3", "1.2.3", "refs/tags/v1.2.3"])
def test_matching_tag_passes(tmp_path, tag):
    pp = write_pyproject(tmp_path / "pyproject.toml", "1.2.3")
    r = run_tool("check_version.py", "--tag", tag, "--pyproject", pp)
    assert r.returncode == 0, r.stderr
    assert "PASS" in r.stdout and "stable" in r.stdout


def test_mismatching_tag_fails(tmp_path):
    pp = write_pyproject(tmp_path / "pyproject.toml", "1.2.3")
    r = run_tool("check_version.py", "--tag", "v1.2.4", "--pyproject", pp)
    assert r.returncode == 1
    assert "'1.2.4'" in r.stderr and "'1.2.3'" in r.stderr


def test_tag_equal_but_not_canonical_fails_with_hint(tmp_path):
    pp = write_pyproject(tmp_path / "pyproject.toml", "1.2.0rc1")
    r = run_tool("check_version.py", "--tag", "v1.2.0-rc.1", "--pyproject", pp)
    assert r.returncode == 1
    assert "written differently" in r.stderr


@pytest.mark.parametrize("version,canonical", [("1.2.0-rc1", "1.2.0rc1"), ("01.2.3", "1.2.3"),
                                               ("1.2.3.dev", "1.2.3.dev0"), ("v1.0", "1.0"),
                                               ("1.0-post1", "1.0.post1")])
def test_non_canonical_version_fails(tmp_path, version, canonical):
    pp = write_pyproject(tmp_path / "pyproject.toml", version)
    r = run_tool("check_version.py", "--pyproject", pp)
    assert r.returncode == 1
    assert "not canonical" in r.stderr and repr(canonical) in r.stderr


@pytest.mark.parametrize("version", ["banana", "1.2.3+local.1", ""])
def test_invalid_or_local_version_fails(tmp_path, version):
    pp = write_pyproject(tmp_path / "pyproject.toml", version)
    r = run_tool("check_version.py", "--pyproject", pp)
    assert r.returncode == 1, r.stdout


@pytest.mark.parametrize("version,kind", [("1.0.0", "stable"), ("1.0.0.post2", "stable"),
                                          ("1.0.0rc1", "pre-release"), ("2.0.0a3", "pre-release"),
                                          ("2.0.0b1", "pre-release"), ("1.1.0.dev4", "dev"),
                                          ("1.1.0rc1.dev2", "dev")])
def test_kind_comes_from_the_parser(tmp_path, version, kind):
    assert classify(parse_canonical(version)) == kind
    pp = write_pyproject(tmp_path / "pyproject.toml", version)
    out = tmp_path / "gh_output"
    r = run_tool("check_version.py", "--tag", f"v{version}", "--pyproject", pp, env={"GITHUB_OUTPUT": str(out)})
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    assert f"version={version}" in lines and f"kind={kind}" in lines
    assert f"prerelease={'false' if kind == 'stable' else 'true'}" in lines


def test_repository_version_is_canonical():
    r = run_tool("check_version.py")
    assert r.returncode == 0, r.stderr


def test_tag_parsing_edge_cases():
    assert version_from_tag("v0.1.0") == "0.1.0"
    assert version_from_tag("0.1.0") == "0.1.0"
    with pytest.raises(ReleaseError):
        version_from_tag("v")
    with pytest.raises(ReleaseError):
        check_tag("vv0.1.0", "0.1.0")
    with pytest.raises(ReleaseError):
        check_tag("release-0.1.0", "0.1.0")
