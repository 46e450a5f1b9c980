"""tandem.load_safetensors / save_safetensors: the bytes the format
specifies, round trips, a PyTorch state_dict in and out, malformed files."""

import numpy as np
import pytest

import tandem
from tandem import safetensors as st


def test_the_specified_bytes():
    # The same known answer as ml/model/safetensors_test.cc: both writers
    # emit these bytes for a = [1, -2] (F32).
    expected = (b"\x38" + b"\0" * 7 + b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
                + b"  " + b"\x00\x00\x80\x3f\x00\x00\x00\xc0")
    assert st.dumps({"a": np.array([1, -2], np.float32)}) == expected
    assert st.loads(expected)["a"].tolist() == [1.0, -2.0]


def test_round_trip_of_every_dtype(tmp_path):
    rng = np.random.default_rng(3)
    tensors = {
        "f32": rng.normal(size=(3, 4)).astype(np.float32),
        "f64": rng.normal(size=(2,)),
        "f16": rng.normal(size=(5,)).astype(np.float16),
        "i64": rng.integers(-9, 9, size=(2, 2, 2)),
        "u8": rng.integers(0, 255, size=(7,)).astype(np.uint8),
        "b": np.array([True, False, True]),
        "scalar": np.float32(2.5),
        "empty": np.zeros((0, 3), np.float32),
    }
    path = tmp_path / "m.safetensors"
    tandem.save_safetensors(path, tensors, metadata={"note": "x"})
    back, meta = tandem.load_safetensors(path, metadata=True)
    assert meta == {"note": "x"} and list(back) == list(tensors)
    for k, v in tensors.items():
        assert back[k].dtype == np.asarray(v).dtype and back[k].shape == np.shape(v)
        np.testing.assert_array_equal(back[k], v)


def test_a_pytorch_state_dict_in_and_out(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 26 * 26, 10))
    path = tmp_path / "cnn.safetensors"
    tandem.save_safetensors(path, {k: v.numpy() for k, v in net.state_dict().items()})
    other = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 26 * 26, 10))
    other.load_state_dict({k: torch.from_numpy(v)
                           for k, v in tandem.load_safetensors(path).items()})
    x = torch.randn(2, 1, 28, 28)
    assert torch.equal(net(x), other(x))


def test_malformed_files_raise_value_error():
    good = st.dumps({"a": np.arange(3, dtype=np.float32)})
    for n in range(len(good)):
        with pytest.raises(ValueError):
            st.loads(good[:n])
    hdr = b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}'
    with pytest.raises(ValueError, match="hole"):
        st.loads(len(hdr).to_bytes(8, "little") + hdr + b"\0" * 8)
    hdr = b'{"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}}'
    with pytest.raises(ValueError, match="unknown dtype"):
        st.loads(len(hdr).to_bytes(8, "little") + hdr + b"\0" * 8)
    with pytest.raises(ValueError, match="header length"):
        st.loads((1 << 62).to_bytes(8, "little") + b"{}")
    with pytest.raises(TypeError):
        st.dumps({"c": np.array([1j])})
