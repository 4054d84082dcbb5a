#!/usr/bin/env bash
# Lists the functions of src/, include/ and python/src/ that are at least MIN_LINES long (default
# 100), longest first: "lines<TAB>file:line<TAB>name", from Universal Ctags' start and end lines
# (Debian package universal-ctags).
# Usage: scripts/long_functions.sh [MIN_LINES]
set -euo pipefail
min=${1:-100}
cd "$(dirname "$0")/.."
if ! ctags --version 2>/dev/null | grep -q "Universal Ctags"; then
  echo "long_functions: needs Universal Ctags (apt-get install universal-ctags)" >&2
  exit 2
fi
ctags -R --languages=C++ --kinds-C++=f --fields=+ne --extras=+q -o - --output-format=u-ctags \
  src include python/src 2>/dev/null |
  awk -F'\t' -v min="$min" '{
    line = ""; end = ""
    for (i = 4; i <= NF; i++) {
      if ($i ~ /^line:/) line = substr($i, 6)
      if ($i ~ /^end:/) end = substr($i, 5)
    }
    if (line != "" && end != "" && end - line + 1 >= min) print end - line + 1 "\t" $2 ":" line "\t" $1
  }' | sort -u -t$'\t' -k2,2 | sort -rn
