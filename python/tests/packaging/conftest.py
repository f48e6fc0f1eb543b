"""Packaging tests: they run against the INSTALLED wheel, from a directory outside the checkout.

The wheel gate (tools/packaging/wheel_gate.py) and cibuildwheel's test-command run them in a fresh
virtual environment. The gate also sets MC_PACKAGING_EXPECT_PREFIX (the venv) and
MC_PACKAGING_FORBIDDEN_ROOTS (the checkout paths that must not be imported from).
"""

import importlib.metadata
import os
import sys
import sysconfig
from pathlib import Path

import pytest

DIST = "mooncake-c"


def pytest_configure(config):
    # Refuse to run against a source tree: that would test the checkout, not the wheel.
    for p in sys.path:
        if p and (Path(p) / "mooncake" / "__init__.py").is_file() and (Path(p).parent / "pyproject.toml").is_file():
            raise pytest.UsageError(f"{p} (a source tree) is on sys.path; run these tests against an installed wheel")


@pytest.fixture(scope="session")
def dist_version():
    return importlib.metadata.version(DIST)


@pytest.fixture(scope="session")
def scripts_dir():
    return Path(sysconfig.get_path("scripts"))


@pytest.fixture(scope="session")
def console_scripts():
    eps = importlib.metadata.distribution(DIST).entry_points
    return sorted((ep.name, ep.value) for ep in eps if ep.group == "console_scripts")


@pytest.fixture(scope="session")
def forbidden_roots():
    return [Path(p).resolve() for p in os.environ.get("MC_PACKAGING_FORBIDDEN_ROOTS", "").split(os.pathsep) if p]
