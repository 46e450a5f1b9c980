"""tandem.worker.Client's models as resources (LoadModel, ReadModel,
UnloadModel, ListModels, run(model=...)) against a real tandem-worker on
loopback with an 8 MiB model budget and 2 MiB messages (so that a larger
model only loads and reads back when it really travels in chunks)."""

import numpy as np
import pytest

import tandem

D = 64  # spotlight.hash dim (a multiple of 32)
TRAIN = {"gamma": 8, "top_fraction": 0.1, "lr": 2e-2}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    model_dir = tmp_path_factory.mktemp("models")
    args = ["--max_model_mb=8", "--max_message_mb=2", f"--model_dir={model_dir}"]
    with tandem.worker.LocalWorker(args=args) as w, \
            tandem.worker.Client(w.address, timeout_s=120) as c:
        yield c


def hash_weights(seed, d=D):
    """spotlight.hash weights: w1, w2 (d, d) applied as x W, b1, b2 (d,)."""
    rng = np.random.default_rng(seed)
    return {"w1": (rng.normal(size=(d, d)) / np.sqrt(d)).astype(np.float32),
            "b1": (0.01 * rng.normal(size=d)).astype(np.float32),
            "w2": (rng.normal(size=(d, d)) / np.sqrt(d)).astype(np.float32),
            "b2": (0.01 * rng.normal(size=d)).astype(np.float32)}


def spotlight_hash(x, w):
    """h = L2(L1(x)), L1(x) = SiLU(x W1 + b1) + x, L2(y) = y W2 + b2 + y."""
    x = x.astype(np.float64)
    z = x @ w["w1"] + w["b1"]
    y = z / (1 + np.exp(-z)) + x
    return y @ w["w2"] + w["b2"] + y


def weight_bytes(d=D):
    return 4 * (2 * d * d + 2 * d)


def listed(client, name):
    return {m["name"]: m for m in client.list_models()["models"]}.get(name)


def test_loaded_weights_equal_weights_sent_as_inputs(client):
    w = hash_weights(1)
    info = client.load_model("hash", "spotlight.hash", w, {"dim": D})
    assert info["name"] == "hash" and info["version"] == 1 and info["kind"] == "spotlight.hash"
    assert info["config"] == {"dim": D} and info["bytes"] == weight_bytes()
    assert info["optimizer_bytes"] == 0 and info["train_steps"] == 0
    assert info["tensors"] == [("w1", (D, D)), ("b1", (D,)), ("w2", (D, D)), ("b2", (D,))]

    x = np.random.default_rng(2).normal(size=(5, D)).astype(np.float32)
    r = client.run("spotlight.hash", [x], model="hash")      # w1..b2 come from the model
    assert r.model_version == 1
    h, codes = r.outputs
    direct = client.run("spotlight.hash", [x, w["w1"], w["b1"], w["w2"], w["b2"]])
    assert direct.model_version is None
    np.testing.assert_array_equal(h, direct.outputs[0])
    np.testing.assert_array_equal(codes, direct.outputs[1])
    np.testing.assert_allclose(h, spotlight_hash(x, w), rtol=1e-4, atol=1e-4)
    # Codes: sign bits of h, dimension 32 w + j at bit j of little-endian word w.
    np.testing.assert_array_equal(codes, np.packbits(h > 0, axis=1, bitorder="little"))

    # A pinned version: the one held runs, another is refused.
    same = client.run("spotlight.hash", {"x": x}, model=("hash", 1))
    np.testing.assert_array_equal(same.outputs[0], h)
    with pytest.raises(tandem.FailedPreconditionError, match="version"):
        client.run("spotlight.hash", [x], model=("hash", 2))
    with pytest.raises(TypeError, match="model must be"):
        client.run("spotlight.hash", [x], model=3)

    kernels = {k["name"]: k for k in client.capabilities()}
    sig = kernels["spotlight.hash"]
    assert "spotlight.hash" in sig["model_kinds"] and not sig["model_required"]
    assert [i["name"] for i in sig["inputs"] if i["from_model"]] == ["w1", "b1", "w2", "b2"]
    assert kernels["spotlight.train_step"]["trains_model"]
    assert client.unload_model("hash") == weight_bytes()


def test_training_updates_the_model_in_place(client):
    w0 = hash_weights(3)
    client.load_model("trained", "spotlight.hash", w0, {"dim": D})
    rng = np.random.default_rng(4)
    q = rng.normal(size=(16, D)).astype(np.float32)
    k = rng.normal(size=(64, D)).astype(np.float32)

    # Step 1 equals the stateless step with the weights sent as inputs
    # (a fresh AdamW state either way); with a model only the loss comes back.
    first = client.run("spotlight.train_step", [q, k], TRAIN, model="trained")
    assert first.model_version == 2 and len(first.outputs) == 1
    ref = client.run("spotlight.train_step", [q, k, w0["w1"], w0["b1"], w0["w2"], w0["b2"]],
                     TRAIN)
    assert ref.model_version is None
    np.testing.assert_array_equal(first.outputs[0], ref.outputs[0])
    header, after1 = client.read_model("trained")
    assert header["version"] == 2 and header["kind"] == "spotlight.hash"
    assert list(after1) == ["w1", "b1", "w2", "b2"]
    for name, want in zip(["w1", "b1", "w2", "b2"], ref.outputs[1:]):
        assert after1[name].dtype == np.float32 and after1[name].shape == w0[name].shape
        np.testing.assert_array_equal(after1[name], want)
    assert not np.array_equal(after1["w1"], w0["w1"])

    losses = [float(first.outputs[0])]
    for step in range(2, 9):
        r = client.run("spotlight.train_step", [q, k], TRAIN, model="trained")
        assert r.model_version == step + 1
        losses.append(float(r.outputs[0]))
    assert losses[-1] < 0.7 * losses[0], losses
    # Other optimizer params would reset the AdamW moments: refused.
    with pytest.raises(tandem.FailedPreconditionError, match="AdamW"):
        client.run("spotlight.train_step", [q, k], dict(TRAIN, lr=0.5), model="trained")

    header, w8 = client.read_model("trained", version=9)
    assert header["version"] == 9
    assert not np.array_equal(w8["w2"], after1["w2"])
    # The held weights are what the kernels use.
    x = rng.normal(size=(3, D)).astype(np.float32)
    np.testing.assert_array_equal(
        client.run("spotlight.hash", [x], model="trained").outputs[0],
        client.run("spotlight.hash", [x, w8["w1"], w8["b1"], w8["w2"], w8["b2"]]).outputs[0])

    m = listed(client, "trained")
    assert m["version"] == 9 and m["train_steps"] == 8
    assert m["optimizer_bytes"] == 3 * weight_bytes()       # AdamW: copy + two moments
    assert m["bytes"] == 4 * weight_bytes()
    models = client.list_models()
    assert models["max_bytes"] == 8 << 20 and models["used_bytes"] >= m["bytes"]

    # Unloaded: every use of the name is NOT_FOUND, the bytes are freed.
    used = models["used_bytes"]
    assert client.unload_model("trained") == 4 * weight_bytes()
    assert client.list_models()["used_bytes"] == used - 4 * weight_bytes()
    assert listed(client, "trained") is None
    with pytest.raises(tandem.NotFoundError, match="'trained'"):
        client.run("spotlight.hash", [x], model="trained")
    with pytest.raises(tandem.NotFoundError):
        client.read_model("trained")
    with pytest.raises(tandem.NotFoundError):
        client.unload_model("trained")


def test_large_model_round_trips_in_chunks(client):
    # 3 MiB of float64 sent (as float64, in 1 MiB chunks; one 2 MiB message
    # would not take it), held as float32 and read back in chunks.
    rng = np.random.default_rng(5)
    big = rng.normal(size=(384, 1024)).astype(np.float64)
    small = rng.normal(size=(2, 128)).astype(np.float32)
    info = client.load_model("blob", "tensors", {"big": big, "small": small})
    assert info["version"] == 1 and info["bytes"] == 4 * (big.size + small.size)
    assert info["tensors"] == [("big", (384, 1024)), ("small", (2, 128))]
    header, back = client.read_model("blob")
    assert header["tensors"] == info["tensors"] and header["config"] == {}
    np.testing.assert_array_equal(back["big"], big.astype(np.float32))
    np.testing.assert_array_equal(back["small"], small)

    with pytest.raises(tandem.FailedPreconditionError):        # held, no replace
        client.load_model("blob", "tensors", {"x": small})
    info = client.load_model("blob", "tensors", {"x": small * 2}, replace=True)
    assert info["version"] == 2 and info["bytes"] == 4 * small.size
    header, back = client.read_model("blob")
    assert header["version"] == 2 and list(back) == ["x"]
    np.testing.assert_array_equal(back["x"], small * 2)
    assert client.unload_model("blob", version=2) == 4 * small.size


def test_over_budget_and_bad_models_are_refused(client):
    used = client.list_models()["used_bytes"]
    # 9 MiB against the 8 MiB budget: refused on the header.
    with pytest.raises(tandem.ResourceExhaustedError, match="out of memory"):
        client.load_model("big", "tensors", {"x": np.zeros(9 << 18, np.float32)})

    w = hash_weights(6)
    bad = dict(w, b2=w["b2"].copy())
    bad["b2"][7] = np.nan
    with pytest.raises(ValueError, match="'b2': value 7 is NaN"):
        client.load_model("h", "spotlight.hash", bad, {"dim": D})
    with pytest.raises(tandem.InvalidArgumentError, match="'w1'"):
        client.load_model("h", "spotlight.hash", dict(w, w1=w["w1"][:, :-1]), {"dim": D})
    with pytest.raises(tandem.InvalidArgumentError):
        client.load_model("h", "spotlight.hash", w, {"dim": 48})  # not a multiple of 32
    with pytest.raises(tandem.InvalidArgumentError):
        client.load_model("h", "no.such.kind", w, {"dim": D})
    for dtype in (np.int32, np.complex64):
        with pytest.raises(TypeError, match="float32 or float64"):
            client.load_model("h", "tensors", {"x": np.zeros(4, dtype)})
    with pytest.raises(tandem.PermissionDeniedError):
        client.load_model("c", "mlp", config={"in": 4, "hidden_layers": 1, "hidden0": 8,
                                              "classes": 3}, checkpoint_path="../mlp.ckpt")
    with pytest.raises(tandem.NotFoundError):
        client.run("spotlight.hash", [np.zeros((2, D), np.float32)], model="h")
    assert client.list_models()["used_bytes"] == used
    assert client.health()["serving"]
