#!/usr/bin/env bash
# Evidence of no change for the text pipeline: runs `neardup fingerprint` of two binaries (a build
# before a change and one after) over ../shared's corpus + devpairs under several option sets
# (64 and 128 bits, word and character features, keywords, --explain's feature lists, no NFKC /
# case folding) and compares the outputs' md5 sums.
# Usage: bench/fingerprint_identity.sh OLD_NEARDUP NEW_NEARDUP   (exit 1 if any output differs)
set -uo pipefail
old=$(realpath "$1")
new=$(realpath "$2")
cd "$(dirname "$0")/.." || exit 1
shared=${NEARDUP_SHARED:-../shared}
if [ ! -d "$shared/corpus" ] || [ ! -f "$shared/devpairs/docs.jsonl" ]; then
  echo "fingerprint_identity: skipped: $shared/corpus and $shared/devpairs not found (set NEARDUP_SHARED)"
  exit 0
fi
inputs=("$shared"/corpus/*.jsonl "$shared"/devpairs/docs.jsonl)
option_sets=(
  ""
  "--bits 128"
  "--tokenizer char"
  "--bits 128 --tokenizer char --ngram 3"
  "--tokenizer icu --shingle 1"
  "--top-k 20"
  "--explain --explain-features 100000"
  "--explain --explain-features 100000 --tokenizer char --no-nfkc"
  "--explain --explain-features 100000 --no-casefold --no-t2s --no-whitespace-folding"
  "--keep-markup --replace-invalid-utf8"
)
failed=0
for i in "${!option_sets[@]}"; do
  options=${option_sets[$i]}
  # shellcheck disable=SC2086
  sum_old=$("$old" fingerprint "${inputs[@]}" $options -j 2 2>/dev/null | md5sum | cut -c1-32)
  # shellcheck disable=SC2086
  sum_new=$("$new" fingerprint "${inputs[@]}" $options -j 2 2>/dev/null | md5sum | cut -c1-32)
  if [ "$sum_old" = "$sum_new" ]; then
    echo "set $i (${options:-defaults}): identical md5 $sum_new"
  else
    echo "set $i (${options:-defaults}): DIFFERS old $sum_old new $sum_new"
    failed=1
  fi
done
exit $failed
