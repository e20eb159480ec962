"""State blobs: bit-exact round trip, no pickle, corruption and foreign blobs rejected."""
import struct
import zlib
from fractions import Fraction

import numpy as np
import pytest

import cosim
from cosim import serialization
from cosim.errors import StateError


def test_round_trip_is_bit_identical_for_nested_plain_data():
    data = {
        "t": 0.1 + 0.2, "neg_zero": -0.0, "tiny": 5e-324, "inf": float("inf"), "nan": float("nan"),
        "big": 2 ** 70, "none": None, "flag": True, "name": "ü-name",
        "y": np.array([1 / 3, -2.5e-300, np.pi]), "mat": np.arange(6, dtype=np.int64).reshape(2, 3),
        "mask": np.array([True, False]), "empty": np.zeros((0, 4)), "tuple": (1, 2.5, "a"),
        "intkeys": {1: "one", (2, 3): [4]}, "frac": Fraction(1, 2000), "np_scalar": np.float64(0.7),
        "marker_lookalike": {"__array__": 5}, "nested": [{"a": [np.ones(2), (np.zeros(1),)]}],
    }
    meta, out = serialization.loads(serialization.dumps(data, meta={"who": "test"}))
    assert meta == {"who": "test"}
    assert out["t"] == data["t"] and np.signbit(out["neg_zero"]) and out["tiny"] == 5e-324
    assert out["inf"] == float("inf") and np.isnan(out["nan"])
    assert out["big"] == 2 ** 70 and out["none"] is None and out["flag"] is True
    assert out["y"].tobytes() == data["y"].tobytes() and out["y"].flags.writeable
    assert out["mat"].dtype == np.int64 and np.array_equal(out["mat"], data["mat"])
    assert out["mask"].dtype == bool and out["empty"].shape == (0, 4)
    assert out["tuple"] == (1, 2.5, "a") and isinstance(out["tuple"], tuple)
    assert out["intkeys"] == {1: "one", (2, 3): [4]}
    assert out["frac"] == Fraction(1, 2000)
    assert out["marker_lookalike"] == {"__array__": 5}
    assert isinstance(out["nested"][0]["a"][1], tuple)


def test_objects_that_are_not_plain_data_are_refused():
    with pytest.raises(StateError, match="cannot serialize"):
        serialization.dumps({"f": lambda: 1})
    with pytest.raises(StateError, match="dtype"):
        serialization.dumps({"a": np.array([object()], dtype=object)})


def test_blob_contains_no_pickle_and_starts_with_the_magic():
    blob = serialization.dumps({"y": np.ones(3)})
    assert blob.startswith(serialization.MAGIC)
    assert b"\x80\x04" not in blob[:2] and b"pickle" not in blob


@pytest.fixture
def blob():
    sim = cosim.Simulation(model="lti", method="state-transition")
    sim.set_inputs([0.5])
    sim.do_step(0.0, 0.01)
    return sim.serialize_state()


def test_every_single_byte_flip_and_every_truncation_is_rejected(blob):
    sim = cosim.Simulation(model="lti", method="state-transition")
    before = sim.serialize_state()
    for i in range(0, len(blob), max(1, len(blob) // 97)):
        bad = bytearray(blob)
        bad[i] ^= 0x41
        with pytest.raises(StateError):
            sim.deserialize_state(bytes(bad))
    for n in (0, 5, 12, 20, len(blob) // 2, len(blob) - 1):
        with pytest.raises(StateError):
            sim.deserialize_state(blob[:n])
    assert sim.serialize_state() == before


def test_foreign_wrong_version_and_wrong_type_blobs_are_rejected(blob):
    sim = cosim.Simulation(model="lti", method="state-transition")
    before = sim.serialize_state()
    with pytest.raises(StateError, match="not a cosim state"):
        sim.deserialize_state(b"\x80\x04\x95" + b"x" * 40)  # a pickle header
    with pytest.raises(StateError, match="bytes"):
        sim.deserialize_state("text")
    # a correctly checksummed blob of another format version
    body = bytearray(blob[:-4])
    body[len(serialization.MAGIC):len(serialization.MAGIC) + 2] = struct.pack("<H", 99)
    with pytest.raises(StateError, match="version 99"):
        sim.deserialize_state(bytes(body) + struct.pack("<I", zlib.crc32(bytes(body))))
    # intact blob of a differently configured simulation
    other = cosim.Simulation(model="lti", method="state-transition", params={"A": [[0, 1], [-9, 0]]})
    with pytest.raises(StateError, match="different simulation"):
        other.deserialize_state(blob)
    # a valid blob that is not a simulation state
    with pytest.raises(StateError, match="not written by cosim.Simulation"):
        sim.deserialize_state(serialization.dumps({"y": np.ones(2)}))
    assert sim.serialize_state() == before


def test_a_long_string_is_refused_on_the_bytes_before_parsing(monkeypatch):
    """A 5 MB string in the header: refused by its byte length before the JSON parser or
    the nesting scan allocate anything for it (a backtracking scan took 10 s and 5.7 GB
    for 50 MB); strings up to the limit, also of escaped characters, still load."""
    sim = cosim.Simulation(model="pendulum", method="bdf")
    blob = sim.serialize_state()
    text, payload = _split(blob)
    bad = _join(text.replace(b'"method":"bdf"', b'"method":"' + b"x" * 5_000_000 + b'"', 1), payload)
    monkeypatch.setattr(serialization, "_nesting_depth", lambda text: pytest.fail("scanned"))
    monkeypatch.setattr(serialization.json, "loads", lambda *a, **k: pytest.fail("parsed"))
    with pytest.raises(StateError, match=r"state blob has a string of 5000000 characters \(limit 4096\)"):
        serialization.loads(bad)
    monkeypatch.undo()
    before = sim.serialize_state()
    with pytest.raises(StateError, match="string of 5000000 characters"):
        sim.deserialize_state(bad)
    assert sim.serialize_state() == before
    name = "é" * serialization.MAX_STRING  # 6 bytes each as JSON (\u00e9): at the limit
    meta, data = serialization.loads(serialization.dumps({"name": name}))
    assert data["name"] == name


def _split(blob):
    start = len(serialization.MAGIC) + serialization._PREFIX.size
    _, n = serialization._PREFIX.unpack_from(blob, len(serialization.MAGIC))
    return blob[start:start + n], blob[start + n:-4]


def _join(text, payload):
    body = b"".join([serialization.MAGIC, serialization._PREFIX.pack(serialization.VERSION, len(text)),
                     text, payload])
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)
