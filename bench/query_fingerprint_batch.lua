-- wrk script: POST /v1/query with a batch of fingerprints ({"fingerprints": [...], "k": 3}). Each
-- is a stored fingerprint (from $NEARDUP_BENCH_QUERIES, one hex fingerprint per line) with its
-- lowest bit flipped, so every query has a near-duplicate at distance 1, as in
-- query_fingerprint.lua. $NEARDUP_BENCH_BATCH fingerprints per request (default 100); the
-- summary prints the fingerprint queries per second (requests/s x batch).
local fingerprints = {}
local path = os.getenv("NEARDUP_BENCH_QUERIES")
for line in io.lines(path) do fingerprints[#fingerprints + 1] = line end
local batch = tonumber(os.getenv("NEARDUP_BENCH_BATCH") or "100")
local flip = { ["0"]="1", ["1"]="0", ["2"]="3", ["3"]="2", ["4"]="5", ["5"]="4", ["6"]="7",
  ["7"]="6", ["8"]="9", ["9"]="8", a="b", b="a", c="d", d="c", e="f", f="e" }

request = function()
  local parts = {}
  for i = 1, batch do
    local fp = fingerprints[math.random(#fingerprints)]
    parts[i] = '"' .. fp:sub(1, 15) .. flip[fp:sub(16, 16)] .. '"'
  end
  local body = '{"k":3,"fingerprints":[' .. table.concat(parts, ",") .. ']}'
  return wrk.format("POST", "/v1/query", {["Content-Type"] = "application/json"}, body)
end

done = function(summary, latency, requests)
  local seconds = summary.duration / 1e6
  io.write(string.format("fingerprint queries/s: %.0f (%d per request, %d requests, %d errors)\n",
    summary.requests * batch / seconds, batch, summary.requests,
    summary.errors.status + summary.errors.connect + summary.errors.read +
    summary.errors.write + summary.errors.timeout))
end
