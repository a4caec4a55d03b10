#!/usr/bin/env bash
# Addok 1.3.2 (addok-sqlite-store, Redis from Debian), the peer of the hint
# engine, on the same JSON Lines data as edge's hints (see README.md here).
#
#   bench/hints/addok.sh setup DATA.jsonl   install, convert, import (once per data)
#   bench/hints/addok.sh start              redis + gunicorn -w 2 on 127.0.0.1:7878
#   bench/hints/addok.sh stop
#   bench/hints/addok.sh status
#
# Everything lives under $ADDOK_HOME (default ~/.cache/edge/bench-data/addok):
# the venv, a private redis-server (unix socket only, its own dir; not the
# system service), the sqlite document store, the converted data and a stamp
# of what was imported, so `setup` with the same data (and the same
# settings) skips the import. ADDOK_PORT changes the HTTP port.
set -euo pipefail
ADDOK_HOME=${ADDOK_HOME:-$HOME/.cache/edge/bench-data/addok}
ADDOK_PORT=${ADDOK_PORT:-7878}
VENV=$ADDOK_HOME/venv
RUN=$ADDOK_HOME/run          # sockets, pids, logs
DATA=$ADDOK_HOME/data        # redis dump, sqlite store, converted data, stamp
SOCK=$RUN/redis.sock
SETTINGS=$ADDOK_HOME/addok.conf
PIP_PINS=(addok==1.3.2 addok-sqlite-store==1.1.0 gunicorn==27.0.1)
mkdir -p "$RUN" "$DATA"
export ADDOK_CONFIG_MODULE=$SETTINGS

log() { echo "addok.sh: $*" >&2; }
now() { date +%s.%N; }
secs() { printf '%.1f' "$(echo "$(now) - $1" | bc -l)"; }

need_apt() { # binary package
  [ -e "$1" ] && return 0
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

ensure_venv() {
  need_apt /usr/bin/redis-server redis-server
  need_apt /usr/lib/python3.11/venv/__init__.py python3-venv
  need_apt /usr/include/python3.11/Python.h python3-dev # python-geohash builds from source
  command -v gcc >/dev/null || need_apt /usr/bin/gcc gcc
  command -v bc >/dev/null || need_apt /usr/bin/bc bc
  if ! "$VENV/bin/python" -c 'import addok, addok_sqlite_store, gunicorn' 2>/dev/null ||
    [ "$(cat "$VENV/.pins" 2>/dev/null)" != "${PIP_PINS[*]}" ]; then
    log "installing ${PIP_PINS[*]} into $VENV"
    rm -rf "$VENV"
    /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "${PIP_PINS[@]}"
    echo "${PIP_PINS[*]}" > "$VENV/.pins"
  fi
}

write_settings() {
  cat > "$SETTINGS" <<CONF
# Written by bench/hints/addok.sh
REDIS = {
    "host": None,
    "port": None,
    "unix_socket_path": "$SOCK",
    "indexes": {"db": 0},
    "documents": {"db": 1},
}
DOCUMENT_STORE_PYPATH = "addok_sqlite_store.SQLiteStore"
SQLITE_DB_PATH = "$DATA/addok.db"
# Our ids ("gn:524901", street ids) are kept and come back as properties.id.
ID_FIELD = "id"
# Absent fields are skipped: places have name (+ aliases as extra values) and
# country; street records add city and housenumbers.
FIELDS = [
    {"key": "name", "boost": 4, "null": False},
    {"key": "city"},
    {"key": "housenumbers"},
    {"key": "postcode"},
    {"key": "region"},
    {"key": "country"},
]
FILTERS = []


def flag_last_housenumber(pipe):
    """Addok flags only a leading number as a house number (French "5 rue
    ..."); our addresses are typed "{city} {street} {house}": a last token
    that starts with a digit, after the first one, is the house number."""
    tokens = list(pipe)
    if len(tokens) > 1 and tokens[-1][:1].isdigit():
        tokens[-1].kind = "housenumber"
    yield from tokens


PROCESSORS_PYPATHS = [
    "addok.helpers.text.tokenize",
    "addok.helpers.text.normalize",
    "addok.helpers.text.flag_housenumber",
    flag_last_housenumber,
    "addok.helpers.text.synonymize",
]
ATTRIBUTION = "GeoNames"
LICENCE = "CC-BY 4.0"
LOG_DIR = "$RUN"
CONF
}

# Our JSON Lines -> Addok's import format (one JSON document a line).
# importance = min(1, log10(1 + population) / 7): 0 for no population, 0.57
# for 10k, 1 for 10M and more (Addok weighs it by IMPORTANCE_WEIGHT = 0.1).
write_converter() {
  cat > "$ADDOK_HOME/convert.py" <<'PY'
import json, math, sys

from quality import house_numbers  # bench/hints/quality.py: the query log's reading too

def importance(pop):
    try:
        pop = float(pop or 0)
    except (TypeError, ValueError):
        pop = 0
    return round(min(1.0, math.log10(1 + max(pop, 0)) / 7), 4) if pop > 0 else 0.0

def names(main, aliases):
    out = [main]
    for a in aliases or []:
        if a and a not in out:
            out.append(a)
    return out if len(out) > 1 else main

def convert(rec, places):
    kind = rec.get("kind") or "place"
    parent = places.get(rec.get("parent")) or {}
    lat = rec.get("lat") if rec.get("lat") is not None else parent.get("lat")
    lon = rec.get("lon") if rec.get("lon") is not None else parent.get("lon")
    if lat is None or lon is None:
        lat, lon = 0.0, 0.0
    doc = {"id": rec["id"], "lat": lat, "lon": lon}
    if kind == "street":
        # A street: name, its place as city, its houses at the street's point.
        doc["type"] = "street"
        doc["name"] = names(rec.get("street") or rec.get("name"), rec.get("aliases"))
        city = rec.get("city") or parent.get("name")
        if city:
            doc["city"] = city
        houses = house_numbers(rec)
        if houses:
            doc["housenumbers"] = {h: {"lat": lat, "lon": lon} for h in houses}
        pop = parent.get("population")
    else:
        doc["type"] = rec.get("type") or kind
        doc["name"] = names(rec["name"], rec.get("aliases"))
        pop = rec.get("population")
    for src, dst in (("postal_code", "postcode"), ("region", "region"), ("country", "country"),
                     ("country_iso_code", "country_code")):
        if rec.get(src):
            doc[dst] = rec[src]
    doc["population"] = rec.get("population") or 0
    doc["importance"] = importance(pop)
    return doc

# Streets find their place (name, point, population) by "parent".
places = {}
with open(sys.argv[1], encoding="utf-8") as src:
    for line in src:
        if line.strip():
            rec = json.loads(line)
            if (rec.get("kind") or "place") == "place":
                places[rec["id"]] = {"name": rec.get("name"), "lat": rec.get("lat"), "lon": rec.get("lon"),
                                     "population": rec.get("population")}
n = 0
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w", encoding="utf-8") as out:
    for line in src:
        if line.strip():
            out.write(json.dumps(convert(json.loads(line), places), ensure_ascii=False) + "\n")
            n += 1
print(n)
PY
}

redis_cli() { redis-cli -s "$SOCK" "$@"; }
redis_up() { [ -S "$SOCK" ] && [ "$(redis_cli ping 2>/dev/null)" = PONG ]; }
redis_start() {
  redis_up && return 0
  cat > "$RUN/redis.conf" <<CONF
port 0
unixsocket $SOCK
unixsocketperm 700
dir $DATA
dbfilename dump.rdb
save ""
appendonly no
daemonize yes
pidfile $RUN/redis.pid
logfile $RUN/redis.log
CONF
  redis-server "$RUN/redis.conf"
  # Loading a large dump answers LOADING for a while.
  for _ in $(seq 1200); do redis_up && return 0; sleep 0.25; done
  log "redis did not come up; see $RUN/redis.log"
  return 1
}
redis_stop() {
  redis_up || return 0
  redis_cli shutdown nosave >/dev/null 2>&1 || true
  for _ in $(seq 100); do [ -S "$SOCK" ] || return 0; sleep 0.1; done
}

gunicorn_pid() { local p; p=$(cat "$RUN/gunicorn.pid" 2>/dev/null) && kill -0 "$p" 2>/dev/null && echo "$p"; }

cmd_setup() {
  local src=${1:?usage: addok.sh setup DATA.jsonl}
  [ -f "$src" ] || { log "no such file: $src"; exit 1; }
  ensure_venv
  write_settings
  write_converter
  local stamp
  stamp="$(sha256sum < "$src" | cut -c1-64) $(cat "$SETTINGS" "$ADDOK_HOME/convert.py" | sha256sum | cut -c1-64) ${PIP_PINS[*]}"
  if [ "$(cat "$DATA/stamp" 2>/dev/null)" = "$stamp" ] && [ -s "$DATA/dump.rdb" ] && [ -s "$DATA/addok.db" ]; then
    log "already imported ($src); $(cat "$DATA/import-times")"
    return 0
  fi
  [ -z "$(gunicorn_pid)" ] || { log "addok is running; stop it first"; exit 1; }
  redis_stop
  rm -f "$DATA/stamp" "$DATA/dump.rdb" "$DATA/addok.db" "$DATA/import-times"
  local t0 t n
  t0=$(now)
  n=$(PYTHONPATH="$(cd "$(dirname "$0")" && pwd)" /usr/bin/python3 "$ADDOK_HOME/convert.py" "$src" "$DATA/addok.jsonl")
  local t_conv; t_conv=$(secs "$t0")
  log "converted $n records in ${t_conv}s; importing (addok batch, then addok ngrams)"
  redis_start
  t=$(now)
  (cd "$DATA" && "$VENV/bin/addok" batch "$DATA/addok.jsonl" >"$RUN/import.log" 2>&1) ||
    { tail "$RUN/import.log" >&2; exit 1; }
  local t_batch; t_batch=$(secs "$t")
  t=$(now)
  (cd "$DATA" && "$VENV/bin/addok" ngrams >>"$RUN/import.log" 2>&1) ||
    { tail "$RUN/import.log" >&2; exit 1; }
  local t_ngrams; t_ngrams=$(secs "$t")
  t=$(now)
  redis_cli save >/dev/null
  local t_save; t_save=$(secs "$t")
  local mem keys
  mem=$(redis_cli info memory | awk -F: '/^used_memory_human/ {gsub("\r",""); print $2}')
  keys=$(redis_cli info keyspace | tr -d '\r' | awk -F'[=,]' '/^db0/ {print $2}')
  local times="$n docs: convert ${t_conv}s, addok batch ${t_batch}s, addok ngrams ${t_ngrams}s, redis save ${t_save}s; total $(secs "$t0")s; redis used_memory $mem ($keys index keys), sqlite store $(du -h "$DATA/addok.db" | cut -f1), dump.rdb $(du -h "$DATA/dump.rdb" | cut -f1)"
  echo "$times" > "$DATA/import-times"
  echo "$stamp" > "$DATA/stamp"
  log "imported: $times"
  redis_stop
}

cmd_start() {
  [ -s "$DATA/stamp" ] || { log "nothing imported; run: addok.sh setup DATA.jsonl"; exit 1; }
  redis_start
  if [ -z "$(gunicorn_pid)" ]; then
    if (exec 3<>"/dev/tcp/127.0.0.1/$ADDOK_PORT") 2>/dev/null; then log "port $ADDOK_PORT is in use"; exit 1; fi
    (cd "$DATA" && "$VENV/bin/gunicorn" -w 2 -b "127.0.0.1:$ADDOK_PORT" --daemon \
      --pid "$RUN/gunicorn.pid" --error-logfile "$RUN/gunicorn.log" addok.http.wsgi:application)
  fi
  for _ in $(seq 300); do
    if curl -sf "http://127.0.0.1:$ADDOK_PORT/search/?q=paris&limit=1" 2>/dev/null | grep -q '"features"'; then
      log "serving on http://127.0.0.1:$ADDOK_PORT (gunicorn -w 2, pid $(gunicorn_pid))"
      return 0
    fi
    sleep 0.2
  done
  log "addok did not answer; see $RUN/gunicorn.log"
  exit 1
}

cmd_stop() {
  local p
  if p=$(gunicorn_pid); then
    kill "$p"
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  fi
  redis_stop
  log "stopped"
}

cmd_status() {
  echo "gunicorn: $(gunicorn_pid || echo stopped); redis: $(redis_up && echo up || echo down)"
  echo "imported: $(cat "$DATA/import-times" 2>/dev/null || echo nothing)"
}

case "${1:-}" in
  setup) shift; cmd_setup "$@" ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) echo "usage: $0 setup DATA.jsonl | start | stop | status" >&2; exit 2 ;;
esac
