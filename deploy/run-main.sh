#!/usr/bin/env bash
# The README's main command: installs what is missing, builds the daemons and
# runs a private federation on loopback (Fashion-MNIST, 1000 clients, two
# real tandem-aggregator processes, PREAMBLE reports with discrete Gaussian
# noise) with embedded defaults. Extra arguments go to tandem-sim, e.g.
#   deploy/run-main.sh --rounds=10 --variants=fedavg
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$JOBS" --target tandem-sim tandem-aggregator
exec build/tests/sim/tandem-sim --report_dir=reports/latest "$@"
