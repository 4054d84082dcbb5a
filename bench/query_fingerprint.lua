-- wrk script: GET /v1/query by fingerprint. Each request takes a stored fingerprint (from
-- $NEARDUP_BENCH_QUERIES, one hex fingerprint per line) with its lowest bit flipped, so every
-- query has a near-duplicate at distance 1 (k = 3).
local fingerprints = {}
local path = os.getenv("NEARDUP_BENCH_QUERIES")
for line in io.lines(path) do fingerprints[#fingerprints + 1] = line end
local flip = { ["0"]="1", ["1"]="0", ["2"]="3", ["3"]="2", ["4"]="5", ["5"]="4", ["6"]="7",
  ["7"]="6", ["8"]="9", ["9"]="8", a="b", b="a", c="d", d="c", e="f", f="e" }

request = function()
  local fp = fingerprints[math.random(#fingerprints)]
  fp = fp:sub(1, 15) .. flip[fp:sub(16, 16)]
  return wrk.format("GET", "/v1/query?k=3&fingerprint=" .. fp)
end
