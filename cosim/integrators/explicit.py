"""Explicit Runge-Kutta integrators with constraint projection (seed 000 §6).

Multibody models are integrated in the index-1 form (seed 000 eq. 88)

    q' = v,   [[M, C_qᵀ], [C_q, 0]] [v'; λ] = [Q; γ],

with the matrix J of eq. 89 factorised once per right-hand-side evaluation.
After every accepted step the solution is projected back onto the constraint
manifold (seed 000 §6, "约束修正法"), reusing the factor of J from the last
stage evaluation (simplified Newton, Hairer-Wanner VII.2):

    position:  J [Δq; ν] = [0; −C(q^i)],          q^{i+1} = q^i + Δq
    velocity:  J [Δv; ν] = [0; −(C_q v^i + C_t)],  v^{i+1} = v^i + Δv

i.e. repeated M-orthogonal minimum-norm corrections.  First-order models
x' = f(t, x, u) are integrated directly.

* :class:`DormandPrince` ("dopri5"): 5(4) pair with error control on [q, v]
  and its free 4th-order dense output (the projection correction is blended
  in linearly so the interpolant meets both projected end points).
* :class:`RK4` ("rk4"): classical 4th-order Runge-Kutta; fixed step with
  ``h=`` (real-time use, seed 004 comparison) or step doubling for error
  control; cubic Hermite dense output.

Both run in fixed-step mode when ``h`` is given (no error test, every step h).

The algorithm is :mod:`cosim.integrators.explicit_kernel` — one implementation,
run compiled (numba, compiled once per machine, the model given as compiled
functions) or as plain Python (the same functions).  This module is the
integrator object around it: the IC analysis, the first derivative and the
initial step (the kernel's ``_evaluate`` run uncompiled, once), the record
(``S``, ``I``, ``LU``), dense output, state capture and error messages.
"""
from __future__ import annotations

import math

import numpy as np

from .. import fixed_step, jit
from ..errors import ConvergenceError, SingularMatrixError
from . import dense_lu, explicit_record, index1_kernel, kernel_common
from . import explicit_kernel as K
from .base import MultibodyIntegrator
from .explicit_record import O_END, O_LAM, O_QDD, O_Y, O_YP
from .explicit_state import RECORD
from .common import last_step_dense_output, last_step_interpolant, step_interpolant
from .kernel_common import error_ratio
from .model_functions import n_nonholonomic, python_functions
from .record import DeferredRestart, RecordIntegrator, kernel_model_reason, record_point

_J_TEXT = "[[M, C_q^T], [C_q, 0]] (seed 000 eq. 89)"   # the matrix J of eq. 89 in messages


# the modules explicit_kernel's functions call, pasted before it into the compiled method
KERNEL_HELPERS = (dense_lu, kernel_common, explicit_record, index1_kernel)


def supports(model):
    """Why the compiled dopri5/rk4 cannot run ``model`` (None: it can): a multibody
    model with kernels, including nonholonomic ones for its nonholonomic rows
    (first-order models run on the python backend)."""
    return kernel_model_reason(model, nonholonomic=True)


def compiled_entry():
    """The compiled method, dopri5 and rk4 (compiled once per machine, cached;
    cosim.jit.method_entry)."""
    return jit.method_entry(K, "explicit", helpers=KERNEL_HELPERS)


# the C entry the FMU binary runs the compiled method through (one for every method,
# given the method's own address by cosim.jit.native_addresses)
compiled_native_step = jit.native_step_address


def _singular_text(code, t, ratio):
    """The text of a singular (or non-finite) J at t."""
    if code in (K.NONFINITE_MATRIX, K.C_NONFINITE_MATRIX):
        return f"{_J_TEXT} contains NaN/inf at t={t}, h=None"
    return f"{_J_TEXT} is numerically singular at t={t}, h=None (pivot ratio {ratio:.1e})"


_POINT = record_point(K.T, K.T_PREV, ("y", "y_prev", "qdd", "lam"), settle=True)


def _completed(prop):
    """``prop`` (a record view) read after the end of the last step is complete: a
    fixed rk4 step after new inputs leaves f, q'', λ at its end and the dense f1 to
    be evaluated when they are needed (explicit_kernel.complete_step)."""

    def get(self):
        self._complete_end()
        return prop.fget(self)
    return property(get, prop.fset, doc=prop.__doc__)


class ExplicitRungeKutta(DeferredRestart, _POINT, RecordIntegrator, MultibodyIntegrator):
    """Common part: the record, the first derivative and initial step, state."""

    model_kinds = ("multibody", "first_order")
    implicit = False
    order = K.ORDER    # order of the error estimate's exponent (err ∝ h^(order+1))
    _kernel = K
    _method_code = K.DOPRI5
    fixed_error_order = 5   # the fixed step's estimate ∝ h⁵ (cosim.fixed_step)
    refusal = K.REFUSAL_DOPRI5   # a fixed step refused above 1/(refusal·rtol) (explicit_record)
    compiled_entry = staticmethod(compiled_entry)
    compiled_native_step = staticmethod(compiled_native_step)
    _lu_is_state = False   # the projection's LU is work space

    state_declaration = RECORD   # the record, the state dictionary and its schema
    h_next = RECORD.view("method_state.h_next")
    projection_iterations = RECORD.view("method_state.projection_iterations")
    f_cur = _completed(RECORD.view("method_state.f_cur"))   # the FSAL / first stage f (None: not in the record)
    _dense = _completed(RECORD.view("method_state.dense"))  # the last step's dense output (None before a step)

    def __init__(self, model, backend="python", **kwargs):
        self._construct(model, backend, supports, K.N_SCALARS, kwargs)

    # -- the record ----------------------------------------------------------------------
    def _allocate(self):
        model = self.model
        self.multibody = model.kind == "multibody"
        if self.multibody:
            n, g = model.n_q, n_nonholonomic(model)
            m, ny = model.n_c + g, 2 * model.n_q   # multiplier rows: C and B
        else:
            n = m = g = 0
            ny = model.n_y
        self.n = n
        offs = K.offsets(n, m, ny)
        self._slices = [(offs[O_Y], ny), (offs[O_YP], ny), (offs[O_QDD], n), (offs[O_LAM], m)]
        self._n, self._m, self._ny = n, m, ny
        S = np.zeros(offs[O_END])
        S[K.T] = S[K.T_PREV] = math.nan
        I = np.zeros(K.int_length(n, m), dtype=np.int64)
        I[K.I_N], I[K.I_M], I[K.I_NY], I[K.I_NG] = n, m, ny, g
        I[K.FIRST_ORDER] = 0 if self.multibody else 1
        I[K.METHOD] = self._method_code
        self._set_record(S, I, n + m)
        self._sync_step_options()

    qdd = _completed(_POINT.qdd)
    lam = _completed(_POINT.lam)

    def _complete_end(self):
        """The end of the last step where the kernel left it pending (a deferred
        restart forgets it instead)."""
        self._settle()
        if self._I[K.HAS_DENSE] == K.END_PENDING:
            self._call(K.COMPLETE, 0.0, 0)

    # -- set-up --------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        if self.model.kind == "multibody":
            report = self._analyse_start(t0, y0, **ic_options)
            self._allocate()
            y = np.concatenate([report.q, report.v])
            self._first_point(t0, (y, y, report.qdd, report.lam))
        else:
            self._allocate()
            self._first_point(t0, (y0, y0))
        f0 = self._derivative_at_current()
        self.h_next = self.h_fixed if self.h_fixed is not None else self._initial_step(f0)
        self._load_machine_code(K.ONE_STEP)

    def _evaluate(self, t, y):
        """f = [v; q''] at (t, y) (eq. 88; a first-order model's f) with λ: the kernel's
        ``_evaluate``, run uncompiled (set-up and event points only).  Counts in the
        statistics as the kernel's evaluations do."""
        n, m, ny = self._n, self._m, self._ny
        f, lam = np.zeros(ny), np.zeros(m)
        work = K.workspace(n, m, ny)
        y = np.ascontiguousarray(y, dtype=float)
        cause = K._evaluate(python_functions(self.model), self._S, self._I, self._LU, K.PIV,
                            self._parameters(), self._u_c, n, m, float(t), y, f, lam, work)
        if cause != K.C_NONE:
            raise SingularMatrixError(_singular_text(cause, t, float(self._S[K.F_CINFO])), t=t, h=None,
                                      cause="singular matrix")
        return f, lam

    def _derivative_at_current(self):
        """f at the current point (the FSAL stage when the record has it)."""
        f = self.f_cur
        if f is None:
            f, lam = self._evaluate(self.t, self.y)
            if not np.all(np.isfinite(f)):
                self._fail("right-hand side is not finite", 0.0, "non-finite derivative")
            self.f_cur = f
            if self.multibody:
                self._write(O_QDD, f[self._n:])
                self._write(O_LAM, lam)
        return f

    def _initial_step(self, f0):
        """Hairer-Nørsett-Wanner I, II.4 (as in scipy.integrate; HINIT of their dopri5.f)."""
        if self.first_step is not None:
            return min(self.first_step, self.max_step)
        y0 = self.y
        if y0.size == 0:
            return min(1.0, self.max_step)
        rtol, atol = self.rtol, self.atol
        with np.errstate(over="ignore"):  # an overflow gives inf, handled below
            d0, d1 = error_ratio(y0, y0, y0, rtol, atol), error_ratio(y0, y0, f0, rtol, atol)
        # HNW II.4 (a)-(b): the Euler pilot h0·‖f0‖ = 0.01·‖y0‖, 1e-6 when ‖y0‖ or ‖f0‖ ≤ 1e-5
        h0 = kernel_common.initial_step(d1, 1e-5, 0.01, 1, d0, 1e-6, 0.0, math.inf)
        if not h0 >= 1e-300:  # |f| / |y| beyond the float range: no step can be taken
            self._fail(f"the initial derivative is too large for any step (|f| / |y| = {d1:.3g} / "
                       f"{d0:.3g} in tolerance units; parameters out of range?)", h0,
                       "initial step underflows")
        try:
            f1, _ = self._evaluate(self.t + h0, y0 + h0 * f0)
            d2 = error_ratio(y0, y0, f1 - f0, rtol, atol) / h0
        except SingularMatrixError:
            d2 = 0.0
        if not math.isfinite(d2):
            d2 = 0.0
        # HNW II.4 (c)-(f): h^(order+1)·max(‖f0‖, ‖f'‖) = 0.01, max(1e-6, h0·1e-3) when ≤ 1e-15, ≤ 100 h0
        return kernel_common.initial_step(max(d1, d2), 1e-15, 0.01, self.order + 1, 1.0, max(1e-6, h0 * 1e-3),
                                          0.0, min(100 * h0, self.max_step))

    # -- restart / state ---------------------------------------------------------------
    def _restart(self):
        self._restart_pending = False
        # inputs or the state changed: no FSAL stage, no dense output
        self._I[K.HAS_F] = 0
        self._I[K.HAS_DENSE] = 0
        self._outputs_fresh = False

    def _reset_point(self):
        self._restart()
        if not self.multibody:
            return
        if self.backend != "numba":
            self._derivative_at_current()
            return
        # f, q'' and λ at the new point (an event's jump) by the compiled kernel: the
        # point's end marked pending and completed (explicit_kernel.complete_step), as
        # after a step that left it; the kernel's _evaluate, as _evaluate runs it
        # uncompiled, without its ~1 ms in Python
        I = self._I
        I[K.HAS_DENSE] = K.END_PENDING
        status = self._call(K.COMPLETE, 0.0, 0)
        I[K.HAS_DENSE] = 0
        if status in (K.SINGULAR, K.NONFINITE_MATRIX):
            raise SingularMatrixError(_singular_text(status, self.t, float(self._S[K.F_CINFO])), t=self.t,
                                      h=None, cause="singular matrix")   # (as _evaluate's)
        if status != K.OK:
            self._fail("right-hand side is not finite", 0.0, "non-finite derivative")

    def state(self):
        self._complete_end()
        return RECORD.get(self)

    def restore(self, state):
        RECORD.restore(self, state)

    # -- failures ----------------------------------------------------------------------------
    def _failed(self, status):
        S, I = self._S, self._I
        t, h = float(S[K.F_T]), float(S[K.F_H])
        if status in (K.SINGULAR, K.NONFINITE_MATRIX):
            ct = float(S[K.F_CT])
            raise SingularMatrixError(_singular_text(status, ct, float(S[K.F_CINFO])), t=ct, h=None,
                                      cause="non-finite matrix" if status == K.NONFINITE_MATRIX
                                      else "singular matrix")
        if status == K.FIXED_UNRESOLVED:
            raise fixed_step.unresolved_error(self.name, t, self.h_fixed, float(S[K.F_ERR]), self.rtol, self.atol,
                                              self.fixed_error_order, refusal=self.refusal, step=h)
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
        """Why a step attempt failed, in words."""
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


class DormandPrince(ExplicitRungeKutta):
    """Dormand-Prince 5(4) with projection (seed 000 eqs. 88-89), FSAL, dense output.

    The FSAL stage f(ŷ) of the unprojected end point starts the next step, with
    its velocity part replaced by the projected velocity (q' = v exactly); the
    difference in the acceleration part is of the size of the projection
    correction, far below the local error.
    """

    name = "dopri5"
    description = "Dormand-Prince 5(4), index-1 form + constraint projection (seed 000 §6)"
    _method_code = K.DOPRI5

    def dense_output(self, t):
        return self.step_interpolant()(t)

    def step_interpolant(self):
        t0, t1 = self.t_prev, self.t
        d = self._dense
        if t1 == t0 or d is None:
            return step_interpolant(t0, t1, None, self.y, None)
        y0, h, Q, shift = self.y_prev, float(d["h"]), d["Q"], d["shift"]

        def inner(t):
            theta = (t - t0) / (t1 - t0)
            p = np.array([theta, theta ** 2, theta ** 3, theta ** 4])
            return y0 + h * (Q @ p) + theta * shift
        return step_interpolant(t0, t1, y0, self.y, inner)


class RK4(ExplicitRungeKutta):
    """Classical Runge-Kutta of order 4 with projection (seed 000 §6).

    Fixed step with ``h=`` (4 evaluations per step, real-time use); without
    ``h`` the error is estimated by step doubling (Richardson: (y_{h/2,h/2} −
    y_h)/15) and the two half steps' result is kept.  Dense output: cubic
    Hermite from y and f at both ends.
    """

    name = "rk4"
    description = "classical Runge-Kutta 4, fixed step or step doubling, + projection (seed 000 §6)"
    _method_code = K.RK4
    fixed_error_order = 4   # the embedded third-order estimate ∝ h⁴ (cosim.fixed_step)
    refusal = K.REFUSAL_RK4

    def dense_output(self, t):
        return last_step_dense_output(self, t, "f0", "f1")

    def step_interpolant(self):
        return last_step_interpolant(self, "f0", "f1")
