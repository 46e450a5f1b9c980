"""safetensors files as dicts of NumPy arrays (no dependency but NumPy).

The format PyTorch and Hugging Face users exchange: an 8-byte little-endian
header length, a JSON header naming each tensor's dtype, shape and byte
range, then the raw little-endian data. tandem's coordinator keeps every
released model in it (``tandem-admin task export`` writes one out); this
module is tandem's own reader/writer of it, checked like the C++ one
(ml/model/safetensors.h): known dtypes, sizes that match the shapes, tensors
that tile the data exactly.

    state = tandem.load_safetensors("model.safetensors")
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    tandem.save_safetensors("init.safetensors", {k: v.numpy() for k, v in
                                                 model.state_dict().items()})
"""

import json
import os
import struct

import numpy as np

__all__ = ["load_safetensors", "save_safetensors", "loads", "dumps"]

_DTYPES = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype("<u1"), "I8": np.dtype("<i1"),
    "I16": np.dtype("<i2"), "U16": np.dtype("<u2"), "F16": np.dtype("<f2"),
    "I32": np.dtype("<i4"), "U32": np.dtype("<u4"), "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"), "I64": np.dtype("<i8"), "U64": np.dtype("<u8"),
}
_NAMES = {v.str if v.kind != "b" else "|b1": k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 << 20


def _invalid(what):
    return ValueError("safetensors: " + what)


def loads(data, metadata=False):
    """Parses safetensors bytes into {name: ndarray} (buffer order); with
    metadata=True returns (tensors, metadata dict). ValueError when the
    bytes are not a valid file."""
    data = memoryview(data).cast("B")
    if len(data) < 8:
        raise _invalid("shorter than its 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > _MAX_HEADER or n > len(data) - 8:
        raise _invalid("header length %d exceeds the file or the limit" % n)
    text = bytes(data[8:8 + n])
    if not text.startswith(b"{"):
        raise _invalid("header is not a JSON object")
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _invalid("header is not valid JSON (%s)" % e) from None
    if not isinstance(header, dict):
        raise _invalid("header is not a JSON object")
    buf = data[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise _invalid("__metadata__ must map strings to strings")
    entries = []
    for name, e in header.items():
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise _invalid("tensor %r: needs exactly dtype, shape, data_offsets" % name)
        if e["dtype"] not in _DTYPES:
            raise _invalid("tensor %r: unknown dtype %r" % (name, e["dtype"]))
        shape, offs = e["shape"], e["data_offsets"]
        if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise _invalid("tensor %r: shape must hold non-negative integers" % name)
        if (not isinstance(offs, list) or len(offs) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offs)
                or offs[1] < offs[0]):
            raise _invalid("tensor %r: data_offsets must be [begin, end]" % name)
        dtype = _DTYPES[e["dtype"]]
        if int(np.prod(shape, dtype=object)) * dtype.itemsize != offs[1] - offs[0]:
            raise _invalid("tensor %r: shape and dtype do not match data_offsets" % name)
        entries.append((offs[0], offs[1], name, dtype, shape))
    entries.sort(key=lambda t: (t[0], t[1]))
    at, out = 0, {}
    for begin, end, name, dtype, shape in entries:
        if begin != at:
            raise _invalid("tensor %r starts at %d, expected %d (%s)" % (
                name, begin, at, "overlap" if begin < at else "hole"))
        if end > len(buf):
            raise _invalid("tensor %r ends past the data" % name)
        out[name] = np.frombuffer(buf[begin:end], dtype=dtype).reshape(shape).copy()
        at = end
    if at != len(buf):
        raise _invalid("%d bytes of data belong to no tensor" % (len(buf) - at))
    return (out, dict(meta)) if metadata else out


def dumps(tensors, metadata=None):
    """{name: array-like} -> safetensors bytes (in the dict's order, header
    padded to 8 bytes). TypeError for a dtype the format lacks."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, value in tensors.items():
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise _invalid("bad tensor name %r" % (name,))
        a = np.asarray(value)
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        key = "|b1" if a.dtype.kind == "b" else a.dtype.str
        if key not in _NAMES:
            raise TypeError("safetensors: tensor %r has dtype %s, which the format lacks"
                            % (name, a.dtype))
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": _NAMES[key], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def load_safetensors(path, metadata=False):
    """Reads a .safetensors file (see loads)."""
    with open(path, "rb") as f:
        return loads(f.read(), metadata=metadata)


def save_safetensors(path, tensors, metadata=None):
    """Writes a .safetensors file atomically (temporary file, fsync, rename)."""
    data = dumps(tensors, metadata)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
