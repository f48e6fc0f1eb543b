"""The wheel gate's checks against real inputs: ELF files built here with gcc, real archives."""

import io
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

import gatechecks as gc



def cc(out: Path, *flags: str, src: str = "int mc_probe(void) { return 42; }\n", shared=True):
    out.parent.mkdir(parents=True, exist_ok=True)
    c = out.parent / (out.name + ".c")
    c.write_text(src)
    cmd = ["gcc", "-O1", "-o", str(out), str(c), *flags]
    if shared:
        cmd[1:1] = ["-shared", "-fPIC"]
    subprocess.run(cmd, check=True, capture_output=True)
    c.unlink()
    return out


@pytest.fixture
def wheel_tree(tmp_path):
    """An unpacked wheel laid out like ours: core lib, an extension beside it, a binary in bin/."""
    root = tmp_path / "w"
    pkg = root / "mooncake"
    cc(pkg / "libmooncake_core.so", "-Wl,-soname,libmooncake_core.so", "-Wl,-rpath,$ORIGIN")
    cc(pkg / "_engine.abi3.so", "-L" + str(pkg), "-lmooncake_core", "-Wl,-rpath,$ORIGIN",
       src="int mc_probe(void); int f(void) { return mc_probe(); }\n")
    cc(pkg / "bin" / "mooncake_master", "-L" + str(pkg), "-lmooncake_core", "-Wl,-rpath,$ORIGIN/..",
       src="int mc_probe(void); int main(void) { return mc_probe() != 42; }\n", shared=False)
    return root


def test_good_tree_passes(wheel_tree):
    results = gc.inspect_tree(wheel_tree, ["/nonexistent/build/dir"], repaired=False)
    assert len(results) == 9
    assert all(r.ok for r in results), [r.reason for r in results if not r.ok]
    # ... and the binary really runs through its $ORIGIN/.. RUNPATH.
    assert subprocess.run([str(wheel_tree / "mooncake" / "bin" / "mooncake_master")]).returncode == 0


def test_absolute_runpath_fails(wheel_tree):
    cc(wheel_tree / "mooncake" / "_store.abi3.so", "-Wl,-rpath,/usr/local/lib:$ORIGIN")
    bad = [r for r in gc.inspect_tree(wheel_tree, [], repaired=False) if not r.ok]
    assert len(bad) == 1 and "'/usr/local/lib' is not $ORIGIN-relative" in bad[0].reason


def test_runpath_leaving_the_wheel_fails(wheel_tree):
    cc(wheel_tree / "mooncake" / "_store.abi3.so", "-Wl,-rpath,$ORIGIN/../../lib")
    bad = [r for r in gc.inspect_tree(wheel_tree, [], repaired=False) if not r.ok]
    assert len(bad) == 1 and "leaves the wheel" in bad[0].reason


def test_shipped_library_not_on_runpath_fails(wheel_tree):
    pkg = wheel_tree / "mooncake"
    cc(pkg / "bin" / "mooncake_http_metadata_server", "-L" + str(pkg), "-lmooncake_core", "-Wl,-rpath,$ORIGIN",
       src="int mc_probe(void); int main(void) { return mc_probe() != 42; }\n", shared=False)
    bad = [r for r in gc.inspect_tree(wheel_tree, [], repaired=False) if not r.ok]
    assert len(bad) == 1 and "not on its RUNPATH" in bad[0].reason


def test_needed_outside_allowlist_fails(wheel_tree, tmp_path):
    other = cc(tmp_path / "ext" / "libsurprise.so", "-Wl,-soname,libsurprise.so")
    cc(wheel_tree / "mooncake" / "_store.abi3.so", "-L" + str(other.parent), "-lsurprise", "-Wl,-rpath,$ORIGIN",
       src="int mc_probe(void); int f(void) { return mc_probe(); }\n")
    bad = [r for r in gc.inspect_tree(wheel_tree, [], repaired=False) if not r.ok]
    assert len(bad) == 1 and "libsurprise.so" in bad[0].reason


def test_own_library_name_must_be_shipped():
    r = gc.check_needed("mooncake/_engine.abi3.so", ["libmooncake_core.so", "libc.so.6"], shipped=set(), repaired=False)
    assert not r.ok and "libmooncake_core.so" in r.reason


def test_cjson_allowed_before_repair_and_only_bundled_after():
    rel = "mooncake/libmooncake_core.so"
    assert gc.check_needed(rel, ["libcjson.so.1", "libc.so.6"], set(), repaired=False).ok
    assert not gc.check_needed(rel, ["libcjson.so.1"], set(), repaired=True).ok
    bundled = "libcjson-1a2b3c4d.so.1.7.15"
    assert gc.check_needed(rel, [bundled], {bundled}, repaired=True).ok
    assert not gc.check_needed(rel, [bundled], set(), repaired=True).ok


def test_build_path_in_bytes_fails(wheel_tree, tmp_path):
    build = str(tmp_path / "some-build-dir" / "cp311-abi3")
    cc(wheel_tree / "mooncake" / "_store.abi3.so", "-Wl,-rpath,$ORIGIN",
       src=f'const char *mc_where = "{build}/x.c"; const char *f(void) {{ return mc_where; }}\n')
    bad = [r for r in gc.inspect_tree(wheel_tree, [str(tmp_path / "some-build-dir")], repaired=False) if not r.ok]
    assert len(bad) == 1 and "some-build-dir" in bad[0].reason


def test_elf_detection_ignores_other_files(wheel_tree):
    (wheel_tree / "mooncake" / "__init__.py").write_text("x = 1\n")
    (wheel_tree / "mooncake" / "fake.so").write_bytes(b"not an elf")
    assert sorted(p.name for p in gc.elf_files(wheel_tree)) == ["_engine.abi3.so", "libmooncake_core.so", "mooncake_master"]


def _tar(path: Path, names, top="mooncake_c-0.1.0"):
    with tarfile.open(path, "w:gz") as tf:
        for n in names:
            data = b"x"
            info = tarfile.TarInfo(f"{top}/{n}" if top else n)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_sdist_compare(tmp_path):
    tracked = {"pyproject.toml", "CMakeLists.txt", "python/mooncake/__init__.py"}
    good = gc.sdist_members(_tar(tmp_path / "a.tar.gz", sorted(tracked) + ["PKG-INFO"]))
    assert gc.compare_sdist(good, tracked).ok
    r = gc.compare_sdist(gc.sdist_members(_tar(tmp_path / "b.tar.gz", ["pyproject.toml", "build/x.o", "PKG-INFO"])), tracked)
    assert not r.ok and "2 tracked file(s) missing" in r.reason and "build/x.o" in r.reason
    r = gc.compare_sdist(gc.sdist_members(_tar(tmp_path / "c.tar.gz", ["stray"], top="")), set())
    assert not r.ok


def test_tracked_files_and_status_of_a_real_repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.txt").write_text("a")
    subprocess.run(["git", "-C", str(tmp_path), "add", "a.txt"], check=True)
    assert gc.tracked_files(tmp_path) == {"a.txt"}
    assert gc.git_status(tmp_path).strip() == "A  a.txt"
    (tmp_path / "new").write_text("n")
    assert "?? new" in gc.git_status(tmp_path)


# auditwheel show --json output, in the shape auditwheel 6 prints it.
def _report(overall, sym, external):
    return {"version": 1, "wheel": "w.whl", "pure": False, "overall_tag": overall, "sym_tag": sym,
            "external_libs": external, "policy_upgrades": {}}


def test_auditwheel_judgement():
    ok = gc.check_auditwheel(_report("linux_x86_64", "manylinux_2_34_x86_64", {"libcjson.so.1": "/lib/x"}), False)
    assert ok.ok and "libcjson.so.1" in ok.reason
    bad = gc.check_auditwheel(_report("linux_x86_64", "manylinux_2_34_x86_64",
                                      {"libcjson.so.1": "/lib/x", "libstdc++.so.6": "/lib/y"}), False)
    assert not bad.ok and "libstdc++" in bad.reason
    assert not gc.check_auditwheel(_report("linux_x86_64", "linux_x86_64", {}), False).ok
    assert gc.check_auditwheel(_report("manylinux_2_28_x86_64", "manylinux_2_28_x86_64", {}), True).ok
    assert gc.check_auditwheel(_report("manylinux_2_28_x86_64", "manylinux_2_28_x86_64", {"libcuda.so.1": None}), True).ok
    assert not gc.check_auditwheel(_report("linux_x86_64", "manylinux_2_28_x86_64", {"libcjson.so.1": "/x"}), True).ok


def _wheel(path: Path, names, mode=0o755):
    with zipfile.ZipFile(path, "w") as zf:
        for n in names:
            zi = zipfile.ZipInfo(n)
            zi.external_attr = (mode if "/bin/" in n else 0o644) << 16
            zf.writestr(zi, b"x")
    return path


FULL = ["mooncake/__init__.py", "mooncake/libmooncake_core.so", "mooncake/libmooncake_common.so",
        "mooncake/include/mooncake/transfer_engine.h", "mooncake/_engine.abi3.so", "mooncake/_store.abi3.so",
        "mooncake/bin/mooncake_master", "mooncake/bin/mooncake_client", "mooncake/bin/mooncake_conductor",
        "mooncake/bin/mooncake_http_metadata_server", "mooncake_c-0.1.0.dist-info/METADATA"]


def test_layout(tmp_path):
    assert all(r.ok for r in gc.check_layout(_wheel(tmp_path / "a.whl", FULL), abi3=True))
    res = gc.check_layout(_wheel(tmp_path / "b.whl", [n for n in FULL if "_store" not in n]), abi3=True)
    assert [r.reason for r in res if not r.ok] == ["missing the Store extension mooncake._store "
                                                   "(mooncake/_store\\.(abi3|cpython-3\\d+-[^/]+)\\.so)"]
    res = gc.check_layout(_wheel(tmp_path / "g.whl", [n for n in FULL if "common" not in n]), abi3=True)
    assert [r.reason for r in res if not r.ok] == ["missing the internal common library "
                                                   "(mooncake/libmooncake_common\\.so)"]
    specific = [n.replace("_store.abi3.so", "_store.cpython-311-x86_64-linux-gnu.so") for n in FULL]
    assert not all(r.ok for r in gc.check_layout(_wheel(tmp_path / "c.whl", specific), abi3=True))
    assert all(r.ok for r in gc.check_layout(_wheel(tmp_path / "d.whl", specific), abi3=False))
    assert not all(r.ok for r in gc.check_layout(_wheel(tmp_path / "e.whl", FULL, mode=0o644), abi3=True))
    assert not all(r.ok for r in gc.check_layout(_wheel(tmp_path / "f.whl", FULL + ["src/x.c"]), abi3=True))
