#!/usr/bin/env bash
# A newcomer's first command:  bash tools/quickstart.sh
# Installs the system packages the build needs, installs this package into .venv, and runs the
# demo: a mooncake_master, two storage clients and a pure client on this host moving real data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/dev/install-deps.sh --build-only
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
echo "building and installing mooncake-c into .venv (first build takes a minute) ..."
.venv/bin/python -m pip install -q .
exec .venv/bin/mooncake_demo "$@"
