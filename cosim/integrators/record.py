"""The integrator object of a method whose algorithm is a kernel module (DESIGN.md
"Compiled path"): everything the method remembers is its record — ``S`` (float64:
scalar slots, then arrays), ``I`` (int64: sizes, flags, counters, pivots), ``LU`` —
and one kernel entry ``entry(fns, mode, S, I, LU, u, p, t_target, max_steps, y_out)``
advances it, run compiled (numba: :func:`cosim.jit.method_entry`, the model's
functions by address) or as plain Python (the same functions, the model's methods
wrapped by :func:`cosim.integrators.model_functions.python_functions`).

:class:`RecordIntegrator` is that shared plumbing (backend choice, the model's
functions, the statistics slots, the held inputs, one call of the entry with the
python backend's rollback, whole-interval advance); each method's module adds its
options, set-up, dense output, state dictionary and error messages.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .. import jit
from ..errors import InvalidInputError, StateError
from ..validation import finite_float
from .base import STAT_KEYS
from .model_functions import compiled_functions, python_functions

MAX_STEPS_PER_CALL = 1_000_000


def record_time(slot, settle=False):
    """Time ``slot`` of S as a float (None before the start: NaN in the record);
    assigning None does nothing (Integrator.__init__), a number writes the record.
    ``settle``: reading it carries out a deferred restart first (t_prev, which a
    restart moves to t)."""

    def get(self):
        if settle:
            self._settle()
        value = float(self._S[slot])
        return None if math.isnan(value) else value

    def set(self, value):
        if value is not None:
            self._settle()
            self._S[slot] = float(value)
            self._outputs_fresh = False
    return property(get, set)


def record_scalar(slot, writable=False):
    """A float view of scalar ``slot`` of S (``writable``: assigning writes it)."""

    def get(self):
        self._settle()
        return float(self._S[slot])

    def set(self, value):
        self._settle()
        self._S[slot] = float(value)
        self._outputs_fresh = False
    return property(get, set if writable else None)


def record_array(index, writable=False, shape=None):
    """A copy of array ``index`` (the method's ``_slices`` order) of S, reshaped by
    ``shape(self)`` if given (None before the start); ``writable``: assigning None
    does nothing, an array writes the record."""

    def get(self):
        if not self._has_state:
            return None
        self._settle()
        start, length = self._slices[index]
        out = self._S[start:start + length].copy()
        return out if shape is None else out.reshape(shape(self))

    def set(self, value):
        if value is not None:
            self._settle()
            self._write(index, value)
            self._outputs_fresh = False
    return property(get, set if writable else None)


def record_int(slot):
    """An int view of slot ``slot`` of I (assigning writes it)."""
    return property(lambda self: int(self._I[slot]),
                    lambda self, value: self._I.__setitem__(slot, int(value)))


class RecordIntegrator:
    """Mixin (before the integrator base class) for a method run by one kernel entry.

    A subclass sets ``_kernel`` (the kernel module: its STATS slot, modes, statuses),
    defines ``compiled_entry`` (staticmethod: the compiled entry), ``supports(model)``
    (why the compiled one cannot run a model) and ``_allocate``/``_finish``."""

    _kernel = None
    backend = "python"
    _has_state = False
    _outputs_fresh = False
    _kernel_outputs = False

    def _choose_backend(self, model, backend, supports):
        if backend not in ("python", "numba"):
            raise InvalidInputError(f"backend must be 'python' or 'numba', got {backend!r}")
        if backend == "numba":
            reason = supports(model)
            if reason is not None:
                raise InvalidInputError(f"backend 'numba': {reason}")
        self.backend = backend

    def _bind_model(self):
        """The method and the model's functions for this backend."""
        if self.backend == "numba":
            self._entry = self.compiled_entry()
            self._fns = compiled_functions(self.model)
        else:
            self._entry = self._kernel.entry
            self._fns = python_functions(self.model)
        probe = getattr(self.model, "kernel_outputs", None)  # KernelModel; a URDF robot has none
        self._kernel_outputs = self.backend == "numba" and bool(probe is not None and probe())

    def _analyse_start(self, t0, y0, **ic_options):
        """The IC analysis (seed 000 Algorithm 1) of a multibody start; keeps its report
        and the model it returns.  Where it removed redundant constraints, the
        compiled kernels (which describe the full model) no longer fit: the python
        backend runs the view the IC analysis made, and says so once."""
        from ..ic import analyse_initial_conditions  # noqa: PLC0415
        original = self.model
        q0, v0 = original.split(y0)
        report = analyse_initial_conditions(original, t0, q0, v0, self.u, **ic_options)
        self.ic_report = report
        self.model = report.model
        if self.model is not original:
            if self.backend == "numba":
                redundant = ", ".join(getattr(report, "redundant", ()) or ()) or "removed by the IC analysis"
                jit.announce(("redundant", original.name),
                             f"model {original.name!r} has redundant constraints ({redundant}): "
                             f"{self.name} runs on the python backend")
                self.backend = "python"
            self._bind_model()
        return report

    def _checked_newton_state(self, state):
        """Validate ``state`` for this method before anything is written (the schema,
        and the kept LU and pivots, which compiled code indexes); returns its Newton
        state.  The iteration matrix is ``self._N`` square."""
        from ..state_schema import check_integrator_state, check_newton_state  # noqa: PLC0415
        from .dense_lu import pivots_valid  # noqa: PLC0415
        if not isinstance(state, Mapping) or state.get("method") != self.name:
            method = state.get("method") if isinstance(state, Mapping) else None
            raise StateError(f"state belongs to method {method!r:.40}, not {self.name!r}")
        if self._has_state:
            check_integrator_state(self, state)
        newton = state["method_state"]["newton"]
        N = self._N
        check_newton_state("newton", newton, N)
        if "lu" in newton:
            lu, piv = np.asarray(newton["lu"], dtype=float), np.asarray(newton["piv"])
            if lu.shape != (N, N) or not np.isfinite(lu).all():
                raise StateError(f"iteration-matrix LU must be a finite {N}x{N} array, "
                                 f"got shape {lu.shape}")
            if piv.shape != (N,) or piv.dtype.kind not in "iu" or not pivots_valid(piv.astype(np.int64), N):
                raise StateError(f"iteration-matrix pivots must be {N} row indices k <= piv[k] < {N}")
        return newton

    def _settle(self):
        """Carry out deferred work before the record is read or written (none here)."""

    def _write(self, index, value):
        start, length = self._slices[index]
        arr = np.asarray(value, dtype=float).reshape(-1)
        if arr.shape != (length,):
            raise StateError(f"state array has {arr.size} entries, the record slot holds {length}")
        self._S[start:start + length] = arr

    def _parameters(self):
        """The model's parameter vector p (kernel models; empty for the others)."""
        p = getattr(self.model, "_p", None)
        return p if isinstance(p, np.ndarray) and p.dtype == np.float64 else np.zeros(0)

    @property
    def stats(self):
        """The statistics counters (a copy; STAT_KEYS order in the record)."""
        first = self._kernel.STATS
        return {k: int(self._I[first + i]) for i, k in enumerate(STAT_KEYS)}

    @stats.setter
    def stats(self, value):
        if hasattr(self, "_I"):
            first = self._kernel.STATS
            for i, k in enumerate(STAT_KEYS):
                self._I[first + i] = int(dict(value).get(k, 0))

    # the integrator base class assigns this before the record exists
    @property
    def u(self):
        """The held inputs (the contiguous float array the kernel takes)."""
        return self._u_c

    @u.setter
    def u(self, value):
        if not (type(value) is np.ndarray and value.dtype == np.float64 and value.flags.c_contiguous):
            value = np.ascontiguousarray(value, dtype=float)
        self._u_c = value   # (a new value comes with a restart, which marks the outputs stale)

    # -- stepping ----------------------------------------------------------------------------
    def advance(self, t_target):
        """Integrate to exactly ``t_target`` in one call of the method (all or nothing)."""
        t_target = finite_float("t_target", t_target, strict=True)
        t = self._S[self._kernel.T]
        if t_target < t:
            raise InvalidInputError(f"target time {t_target!r} is before t={float(t)!r}")
        if t_target == t:
            return t_target
        self.check_step_budget(t_target)
        self._run(t_target, self._call_budget, self._kernel.WHOLE_INTERVAL)
        return t_target

    def _advance_checked(self, t_target):
        # Simulation.do_step: t_target and the step budget already checked
        if not t_target > self._S[self._kernel.T]:
            return self.advance(t_target)
        self._run(t_target, self._call_budget, self._kernel.WHOLE_INTERVAL)
        return t_target

    def _step(self, t_limit):
        self._run(t_limit, 1, self._kernel.ONE_STEP)

    @property
    def _call_budget(self):
        return min(self.max_steps, MAX_STEPS_PER_CALL)

    def _run(self, t_target, max_steps, mode):
        # the kernel is all or nothing: on failure it restores S, I, LU itself
        self._settle()
        self._outputs_fresh = False
        status = self._call(mode, t_target, max_steps)
        self._finish(status, t_target)

    def _call(self, mode, t_target, max_steps):
        """One call of the method's entry.  The kernel is all or nothing for the
        failures it reports; on the python backend a model function may also raise
        (any exception, from the model's own code): the record is then put back as
        it was before the call, and the exception goes on."""
        args = (self._fns, mode, self._S, self._I, self._LU, self._u_c, self._parameters(),
                t_target, max_steps, self._y_out)
        if self.backend == "numba":
            return self._entry(*args)
        saved = self._S.copy(), self._I.copy(), self._LU.copy()
        try:
            return self._entry(*args)
        except BaseException:
            self._S[:], self._I[:], self._LU[:, :] = saved
            raise

    def _load_machine_code(self, mode):
        """numba loads the machine code at the first call: pay that now, on a scratch
        copy of the record (``mode`` changing nothing), not in the first real-time step."""
        if self.backend == "numba":
            self._entry(self._fns, mode, self._S.copy(), self._I.copy(), self._LU.copy(), self._u_c,
                        self._parameters(), 0.0, 0, self._y_out.copy())

    # -- outputs -----------------------------------------------------------------------------
    def fresh_outputs(self):
        """The model's outputs at the current state as the compiled step computed
        them (a copy), or None when they must be computed in Python."""
        return self._y_out.copy() if self._outputs_fresh else None

    def outputs_into(self, out):
        if self._outputs_fresh:
            out[:] = self._y_out
            return True
        return False
