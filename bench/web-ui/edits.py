"""Inline edit round trips: PATCH /api/clients/{id} with the row's version,
one after another on a kept-alive connection (as a dealer's browser
sends them), EDITS times over a dealer's clients. Prints p50/p95/p99 ms."""
import http.client, json, os, sys, time

port, host, cookie, csrf = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
edits = int(os.environ.get("EDITS", "300"))
conn = http.client.HTTPConnection("127.0.0.1", port)
headers = {"Host": host, "Cookie": cookie}

def call(method, path, body=None):
    h = dict(headers)
    if body is not None:
        h.update({"Content-Type": "application/json", "x-csrf-token": csrf})
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
    r = conn.getresponse()
    return r.status, json.loads(r.read() or b"null")

status, page = call("GET", "/api/clients?per_page=200&sort=name")
assert status == 200, page
rows = page["rows"]
times = []
for i in range(edits):
    row = rows[i % len(rows)]
    t0 = time.perf_counter()
    status, new = call("PATCH", f"/api/clients/{row['id']}", {"version": row["version"], "phone": f"+1 555 {i:04d}"})
    times.append((time.perf_counter() - t0) * 1000)
    assert status == 200, new
    rows[i % len(rows)] = new
times.sort()
pct = lambda p: times[min(len(times) - 1, int(len(times) * p / 100))]
print(f"RESULT edits={edits} p50={pct(50):.2f} p95={pct(95):.2f} p99={pct(99):.2f}")
