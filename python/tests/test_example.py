"""examples/torch_fmnist.py, shortened: a PyTorch CNN trained by 20 Python
clients through both aggregator daemons with DP (z = 1.0), beside the clear
FedAvg baseline. Skipped without python3-torch or dataset-fashion-mnist
(deploy/install-deps.sh installs both); tandem itself never needs torch."""

import csv
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch")
if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
    pytest.skip("dataset-fashion-mnist is not installed", allow_module_level=True)

ROOT = pathlib.Path(os.environ.get("TANDEM_SOURCE_DIR",
                                   pathlib.Path(__file__).resolve().parents[2]))


def test_torch_cnn_through_the_aggregators_with_dp(tmp_path):
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "torch_fmnist.py"), "--rounds=6",
         "--train_items=12000", "--test_items=1000", f"--report_dir={tmp_path}"],
        capture_output=True, text=True, timeout=500)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "private accuracy" in out.stdout
    rows = list(csv.DictReader(open(tmp_path / "metrics.csv")))
    by_variant = {}
    for r in rows:
        by_variant.setdefault(r["variant"], []).append(r)
    clear, private = by_variant["torch-cnn-fedavg-clear"], by_variant["torch-cnn-private-dp"]
    assert len(clear) == len(private) == 6
    assert all(int(r["participants"]) == 20 and int(r["accepted_reports"]) == 20 for r in private)
    # Every block is sent (d = 0): the dense encoding uploads less than
    # PREAMBLE's keys (each value twice) and the coordinator's choice takes it.
    # 20 clients' sum fits in 32 bits: dense sharing costs clear FedAvg's
    # bytes (+ a 16-byte seed), and a proved report is the 4-byte share plus
    # the witness (8 B per value) and the proof: ~3.45x clear FedAvg (it was
    # 4.5x at 64 bits).
    assert all(r["encoding"] == "dense" for r in private)
    assert all(int(r["dense_bytes_up"]) == int(r["clear_bytes_up"]) + 16 * 20 for r in private)
    up = sum(int(r["bytes_up"]) for r in private)
    assert up < 3.6 * sum(int(r["clear_bytes_up"]) for r in private)
    eps = [float(r["epsilon"]) for r in private]
    assert 0 < eps[0] < eps[-1] < 20                 # z = 1, q = 1, 6 rounds
    assert float(clear[-1]["test_accuracy"]) > 0.45
    assert float(private[-1]["test_accuracy"]) > 0.25  # noisy, yet well above chance (0.1)
    html = (tmp_path / "report.html").read_text()
    assert "torch-cnn-private-dp" in html and "<svg" in html
