#!/usr/bin/env bash
# Installs what neardup needs on Debian 12 (as root, or via sudo) and builds it into build/.
# Safe to run again: it installs only missing packages and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake ninja-build g++ pkg-config ccache python3 python3-jieba
  libicu-dev libxxhash-dev libopencc-dev opencc libsimdjson-dev libcli11-dev
  zlib1g-dev libzstd-dev libcpp-httplib-dev
  pybind11-dev python3-dev python3-numpy python3-pandas python3-dask python3-distributed
  libgtest-dev libgmock-dev libbenchmark-dev libfaiss-dev clang-format clang-14 libclang-rt-14-dev
  python3-pytest python3-psutil
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
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEARDUP_BUILD_BENCH=ON \
  -DNEARDUP_BUILD_PYTHON=ON >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
echo "setup: built $build_dir/neardup" >&2

# The Python package (import neardup) into /usr/bin/python3's site-packages under /usr/local.
install_cmd=(cmake --install "$build_dir" --component python)
if [ -w "$(cmake -L -N "$build_dir" 2>/dev/null | sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p')" ]; then
  "${install_cmd[@]}" >/dev/null
else
  sudo "${install_cmd[@]}" >/dev/null
fi
echo "setup: installed the Python package: $(cd / && /usr/bin/python3 -c 'import neardup; print(neardup.__file__)')" >&2
