#!/usr/bin/env bash
# Reproduces the papers' claims on this project's data and prints one line per
# claim (README "Paper claims on this data"). Needs a Release build in $1
# (default build). About 15 minutes on 2 cores.
#   bench/claims.sh build
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
OUT=${OUT:-reports/claims}
mkdir -p "$OUT"
SIM=$B/server/sim/tandem-sim
TRAIN=$B/ml/tandem-train
FL="--dataset=fmnist --clients=100 --sample_rate=0.2 --rounds=30 --train_items=30000 --baseline=false"

# FedLUAR (Kim, Kang & Lee): accuracy and upload against FedAvg, both through
# PREAMBLE without noise, for two MLPs and recycling budgets R.
$SIM $FL --variants=fedavg,fedluar --noise_multiplier=0 --hidden=32 --num_recycled=1 \
  --report_dir=$OUT/fedluar_h32_R1 > $OUT/fedluar_h32_R1.log
for R in 1 2; do
  $SIM $FL --variants=fedavg,fedluar --noise_multiplier=0 --hidden=128,64 --num_recycled=$R \
    --report_dir=$OUT/fedluar_h128_R$R > $OUT/fedluar_h128_R$R.log
done
# CoIDO: a 20 % subset against the full data (digits MLP and Fashion-MNIST CNN).
for s in full random coido; do
  $TRAIN --dataset=digits --model=mlp --epochs=20 --subset=$s --subset_fraction=0.2 \
    > $OUT/coido_digits_$s.log
done
# DP cost: clear FedAvg against PREAMBLE + DP with 1000 clients, q = 0.1.
$SIM --dataset=fmnist --clients=1000 --sample_rate=0.1 --rounds=20 --variants=fedavg \
  --baseline=true --noise_multiplier=1.0 --clip=1 --report_dir=$OUT/dp > $OUT/dp.log
python3 bench/claims_summary.py "$OUT"
