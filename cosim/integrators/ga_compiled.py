"""Generalized-α on the compiled (numba) backend: a thin wrapper around
:mod:`cosim.integrators.ga_kernel`, for the index-3 method and the GGL
index-2 one ("generalized-alpha-i2", the kernel's formulation switch; both
run the same compiled entry of a model).

The wrapper owns what the kernel does not: the API, validation, the IC
analysis (Python, once), dense output, events, state capture and error
messages.  Its method memory lives in the kernel's record (``S``, ``I``,
``LU``); the attributes the reference class uses (``t``, ``y``, ``a``,
``newton.factor``, ``stats`` …) are views of that record, so the reference's
``state()``/``restore()``/``dense_output`` work unchanged and a state
captured on one backend restores on the other.

The whole step loop to a target time runs in one compiled call; snapshot and
rollback are three array copies.
"""
from __future__ import annotations

import math
import os
from collections.abc import MutableMapping

import numpy as np

from .. import jit
from ..errors import ConvergenceError, InvalidInputError, SingularMatrixError, StateError
from ..validation import finite_float
from . import ga_kernel as K
from .base import STAT_KEYS
from .dense_lu import pivots_valid
from .generalized_alpha import GeneralizedAlpha
from .generalized_alpha_i2 import GeneralizedAlphaIndex2
from .newton import QuasiNewton

_NEWTON_REASONS = {K.R_RESIDUAL: "residual is not finite", K.R_UPDATE: "Newton update is not finite",
                   K.R_NO_CONVERGENCE: f"no convergence in {K.NEWTON_MAX_ITER} iterations"}
MAX_STEPS_PER_CALL = 1_000_000
_RESTART_THEN_ADVANCE = 3  # entry mode (cosim.jit._ENTRY_FOOTER)


def n_nonholonomic(model):
    """n_g: the model's nonholonomic rows (seed 000 §7)."""
    return len(getattr(model, "nonholonomic_names", ()) or ())


def kernel_functions(model):
    """A compiled entry's kernels: the model's, then its nonholonomic ones if it has rows."""
    ks = model.kernels()
    if not n_nonholonomic(model):
        return ks.functions()
    return ks.functions() + ks.nonholonomic_functions()


def _extras(model):
    """Modules pasted after ga_kernel: the nonholonomic hooks only for a model with
    such rows (every other model's entry stays as it is)."""
    if not n_nonholonomic(model):
        return ()
    from . import ga_nh_kernel  # noqa: PLC0415
    return (ga_nh_kernel,)


def _model_entries(model):
    """The compiled entry (advance/restart) for this model's kernel set (compiled
    once per model, cached on disk; see cosim.jit.model_entry_points)."""
    from . import dense_lu  # noqa: PLC0415
    from ..models.kernels import COMPILED_FIELDS  # noqa: PLC0415
    # kernel_name: models sharing one kernel set (every URDF robot) share one entry file
    return jit.model_entry_points(K, kernel_functions(model),
                                  getattr(model, "kernel_name", model.name), "generalized-alpha",
                                  helpers=(dense_lu,), extras=_extras(model),
                                  outputs_index=len(COMPILED_FIELDS) - 1)


def supports(model):
    """Why the compiled generalized-α cannot run ``model`` (None: it can)."""
    reason = model_supported(model, nonholonomic=True)
    if reason is None and not jit.entry_loaded(K, kernel_functions(model)):
        from . import dense_lu  # noqa: PLC0415  (an FMU's deleted unzip folder)
        reason = jit.sources_unreadable((K, dense_lu, *_extras(model)), kernel_functions(model))
    return reason


def model_supported(model, nonholonomic=False):
    """Why no compiled method can run ``model`` (None: its kernels describe it);
    ``nonholonomic``: the method's entry has the nonholonomic rows (generalized-α,
    dopri5/rk4), which then need all their kernels."""
    kernels = getattr(model, "kernels", None)
    if kernels is None or kernels() is None:
        why = getattr(model, "kernels_unavailable", lambda: None)()  # KernelModel: generated ones
        return f"model {model.name!r} has no compiled kernels" + (f" ({why})" if why else "")
    from ..models.kernels import KernelModel  # noqa: PLC0415
    # the class whose Python methods the kernels describe: KernelModel (derived from
    # them) or a class with its own checked implementation (URDFModel: pinocchio)
    base = getattr(model, "kernel_reference", KernelModel)
    overridden = [name for name in KernelModel.DERIVED
                  if getattr(type(model), name, None) is not getattr(base, name, None)]
    if overridden:
        # a subclass changed the Python equations: the kernels no longer describe it
        return f"model {model.name!r} overrides {', '.join(overridden)} of its kernels"
    if n_nonholonomic(model) and not nonholonomic:
        # (BDF: no nonholonomic formulation in either backend; its reference refuses the model)
        return f"model {model.name!r} has nonholonomic constraints (no compiled form of this method)"
    if n_nonholonomic(model):
        overridden = [name for name in ("nonholonomic_matrix", "nonholonomic_offset", "nonholonomic_gamma")
                      if getattr(type(model), name, None) is not getattr(base, name, None)]
        if overridden:
            return f"model {model.name!r} overrides {', '.join(overridden)} of its kernels"
        if model.kernels().nonholonomic_functions() is None:
            return f"model {model.name!r} has nonholonomic constraints without all their kernels"
    # kernels numba rejects (the generated derivative kernels are checked where they are made)
    return jit.kernels_uncompilable(getattr(model, "kernel_set", None) or model.kernels(),
                                    model.name)


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


class _RecordNewton(QuasiNewton):
    """QuasiNewton whose controller memory and LU live in the integrator's record."""

    def __init__(self, owner, **kw):
        self._owner = owner
        super().__init__(owner.stats, **kw)

    @property
    def sigma(self):
        return float(self._owner._S[K.SIGMA])

    @sigma.setter
    def sigma(self, value):
        self._owner._S[K.SIGMA] = float(value)

    @property
    def h_jac(self):
        v = float(self._owner._S[K.H_JAC])
        return None if v < 0.0 else v

    @h_jac.setter
    def h_jac(self, value):
        self._owner._S[K.H_JAC] = -1.0 if value is None else float(value)

    @property
    def need_jac(self):
        return bool(self._owner._I[K.NEED_JAC])

    @need_jac.setter
    def need_jac(self, value):
        self._owner._I[K.NEED_JAC] = 1 if value else 0

    @property
    def relax(self):
        return float(self._owner._S[K.RELAX])

    @relax.setter
    def relax(self, value):
        self._owner._S[K.RELAX] = float(value)

    @property
    def factor(self):
        return record_factor(self._owner, K.HAS_FACTOR, K.PIV)

    @factor.setter
    def factor(self, value):
        store_factor(self._owner, value, K.HAS_FACTOR, K.PIV)


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


class CompiledGeneralizedAlpha(WholeIntervalAdvance, GeneralizedAlpha):
    """Generalized-α, index 3, whose step loop runs compiled (numba); its own
    ``_advance_checked`` fuses a pending input restart into the advance call."""

    backend = "numba"
    _K = K
    _max_steps_per_call = MAX_STEPS_PER_CALL
    _ggl = 0  # the kernel's formulation switch I[GGL]

    t = _Scalar(K.T, none=math.nan)
    t_prev = _Scalar(K.T_PREV, none=math.nan)
    h_next = _Scalar(K.H_NEXT)
    h_last = _Scalar(K.H_LAST)
    y = _Array(0)
    y_prev = _Array(1)
    qdd = _Array(2)
    qdd_prev = _Array(3)
    lam = _Array(4)
    a = _Array(5)
    x_rate = _Array(6)
    lam_rate = _Array(7)

    def __init__(self, model, **kwargs):
        reason = supports(model)
        if reason is not None:
            raise InvalidInputError(f"backend 'numba': {reason}")
        self._restart_pending = False
        self._entry = _model_entries(model)
        probe = getattr(model, "kernel_outputs", None)  # KernelModel; a URDF robot has none
        self._kernel_outputs = bool(probe is not None and probe())
        self._n_out = len(model.output_names) if self._kernel_outputs else 0
        self._n_g = n_nonholonomic(model)
        self._allocate(model.n_q, model.n_c)
        super().__init__(model, **kwargs)
        self._sync_parameters()   # tolerances and constants also for a restore before initialize

    # -- the record ----------------------------------------------------------------------
    def _allocate(self, n, m):
        old_stats = dict(self._stats_view) if hasattr(self, "_stats_view") else None
        g = self._n_g
        offs = K.offsets(n, m + g)   # multipliers [λ; ν] (ga_nh_kernel)
        lengths = (2 * n, 2 * n, n, n, m + g, n, n, m + g)
        self._slices = [(offs[i], lengths[i]) for i in range(8)]
        self._N = K.matrix_size(n, m, self._ggl, g)
        self._S = np.zeros(offs[-1])
        self._S[K.T] = self._S[K.T_PREV] = math.nan
        self._S[K.H_JAC] = -1.0
        self._S[K.RELAX] = 1.0
        self._I = np.zeros(K.int_length(n, m, self._ggl, g), dtype=np.int64)
        self._I[K.I_N], self._I[K.I_M] = n, m
        if g:
            self._I[-1] = g   # ga_nh_kernel.n_nonholonomic
        self._I[K.GGL] = self._ggl
        self._I[K.NEED_JAC] = 1
        self._I[K.MINV_EXACT] = -1
        self._LU = np.zeros((self._N, self._N))
        self._has_state = False
        # the outputs the compiled step computes at its end state (models with an
        # outputs kernel); fresh until anything else writes the record
        self._y_out = np.zeros(self._n_out)
        self._outputs_fresh = False
        self._restart_pending = False  # restart() deferred into the next compiled advance
        self._stats_view = _Stats(self, K.STATS)
        if old_stats is not None:
            self.stats = old_stats

    @property
    def stats(self):
        return self._stats_view

    @stats.setter
    def stats(self, value):
        if not hasattr(self, "_stats_view"):
            return
        for key in STAT_KEYS:
            self._stats_view[key] = int(dict(value).get(key, 0))

    def _sync_parameters(self):
        """Method constants and options into the record (after check_options)."""
        S, I = self._S, self._I
        S[K.RTOL], S[K.ATOL] = self.rtol, self.atol
        S[K.ERR_SCALE] = self._err_scale  # internal_tolerances: error-test weights s·W
        S[K.ERR_TANGENT] = 1.0 if getattr(self, "_tangent", False) else 0.0
        S[K.H_FIXED] = 0.0 if self.h_fixed is None else self.h_fixed
        S[K.MAX_STEP] = self.max_step
        S[K.ALPHA_M], S[K.ALPHA_F], S[K.GAMMA], S[K.BETA], S[K.ETA] = (
            self.alpha_m, self.alpha_f, self.gamma, self.beta, self.eta)
        I[K.PROJECT] = 1 if self._project else 0
        I[K.CONST_MASS] = 1 if self.model.constant_mass else 0

    # -- set-up ------------------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        original = self.model
        self._ic(t0, y0, **ic_options)
        if self.model is not original:
            # redundant constraints removed: the kernels describe the full model
            raise InvalidInputError(
                f"backend 'numba': model {original.name!r} has redundant constraints "
                f"({', '.join(self.ic_report.redundant) if getattr(self.ic_report, 'redundant', None) else 'removed by the IC analysis'})")
        report = self.ic_report
        q, v, qdd, lam = report.q, report.v, report.qdd, report.lam
        self._allocate(self.model.n_q, self.model.n_c)
        self._has_state = True
        self._sync_parameters()
        self.t = t0
        self.y = np.concatenate([q, v])
        self.qdd = qdd
        self.lam = lam
        self.a = qdd
        self.h_last = 0.0
        self.qdd_prev = qdd
        self._setup_work()
        self.h_next = self._initial_step() if self.h_fixed is None else self.h_fixed
        # numba loads the machine code from its cache at the first call (~1-2 s):
        # pay that now, on a scratch copy of the record, not in the first (real-time) step
        self._entry(K.RESTART, self._S.copy(), self._I.copy(), self._LU.copy(), self._u_c, self.model._p,
                    0.0, 0, self._y_out.copy())

    def initialize(self, t0=0.0, y0=None, u=None, **ic_options):
        report = super().initialize(t0, y0, u, **ic_options)
        return report

    def _setup_work(self):
        self.newton = _RecordNewton(self, what=f"{self.name} iteration matrix", prior_rate=True)
        self._n_g = n_nonholonomic(self.model)
        self._J = np.zeros((self._N, self._N))

    @property
    def _minv_diag(self):
        return None

    @_minv_diag.setter
    def _minv_diag(self, value):
        pass

    @property
    def _minv_exact(self):
        return None

    @_minv_exact.setter
    def _minv_exact(self, value):
        pass

    def _restore_method_state(self, d):
        if getattr(self, "newton", None) is None:
            self._setup_work()
        super()._restore_method_state(d)

    # -- stepping ---------------------------------------------------------------------------------
    @property
    def u(self):
        """The held inputs (kept as the contiguous float array the kernel takes)."""
        return self._u_c

    @u.setter
    def u(self, value):
        if not (type(value) is np.ndarray and value.dtype == np.float64 and value.flags.c_contiguous):
            value = np.ascontiguousarray(value, dtype=float)
        self._u_c = value

    def _u_array(self):
        return self._u_c

    def _run(self, t_target, max_steps, mode):
        # the kernel is all or nothing: on failure it restores S, I, LU itself
        self._outputs_fresh = False
        if self._restart_pending:
            if mode != K.WHOLE_INTERVAL:
                self._flush_restart()
            else:  # restart and advance in one compiled call (mode 3)
                status = self._entry(_RESTART_THEN_ADVANCE, self._S, self._I, self._LU, self._u_array(),
                                     self.model._p, t_target, max_steps, self._y_out)
                if status >= jit.RESTART_STATUS:  # the restart failed, nothing changed
                    self._flush_restart()
                else:
                    self._restart_pending = False
                    self._finish_run(status, t_target)
                    return
        status = self._entry(mode, self._S, self._I, self._LU, self._u_array(), self.model._p,
                             t_target, max_steps, self._y_out)
        self._finish_run(status, t_target)

    def _finish_run(self, status, t_target):
        if status == K.OK:
            self._outputs_fresh = self._kernel_outputs
            return
        if status == K.STEP_BUDGET:
            self.too_many_steps(t_target)
        if status != K.OK:
            S, I = self._S, self._I
            self._raise(status, float(S[K.F_T]), float(S[K.F_H]), float(S[K.F_INFO]), int(I[K.REASON]))

    def _raise(self, status, t, h, info, reason):
        name = self.name
        if status == K.NEWTON_FAILED:
            cause = _NEWTON_REASONS.get(reason, "Newton iteration failed")
            raise ConvergenceError(f"{name}: Newton iteration failed at t={t!r}, h={h!r} ({cause})",
                                   t=t, h=h, cause=cause)
        if status == K.ERROR_TEST_FAILED:
            cause = f"error ratio Xi={info:.3g}"
            raise ConvergenceError(f"{name}: local error test failed repeatedly at t={t!r}, h={h!r} ({cause})",
                                   t=t, h=h, cause=cause)
        what = f"{name} iteration matrix"
        if status == K.NONFINITE_MATRIX:
            raise SingularMatrixError(f"{what} contains NaN/inf at t={t}, h={h}", t=t, h=h,
                                      cause="non-finite matrix")
        raise SingularMatrixError(f"{what} is numerically singular at t={t}, h={h} "
                                  f"(pivot ratio {info:.1e})", t=t, h=h, cause="singular matrix")

    def _advance_checked(self, t_target):
        # Simulation.do_step's hot path: one compiled call, outputs computed in it
        if not t_target > self._S[K.T]:
            return self.advance(t_target)
        self._outputs_fresh = False
        budget = self.max_steps
        if budget > MAX_STEPS_PER_CALL:
            budget = MAX_STEPS_PER_CALL
        if self._restart_pending:  # new inputs: restart and advance in one call (as _run)
            status = self._entry(_RESTART_THEN_ADVANCE, self._S, self._I, self._LU, self._u_c,
                                 self.model._p, t_target, budget, self._y_out)
            if status >= jit.RESTART_STATUS:  # the restart failed, nothing changed
                self._flush_restart()  # the reference raises its clear error (or solves it)
                status = self._entry(K.WHOLE_INTERVAL, self._S, self._I, self._LU, self._u_c,
                                     self.model._p, t_target, budget, self._y_out)
            else:
                self._restart_pending = False
        else:
            status = self._entry(K.WHOLE_INTERVAL, self._S, self._I, self._LU, self._u_c, self.model._p,
                                 t_target, budget, self._y_out)
        if status == K.OK:
            self._outputs_fresh = self._kernel_outputs
        else:
            self._finish_run(status, t_target)
        return t_target

    @property
    def _call_budget(self):
        return min(self.max_steps, MAX_STEPS_PER_CALL)

    def fresh_outputs(self):
        """The model's outputs at the current state as the compiled step computed
        them (a copy), or None when they must be computed in Python."""
        if self._outputs_fresh:
            return self._y_out.copy()
        return None

    def outputs_into(self, out):
        if self._outputs_fresh:
            out[:] = self._y_out
            return True
        return False

    def native_step_record(self):
        """What a caller without Python (the FMU binary) needs to take the step
        :meth:`_advance_checked` takes, as long as nothing else touches this
        integrator: (entry address in numba's calling convention, S, I, LU, u, p,
        y_out, step budget, slot of t in S), or None when the next advance is not
        that one compiled call (no state yet, a deferred restart, outputs computed
        in Python) or the entry's convention is not vouched for
        (:func:`cosim.jit.native_entry_address`; the caller keeps the entry, second
        item, alive with the arrays).  The caller writes new inputs into ``u`` in
        place and then runs entry mode 3 (restart, then advance)."""
        if not (self._has_state and self._kernel_outputs and self._outputs_fresh
                and not self._restart_pending):
            return None
        arrays = (self._S, self._I, self._LU, self._u_c, self.model._p, self._y_out)
        if not all(a.flags.c_contiguous and a.flags.writeable for a in arrays):
            return None
        address = jit.native_entry_address(self._entry)
        if address is None:
            return None
        return (address, self._entry, *arrays, self._call_budget, K.T)

    def hold_inputs(self, u):
        # Integrator.hold_inputs: u is already a C-contiguous float vector
        self._u_c = u
        self.restart()

    def _flush_restart(self):
        """Carry out the restart that restart() deferred (before anything reads or
        writes the record, so the deferral is invisible)."""
        self._restart_pending = False
        self._restart()

    def _restart(self):
        self._outputs_fresh = False
        status = self._entry(K.RESTART, self._S, self._I, self._LU, self._u_array(), self.model._p, 0.0, 0,
                             self._y_out)
        if status != K.OK:
            super()._restart()  # the reference raises its clear error (or solves it)
            self.t_prev, self.y_prev = self.t, self.y

    def restart(self):
        # deferred: the next compiled advance restarts first, in the same call (one
        # dispatch per new input); every read or write of the record before that
        # carries it out first.  The kernel writes nothing unless eq. 10 was solved
        # (else the reference raises its clear error, then).
        if self._has_state:
            self._outputs_fresh = False
            self._restart_pending = True
        else:
            self._restart()


class CompiledGeneralizedAlphaIndex2(CompiledGeneralizedAlpha, GeneralizedAlphaIndex2):
    """Generalized-α on the GGL index-2 form (seed 000 eqs. 37-39) whose step loop
    runs compiled: the same record and entry as the index-3 method with the
    kernel's formulation switch set (options, name and messages from the
    reference class :class:`GeneralizedAlphaIndex2`)."""

    _ggl = 1
