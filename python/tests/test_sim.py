"""tandem.sim: a federation whose local training is a NumPy callable,
aggregated by the real tandem-aggregator daemons (TLS, tickets, proofs)."""

import json

import numpy as np
import pytest

import tandem


@pytest.fixture(scope="module")
def digits():
    x_train, y_train, x_test, y_test = tandem.datasets.load("digits", seed=1)
    return x_train.reshape(len(x_train), -1), y_train, x_test.reshape(len(x_test), -1), y_test


@pytest.fixture(scope="module")
def aggregators():
    # One pair for the module: noise floor 0 (each run asks for its own
    # noise, >= 0), batches of one, proofs optional, no budget.
    with tandem.sim.Aggregators(tandem.sim.policy(0.0, 1, norm_proofs=False)) as a:
        yield a


def softmax_regression(digits, clients=5, steps=20, lr=0.5, seed=1):
    """train/evaluate callables of a NumPy softmax regression (W: 10 x 64, b: 10)."""
    x, y, xt, yt = digits
    shards = tandem.sim.dirichlet_split(y, clients, alpha=1.0, seed=seed)
    rng = np.random.default_rng(seed)

    def forward(w, b, xs):
        z = xs @ w.T + b
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def train(client, weights, round_):
        w, b = (a.astype(np.float64) for a in weights)
        w0, b0 = w.copy(), b.copy()
        idx = shards[client]
        for _ in range(steps):
            batch = rng.choice(idx, 32)
            p = forward(w, b, x[batch])
            p[np.arange(32), y[batch]] -= 1
            w -= lr * p.T @ x[batch] / 32
            b -= lr * p.mean(axis=0)
        return [w - w0, b - b0]

    def evaluate(weights, round_):
        p = forward(weights[0], weights[1], xt)
        return float((p.argmax(1) == yt).mean()), float(-np.log(p[np.arange(len(yt)), yt]).mean())

    init = [np.zeros((10, 64), np.float32), np.zeros(10, np.float32)]
    return train, evaluate, init


def test_private_federation_learns_and_reports(digits, aggregators, tmp_path):
    train, evaluate, init = softmax_regression(digits)
    seen = []
    result = tandem.sim.run(train, init, evaluate=evaluate, rounds=3, clients=5,
                            sample_rate=1.0, clip=2.0, noise_multiplier=0.1, norm_proofs=True,
                            block_size=64, aggregators=aggregators, name="py-private",
                            progress=seen.append, tensor_names=["fc.weight", "fc.bias"])
    records, weights = result
    assert [r["round"] for r in records] == [1, 2, 3] and seen == records
    for r in records:
        assert r["variant"] == "py-private" and r["participants"] == 5
        assert r["accepted_reports"] == 5 and r["bytes_up"] > 0 and r["bytes_down"] > 0
        # The baselines of D = 650 values per client: clear FedAvg 4 D bytes,
        # dense two-server sharing D values at the round's width to the
        # leader + a 16-byte seed: 32 bits, as 5 clients' sum fits in them.
        assert r["clear_bytes_up"] == 5 * 4 * 650
        assert r["dense_bytes_up"] == 5 * (4 * 650 + 16)
    line = tandem.sim.bytes_line(records)
    assert "x clear FedAvg (2600 B)" in line and "x dense two-server sharing (2616 B)" in line
    eps = [r["epsilon"] for r in records]
    assert 0 < eps[0] < eps[1] < eps[2]
    assert records[-1]["test_accuracy"] > 0.5      # noisy, yet well above chance (0.1)
    assert [w.shape for w in weights] == [(10, 64), (10,)]
    assert weights[0].dtype == np.float32 and np.abs(weights[0]).sum() > 0

    tandem.sim.write_report(tmp_path / "report", records, title="py test")
    html = (tmp_path / "report" / "report.html").read_text()
    assert "py-private" in html and "<svg" in html
    assert len(json.loads((tmp_path / "report" / "metrics.json").read_text())) >= 3
    assert (tmp_path / "report" / "metrics.csv").read_text().count("\n") == 4


def test_clear_baseline_needs_no_daemons(digits):
    train, evaluate, init = softmax_regression(digits)
    records, _ = tandem.sim.run(train, init, evaluate=evaluate, rounds=2, clients=5,
                                sample_rate=1.0, private=False, name="clear")
    assert records[-1]["test_accuracy"] > 0.7 and records[-1]["epsilon"] == 0


def test_fedluar_and_budget(aggregators):
    # A two-layer model (FedLUAR recycles one of its two weight matrices).
    init = [np.zeros((8, 8), np.float32), np.zeros(8, np.float32),
            np.zeros((4, 8), np.float32), np.zeros(4, np.float32)]
    rng = np.random.default_rng(2)

    def train(client, weights, round_):
        return [rng.normal(0, 0.01, w.shape) for w in weights]

    records, final = tandem.sim.run(train, init, rounds=10, clients=5, sample_rate=1.0,
                                    noise_multiplier=1.0, epsilon_budget=6.0, fedluar=True,
                                    num_recycled=1, norm_proofs=False, aggregators=aggregators,
                                    block_size=16)
    assert 1 <= len(records) < 10                  # stopped before exceeding the budget
    assert records[-1]["epsilon"] <= 6.0
    assert [w.shape for w in final] == [w.shape for w in init]


def test_starts_its_own_aggregators(digits):
    train, _, init = softmax_regression(digits, clients=3)
    records, _ = tandem.sim.run(train, init, rounds=1, clients=3, sample_rate=1.0,
                                noise_multiplier=0.5, block_size=64)
    assert records[0]["accepted_reports"] == 3


class Boom(Exception):
    pass


@pytest.mark.parametrize("bad, error, message", [
    (lambda w: (_ for _ in ()).throw(Boom("from the training step")), Boom, "training step"),
    (lambda w: [w[0]], ValueError, "expected 2 arrays"),
    (lambda w: [w[0].T, w[1]], ValueError, r"expected shape \(10, 64\)"),
    (lambda w: [np.full_like(w[0], np.nan), w[1]], ValueError, "NaN"),
    (lambda w: [w[0].astype(np.int64), w[1]], TypeError, "float32 or float64"),
    (lambda w: None, TypeError, "float32 or float64"),
])
def test_callback_errors_stop_the_run_and_propagate(digits, aggregators, bad, error, message):
    _, _, init = softmax_regression(digits)
    with pytest.raises(error, match=message):
        tandem.sim.run(lambda c, w, r: bad(w), init, rounds=2, clients=3, sample_rate=1.0,
                       aggregators=aggregators, block_size=64)


def test_bad_initial_weights_and_evaluate(digits, aggregators):
    train, _, init = softmax_regression(digits)
    with pytest.raises(TypeError, match="initial weights"):
        tandem.sim.run(train, [np.zeros((10, 64), np.int32)], rounds=1, aggregators=aggregators)
    with pytest.raises(ValueError, match="NaN"):
        tandem.sim.run(train, [np.full((2, 2), np.nan, np.float32)], rounds=1,
                       aggregators=aggregators)
    with pytest.raises(TypeError, match="accuracy, loss"):
        tandem.sim.run(train, init, evaluate=lambda w, r: "high", rounds=1, clients=3,
                       sample_rate=1.0, aggregators=aggregators, block_size=64)
    with pytest.raises(tandem.InvalidArgumentError):
        tandem.sim.run(train, init, rounds=0, aggregators=aggregators)


def test_dirichlet_split_and_datasets(digits):
    _, y, _, _ = digits
    shards = tandem.sim.dirichlet_split(y, 10, alpha=0.5, seed=3)
    assert len(shards) == 10 and all(len(s) >= 10 for s in shards)
    assert sorted(np.concatenate(shards).tolist()) == list(range(len(y)))
    with pytest.raises(TypeError):
        tandem.sim.dirichlet_split(y.astype(np.float32), 10)
    with pytest.raises(tandem.InvalidArgumentError):
        tandem.sim.dirichlet_split(y, 10, alpha=-1)
    x, yl, xt, yt = tandem.datasets.load("digits", seed=1)
    assert x.shape[1:] == (1, 8, 8) and x.dtype == np.float32 and 0 <= x.min() <= x.max() <= 1
    assert yl.dtype == np.int64 and len(xt) == len(yt)
    with pytest.raises(tandem.InvalidArgumentError):
        tandem.datasets.load("imagenet")


def test_upload_cap_and_target_epsilon_set_d_and_noise(digits):
    # 650 parameters in blocks of 64 with norm proofs: the proof's fixed
    # elements keep every d above a tenth of dense sharing's bytes, 2x is
    # reachable.
    train, _, init = softmax_regression(digits, clients=4)
    records, _ = tandem.sim.run(train, init, rounds=3, clients=4, sample_rate=0.5,
                                block_size=64, norm_proofs=True, max_upload_vs_dense=2.0,
                                target_epsilon=40.0)
    assert len(records) == 3
    for r in records:
        assert r["accepted_reports"] == r["participants"]
        # Shares within 2x dense sharing, plus each report's ticket and signatures.
        assert r["bytes_up"] <= 2 * r["dense_bytes_up"] + 1024 * r["participants"]
    assert 40.0 - 1e-3 < records[-1]["epsilon"] <= 40.0
    with pytest.raises(ValueError, match="the least is"):
        tandem.sim.run(train, init, rounds=1, clients=4, block_size=64, norm_proofs=True,
                       max_upload_vs_dense=0.1)
