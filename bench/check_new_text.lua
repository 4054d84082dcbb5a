-- wrk script: POST /v1/check (check-and-add by text) of documents that are new to the store: each
-- body joins two random 40-word pieces of two random texts of $NEARDUP_BENCH_TEXTS (one
-- JSON-escaped text per line), so almost every check goes through the store's commit queue and its
-- log sync (bench/check_text.lua mostly sends near-duplicates, answered without a write).
local words = {}
for line in io.lines(os.getenv("NEARDUP_BENCH_TEXTS")) do
  local t = {}
  for w in line:gmatch("%S+") do t[#t + 1] = w end
  if #t >= 40 then words[#words + 1] = t end
end
local counter = 0
local thread_count = 0
function setup(thread)
  thread_count = thread_count + 1
  thread:set("tag", thread_count)
end
function init(args)
  thread_tag = tostring(tag or 0)
  math.randomseed(os.time() * 7 + (tag or 0))
end

local function piece()
  local t = words[math.random(#words)]
  local from = math.random(#t - 39)
  return table.concat(t, " ", from, from + 39)
end

request = function()
  counter = counter + 1
  local text = piece() .. " " .. piece()
  local body = '{"id":"new-' .. thread_tag .. '-' .. counter .. '","text":"' .. text .. '"}'
  return wrk.format("POST", "/v1/check", { ["Content-Type"] = "application/json" }, body)
end
