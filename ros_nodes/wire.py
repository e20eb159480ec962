"""Messages kept as their serialized bytes: fixed-layout state messages
(``/clock``, ``joint_states``, ``outputs``) are serialized once by the rmw
(``rclpy.serialization``), then each step only their stamp and float64
values are written in place and the bytes are published with
``Publisher.publish(bytes)`` (``rmw_publish_serialized_message``).

This skips rclpy's per-publish conversion of the Python message to its C
struct and the rmw's serialization: on this project's shared 2-core VM the
three state publications cost 14-36 µs back to back / 49-78 µs after a 1 ms
sleep as messages and 4-7 µs / 20-32 µs as bytes (load 5-8,
``benchmarks/ros_rt.py --publish-cost``).

The byte offsets are found, not assumed: the template is serialized with
distinct sentinel values and each value is located in the bytes (so any rmw
whose serialization keeps float64 values and the stamp as plain
little-endian words works; CDR does, RTPS encapsulation ``CDR_LE``).  A
layout that cannot be located, or a patched copy that does not deserialize
back to the same message, makes ``Wire.build`` return None: the caller then
publishes ordinary messages.
"""
from __future__ import annotations

import struct

import numpy as np
from rclpy.serialization import deserialize_message, serialize_message

_SENTINEL_BASE = 0x5EC0_0000_0000_0000  # sentinel doubles: tiny distinct subnormal-free patterns


def _sentinel(k):
    """The k-th sentinel double (distinct bit patterns, never produced by a field default)."""
    return struct.unpack("<d", struct.pack("<Q", _SENTINEL_BASE + 0x1_0000_0001 * (k + 1)))[0]


def _find_once(blob, pattern):
    i = blob.find(pattern)
    if i < 0 or blob.find(pattern, i + 1) >= 0:
        raise LookupError
    return i


class Wire:
    """One message type's serialized template with writable float64 fields and stamp.

    ``arrays[name]``: a float64 numpy view into the bytes for each named
    sequence field (fixed length, given by the template); ``doubles`` and
    ``slots[name]``: one float64 view over the bytes and each field's element
    indices in it, so that all fields are written by one indexed assignment
    (None when the fields do not share one 8-byte alignment);
    ``set_stamp(sec, nanosec)`` writes the stamp; ``payload()`` returns the
    bytes to publish."""

    def __init__(self, buf, offsets, sizes, stamp_offsets):
        self.buf = buf
        self.arrays = {name: np.ndarray((sizes[name],), dtype="<f8", buffer=buf, offset=off)
                       for name, off in offsets.items()}
        bases = {off % 8 for name, off in offsets.items() if sizes[name]}
        self.doubles, self.slots = None, {}
        if len(bases) <= 1:
            base = bases.pop() if bases else 0
            self.doubles = np.ndarray(((len(buf) - base) // 8,), dtype="<f8", buffer=buf,
                                      offset=base)
            self.slots = {name: (off - base) // 8 + np.arange(sizes[name])
                          for name, off in offsets.items()}
        self._stamp = stamp_offsets
        self._stamp_pair = stamp_offsets is not None and stamp_offsets[1] == stamp_offsets[0] + 4

    def set_stamp(self, sec, nanosec):
        if self._stamp_pair:
            struct.pack_into("<iI", self.buf, self._stamp[0], sec, nanosec)
        elif self._stamp is not None:
            s, n = self._stamp
            struct.pack_into("<i", self.buf, s, sec)
            struct.pack_into("<I", self.buf, n, nanosec)

    def payload(self):
        return bytes(self.buf)

    @classmethod
    def build(cls, msg, fields, stamp):
        """A Wire for ``msg`` (a filled template: strings and sequence lengths are kept)
        or None when the layout cannot be located.  ``fields``: names of float64
        sequence attributes; ``stamp``: a function msg -> its builtin_interfaces/Time
        (None: the message has no stamp)."""
        try:
            return cls._build(msg, fields, stamp)
        except (LookupError, ValueError, TypeError, AssertionError, AttributeError, struct.error):
            return None

    @classmethod
    def _build(cls, msg, fields, stamp):
        msg_type = type(msg)
        probe = deserialize_message(serialize_message(msg), msg_type)  # a private copy
        sizes, k = {}, 0
        for name in fields:
            sizes[name] = n = len(getattr(probe, name))
            setattr(probe, name, [_sentinel(k + i) for i in range(n)])
            k += n
        if stamp is not None:
            st = stamp(probe)
            st.sec, st.nanosec = 0x2A5C_3B1D, 0x3A7E_9F13  # sentinel stamp words
        blob = serialize_message(probe)
        if blob[:2] not in (b"\x00\x01", b"\x00\x03"):  # CDR_LE / PL_CDR_LE encapsulation
            raise LookupError
        offsets, k = {}, 0
        for name in fields:
            n = sizes[name]
            if n == 0:
                offsets[name] = 0
                continue
            off = offsets[name] = _find_once(blob, struct.pack("<d", _sentinel(k)))
            for i in range(1, n):  # the sequence is contiguous
                if _find_once(blob, struct.pack("<d", _sentinel(k + i))) != off + 8 * i:
                    raise LookupError
            k += n
        stamp_offsets = None if stamp is None else (
            _find_once(blob, struct.pack("<i", 0x2A5C_3B1D)),
            _find_once(blob, struct.pack("<I", 0x3A7E_9F13)))
        wire = cls(bytearray(blob), offsets, sizes, stamp_offsets)
        wire._check(msg_type, fields, stamp)
        for name in fields:  # the template's own values
            wire.arrays[name][:] = getattr(msg, name)
        if stamp is not None:
            st = stamp(msg)
            wire.set_stamp(st.sec, st.nanosec)
        return wire

    def _check(self, msg_type, fields, stamp):
        """Write test values (through ``doubles``/``slots`` when there) and require
        the bytes to deserialize to exactly them."""
        expect = {}
        for k, name in enumerate(fields):
            values = 0.5 + np.arange(self.arrays[name].size) + 100.0 * k
            if self.doubles is not None:
                self.doubles[self.slots[name]] = values
            else:
                self.arrays[name][:] = values
            expect[name] = values.tolist()
        self.set_stamp(-7, 999_999_999)
        back = deserialize_message(self.payload(), msg_type)
        st = None if stamp is None else stamp(back)
        if (st is not None and (st.sec, st.nanosec) != (-7, 999_999_999)) or any(
                list(getattr(back, name)) != values for name, values in expect.items()):
            raise LookupError
