"""dopri5 and rk4 on the compiled (numba) backend: a thin wrapper around
:mod:`cosim.integrators.explicit_kernel` (one compiled entry per model for
both methods), built like :mod:`cosim.integrators.ga_compiled`.

The wrapper owns the API, validation, the IC analysis and the first
derivative / initial step (Python, once), dense output, events, restarts
(they only drop the FSAL stage), state capture and error messages.  The
method memory lives in the kernel's record (``S``, ``I``); the attributes the
reference classes use (``t``, ``y``, ``f_cur``, ``_dense``, ``h_next``,
``projection_iterations``, ``stats`` …) are views of it, so
:class:`~cosim.integrators.explicit.DormandPrince`'s and
:class:`~cosim.integrators.explicit.RK4`'s ``state()``, ``restore()`` and
``dense_output`` work unchanged and a state captured on one backend restores
on the other.
"""
from __future__ import annotations

import math

import numpy as np

from .. import jit
from ..errors import ConvergenceError, InvalidInputError, SingularMatrixError, StateError
from . import explicit_kernel as K
from .base import STAT_KEYS
from .explicit import RK4, DormandPrince, IndexOneRHS
from .model_functions import compiled_unsupported as _model_supported
from .model_functions import n_nonholonomic as _n_nonholonomic
from .record_views import WholeIntervalAdvance, _Array, _Scalar, _Stats


def _kernel_functions(model):
    """The entry's kernels: the model's, then its nonholonomic ones if it has rows."""
    ks = model.kernels()
    if not _n_nonholonomic(model):
        return ks.functions()
    return ks.functions() + ks.nonholonomic_functions()

MAX_STEPS_PER_CALL = 1_000_000
_Y, _YP, _QDD, _LAM = range(4)   # positions in explicit_kernel.offsets()
_J_TEXT = "[[M, C_q^T], [C_q, 0]] (seed 000 eq. 89)"   # IndexOneRHS.factorize's matrix name


def _extras(model):
    """Modules pasted after explicit_kernel: the nonholonomic variant only for a model
    with such rows (every other model's entry stays as it is)."""
    if not _n_nonholonomic(model):
        return ()
    from . import explicit_nh_kernel  # noqa: PLC0415
    return (explicit_nh_kernel,)


def _model_entries(model):
    from . import dense_lu  # noqa: PLC0415
    from ..models.kernels import COMPILED_FIELDS  # noqa: PLC0415
    # kernel_name: models sharing one kernel set (every URDF robot) share one entry file
    return jit.model_entry_points(K, _kernel_functions(model),
                                  getattr(model, "kernel_name", model.name), "explicit",
                                  helpers=(dense_lu,), extras=_extras(model),
                                  outputs_index=len(COMPILED_FIELDS) - 1)


def supports(model):
    """Why the compiled dopri5/rk4 cannot run ``model`` (None: it can): a
    multibody model with kernels, including nonholonomic ones for its
    nonholonomic rows (first-order models run the reference)."""
    reason = _model_supported(model, nonholonomic=True)
    if reason is None and not jit.entry_loaded(K, _kernel_functions(model)):
        from . import dense_lu  # noqa: PLC0415
        reason = jit.sources_unreadable((K, dense_lu, *_extras(model)), _kernel_functions(model))
    return reason


def _singular_text(status, t, ratio):
    """The text of common.lu_factor's SingularMatrixError for J at t."""
    if status in (K.NONFINITE_MATRIX, K.C_NONFINITE_MATRIX):
        return f"{_J_TEXT} contains NaN/inf at t={t}, h=None"
    return f"{_J_TEXT} is numerically singular at t={t}, h=None (pivot ratio {ratio:.1e})"


class _CompiledExplicit(WholeIntervalAdvance):
    """The compiled step loop under an explicit reference class (mixed in first)."""

    _K = K
    _max_steps_per_call = MAX_STEPS_PER_CALL
    _strict_times = True

    backend = "numba"
    _restart_pending = False      # (read by the record views shared with generalized-α)
    _method_code = K.DOPRI5

    t = _Scalar(K.T, none=math.nan)
    t_prev = _Scalar(K.T_PREV, none=math.nan)
    h_next = _Scalar(K.H_NEXT)
    y = _Array(_Y)
    y_prev = _Array(_YP)
    qdd = _Array(_QDD)
    lam = _Array(_LAM)

    def __init__(self, model, **kwargs):
        reason = supports(model)
        if reason is not None:
            raise InvalidInputError(f"backend 'numba': {reason}")
        self._entry = _model_entries(model)
        probe = getattr(model, "kernel_outputs", None)  # KernelModel; a URDF robot has none
        self._kernel_outputs = bool(probe is not None and probe())
        self._n_out = len(model.output_names) if self._kernel_outputs else 0
        self._n_g = _n_nonholonomic(model)
        self._allocate(model.n_q, model.n_c)
        super().__init__(model, **kwargs)
        self.multibody = True
        self.n = model.n_q
        self._rhs = IndexOneRHS(model, self.stats)   # Python f: first derivative, reset_point
        self._sync_parameters()

    # -- the record ----------------------------------------------------------------------
    def _allocate(self, n, m_holonomic):
        old_stats = dict(self._stats_view) if hasattr(self, "_stats_view") else None
        g = self._n_g
        m = m_holonomic + g   # multiplier rows: C and (explicit_nh_kernel) B
        offs = K.offsets(n, m)
        lengths = (2 * n, 2 * n, n, m)
        self._slices = [(offs[i], lengths[i]) for i in range(4)]
        self._n, self._m = n, m
        self._o_f, self._o_d = offs[4], offs[5]
        self._S = np.zeros(offs[-1])
        self._S[K.T] = self._S[K.T_PREV] = math.nan
        self._I = np.zeros(K.int_length(n, m) + (1 if g else 0), dtype=np.int64)
        self._I[K.I_N], self._I[K.I_M] = n, m
        if g:
            self._I[-1] = g   # explicit_nh_kernel.n_nonholonomic
        self._I[K.METHOD] = self._method_code
        self._LU = np.zeros((n + m, n + m))
        self._y_out = np.zeros(self._n_out)
        self._outputs_fresh = False
        self._has_state = False
        self._stats_view = _Stats(self, K.STATS)
        if old_stats is not None:
            self.stats = old_stats

    @property
    def stats(self):
        return self._stats_view

    @stats.setter
    def stats(self, value):
        if hasattr(self, "_stats_view"):
            for key in STAT_KEYS:
                self._stats_view[key] = int(dict(value).get(key, 0))

    @property
    def projection_iterations(self):
        return int(self._I[K.PROJ_ITERS])

    @projection_iterations.setter
    def projection_iterations(self, value):
        self._I[K.PROJ_ITERS] = int(value)

    @property
    def f_cur(self):
        if not self._I[K.HAS_F]:
            return None
        return self._S[self._o_f:self._o_f + 2 * self._n].copy()

    @f_cur.setter
    def f_cur(self, value):
        self._outputs_fresh = False
        if value is None:
            self._I[K.HAS_F] = 0
            return
        self._S[self._o_f:self._o_f + 2 * self._n] = self._vector(value, 2 * self._n, "f_cur")
        self._I[K.HAS_F] = 1

    @staticmethod
    def _vector(value, length, what):
        arr = np.asarray(value, dtype=float).reshape(-1)
        if arr.shape != (length,):
            raise StateError(f"{what} has {arr.size} entries, the record slot holds {length}")
        return arr

    def _sync_parameters(self):
        """Tolerances and step options into the record (after check_options)."""
        S = self._S
        S[K.RTOL], S[K.ATOL] = self.rtol, self.atol
        S[K.H_FIXED] = 0.0 if self.h_fixed is None else self.h_fixed
        S[K.MAX_STEP] = self.max_step

    # -- set-up ------------------------------------------------------------------------------
    def _ic(self, t0, y0, **ic_options):
        original = self.model
        from ..ic import analyse_initial_conditions  # noqa: PLC0415
        q0, v0 = original.split(y0)
        report = analyse_initial_conditions(original, t0, q0, v0, self.u, **ic_options)
        if report.model is not original:
            # redundant constraints removed: the kernels describe the full model
            raise InvalidInputError(
                f"backend 'numba': model {original.name!r} has redundant constraints "
                f"({', '.join(getattr(report, 'redundant', None) or ['removed by the IC analysis'])})")
        self.ic_report = report
        self._allocate(original.n_q, original.n_c)
        self._has_state = True
        self._sync_parameters()
        self.t = t0
        self.y = np.concatenate([report.q, report.v])
        self.qdd = report.qdd
        self.lam = report.lam
        return report

    def _initialize(self, t0, y0, **ic_options):
        super()._initialize(t0, y0, **ic_options)   # the reference's f0 and initial step (Python)
        self._rhs.stats = self.stats
        # numba loads the machine code from its cache at the first call (~1-2 s):
        # pay that now, on a scratch copy of the record, not in the first (real-time) step
        self._entry(K.RESTART, self._S.copy(), self._I.copy(), self._LU.copy(), self._u_c,
                    self.model._p, 0.0, 0, self._y_out.copy())

    def restore(self, state):
        super().restore(state)
        self._has_state = True

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
        self._outputs_fresh = False

    def _run(self, t_target, max_steps, mode):
        # the kernel is all or nothing: on failure it restores S and I itself
        self._outputs_fresh = False
        status = self._entry(mode, self._S, self._I, self._LU, self._u_c, self.model._p,
                             t_target, max_steps, self._y_out)
        self._finish_run(status, t_target)

    def _finish_run(self, status, t_target):
        if status == K.OK:
            self._outputs_fresh = self._kernel_outputs
            return
        S, I = self._S, self._I
        t, h = float(S[K.F_T]), float(S[K.F_H])
        if status == K.STEP_BUDGET:
            # the reference's message names the t reached (its state is then restored)
            t_now = S[K.T]
            S[K.T] = t
            try:
                self.too_many_steps(t_target)
            finally:
                S[K.T] = t_now
        if status in (K.SINGULAR, K.NONFINITE_MATRIX):
            ct = float(S[K.F_CT])
            raise SingularMatrixError(_singular_text(status, ct, float(S[K.F_CINFO])), t=ct, h=None,
                                      cause="non-finite matrix" if status == K.NONFINITE_MATRIX
                                      else "singular matrix")
        if status == K.NONFINITE_DERIVATIVE:
            message, h, cause = "right-hand side is not finite", 0.0, "non-finite derivative"
        elif status == K.UNDERFLOW:
            message, cause = "step size underflow", "step does not advance t"
        else:
            message = "explicit step failed" if status == K.STEP_FAILED else "step size became too small"
            cause = self._cause_text(int(I[K.CAUSE]), float(S[K.F_ERR]), float(S[K.F_CT]),
                                     float(S[K.F_CINFO]))
        raise ConvergenceError(f"{self.name}: {message} at t={t!r}, h={h!r} ({cause})", t=t, h=h,
                               cause=cause)

    @staticmethod
    def _cause_text(code, err, ct, info):
        """ExplicitRungeKutta._step_inner's cause strings."""
        if code == K.C_NONE:
            return f"error ratio {err:.3g}"
        if code == K.C_NONFINITE_SOLUTION:
            return "non-finite solution"
        if code in (K.C_SINGULAR, K.C_NONFINITE_MATRIX):
            return _singular_text(code, ct, info)
        if code == K.C_RHS:
            return "constraint projection failed: right-hand side is not finite"
        which = "position" if code == K.C_POSITION else "velocity"
        return f"constraint projection failed: {which} projection did not converge at t={ct!r}"

    def fresh_outputs(self):
        """The model's outputs at the current state as the compiled step computed
        them (a copy), or None when they must be computed in Python."""
        if self._outputs_fresh:
            return self._y_out.copy()
        return None


class CompiledDormandPrince(_CompiledExplicit, DormandPrince):
    """dopri5 whose step loop runs compiled (numba)."""

    _method_code = K.DOPRI5

    @property
    def _dense(self):
        if not self._I[K.HAS_DENSE]:
            return None
        n2, o = 2 * self._n, self._o_d
        S = self._S
        return {"Q": S[o:o + 4 * n2].reshape(n2, 4).copy(), "h": np.array(S[K.DENSE_H]),
                "shift": S[o + 4 * n2:o + 5 * n2].copy()}

    @_dense.setter
    def _dense(self, value):
        self._outputs_fresh = False
        if value is None:
            self._I[K.HAS_DENSE] = 0
            return
        n2, o = 2 * self._n, self._o_d
        self._S[o:o + 4 * n2] = self._vector(np.asarray(value["Q"], dtype=float).reshape(-1), 4 * n2, "dense.Q")
        self._S[o + 4 * n2:o + 5 * n2] = self._vector(value["shift"], n2, "dense.shift")
        self._S[K.DENSE_H] = float(value["h"])
        self._I[K.HAS_DENSE] = 1


class CompiledRK4(_CompiledExplicit, RK4):
    """rk4 whose step loop runs compiled (numba)."""

    _method_code = K.RK4

    @property
    def _dense(self):
        if not self._I[K.HAS_DENSE]:
            return None
        n2, o = 2 * self._n, self._o_d
        S = self._S
        return {"f0": S[o:o + n2].copy(), "f1": S[o + n2:o + 2 * n2].copy(), "h": np.array(S[K.DENSE_H])}

    @_dense.setter
    def _dense(self, value):
        self._outputs_fresh = False
        if value is None:
            self._I[K.HAS_DENSE] = 0
            return
        n2, o = 2 * self._n, self._o_d
        self._S[o:o + n2] = self._vector(value["f0"], n2, "dense.f0")
        self._S[o + n2:o + 2 * n2] = self._vector(value["f1"], n2, "dense.f1")
        self._S[K.DENSE_H] = float(value["h"])
        self._I[K.HAS_DENSE] = 1
