"""tandem.ReportEncoder: offline encoding, accepted inputs, clear errors."""

import threading

import numpy as np
import pytest

import tandem


def small_encoder(**kw):
    # D = 2 groups x 4 blocks x 8 = 64
    return tandem.ReportEncoder("app-task", 3, 64, 8, 2, 2, clip_l2_norm=1.0, max_summands=10,
                                **kw)


def test_encodes_into_two_requests():
    e = small_encoder()
    assert e.dimension == 64
    r = e.encode(np.full(60, 0.01, dtype=np.float32))
    assert isinstance(r, tandem.EncodedReport)
    assert isinstance(r.report_id, bytes) and len(r.report_id) == 16
    assert isinstance(r.to_leader, bytes) and isinstance(r.to_helper, bytes)
    assert len(r.to_leader) > 0 and len(r.to_helper) > 0
    assert r.to_leader != r.to_helper            # each server its own share
    assert r.upload_bytes == len(r.to_leader) + len(r.to_helper)
    assert r.clip_factor == pytest.approx(1.0)
    assert e.encode(np.full(60, 0.01, np.float32)).report_id != r.report_id  # fresh randomness


def test_clips_to_the_round_bound():
    r = small_encoder().encode(np.ones(64, dtype=np.float32))  # norm 8
    assert r.clip_factor == pytest.approx(1 / 8, rel=1e-6)


@pytest.mark.parametrize("update", [
    np.zeros(64, np.float64),                       # float64 converted
    np.zeros((8, 8), np.float32),                   # any shape, flattened
    np.zeros(128, np.float32)[::2],                 # not contiguous
    [np.zeros((4, 4), np.float32), np.zeros(10)],   # a list of tensors, concatenated
    [0.0] * 5,                                      # array-like
])
def test_accepts_float_arrays(update):
    small_encoder().encode(update)


@pytest.mark.parametrize("update, message", [
    (np.zeros(8, np.int32), "float32 or float64"),
    (np.zeros(8, np.complex64), "float32 or float64"),
    (np.zeros(8, np.float16), "float32 or float64"),
    ("not an array", "float32 or float64"),
    ([np.zeros(4, np.float32), np.zeros(4, np.int64)], r"update\[1\]"),
])
def test_wrong_dtypes_raise_type_error(update, message):
    with pytest.raises(TypeError, match=message):
        small_encoder().encode(update)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_raise_value_error(bad):
    u = np.zeros(64, np.float32)
    u[17] = bad
    with pytest.raises(ValueError, match="NaN or infinity") as e:
        small_encoder().encode(u)
    assert isinstance(e.value, tandem.InvalidArgumentError)
    assert e.value.code == 3 and e.value.code_name == "INVALID_ARGUMENT"


def test_too_long_update_is_refused():
    with pytest.raises(tandem.InvalidArgumentError, match="round's D is 64"):
        small_encoder().encode(np.zeros(65, np.float32))


def test_inconsistent_spec_is_refused():
    with pytest.raises(tandem.InvalidArgumentError):
        tandem.ReportEncoder("t", 1, 65, 8, 2, 2)   # 65 != 2 * 4 * 8
    with pytest.raises(tandem.InvalidArgumentError):
        tandem.ReportEncoder("", 1, 64, 8, 2, 2)    # task id required
    with pytest.raises(TypeError):
        tandem.ReportEncoder("t", 1, "64", 8, 2, 2)


def test_for_model_matches_the_coordinators_round():
    e = tandem.ReportEncoder.for_model(1000, block_size=64, log_blocks_per_group=1)
    assert e.dimension == 1024           # k = ceil(1000 / 128) = 8 groups of 2 blocks of 64
    plain = e.encode(np.full(1000, 0.01, np.float32))
    proved = tandem.ReportEncoder.for_model(1000, block_size=64, log_blocks_per_group=1,
                                            norm_proofs=True).encode(
                                                np.full(1000, 0.01, np.float32))
    assert proved.upload_bytes > plain.upload_bytes   # the norm proof shares ride along
    rp = tandem.ReportEncoder.round_parameters_for_model(1000, block_size=64)
    assert tandem.ReportEncoder.from_round_parameters(rp).dimension == 1024


def test_round_parameters_errors():
    with pytest.raises(tandem.InvalidArgumentError):
        tandem.ReportEncoder.from_round_parameters(b"\xff\xff\xff")
    with pytest.raises(TypeError):
        tandem.ReportEncoder.from_round_parameters("a str")
    rp = tandem.ReportEncoder.round_parameters_for_model(1 << 20)
    with pytest.raises(tandem.InvalidArgumentError):
        tandem.ReportEncoder.from_round_parameters(rp, max_dimension=1 << 16)


def test_bad_ticket_is_refused():
    with pytest.raises(tandem.InvalidArgumentError, match="ticket"):
        small_encoder().encode_with_ticket(np.zeros(64, np.float32), b"\x01\x02garbage")


def test_encodes_from_several_threads_at_once():
    e = tandem.ReportEncoder.for_model(1 << 16)
    ids, errors = [], []

    def work():
        try:
            for _ in range(3):
                ids.append(e.encode(np.full(1 << 16, 1e-3, np.float32)).report_id)
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(ids)) == 12
