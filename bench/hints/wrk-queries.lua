-- wrk script: GET the queries of a query file (one a line, e.g. the FILE.txt
-- that `quality.py querylog` writes) in a shuffled order (fixed seed, one
-- permutation per wrk thread), cycling, so that any stretch of a run is a
-- fair sample of the whole log. Settings come from the environment:
--   QUERIES=/path/log.txt  PATH_FMT='/search/?q=%s&limit=5'   (Addok)
--                          PATH_FMT='/hints/address?q=%s&count=5' (edge, default)
--   wrk -t2 -c16 -d20s --latency -s bench/hints/wrk-queries.lua http://127.0.0.1:7878
local queries, n, i = {}, 0, 0
local fmt = os.getenv("PATH_FMT") or "/hints/address?q=%s&count=5"
local counter = 0

local function urlencode(s)
  return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end

function init(args)
  local path = os.getenv("QUERIES") or error("set QUERIES to a query file")
  for line in io.lines(path) do
    if #line > 0 then
      n = n + 1
      queries[n] = string.format(fmt, urlencode(line))
    end
  end
  math.randomseed(42 + (id or 0))
  for j = n, 2, -1 do
    local k = math.random(j)
    queries[j], queries[k] = queries[k], queries[j]
  end
  i = 0
end

function request()
  i = i % n + 1
  return wrk.format("GET", queries[i])
end
