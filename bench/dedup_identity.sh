#!/usr/bin/env bash
# Evidence of no change: runs `neardup dedup` of two binaries (a build before a change and one
# after) over ../shared's corpus + devpairs under several flag sets and compares clusters.jsonl,
# keep.txt and remove.txt byte for byte (and the warnings, but for the timing line).
# Usage: bench/dedup_identity.sh OLD_NEARDUP NEW_NEARDUP [OUT_DIR]   (exit 1 if any output differs)
set -uo pipefail
old=$(realpath "$1")
new=$(realpath "$2")
out=$(realpath -m "${3:-$(mktemp -d)}")
cd "$(dirname "$0")/.."
mkdir -p "$out"
shared=${NEARDUP_SHARED:-../shared}
if [ ! -d "$shared/corpus" ] || [ ! -f "$shared/devpairs/docs.jsonl" ]; then
  echo "dedup_identity: skipped: $shared/corpus and $shared/devpairs not found (set NEARDUP_SHARED)"
  exit 0
fi
inputs=("$shared"/corpus/*.jsonl "$shared"/devpairs/docs.jsonl)
# "" is the default rule: it differs between two binaries on either side of a change of the
# defaults (the `edited` reason on since 2026-11-27); "--edited 0" and "--edited 0.8" compare the
# two rules as such.
flag_sets=(
  ""
  "--edited 0"
  "--candidates lsh+simhash"
  "--threshold 0.7"
  "--keep longest --verify 0.3"
  "--bits 128 --candidates simhash -k 6"
  "--candidates lsh+simhash --bucket-window 8 --in-memory"
  "--threshold 0.4"
  "--no-boilerplate --containment 0"
  "--boilerplate --tokenizer char --ngram 3"
  "--edited 0.8"
  "--edited 0.7 --edited-min-jaccard 0.4 --candidates lsh+simhash --in-memory"
)
failed=0
for i in "${!flag_sets[@]}"; do
  flags=${flag_sets[$i]}
  for side in old new; do
    binary=$old
    [ "$side" = new ] && binary=$new
    rm -rf "${out:?}/$side$i"
    # shellcheck disable=SC2086
    "$binary" dedup "${inputs[@]}" $flags -j 2 -o "$out/$side$i" >/dev/null 2>"$out/$side$i.err" ||
      echo "set $i ($flags): $side exited $?"
    grep -v "^neardup: dedup: .* s (+" "$out/$side$i.err" >"$out/$side$i.warnings"
  done
  same=1
  for file in clusters.jsonl keep.txt remove.txt; do
    cmp -s "$out/old$i/$file" "$out/new$i/$file" || { same=0; echo "set $i ($flags): $file DIFFERS"; }
  done
  cmp -s "$out/old$i.warnings" "$out/new$i.warnings" || { same=0; echo "set $i ($flags): warnings DIFFER"; }
  if ((same)); then
    echo "set $i (${flags:-defaults}): identical ($(wc -l <"$out/new$i/clusters.jsonl") clusters, $(wc -l <"$out/new$i/remove.txt") removed)"
  else
    failed=1
  fi
done
echo "outputs in $out"
exit $failed
