"""Versioned, self-describing state blobs — no pickle, nothing executable.

Layout (all integers little-endian)::

    MAGIC (12 bytes) | version u16 | header length u32 | header (UTF-8 JSON)
    | array payload (raw little-endian buffers) | CRC-32 u32 of everything before

The JSON header is ``{"format", "version", "meta", "arrays": [{dtype, shape,
offset, nbytes}], "data"}``.  ``data`` is a tree of JSON values in which
numpy arrays are replaced by ``{"__array__": i}`` (index into ``arrays``),
tuples by ``{"__tuple__": [...]}``, non-string-keyed dicts by
``{"__items__": [[k, v], ...]}``, non-finite floats by ``{"__float__": "nan"}``
and Fractions by ``{"__fraction__": "p/q"}``.  Floats are written with
``repr`` (shortest round-trip decimal), arrays as raw bytes, so a round trip
is bit-identical.  Only numeric/bool dtypes are accepted; any damage
(checksum, magic, version, truncation, malformed tree) raises StateError.
"""
from __future__ import annotations

import json
import math
import struct
import zlib
from fractions import Fraction

import numpy as np

from .errors import StateError

MAGIC = b"COSIM-STATE\x00"
VERSION = 1
FORMAT = "cosim-state"
_PREFIX = struct.Struct("<HI")
_CRC = struct.Struct("<I")
# dtypes a blob may contain (no object dtype: nothing can execute code)
_DTYPES = {"<f8", "<f4", "<i8", "<i4", "<i2", "|i1", "<u8", "<u4", "<u2", "|u1", "|b1", "<c16"}
_MARKERS = ("__array__", "__tuple__", "__items__", "__float__", "__fraction__")


class _Encoder:
    def __init__(self):
        self.arrays = []
        self.buffers = []
        self.offset = 0

    def encode(self, obj):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, (int, np.integer)) and not isinstance(obj, np.bool_):
            return int(obj)
        if isinstance(obj, np.bool_):
            return bool(obj)
        if isinstance(obj, (float, np.floating)):
            x = float(obj)
            if math.isfinite(x):
                return x
            return {"__float__": repr(x)}
        if isinstance(obj, np.ndarray):
            return self._array(obj)
        if isinstance(obj, Fraction):
            return {"__fraction__": f"{obj.numerator}/{obj.denominator}"}
        if isinstance(obj, list):
            return [self.encode(v) for v in obj]
        if isinstance(obj, tuple):
            return {"__tuple__": [self.encode(v) for v in obj]}
        if isinstance(obj, dict):
            if all(isinstance(k, str) for k in obj) and not (len(obj) == 1 and next(iter(obj)) in _MARKERS):
                return {k: self.encode(v) for k, v in obj.items()}
            return {"__items__": [[self.encode(k), self.encode(v)] for k, v in obj.items()]}
        raise StateError(f"cannot serialize a value of type {type(obj).__name__}: {obj!r:.80}")

    def _array(self, arr):
        dt = arr.dtype.newbyteorder("<") if arr.dtype.byteorder not in ("|", "<", "=") else arr.dtype
        if dt.byteorder == "=":
            dt = dt.newbyteorder("<")
        if dt.str not in _DTYPES:
            raise StateError(f"cannot serialize an array of dtype {arr.dtype}")
        raw = np.ascontiguousarray(arr, dtype=dt).tobytes()
        self.arrays.append({"dtype": dt.str, "shape": list(arr.shape), "offset": self.offset,
                            "nbytes": len(raw)})
        self.buffers.append(raw)
        self.offset += len(raw)
        return {"__array__": len(self.arrays) - 1}


def dumps(data, meta=None) -> bytes:
    """Serialize plain ``data`` (and a ``meta`` dict describing it) to bytes."""
    enc = _Encoder()
    tree = enc.encode(data)
    meta_tree = enc.encode(meta or {})
    header = json.dumps({"format": FORMAT, "version": VERSION, "meta": meta_tree,
                         "arrays": enc.arrays, "data": tree},
                        separators=(",", ":"), allow_nan=False).encode("utf-8")
    body = b"".join([MAGIC, _PREFIX.pack(VERSION, len(header)), header, *enc.buffers])
    return body + _CRC.pack(zlib.crc32(body) & 0xFFFFFFFF)


def _decode(node, arrays):
    if isinstance(node, list):
        return [_decode(v, arrays) for v in node]
    if isinstance(node, dict):
        if len(node) == 1:
            (key, value), = node.items()
            if key == "__array__":
                if not isinstance(value, int) or not 0 <= value < len(arrays):
                    raise StateError(f"state blob refers to a missing array {value!r}")
                return arrays[value].copy()
            if key == "__tuple__":
                return tuple(_decode(v, arrays) for v in value)
            if key == "__items__":
                return {_freeze(_decode(k, arrays)): _decode(v, arrays) for k, v in value}
            if key == "__float__":
                if value not in ("nan", "inf", "-inf"):
                    raise StateError(f"state blob has a malformed float {value!r}")
                return float(value)
            if key == "__fraction__":
                return Fraction(value)
        return {k: _decode(v, arrays) for k, v in node.items()}
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    raise StateError(f"state blob has a malformed value {node!r:.80}")


def _freeze(key):
    return tuple(_freeze(k) for k in key) if isinstance(key, (list, tuple)) else key


def loads(blob):
    """Parse a blob made by :func:`dumps`; returns ``(meta, data)``.

    Raises StateError for anything that is not an intact blob of this format
    and version (wrong type, truncation, checksum mismatch, bad header).
    """
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise StateError(f"serialized state must be bytes, got {type(blob).__name__}")
    blob = bytes(blob)
    n_min = len(MAGIC) + _PREFIX.size + _CRC.size
    if len(blob) < n_min or not blob.startswith(MAGIC):
        raise StateError("not a cosim state blob (bad magic header or too short)")
    body, (crc,) = blob[:-_CRC.size], _CRC.unpack(blob[-_CRC.size:])
    version, header_len = _PREFIX.unpack_from(blob, len(MAGIC))
    if version != VERSION:
        raise StateError(f"state blob has format version {version}, this cosim reads {VERSION}")
    if zlib.crc32(body) & 0xFFFFFFFF != crc:
        raise StateError("state blob is corrupt or truncated (checksum mismatch)")
    start = len(MAGIC) + _PREFIX.size
    if start + header_len > len(body):
        raise StateError("state blob is truncated (header longer than the blob)")
    try:
        header = json.loads(body[start:start + header_len].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise StateError(f"state blob header is not valid JSON: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("version") != VERSION:
        raise StateError("state blob header does not describe a cosim state")
    payload = body[start + header_len:]
    arrays = []
    try:
        for spec in header["arrays"]:
            dtype, shape = spec["dtype"], tuple(int(s) for s in spec["shape"])
            off, nbytes = int(spec["offset"]), int(spec["nbytes"])
            if dtype not in _DTYPES:
                raise StateError(f"state blob holds an array of forbidden dtype {dtype!r}")
            dt = np.dtype(dtype)
            if off < 0 or off + nbytes > len(payload) or nbytes != dt.itemsize * math.prod(shape):
                raise StateError("state blob array table does not match its payload")
            arrays.append(np.frombuffer(payload, dtype=dt, count=math.prod(shape), offset=off).reshape(shape))
        meta = _decode(header["meta"], arrays)
        data = _decode(header["data"], arrays)
    except StateError:
        raise
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise StateError(f"state blob is malformed: {exc!r}") from None
    return meta, data
