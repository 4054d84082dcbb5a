#!/bin/sh
# One bulk load into a fresh store, for timing a whole `index add` (e.g. under farm-bench --vs):
#   bench/index_add_once.sh BIN STORE INPUT [index add flags...]
# removes STORE, runs `BIN index create STORE`, then `BIN index add STORE INPUT --sync none FLAGS`
# (output discarded). STORE is left behind for inspection; delete it when done.
set -e
[ $# -ge 3 ] || { echo "usage: $0 BIN STORE INPUT [flags...]" >&2; exit 2; }
bin=$1 store=$2 input=$3
shift 3
rm -rf "$store"
"$bin" index create "$store" 2>/dev/null
exec "$bin" index add "$store" "$input" --sync none "$@" >/dev/null 2>&1
