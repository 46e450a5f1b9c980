"""tandem.Participant against the real daemons: both aggregators (TLS,
roles, ticket checks, norm proofs required) and tandem-coordinator (a
digits MLP task), the client pinning both aggregators."""

import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest

import tandem
from conftest import binary

SHAPES = [(16, 64), (16,), (10, 16), (10,)]   # MLP 64 -> 16 -> 10 of the task


def until_assigned(p, timeout_s=60):
    end = time.time() + timeout_s
    while time.time() < end:
        r = p.check_in()
        if r.outcome != "not_selected":
            return r
        time.sleep(min(r.retry_after_ms, 300) / 1000)
    raise AssertionError("no assignment in time")


def small_update(weights, seed=1, scale=0.01):
    rng = np.random.default_rng(seed)
    return [rng.normal(0, scale, w.shape).astype(np.float32) for w in weights]


def test_rounds_through_both_aggregators(federation_factory, tmp_path):
    f = federation_factory(rounds=2)
    p = f.participant("py-client-1", state_dir=tmp_path / "state")
    r = until_assigned(p)
    assert r.outcome == "assigned"
    a = r.assignment
    assert p.assignment.round_id == a.round_id == r.round_id
    assert [t.shape for t in a.tensors] == SHAPES
    assert [t.name for t in a.tensors][0].endswith("weight")
    assert a.num_params == 1210 and a.norm_proofs and a.ticketed
    assert a.clip_l2_norm == 1.0 and a.training.local_steps == 5
    w1 = p.download_model()
    assert [w.shape for w in w1] == SHAPES and all(w.dtype == np.float32 for w in w1)

    update = small_update(w1)                    # norm ~0.35 < C = 1: not clipped
    up = p.upload(update, num_examples=40)
    assert isinstance(up, tandem.UploadResult)
    assert up.round_id == a.round_id and not up.resent
    assert len(up.report_id) == 16 and up.bytes_up > 0
    assert up.clip_factor == pytest.approx(1.0)
    assert p.pending_report() is None and p.assignment is None
    with pytest.raises(tandem.FailedPreconditionError):   # one report per assignment
        p.upload(update)

    # The released round moved the model by the decoded aggregate: one of the
    # two blocks of every group was sent, scaled by 2 (unbiased), no noise.
    r2 = until_assigned(p)
    assert r2.outcome == "assigned" and r2.round_id > r.round_id
    w2 = p.download_model()
    u = np.concatenate([x.ravel() for x in update])
    d = np.concatenate([(b - a).ravel() for a, b in zip(w1, w2)])
    sent = np.isclose(d, 2 * u, atol=1e-4)
    unsent = np.abs(d) < 1e-4
    assert np.all(sent | unsent)
    assert 0.3 < np.mean(sent & ~unsent) < 0.7
    p.upload(update, num_examples=40)            # a flat update works too below
    assert until_assigned(p).outcome == "done"

    # Every released version is kept as safetensors; tandem-admin exports one,
    # bit-exactly what clients downloaded, under the assignment's names.
    out = tmp_path / "v1.safetensors"
    subprocess.run([binary("admin"), "task", "export", f"--state_dir={f.dir}/coordinator",
                    "--task=py", "--version=1", f"--out={out}"], check=True,
                   capture_output=True)
    state, meta = tandem.load_safetensors(out, metadata=True)
    assert list(state) == [t.name for t in a.tensors]
    assert meta["tandem.task_id"] == "py" and meta["tandem.model_version"] == "1"
    for v, w in zip(state.values(), w2):
        np.testing.assert_array_equal(v, w)


def test_flat_update_and_participate(federation_factory):
    f = federation_factory(rounds=1)
    p = f.participant("py-client-flat")
    seen = {}

    def train(weights, assignment):
        seen["a"] = assignment
        return np.full(assignment.num_params, 1e-3, np.float64), 12   # flat, float64

    out = None
    for _ in range(100):
        out = p.participate(train)
        if not (isinstance(out, tandem.CheckInResult) and out.outcome == "not_selected"):
            break
        time.sleep(0.2)
    assert isinstance(out, tandem.UploadResult), out
    assert seen["a"].num_params == 1210


BAD_UPDATES = [
    (lambda w: [x.astype(np.int32) for x in w], TypeError, "float32 or float64"),
    (lambda w: w[:3], ValueError, "expected 4 arrays"),
    (lambda w: [w[0].T] + w[1:], ValueError, r"expected shape \(16, 64\), got \(64, 16\)"),
    (lambda w: [w[0], np.full((16,), np.nan, np.float32)] + w[2:], ValueError, "NaN"),
    (lambda w: w[:3] + [np.full((10,), np.inf)], ValueError, "infinite"),
    (lambda w: np.zeros(1209, np.float32), ValueError, "1210 values"),
    (lambda w: {"fc1.weight": w[0]}, ValueError, "missing"),   # by name: every tensor
    (lambda w: {"fc1.weight": w[0], "fc1.bias": w[1], "out.weight": w[2], "out.bias": w[3],
                "extra": w[3]}, ValueError, "extra"),
    (lambda w: "update", TypeError, "float32 or float64"),
]


def test_bad_updates_raise_and_leave_the_pending_report_intact(federation_factory, tmp_path):
    f = federation_factory(rounds=1)
    state = tmp_path / "state"
    p = f.participant("py-client-2", state_dir=state, upload_attempts=1, rpc_timeout_ms=1500)
    r = until_assigned(p)
    weights = p.download_model()
    update = small_update(weights)
    # The leader paused: the upload fails after the report was encoded and stored.
    leader_pid = f.aggregators.pids[0]
    os.kill(leader_pid, signal.SIGSTOP)
    try:
        with pytest.raises(tandem.Error) as e:
            p.upload(update)
        assert e.value.code in (4, 14)   # DEADLINE_EXCEEDED or UNAVAILABLE
    finally:
        os.kill(leader_pid, signal.SIGCONT)
    pending = p.pending_report()
    assert pending == {"task_id": "py", "round_id": r.round_id, "report_id": pending["report_id"],
                       "stored": True}
    stored = (state / "pending-report").read_bytes()

    for make, error, message in BAD_UPDATES:
        with pytest.raises(error, match=message):
            p.upload(make([w.copy() for w in update]))
        assert p.pending_report() == pending
        assert (state / "pending-report").read_bytes() == stored

    # The app restarts (a new Participant over the same state dir): its
    # check-in resends the stored report -- the same one, never a second.
    p2 = f.participant("py-client-2", state_dir=state)
    r2 = until_assigned(p2)
    assert r2.outcome == "resent" and r2.round_id == r.round_id and r2.bytes_up > 0
    assert p2.pending_report() is None
    assert not (state / "pending-report").exists()
    assert until_assigned(p2).outcome == "done"


def test_a_retried_upload_resends_the_same_report(federation_factory):
    f = federation_factory(rounds=1)
    p = f.participant("py-client-3", upload_attempts=1, rpc_timeout_ms=1500)  # memory only
    until_assigned(p)
    update = small_update(p.download_model())
    helper_pid = f.aggregators.pids[1]
    os.kill(helper_pid, signal.SIGSTOP)
    try:
        with pytest.raises(tandem.Error):
            p.upload(update)
    finally:
        os.kill(helper_pid, signal.SIGCONT)
    assert p.pending_report()["stored"] is False
    again = p.upload(small_update(update, seed=2))   # checked, then the stored report resent
    assert again.resent
    assert until_assigned(p).outcome == "done"


def test_options_and_call_order_errors(federation_factory, tmp_path):
    f = federation_factory(rounds=1)
    ca = f"{f.certs}/ca.pem"
    with pytest.raises(tandem.InvalidArgumentError, match="root CA path is empty"):
        tandem.Participant(f.coordinator.address, "c")   # TLS unless insecure_plaintext
    with pytest.raises(tandem.InvalidArgumentError, match="pin both"):
        tandem.Participant(f.coordinator.address, "c", tls_root_ca=ca, leader=f.leader)
    with pytest.raises(ValueError, match="one server would receive both shares"):
        tandem.Participant(f.coordinator.address, "c", tls_root_ca=ca, leader=f.leader,
                           helper=f.leader)
    with pytest.raises(tandem.InvalidArgumentError):
        tandem.Participant(f.coordinator.address, "bad id with spaces", tls_root_ca=ca)
    p = f.participant("py-client-4")
    with pytest.raises(tandem.FailedPreconditionError, match="check_in"):
        p.upload(np.zeros(1210, np.float32))
    with pytest.raises(tandem.FailedPreconditionError):
        p.download_model()
    # A coordinator naming another helper than the pinned one is refused.
    wrong = tandem.Participant(f.coordinator.address, "py-client-5",
                               tls_root_ca=f"{f.certs}/ca.pem", leader=f.leader,
                               leader_name="leader.tandem", helper="127.0.0.1:1",
                               helper_name="helper.tandem", enrollment_token=f.token())
    with pytest.raises(tandem.FailedPreconditionError, match="pins helper"):
        until_assigned(wrong)
    # A device the operator did not enroll (no token, or a token already
    # redeemed by another device) is refused before any round state.
    outsider = f.participant("py-outsider", enrollment_token="")
    with pytest.raises(tandem.PermissionDeniedError, match="not enrolled"):
        outsider.check_in()
    token = f.token()
    f.participant("py-first", enrollment_token=token).check_in()
    with pytest.raises(tandem.PermissionDeniedError, match="already redeemed"):
        f.participant("py-second", enrollment_token=token).check_in()
    with pytest.raises(tandem.InvalidArgumentError, match="enrollment token"):
        f.participant("py-typo", enrollment_token="not-a-token")
    # Roots of another CA: the coordinator's certificate does not verify.
    blind = tandem.Participant(f.coordinator.address, "py-client-6",
                               tls_root_ca=f"{f.certs}/rogue-ca.pem", rpc_timeout_ms=2000,
                               upload_attempts=1, leader=f.leader, leader_name="leader.tandem",
                               helper=f.helper, helper_name="helper.tandem")
    # Over TLS, a client without the aggregators' identities is a
    # configuration error (it would trust whatever the coordinator names).
    with pytest.raises(tandem.InvalidArgumentError, match="pin both aggregators' TLS identities"):
        tandem.Participant(f.coordinator.address, "py-unpinned", tls_root_ca=ca)
    with pytest.raises(tandem.Error) as e:
        blind.check_in()
    assert e.value.code in (4, 14)
    p.cancel()
    with pytest.raises(tandem.CancelledError):
        p.check_in()


def test_federated_evaluation_from_numpy(federation_factory):
    """Issue 33: an evaluation assignment, evaluated by the app itself (a NumPy
    forward pass here, any framework's logits in general), reported through
    both aggregators; the coordinator records the noised sums."""
    f = federation_factory(rounds=1, extra=("--eval_every=1", "--eval_noise_multiplier=0.01"))
    p = f.participant("py-evaluator")
    r = until_assigned(p)
    assert r.assignment.evaluation is None
    with pytest.raises(tandem.FailedPreconditionError):
        p.upload_evaluation({"examples": 0, "correct": 0, "loss_sum": 0,
                             "class_examples": [0] * 10, "class_correct": [0] * 10})
    p.upload(small_update(p.download_model()), num_examples=40)

    r = until_assigned(p)                      # the released version's evaluation
    settings = r.assignment.evaluation
    assert settings is not None and settings.num_classes == 10
    assert settings.max_examples == 100 and settings.loss_clip == 10
    w1, b1, w2, b2 = p.download_model()
    with pytest.raises(tandem.FailedPreconditionError):   # not a training round
        p.upload([np.zeros_like(w) for w in (w1, b1, w2, b2)])
    _, _, x, y = tandem.datasets.load("digits", seed=1)   # the task's held-out split
    x = np.asarray(x, np.float32).reshape(len(y), -1)
    logits = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    counts = tandem.evaluation_counts(logits, y, settings)
    assert counts["examples"] == 100 and sum(counts["class_examples"]) == 100
    bad = dict(counts, correct=counts["examples"] + 1)
    with pytest.raises(tandem.InvalidArgumentError):
        p.upload_evaluation(bad)
    up = p.upload_evaluation(counts)
    assert up.bytes_up > 0 and not up.resent
    assert until_assigned(p).outcome == "done"
    log = open(f"{f.dir}/coordinator.log").read()
    m = re.search(r"federated evaluation of version 1 from 1 reports: accuracy ([0-9.e-]+), "
                  r"loss [0-9.e-]+ over ~([0-9.e-]+) examples", log)
    assert m, log[-2000:]
    assert abs(float(m.group(2)) - 100) < 20              # noise sd ~3.2 examples
    assert abs(float(m.group(1)) - counts["correct"] / 100) < 0.2
