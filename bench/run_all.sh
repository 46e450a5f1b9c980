#!/usr/bin/env bash
# Runs every Google Benchmark binary of a Release build and keeps the JSON
# and console output under bench/results/ (the figures of bench/*.md come
# from such runs). Run on an otherwise idle machine:
#   cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build
#   bench/run_all.sh [build] [--benchmark_filter=...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
OUT=bench/results
mkdir -p "$OUT"
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200 > "$OUT/machine.txt"
for b in $(find "$BUILD" -name '*_benchmark' -type f -executable | sort); do
  name=$(basename "$b")
  echo "== $name"
  "$b" --benchmark_out="$OUT/$name.json" --benchmark_out_format=json "$@" 2>&1 \
    | grep -v '^I ' | tee "$OUT/$name.txt"
done
