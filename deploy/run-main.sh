#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and runs a
# private federation on loopback with embedded defaults, in two parts:
#   1. the real system: both tandem-aggregator daemons, tandem-coordinator and
#      20 tandem-client processes on Fashion-MNIST (Dirichlet 0.5 split),
#      FedAvg, FedLUAR and FedLUAR+CoIDO through PREAMBLE, beside clear FedAvg
#      -> reports/latest/federation/
#   1b. the same processes with the daemons' private defaults (noise
#      multiplier 1.0 per aggregator, norm proofs): 10 clients a round drown
#      in that noise, shown rather than hidden -> reports/latest/federation-dp/
#   2. differential privacy at scale: 2000 simulated clients (q = 0.05, ~100
#      per round, 20 rounds, sigma = 1.0 C per aggregator) against the same
#      kind of aggregator daemons, PREAMBLE + discrete Gaussian noise: epsilon
#      ~2.6 at delta = 1e-5 over the run -> reports/latest/dp/
#   2b. the same without norm proofs: the cheap private configuration, DP and
#      two-server secure aggregation for the bytes of clear FedAvg (dense
#      32-bit shares: ~1.01x; the proofs that guard the sum against
#      malicious clients cost ~2.4x) -> reports/latest/dp-lean/
# Each private run ends with one line: the bytes a client sent per round
# against clear FedAvg and against Prio3-style dense two-server sharing.
# Extra arguments go to every tandem-sim run, e.g. deploy/run-main.sh --rounds=10
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$JOBS" --target tandem-sim tandem-aggregator tandem-coordinator tandem-client

# Every connection with TLS and roles: a CA per trust domain, the leader,
# helper and coordinator identities and the coordinator's ticket key, made
# once (idempotent) by the deploy script the compose and k8s files use.
# --one-host: the tandem-client processes reach the coordinator at
# 127.0.0.1 and verify that address against its certificate (they pin the
# aggregators by name). A build/certs of an older make-certs.sh (or made
# without --one-host) is refused by it; it is this run's own, so remake it.
if ! deploy/make-certs.sh --one-host build/certs >/dev/null 2>&1; then
  echo "build/certs: made by an older deploy/make-certs.sh or for other hosts; remaking it"
  deploy/make-certs.sh --one-host --force build/certs >/dev/null
fi
echo "== 1/2: the federation as processes (coordinator, 2 aggregators, 20 clients)"
# DP off to compare accuracy with clear FedAvg: the aggregators get the
# explicit policy min_noise_multiplier: 0 (the simulator prints it).
build/server/sim/tandem-sim --mode=processes --clients=20 --sample_rate=0.5 --rounds=5 \
  --train_items=20000 --noise_multiplier=0 --certs_dir=build/certs \
  --report_dir=reports/latest/federation "$@"
echo "== 1b: the same processes with the daemons' private defaults: noise multiplier 1.0 per"
echo "   aggregator and norm proofs; 10 clients a round cannot hide in that noise (accuracy"
echo "   near chance, epsilon ~10): DP needs the cohorts of part 2"
build/server/sim/tandem-sim --mode=processes --clients=20 --sample_rate=0.5 --rounds=5 \
  --train_items=20000 --noise_multiplier=1.0 --variants=fedavg --baseline=false \
  --certs_dir=build/certs --report_dir=reports/latest/federation-dp "$@"
echo "== 2/2: PREAMBLE + DP with 2000 simulated clients (q = 0.05, 20 rounds, sigma = 1.0)"
# An operating point a practitioner accepts: epsilon ~1.6 at delta = 1e-5
# over the whole run (RDP accountant: Poisson subsampling of clients and
# PREAMBLE's random block sampling, crypto/dp/block_sampling.h).
build/server/sim/tandem-sim --mode=inprocess --clients=2000 --sample_rate=0.05 --rounds=20 \
  --noise_multiplier=1.0 --variants=fedavg --certs_dir=build/certs \
  --report_dir=reports/latest/dp "$@"
echo "== 2b: the same without norm proofs: DP and secure aggregation for the bytes of clear"
echo "   FedAvg (the proofs that bound each report against malicious clients are what cost)"
build/server/sim/tandem-sim --mode=inprocess --clients=2000 --sample_rate=0.05 --rounds=20 \
  --noise_multiplier=1.0 --variants=fedavg --baseline=false --norm_proofs=false \
  --certs_dir=build/certs --report_dir=reports/latest/dp-lean "$@"
echo "== 2c: norm proofs and never more bytes than dense sharing: the task states what it must"
echo "   keep (uploads <= 1x dense sharing, epsilon 2.55 over the run) and the coordinator"
echo "   picks d (one block in 8) and the least noise for it (block sampling credited)"
build/server/sim/tandem-sim --mode=inprocess --clients=2000 --sample_rate=0.05 --rounds=20 \
  --max_upload_vs_dense=1 --target_epsilon=2.55 --variants=fedavg --baseline=false \
  --certs_dir=build/certs --report_dir=reports/latest/dp-capped "$@"
