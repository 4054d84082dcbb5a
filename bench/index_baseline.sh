#!/usr/bin/env bash
# Runs index_bench of an older commit (default fa893f1: the index before the probe changes of issue
# 10 — whole small buckets, every bucket line prefetched, huge pages) and of this tree one after the
# other with the same arguments, and prints both summaries and the ratios, so the old figure is
# measured beside the new on the same machine in the same session.
#
# Usage: bench/index_baseline.sh [BASE_COMMIT] [index_bench args...]
#   e.g. bench/index_baseline.sh fa893f1 --n 1e7 --queries 10000 --neardup-only --k 3
# The old tree is extracted (git archive) and built under build-baseline/ (index_bench only);
# this tree's build/index_bench must exist (scripts/setup.sh --with-tests or NEARDUP_BUILD_BENCH).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BASE=${1:-fa893f1}
shift || true
ARGS=("$@")
[[ ${#ARGS[@]} -gt 0 ]] || ARGS=(--n 1e7 --queries 10000 --neardup-only --k 3)
NEW_BIN=$ROOT/build/index_bench
[[ -x "$NEW_BIN" ]] || { echo "build/index_bench not found: build with -DNEARDUP_BUILD_BENCH=ON" >&2; exit 1; }

SRC=$ROOT/build-baseline/src
if [[ ! -x "$SRC/build/index_bench" || "$(cat "$ROOT/build-baseline/commit" 2>/dev/null)" != "$BASE" ]]; then
  rm -rf "$ROOT/build-baseline"
  mkdir -p "$SRC"
  git -C "$ROOT" archive "$BASE" | tar -x -C "$SRC"
  cmake -S "$SRC" -B "$SRC/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEARDUP_BUILD_TESTS=OFF \
    -DNEARDUP_BUILD_BENCH=ON -DNEARDUP_BUILD_PYTHON=OFF >/dev/null
  cmake --build "$SRC/build" -j "$(nproc)" --target index_bench >/dev/null
  echo "$BASE" > "$ROOT/build-baseline/commit"
fi

OUT=$(mktemp -d /tmp/neardup_index_baseline.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== baseline $BASE: index_bench ${ARGS[*]}"
"$SRC/build/index_bench" "${ARGS[@]}" > "$OUT/base.txt"
echo "== this tree ($(git -C "$ROOT" rev-parse --short HEAD)): index_bench ${ARGS[*]}"
"$NEW_BIN" "${ARGS[@]}" > "$OUT/new.txt"
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# Summary rows: "neardup ... build s, RSS B/fp, data B/fp, med us, p99 us, join s, pairs, agree".
summary() { awk '/^system / {on=1; next} on && /^neardup/ {print} on && /^ratio|^$/ {on=0}' "$1"; }
printf "%-10s %-36s %8s %9s %8s %8s %9s %9s %6s\n" version system "build s" "data B/fp" "med us" \
  "p99 us" "join s" pairs agree
for which in base new; do
  summary "$OUT/$which.txt" | while read -r line; do
    name=$(echo "$line" | awk '{print $1, $2, $3, $4}')
    set -- $(echo "$line" | awk '{print $5, $7, $8, $9, $10, $11, $12}')
    printf "%-10s %-36s %8s %9s %8s %8s %9s %9s %6s\n" "$which" "$name" "$1" "$2" "$3" "$4" "$5" \
      "$6" "$7"
  done
done
# Ratios new / base per system (median, p99).
paste <(summary "$OUT/base.txt") <(summary "$OUT/new.txt") | awk -F'\t' '{
  split($1, b, " +"); split($2, n, " +");
  printf "ratio new/base %s %s %s %s: median %.2fx, p99 %.2fx, build %.2fx\n", b[1], b[2], b[3], b[4],
    n[8] / b[8], n[9] / b[9], n[5] / b[5] }'
echo "== designs and work per query (from the new run):"
grep "design:" "$OUT/new.txt"
