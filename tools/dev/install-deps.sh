#!/usr/bin/env bash
# Installs the system packages the build and the tests need (Debian/Ubuntu, as root or with sudo).
# Idempotent: exits quickly when everything is already there.
set -euo pipefail

# curl: brings libcurl, which https:// etcd endpoints load at run time (etcd_tls.c); openssl: the
# TLS test makes its certificates with it.
# libfabric-dev: headers only (the fabric transport dlopens libfabric.so.1 at run time, nothing
# links against it); libfabric1: the library the fabric tests load (its tcp and shm providers).
# redis-tools: redis-benchmark, Redis's own C client, the baseline of benchmarks/compare.
build_pkgs=(libcjson-dev libxxhash-dev pkg-config libfabric-dev)
test_pkgs=(libcmocka-dev clang clang-format libclang-rt-14-dev iproute2 redis-server redis-tools
  iperf3 shellcheck prometheus etcd-server libfabric1 curl openssl)
want=("${build_pkgs[@]}")
[ "${1:-}" = "--build-only" ] || want+=("${test_pkgs[@]}")

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
