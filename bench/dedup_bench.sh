#!/usr/bin/env bash
# End-to-end dedup speed benchmark: the dev corpus plus devpairs (~28k docs, ~55 MB), then
# optionally N generated documents (bench/generate_corpus.py). Every corpus is deduplicated four
# ways in the same run: the defaults (MinHash LSH, verification at the threshold), the same plus
# the SimHash join at k = 3 (combined), the SimHash-only join at k = 6 with verification at 0.4 (what dedup did above 200,000
# documents before the LSH stage), and the exact-duplicate baseline (SimHash join at k = 0, no
# verification: only reading and fingerprinting). Prints wall time and peak memory per stage (from
# summary.json), the process's peak memory and CPU time (/usr/bin/time), and ratios to the baselines.
#
#   bash bench/dedup_bench.sh                             # corpus + devpairs
#   bash bench/dedup_bench.sh --large 1000000             # also 1M generated docs
#   bash bench/dedup_bench.sh --large 1000000 --large 10000000   # 28k, 1M and 10M in one run
# Generated corpora (generate_corpus.py --chunk-chars 480: ~1.5 KB per document) are written to
# DATA_DIR (default /work/data if it exists, else a temporary directory) as gen_<N>_c480.jsonl and
# reused when already there. Each dedup run is preceded by the available memory (free -m).
# Environment: NEARDUP (binary, default build/neardup), SHARED (default ../shared),
#   THREADS (default: all cores), LARGE_INPUT (an existing JSONL to use instead of generating one;
#   with one --large only), CONFIGS (space-separated subset of: default combined simhash6 exact)
#   for the 28k corpus, LARGE_CONFIGS (default: "default simhash6") for the generated corpora.
set -euo pipefail
cd "$(dirname "$0")/.."
NEARDUP=${NEARDUP:-build/neardup}
SHARED=${SHARED:-../shared}
THREADS=${THREADS:-0}
CONFIGS=${CONFIGS:-default combined simhash6 exact}
LARGE_CONFIGS=${LARGE_CONFIGS:-default simhash6}
SIZES=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --large) SIZES+=("${2:?--large needs a document count}"); shift 2 ;;
    *) echo "dedup_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
OUT=$(mktemp -d /tmp/neardup_bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
if [[ -z "${DATA_DIR:-}" ]]; then
  if [[ -d /work/data && -w /work/data ]]; then DATA_DIR=/work/data; else DATA_DIR=$OUT; fi
fi

flags_of() {
  case "$1" in
    default) echo "" ;;
    combined) echo "--candidates lsh+simhash" ;;
    simhash6) echo "--candidates simhash -k 6 --verify 0.4" ;;
    exact) echo "--candidates simhash -k 0 --verify 0" ;;
  esac
}

print_summary() {  # summary.json and /usr/bin/time output -> one line per stage
  /usr/bin/python3 - "$1" "$2" "$3" <<'EOF'
import json, re, sys
s = json.load(open(sys.argv[1]))
label = sys.argv[2]
timing = open(sys.argv[3]).read()
peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", timing)
user = re.search(r"User time \(seconds\): ([\d.]+)", timing)
system = re.search(r"System time \(seconds\): ([\d.]+)", timing)
wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", timing)
mb = s["text_bytes"] / 1e6
# dedup resets the kernel's peak counter at each stage (per-stage peaks), so /usr/bin/time only
# sees the peak since the last stage: the process peak is the larger of it and the stage peaks.
stage_peak = max([st.get("peak_memory_mb", 0) * 1e6 / 1024 for st in s["stages"]] + [0])
if peak:
    peak_kb = max(int(peak.group(1)), int(stage_peak))
n = s["documents_fingerprinted"]
o = s.get("options", {})
print(f"{label}: {n} docs, {mb:.1f} MB; candidates {o.get('candidates')}, threshold "
      f"{o.get('threshold')}, LSH {o.get('bands')}x{o.get('rows')}, k {o.get('k')}, verify "
      f"{o.get('verify')}")
print(f"  {s['candidate_pairs']} candidate pairs (LSH {s['lsh_candidate_pairs']}, SimHash "
      f"{s['simhash_candidate_pairs']}), {s['accepted_pairs']} accepted, {s['clusters']} "
      f"clusters, {s['documents_removed']} removed")
if "spill" in s:
    print(f"  temporary files: {'on' if s['spill']['enabled'] else 'off (--in-memory)'}, peak "
          f"{s['spill']['peak_mb']:.0f} MB on disk")
if s.get("lsh_candidate_pairs") and s.get("simhash_candidate_pairs"):
    print(f"  SimHash join adds {s['simhash_only_candidate_pairs']} candidate pairs the LSH stage "
          f"did not find, of which {s['simhash_only_accepted_pairs']} accepted")
print(f"  total {s['total_seconds']:.2f} s = {n / s['total_seconds']:.0f} docs/s, "
      f"{mb / s['total_seconds']:.1f} MB/s; process: wall {wall.group(1) if wall else '?'}, "
      f"CPU {float(user.group(1)) + float(system.group(1)) if user else 0:.1f} s, peak memory "
      f"{peak_kb / 1024 if peak else 0:.0f} MiB "
      f"({peak_kb * 1024 / max(1, n) if peak else 0:.0f} bytes/document)")
for st in s["stages"]:
    rate = f"{st.get('items_per_second', 0):.0f} items/s"
    if "mb_per_second" in st:
        rate += f", {st['mb_per_second']:.1f} MB/s"
    memory = f"peak {st['peak_memory_mb']:.0f} MB" if "peak_memory_mb" in st else ""
    print(f"    {st['stage']:<12} {st['seconds']:8.3f} s  {st['items']:>10} items  {rate:<34} "
          f"{memory}")
EOF
}

seconds_of() {
  /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['total_seconds'])" "$1"
}

run_configs() {  # name inputs...  (configs from $RUN_CONFIGS)
  local name=$1
  shift
  for config in $RUN_CONFIGS; do
    echo "  [$(date -u +%H:%M:%S)] $name, $config: load $(cut -d' ' -f1-3 /proc/loadavg), available memory $(free -m | awk '/^Mem:/{print $7}') MiB"
    # shellcheck disable=SC2046
    /usr/bin/time -v "$NEARDUP" dedup "$@" -o "$OUT/$name-$config" --threads "$THREADS" -q \
      $(flags_of "$config") 2> "$OUT/$name-$config.time"
    print_summary "$OUT/$name-$config/summary.json" "$name, $config" "$OUT/$name-$config.time"
  done
  if [[ " $RUN_CONFIGS " == *" default "* ]]; then
    for config in $RUN_CONFIGS; do
      [[ "$config" == default ]] && continue
      /usr/bin/python3 -c "import sys; d,b=float(sys.argv[1]),float(sys.argv[2]); \
print(f'ratio default / $config time: {d/b:.2f}x')" \
        "$(seconds_of "$OUT/$name-default/summary.json")" \
        "$(seconds_of "$OUT/$name-$config/summary.json")"
    done
  fi
}

if [[ ! -d "$SHARED/corpus" || ! -f "$SHARED/devpairs/docs.jsonl" ]]; then
  echo "dedup_bench: skipped: the shared corpus is not at $SHARED (set SHARED=...)" >&2
  exit 0
fi
echo "== corpus + devpairs (threads=${THREADS}, nproc=$(nproc), load: $(cut -d' ' -f1-3 /proc/loadavg))"
RUN_CONFIGS=$CONFIGS run_configs small "$SHARED"/corpus/*.jsonl "$SHARED"/devpairs/docs.jsonl

for LARGE in "${SIZES[@]}"; do
  echo "== $LARGE generated documents (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  GEN=${LARGE_INPUT:-$DATA_DIR/gen_${LARGE}_c480.jsonl}
  if [[ ! -f "$GEN" ]]; then
    /usr/bin/python3 bench/generate_corpus.py "$LARGE" "$GEN.tmp" --corpus "$SHARED/corpus" \
      --chunk-chars 480
    mv "$GEN.tmp" "$GEN"
  fi
  ls -l "$GEN" | awk '{printf "input: %.1f MB\n", $5/1e6}'
  RUN_CONFIGS=$LARGE_CONFIGS run_configs "large-$LARGE" "$GEN"
  for config in $LARGE_CONFIGS; do
    [[ "$config" == exact ]] && continue
    /usr/bin/python3 - "$GEN" "$OUT/large-$LARGE-$config/remove.txt" "$config" <<'EOF'
import json, sys
copies = set()
for line in open(sys.argv[1], encoding="utf-8"):
    d = json.loads(line)
    if "derived_from" not in d:  # not from generate_corpus.py (e.g. distractors): nothing to check
        sys.exit(0)
    if d["derived_from"] is not None:
        copies.add(d["id"])
removed = set(l.strip() for l in open(sys.argv[2]))
hit = len(copies & removed)
print(f"{sys.argv[3]}: generated copies removed: {hit}/{len(copies)} "
      f"({100*hit/max(1,len(copies)):.1f}%), removed documents that were not generated copies: "
      f"{len(removed - copies)}")
EOF
  done
done
