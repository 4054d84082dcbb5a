#!/usr/bin/env bash
# Connection-scale benchmark of `neardup serve`: IDLE keep-alive connections (default 10,000) held
# open while CONCURRENT clients (default 1,000, 20 requests each: 80% fingerprint queries, 20%
# adds) hammer the server, and /healthz latency is sampled meanwhile on its own keep-alive
# connection. It runs the adversarial test's connection case at full scale (CI runs it with 1,000
# idle and 200 concurrent) and prints its figures: requests ok/failed, /healthz p50/p99/max, how
# many idle connections still answer afterwards, and the server's RSS before and with the idle
# connections. Client and server share the machine, so the client's own threads weigh on the
# latency figures; say so when quoting them.
#
# Usage: bench/serve_connections.sh [IDLE] [CONCURRENT]
#   TEST_BIN   the test binary (default: build/server_adversarial_test)
# Needs an open-file limit (hard) above IDLE + CONCURRENT + 100 for both processes.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${TEST_BIN:-$ROOT/build/server_adversarial_test}
[[ -x "$BIN" ]] || { echo "test binary not found at $BIN (cmake --build build --target server_adversarial_test)" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)"
echo "== neardup serve connections: ${1:-10000} idle keep-alive, ${2:-1000} concurrent clients, $(nproc) cores, open-file limit $(ulimit -n)"
NEARDUP_IDLE_CONNECTIONS=${1:-10000} NEARDUP_CONCURRENT_CLIENTS=${2:-1000} \
  "$BIN" --gtest_filter='*IdleKeepAliveConnectionsCostASocketNotAWorker*' | grep -E "idle keep-alive|OK|FAILED|Failure|SKIPPED"
