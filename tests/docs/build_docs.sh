#!/usr/bin/env bash
# Builds the documentation site as CI does: a copy of docs/ and mkdocs.yml,
# the reference pages generated from the built binaries and the sources
# (docs/gen_reference.py), then `mkdocs build --strict` (any warning, e.g. a
# link to a page that does not exist, fails) and a check of every relative
# link and #anchor of the built HTML (tests/docs/check_links.py).
#
#   tests/docs/build_docs.sh [--mkdocs PATH] [--out DIR] BINARY...
#
# BINARY: built tandem-* binaries whose --helpfull flags go into
# reference/flags.md. --out DIR keeps the generated sources (DIR/docs) and
# the site (DIR/site) there, e.g. to read it (python3 -m http.server -d
# DIR/site); without it everything goes to a temporary folder removed on
# exit. The source tree is never written. Exit 77 (a skip for ctest) when
# mkdocs or a binary is missing (e.g. a sanitizer build that built only
# the unit tests).
set -euo pipefail

src="$(cd "$(dirname "$0")/../.." && pwd)"
mkdocs_bin="${TANDEM_MKDOCS:-mkdocs}"
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mkdocs) mkdocs_bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --) shift; break ;;
    -*) echo "build_docs: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "usage: $0 [--mkdocs PATH] [--out DIR] BINARY..." >&2
  exit 2
fi
if ! command -v "$mkdocs_bin" >/dev/null 2>&1; then
  echo "build_docs: SKIP: no mkdocs ($mkdocs_bin; apt-get install mkdocs)"
  exit 77
fi
for b in "$@"; do
  if [ ! -x "$b" ]; then
    echo "build_docs: SKIP: $b is not built"
    exit 77
  fi
done

if [ -n "$out" ]; then
  rm -rf "$out/docs" "$out/site"
  mkdir -p "$out"
  work="$(cd "$out" && pwd)"
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/tandem-docs.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
fi

cp "$src/mkdocs.yml" "$work/mkdocs.yml"
cp -R "$src/docs" "$work/docs"
# The generator is not a page of the site.
rm -f "$work/docs/gen_reference.py"
find "$work/docs" -name __pycache__ -prune -exec rm -rf {} +

/usr/bin/python3 "$src/docs/gen_reference.py" --repo "$src" --out "$work/docs" "$@"

log="$work/mkdocs.log"
if ! (cd "$work" && "$mkdocs_bin" build --strict --clean --config-file "$work/mkdocs.yml" \
        --site-dir "$work/site") >"$log" 2>&1; then
  cat "$log"
  echo "build_docs: FAIL: mkdocs build --strict"
  exit 1
fi
if grep -q "WARNING" "$log"; then
  cat "$log"
  echo "build_docs: FAIL: mkdocs printed warnings"
  exit 1
fi
/usr/bin/python3 "$src/tests/docs/check_links.py" "$work/site"
echo "build_docs: OK ($(find "$work/site" -name '*.html' | wc -l) pages)"
