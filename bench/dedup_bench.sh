#!/usr/bin/env bash
# End-to-end dedup speed benchmark: the dev corpus plus devpairs (~28k docs, ~55 MB), then
# optionally N generated documents (bench/generate_corpus.py) with peak memory from /usr/bin/time.
# Prints docs/s and MB/s per stage (from summary.json) and the ratio to a baseline measured in
# the same run: the exact-duplicate setting (-k 0, no verification), which costs only reading and
# fingerprinting.
#
#   bash bench/dedup_bench.sh                      # corpus + devpairs
#   bash bench/dedup_bench.sh --large 1000000      # also 1M generated docs
# Environment: NEARDUP (binary, default build/neardup), SHARED (default ../shared),
#   THREADS (default: all cores), LARGE_FLAGS (extra dedup flags for the large run, default none).
set -euo pipefail
cd "$(dirname "$0")/.."
NEARDUP=${NEARDUP:-build/neardup}
SHARED=${SHARED:-../shared}
THREADS=${THREADS:-0}
LARGE_FLAGS=${LARGE_FLAGS-}  # default: dedup defaults (auto k: 6 above 200,000 documents)
LARGE=0
if [[ "${1:-}" == "--large" ]]; then LARGE=${2:?--large needs a document count}; fi
OUT=$(mktemp -d /tmp/neardup_bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

print_summary() {  # summary.json -> one line per stage
  python3 - "$1" "$2" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
label = sys.argv[2]
mb = s["text_bytes"] / 1e6
print(f"{label}: {s['documents_fingerprinted']} docs, {mb:.1f} MB, {s['candidate_pairs']} candidate "
      f"pairs, {s['accepted_pairs']} accepted, {s['clusters']} clusters, {s['documents_removed']} "
      f"removed, total {s['total_seconds']:.2f} s = {s['documents_fingerprinted']/s['total_seconds']:.0f} "
      f"docs/s, {mb/s['total_seconds']:.1f} MB/s")
for st in s["stages"]:
    rate = f"{st.get('items_per_second', 0):.0f} items/s"
    if "mb_per_second" in st:
        rate += f", {st['mb_per_second']:.1f} MB/s"
    print(f"  {st['stage']:<12} {st['seconds']:8.3f} s  {st['items']:>10} items  {rate}")
EOF
}

seconds_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['total_seconds'])" "$1"; }

if [[ ! -d "$SHARED/corpus" || ! -f "$SHARED/devpairs/docs.jsonl" ]]; then
  echo "dedup_bench: skipped: the shared corpus is not at $SHARED (set SHARED=...)" >&2
  exit 0
fi
INPUTS=("$SHARED"/corpus/*.jsonl "$SHARED"/devpairs/docs.jsonl)
echo "== corpus + devpairs, default options (threads=${THREADS}, nproc=$(nproc))"
"$NEARDUP" dedup "${INPUTS[@]}" -o "$OUT/default" --threads "$THREADS" -q
print_summary "$OUT/default/summary.json" "default"
echo "== baseline: exact duplicates only (-k 0 --verify 0)"
"$NEARDUP" dedup "${INPUTS[@]}" -o "$OUT/base" --threads "$THREADS" -q -k 0 --verify 0
print_summary "$OUT/base/summary.json" "baseline"
python3 -c "import sys; d,b=float(sys.argv[1]),float(sys.argv[2]); print(f'ratio default/baseline time: {d/b:.2f}x')" \
  "$(seconds_of "$OUT/default/summary.json")" "$(seconds_of "$OUT/base/summary.json")"

if [[ "$LARGE" -gt 0 ]]; then
  echo "== $LARGE generated documents"
  python3 bench/generate_corpus.py "$LARGE" "$OUT/gen.jsonl" --corpus "$SHARED/corpus"
  ls -l "$OUT/gen.jsonl" | awk '{printf "input: %.1f MB\n", $5/1e6}'
  # shellcheck disable=SC2086
  /usr/bin/time -v "$NEARDUP" dedup "$OUT/gen.jsonl" -o "$OUT/large" --threads "$THREADS" -q \
    $LARGE_FLAGS 2> "$OUT/time.txt"
  print_summary "$OUT/large/summary.json" "large ($LARGE_FLAGS)"
  grep -E "Maximum resident|Elapsed \(wall" "$OUT/time.txt"
  python3 - "$OUT/gen.jsonl" "$OUT/large/remove.txt" <<'EOF'
import json, sys
copies = set()
for line in open(sys.argv[1], encoding="utf-8"):
    d = json.loads(line)
    if d["derived_from"] is not None:
        copies.add(d["id"])
removed = set(l.strip() for l in open(sys.argv[2]))
hit = len(copies & removed)
print(f"generated copies removed: {hit}/{len(copies)} ({100*hit/max(1,len(copies)):.1f}%), "
      f"removed documents that were not generated copies: {len(removed - copies)}")
EOF
fi
