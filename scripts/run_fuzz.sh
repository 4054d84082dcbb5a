#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (ASan + UBSan) and runs each for a bounded time
# from its seed corpus in fuzz/corpus/<name without _fuzz>:
#   request_parser_fuzz  JSON request bodies and URL parameters
#   http_input_fuzz      request bodies in every content encoding, Authorization values, token files
#   http_server_fuzz     raw bytes over a loopback connection to an in-process server (request
#                        lines, headers, chunked framing, encodings, handlers)
#   store_files_fuzz     damaged segment, log and MANIFEST files opened, queried and recovered
# Usage: run_fuzz.sh [SECONDS per target, default 30] [TARGET...]; up to nproc targets run at once.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(request_parser_fuzz http_input_fuzz http_server_fuzz store_files_fuzz)
clangxx=$(command -v clang++ || command -v clang++-14)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD/..}
# -O1 as in libFuzzer's documentation, with line tables only (-g1): half the compile time of -O2 -g.
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$clangxx" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DNEARDUP_BUILD_FUZZ=ON \
  -DNEARDUP_BUILD_TESTS=OFF >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# ninja prints compile and link errors on standard output: show them when the build fails.
if ! cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}" >"$work/build.log" 2>&1; then
  grep -E -A12 "^FAILED|error:" "$work/build.log" | head -80
  echo "fuzz: the fuzz targets did not build"
  exit 1
fi
# Each target runs single-threaded for SECONDS; up to nproc of them run at once.
run_target() {
  local target=$1 corpus="$work/${1%_fuzz}" status=0
  mkdir -p "$corpus"
  cp fuzz/corpus/"${target%_fuzz}"/* "$corpus/" 2>/dev/null || true
  build-fuzz/"$target" -max_total_time="$seconds" -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$work/$target-" "$corpus" >"$work/$target.log" 2>&1 || status=$?
  echo "$status" >"$work/$target.status"
}
slots=$(nproc)
running=0
for target in "${targets[@]}"; do
  if [ "$running" -ge "$slots" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_target "$target" &
  running=$((running + 1))
done
wait
failed=0
for target in "${targets[@]}"; do
  status=$(cat "$work/$target.status" 2>/dev/null || echo 1)
  grep -E "^(Done|stat::number_of_executed_units)|ERROR|SUMMARY" "$work/$target.log" | sed "s/^/$target: /" || true
  # libFuzzer exits non-zero on any crash, leak, timeout or sanitizer report.
  if [ "$status" -ne 0 ]; then
    echo "fuzz: $target found a problem (exit $status); the input that triggered it:"
    ls "$work/$target-"* 2>/dev/null || true
    tail -40 "$work/$target.log"
    failed=$((failed + 1))
  else
    echo "fuzz: $target ran ${seconds}s without findings"
  fi
done
[ "$failed" -eq 0 ]
