-- wrk script: mixed reads and writes. 90% GET /v1/query by fingerprint (as query_fingerprint.lua),
-- 10% POST /v1/check adding a fresh random 64-bit fingerprint.
local fingerprints = {}
for line in io.lines(os.getenv("NEARDUP_BENCH_QUERIES")) do fingerprints[#fingerprints + 1] = line end
local flip = { ["0"]="1", ["1"]="0", ["2"]="3", ["3"]="2", ["4"]="5", ["5"]="4", ["6"]="7",
  ["7"]="6", ["8"]="9", ["9"]="8", a="b", b="a", c="d", d="c", e="f", f="e" }
local counter = 0
local thread_count = 0
function setup(thread)
  thread_count = thread_count + 1
  thread:set("tag", thread_count)
end
function init(args)
  thread_tag = tostring(tag or 0)
  math.randomseed(os.time() + (tag or 0))
end

request = function()
  counter = counter + 1
  if math.random(10) == 1 then
    local fp = string.format("%08x%08x", math.random(0, 2147483647) * 2, math.random(0, 2147483647))
    local body = '{"id":"mixed-' .. thread_tag .. '-' .. counter .. '","fingerprint":"' .. fp .. '"}'
    return wrk.format("POST", "/v1/check", { ["Content-Type"] = "application/json" }, body)
  end
  local fp = fingerprints[math.random(#fingerprints)]
  fp = fp:sub(1, 15) .. flip[fp:sub(16, 16)]
  return wrk.format("GET", "/v1/query?k=3&fingerprint=" .. fp)
end
