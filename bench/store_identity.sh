#!/usr/bin/env bash
# Evidence of no change for the store's files: two binaries (a build before a change and one
# after) each fill a store from the same inputs (create, add devpairs, remove two ids, add a
# corpus file, compact) under several rules and widths, and the stores' files (MANIFEST, log,
# segments) are compared byte for byte. Then each binary runs `neardup index recover` on the same
# damaged copies of one segment (4 bytes overwritten at several places) and the reports, exit
# codes and resulting files are compared.
# Usage: bench/store_identity.sh OLD_NEARDUP NEW_NEARDUP [WORK_DIR]   (exit 1 if anything differs)
set -uo pipefail
old=$(realpath "$1")
new=$(realpath "$2")
work=$(realpath -m "${3:-$(mktemp -d)}")
cd "$(dirname "$0")/.." || exit 1
shared=$(realpath -m "${NEARDUP_SHARED:-../shared}")
if [ ! -d "$shared/corpus" ] || [ ! -f "$shared/devpairs/docs.jsonl" ]; then
  echo "store_identity: skipped: $shared/corpus and $shared/devpairs not found (set NEARDUP_SHARED)"
  exit 0
fi
corpus_file=$(find "$shared/corpus" -name '*.jsonl' | sort | head -1)
mkdir -p "$work"
failed=0

# fill BINARY DIR RULE-FLAGS...: the store every variant builds.
fill() {
  local binary=$1 dir=$2
  shift 2
  rm -rf "$dir"
  "$binary" index create "$dir" "$@" >/dev/null 2>&1 || echo "index create $* failed ($binary)"
  "$binary" index add "$dir" "$shared/devpairs/docs.jsonl" -j 2 >/dev/null 2>&1 ||
    echo "index add failed ($binary)"
  "$binary" index remove "$dir" devpairs/zh/excerpt/0001 devpairs/zh/excerpt/0003 >/dev/null 2>&1 ||
    echo "index remove failed ($binary)"
  "$binary" index add "$dir" "$corpus_file" -j 2 >/dev/null 2>&1 || echo "index add failed ($binary)"
  "$binary" index compact "$dir" >/dev/null 2>&1 || echo "index compact failed ($binary)"
}

# digest DIR: md5 of each store file but the lock.
digest() { (cd "$1" && find . -type f ! -name LOCK | sort | xargs md5sum); }

# "--rule dedup" alone is the default rule: it differs between two binaries on either side of a
# change of the defaults (the `edited` reason on since 2026-11-27); the explicit --edited variants
# compare the two rules as such.
variants=("--rule dedup" "--rule dedup --edited 0" "--rule dedup --edited 0.8" "--rule simhash"
  "--rule simhash --bits 128" "--rule dedup --bits 128")
for i in "${!variants[@]}"; do
  # shellcheck disable=SC2086
  fill "$old" "$work/old" ${variants[$i]}
  # shellcheck disable=SC2086
  fill "$new" "$work/new" ${variants[$i]}
  if [ "$(digest "$work/old")" = "$(digest "$work/new")" ]; then
    echo "store ${variants[$i]}: identical ($(digest "$work/new" | wc -l) files)"
  else
    echo "store ${variants[$i]}: DIFFERS"
    failed=1
  fi
done

# recover SIDE BINARY BASE AT: recover a copy of BASE whose segment has 4 bytes overwritten at AT.
recover() {
  local side=$1 binary=$2 base=$3 at=$4 dir="$work/rec_$1" segment
  rm -rf "$dir"
  cp -r "$base" "$dir"
  segment=$(find "$dir" -name '*.ndseg' | head -1)
  printf '\xff\xfe\xfd\xfc' | dd of="$segment" bs=1 seek="$at" conv=notrunc 2>/dev/null
  "$binary" index recover "$dir" >"$work/rec_$side.out" 2>&1
  echo "exit $?" >>"$work/rec_$side.out"
  sed -i "s#$dir#DIR#g" "$work/rec_$side.out"
  digest "$dir" >>"$work/rec_$side.out"
}

for rule in dedup simhash; do
  fill "$old" "$work/base" --rule "$rule"
  segment=$(find "$work/base" -name '*.ndseg' | head -1)
  size=$(stat -c %s "$segment")
  for at in 200 $((size / 10)) $((size / 3)) $((size / 2)) $((size * 9 / 10)) $((size - 30)); do
    recover old "$old" "$work/base" "$at"
    recover new "$new" "$work/base" "$at"
    if cmp -s "$work/rec_old.out" "$work/rec_new.out"; then
      echo "recover --rule $rule, damage at byte $at of $size: identical"
    else
      echo "recover --rule $rule, damage at byte $at of $size: DIFFERS (see $work/rec_*.out)"
      failed=1
    fi
  done
done
rm -rf "$work/old" "$work/new" "$work/base" "$work/rec_old" "$work/rec_new"
exit $failed
