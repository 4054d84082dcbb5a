#!/usr/bin/env bash
# Installs what neardup needs on Debian 12 (as root, or via sudo) and builds it into build/.
# Safe to run again: it installs only missing packages and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake ninja-build g++ pkg-config ccache python3 python3-jieba
  libicu-dev libxxhash-dev libopencc-dev opencc libsimdjson-dev libcli11-dev
  zlib1g-dev libzstd-dev libmicrohttpd-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev libfaiss-dev clang-format clang-14 libclang-rt-14-dev
  wrk  # bench/serve_load.sh
)
missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build_dir=${NEARDUP_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEARDUP_BUILD_BENCH=ON >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
echo "setup: built $build_dir/neardup" >&2
