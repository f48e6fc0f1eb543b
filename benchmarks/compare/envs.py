"""Finding and preparing what each system needs: our package, the reference Mooncake in its own
virtual environment, Redis, and a small tools environment (matplotlib, redis-py with hiredis).

Every function returns a description (``status`` "ok" or "unavailable" with a ``reason``) instead of
raising, so that a system that cannot be installed or started leaves the others running.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

REFERENCE_DIST = "mooncake-transfer-engine-non-cuda"
REFERENCE_VERSION = "0.3.13.post1"
TOOLS_REQS = ["matplotlib", "redis", "hiredis"]

# Debian packages that provide a shared library the reference's binaries link against.
DEBIAN_LIB_PACKAGES = {
    "libibverbs.so.1": "libibverbs1",
    "librdmacm.so.1": "librdmacm1",
    "libnuma.so.1": "libnuma1",
    "libgomp.so.1": "libgomp1",
    "libstdc++.so.6": "libstdc++6",
    "libcurl.so.4": "libcurl4",
}


# Our storage clients (holders) fault their segment in before they report ready: throughput is
# measured on a warm segment, as a long-running store's is (its first fill faulted every page
# in). A cold segment pays a page fault per 4 KiB on first write;
# docs/perf/issue26-prefault measures both.
OURS_HOLDER_ENV = {"MC_STORE_SEGMENT_PREFAULT": "sync"}


def clean_env(extra=None):
    """Environment for a worker: nothing that would make one implementation load the other's code."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "MOONCAKE_BIN_DIR")
           and not k.startswith("MOONCAKE_") and not k.startswith("MC_")}
    env.update(extra or {})
    return env


def _py(python, code, timeout=120):
    return subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env=clean_env())


def _last_line(text):
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def can_install(args):
    return not args.no_install


def apt_install(pkgs, log):
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return f"would need the Debian package(s) {' '.join(pkgs)} (not root or no apt-get)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *pkgs]
    log(f"  installing Debian package(s): {' '.join(pkgs)}")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env, timeout=600)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        return f"apt-get install {' '.join(pkgs)} failed: {_last_line(r.stderr)}"
    return None


# ---- ours ------------------------------------------------------------------------------------

PROBE_OURS = r"""
import json, importlib.metadata as md
out = {}
try:
    out["version"] = md.version("mooncake-c")
except Exception as e:
    out["version_error"] = repr(e)
for mod in ("mooncake.engine", "mooncake.store"):
    try:
        m = __import__(mod, fromlist=["x"])
        out[mod] = "ok"
    except Exception as e:
        out[mod] = f"{type(e).__name__}: {e}"
import mooncake, os, sys
out["package_dir"] = list(getattr(mooncake, "__path__", []))
for name, key in (("mooncake_master", "master"), ("mc_limits", "mc_limits"),
                  ("mc_store_bench", "mc_store_bench"),
                  ("mooncake_transfer_bench", "mooncake_transfer_bench")):
    try:
        from mooncake.cli import binary_path
        out[key] = binary_path(name)
    except Exception as e:
        # An editable install keeps binaries beside the extensions, not in the source tree.
        for d in out["package_dir"]:
            p = os.path.join(d, "bin", name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                out[key] = p
                break
        else:
            out[key + "_error"] = f"{type(e).__name__}: {e}"
out["python"] = sys.version.split()[0]
print(json.dumps(out))
"""


def probe_ours(python):
    try:
        r = _py(python, PROBE_OURS)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"status": "unavailable", "reason": f"cannot run {python}: {exc}"}
    if r.returncode != 0:
        return {"status": "unavailable",
                "reason": f"'import mooncake' fails in {python}: {_last_line(r.stderr)}"}
    info = json.loads(_last_line(r.stdout))
    info["python_path"] = python
    if "version" not in info:
        return {"status": "unavailable", "reason": f"{python} has a 'mooncake' that is not ours "
                f"(no mooncake-c distribution): install ours with 'pip install -e .'", **info}
    info["engine"] = info.get("mooncake.engine") == "ok"
    info["store"] = info.get("mooncake.store") == "ok" and "master" in info
    info["status"] = "ok" if (info["engine"] or info["store"]) else "unavailable"
    if not info["engine"]:
        info["engine_reason"] = f"mooncake.engine: {info.get('mooncake.engine')}"
    if not info["store"]:
        info["store_reason"] = (f"mooncake.store: {info.get('mooncake.store')}"
                                if info.get("mooncake.store") != "ok"
                                else f"mooncake_master: {info.get('master_error')}")
    if info["status"] != "ok":
        info["reason"] = f"{info['engine_reason']}; {info['store_reason']}"
    return info


# ---- reference -------------------------------------------------------------------------------

PROBE_REF = r"""
import json, os, sys, importlib.metadata as md, importlib.util
out = {"python": sys.version.split()[0]}
for dist in ("%s", "mooncake-transfer-engine"):
    try:
        out["version"] = md.version(dist)
        out["distribution"] = dist
        break
    except md.PackageNotFoundError:
        pass
spec = importlib.util.find_spec("mooncake")
out["package_dir"] = list(spec.submodule_search_locations)
for mod in ("mooncake.engine", "mooncake.store"):
    try:
        __import__(mod, fromlist=["x"])
        out[mod] = "ok"
    except Exception as e:
        out[mod] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
""" % REFERENCE_DIST


def _missing_libs(paths):
    missing = set()
    for p in paths:
        r = subprocess.run(["ldd", str(p)], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            m = re.match(r"\s*(\S+) => not found", line)
            if m:
                missing.add(m.group(1))
    return sorted(missing)


def ensure_reference(build_dir, args, log):
    vdir = build_dir / "ref-venv"
    py = vdir / "bin" / "python"
    marker = vdir / ".installed"
    want = f"{REFERENCE_DIST}=={REFERENCE_VERSION}"
    if getattr(args, "reference_python", None):
        py = Path(args.reference_python)  # the user's own install: use it as it is
    elif not (marker.is_file() and marker.read_text().strip() == want):
        if not can_install(args):
            return {"status": "unavailable",
                    "reason": f"{want} not installed in {vdir} and --no-install given"}
        log(f"  creating {vdir} and installing {want} (once; later runs reuse it)")
        try:
            if not py.exists():
                venv.EnvBuilder(with_pip=True, clear=True).create(vdir)
            r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                want], capture_output=True, text=True, timeout=900, env=clean_env())
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"status": "unavailable", "reason": f"installing {want} failed: {exc}"}
        if r.returncode != 0:
            return {"status": "unavailable",
                    "reason": f"pip install {want} failed: {_last_line(r.stderr)}"}
        marker.write_text(want + "\n")
    r = _py(str(py), "import importlib.util; print(importlib.util.find_spec('mooncake').submodule_search_locations[0])")
    if r.returncode != 0:
        return {"status": "unavailable", "reason": f"reference package not found: {_last_line(r.stderr)}"}
    pkg = Path(_last_line(r.stdout))
    binaries = [pkg / "engine.so", pkg / "store.so", pkg / "mooncake_master"]
    missing = _missing_libs([b for b in binaries if b.exists()])
    if missing:
        pkgs = sorted({DEBIAN_LIB_PACKAGES.get(lib, "?") for lib in missing})
        why = f"the reference's binaries need {', '.join(missing)}"
        if "?" in pkgs or not can_install(args):
            return {"status": "unavailable", "reason": why + (
                " (no known Debian package)" if "?" in pkgs else f" (Debian: {' '.join(pkgs)}; --no-install given)")}
        err = apt_install(pkgs, log)
        if err:
            return {"status": "unavailable", "reason": f"{why}: {err}"}
        missing = _missing_libs([b for b in binaries if b.exists()])
        if missing:
            return {"status": "unavailable", "reason": f"{why}; still missing after install: {missing}"}
    r = _py(str(py), PROBE_REF)
    if r.returncode != 0:
        return {"status": "unavailable", "reason": f"reference import probe failed: {_last_line(r.stderr)}"}
    info = json.loads(_last_line(r.stdout))
    info["python_path"] = str(py)
    info["master"] = str(pkg / "mooncake_master")
    info["pinned"] = want
    info["engine"] = info.get("mooncake.engine") == "ok"
    info["store"] = info.get("mooncake.store") == "ok" and (pkg / "mooncake_master").exists()
    info["status"] = "ok" if info["engine"] or info["store"] else "unavailable"
    if not info["engine"]:
        info["engine_reason"] = f"mooncake.engine: {info.get('mooncake.engine')}"
    if not info["store"]:
        info["store_reason"] = f"mooncake.store: {info.get('mooncake.store')}"
    if info["status"] != "ok":
        info["reason"] = f"{info['engine_reason']}; {info['store_reason']}"
    return info


# ---- tools venv (matplotlib, redis-py + hiredis) ---------------------------------------------

def _has_modules(python, mods):
    try:
        r = _py(python, "import " + ", ".join(mods))
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def ensure_tools(build_dir, args, log, need):
    """Return a python that can import every module of ``need`` (a list), or a reason."""
    for cand in (sys.executable, str(build_dir / "tools-venv" / "bin" / "python")):
        if Path(cand).exists() and _has_modules(cand, need):
            return {"status": "ok", "python_path": cand}
    if not can_install(args):
        return {"status": "unavailable", "reason": f"python modules {need} missing and --no-install given"}
    vdir = build_dir / "tools-venv"
    py = vdir / "bin" / "python"
    log(f"  installing {' '.join(TOOLS_REQS)} into {vdir}")
    try:
        if not py.exists():
            venv.EnvBuilder(with_pip=True, clear=True).create(vdir)
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            *TOOLS_REQS], capture_output=True, text=True, timeout=900, env=clean_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"status": "unavailable", "reason": f"creating {vdir} failed: {exc}"}
    if r.returncode != 0:
        return {"status": "unavailable", "reason": f"pip install failed: {_last_line(r.stderr)}"}
    if not _has_modules(str(py), need):
        return {"status": "unavailable", "reason": f"{need} still not importable in {py}"}
    return {"status": "ok", "python_path": str(py)}


def tool_versions(python, mods):
    code = ("import importlib.metadata as md, json\nout={}\n"
            f"for m in {mods!r}:\n"
            "    try: out[m]=md.version(m)\n"
            "    except Exception as e: out[m]=None\n"
            "print(json.dumps(out))")
    try:
        r = _py(python, code)
        return json.loads(_last_line(r.stdout)) if r.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return {}


# ---- redis -----------------------------------------------------------------------------------

def ensure_redis(args, log):
    exe = shutil.which("redis-server")
    if not exe and can_install(args):
        err = apt_install(["redis-server"], log)
        if err:
            return {"status": "unavailable", "reason": err}
        exe = shutil.which("redis-server")
    if not exe:
        return {"status": "unavailable",
                "reason": "redis-server not installed (tools/dev/install-deps.sh installs it)"}
    r = subprocess.run([exe, "--version"], capture_output=True, text=True)
    m = re.search(r"v=(\S+)", r.stdout)
    version = m.group(1) if m else r.stdout.strip()
    info = {"status": "ok", "server": exe, "version": version}
    if not version.startswith("7."):
        info["note"] = f"expected Redis 7, found {version}"
    return info
