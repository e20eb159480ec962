"""BDF index 3 ("bdf"), stabilised index 2 ("bdf-i2") and index 1 ("bdf-i1")
on the compiled (numba) backend: a thin wrapper around
:mod:`cosim.integrators.bdf_kernel` (one compiled entry per model for all three), built like
:mod:`cosim.integrators.ga_compiled`.

The wrapper owns the API, validation, the IC analysis, the restart (eq. 10
and the order-1 start, Python, rare), dense output, events, state capture and
error messages.  The method memory lives in the kernel's record (``S``,
``I``, ``LU``); the attributes the reference class reads (``t``, ``y``,
``_D``, ``_tau``, ``_k``, ``newton.factor``, ``stats`` …) are views of that
record, so :class:`~cosim.integrators.bdf.BDFIndex3`'s ``state()``,
``restore()`` and ``dense_output`` work unchanged and a state captured on one
backend restores on the other.

``order_history`` keeps the (t, k) of accepted steps as the reference does,
except that one compiled call longer than ``bdf_kernel.HIST`` steps leaves
only its last ``HIST`` entries (``order_counts`` keeps every step).
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np

from .. import jit
from ..errors import ConvergenceError, InvalidInputError, SingularMatrixError, StateError
from . import bdf_kernel as K
from .base import STAT_KEYS
from .bdf import ORDER_HISTORY_MAX, BDFIndex1, BDFIndex2, BDFIndex3, tolerance_hint
from .model_functions import compiled_unsupported as _model_supported
from .record_views import WholeIntervalAdvance, _Array, _Scalar, _Stats, record_factor, store_factor
from .newton import QuasiNewton

_NEWTON_REASONS = {K.R_RESIDUAL: "residual is not finite", K.R_UPDATE: "Newton update is not finite",
                   K.R_NO_CONVERGENCE: f"no convergence in {K.NEWTON_MAX_ITER} iterations"}
MAX_STEPS_PER_CALL = 1_000_000
_Y, _YP, _QDD, _LAM, _D, _DZ, _TAU, _J = range(8)   # positions in bdf_kernel.offsets()


def _model_entries(model, method):
    from . import dense_lu  # noqa: PLC0415
    return jit.model_entry_points(K, model.kernels().functions(), model.name, method,
                                  helpers=(dense_lu,))


def supports(model):
    """Why the compiled bdf cannot run ``model`` (None: it can).  Every option
    of the reference (max_order, velocity_error incl. "scaled",
    velocity_weights, reuse_matrix, error_norm) is implemented in the kernel."""
    reason = _model_supported(model)
    if reason is None and not jit.entry_loaded(K, model.kernels().functions()):
        from . import dense_lu  # noqa: PLC0415
        reason = jit.sources_unreadable((K, dense_lu), model.kernels().functions())
    return reason


class _Int:
    def __init__(self, slot):
        self.slot = slot

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        return int(obj._I[self.slot])

    def __set__(self, obj, value):
        obj._I[self.slot] = int(value)


class _RecordNewton(QuasiNewton):
    """QuasiNewton whose controller memory and LU live in the integrator's record."""

    def __init__(self, owner, **kw):
        self._owner = owner
        super().__init__(owner.stats, **kw)

    sigma = property(lambda self: float(self._owner._S[K.SIGMA]),
                     lambda self, v: self._owner._S.__setitem__(K.SIGMA, float(v)))
    relax = property(lambda self: float(self._owner._S[K.RELAX]),
                     lambda self, v: self._owner._S.__setitem__(K.RELAX, float(v)))
    need_jac = property(lambda self: bool(self._owner._I[K.NEED_JAC]),
                        lambda self, v: self._owner._I.__setitem__(K.NEED_JAC, 1 if v else 0))

    @property
    def h_jac(self):
        v = float(self._owner._S[K.H_JAC])
        return None if v < 0.0 else v

    @h_jac.setter
    def h_jac(self, value):
        self._owner._S[K.H_JAC] = -1.0 if value is None else float(value)

    @property
    def factor(self):
        return record_factor(self._owner, K.HAS_FACTOR, K.PIV)

    @factor.setter
    def factor(self, value):
        store_factor(self._owner, value, K.HAS_FACTOR, K.PIV)


_NO_OUTPUTS = np.zeros(0)  # the entry computes no outputs for BDF (get_outputs: Python)


class _CompiledBDF(WholeIntervalAdvance):
    """The compiled step loop under a BDF reference class (mixed in first)."""

    _K = K
    _max_steps_per_call = MAX_STEPS_PER_CALL

    # (read by the record views shared with generalized-α: BDF restarts at once
    # and leaves the outputs to Python)
    _restart_pending = False
    _outputs_fresh = False

    backend = "numba"
    _variant = K.INDEX3

    t = _Scalar(K.T, none=math.nan)
    t_prev = _Scalar(K.T_PREV, none=math.nan)
    h_next = _Scalar(K.H_NEXT)
    h = _Scalar(K.H)
    y = _Array(_Y)
    y_prev = _Array(_YP)
    qdd = _Array(_QDD)
    lam = _Array(_LAM)
    _D = _Array(_D, lambda o: (K.ROWS, 2 * o._n))
    _Dz = _Array(_DZ, lambda o: (K.ROWS, o._nz))
    _tau = _Array(_TAU)
    _k = _Int(K.K_NEXT)
    order = _Int(K.ORDER)
    _k_used = _Int(K.K_USED)
    _valid = _Int(K.VALID)
    _n_steps = _Int(K.N_STEPS)
    newton_failures = _Int(K.NEWTON_FAILS)
    error_test_failures = _Int(K.ERROR_FAILS)

    def __init__(self, model, **kwargs):
        reason = supports(model)
        if reason is not None:
            raise InvalidInputError(f"backend 'numba': {reason}")
        self._entry = _model_entries(model, "bdf")   # one compilation for every variant
        self._allocate(model.n_q, model.n_c)
        super().__init__(model, **kwargs)
        self._setup_newton()
        self.order_history = deque(maxlen=ORDER_HISTORY_MAX)

    # -- the record ----------------------------------------------------------------------
    def _allocate(self, n, m):
        ns = K.system_size(self._variant, n, m)
        offs = K.offsets(n, m, ns)
        lengths = (2 * n, 2 * n, n, m, K.ROWS * 2 * n, K.ROWS * (n + m), K.ROWS, ns * ns)
        self._slices = [(offs[i], lengths[i]) for i in range(8)]
        self._n, self._nz, self._N = n, n + m, ns
        self._offsets = offs
        self._S = np.zeros(offs[-1])
        self._S[K.T] = self._S[K.T_PREV] = math.nan
        self._S[K.H_JAC] = -1.0
        self._S[K.RELAX] = 1.0
        self._I = np.zeros(K.int_length(n, m, ns), dtype=np.int64)
        self._I[K.I_N], self._I[K.I_M] = n, m
        self._I[K.I_NS], self._I[K.VARIANT] = ns, self._variant
        self._I[K.NEED_JAC] = 1
        self._I[K.K_NEXT] = self._I[K.ORDER] = self._I[K.K_USED] = self._I[K.VALID] = 1
        self._LU = np.zeros((ns, ns))
        self._has_state = False
        self._stats_view = _Stats(self, K.STATS)
        self._hist_seen = 0

    @property
    def stats(self):
        return self._stats_view

    @stats.setter
    def stats(self, value):
        if hasattr(self, "_stats_view"):
            for key in STAT_KEYS:
                self._stats_view[key] = int(dict(value).get(key, 0))

    @property
    def order_counts(self):
        return [int(c) for c in self._I[K.ORDER_COUNTS:K.ORDER_COUNTS + K.MAX_ORDER + 1]]

    @order_counts.setter
    def order_counts(self, value):
        value = [int(c) for c in value]
        if len(value) != K.MAX_ORDER + 1:
            raise StateError(f"order_counts must have {K.MAX_ORDER + 1} entries, got {len(value)}")
        self._I[K.ORDER_COUNTS:K.ORDER_COUNTS + K.MAX_ORDER + 1] = value

    @property
    def _J(self):
        if not self._I[K.HAS_J]:
            return None
        start, length = self._slices[_J]
        return self._S[start:start + length].reshape(self._N, self._N).copy()

    @_J.setter
    def _J(self, value):
        if value is None:
            self._I[K.HAS_J] = 0
            return
        start, length = self._slices[_J]
        arr = np.asarray(value, dtype=float)
        if arr.shape != (self._N, self._N):
            raise StateError(f"iteration matrix must be {self._N}x{self._N}, got shape {arr.shape}")
        self._S[start:start + length] = arr.reshape(-1)
        self._I[K.HAS_J] = 1

    def check_options(self):
        super().check_options()
        self._sync_parameters()

    def _sync_parameters(self):
        """Options and tolerances into the record (after check_options)."""
        if not hasattr(self, "_S"):
            return
        S, I = self._S, self._I
        S[K.RTOL], S[K.ATOL] = self.rtol, self.atol
        S[K.H_FIXED] = 0.0 if self.h_fixed is None else self.h_fixed
        S[K.MAX_STEP] = self.max_step
        I[K.MAX_ORD] = self.max_order
        I[K.REUSE] = 1 if self._reuse_across_steps else 0
        I[K.VEL_ERROR] = K.VE_SCALED if self._velocity_scaled else (K.VE_ON if self.velocity_error else K.VE_OFF)
        I[K.POS_WEIGHTS] = 1 if self._position_weights else 0
        I[K.ERR_RMS] = 1 if self._rms_norm else 0
        I[K.CONST_MASS] = 1 if self.model.constant_mass else 0

    def _setup_newton(self):
        from .bdf import NEWTON_ERR_TOL, NEWTON_MAX_ITER, NEWTON_TOL  # noqa: PLC0415
        self.newton = _RecordNewton(self, max_iter=NEWTON_MAX_ITER, tol=NEWTON_TOL, err_tol=NEWTON_ERR_TOL,
                                    what=f"{self.name} iteration matrix", prior_rate=True)

    # -- set-up ------------------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        original = self.model
        report = self._ic(t0, y0, **ic_options)
        if self.model is not original:
            # redundant constraints removed: the kernels describe the full model
            raise InvalidInputError(
                f"backend 'numba': model {original.name!r} has redundant constraints "
                f"({', '.join(getattr(report, 'redundant', None) or ['removed by the IC analysis'])})")
        stats = dict(self.stats.items())
        self._allocate(self.model.n_q, self.model.n_c)
        self.stats = stats
        self._has_state = True
        self._sync_parameters()
        self.t = t0
        self.y = np.concatenate([report.q, report.v])
        self.qdd = report.qdd
        self.lam = report.lam
        self._setup_newton()
        self.order_history = deque(maxlen=ORDER_HISTORY_MAX)
        self._start(self._initial_step())

    def _start(self, h):
        """BDF._start on the record: order 1, D_1 = h ẏ_0, τ = (h, 2h)."""
        S, I = self._S, self._I
        n = self._n
        for index in (_D, _DZ, _TAU):
            start, length = self._slices[index]
            S[start:start + length] = 0.0
        start = self._slices[_D][0] + 2 * n     # row 1 of D
        S[start:start + 2 * n] = h * np.concatenate([self.v, self.qdd])
        tau = self._slices[_TAU][0]
        S[tau], S[tau + 1] = h, 2.0 * h
        I[K.K_NEXT] = I[K.ORDER] = I[K.K_USED] = I[K.VALID] = 1
        I[K.N_STEPS] = 0
        S[K.H_NEXT] = S[K.H] = h
        self.newton.invalidate()

    def _restore_method_state(self, d):
        if getattr(self, "newton", None) is None:
            self._setup_newton()
        super()._restore_method_state(d)

    # -- stepping ---------------------------------------------------------------------------------
    def _u_array(self):
        u = self.u
        if not (isinstance(u, np.ndarray) and u.dtype == np.float64 and u.flags.c_contiguous):
            u = np.ascontiguousarray(u, dtype=float)
        return u

    def _run(self, t_target, max_steps, mode):
        # the kernel is all or nothing: on failure it restores S, I, LU itself
        status = self._entry(mode, self._S, self._I, self._LU, self._u_array(), self.model._p,
                             t_target, max_steps, _NO_OUTPUTS)
        self._sync_history()
        if status == K.STEP_BUDGET:
            # the reference's message names the t reached (its state is then restored)
            t_now = self._S[K.T]
            self._S[K.T] = self._S[K.F_T]
            try:
                self.too_many_steps(t_target)
            finally:
                self._S[K.T] = t_now
        if status != K.OK:
            self._raise(status)

    def _sync_history(self):
        """New (t, k) entries of the kernel's ring buffer into order_history."""
        count = int(self._I[K.HIST_COUNT])
        new = count - self._hist_seen
        if new > 0:
            o_ht, o_hk = self._offsets[8:10]
            S = self._S
            for i in range(count - min(new, K.HIST), count):
                slot = i % K.HIST
                self.order_history.append((float(S[o_ht + slot]), int(S[o_hk + slot])))
        self._hist_seen = count

    def _raise(self, status):
        S, I = self._S, self._I
        name = self.name
        t, h = float(S[K.F_T]), float(S[K.F_H])
        messages = {K.NEWTON_FAILED: ("Newton iteration failed",
                                      _NEWTON_REASONS.get(int(I[K.REASON]), "Newton iteration failed")),
                    K.ERROR_TEST_FAILED: ("local error test failed repeatedly",
                                          f"error ratio {float(S[K.F_INFO]):.3g}"),
                    K.MIN_STEP: ("step size below the minimum", "minimum step reached"),
                    K.UNDERFLOW: ("step size underflow", "step does not advance t")}
        if status in messages:
            message, cause = messages[status]
            hint = tolerance_hint(name, float(S[K.RTOL]), float(S[K.ATOL])) if status == K.MIN_STEP else ""
            raise ConvergenceError(f"{name}: {message} at t={t!r}, h={h!r} ({cause}){hint}", t=t, h=h,
                                   cause=cause)
        what, hhat = f"{name} iteration matrix", float(S[K.F_HHAT])
        if status == K.NONFINITE_MATRIX:
            inner = f"{what} contains NaN/inf at t={t}, h={hhat}"
        else:
            inner = f"{what} is numerically singular at t={t}, h={hhat} (pivot ratio {float(S[K.F_INFO]):.1e})"
        raise SingularMatrixError(f"{name}: singular iteration matrix at t={t!r}, h={h!r}, "
                                  f"order {int(I[K.F_K])} ({inner})", t=t, h=h,
                                  cause="singular iteration matrix")


class CompiledBDFIndex3(_CompiledBDF, BDFIndex3):
    """Index-3 BDF ("bdf") whose step loop runs compiled (numba)."""

    _variant = K.INDEX3


class CompiledBDFIndex2(_CompiledBDF, BDFIndex2):
    """Stabilised index-2 BDF ("bdf-i2") whose step loop runs compiled (numba)."""

    _variant = K.INDEX2


class CompiledBDFIndex1(_CompiledBDF, BDFIndex1):
    """BDF with q, v, a as index-1 variables ("bdf-i1") whose step loop runs compiled (numba)."""

    _variant = K.INDEX1
