#!/usr/bin/python3
"""Query logs and hit rates for the hint engine and its peers (stdlib only).

  quality.py querylog DATA.jsonl --n 300 --seed 1 --out log.jsonl [--kind address|fio]
  quality.py eval   --querylog log.jsonl --backend edge|addok --url BASE [--concurrency 8]
  quality.py load   --queries log.txt --backend edge|addok --url BASE [--concurrency 16 --duration 10]
  quality.py typing --querylog log.jsonl --backend edge|addok --url BASE [--users 10,20,40]
  quality.py oracle DATA.jsonl --querylog log.jsonl

querylog: N targets are drawn from DATA (JSON Lines, one record a line), and
for each one a user types its text key by key twice: once without a typo and
once with one random typo. Every keystroke is a line
  {"target": ID, "typo": BOOL, "chars": K, "q": PREFIX, "run": "clean"|"typo",
   "edit": KIND|null}
where "typo" tells whether this prefix contains the typo (the keystrokes of
the typo run before the typo are the same as the clean run's and say false).
FILE.txt beside it gets the q's alone, in order (a load generator's input).

Targets, distinct: half uniformly among the records with population > 0,
half weighted by population (so both the long tail and what people type most
are there). Typed text: a place's name. When DATA also has streets
({"kind": "street", "parent": PLACE_ID or "city": ..., "name", "houses": [...]
or "house_range": [lo, hi]}), the targets are split places:streets:houses by
--mix (1:1:1), streets drawn the same way by their place's population; a
street is typed "{city} {street}", a house "{city} {street} {house}" with the
id "STREETID#HOUSE". --kind fio types "Surname Name Patronymic": whole people
from records with surname/name/patronymic, or combined by gender from name
parts ({"part", "text", "gender", "count"}, each part half uniform, half by
count), then the id is "fio:" + the text and a hit is a suggestion whose
value is that text.

The typo is one edit at a random position, the kind drawn uniformly among:
substitution by a neighbouring key (QWERTY for Latin letters, ЙЦУКЕН for
Cyrillic, the digit row for digits), deletion, insertion of a neighbouring
key (or a doubled key), and transposition of two adjacent different keys.
"""
import argparse
import bisect
import http.client
import json
import random
import sys
import threading
import time
import unicodedata
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

# ---------------------------------------------------------------- keyboards

LAYOUTS = [
    ["1234567890"],
    ["qwertyuiop", "asdfghjkl", "zxcvbnm"],
    ["йцукенгшщзхъ", "фывапролджэ", "ячсмитьбю"],
]


def _neighbours():
    nb = {}
    for rows in LAYOUTS:
        for r, row in enumerate(rows):
            for c, ch in enumerate(row):
                near = set()
                for rr, cc in ((r, c - 1), (r, c + 1), (r - 1, c), (r - 1, c + 1), (r + 1, c - 1), (r + 1, c)):
                    if 0 <= rr < len(rows) and 0 <= cc < len(rows[rr]):
                        near.add(rows[rr][cc])
                nb[ch] = "".join(sorted(near))
    nb["ё"] = "е"  # ё sits apart; it is mostly typed as е
    return nb


NEIGHBOURS = _neighbours()


def neighbours(ch):
    """Keys next to ch on the layout of its script, in ch's case."""
    low = ch.lower()
    near = NEIGHBOURS.get(low)
    if near is None:
        base = unicodedata.normalize("NFD", low)[:1]  # é -> e
        near = NEIGHBOURS.get(base, "")
    return near.upper() if ch != low else near


EDITS = ("substitution", "deletion", "insertion", "transposition")


def make_typo(text, rng):
    """One random edit of text: (typo'd text, kind) or (None, None)."""
    n = len(text)
    kinds = list(EDITS)
    rng.shuffle(kinds)
    for kind in kinds:
        if kind == "substitution":
            pos = [i for i in range(n) if neighbours(text[i])]
            if pos:
                i = rng.choice(pos)
                return text[:i] + rng.choice(neighbours(text[i])) + text[i + 1:], kind
        elif kind == "deletion" and n >= 2:
            i = rng.randrange(n)
            return text[:i] + text[i + 1:], kind
        elif kind == "insertion" and n >= 1:
            i = rng.randrange(n + 1)
            around = [text[j] for j in (i - 1, i) if 0 <= j < n]
            near = "".join(neighbours(c) for c in around)
            c = rng.choice(near) if near else rng.choice(around)
            if c.isspace():
                c = rng.choice(around)
            return text[:i] + c + text[i:], kind
        elif kind == "transposition":
            pos = [i for i in range(n - 1) if text[i] != text[i + 1]]
            if pos:
                i = rng.choice(pos)
                return text[:i] + text[i + 1] + text[i] + text[i + 2:], kind
    return None, None


# ----------------------------------------------------------------- querylog

def population(rec):
    try:
        return max(float(rec.get("population") or 0), 0.0)
    except (TypeError, ValueError):
        return 0.0


def weighted_distinct(rng, items, weight, n, taken):
    """n more distinct items drawn with probability proportional to weight."""
    items = [x for x in items if weight(x) > 0]
    cum, total = [], 0.0
    for x in items:
        total += weight(x)
        cum.append(total)
    out = []
    tries = 0
    while len(out) < n and items and tries < 100 * n + 1000:
        tries += 1
        x = items[min(len(items) - 1, bisect.bisect_right(cum, rng.random() * total))]
        if id(x) not in taken:
            taken.add(id(x))
            out.append(x)
    return out


def half_and_half(rng, items, weight, n):
    """Half uniform among items of weight > 0, half weighted; distinct.
    Items all of weight 0: uniform."""
    live = [x for x in items if weight(x) > 0]
    if not live:
        return rng.sample(items, min(n, len(items)))
    n = min(n, len(live))
    first = rng.sample(live, n // 2)
    taken = {id(x) for x in first}
    return first + weighted_distinct(rng, live, weight, n - len(first), taken)


def house_numbers(street):
    houses = street.get("houses")
    if houses:
        return [str(h.get("house") or h.get("number") or h.get("housenumber")) if isinstance(h, dict) else str(h)
                for h in houses]
    r = street.get("house_range")
    if r and len(r) == 2 and r[1] >= r[0]:
        return [str(h) for h in range(int(r[0]), int(r[1]) + 1)]
    return []


def address_targets(records, n, rng, mix):
    """[(id, typed text)]: places, streets and houses in proportion to mix."""
    places = [r for r in records if (r.get("kind") or "place") == "place" and r.get("name")]
    streets = [r for r in records if r.get("kind") == "street"]
    houses = [r for r in records if r.get("kind") == "house"]
    by_id = {r["id"]: r for r in places}

    def city_of(st):
        if st.get("city"):
            return st["city"]
        parent = by_id.get(st.get("parent"))
        return parent["name"] if parent else None

    def street_text(st):
        return " ".join(p for p in (city_of(st), st.get("street") or st.get("name")) if p)

    def street_weight(st):
        parent = by_id.get(st.get("parent"))
        return population(parent) if parent else 1.0

    w = [x if avail else 0 for x, avail in zip(mix, (places, streets, streets or houses))]
    total = sum(w) or 1
    counts = [round(n * x / total) for x in w]
    counts[0] = n - counts[1] - counts[2]
    out = [(p["id"], p["name"]) for p in half_and_half(rng, places, population, counts[0])]
    out += [(s["id"], street_text(s)) for s in half_and_half(rng, streets, street_weight, counts[1])]
    if streets:
        picked = half_and_half(rng, [s for s in streets if house_numbers(s)], street_weight, counts[2])
        for s in picked:
            h = rng.choice(house_numbers(s))
            out.append(("%s#%s" % (s["id"], h), "%s %s" % (street_text(s), h)))
    else:
        for h in rng.sample(houses, min(counts[2], len(houses))):
            tid = h.get("id") or "%s#%s" % (h.get("street_id"), h.get("house"))
            out.append((tid, " ".join(str(p) for p in (h.get("city"), h.get("street"), h.get("house")) if p)))
    return out


def fio_targets(records, n, rng):
    """[(id, "Surname Name Patronymic")]. Records are either whole people
    ({"id", "surname", "name", "patronymic"}) or name parts
    ({"part": "surname"|"name"|"patronymic", "text", "gender", "count"}),
    combined by gender, each part half uniform, half weighted by count; a
    combined target's id is "fio:" + its text (the hit is on the value)."""
    whole = [r for r in records if r.get("surname") and r.get("id")]
    if whole:
        return [(r["id"], " ".join(r[k] for k in ("surname", "name", "patronymic") if r.get(k)))
                for r in rng.sample(whole, min(n, len(whole)))]
    parts = {}
    for r in records:
        if r.get("part") and r.get("text"):
            parts.setdefault(r["part"], []).append(r)
    order = [p for p in ("surname", "name", "first_name", "patronymic") if p in parts]
    pools = {}

    def pool(p, gender):  # (records, cumulative counts), built once
        if (p, gender) not in pools:
            rs = [r for r in parts[p] if r.get("gender") in (gender, "u", None)] or parts[p]
            cum, total = [], 0.0
            for r in rs:
                total += float(r.get("count") or 0) + 1.0
                cum.append(total)
            pools[p, gender] = rs, cum
        return pools[p, gender]

    out, seen = [], set()
    tries = 0
    while len(out) < n and order and tries < 100 * n:
        tries += 1
        gender = rng.choice("mf")
        words = []
        for p in order:
            rs, cum = pool(p, gender)
            if rng.random() < 0.5:
                words.append(rng.choice(rs)["text"])
            else:
                words.append(rs[min(len(rs) - 1, bisect.bisect_right(cum, rng.random() * cum[-1]))]["text"])
        text = " ".join(words)
        if text not in seen:
            seen.add(text)
            out.append(("fio:" + text, text))
    return out


def cmd_querylog(a):
    rng = random.Random(a.seed)
    records = []
    with open(a.data, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                records.append(json.loads(line))
    if a.kind == "fio":
        targets = fio_targets(records, a.n, rng)
    else:
        targets = address_targets(records, a.n, rng, [float(x) for x in a.mix.split(":")])
    out_txt = a.out[:-6] + ".txt" if a.out.endswith(".jsonl") else a.out + ".txt"
    lines = edits = 0
    with open(a.out, "w", encoding="utf-8") as js, open(out_txt, "w", encoding="utf-8") as txt:
        def emit(tid, typed, clean, run, edit):
            nonlocal lines
            for k in range(1, len(typed) + 1):
                q = typed[:k]
                if not q.strip():
                    continue  # nobody sends a lone space
                typo = q != clean[:k]
                js.write(json.dumps({"target": tid, "typo": typo, "chars": k, "q": q, "run": run,
                                     "edit": edit if typo else None}, ensure_ascii=False) + "\n")
                txt.write(q.replace("\n", " ") + "\n")
                lines += 1
        for tid, text in targets:
            text = " ".join(str(text).split())
            emit(tid, text, text, "clean", None)
            typed, edit = make_typo(text, rng)
            if typed:
                edits += 1
                emit(tid, typed, text, "typo", edit)
    print("%d targets from %d records, %d keystrokes (%d typo runs) -> %s, %s"
          % (len(targets), len(records), lines, edits, a.out, out_txt), file=sys.stderr)


# --------------------------------------------------------------------- HTTP

class Client:
    """One keep-alive connection per thread; reconnects when the server closes."""

    def __init__(self, base, backend, count=5, endpoint="/hints/address"):
        u = urllib.parse.urlsplit(base)
        self.endpoint = endpoint
        self.host, self.port = u.hostname, u.port or 80
        self.prefix = u.path.rstrip("/")
        self.backend = backend
        self.count = count
        self.local = threading.local()

    def path(self, q):
        qq = urllib.parse.quote(q, safe="")
        if self.backend == "addok":
            return "%s/search/?q=%s&limit=%d" % (self.prefix, qq, self.count)
        return "%s%s?q=%s&count=%d" % (self.prefix, self.endpoint, qq, self.count)

    def get(self, q):
        """(status, body, seconds)."""
        path = self.path(q)
        for attempt in (0, 1):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            t = time.perf_counter()
            try:
                conn.request("GET", path)
                r = conn.getresponse()
                body = r.read()
                dt = time.perf_counter() - t
                if r.getheader("connection", "").lower() == "close":
                    conn.close()
                return r.status, body, dt
            except (http.client.HTTPException, OSError):
                conn.close()
                self.local.conn = None
                if attempt:
                    return 0, b"", time.perf_counter() - t
        return 0, b"", 0.0

    def ids(self, body):
        """The results' ids in order (a house result as 'STREETID#HOUSE')."""
        try:
            doc = json.loads(body)
        except ValueError:
            return []
        if self.backend == "addok":
            out = []
            for f in doc.get("features") or []:
                p = f.get("properties") or {}
                i = str(p.get("id"))
                out.append("%s#%s" % (i, p["housenumber"]) if p.get("housenumber") else i)
            return out
        # A name suggestion is a hit on its value ("fio:" + text, any case).
        return [(str((s.get("data") or {}).get("hint_id")), "fio:" + str(s.get("value")).casefold())
                for s in doc.get("suggestions") or []]


def rank_of(target, ids):
    """0-based position of target among the results, or None."""
    if target.startswith("fio:"):
        target = target.casefold()
    for i, r in enumerate(ids):
        if target == r or (isinstance(r, tuple) and target in r):
            return i
    return None


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def read_log(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --------------------------------------------------------------------- eval

BUCKETS = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 8), (9, 12), (13, 10 ** 9)]


def bucket(k):
    for lo, hi in BUCKETS:
        if lo <= k <= hi:
            return str(lo) if lo == hi else ("%d+" % lo if hi > 10 ** 6 else "%d-%d" % (lo, hi))
    return "?"


def cmd_eval(a):
    log = read_log(a.querylog)
    client = Client(a.url, a.backend, a.count, a.endpoint)
    distinct = list(dict.fromkeys(e["q"] for e in log))
    results, lat, errors = {}, [], [0]

    def one(q):
        status, body, dt = client.get(q)
        if status != 200:
            errors[0] += 1
        return q, (client.ids(body) if status == 200 else []), dt

    t0 = time.perf_counter()
    with ThreadPoolExecutor(a.concurrency) as pool:
        for q, ids, dt in pool.map(one, distinct):
            results[q] = ids
            lat.append(dt)
    wall = time.perf_counter() - t0

    groups = {}

    def add(name, hit1, hit5):
        g = groups.setdefault(name, [0, 0, 0])
        g[0] += 1
        g[1] += hit1
        g[2] += hit5

    for e in log:
        r = rank_of(e["target"], results[e["q"]])
        h1, h5 = r == 0, r is not None and r < 5
        add("all keystrokes", h1, h5)
        add("without typo (clean run)" if e["run"] == "clean" else "typo run, all keystrokes", h1, h5)
        if e["typo"]:
            add("with typo (typo in query)", h1, h5)
            add("typo: " + (e.get("edit") or "?"), h1, h5)
        if e["chars"] >= 3:  # Addok, for one, starts answering at 3 characters
            add("3+ chars: all keystrokes", h1, h5)
            add("3+ chars: without typo" if e["run"] == "clean" else "3+ chars: typo run", h1, h5)
            if e["typo"]:
                add("3+ chars: with typo", h1, h5)
        add("chars %s" % bucket(e["chars"]), h1, h5)
        if e["run"] == "clean":
            add("clean, chars %s" % bucket(e["chars"]), h1, h5)
        else:
            add("typo run, chars %s" % bucket(e["chars"]), h1, h5)
    # The full text typed, the last keystroke of each run.
    last = {}
    for e in log:
        last[(e["target"], e["run"])] = e
    for e in last.values():
        r = rank_of(e["target"], results[e["q"]])
        add("full text, " + e["run"], r == 0, r is not None and r < 5)

    order = ["all keystrokes", "without typo (clean run)", "with typo (typo in query)", "typo run, all keystrokes"]
    order += ["3+ chars: all keystrokes", "3+ chars: without typo", "3+ chars: with typo", "3+ chars: typo run"]
    order += ["typo: " + k for k in EDITS]
    order += ["full text, clean", "full text, typo"]
    labels = [bucket(lo) for lo, _ in BUCKETS]
    order += ["chars " + b for b in labels] + ["clean, chars " + b for b in labels] + ["typo run, chars " + b for b in labels]
    print("%s at %s: %d keystrokes, %d distinct queries, %d errors, %.1f s at concurrency %d "
          "(%.0f req/s, p50 %.1f ms, p99 %.1f ms)" % (
              a.backend, a.url, len(log), len(distinct), errors[0], wall, a.concurrency,
              len(distinct) / wall, pct(lat, 50) * 1000, pct(lat, 99) * 1000))
    print("| %-30s | %7s | %7s | %7s |" % ("queries", "count", "top-1", "top-5"))
    print("|%s|%s|%s|%s|" % ("-" * 32, "-" * 9, "-" * 9, "-" * 9))
    summary = {"backend": a.backend, "url": a.url, "keystrokes": len(log), "distinct_queries": len(distinct),
               "errors": errors[0], "seconds": round(wall, 2), "concurrency": a.concurrency,
               "latency_ms": {"p50": round(pct(lat, 50) * 1000, 2), "p99": round(pct(lat, 99) * 1000, 2)},
               "groups": {}}
    for name in order:
        if name not in groups:
            continue
        n, h1, h5 = groups[name]
        print("| %-30s | %7d | %6.1f%% | %6.1f%% |" % (name, n, 100 * h1 / n, 100 * h5 / n))
        summary["groups"][name] = {"count": n, "top1": round(h1 / n, 4), "top5": round(h5 / n, 4)}
    print(json.dumps(summary, ensure_ascii=False))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, ensure_ascii=False, indent=1)


# --------------------------------------------------------------------- load

def cmd_load(a):
    """Closed loop: C connections send the queries (cycled) for D seconds."""
    with open(a.queries, encoding="utf-8") as f:
        queries = [line.rstrip("\n") for line in f if line.strip()]
    client = Client(a.url, a.backend, a.count, a.endpoint)
    nxt = [0]
    lock = threading.Lock()
    lat, errors = [], [0]
    stop = time.perf_counter() + a.duration

    def worker():
        mine = []
        while time.perf_counter() < stop:
            with lock:
                q = queries[nxt[0] % len(queries)]
                nxt[0] += 1
            status, _, dt = client.get(q)
            if status != 200:
                with lock:
                    errors[0] += 1
            mine.append(dt)
        with lock:
            lat.extend(mine)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    s = {"backend": a.backend, "concurrency": a.concurrency, "requests": len(lat), "errors": errors[0],
         "req_per_s": round(len(lat) / wall, 1), "p50_ms": round(pct(lat, 50) * 1000, 1),
         "p99_ms": round(pct(lat, 99) * 1000, 1)}
    print(json.dumps(s))


# ------------------------------------------------------------------- typing

def cmd_typing(a):
    """U users type the query log's runs key by key, one request per key,
    a key every --interval-ms (a request still out delays the next key)."""
    log = read_log(a.querylog)
    runs = {}
    for e in log:
        runs.setdefault((e["target"], e["run"]), []).append(e)
    runs = list(runs.values())
    random.Random(a.seed).shuffle(runs)
    client = Client(a.url, a.backend, a.count, a.endpoint)
    interval = a.interval_ms / 1000
    print("| %5s | %9s | %8s | %8s | %8s | %8s | %7s | %6s | %9s |" % (
        "users", "keys/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "late %", "errors", "final top5"))
    print("|%s|" % "|".join("-" * w for w in (7, 11, 10, 10, 10, 10, 9, 8, 11)))
    out = []
    for users in [int(u) for u in str(a.users).split(",")]:
        lock = threading.Lock()
        lat, errors, finals = [], [0], [0, 0]
        stop = time.perf_counter() + a.duration

        def user(u):
            rng = random.Random(a.seed * 1000 + u)
            time.sleep(rng.random() * interval * 4)  # users don't start in step
            mine, fin, err = [], [0, 0], 0
            j = u
            while time.perf_counter() < stop:
                run = runs[j % len(runs)]
                j += users
                due = time.perf_counter()
                for e in run:
                    if time.perf_counter() >= stop:
                        break
                    status, body, dt = client.get(e["q"])
                    mine.append(dt)
                    if status != 200:
                        err += 1
                    if e is run[-1]:
                        r = rank_of(e["target"], client.ids(body)) if status == 200 else None
                        fin[0] += 1
                        fin[1] += r is not None and r < 5
                    due += interval
                    pause = due - time.perf_counter()
                    if pause > 0:
                        time.sleep(pause)
                    else:
                        due = time.perf_counter()
                time.sleep(interval * 5 * (0.5 + rng.random()))  # picks a result, thinks
            with lock:
                lat.extend(mine)
                errors[0] += err
                finals[0] += fin[0]
                finals[1] += fin[1]

        t0 = time.perf_counter()
        threads = [threading.Thread(target=user, args=(u,)) for u in range(users)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        late = sum(1 for x in lat if x > interval) / max(len(lat), 1)
        row = {"users": users, "keys_per_s": round(len(lat) / wall, 1), "p50_ms": round(pct(lat, 50) * 1000, 1),
               "p90_ms": round(pct(lat, 90) * 1000, 1), "p99_ms": round(pct(lat, 99) * 1000, 1),
               "max_ms": round(max(lat, default=0) * 1000, 1), "late": round(late, 4), "errors": errors[0],
               "final_top5": round(finals[1] / max(finals[0], 1), 4)}
        out.append(row)
        print("| %5d | %9.1f | %8.1f | %8.1f | %8.1f | %8.1f | %6.1f%% | %6d | %8.1f%% |" % (
            users, row["keys_per_s"], row["p50_ms"], row["p90_ms"], row["p99_ms"], row["max_ms"],
            100 * late, errors[0], 100 * row["final_top5"]), flush=True)
    print(json.dumps({"backend": a.backend, "interval_ms": a.interval_ms, "duration_s": a.duration, "levels": out}))


# ------------------------------------------------------------------- oracle

def fold(text):
    """Lower case without accents: how both engines compare letters."""
    text = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in text if not unicodedata.combining(c))


def cmd_oracle(a):
    """The top-5 hit rate of clean runs from three letters that ranking
    every place whose name or alias begins with the typed letters by
    population gives. Targets are drawn uniformly or by population, so the
    posterior of a place given only those letters is 1/N + pop/total: the
    population order. No engine that sees only the letters does better
    (see docs/HINTS.md)."""
    pop, keys = {}, []
    with open(a.data, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if r.get("kind", "place") != "place":
                continue
            pop[r["id"]] = population(r)
            for name in {fold(n) for n in [r["name"]] + (r.get("aliases") or [])}:
                keys.append((name, r["id"]))
    keys.sort()
    names = [k for k, _ in keys]
    hits = total = 0
    for e in read_log(a.querylog):
        if e["run"] != "clean" or e["chars"] < 3:
            continue
        q = fold(e["q"])
        matching = set()
        i = bisect.bisect_left(names, q)
        while i < len(names) and names[i].startswith(q):
            matching.add(keys[i][1])
            i += 1
        total += 1
        if e["target"] in matching:
            p = pop.get(e["target"], 0)
            hits += sum(1 for m in matching if pop[m] > p) < 5
    print("oracle top-5, clean runs from 3 letters: %.1f%% of %d keystrokes" % (100 * hits / total, total))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("querylog", help="sample targets, simulate keystrokes")
    q.add_argument("data")
    q.add_argument("--n", type=int, default=300)
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("--out", required=True)
    q.add_argument("--kind", choices=["address", "fio"], default="address")
    q.add_argument("--mix", default="1:1:1",
                   help="place:street:house shares of the targets when DATA has streets")
    q.set_defaults(func=cmd_querylog)
    o = sub.add_parser("oracle", help="the best top-5 a prefix allows (clean runs)")
    o.add_argument("data")
    o.add_argument("--querylog", required=True)
    o.set_defaults(func=cmd_oracle)
    for name, func, helptext in (("eval", cmd_eval, "top-1/top-5 hit rates"),
                                 ("load", cmd_load, "closed-loop req/s and latency"),
                                 ("typing", cmd_typing, "typing users")):
        e = sub.add_parser(name, help=helptext)
        if name == "load":
            e.add_argument("--queries", required=True, help="FILE.txt, one query a line")
        else:
            e.add_argument("--querylog", required=True)
        e.add_argument("--backend", choices=["edge", "addok"], required=True)
        e.add_argument("--url", required=True, help="e.g. http://127.0.0.1:7878")
        e.add_argument("--count", type=int, default=5, help="results asked for")
        e.add_argument("--endpoint", default="/hints/address", help="edge's path (e.g. /hints/fio)")
        e.set_defaults(func=func)
    sub.choices["eval"].add_argument("--concurrency", type=int, default=8)
    sub.choices["eval"].add_argument("--json", help="also write the summary here")
    sub.choices["load"].add_argument("--concurrency", type=int, default=16)
    sub.choices["load"].add_argument("--duration", type=float, default=10)
    t = sub.choices["typing"]
    t.add_argument("--users", default="10,20,40", help="comma-separated levels")
    t.add_argument("--interval-ms", type=float, default=150, help="time between keys")
    t.add_argument("--duration", type=float, default=20, help="seconds per level")
    t.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
