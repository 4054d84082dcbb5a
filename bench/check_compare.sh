#!/usr/bin/env bash
# Same-run comparison of two `neardup serve` builds on their own stores (e.g. the previous build
# on a simhash-rule store and this one on a dedup-rule store holding the same documents): rounds
# of A then B, each serving fingerprint queries (k = 3, bench/query_fingerprint.lua) and text
# check-and-add (bench/check_text.lua) under wrk; prints every run, with the server's CPU time
# per request (user + system, from /proc: what a request costs whatever the machine's load), and
# the B/A ratios of the medians, so the figures hold on a machine whose speed drifts.
#
# Usage: bench/check_compare.sh A_BIN A_STORE B_BIN B_STORE [ROUNDS] [SECONDS]
#   NEARDUP_BENCH_QUERIES (hex fingerprints, one a line) and NEARDUP_BENCH_TEXTS (JSON-escaped
#   texts, one a line) as for bench/serve_load.sh; CONNECTIONS (16), WRK_THREADS (2)
set -euo pipefail
A_BIN=$1 A_STORE=$2 B_BIN=$3 B_STORE=$4
ROUNDS=${5:-3}
SECONDS_EACH=${6:-10}
HERE=$(cd "$(dirname "$0")" && pwd)
CONNECTIONS=${CONNECTIONS:-16}
WRK_THREADS=${WRK_THREADS:-2}
: "${NEARDUP_BENCH_QUERIES:?set NEARDUP_BENCH_QUERIES}" "${NEARDUP_BENCH_TEXTS:?set NEARDUP_BENCH_TEXTS}"
SERVER_PID=
trap '[[ -n "$SERVER_PID" ]] && kill -TERM "$SERVER_PID" 2>/dev/null; wait 2>/dev/null || true' EXIT
results=$(mktemp)
serve_and_measure() {  # label bin store
  local label=$1 bin=$2 store=$3 port=$((20000 + RANDOM % 20000))
  "$bin" serve "$store" --port "$port" >/dev/null 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  cpu() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }
  for script in query_fingerprint check_text; do
    local before after requests
    before=$(cpu)
    out=$(wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${SECONDS_EACH}s" --latency -s "$HERE/$script.lua" "http://127.0.0.1:$port")
    after=$(cpu)
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    requests=$(echo "$out" | awk '/requests in/ {print $1}')
    p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
    errors=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
    us=$(echo "scale=1; ($after - $before) * 1000000 / $(getconf CLK_TCK) / $requests" | bc)
    printf "%s %-18s %10s req/s  p99 %9s  server CPU %7s us a request  non-2xx %s  (load %s)\n" "$label" "$script" "$rps" "$p99" "$us" "${errors:-0}" "$(cut -d' ' -f1 /proc/loadavg)"
    echo "$label $script $rps $us" >> "$results"
  done
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID" || true
  SERVER_PID=
}
for round in $(seq 1 "$ROUNDS"); do
  serve_and_measure A "$A_BIN" "$A_STORE"
  serve_and_measure B "$B_BIN" "$B_STORE"
done
for script in query_fingerprint check_text; do
  a=$(awk -v s=$script '$1 == "A" && $2 == s {print $3}' "$results" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  b=$(awk -v s=$script '$1 == "B" && $2 == s {print $3}' "$results" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  ca=$(awk -v s=$script '$1 == "A" && $2 == s {print $4}' "$results" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  cb=$(awk -v s=$script '$1 == "B" && $2 == s {print $4}' "$results" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  echo "$script: median A $a, B $b req/s: B/A $(echo "scale=3; $b / $a" | bc); server CPU a request A $ca us, B $cb us: B/A $(echo "scale=3; $cb / $ca" | bc)"
done
rm -f "$results"
