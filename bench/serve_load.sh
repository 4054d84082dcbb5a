#!/usr/bin/env bash
# Load benchmark of `neardup serve`: bulk-loads N random 64-bit fingerprints (default 1,000,000)
# with `neardup index add`, measures the store's open time, starts the server on loopback and
# drives it with wrk: fingerprint queries, text check-and-add, and a 90/10 read/write mix.
# A /healthz run in the same session is the HTTP baseline the other figures are compared with.
#
# Usage: bench/serve_load.sh [N] [DURATION_SECONDS]
#   NEARDUP_BIN      the neardup binary   (default: build/neardup)
#   SERVER_THREADS   the server's --poll-threads (default 16; connections are multiplexed over
#                    them, text and writes run on --workers)
#   CONNECTIONS      wrk connections      (default 16)
#   WRK_THREADS      wrk threads          (default 2)
#   KEEP_DIR=1       keep the store directory
set -euo pipefail
N=${1:-1000000}
DURATION=${2:-10}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BIN=${NEARDUP_BIN:-$ROOT/build/neardup}
SERVER_THREADS=${SERVER_THREADS:-16}
CONNECTIONS=${CONNECTIONS:-16}
WRK_THREADS=${WRK_THREADS:-2}
PORT=${PORT:-$((20000 + RANDOM % 20000))}
WORK=$(mktemp -d /tmp/neardup_serve_load.XXXXXX)
STORE=$WORK/store
SERVER_PID=
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  if [[ "${KEEP_DIR:-0}" != 1 ]]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
[[ -x "$BIN" ]] || { echo "neardup binary not found at $BIN (set NEARDUP_BIN)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is not installed" >&2; exit 1; }

echo "== neardup serve load benchmark: N=$N, ${DURATION}s per run, $(nproc) cores, server threads $SERVER_THREADS, wrk -t$WRK_THREADS -c$CONNECTIONS"

# Documents: random fingerprints (fixed seed), ids like URLs, small metadata. 10,000 of the
# fingerprints become the query set; texts for check-and-add come from the shared corpus (that run
# is skipped, with a message, when ../shared is missing; everything else needs nothing from it).
/usr/bin/python3 - "$N" "$WORK" "$ROOT/../shared/corpus" <<'PY'
import json, os, random, sys, glob
n, work, corpus = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rng = random.Random(12345)
sample = set(rng.sample(range(n), min(n, 10000)))
with open(os.path.join(work, "docs.jsonl"), "w") as out, open(os.path.join(work, "queries.txt"), "w") as q:
    buf = []
    for i in range(n):
        fp = "%016x" % rng.getrandbits(64)
        buf.append('{"id":"https://bench.example/page/%d","fingerprint":"%s","metadata":{"n":%d}}\n' % (i, fp, i))
        if i in sample:
            q.write(fp + "\n")
        if len(buf) >= 100000:
            out.write("".join(buf)); buf = []
    out.write("".join(buf))
texts = []
for path in sorted(glob.glob(os.path.join(corpus, "en_*.jsonl")))[:3]:
    with open(path) as f:
        for line in f:
            text = json.loads(line)["text"][:600]
            texts.append(json.dumps(text)[1:-1])
            if len(texts) % 1000 == 0:
                break
if texts:  # without the corpus the check-and-add run is skipped
    with open(os.path.join(work, "texts.txt"), "w") as t:
        t.write("\n".join(texts) + "\n")
PY
export NEARDUP_BENCH_QUERIES=$WORK/queries.txt NEARDUP_BENCH_TEXTS=$WORK/texts.txt

"$BIN" index create "$STORE" --rule simhash  # bare fingerprints
t0=$(date +%s.%N)
"$BIN" index add "$STORE" "$WORK/docs.jsonl" --sync none
t1=$(date +%s.%N)
echo "bulk load: $N documents in $(echo "$t1 - $t0" | bc) s (index add --sync none, then compaction)"
du -sh "$STORE" | awk '{print "store size: " $1}'
# Open time, measured by the library (cold: after dropping nothing; warm page cache).
for i in 1 2 3; do "$BIN" index stats "$STORE"; done | tail -1 | sed 's/^/stats (3rd open): /'

"$BIN" serve "$STORE" --port "$PORT" --poll-threads "$SERVER_THREADS" > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
head -1 "$WORK/server.log"

run() {  # name, wrk args...
  local name=$1; shift
  local out
  out=$(wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "$@")
  local rps p50 p99 errors
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1 == "50%" {print $2}')
  p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
  errors=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  printf "%-28s %12s req/s   p50 %9s   p99 %9s   non-2xx %s\n" "$name" "$rps" "$p50" "$p99" "${errors:-0}"
  eval "RPS_${name//[^a-zA-Z0-9]/_}=$rps"
}
URL=http://127.0.0.1:$PORT
run healthz_baseline "$URL/healthz"
run query_fingerprint_k3 -s "$HERE/query_fingerprint.lua" "$URL"
if [[ -s "$WORK/texts.txt" ]]; then
  run check_and_add_text -s "$HERE/check_text.lua" "$URL"
else
  echo "check_and_add_text: skipped: ../shared missing (no $ROOT/../shared/corpus/en_*.jsonl)"
fi
run mixed_90q_10w -s "$HERE/mixed.lua" "$URL"
echo "ratio query/healthz baseline: $(echo "scale=3; $RPS_query_fingerprint_k3 / $RPS_healthz_baseline" | bc)"
# A sanity check that queries really find their near-duplicate.
fp=$(head -1 "$WORK/queries.txt")
curl -s "$URL/v1/query?k=3&fingerprint=$fp" | head -c 300; echo
curl -s "$URL/v1/stats"; echo
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" && echo "server exited 0 after SIGTERM"
SERVER_PID=
