#!/usr/bin/env bash
# Evidence of no change for the store commands: runs `neardup index` of two binaries (a build
# before a change and one after) over ../shared's devpairs and compares what they print and write:
# `index add` (bulk, and --check if-new / always), `index query` of a corpus (stdout, and -o DIR's
# four files), `index query --text`, `index get`, and `index stats` but for its timing and
# counters of work done. Both a dedup-rule and a simhash-rule store.
# Usage: bench/index_identity.sh OLD_NEARDUP NEW_NEARDUP [OUT_DIR]   (exit 1 if any output differs)
set -uo pipefail
old=$(realpath "$1")
new=$(realpath "$2")
out=$(realpath -m "${3:-$(mktemp -d)}")
cd "$(dirname "$0")/.."
shared=${NEARDUP_SHARED:-../shared}
if [ ! -f "$shared/devpairs/docs.jsonl" ]; then
  echo "index_identity: skipped: $shared/devpairs/docs.jsonl not found (set NEARDUP_SHARED)"
  exit 0
fi
docs=$(realpath "$shared/devpairs/docs.jsonl")
rm -rf "$out" && mkdir -p "$out"
head -n 3000 "$docs" > "$out/first.jsonl"
tail -n +3001 "$docs" | head -n 3000 > "$out/second.jsonl"
first_field() {
  head -n 1 "$docs" | /usr/bin/python3 -c "import json,sys; print(json.loads(sys.stdin.readline())['$1'])"
}
text=$(first_field text)
first_id=$(first_field id)

# Runs one scenario with binary $1 into directory $2.
scenario() {
  local bin=$1 dir=$2 rule
  mkdir -p "$dir"
  for rule in dedup simhash; do
    local s="$dir/store_$rule"
    {
      "$bin" index create "$s" --rule "$rule"
      "$bin" index add "$s" "$out/first.jsonl" --sync none
      "$bin" index add "$s" "$out/second.jsonl" --check if-new --batch 500
      "$bin" index add "$s" "$out/first.jsonl" --check always --batch 700 --no-compact
      "$bin" index query "$s" "$out/second.jsonl"
      "$bin" index query "$s" "$out/first.jsonl" -o "$dir/query_$rule"
      "$bin" index query "$s" --text "$text" --limit 5
      "$bin" index get "$s" "$first_id"
      "$bin" index stats "$s" | /usr/bin/python3 -c '
import json, sys
stats = json.load(sys.stdin)
for key in ("open_seconds", "flush_seconds", "compaction_seconds", "disk_bytes", "flushes",
            "compactions", "wal_bytes", "wal_syncs", "searches", "writes", "segments",
            "segment_entries", "memtable_entries", "index_bytes_per_fingerprint",
            "indexed_k"):  # indexed_k: max_k under its new name (same value), absent before
    stats.pop(key, None)
print(json.dumps(stats, sort_keys=True))'
    } > "$dir/stdout_$rule" 2> "$dir/stderr_$rule"
    # The timing of the closing lines is not an answer.
    # max_k's new name in the lines (indexed_k) is read as the old, so builds from before the
    # rename compare.
    sed -i -E 's/[0-9]+\.[0-9]+ s\b/T s/g; s/indexed_k ([0-9])/max_k \1/g' "$dir/stderr_$rule"
    sed -i "s|$dir|DIR|g" "$dir/stderr_$rule" "$dir/stdout_$rule"
    for f in "$dir/query_$rule"/*; do sed -i "s|$dir|DIR|g" "$f"; done
  done
}

scenario "$old" "$out/old"
scenario "$new" "$out/new"
failed=0
for f in $(cd "$out/old" && find . -type f ! -path './store_*' | sort); do
  if cmp -s "$out/old/$f" "$out/new/$f"; then
    echo "identical: $f ($(wc -l < "$out/old/$f") lines)"
  else
    echo "DIFFERENT: $f"
    diff "$out/old/$f" "$out/new/$f" | head -5
    failed=1
  fi
done
[ "$failed" = 0 ] && echo "index_identity: all outputs identical"
exit "$failed"
