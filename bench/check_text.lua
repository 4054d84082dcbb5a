-- wrk script: POST /v1/check (check-and-add by text). Texts come from $NEARDUP_BENCH_TEXTS (one
-- JSON-escaped text per line); a random word is appended so some requests are new documents and
-- some are near-duplicates of earlier ones. Ids are unique per request.
local texts = {}
for line in io.lines(os.getenv("NEARDUP_BENCH_TEXTS")) do texts[#texts + 1] = line end
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
  local text = texts[math.random(#texts)] .. " w" .. math.random(1, 50)
  local body = '{"id":"bench-' .. thread_tag .. '-' .. counter .. '","text":"' .. text .. '","k":3}'
  return wrk.format("POST", "/v1/check", { ["Content-Type"] = "application/json" }, body)
end
