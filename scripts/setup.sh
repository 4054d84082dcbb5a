#!/usr/bin/env bash
# Installs what neardup needs on Debian 12 (as root, or via sudo) and builds it into build/.
# Safe to run again: it installs only missing packages and rebuilds only what changed.
#
#   bash scripts/setup.sh               # the library, the neardup tool and the Python package
#   bash scripts/setup.sh --with-tests  # also the test suite and benchmarks (scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

# Packages to build and run the library and the tool. Add new build dependencies here.
BUILD_PACKAGES=(
  cmake ninja-build g++ pkg-config ccache python3 python3-jieba
  libicu-dev libxxhash-dev libopencc-dev opencc libsimdjson-dev libcli11-dev
  zlib1g-dev libzstd-dev liblzma-dev libcsv-dev libboost1.81-dev libcpp-httplib-dev
  pybind11-dev python3-dev python3-numpy python3-pandas python3-dask python3-distributed
)
# Packages only the tests, benchmarks and checks need. Add new test-only dependencies here.
TEST_PACKAGES=(
  libgtest-dev libgmock-dev libbenchmark-dev libfaiss-dev clang-format clang-14 libclang-rt-14-dev
  xz-utils python3-pytest python3-psutil
  chromium chromium-driver python3-selenium  # tests/report_browser_test.py (neardup report)
  valgrind  # tests/cli_edges_test.cc counts instructions (fingerprinting cost per document size)
  wrk  # bench/serve_load.sh
)

with_tests=0
for arg in "$@"; do
  case "$arg" in
    --with-tests) with_tests=1 ;;
    *) echo "setup: unknown argument $arg (use --with-tests or nothing)" >&2; exit 2 ;;
  esac
done

packages=("${BUILD_PACKAGES[@]}")
((with_tests)) && packages+=("${TEST_PACKAGES[@]}")
missing=()
for package in "${packages[@]}"; do
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
if ((with_tests)); then
  options=(-DNEARDUP_BUILD_TESTS=ON -DNEARDUP_BUILD_BENCH=ON)
else
  options=(-DNEARDUP_BUILD_TESTS=OFF -DNEARDUP_BUILD_BENCH=OFF)
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEARDUP_BUILD_PYTHON=ON "${options[@]}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
echo "setup: built $build_dir/neardup$( ((with_tests)) && echo ' with the tests and benchmarks')" >&2

# The Python package (import neardup) into /usr/bin/python3's site-packages under /usr/local.
install_cmd=(cmake --install "$build_dir" --component python)
if [ -w "$(cmake -L -N "$build_dir" 2>/dev/null | sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p')" ]; then
  "${install_cmd[@]}" >/dev/null
else
  sudo "${install_cmd[@]}" >/dev/null
fi
echo "setup: installed the Python package: $(cd / && /usr/bin/python3 -c 'import neardup; print(neardup.__file__)')" >&2
