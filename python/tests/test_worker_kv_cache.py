"""tandem.worker.Client's KV caches as resources (CreateKvCache,
AppendKvCache, DropKvCache, ListKvCaches, run(kv_cache=...)) against a real
tandem-worker on loopback with a 1 MiB cache budget (--max_gpu_mb=1)."""

import numpy as np
import pytest

import tandem

HEADS, DIM, CODE_BYTES = 2, 32, 16  # 128-bit codes


@pytest.fixture(scope="module")
def client():
    with tandem.worker.LocalWorker(args=["--max_gpu_mb=1"]) as w, \
            tandem.worker.Client(w.address, timeout_s=120) as c:
        yield c


def tokens(rng, n):
    keys = rng.normal(size=(HEADS, n, DIM)).astype(np.float32)
    values = rng.normal(size=(HEADS, n, DIM)).astype(np.float32)
    codes = rng.integers(0, 256, size=(HEADS, n, CODE_BYTES), dtype=np.uint8)
    return keys, values, codes


def test_kernels_on_the_cache_equal_tensors_sent(client):
    rng = np.random.default_rng(1)
    info = client.create_kv_cache("seq", HEADS, DIM, code_bits=8 * CODE_BYTES)
    assert info["tokens"] == 0 and info["bytes"] == 0 and info["backend"] == "cpu"
    parts = [tokens(rng, n) for n in (30, 1, 169)]
    for part in parts:
        info = client.append_kv_cache("seq", *part)
    keys, values, codes = (np.concatenate(p, axis=1) for p in zip(*parts))
    assert info["tokens"] == 200 and info["capacity_tokens"] >= 200
    listed = client.list_kv_caches()
    assert [c["name"] for c in listed["caches"]] == ["seq"]
    assert listed["used_bytes"] == info["bytes"] and listed["max_bytes"] == 1 << 20

    query = rng.integers(0, 256, size=(4, CODE_BYTES), dtype=np.uint8)
    for head in range(HEADS):
        direct = client.run("spotlight.topk", [query, codes[head]], {"k": 12})
        cached = client.run("spotlight.topk", [query], {"k": 12},
                            kv_cache={"name": "seq", "head": head})
        for a, b in zip(cached.outputs, direct.outputs):
            np.testing.assert_array_equal(a, b)
        # The k selected scores alone: those of the indices, in their order.
        picked = client.run("spotlight.topk", [query], {"k": 12, "selected_scores": 1},
                            kv_cache={"name": "seq", "head": head})
        np.testing.assert_array_equal(picked.outputs[0], direct.outputs[0])
        np.testing.assert_array_equal(picked.outputs[1], direct.outputs[1][direct.outputs[0]])
    # A prefix of the cache.
    prefix = client.run("spotlight.topk", [query], {"k": 5},
                        kv_cache={"name": "seq", "tokens": 31})
    np.testing.assert_array_equal(
        prefix.outputs[0], client.run("spotlight.topk", [query, codes[0, :31]], {"k": 5}).outputs[0])

    q = rng.normal(size=(4, 10, DIM)).astype(np.float32)
    direct = client.run("attention.dense", [q, keys, values])
    cached = client.run("attention.dense", [q], kv_cache="seq")
    np.testing.assert_array_equal(cached.outputs[0], direct.outputs[0])

    # Ada-KV: compress once on the cache, then decode steps that send only
    # q, kept and cu_seqlens; the same as the kept rows' attention in numpy.
    prefill_q = rng.normal(size=(4, 200, DIM)).astype(np.float32)  # one per cached token
    comp = client.run("adakv.compress", [prefill_q], {"window": 8, "budget": 24},
                      kv_cache="seq").outputs
    cu, kept = comp[2], comp[3]
    assert cu[0] == 0 and cu[-1] == len(kept) and len(cu) == HEADS + 1
    q1 = rng.normal(size=(4, DIM)).astype(np.float32)
    out = client.run("adakv.decode", [q1, kept, cu], kv_cache="seq").outputs[0]
    want = np.zeros((4, DIM))
    group = 4 // HEADS
    for h in range(4):
        rows = kept[cu[h // group]:cu[h // group + 1]]
        k, v = keys[h // group, rows].astype(np.float64), values[h // group, rows].astype(np.float64)
        s = k @ q1[h].astype(np.float64) / np.sqrt(DIM)
        p = np.exp(s - s.max())
        want[h] = (p / p.sum()) @ v
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(tandem.InvalidArgumentError, match="outside"):
        client.run("adakv.decode", [q1, np.full_like(kept, 200), cu], kv_cache="seq")

    caps = {k["name"]: k for k in client.capabilities()}
    assert caps["spotlight.topk"]["accepts_kv_cache"]
    assert [i["from_cache"] for i in caps["spotlight.topk"]["inputs"]] == ["", "codes"]
    assert not caps["tensor.copy"]["accepts_kv_cache"]
    assert client.drop_kv_cache("seq") == info["bytes"]
    assert client.list_kv_caches()["used_bytes"] == 0


def test_refusals(client):
    rng = np.random.default_rng(2)
    client.create_kv_cache("r", HEADS, DIM, code_bits=8 * CODE_BYTES)
    with pytest.raises(tandem.FailedPreconditionError):
        client.create_kv_cache("r", HEADS, DIM, code_bits=8 * CODE_BYTES)
    client.append_kv_cache("r", *tokens(rng, 3))
    keys, values, codes = tokens(rng, 2000)  # 1.09 MB > 1 MiB
    with pytest.raises(tandem.ResourceExhaustedError, match="out of memory"):
        client.append_kv_cache("r", keys, values, codes)
    wide = rng.normal(size=(HEADS, 3, 2 * DIM)).astype(np.float32)
    with pytest.raises(tandem.InvalidArgumentError, match="head_dim"):
        client.append_kv_cache("r", wide, wide, tokens(rng, 3)[2])
    with pytest.raises(TypeError, match="uint8"):
        client.append_kv_cache("r", *tokens(rng, 3)[:2], np.zeros((HEADS, 3, CODE_BYTES)))
    bad = tokens(rng, 3)[0]
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        client.append_kv_cache("r", bad, bad, tokens(rng, 3)[2])
    assert client.list_kv_caches()["caches"][0]["tokens"] == 3
    query = np.zeros((1, CODE_BYTES), dtype=np.uint8)
    with pytest.raises(tandem.NotFoundError, match="nobody"):
        client.run("spotlight.topk", [query], kv_cache="nobody")
    with pytest.raises(TypeError, match="kv_cache"):
        client.run("spotlight.topk", [query], kv_cache=3)
    client.drop_kv_cache("r")
    with pytest.raises(tandem.NotFoundError):
        client.append_kv_cache("r", *tokens(rng, 3))
    with pytest.raises(tandem.NotFoundError):
        client.drop_kv_cache("r")
