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

import numpy as np

from .. import jit
from ..errors import ConvergenceError, InvalidInputError, StateError
from ..validation import finite_float
from .base import STAT_KEYS
from .model_functions import compiled_functions, compiled_unsupported, python_functions

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


def record_array(index, writable=False):
    """A copy of array ``index`` (the method's ``_slices`` order) of S (None before
    the start); ``writable``: assigning None does nothing, an array writes the record."""

    def get(self):
        if not self._has_state:
            return None
        self._settle()
        start, length = self._slices[index]
        return self._S[start:start + length].copy()
    get.returns_copy = True   # (Simulation.y hands it on without another copy)

    def set(self, value):
        if value is not None:
            self._settle()
            self._write(index, value)
            self._outputs_fresh = False
    return property(get, set if writable else None)


def record_point(t_slot, t_prev_slot, arrays, settle=False):
    """A mixin (before :class:`RecordIntegrator`) giving the integrator base class's
    point as views of the record: t, t_prev (slots of S; ``settle``: reading t_prev
    carries out a deferred restart) and the writable record arrays named in
    ``arrays`` (``_slices`` order: y, y_prev, …)."""
    views = {"t": record_time(t_slot), "t_prev": record_time(t_prev_slot, settle=settle)}
    views.update((name, record_array(index, writable=True)) for index, name in enumerate(arrays))
    return type("RecordPoint", (), views)


def record_int(slot):
    """An int view of slot ``slot`` of I (assigning writes it)."""
    return property(lambda self: int(self._I[slot]),
                    lambda self, value: self._I.__setitem__(slot, int(value)))


def kernel_model_reason(model, nonholonomic):
    """Why a compiled multibody method cannot run ``model`` (None: it can): a multibody
    model with kernels (``nonholonomic``: nonholonomic ones too, for its rows)."""
    if model.kind != "multibody":
        return f"model {model.name!r} is {model.kind} (no compiled kernels)"
    return compiled_unsupported(model, nonholonomic=nonholonomic)


def direct_entry(dispatcher):
    """The machine code of a compiled entry of one signature (numba's ``entry_point``
    of its one overload), called without the dispatcher's typing of the ten
    arguments (about 0.3 µs a call), or None where numba does not expose it."""
    overloads = getattr(dispatcher, "overloads", None)
    if not overloads or len(overloads) != 1:
        return None
    code = getattr(next(iter(overloads.values())), "entry_point", None)
    return code if callable(code) else None


def _direct_array(a):
    """``a`` as the compiled entry's signature takes u and p: a 1-D, C-contiguous,
    aligned, writeable float64 array."""
    return (type(a) is np.ndarray and a.dtype == np.float64 and a.ndim == 1
            and a.flags.c_contiguous and a.flags.aligned and a.flags.writeable)


class RecordIntegrator:
    """Mixin (before the integrator base class) for a method run by one kernel entry.

    A subclass sets ``_kernel`` (the kernel module: its STATS slot, modes, statuses),
    defines ``compiled_entry`` (staticmethod: the compiled entry), ``supports(model)``
    (why the compiled one cannot run a model) and ``_allocate``/``_finish``."""

    _kernel = None
    backend = "python"
    _hot = False
    _restart_pending = False
    _p_seen = _p_arg = None   # do_step's warm path: the model's parameters as last passed
    _direct = None            # ... and the entry's machine code (direct_entry), called
    _direct_ok = False        # while u and p are arrays of its signature (_check_direct)
    _has_state = False
    _outputs_fresh = False
    _kernel_outputs = False
    _lu_is_state = True       # False where LU is only work space (the explicit methods)
    _restart_undone = False   # True where a failed RESTART_THEN_ADVANCE leaves the record as
                              # before the restart, which stays to do (BDF's shift)

    @property
    def y_start(self):
        """The slot of S where y starts (the record's first array): a reader of y in
        place (the stepper's gross check, its screened points) slices S from here."""
        return self._slices[0][0]

    _y_ro = None   # y_view's view of S (made again with a new S)

    @property
    def y_view(self):
        """y as a read-only view of the record (no copy; None before the start).  A
        deferred restart never moves y, so none is carried out here."""
        view = self._y_ro
        if view is None or view.base is not self._S:
            if not self._has_state:
                return None
            start, length = self._slices[0]
            view = self._S[start:start + length]
            view.flags.writeable = False
            self._y_ro = view
        return view

    def save_point(self):
        """The integrator's point as copies of its record (S, I, the kept Newton factor,
        the restart flag, the outputs): a few µs less than :meth:`state`;
        :meth:`back_to` returns to it (a rollback within this process)."""
        return (self._S.copy(), self._I.copy(), self._LU.copy() if self._lu_is_state else None,
                self._restart_pending, self._outputs_fresh,
                self._y_out.copy() if self._y_out.size else None)

    def back_to(self, saved):
        """Return to a point from :meth:`save_point`."""
        S, I, LU, pending, fresh, y_out = saved
        self._S[:] = S
        self._I[:] = I
        if LU is not None:
            self._LU[:] = LU
        self._restart_pending = pending
        self._outputs_fresh = fresh
        if y_out is not None:
            self._y_out[:] = y_out
        self._history_back()

    def _history_back(self):
        """After :meth:`back_to`: what the method keeps outside its record forgets the
        steps taken back (BDF's order history; nothing here)."""

    def _construct(self, model, backend, supports, n_scalars, kwargs):
        """The integrator's ``__init__``: the backend (``supports(model)``: why the
        compiled method cannot run the model), the options (the integrator base class;
        a scratch S of ``n_scalars`` slots until the record exists), the model's
        functions and the record."""
        self._choose_backend(model, backend, supports)
        self._S = np.zeros(n_scalars)
        super(RecordIntegrator, self).__init__(model, **kwargs)
        self._bind_model()
        self._allocate()

    def _first_point(self, t0, arrays):
        """The record's first point: t = t_prev = t0 and the record arrays ``arrays``
        (values in ``_slices`` order from 0: y, y_prev, …); a state exists from now on."""
        self._S[self._kernel.T] = self._S[self._kernel.T_PREV] = t0
        for index, value in enumerate(arrays):
            self._write(index, value)
        self._has_state = True

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
        # a model whose Python equations have a reference implementation of their own (a
        # URDF robot: pinocchio) computes them with the compiled kernels the method runs
        use_kernels = getattr(self.model, "use_compiled_kernels", None)
        if use_kernels is not None:
            use_kernels(self.backend == "numba")
        probe = getattr(self.model, "kernel_outputs", None)  # KernelModel; a URDF robot has none
        self._kernel_outputs = self.backend == "numba" and bool(probe is not None and probe())
        # do_step's warm path calls the compiled entry itself (_advance_checked): where the
        # method's _call does more, it goes through _run
        # (with the slot and codes it writes as numbers: t in slot 0, modes 0 and 3, OK 0)
        K = self._kernel
        self._hot = (self.backend == "numba" and type(self)._call is RecordIntegrator._call
                     and K.T == 0 and K.OK == 0 and K.WHOLE_INTERVAL == 0
                     and getattr(K, "RESTART_THEN_ADVANCE", 3) == 3)
        self._direct = direct_entry(self._entry) if self._hot else None
        self._check_direct()
        self._restart_failed = getattr(self._kernel, "RESTART_STATUS", math.inf)

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

    def _set_record(self, S, I, N):
        """A new record: S, I (the statistics of the old one carried over) and an N×N
        LU; no state yet, the outputs stale."""
        stats = self.stats if hasattr(self, "_I") else None
        self._S, self._I = S, I
        if stats is not None:
            self.stats = stats
        self._LU = np.zeros((N, N))
        self._y_out = np.zeros(len(self.model.output_names) if self._kernel_outputs else 0)
        self._outputs_fresh = False
        self._has_state = False

    def _sync_step_options(self):
        """Tolerances and step options into the record (RTOL, ATOL, H_FIXED — 0: adaptive —
        and MAX_STEP of the kernel's record)."""
        K, S = self._kernel, self._S
        S[K.RTOL], S[K.ATOL] = self.rtol, self.atol
        S[K.H_FIXED] = 0.0 if self.h_fixed is None else self.h_fixed
        S[K.MAX_STEP] = self.max_step

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

    fixed_error_order = 3   # a fixed step's local error estimate ∝ h^this (cosim.fixed_step)
    fixed_step_alternative = None   # the messages' way out beside a smaller h (None: adaptive)

    @property
    def fixed_step_size(self):
        """The fixed step the accuracy rule judges (cosim.fixed_step): h as given, None
        for an adaptive run (a fixed-step-only method: its step, given or not)."""
        return self.h_fixed

    @property
    def fixed_error_slot(self):
        """The slot of S holding the largest local error estimate of the fixed steps
        (cosim.fixed_step), or None: adaptive, or a method without one."""
        slot = getattr(self._kernel, "FIXED_ERR", None)
        return None if self.fixed_step_size is None else slot

    @property
    def fixed_step_error(self):
        """The largest local error estimate of the fixed steps so far, in the tolerance
        weights (cosim.fixed_step); None for an adaptive run or a method without one."""
        slot = self.fixed_error_slot
        return None if slot is None or not hasattr(self, "_S") else float(self._S[slot])

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
        self._check_direct()

    def hold_inputs(self, u):
        """Integrator.hold_inputs for every record method: ``u`` is already a 1-D
        C-contiguous float vector (what the ``u`` setter converts to and
        :meth:`_check_direct` accepts), then what the method does at a new held input
        (:meth:`_new_inputs`: a restart, or BDF's shifted history)."""
        u_old = self._u_c
        self._u_c = u
        self._new_inputs(u_old, u)

    def _check_direct(self):
        """Whether the warm path may call the entry's machine code directly: S, I, LU,
        y_out and the model's function addresses are the record's own arrays of its
        signature; the held inputs (from the ``u`` setter or :meth:`hold_inputs`,
        whose caller gives a 1-D C-contiguous float vector) and the parameters are
        checked here when they are replaced (else the dispatcher, which refuses
        other types)."""
        self._direct_ok = (self._direct is not None and _direct_array(getattr(self, "_u_c", None))
                           and _direct_array(self._p_arg))

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
        """:meth:`advance` for Simulation.do_step (t_target and the step budget already
        checked).  The warm path — compiled, the entry not extended by the method
        (:meth:`_bind_model` sets ``_hot``) — is one call of the entry: with held
        inputs WHOLE_INTERVAL, after new ones (a deferred restart) RESTART_THEN_ADVANCE,
        exactly the calls :meth:`_run` makes."""
        S = self._S
        if not (self._hot and t_target > S[0]):   # (slot 0: every kernel's T)
            K = self._kernel
            if not t_target > S[K.T]:
                return self.advance(t_target)
            self._run(t_target, self._call_budget, K.WHOLE_INTERVAL)
            return t_target
        pending = self._restart_pending
        self._outputs_fresh = False
        p = getattr(self.model, "_p", None)
        if p is not self._p_seen:   # (a model's new parameters are a new array)
            self._p_seen, self._p_arg = p, self._parameters()
            self._check_direct()
        budget = self.max_steps
        entry = self._direct if self._direct_ok else self._entry
        status = entry(self._fns, 3 if pending else 0,   # RESTART_THEN_ADVANCE, WHOLE_INTERVAL
                             S, self._I, self._LU, self._u_c, self._p_arg, t_target,
                             budget if budget < MAX_STEPS_PER_CALL else MAX_STEPS_PER_CALL, self._y_out)
        if status == 0:   # every kernel's OK
            if pending:
                self._restart_pending = False
            self._outputs_fresh = self._kernel_outputs
            return t_target
        if pending and status >= self._restart_failed:
            # the restart itself failed and changed nothing (generalized-α: its own path says
            # why; BDF: the shift refused, restarted at once)
            self._restart_refused()
            self._run(t_target, self._call_budget, self._kernel.WHOLE_INTERVAL)
            return t_target
        self._restart_pending = pending and self._restart_undone
        self._finish(status, t_target)   # raises the method's error (the record is as before)
        return t_target

    def _restart_refused(self):
        """The warm path's deferred restart failed in the kernel (status ≥ RESTART_STATUS,
        the record unchanged): nothing here, :meth:`_run`'s :meth:`_settle` tries it
        again on its own path (BDF: the restart the refused shift calls for, at once)."""

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

    # -- state, failures --------------------------------------------------------------------
    def state(self):
        """The state dictionary (t, y, t_prev, y_prev, u, stats, method_state, qdd, lam …),
        read from the record as the method's declaration (``state_declaration``) says."""
        return self.state_declaration.get(self)

    def restore(self, state):
        """Continue from ``state`` (validated before anything is written; all or nothing)."""
        self.state_declaration.restore(self, state)

    def _finish(self, status, t_target):
        """After a call of the entry: fresh outputs on success, else the method's error
        (:meth:`_budget_spent` for STEP_BUDGET, :meth:`_failed` for the others)."""
        if status == self._kernel.OK:
            self._outputs_fresh = self._kernel_outputs
            return
        if status == self._kernel.STEP_BUDGET:
            self._budget_spent(t_target)
        self._failed(status)

    def _budget_spent(self, t_target):
        """Raise: max_steps steps without reaching t_target (at t where they ended)."""
        t = float(self._S[self._kernel.F_T])
        raise ConvergenceError(
            f"{self.name}: more than max_steps={self.max_steps} steps without reaching "
            f"t={t_target!r} (at t={t!r}); the step size collapsed or the problem is too "
            f"stiff for this method", t=self.t, h=None, cause="max_steps")

    def _failed(self, status):
        raise NotImplementedError

    # -- a caller without Python (the FMU binary) --------------------------------------------
    compiled_native_step = None   # the method's C entry (staticmethod), where it has one

    def native_step_record(self):
        """What a caller without Python (the FMU binary) needs to take the step
        :meth:`_advance_checked` takes as long as nothing else touches this
        integrator: (address of the C entry, cosim.jit.native_step_address; an
        object to keep alive; S, I, LU, u, p, y_out; the model's function addresses
        and the compiled entry's, cosim.jit.native_addresses; the step budget; the
        slot of t in S), or None when the next advance is not that one compiled call
        (no C entry, python backend, no state yet, a deferred restart, outputs
        computed in Python).  The caller writes new
        inputs into ``u`` in place and then runs mode RESTART_THEN_ADVANCE (3):
        restart in the kernel (BDF: its history shifted, bdf_shift), then advance
        (WHOLE_INTERVAL, 0)."""
        K = self._kernel
        if not (self.compiled_native_step is not None and self.backend == "numba"
                and self._has_state and self._kernel_outputs and self._outputs_fresh
                and not getattr(self, "_restart_pending", False)
                and K.WHOLE_INTERVAL == 0 and K.RESTART_THEN_ADVANCE == 3
                and self._LU.ndim == 2 and self._LU.shape[0] == self._LU.shape[1]):
            return None
        arrays = (self._S, self._I, self._LU, self._u_c, self._parameters(), self._y_out)
        if not all(a.flags.c_contiguous and a.flags.writeable for a in arrays):
            return None
        address = self.compiled_native_step()
        functions = jit.native_addresses(self._entry, self._fns)
        return (address, self._entry, *arrays, functions, self._call_budget, K.T)

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


class DeferredRestart:
    """Mixin (before :class:`RecordIntegrator`) for a method whose restart only forgets
    (explicit RK, rkc-penalty: the kernel's ``restart(S, I)``): deferred while a state
    exists, so that new inputs and the next advance cost one call of the entry
    (RESTART_THEN_ADVANCE); :meth:`_settle` carries it out before anything else reads
    or writes the record."""

    _restart_pending = False

    def restart(self):
        """Forget what the method knows of the current point (the kernel's
        ``restart``); deferred while a state exists."""
        self._outputs_fresh = False
        if self._has_state:
            self._restart_pending = True
        else:
            self._kernel.restart(self._S, self._I)

    def _settle(self):
        if self._restart_pending:
            self._restart_pending = False
            self._kernel.restart(self._S, self._I)

    def _run(self, t_target, max_steps, mode):
        if self._restart_pending and mode == self._kernel.WHOLE_INTERVAL:
            self._restart_pending = False
            self._outputs_fresh = False
            self._finish(self._call(self._kernel.RESTART_THEN_ADVANCE, t_target, max_steps), t_target)
            return
        super()._run(t_target, max_steps, mode)
