#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (ASan + UBSan) and runs each for a bounded time
# from its seed corpus. Usage: run_fuzz.sh [SECONDS per target, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
clangxx=$(command -v clang++ || command -v clang++-14)
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$clangxx" \
  -DNEARDUP_BUILD_FUZZ=ON -DNEARDUP_BUILD_TESTS=OFF >/dev/null
cmake --build build-fuzz --target request_parser_fuzz >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp fuzz/corpus/request_parser/* "$work/"
status=0
build-fuzz/request_parser_fuzz -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix="$work/" "$work" >"$work.log" 2>&1 || status=$?
grep -E "^(Done|stat::number_of_executed_units)|ERROR|SUMMARY" "$work.log" || true
rm -f "$work.log"
# libFuzzer exits non-zero on any crash, leak or sanitizer report.
if [ "$status" -ne 0 ]; then
  echo "fuzz: request_parser_fuzz found a problem (exit $status)"
  exit 1
fi
echo "fuzz: request_parser_fuzz ran ${seconds}s without findings"
