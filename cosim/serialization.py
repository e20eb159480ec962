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

Decoding is bounded (issue 14): a blob is untrusted input, so :func:`loads`
refuses, before doing work proportional to them, blobs larger than
``MAX_BLOB_BYTES``, JSON nested deeper than ``MAX_DEPTH``, integers longer
than ``MAX_INT_DIGITS`` digits, non-finite or out-of-range JSON numbers
(``1e999`` parses to inf), fractions other than ``p/q`` with at most
``MAX_INT_DIGITS`` digits each (``Fraction("1e100000000")`` alone takes
seconds), strings longer than ``MAX_STRING``, more than ``MAX_ARRAYS``
arrays and arrays of more than ``MAX_NDIM`` dimensions.  What the decoded
data *means* is checked by :mod:`cosim.state_schema`.
"""
from __future__ import annotations

import json
import math
import re
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

# decoding limits (module docstring)
MAX_BLOB_BYTES = 64 * 2 ** 20
MAX_DEPTH = 32
MAX_INT_DIGITS = 64
MAX_STRING = 4096
MAX_ARRAYS = 100_000
MAX_NDIM = 4
_FRACTION = re.compile(r"-?[0-9]{1,%d}/[0-9]{1,%d}" % (MAX_INT_DIGITS, MAX_INT_DIGITS))
# possessive: one pass over a run of plain characters (a backtracking group took 10 s and
# 5.7 GB for a 50 MB string)
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.S)


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
    if isinstance(node, str):
        if len(node) > MAX_STRING:
            raise StateError(f"state blob has a string of {len(node)} characters (limit {MAX_STRING})")
        return node
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
                if not isinstance(value, str) or not _FRACTION.fullmatch(value):
                    raise StateError(f"state blob has a malformed fraction {value!r:.80} "
                                     f"(expected 'p/q' of at most {MAX_INT_DIGITS} digits each)")
                return Fraction(value)
        for k in node:
            _decode(k, arrays)  # the length limit applies to keys too
        return {k: _decode(v, arrays) for k, v in node.items()}
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    raise StateError(f"state blob has a malformed value {node!r:.80}")


def _check_string_lengths(text: bytes):
    """Every JSON string of ``text`` at most MAX_STRING characters, checked on the bytes
    before anything is decoded (a string is never allocated to be refused)."""
    for m in _JSON_STRING.finditer(text):
        size = m.end() - m.start() - 2
        if size <= MAX_STRING:
            continue
        if size <= 6 * MAX_STRING:  # a character takes at most 6 bytes (\uXXXX): decode it
            try:
                n = len(json.loads(m.group()))
            except ValueError:
                continue  # the parser says what is wrong
        else:  # certainly too long: its characters counted on the bytes (UTF-8 lead bytes)
            raw = np.frombuffer(text, dtype=np.uint8, count=size, offset=m.start() + 1)
            n = int(np.count_nonzero((raw & 0xC0) != 0x80))
        if n > MAX_STRING:
            raise StateError(f"state blob has a string of {n} characters (limit {MAX_STRING})")


def _nesting_depth(text: bytes) -> int:
    """Deepest [ / { nesting of JSON ``text`` (strings removed), in C-speed passes."""
    skeleton = np.frombuffer(_JSON_STRING.sub(b'""', text), dtype=np.uint8)
    step = (np.isin(skeleton, (ord("["), ord("{"))).astype(np.int32)
            - np.isin(skeleton, (ord("]"), ord("}"))).astype(np.int32))
    return int(np.cumsum(step).max(initial=0))


def _json_int(text):
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise StateError(f"state blob has an integer of {len(text)} digits (limit {MAX_INT_DIGITS})")
    return int(text)


def _json_float(text):
    x = float(text)
    if not math.isfinite(x):
        raise StateError(f"state blob has an out-of-range number {text[:40]!r}")
    return x


def _json_constant(name):
    raise StateError(f"state blob has a non-standard JSON constant {name!r}")


def _freeze(key):
    return tuple(_freeze(k) for k in key) if isinstance(key, (list, tuple)) else key


def loads(blob):
    """Parse a blob made by :func:`dumps`; returns ``(meta, data)``.

    Raises StateError for anything that is not an intact blob of this format
    and version (wrong type, truncation, checksum mismatch, bad header).
    """
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise StateError(f"serialized state must be bytes, got {type(blob).__name__}")
    if len(blob) > MAX_BLOB_BYTES:
        raise StateError(f"state blob has {len(blob)} bytes (limit {MAX_BLOB_BYTES})")
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
    text = body[start:start + header_len]
    _check_string_lengths(text)
    depth = _nesting_depth(text)
    if depth > MAX_DEPTH:
        raise StateError(f"state blob header is nested {depth} deep (limit {MAX_DEPTH})")
    try:
        header = json.loads(text.decode("utf-8"), parse_int=_json_int, parse_float=_json_float,
                            parse_constant=_json_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise StateError(f"state blob header is not valid JSON: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("version") != VERSION:
        raise StateError("state blob header does not describe a cosim state")
    payload = body[start + header_len:]
    arrays = []
    try:
        if not isinstance(header["arrays"], list) or len(header["arrays"]) > MAX_ARRAYS:
            raise StateError(f"state blob array table is not a list of at most {MAX_ARRAYS} entries")
        for spec in header["arrays"]:
            dtype, shape = spec["dtype"], tuple(int(s) for s in spec["shape"])
            if len(shape) > MAX_NDIM or any(d < 0 for d in shape):
                raise StateError(f"state blob holds an array of shape {shape[:8]} "
                                 f"(at most {MAX_NDIM} non-negative dimensions)")
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
    except (KeyError, TypeError, ValueError, ZeroDivisionError, RecursionError) as exc:
        raise StateError(f"state blob is malformed: {exc!r:.200}") from None
    return meta, data
