"""The GIL is released while tandem encodes, waits on the network or runs a
kernel: another Python thread keeps running during the call.

Probe: the call runs in a thread while the main thread spins on pure Python
and records the longest pause between its iterations. Holding the GIL for
the call would pause the main thread for (nearly) the call's whole duration;
released, the pauses stay at the interpreter's switch interval (5 ms).
ctest runs this file alone (RUN_SERIAL), so that other tests' load does not
stretch the pauses."""

import socket
import threading
import time

import numpy as np
import pytest

import tandem


def longest_main_thread_pause(call, repeats=1):
    """Runs `call` `repeats` times in a thread; returns the main thread's
    longest pause and {"seconds": total, "shortest": shortest call, "error"}.
    """
    done = {}

    def run():
        t0 = time.perf_counter()
        shortest = float("inf")
        try:
            for _ in range(repeats):
                c0 = time.perf_counter()
                call()
                shortest = min(shortest, time.perf_counter() - c0)
        except Exception as e:  # noqa: BLE001 (the probe measures, errors are expected)
            done["error"] = e
            shortest = min(shortest, time.perf_counter() - c0)
        done["seconds"] = time.perf_counter() - t0
        done["shortest"] = shortest

    t = threading.Thread(target=run)
    last = time.perf_counter()
    longest = 0.0
    t.start()
    while t.is_alive():
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
    t.join()
    return longest, done


def assert_released(call, min_seconds, repeats=1):
    """Each of the `repeats` calls must last >= min_seconds, and the main
    thread's longest pause must stay under 0.4 of the shortest call: a call
    that kept the GIL would pause it for that whole call (the gaps between
    calls, where the GIL is free, cannot hide it)."""
    longest, done = longest_main_thread_pause(call, repeats)
    assert done["shortest"] >= min_seconds, f"a call was too short to probe: {done}"
    assert longest < 0.4 * done["shortest"], (
        f"main thread paused {longest * 1e3:.0f} ms; the shortest call took "
        f"{done['shortest'] * 1e3:.0f} ms")
    return done


def test_the_probe_sees_a_call_that_holds_the_gil():
    # list.sort is C code that keeps the GIL for the whole sort. Two calls:
    # the gap between them, where the GIL is free, must not hide either.
    values = np.random.default_rng(0).permutation(3_000_000).tolist()
    longest, done = longest_main_thread_pause(lambda: sorted(values), repeats=2)
    assert done["shortest"] > 0.05 and longest > 0.4 * done["shortest"]


def test_encoding_releases_the_gil():
    e = tandem.ReportEncoder.for_model(1 << 22, block_size=1024)
    update = np.full(1 << 22, 1e-4, np.float32)
    done = assert_released(lambda: e.encode(update), 0.025, repeats=4)
    assert "error" not in done


def test_network_waits_release_the_gil():
    # A coordinator that accepts connections and never answers.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        p = tandem.Participant(f"127.0.0.1:{silent.getsockname()[1]}", "gil-probe",
                               insecure_plaintext=True, rpc_timeout_ms=700, upload_attempts=1)
        done = assert_released(p.check_in, 0.5)
        assert isinstance(done["error"], tandem.DeadlineExceededError)
    finally:
        silent.close()


def test_kernel_calls_release_the_gil():
    with tandem.worker.LocalWorker() as w, tandem.worker.Client(w.address) as c:
        # 2,048 keys: each call ~0.2 s on a fast Xeon (1,024 keys took 49 ms
        # there, too short to probe).
        q = np.random.default_rng(0).normal(size=(8, 2048, 64)).astype(np.float32)
        done = assert_released(lambda: c.run("attention.dense", [q, q, q]), 0.05, repeats=2)
        assert "error" not in done


def test_private_rounds_release_the_gil():
    init = [np.zeros((256, 512), np.float32)]

    def train(client, weights, round_):
        return [np.full((256, 512), 1e-4, np.float32)]

    with tandem.sim.Aggregators(tandem.sim.policy(0.0, 1, norm_proofs=False)) as a:
        done = assert_released(
            lambda: tandem.sim.run(train, init, rounds=2, clients=4, sample_rate=1.0,
                                   noise_multiplier=0.5, norm_proofs=False, aggregators=a),
            0.1)
    assert "error" not in done


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
