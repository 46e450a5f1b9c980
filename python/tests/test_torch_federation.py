"""examples/torch_federation.py, shortened: a PyTorch CNN given to the real
coordinator as a safetensors file through its task API (the server never
sees its architecture), beside a tandem-native CNN task on the same
coordinator trained by tandem-client processes,
trained by Python devices through both aggregator daemons (TLS, tickets,
enrollment, norm proofs, each server's noise), privately evaluated by them
after every release, exported with tandem-admin and evaluated again in plain
PyTorch. Skipped without python3-torch."""

import importlib.util
import os
import pathlib

import numpy as np
import pytest

pytest.importorskip("torch")

ROOT = pathlib.Path(os.environ.get("TANDEM_SOURCE_DIR",
                                   pathlib.Path(__file__).resolve().parents[2]))


def load_example():
    spec = importlib.util.spec_from_file_location(
        "torch_federation", ROOT / "examples" / "torch_federation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_torch_model_through_the_real_daemons(tmp_path):
    # Three devices: little noise (z = 0.02 per server) so that two rounds
    # visibly learn; DP that protects needs far more devices (the example's
    # defaults, README).
    # The same coordinator also runs a tandem-native CNN task trained by three
    # tandem-client (C++) processes: two tasks side by side, both created by
    # the operator through the task API.
    r = load_example().main(["--rounds=2", "--clients=3", "--noise_multiplier=0.02",
                             "--eval_noise_multiplier=0.01", "--eval_max_examples=100",
                             "--clip=2", "--local_steps=30", "--native_clients=3",
                             f"--work_dir={tmp_path}"])
    for task in ("torch", "native-cnn"):
        assert r[task].startswith(task + " active origin=api"), r[task]
        assert "phase=done rounds=2/2" in r[task], r[task]
    evals = r["evaluations"]
    assert [e["version"] for e in evals] == [1, 2]          # one after every release
    assert all(e["reports"] == 3 for e in evals)
    assert 0 < evals[0]["epsilon"] < evals[1]["epsilon"]     # charged like a release
    assert r["exported_accuracy"] > 0.3                      # chance: 0.1
    # The exported file is bit-exactly the version the devices evaluated last,
    # under the state_dict's own names.
    assert list(r["exported"]) == list(r["last_downloaded"])
    for name, value in r["last_downloaded"].items():
        np.testing.assert_array_equal(r["exported"][name], value)
    # The noised federated accuracy is the plain accuracy of that version on
    # the examples the devices counted (100 each), up to the noise: correct
    # and examples each get Gaussian noise of sd `sd` (sqrt(2 servers x 5
    # counts) x z=0.01 x 100 = 3.2 examples), so the ratio's sd is about
    # sd * sqrt(1 + acc^2) / n. Five of those: a broken sum is off by far more.
    last = evals[-1]
    assert last["examples"] == pytest.approx(r["counted_examples"], abs=6 * last["sd"])
    ratio_sd = last["sd"] * np.sqrt(1 + r["counted_accuracy"] ** 2) / r["counted_examples"]
    assert ratio_sd < 0.02, ratio_sd
    assert abs(last["accuracy"] - r["counted_accuracy"]) < 5 * ratio_sd + 0.01, (
        last, r["counted_accuracy"])
