"""Views of a compiled method's record for the wrappers that still subclass their
Python reference (BDF, dopri5/rk4): scalar and array slots of S as attributes,
the statistics as a mapping, the kept LU factorisation, and the whole-interval
advance.  The generalized-α family no longer needs them (one implementation,
:mod:`cosim.integrators.generalized_alpha`); the others follow it.
"""
from __future__ import annotations

from collections.abc import MutableMapping

import numpy as np

from ..errors import InvalidInputError, StateError
from ..validation import finite_float
from .base import STAT_KEYS
from .dense_lu import pivots_valid


# -- views of the record ------------------------------------------------------------------------
class _Scalar:
    def __init__(self, slot, none=None):
        self.slot, self.none = slot, none

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        if obj._restart_pending:
            obj._flush_restart()
        value = float(obj._S[self.slot])
        if self.none is not None and value == self.none:
            return None
        return value

    def __set__(self, obj, value):
        if obj._restart_pending:
            obj._flush_restart()
        obj._outputs_fresh = False
        obj._S[self.slot] = self.none if value is None else float(value)


class _Array:
    """A slice of S (``shape(obj)``: reshaped), returned as a copy (the reference
    never mutates its arrays, so nobody relies on aliasing) and written by copy."""

    def __init__(self, index, shape=None):
        self.index, self.shape = index, shape  # position in the kernel's offsets()

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        if not obj._has_state:
            return None
        if obj._restart_pending:
            obj._flush_restart()
        start, length = obj._slices[self.index]
        out = obj._S[start:start + length].copy()
        return out if self.shape is None else out.reshape(self.shape(obj))

    def __set__(self, obj, value):
        if value is None:
            return
        if obj._restart_pending:
            obj._flush_restart()
        obj._outputs_fresh = False
        start, length = obj._slices[self.index]
        arr = np.asarray(value, dtype=float).reshape(-1)
        if arr.shape != (length,):
            raise StateError(f"state array has {arr.size} entries, the record slot holds {length}")
        obj._S[start:start + length] = arr


class WholeIntervalAdvance:
    """``advance``/``_advance_checked``/``_step`` of a compiled wrapper whose
    kernel module ``_K`` runs to the target in one call (many steps, all or
    nothing within the step budget: the kernel restores its record itself).
    ``_strict_times``: the target goes through ``finite_float(strict=True)``."""

    _K = None
    _strict_times = False

    def advance(self, t_target):
        K = self._K
        t_target = finite_float("t_target", t_target, strict=self._strict_times)
        t = self._S[K.T]
        if t_target < t:
            raise InvalidInputError(f"target time {t_target!r} is before t={float(t)!r}")
        if t_target == t:
            return t_target
        self.check_step_budget(t_target)
        self._run(t_target, min(self.max_steps, self._max_steps_per_call), K.WHOLE_INTERVAL)
        return t_target

    def _advance_checked(self, t_target):
        # Simulation.do_step's hot path: one compiled call, outputs computed in it
        if not t_target > self._S[self._K.T]:
            return self.advance(t_target)
        self._run(t_target, min(self.max_steps, self._max_steps_per_call), self._K.WHOLE_INTERVAL)
        return t_target

    def _step(self, t_limit):
        self._run(t_limit, 1, self._K.ONE_STEP)


class _Stats(MutableMapping):
    """The statistics counters in the record (from slot ``base`` of I), as the dict
    the reference expects."""

    def __init__(self, owner, base):
        self._owner, self._base = owner, base

    def __getitem__(self, key):
        return int(self._owner._I[self._base + STAT_KEYS.index(key)])

    def __setitem__(self, key, value):
        if key not in STAT_KEYS:
            raise KeyError(key)
        self._owner._I[self._base + STAT_KEYS.index(key)] = int(value)

    def __delitem__(self, key):
        raise TypeError("statistics keys are fixed")

    def __iter__(self):
        return iter(STAT_KEYS)

    def __len__(self):
        return len(STAT_KEYS)

    def clear(self):
        for key in STAT_KEYS:
            self[key] = 0


def record_factor(o, has_slot, piv_slot):
    """(LU, pivots) kept in a compiled integrator's record, or None."""
    if not o._I[has_slot]:
        return None
    return o._LU.copy(), o._I[piv_slot:piv_slot + o._N].astype(np.int32)


def store_factor(o, value, has_slot, piv_slot):
    """Put (LU, pivots) into the record (None: no factorisation kept)."""
    if value is None:
        o._I[has_slot] = 0
        return
    lu, piv = value
    N = o._N
    lu = np.asarray(lu, dtype=float)
    piv = np.asarray(piv)
    # a restored factorisation is indexed by compiled code: check it first
    if lu.shape != (N, N) or not np.isfinite(lu).all():
        raise StateError(f"iteration-matrix LU must be a finite {N}x{N} array, got shape {lu.shape}")
    if piv.shape != (N,) or piv.dtype.kind not in "iu" or not pivots_valid(piv.astype(np.int64), N):
        raise StateError(f"iteration-matrix pivots must be {N} row indices k <= piv[k] < {N}")
    o._LU[:, :] = lu
    o._I[piv_slot:piv_slot + N] = piv
    o._I[has_slot] = 1
