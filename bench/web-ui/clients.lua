-- wrk script: dealers reading their clients table. Each request is a
-- sorted, filtered page of GET /api/clients (the queries the workspace
-- sends: a sort, a search or a tariff or a date range, a page), with one
-- of the dealers' session cookies (COOKIES: file, one `billing_session=...`
-- per line) and the app's Host (HOST). done() prints p50/p95/p99 in ms.
local cookies = {}
local queries = {
  "sort=name&page=1",
  "sort=-registered_at&page=3",
  "sort=phone&q=bright&page=1",
  "sort=email&q=travel&page=2",
  "sort=-name&tariff=2&page=1",
  "sort=registered_at&registered_from=2025-01-01&registered_to=2025-03-31&page=1",
  "sort=contact_name&q=anna&tariff=3&page=1",
  "sort=-tariff,name&page=5",
  "sort=name&q=%2B49&page=1",
  "sort=-registered_at&registered_from=2025-06-01&page=2",
}
local n = 0

function init(args)
  for line in io.lines(os.getenv("COOKIES")) do cookies[#cookies + 1] = line end
  n = math.random(1, 1000)
end

function request()
  n = n + 1
  local headers = { ["Host"] = os.getenv("HOST"), ["Cookie"] = cookies[(n % #cookies) + 1] }
  return wrk.format("GET", "/api/clients?per_page=50&" .. queries[(n % #queries) + 1], headers)
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
