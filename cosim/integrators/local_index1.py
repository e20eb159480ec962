"""Local equivalent index-1 method (seed 002, Wang, Zhao & Pan).

First-order form x = [q; q'] (seed 002 eqs. 2.6-2.7):

    x' = g(x) = [q'; ψ(q, q')],   f(x) = [C(q, t); C_q q' + C_t] = 0,

with ψ from [[M, C_qᵀ], [C_q, 0]] [ψ; λ] = [Q; γ] (eqs. 2.3-2.5).  The
seed folds t into q to make the system autonomous; we keep t explicit, which
is the same thing (C_t and the t-derivatives enter f and γ directly).

The overdetermined system x' = g, f = 0, Df·g = 0 is replaced near x_k by
the square, locally equivalent system (Proposition 1, eqs. 3.4)

    A_kᵀ (x' − g(x)) = 0,   f(x) = 0,

with A_kᵀ = diag(VᵀM, VᵀM) at x_k (eq. 4.4), V a basis of the null space of
C_q(q_k) — by QR of C_qᵀ (§5.1) or by Gaussian elimination with complete
pivoting (§5.2); option ``nullspace`` = "qr" | "gauss".  [VᵀM; C_q] is
nonsingular (Proposition 3).  The trapezoidal (improved Euler) rule gives
(eq. 3.7)

    A_kᵀ (x_{k+1} − x_k − h/2 (g(x_{k+1}) + g(x_k))) = 0,   f(x_{k+1}) = 0,

solved by the quasi-Newton iteration of seed 000 Algorithm 2 (the decisions of
:mod:`cosim.integrators.kernel_common`).  Option ``iteration``:

* "seed" (default): the iteration matrix of eq. 4.5,
  [[VᵀM, 0], [0, VᵀM], [C_q, 0], [(C_q q')_q, C_q]] — the differential rows
  are iterated directly (the h/2·∂g term is dropped, eqs. 3.8, 4.6-4.7);
* "newton": the full Jacobian including −h/2·A_kᵀ ∂g/∂x (finite differences).

Predictor: Heun's explicit step.  In adaptive mode its difference to the
trapezoidal result estimates the local error, (x_trap − x_Heun)/3 (both are
2nd order; for y' = λy the trapezoidal error is z³/12 and the difference
z³/4).  Dense output: cubic Hermite from x and g at both ends.

The algorithm is :mod:`cosim.integrators.li1_kernel` — one implementation, run
compiled (numba, compiled once per machine, the model given as compiled functions)
or as plain Python (the same functions).  This module is the integrator object
around it: options, the IC analysis and the initial step, the record (``S``, ``I``,
``LU``), dense output, state capture and error messages.
"""
from __future__ import annotations

import math

import numpy as np

from .. import fixed_step, jit
from ..errors import ConvergenceError, InvalidInputError, SingularMatrixError
from . import dense_lu, kernel_common, li1_nullspace, li1_record
from . import li1_kernel as K
from . import li1_record as R
from .base import MultibodyIntegrator
from .common import error_weights, last_step_dense_output, last_step_interpolant
from .li1_state import RECORD
from .model_functions import n_nonholonomic
from .record import RecordIntegrator, kernel_model_reason, record_point

_K_TEXT = "[[M, C_q^T], [C_q, 0]]"          # the matrix of eq. 2.5 in messages
_ITER_TEXT = "local index-1 iteration matrix (seed 002 eq. 4.5)"
NULLSPACE = {"qr": R.NULLSPACE_QR, "gauss": R.NULLSPACE_GAUSS}
ITERATION = {"seed": R.ITERATION_SEED, "newton": R.ITERATION_NEWTON}


def supports(model):
    """Why the compiled local-index1 cannot run ``model`` (None: it can): a multibody
    model with kernels, including nonholonomic ones for its nonholonomic rows."""
    return kernel_model_reason(model, nonholonomic=True)


def compiled_entry():
    """The compiled method (compiled once per machine, cached; cosim.jit.method_entry)."""
    return jit.method_entry(K, "local-index1", helpers=(dense_lu, kernel_common, li1_record, li1_nullspace))


def _basis(kernel_basis, what, Cq):
    Cq = np.ascontiguousarray(Cq, dtype=float)
    m, n = Cq.shape
    V, A = np.zeros((n, n)), np.zeros((n, n))
    work = np.zeros(n, dtype=np.int64) if kernel_basis is K.nullspace_gauss else np.zeros(n)
    if not kernel_basis(Cq, m, n, V, A, work):
        raise SingularMatrixError(f"C_q is rank deficient ({what} null-space basis)", cause="rank")
    return V[:, :n - m].copy()


def nullspace_qr(Cq):
    """Orthonormal basis V of null(C_q) from the full QR of C_qᵀ (seed 002 §5.1; the
    kernel's :func:`~cosim.integrators.li1_kernel.nullspace_qr`, run uncompiled)."""
    return _basis(K.nullspace_qr, "QR", Cq)


def nullspace_gauss(Cq):
    """Basis V = Π [−W; I] of null(C_q) by Gauss-Jordan elimination with complete
    pivoting, P C_q Π → [I, W] (seed 002 §5.2; the kernel's
    :func:`~cosim.integrators.li1_kernel.nullspace_gauss`, run uncompiled)."""
    return _basis(K.nullspace_gauss, "Gauss", Cq)


def _matrix_text(what, nonfinite, t, h, ratio):
    if nonfinite:
        return f"{what} contains NaN/inf at t={t}, h={h}"
    return f"{what} is numerically singular at t={t}, h={h} (pivot ratio {ratio:.1e})"


class LocalEquivalentIndex1(record_point(R.T, R.T_PREV, ("y", "y_prev", "qdd", "lam")), RecordIntegrator, MultibodyIntegrator):
    """Seed 002: locally equivalent square index-1 system + trapezoidal rule.

    Fixed step with ``h=`` (the seed's use, h = 1e-3) or adaptive with the
    Heun-difference error estimate.  Options: ``nullspace`` ("qr" | "gauss"),
    ``iteration`` ("seed" | "newton").
    """

    name = "local-index1"
    description = "local equivalent index-1 system + trapezoidal rule (seed 002)"
    options = {"nullspace": "qr", "iteration": "seed"}
    _kernel = K
    compiled_entry = staticmethod(compiled_entry)
    state_declaration = RECORD   # the record, the state dictionary and its schema
    h_next = RECORD.view("method_state.h_next")
    # the slopes g = [v; q''] at both ends of the last step (None before a step)
    _dense = RECORD.view("method_state.dense")

    def __init__(self, model, backend="python", **kwargs):
        self._construct(model, backend, supports, R.N_SCALARS, kwargs)

    def check_options(self):
        ns = self.opts["nullspace"]
        if ns not in NULLSPACE:
            raise InvalidInputError(f"nullspace must be 'qr' or 'gauss', got {ns!r}")
        it = self.opts["iteration"]
        if it not in ITERATION:
            raise InvalidInputError(f"iteration must be 'seed' or 'newton', got {it!r}")

    # -- the record ----------------------------------------------------------------------
    def _allocate(self):
        model = self.model
        n, m, g = model.n_q, model.n_c, n_nonholonomic(model)
        offs = R.offsets(n, m, g)
        self._slices = [(offs[R.O_Y], 2 * n), (offs[R.O_YP], 2 * n), (offs[R.O_QDD], n), (offs[R.O_LAM], m + g)]
        self._n = n
        S = np.zeros(offs[R.O_END])
        S[R.T] = S[R.T_PREV] = math.nan
        S[R.H_JAC] = -1.0        # no iteration matrix yet
        S[R.RELAX] = 1.0
        I = np.zeros(R.int_length(n), dtype=np.int64)
        I[R.I_N], I[R.I_M], I[R.I_NG] = n, m, g
        I[R.NULLSPACE] = NULLSPACE[self.opts["nullspace"]]
        I[R.ITERATION] = ITERATION[self.opts["iteration"]]
        I[R.NEED_JAC] = 1
        self._set_record(S, I, 2 * n)
        self._sync_step_options()

    # -- set-up --------------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        report = self._analyse_start(t0, y0, **ic_options)
        self._allocate()
        y = np.concatenate([report.q, report.v])
        self._first_point(t0, (y, y, report.qdd, report.lam))
        self.h_next = self.h_fixed if self.h_fixed is not None else self._initial_step()
        self._load_machine_code(R.ONE_STEP)

    def _initial_step(self):
        if self.first_step is not None:
            return min(self.first_step, self.max_step)
        # trapezoidal error ≈ h³‖x'''‖/12; without x''' take the step's change
        x = np.concatenate([self.v, self.qdd])
        d = kernel_common.scaled_max(x, error_weights(self.y, self.rtol, self.atol), 1.0, 0.0, x.size)
        # h²/2·‖(v, q'')‖ (eq. 35) = 0.005 of the tolerance; h in [1e-8, 1e-2], 1e-3 if both vanish
        return kernel_common.initial_step(d, 0.0, 2.0 * 0.005, 2, 1.0, 1e-3, 1e-8, min(1e-2, self.max_step))

    # -- dense output ----------------------------------------------------------------------
    def dense_output(self, t):
        return last_step_dense_output(self, t, "g0", "g1")

    def step_interpolant(self):
        return last_step_interpolant(self, "g0", "g1")

    # -- restart / state -------------------------------------------------------------------
    def _restart(self):
        """q'' and λ at the current point from eq. 2.5; no dense output."""
        status = self._call(R.RESTART, 0.0, 0)
        self._outputs_fresh = False
        if status != R.OK:
            t = float(self._S[R.F_CT])
            nonfinite = status == R.ACC_NONFINITE
            raise SingularMatrixError(_matrix_text(_K_TEXT, nonfinite, t, None, float(self._S[R.F_CINFO])),
                                      t=t, h=None, cause="non-finite matrix" if nonfinite else "singular matrix")

    def _reset_point(self):
        """(q'' and λ at the new point: the restart that follows computes them.)"""

    # -- failures ----------------------------------------------------------------------------
    def _failed(self, status):
        S, I = self._S, self._I
        t, h = float(S[R.F_T]), float(S[R.F_H])
        if status == R.FIXED_UNRESOLVED:
            raise fixed_step.unresolved_error(self.name, t, self.h_fixed, float(S[R.F_ERR]), self.rtol,
                                              self.atol, refusal=R.REFUSAL, step=h)
        if status == R.UNDERFLOW:
            message, cause = "step size underflow", "step does not advance t"
        else:
            code = int(I[R.CAUSE])
            if status == R.STEP_FAILED:
                message = "trapezoidal step failed"
                cause = self._cause_text(code) if code != R.C_NONE else "error test"
            else:
                message = "step size became too small"
                cause = self._cause_text(code) if code != R.C_NONE else f"error ratio {float(S[R.F_ERR]):.3g}"
        raise ConvergenceError(f"{self.name}: {message} at t={t!r}, h={h!r} ({cause})", t=t, h=h,
                               cause=cause)

    def _cause_text(self, code):
        """Why a step attempt failed, in words (the reference's exception texts)."""
        S = self._S
        ct, ratio = float(S[R.F_CT]), float(S[R.F_CINFO])
        if code == R.C_RESIDUAL:
            return "residual is not finite"
        if code == R.C_UPDATE:
            return "Newton update is not finite"
        if code == R.C_NO_CONVERGENCE:
            return f"no convergence in {R.NEWTON_MAX_ITER} iterations"
        if code in (R.C_ACC_SINGULAR, R.C_ACC_NONFINITE):
            return _matrix_text(_K_TEXT, code == R.C_ACC_NONFINITE, ct, None, ratio)
        if code in (R.C_ITER_SINGULAR, R.C_ITER_NONFINITE):
            return _matrix_text(_ITER_TEXT, code == R.C_ITER_NONFINITE, ct, float(S[R.F_CH]), ratio)
        return f"C_q is rank deficient ({'QR' if code == R.C_RANK_QR else 'Gauss'} null-space basis)"
