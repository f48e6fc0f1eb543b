#!/usr/bin/env bash
# The whole test suite, as a newcomer and CI run it:  bash tools/run-tests.sh
#
#   1. system packages (tools/dev/install-deps.sh)
#   2. C: formatting check, build with tests (build/ctest) and ctest (common, transfer engine,
#      compat, master, client), a libFuzzer smoke run of every decoder harness in fuzz/
#      (MC_FUZZ_SECONDS each, default 5)
#   3. the Python package installed editable into .venv-test, then pytest (unit, integration, e2e)
#   4. packaging: actionlint on the workflows, the release tools' tests, and the wheel gate
#      (sdist + wheel built from a clean clone, inspected, installed into a fresh venv, tested),
#      then the release dry run on the gate's files (manifest, promotion, a rebuilt file refused)
#
# Options: --quick skips the wheel gate; MC_TEST_JOBS sets build parallelism (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
  esac
done
JOBS=${MC_TEST_JOBS:-$(nproc)}
stage() { printf '\n=== %s ===\n' "$*"; }
start=$(date +%s)

stage "system packages"
bash tools/dev/install-deps.sh

stage "C formatting (clang-format, .clang-format)"
git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror

stage "C build with tests"
mkdir -p build
cmake -S . -B build/ctest -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOONCAKE_BUILD_TESTS=ON \
  -DMOONCAKE_BUILD_PYTHON=OFF >build/ctest.configure.log 2>&1 || { cat build/ctest.configure.log; exit 1; }
cmake --build build/ctest -j "$JOBS"

stage "C tests (ctest)"
ctest --test-dir build/ctest --output-on-failure -j "$JOBS" --timeout 300

stage "fuzz smoke (libFuzzer, ${MC_FUZZ_SECONDS:-5} s per decoder)"
CC=clang cmake -S . -B build/fuzz -G Ninja -DMOONCAKE_BUILD_FUZZERS=ON -DMOONCAKE_BUILD_TESTS=OFF \
  -DMOONCAKE_BUILD_BENCH=OFF -DMOONCAKE_BUILD_PYTHON=OFF >build/fuzz.configure.log 2>&1 \
  || { cat build/fuzz.configure.log; exit 1; }
cmake --build build/fuzz -j "$JOBS"
nfuzz=0
for h in build/fuzz/fuzz/*_fuzz; do
  n=$(basename "$h")
  # The working corpus (which runs may grow) starts from the seeds kept in the repository
  # (fuzz/corpus/NAME, written by fuzz/make_seeds.py), and the harness's dictionary if it has one.
  mkdir -p "build/fuzz/corpus/$n"
  if [ -d "fuzz/corpus/$n" ]; then cp -R "fuzz/corpus/$n/." "build/fuzz/corpus/$n/"; fi
  dict=()
  if [ -f "fuzz/$n.dict" ]; then dict=(-dict="fuzz/$n.dict"); fi
  if ! "$h" ${dict[@]+"${dict[@]}"} -max_total_time="${MC_FUZZ_SECONDS:-5}" \
      -artifact_prefix="build/fuzz/$n-" "build/fuzz/corpus/$n" >"build/fuzz/$n.log" 2>&1; then
    tail -40 "build/fuzz/$n.log"
    echo "fuzz harness $n found a crash (the input is saved as build/fuzz/$n-*)" >&2
    exit 1
  fi
  echo "$n: $(grep -Eo 'Done [0-9]+ runs' "build/fuzz/$n.log")," \
    "$(grep -Eo 'cov: [0-9]+' "build/fuzz/$n.log" | tail -1)"
  nfuzz=$((nfuzz + 1))
done
[ "$nfuzz" -gt 0 ] || { echo "no fuzz harness was built" >&2; exit 1; }

stage "Python package (editable) into .venv-test"
if [ ! -x .venv-test/bin/python ]; then
  python3 -m venv --system-site-packages .venv-test
fi
# The build backend comes from the registry too, so a bare machine needs nothing preinstalled.
.venv-test/bin/python -m pip install -q "scikit-build-core>=0.10" "pytest>=7"
.venv-test/bin/python -m pip install -q --no-build-isolation -e ".[dev]" -Cbuild-dir=build/editable

stage "Python tests (pytest)"
set +e
.venv-test/bin/python -m pytest python/tests --ignore=python/tests/packaging -q
rc=$?
set -e
# pytest exits 5 when it selected no test: that is a broken suite, not a pass.
if [ "$rc" -ne 0 ]; then
  echo "pytest failed (exit $rc)" >&2
  exit "$rc"
fi

stage "packaging: workflows and release tools"
.venv-test/bin/python tools/packaging/check_all.py --quick

if [ "$QUICK" -eq 0 ]; then
  stage "packaging: wheel gate"
  rm -rf build/release-candidate
  .venv-test/bin/python tools/packaging/wheel_gate.py --dist-out build/release-candidate
  stage "release dry run (the gate's candidate, promoted without a rebuild)"
  .venv-test/bin/python tools/release/dry_run.py --dist build/release-candidate
fi

echo
echo "all test stages passed in $(( $(date +%s) - start )) s"
