#!/usr/bin/env bash
# Runs neardup's whole test suite: installs and builds with the tests and benchmarks
# (scripts/setup.sh --with-tests), checks formatting and the installed CMake package (with its
# completions and man page), fuzzes for a bounded time, runs every test in the optimised build,
# then the tests that exercise memory (CMakeLists.txt: NEARDUP_MEMORY_TESTS) again under
# AddressSanitizer + UndefinedBehaviorSanitizer. Exits non-zero if anything fails.
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
failures=0
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

step() { printf '\n==== %s ====\n' "$*"; }

step "setup and optimised build"
bash scripts/setup.sh --with-tests || { echo "setup failed"; exit 1; }

step "formatting (clang-format)"
bash scripts/check_format.sh || failures=$((failures + 1))

step "install and find_package(neardup) from a separate project"
bash scripts/check_install.sh build || failures=$((failures + 1))

if [ -x scripts/run_fuzz.sh ]; then
  step "fuzzing (bounded)"
  bash scripts/run_fuzz.sh || failures=$((failures + 1))
fi

step "tests, optimised build"
ctest --test-dir build --output-on-failure -j "$jobs" 2>&1 | tee "$logs/release.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || failures=$((failures + 1))

step "Python tests (pytest, the built package; Dask on a 2-worker LocalCluster)"
# Run from the build tree so the tests see this checkout's module, not an older installed one.
PYTHONPATH="$PWD/build/python" NEARDUP_BINARY="$PWD/build/neardup" \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests 2>&1 | tee "$logs/python.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || failures=$((failures + 1))

step "memory tests, AddressSanitizer + UndefinedBehaviorSanitizer build"
# -O1 with line tables (-g1) is what sanitizer reports need, and compiles in half the time of -O2 -g.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNEARDUP_SANITIZE=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DNEARDUP_BUILD_BENCH=OFF >/dev/null &&
  cmake --build build-asan -j "$jobs" || { echo "sanitizer build failed"; failures=$((failures + 1)); }
NEARDUP_SANITIZER_BUILD=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" 2>&1 | tee "$logs/asan.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || failures=$((failures + 1))

# One closing line over both ctest runs and pytest, in the plain 'N passed, N failed' form.
total=0
failed=0
for log in "$logs"/release.log "$logs"/asan.log; do
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1)
  if [ -n "$line" ]; then
    t=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
    f=$(sed -E 's/.*passed, ([0-9]+) tests failed.*/\1/' <<<"$line")
    total=$((total + t))
    failed=$((failed + f))
  fi
done
# pytest's own summary line: "N passed[, N failed][, N skipped] in ...".
py_line=$(grep -E '^(=+ )?[0-9]+ (passed|failed|errors?)' "$logs/python.log" | tail -n 1)
if [ -n "$py_line" ]; then
  py_passed=$(grep -oE '[0-9]+ passed' <<<"$py_line" | grep -oE '[0-9]+' || echo 0)
  py_failed=$(( $(grep -oE '[0-9]+ failed' <<<"$py_line" | grep -oE '[0-9]+' || echo 0) + \
                $(grep -oE '[0-9]+ errors?' <<<"$py_line" | grep -oE '[0-9]+' || echo 0) ))
  total=$((total + py_passed + py_failed))
  failed=$((failed + py_failed))
fi
echo
if [ "$failures" -ne 0 ]; then
  echo "test.sh: $failures step(s) failed"
fi
echo "tests: $((total - failed)) passed, $failed failed"
[ "$failures" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$total" -gt 0 ]
