-- wrk script: dealers working in the clients table. Run with as many
-- threads as connections (`-t50 -c50`): each thread is one connection and
-- one dealer's browser (COOKIES: a file of `billing_session=...` lines,
-- one session per dealer login, the Nth thread the Nth; HOST: the app's
-- host). wrk shares a thread's script state among its connections, so
-- with more connections than threads a view's requests would go out
-- at once on different connections instead of one after another. A dealer opens a view
-- (a filter: none, a tariff, a month of registrations, a search as typed,
-- or a search and a tariff; and a sort) at page 1, then looks at page 2,
-- then sorts it another way: three GET /api/clients per view, the
-- requests the workspace sends. Searches are what dealers type: the first
-- 3 or more letters of a name, a company word or a kind, or a piece of a
-- phone number, so some come back (the app may remember their totals) and
-- many are new.
--
-- THINK_MS: a dealer's pause between requests, on average: each pause is
-- drawn between 2/3 and 4/3 of it, so the 50 dealers do not act in
-- lockstep (a fixed pause makes them send in bursts of 50). The workspace
-- sends a search 300 ms after the last key press, hence 300. 0 is the
-- closed loop (every connection sends its next request at once: the
-- app's capacity, not a dealer's pace).
--
-- done() prints the latency p50/p95/p99 in ms and the request rate.
local cookies = {}
local host = os.getenv("HOST")
local think = tonumber(os.getenv("THINK_MS") or "300")

local words = {
  -- first names, last names, company words and kinds of the demo data
  "anna", "boris", "clara", "dmitri", "elena", "farid", "greta", "hugo", "ines", "jonas",
  "katya", "lars", "marta", "nikolai", "olga", "pavel", "quinn", "rosa", "sergei", "tanya",
  "ulla", "viktor", "wanda", "xenia", "yuri", "zoe",
  "ivanova", "petrov", "schmidt", "novak", "larsen", "moreau", "rossi", "kowalski", "berg",
  "horvat", "silva", "young", "okafor", "tanaka", "nguyen", "smirnova", "keller", "dubois",
  "amber", "bright", "copper", "delta", "echo", "falcon", "granite", "harbor", "iris", "juniper",
  "kite", "lumen", "maple", "nova", "orbit", "pine", "quartz", "river", "summit", "tundra",
  "umbra", "vertex", "willow", "zenith",
  "studio", "labs", "logistics", "clinic", "bakery", "consulting", "media", "foods", "legal",
  "motors", "academy", "travel",
}
local sorts = { "name", "-name", "contact_name", "phone", "email", "registered_at", "-registered_at", "-tariff,name" }

local function url_encode(s)
  return (s:gsub("[^%w%-_%.~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

-- What a dealer types into the search box.
local function typed()
  if math.random() < 0.75 then
    local w = words[math.random(#words)]
    return w:sub(1, math.random(3, #w))
  end
  -- A piece of a phone number: a country code or a few digits.
  if math.random() < 0.5 then
    return "+" .. math.random(1, 49)
  end
  return tostring(math.random(100, 999)) .. "-" .. string.format("%02d", math.random(0, 99))
end

local function month()
  local y, m = math.random(2024, 2025), math.random(1, 12)
  local last = ({ 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 })[m]
  if m == 2 and y == 2024 then last = 29 end
  return string.format("registered_from=%d-%02d-01&registered_to=%d-%02d-%02d", y, m, y, m, last)
end

local function filter()
  local r = math.random()
  if r < 0.2 then return "" end
  if r < 0.35 then return "&tariff=" .. math.random(1, 4) end
  if r < 0.5 then return "&" .. month() end
  if r < 0.9 then return "&q=" .. url_encode(typed()) end
  return "&q=" .. url_encode(typed()) .. "&tariff=" .. math.random(1, 4)
end

-- The requests still to send of the current view (this thread's).
local queue = {}

local function open_view()
  local cookie = cookies[(browser - 1) % #cookies + 1]
  local f = filter()
  local s1, s2 = sorts[math.random(#sorts)], sorts[math.random(#sorts)]
  local base = "/api/clients?per_page=50" .. f
  queue = {
    { cookie, base .. "&sort=" .. s1 .. "&page=1" },
    { cookie, base .. "&sort=" .. s1 .. "&page=2" },
    { cookie, base .. "&sort=" .. s2 .. "&page=1" },
  }
end

-- Each thread its browser's number (1, 2, ...).
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("browser", threads)
end

function init(args)
  for line in io.lines(os.getenv("COOKIES")) do cookies[#cookies + 1] = line end
  -- Each thread (and each run) its own sequence.
  math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)"), 16) % 100000)
end

function request()
  if #queue == 0 then open_view() end
  local r = table.remove(queue, 1)
  return wrk.format("GET", r[2], { ["Host"] = host, ["Cookie"] = r[1] })
end

function delay()
  if think == 0 then return 0 end
  return math.random(math.floor(think * 2 / 3), math.floor(think * 4 / 3))
end

local bad = 0
function response(status, headers, body)
  if status ~= 200 then bad = bad + 1 end
end

function done(summary, latency, requests)
  io.write(string.format("RESULT requests=%d errors=%d non200=%d rps=%.0f p50=%.2f p95=%.2f p99=%.2f\n",
    summary.requests, summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000))
end
