#!/usr/bin/env bash
# End-to-end dedup speed benchmark: the dev corpus plus devpairs (~28k docs, ~55 MB), then
# optionally N generated documents. Every corpus is deduplicated several ways in the same run: the
# defaults (MinHash LSH, verification at the threshold), the same plus the SimHash join at k = 3
# (combined), the SimHash-only join at k = 6 with verification at 0.4 (what dedup did above
# 200,000 documents before the LSH stage), and the exact-duplicate baseline (SimHash join at k = 0,
# no verification: only reading and fingerprinting). Prints wall time and peak memory per stage
# (from summary.json), candidate pairs per document, the process's peak memory and CPU time
# (/usr/bin/time), the temporary files' peak, and ratios to the baselines.
#
#   bash bench/dedup_bench.sh                             # corpus + devpairs
#   bash bench/dedup_bench.sh --large 1000000             # also 1M generated docs
#   bash bench/dedup_bench.sh --large 1000000 --large 10000000   # 28k, 1M and 10M in one run
#
# Generated corpora: bench/generate_distractors.py --dup-rate 0.1 (~1.4 KB per document): distinct
# originals (8-24 sentences drawn from one corpus file; no two share more than incidental
# sentences) and 10 % planted near-duplicate copies of known kinds (exact, whitespace/case noise,
# a sentence dropped or swapped, ~3 % of words substituted, boilerplate-wrapped), with the truth
# in planted_<N>_d10.jsonl.truth.tsv; bench/planted_recall.py prints the recall per kind. They are
# written to DATA_DIR (default /work/data if it exists, else a temporary directory) and reused
# when already there. GENERATOR=overlapping uses bench/generate_corpus.py --chunk-chars 480
# instead (gen_<N>_c480.jsonl, the previous sessions' corpus): its originals are cut from the
# same ~28k documents and share long passages (~42 candidate pairs per document at 1M), so it
# measures verification of related originals more than scaling.
# Each dedup run is preceded by the load and the available memory (free -m).
# Environment: NEARDUP (binary, default build/neardup), SHARED (default ../shared),
#   THREADS (default: all cores), LARGE_INPUT (an existing JSONL to use instead of generating one;
#   with one --large only; its truth TSV, if any, beside it), CONFIGS (space-separated subset of:
#   default combined simhash6 exact) for the 28k corpus, LARGE_CONFIGS (default:
#   "default simhash6") for the generated corpora, GENERATOR (planted or overlapping).
set -euo pipefail
cd "$(dirname "$0")/.."
NEARDUP=${NEARDUP:-build/neardup}
SHARED=${SHARED:-../shared}
THREADS=${THREADS:-0}
CONFIGS=${CONFIGS:-default combined simhash6 exact}
LARGE_CONFIGS=${LARGE_CONFIGS:-default simhash6}
GENERATOR=${GENERATOR:-planted}
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
print(f"  {s['candidate_pairs']} candidate pairs = {s['candidate_pairs'] / max(1, n):.3f} per "
      f"document (LSH {s['lsh_candidate_pairs']}, SimHash {s['simhash_candidate_pairs']}), "
      f"{s['accepted_pairs']} accepted, {s['clusters']} clusters, {s['documents_removed']} "
      f"removed")
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
  if [[ "$GENERATOR" == overlapping ]]; then
    GEN=${LARGE_INPUT:-$DATA_DIR/gen_${LARGE}_c480.jsonl}
  else
    GEN=${LARGE_INPUT:-$DATA_DIR/planted_${LARGE}_d10.jsonl}
  fi
  if [[ ! -f "$GEN" ]]; then
    echo "  [$(date -u +%H:%M:%S)] generating $GEN"
    if [[ "$GENERATOR" == overlapping ]]; then
      /usr/bin/python3 bench/generate_corpus.py "$LARGE" "$GEN.tmp" --corpus "$SHARED/corpus" \
        --chunk-chars 480
    else
      /usr/bin/python3 bench/generate_distractors.py "$LARGE" "$GEN.tmp" \
        --corpus "$SHARED/corpus" --dup-rate 0.1
      mv "$GEN.tmp.truth.tsv" "$GEN.truth.tsv"
    fi
    mv "$GEN.tmp" "$GEN"
  fi
  ls -l "$GEN" | awk '{printf "input: %.1f MB\n", $5/1e6}'
  RUN_CONFIGS=$LARGE_CONFIGS run_configs "large-$LARGE" "$GEN"
  for config in $LARGE_CONFIGS; do
    [[ "$config" == exact ]] && continue
    if [[ -f "$GEN.truth.tsv" ]]; then
      /usr/bin/python3 bench/planted_recall.py "$GEN.truth.tsv" \
        "$OUT/large-$LARGE-$config/clusters.jsonl" "$config"
    elif head -1 "$GEN" | grep -q '"derived_from"'; then
      /usr/bin/python3 bench/planted_recall.py --from-jsonl "$GEN" \
        "$OUT/large-$LARGE-$config/clusters.jsonl" "$config"
    fi
  done
done
