#!/usr/bin/env bash
# Benchmark of a dedup-rule store at scale (issue 19; a benchmark, not a test): bulk-loads a JSONL
# corpus (10M documents of bench/generate_distractors.py for the figures in docs/scale.md) with
# `neardup index add`, and reports
#   * the bulk-load time (wall, CPU, peak RSS) and, on the first 200,000 documents, `neardup dedup`
#     on the same documents back to back (the per-document speed the bulk load is held to);
#   * disk per document, by section of the segment files, and the distribution of a document's
#     shingle set (scripts of the sketch section read by bench/store_sections.py);
#   * the reopen time (checksums verified, and --no-verify);
#   * the server's RAM per document: RssAnon (heap: memtable, directories read into memory, ...)
#     and RssFile (mapped segment pages touched) after the load runs, divided by the documents;
#   * under wrk on this machine (client and server on the same cores): text check-and-add
#     (POST /v1/check, the dedup rule; texts of ../shared/corpus with a random word appended, so
#     most are near-duplicates of earlier checks after a while; and bench/check_new_text.lua, new
#     documents only, each added through the log sync) and fingerprint queries (GET /v1/query,
#     k = 3, and the batch form, 100 fingerprints a POST), with p50 and p99;
#   * fingerprint queries in process (bench/store_query_bench.cc: the library without HTTP);
#   * the fingerprint + sketch pass alone on one thread (DocumentSketcher over the same texts):
#     the bound of the text checks, so the check throughput can be read against it.
#
# Usage: bench/store_dedup_bench.sh CORPUS.jsonl [DURATION_SECONDS]
#   CORPUS may be zstd-compressed (neardup reads it directly). NEARDUP_BIN (default
#   build/neardup), CONNECTIONS (16), WRK_THREADS (2), KEEP_DIR=1, COMPACT=1 (merge all segments
#   after the load), WORK (a directory with room for the store: about 1.3 KB a document),
#   HEAD_N (200000: the documents of the index add / dedup comparison), RUNS (2: its repetitions),
#   LOADED_STORE=DIR (measure a store already loaded, e.g. by an earlier bulk load that was
#   stopped: no comparison and no load; DIR is left in place; CORPUS still gives the queries)
set -euo pipefail
CORPUS=${1:?usage: store_dedup_bench.sh CORPUS.jsonl [DURATION_SECONDS]}
DURATION=${2:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BIN=${NEARDUP_BIN:-$ROOT/build/neardup}
SHARED=${NEARDUP_SHARED:-$ROOT/../shared}
CONNECTIONS=${CONNECTIONS:-16}
WRK_THREADS=${WRK_THREADS:-2}
PORT=${PORT:-$((20000 + RANDOM % 20000))}
WORK=${WORK:-$(mktemp -d /tmp/neardup_store_bench.XXXXXX)}
mkdir -p "$WORK"
STORE=${LOADED_STORE:-$WORK/store}
SERVER_PID=
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  if [[ "${KEEP_DIR:-0}" != 1 ]]; then
    [[ -n "${LOADED_STORE:-}" ]] || rm -rf "$STORE"
    rm -rf "$WORK"/texts.txt "$WORK"/queries.txt "$WORK"/head.jsonl "$WORK"/dedup_out
  fi
}
trap cleanup EXIT
[[ -x "$BIN" ]] || { echo "neardup binary not found at $BIN (set NEARDUP_BIN)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is not installed" >&2; exit 1; }
[[ -d "$SHARED/corpus" ]] || { echo "store_dedup_bench: $SHARED/corpus not found: skipped (needs ../shared)"; exit 0; }
# Plain or .zst (zstd -f passes a plain file through); `head` closing the pipe early is no error.
cat_corpus() { zstd -dcf "$CORPUS" 2>/dev/null || true; }
HEAD_N=${HEAD_N:-200000}
RUNS=${RUNS:-2}
echo "== dedup-rule store benchmark: $CORPUS, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# Texts for the checks (one JSON-escaped text a line) and fingerprints for the queries.
/usr/bin/python3 - "$SHARED/corpus" "$WORK/texts.txt" <<'PY'
import glob, json, os, sys
texts = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "en_*.jsonl")))[:3]:
    with open(path) as f:
        for line in f:
            texts.append(json.dumps(json.loads(line)["text"][:2000])[1:-1])
with open(sys.argv[2], "w") as out:
    out.write("\n".join(texts[:5000]) + "\n")
PY
cat_corpus | head -n 10000 | "$BIN" fingerprint - 2>/dev/null | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin: print(json.loads(line)["fingerprint"])' > "$WORK/queries.txt"
export NEARDUP_BENCH_QUERIES=$WORK/queries.txt NEARDUP_BENCH_TEXTS=$WORK/texts.txt

if [[ -n "${LOADED_STORE:-}" ]]; then
  N=$("$BIN" index stats "$STORE" --no-verify | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["documents"])')
  echo "loaded store $STORE: $N documents (no load measured here)"
  cat_corpus | head -n 2000 > "$WORK/head.jsonl"
else
# The per-document speed of the bulk load against dedup's, same documents, back to back.
cat_corpus | head -n "$HEAD_N" > "$WORK/head.jsonl"
HEAD_DOCS=$(wc -l < "$WORK/head.jsonl")
for run in $(seq 1 "$RUNS"); do
  rm -rf "$STORE" "$WORK/dedup_out"
  "$BIN" index create "$STORE" 2>/dev/null
  a=$( { /usr/bin/time -f "%e %U %S %M" "$BIN" index add "$STORE" "$WORK/head.jsonl" --sync none 2>&1 >/dev/null; } | tail -1)
  b=$( { /usr/bin/time -f "%e %U %S %M" "$BIN" dedup "$WORK/head.jsonl" -o "$WORK/dedup_out" -q 2>&1 >/dev/null; } | tail -1)
  echo "$HEAD_DOCS documents, run $run: index add wall/user/sys/peakKB $a | dedup $b"
  echo "$a $b" | awk '{printf "   CPU ratio index add / dedup: %.2f\n", ($2 + $3) / ($6 + $7)}'
done

# The bulk load of everything (the size-tiered background compaction keeps the segments few;
# COMPACT=1 adds the final merge of all, which needs room for a second copy of the store).
rm -rf "$STORE"
"$BIN" index create "$STORE" 2>/dev/null
compact_flag=--no-compact
[[ "${COMPACT:-0}" == 1 ]] && compact_flag=
load_log=$( { /usr/bin/time -f "%e %U %S %M" "$BIN" index add "$STORE" "$CORPUS" --sync none $compact_flag 2>&1 >/dev/null; } | tail -2)
load=$(echo "$load_log" | tail -1)
# The documents loaded, as index add reports them ("added 10,000,000 documents to ...").
N=$(echo "$load_log" | head -1 | sed -n 's/.*added \([0-9,]*\) document.*/\1/p' | tr -d ,)
[[ -n "$N" && "$N" -gt 0 ]] || { echo "index add loaded nothing: $load_log" >&2; exit 1; }
echo "bulk load: $N documents: wall/user/sys s, peak KB: $load"
echo "$load" | awk -v n="$N" '{printf "   %.0f documents/s wall, %.1f us CPU a document\n", n / $1, 1e6 * ($2 + $3) / n}'
fi
bytes=$(du -sb "$STORE" | cut -f1)
echo "store on disk: $bytes bytes = $(echo "$bytes / $N" | bc) bytes a document"
/usr/bin/python3 "$HERE/store_sections.py" "$STORE"
for flag in "" "--no-verify"; do
  for i in 1 2 3; do "$BIN" index stats "$STORE" $flag; done | tail -1 |
    /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin); print("reopen '"${flag:-verified}"': %.3f s (%d documents, %d segments)" % (s["open_seconds"], s["documents"], s["segments"]))'
done

"$BIN" serve "$STORE" --port "$PORT" > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
head -1 "$WORK/server.log"
rss() {
  awk -v n="$N" '/^RssAnon|^RssFile/ {printf "   %s %.0f MB = %.1f bytes a document\n", $1, $2 / 1024, $2 * 1024 / n}' "/proc/$SERVER_PID/status"
}
run() {  # name, wrk args...
  local name=$1; shift
  local out rps p50 p99 errors
  out=$(wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "$@")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1 == "50%" {print $2}')
  p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
  errors=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  printf "%-28s %12s req/s   p50 %9s   p99 %9s   non-2xx %s\n" "$name" "$rps" "$p50" "$p99" "${errors:-0}"
}
URL=http://127.0.0.1:$PORT
echo "server memory after opening:"; rss
run healthz_baseline "$URL/healthz"
run query_fingerprint_k3 -s "$HERE/query_fingerprint.lua" "$URL"
# The batch form of the same queries, 100 fingerprints a request (POST /v1/query "fingerprints").
NEARDUP_BENCH_BATCH=100 wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency \
  -s "$HERE/query_fingerprint_batch.lua" "$URL" |
  awk '/fingerprint queries\/s/ {q = $3} $1 == "99%" {p = $2}
       END {printf "%-28s %12s queries/s (100 a request), request p99 %s\n", "query_fingerprint_batch100", q, p}'
run check_and_add_text -s "$HERE/check_text.lua" "$URL"
# Checks of documents new to the store: each one added, through the commit queue and its log sync.
run check_new_text -s "$HERE/check_new_text.lua" "$URL"
echo "server memory after the runs:"; rss
curl -s "$URL/v1/stats"; echo
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" && echo "server exited 0 after SIGTERM"
SERVER_PID=

# Fingerprint queries in process (DocumentStore::Search, no HTTP), one thread and all cores.
"$(dirname "$BIN")/store_query_bench" "$STORE" "$WORK/queries.txt" --seconds 5 ||
  echo "library queries: store_query_bench missing beside $BIN (cmake --build build --target store_query_bench)"

# The text pass alone, on one thread: fingerprint, then fingerprint + sketch, of the check texts
# (the same texts as check_and_add_text) and of the corpus's first documents.
"$(dirname "$BIN")/sketch_bench" "$SHARED/corpus/en_kjv.jsonl" "$WORK/head.jsonl" ||
  echo "sketch pass: sketch_bench missing beside $BIN (cmake --build build --target sketch_bench)"
