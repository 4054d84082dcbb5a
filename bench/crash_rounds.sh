#!/usr/bin/env bash
# Crash-durability soak: runs the kill -9 crash test (tests/crash_recovery_test.cc) for many rounds
# (default 200; CI runs 20) and the simulated power-cut test for many seeds. Every acknowledged write
# must be present after every kill; the test fails on the first one lost.
#
# Usage: bench/crash_rounds.sh [ROUNDS] [POWER_CUT_ROUNDS per sync mode, default 50]
#        (build first: cmake --build build --target
#        crash_recovery_test store_power_cut_test)
set -euo pipefail
ROUNDS=${1:-200}
POWER_CUT_ROUNDS=${2:-50}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${NEARDUP_BUILD_DIR:-$ROOT/build}
echo "== crash rounds: $ROUNDS kill -9 rounds, $(nproc) cores"
start=$(date +%s.%N)
NEARDUP_CRASH_ROUNDS=$ROUNDS "$BUILD/crash_recovery_test" --gtest_brief=1 | grep -E "crash rounds|PASSED|FAILED"
echo "kill -9 rounds took $(echo "$(date +%s.%N) - $start" | bc) s"
if [[ -x "$BUILD/store_power_cut_test" ]]; then
  start=$(date +%s.%N)
  NEARDUP_POWER_CUT_ROUNDS=$POWER_CUT_ROUNDS "$BUILD/store_power_cut_test" --gtest_brief=1 | grep -E "power cut|PASSED|FAILED"
  echo "power-cut rounds took $(echo "$(date +%s.%N) - $start" | bc) s"
fi
