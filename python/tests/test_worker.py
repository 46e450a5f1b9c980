"""tandem.worker.Client against a real tandem-worker on loopback."""

import numpy as np
import pytest

import tandem


@pytest.fixture(scope="module")
def client():
    with tandem.worker.LocalWorker() as w, tandem.worker.Client(w.address, timeout_s=120) as c:
        yield c


def dense_attention(q, k, v, causal=False):
    d = q.shape[-1]
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v


def test_health_and_capabilities(client):
    h = client.health()
    assert h["serving"] and h["backend"]
    kernels = {k["name"]: k for k in client.capabilities()}
    a = kernels["attention.dense"]
    assert [(i["name"], i["dtype"], i["rank"]) for i in a["inputs"]] == [
        ("q", "float32", 3), ("k", "float32", 3), ("v", "float32", 3)]
    assert "causal" in a["params"] and "cpu" in a["backends"]


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_matches_numpy(client, causal):
    rng = np.random.default_rng(causal)
    q, k, v = (rng.normal(size=(2, 16, 8)).astype(np.float32) for _ in range(3))
    out = client.run("attention.dense", [q, k, v], {"causal": causal})
    assert out.backend in ("cpu", "cuda") and out.elapsed_us >= 0
    (o,) = out.outputs
    assert o.shape == (2, 16, 8) and o.dtype == np.float32
    np.testing.assert_allclose(o, dense_attention(q, k, v, causal), atol=1e-4)
    # Inputs by name (in the kernel's order), float64 sent as float64.
    o2 = client.run("attention.dense", {"q": q, "k": k, "v": v.astype(np.float64)},
                    {"causal": causal}).outputs[0]
    np.testing.assert_allclose(o2, o, atol=1e-5)


def test_integer_and_scalar_outputs(client):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 4)).astype(np.float32)
    points = client.run("hdd.expmap0", [x], {"k": 1.0}).outputs[0]
    back = client.run("hdd.logmap0", [points], {"k": 1.0}).outputs[0]
    np.testing.assert_allclose(back, x, atol=1e-4)
    codes = client.run("prune.project", [np.linspace(0, 1, 10, dtype=np.float32)],
                       {"keep": 3}).outputs
    assert codes[1].shape == (10,) and int(codes[1].astype(np.int64).sum()) == 3


def test_large_tensors_go_through_the_stream(client):
    # 40 MiB of input: above one message, sent and received in chunks.
    x = np.random.default_rng(4).normal(size=(2_621_440, 4)).astype(np.float32)
    points = client.run("hdd.expmap0", [x], {"k": 1.0}).outputs[0]
    assert points.shape == (2_621_440, 5)
    np.testing.assert_allclose(points[:1000, 1:] / np.linalg.norm(points[:1000, 1:], axis=1,
                                                                    keepdims=True),
                               x[:1000] / np.linalg.norm(x[:1000], axis=1, keepdims=True),
                               atol=1e-4)


def test_bad_inputs(client):
    q = np.zeros((2, 4, 8), np.float32)
    with pytest.raises(TypeError, match="complex"):
        client.run("attention.dense", [q.astype(np.complex64), q, q])
    with pytest.raises(TypeError, match="inputs must be"):
        client.run("attention.dense", q)
    bad = q.copy()
    bad[0, 1, 2] = np.nan
    with pytest.raises(ValueError, match="input 1: value 10 is NaN"):
        client.run("attention.dense", [q, bad, q])
    with pytest.raises(ValueError) as e:                # the worker's own check: rank
        client.run("attention.dense", [q[0], q, q])
    assert isinstance(e.value, tandem.InvalidArgumentError) and e.value.code == 3
    with pytest.raises(tandem.InvalidArgumentError, match="nonsense"):
        client.run("attention.dense", [q, q, q], {"nonsense": 1})
    with pytest.raises(tandem.UnimplementedError) as e:
        client.run("no.such.kernel", [])
    assert e.value.code == 12 and isinstance(e.value, NotImplementedError)
    with pytest.raises(tandem.UnavailableError):
        tandem.worker.Client("127.0.0.1:1", timeout_s=2).health()
    closed = tandem.worker.Client("127.0.0.1:1")
    closed.close()
    with pytest.raises(tandem.FailedPreconditionError, match="closed"):
        closed.health()
