#!/usr/bin/python3
"""Summarises bench/claims.sh's reports: one line per claim."""
import csv
import glob
import os
import re
import sys

out = sys.argv[1]


def variants(path):
    rows = list(csv.DictReader(open(os.path.join(path, "metrics.csv"))))
    by = {}
    for r in rows:
        by.setdefault(r["variant"], []).append(r)
    return by


for path in sorted(glob.glob(os.path.join(out, "fedluar_*"))):
    if not os.path.isdir(path):
        continue
    v = variants(path)
    avg = next(x for k, x in v.items() if k.startswith("fedavg"))
    luar = next(x for k, x in v.items() if k.startswith("fedluar"))
    acc = lambda rs: sum(float(r["test_accuracy"]) for r in rs[-3:]) / 3  # last 3 rounds
    up = lambda rs: sum(float(r["bytes_up"]) for r in rs)
    print("FedLUAR %-16s accuracy %.4f vs FedAvg %.4f = %5.1f %%; upload %5.1f %% of FedAvg's"
          % (os.path.basename(path)[8:], acc(luar), acc(avg), 100 * acc(luar) / acc(avg),
             100 * up(luar) / up(avg)))
accs = {}
for path in glob.glob(os.path.join(out, "coido_digits_*.log")):
    m = re.search(r"final test_acc ([0-9.]+)", open(path).read())
    accs[os.path.basename(path)[13:-4]] = float(m.group(1))
if accs:
    print("CoIDO digits: full %.4f, random 20 %% %.4f (%.1f %%), CoIDO 20 %% %.4f (%.1f %%)"
          % (accs["full"], accs["random"], 100 * accs["random"] / accs["full"], accs["coido"],
             100 * accs["coido"] / accs["full"]))
if os.path.isdir(os.path.join(out, "dp")):
    v = variants(os.path.join(out, "dp"))
    clear, dp = v["fedavg-clear"], v["fedavg-preamble-dp"]
    print("DP: clear FedAvg %.4f vs PREAMBLE+DP %.4f at epsilon %.2f (delta 1e-5) after %d rounds;"
          " upload %.2f %% of clear FedAvg, %.2f %% of dense two-server sharing (honest baseline)"
          % (float(clear[-1]["test_accuracy"]), float(dp[-1]["test_accuracy"]),
             float(dp[-1]["epsilon"]), len(dp),
             100 * sum(float(r["bytes_up"]) for r in dp) / sum(float(r["clear_bytes_up"]) for r in dp),
             100 * sum(float(r["bytes_up"]) for r in dp) / sum(float(r["dense_bytes_up"]) for r in dp)))
