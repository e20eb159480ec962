"""Penalty formulation integrated by Runge-Kutta-Chebyshev (seed 000 §6, eqs. 90-92).

Every constraint f = 0 of the index-2 system (eq. 90) — C(q, t) = 0 and
C_q v + C_t = 0 — is replaced by ḟ + χ f = 0 with a large penalty factor χ,
which gives the ODE for y = [q, v] (eqs. 91-92):

    [[M, C_qᵀ], [C_q, 0]] [q'; μ] = [M v; −C_t − χ C]                 (91)
    [[M, C_qᵀ], [C_q, 0]] [v'; λ] = [Q; γ − χ (C_q v + C_t)]          (92)

Both use the same matrix J of eq. 89 (one LU, two right-hand sides).  On
the constraint manifold μ = 0 and q' = v, so the exact solution from a
consistent start is that of the DAE; off it the constraint residuals decay
like e^{−χt}, i.e. the penalty adds eigenvalues ≈ −χ on the negative real
axis — what a Runge-Kutta-Chebyshev method is made for (seed 000 Fig. 1).

Integrator: the second-order RKC method of Sommeijer, Shampine & Verwer
(1997, "RKC: an explicit solver for parabolic PDEs"), damping ε = 2/13
(option ``damping``), whose real stability interval is β(s) = (1 + w0)/w1
≈ (2/3)(1 − 2ε/15) s² ≈ 0.65 s² (:func:`stability_boundary`).  The seed
recommends the 4th-order ROCK4 of Abdulle [40]; we use the 2nd-order RKC
(same recursive Chebyshev idea, simpler coefficients).  The stage count is the smallest s with β(s) ≥ h ρ,
s = 1 + ⌊√(1 + 1.54 h ρ)⌋, where ρ is the spectral radius of the Jacobian of
the right-hand side (penalty stiffness included), estimated by the nonlinear
power method of RKC (finite differences of f, warm-started from the last
eigenvector, refreshed every ``rho_interval`` steps and after a rejection).
Hence s grows like √(h χ) with the penalty factor.  Error estimate and
controller as in RKC: est = 0.8 (y_n − y_{n+1}) + 0.4 h (f_n + f_{n+1}).

Formulations (option ``formulation``):

* "seed" (default): eqs. 91-92 above with the penalty factor ``penalty`` = χ.
* "bayo": the augmented-Lagrangian penalty form of Bayo et al. (1988),
  M q'' + C_qᵀ α (C̈ + 2ξω Ċ + ω² C) = Q, i.e. with q' = v
  (M + α C_qᵀC_q) v' = Q + α C_qᵀ (γ − 2ξω (C_q v + C_t) − ω² C),
  options ``alpha`` (penalty factor), ``xi`` (damping ratio), ``omega``
  (rad/s).  For large α the constraint violation obeys c̈ + 2ξωċ + ω²c = 0,
  so the added eigenvalues are −ξω ± ω√(ξ² − 1): the stiffness (and the
  stage count) follows ω, while α only sets how closely the constraint
  dynamics are enforced (and the conditioning of M + α C_qᵀC_q); the DAE
  solution is reproduced up to O(1/(α ω²)).  ξ ≥ 1 keeps these eigenvalues
  real, where RKC's stability interval lies.

The algorithm is :mod:`cosim.integrators.rkc_kernel` — one implementation, run
compiled (numba, compiled once per machine, the model given as compiled
functions) or as plain Python (the same functions); the right-hand side uses the
factor of J of :mod:`cosim.integrators.index1_kernel`, shared with dopri5/rk4.
This module is the integrator object around it: options and their validation,
the IC analysis, the automatic penalty / α, the first ρ estimate and the initial
step (the kernel's functions run uncompiled, once), the record, dense output,
state capture and error messages.

Limits: RKC's stability region hugs the negative real axis; lightly damped
physical oscillations (eigenvalues near the imaginary axis) still restrict h,
as the seed says ("在虚轴上收敛区域有限") — e.g. Andrews' squeezer needs
thousands of steps (benchmarks/seed000.py --with-rkc).
"""
from __future__ import annotations

import math

import numpy as np

from .. import fixed_step, jit
from ..errors import ConvergenceError, InvalidInputError, SingularMatrixError
from ..models.ranges import POSITIVE
from . import dense_lu, explicit_record, index1_kernel, kernel_common, rkc_record
from . import rkc_kernel as K
from .base import MultibodyIntegrator
from .common import last_step_dense_output, last_step_interpolant
from .kernel_common import error_ratio
from .model_functions import n_nonholonomic, python_functions
from .record import DeferredRestart, RecordIntegrator, kernel_model_reason, record_point
from .rkc_record import RKC_O_END, RKC_O_LAM, RKC_O_QDD, RKC_O_Y, RKC_O_YP
from .rkc_state import RECORD

MAX_REJECTIONS = K.MAX_REJECTIONS
_J_TEXT = "[[M, C_q^T], [C_q, 0]] (seed 000 eq. 89)"        # the matrix of eqs. 91-92
_BAYO_TEXT = "M + alpha C_q^T C_q (Bayo penalty form)"


def rkc_coefficients(s, damping=2.0 / 13.0):
    """Per-stage coefficients (μ, ν, μ̃, a_{j-1}, c_j) of 2nd-order RKC for j = 1..s
    (the kernel's :func:`rkc_kernel.rkc_coefficients_into`) as a list of tuples:
    Y_j = (1−μ−ν) y_n + μ Y_{j−1} + ν Y_{j−2} + h μ̃ (F(Y_{j−1}) − a_{j−1} F_n)
    (for j = 1: Y_1 = y_n + h μ̃_1 F_n).  Follows rkc.f (Sommeijer et al. 1997)."""
    C = np.zeros((s, K.N_CF))
    K.rkc_coefficients_into(int(s), float(damping), C)
    return [tuple(float(x) for x in row) for row in C]


def stability_polynomial(s, z, damping=2.0 / 13.0):
    """R_s(z) of the RKC scheme, evaluated by running the stages on y' = λy."""
    coeffs = rkc_coefficients(s, damping)
    z = np.asarray(z, dtype=complex)
    y0 = np.ones_like(z)
    yjm2 = y0
    yjm1 = y0 + coeffs[0][K.CF_MU_TILDE] * z * y0   # Y_1 = y_n + h μ̃_1 F_n
    for mu, nu, mus, ajm1, _ in coeffs[1:]:
        yj = (1 - mu - nu) * y0 + mu * yjm1 + nu * yjm2 + mus * z * (yjm1 - ajm1 * y0)
        yjm2, yjm1 = yjm1, yj
    return yjm1


def stability_boundary(s, damping=2.0 / 13.0):
    """Real stability interval β(s) = (1 + w0)/w1 of the s-stage scheme
    (≈ (2/3)(1 − 2ε/15) s² ≈ 0.653 s² for ε = 2/13)."""
    w0, w1 = K.chebyshev_w(int(s), float(damping))
    return (1.0 + w0) / w1


stages_for = K.stages_for   # smallest stage count covering h ρ (rkc.f)


def supports(model):
    """Why the compiled rkc-penalty cannot run ``model`` (None: it can): a multibody
    model with kernels, including nonholonomic ones for its nonholonomic rows."""
    return kernel_model_reason(model, nonholonomic=True)


def compiled_entry():
    """The compiled method (compiled once per machine, cached; cosim.jit.method_entry)."""
    return jit.method_entry(K, "rkc-penalty",
                            helpers=(dense_lu, kernel_common, explicit_record, index1_kernel, rkc_record))


class RKCPenalty(DeferredRestart, record_point(K.T, K.T_PREV, ("y", "y_prev", "qdd", "lam"), settle=True), RecordIntegrator,
                 MultibodyIntegrator):
    """Penalty formulation (seed 000 eqs. 90-92) + 2nd-order Runge-Kutta-Chebyshev.

    Options: ``formulation`` "seed" | "bayo" (module doc); ``penalty`` χ > 0 in
    1/s (seed form), or "auto" (10 × the spectral radius of the unpenalised
    system at the start, at least 100/s — seed 000 §6: χ must be far above the
    largest eigenvalue); Bayo form: ``alpha`` > 0 or "auto" (α C_qᵀC_q ≈ 1e7 M),
    ``xi`` > 0, ``omega`` > 0 rad/s or "auto" (as χ); ``damping`` ε ∈ [0, 1] (RKC: 2/13);
    ``max_stages`` s_max ≥ 2; ``rho_interval`` steps between spectral-radius
    estimates.  With ``h=`` the step is fixed and s follows h ρ.
    """

    name = "rkc-penalty"
    description = "penalty formulation (seed 000 eqs. 90-92) + Runge-Kutta-Chebyshev (RKC2)"
    implicit = False
    options = {"formulation": "seed", "penalty": "auto", "alpha": "auto", "xi": 1.0, "omega": "auto",
               "damping": 2.0 / 13.0, "max_stages": 400, "rho_interval": 25}
    _kernel = K
    compiled_entry = staticmethod(compiled_entry)

    state_declaration = RECORD   # the record, the state dictionary and its schema
    h_next = RECORD.view("method_state.h_next")
    rho = RECORD.view("method_state.rho")
    penalty = RECORD.view("method_state.penalty")     # χ (seed form) or ω (Bayo form)
    h_last = RECORD.view("method_state.h_last")
    err_last = RECORD.view("method_state.err_last")
    steps_since_rho = RECORD.view("method_state.steps_since_rho")
    last_stages = RECORD.view("method_state.last_stages")
    max_stages_used = RECORD.view("method_state.max_stages_used")
    f_cur = RECORD.view("method_state.f_cur", "f at the current point (None: not in the record)")
    eigvec = RECORD.view("method_state.eigvec", "The power method's last eigenvector estimate (None: none yet).")
    _dense = RECORD.view("method_state.dense")   # f at both ends of the last step and its h (None before a step)

    def __init__(self, model, backend="python", **kwargs):
        self._construct(model, backend, supports, K.RKC_SCALARS, kwargs)

    def check_options(self):
        o = self.opts
        if o["formulation"] not in ("seed", "bayo"):
            raise InvalidInputError(f"formulation must be 'seed' or 'bayo', got {o['formulation']!r}")
        for key in ("alpha", "omega"):
            val = o[key]
            if isinstance(val, str) and val == "auto":
                continue
            try:
                x = float(val)
            except (TypeError, ValueError):
                raise InvalidInputError(f"{key} must be a number > 0 or 'auto', got {val!r}") from None
            if not (math.isfinite(x) and x > 0.0):
                raise InvalidInputError(f"{key} must be finite and > 0, got {val!r}")
            if key == "omega" and not POSITIVE.contains(x):   # (as the state's penalty slot)
                raise InvalidInputError(f"omega must be {POSITIVE}, got {val!r}")
            o[key] = x
        try:
            xi = float(o["xi"])
        except (TypeError, ValueError):
            raise InvalidInputError(f"xi must be a number > 0, got {o['xi']!r}") from None
        if not (math.isfinite(xi) and xi > 0.0):
            raise InvalidInputError(f"xi must be finite and > 0, got {o['xi']!r}")
        o["xi"] = xi
        chi = o["penalty"]
        if not (isinstance(chi, str) and chi == "auto"):
            try:
                chi = float(chi)
            except (TypeError, ValueError):
                raise InvalidInputError(f"penalty must be a number > 0 or 'auto', got {o['penalty']!r}") from None
            if not (math.isfinite(chi) and chi > 0.0):
                raise InvalidInputError(f"penalty must be finite and > 0, got {o['penalty']!r}")
            if not POSITIVE.contains(chi):   # (the bound of a restored state's penalty)
                raise InvalidInputError(f"penalty must be {POSITIVE}, got {o['penalty']!r}")
        o["penalty"] = chi
        try:
            eps = float(o["damping"])
        except (TypeError, ValueError):
            raise InvalidInputError(f"damping must be a number in [0, 1], got {o['damping']!r}") from None
        if not 0.0 <= eps <= 1.0:
            raise InvalidInputError(f"damping must be in [0, 1], got {o['damping']!r}")
        o["damping"] = eps
        for key, low in (("max_stages", 2), ("rho_interval", 1)):
            val = o[key]
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < low:
                raise InvalidInputError(f"{key} must be an integer >= {low}, got {val!r}")
            o[key] = int(val)

    # -- the record ----------------------------------------------------------------------
    def _allocate(self):
        model = self.model
        n, g = model.n_q, n_nonholonomic(model)
        m, ny = model.n_c + g, 2 * model.n_q   # multiplier rows: C and B
        self.n = n
        offs = K.rkc_offsets(n, m, ny)
        self._slices = [(offs[RKC_O_Y], ny), (offs[RKC_O_YP], ny), (offs[RKC_O_QDD], n), (offs[RKC_O_LAM], m)]
        self._n, self._m, self._ny = n, m, ny
        S = np.zeros(offs[RKC_O_END])
        S[K.T] = S[K.T_PREV] = math.nan
        I = np.zeros(K.rkc_int_length(n, m), dtype=np.int64)
        I[K.I_N], I[K.I_M], I[K.I_NY], I[K.I_NG] = n, m, ny, g
        I[K.MAX_STAGES] = self.opts["max_stages"]
        I[K.RHO_INTERVAL] = self.opts["rho_interval"]
        self._set_record(S, I, n + m)
        self._sync_step_options()
        S[K.DAMPING] = self.opts["damping"]
        S[K.XI] = self.opts["xi"]
        S[K.ALPHA] = -1.0

    @property
    def alpha(self):
        """α of the Bayo form (None: the seed form)."""
        a = float(self._S[K.ALPHA])
        return None if a < 0.0 else a

    # -- set-up --------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        report = self._analyse_start(t0, y0, **ic_options)
        self._allocate()
        y = np.concatenate([report.q, report.v])
        self._first_point(t0, (y, y, report.qdd, report.lam))
        o = self.opts
        bayo = o["formulation"] == "bayo"
        chi = o["omega"] if bayo else o["penalty"]
        if bayo:
            alpha = o["alpha"]
            if alpha == "auto":   # α C_qᵀC_q ≈ 1e7 × M on the diagonal
                q0 = self.q
                M0 = np.abs(np.diag(self.model.mass(q0, t0)))
                Cq0 = self.model.constraint_jacobian(q0, t0)
                cc = np.diag(Cq0.T @ Cq0) if Cq0.size else np.zeros(0)
                alpha = 1e7 * float(M0.max()) / float(cc.max()) if cc.size and cc.max() > 0 else 1.0
            self._S[K.ALPHA] = alpha
        self._S[K.CHI] = 0.0 if chi == "auto" else chi
        if chi == "auto":
            rho0 = self._estimate_rho(self._derivative_at_current())
            self._S[K.CHI] = max(10.0 * rho0, 100.0)
            self.f_cur = None
            self.eigvec = None
        f0 = self._derivative_at_current()
        self._estimate_rho(f0)
        self.h_next = self.h_fixed if self.h_fixed is not None else self._initial_step(f0)
        self._load_machine_code(K.ONE_STEP)

    def _run_kernel(self, function, *args):
        """A kernel function (an evaluation or the power method) run uncompiled on the
        record (set-up and event points), given the evaluation's work arrays; its
        evaluations count in the statistics as the compiled step's do."""
        n, m, ny = self._n, self._m, self._ny
        work = K.rkc_workspace(n, m, ny, self.opts["max_stages"])
        return function(python_functions(self.model), self._S, self._I, self._LU, self._parameters(),
                        self._u_c, n, m, *args, K._penalty_work(work), K._bayo_work(work))

    def _raise_singular(self, cause):
        ct = float(self._S[K.F_CT])
        raise SingularMatrixError(self._singular_text(cause, ct, float(self._S[K.F_CINFO])), t=ct, h=None,
                                  cause="non-finite matrix" if cause == K.C_NONFINITE_MATRIX
                                  else "singular matrix")

    def _evaluate(self, t, y):
        """f = y' at (t, y) (eqs. 91-92 or the Bayo form) with λ: the kernel's
        ``_penalty_evaluate``, run uncompiled."""
        f, lam = np.zeros(self._ny), np.zeros(self._m)
        y = np.ascontiguousarray(y, dtype=float)
        cause = self._run_kernel(K._penalty_evaluate, float(t), y, f, lam)
        if cause != K.C_NONE:
            self._raise_singular(cause)
        return f, lam

    def _f(self, t, y):
        return self._evaluate(t, y)[0]

    def _derivative_at_current(self):
        f = self.f_cur
        if f is None:
            f, lam = self._evaluate(self.t, self.y)
            if not np.all(np.isfinite(f)):
                self._fail("right-hand side is not finite", 0.0, "non-finite derivative")
            self.f_cur = f
            self._write(RKC_O_QDD, f[self._n:])
            self._write(RKC_O_LAM, lam)
        return f

    def _estimate_rho(self, f0):
        """ρ at the current point by the kernel's power method (``estimate_rho``, run
        uncompiled); also kept in the record with its eigenvector."""
        cause = self._run_kernel(K.estimate_rho, self.y, np.ascontiguousarray(f0, dtype=float),
                                 np.zeros(self._ny), np.zeros(self._ny), np.zeros(self._m))
        if cause != K.C_NONE:
            self._raise_singular(cause)
        rho = float(self._S[K.RHO])
        if not math.isfinite(rho):
            self._fail("spectral radius estimate is not finite", 0.0, "non-finite right-hand side")
        return rho

    def _initial_step(self, f0):
        if self.first_step is not None:
            return min(self.first_step, self.max_step)
        y, rtol, atol = self.y, self.rtol, self.atol
        # rkc.f's pilot: the Euler step's change h‖f0‖ = 0.1 (1e-3 when f0 = 0), ≤ max_step, ≤ 1/ρ
        h = kernel_common.initial_step(error_ratio(y, y, f0, rtol, atol), 0.0, 0.1, 1, 1.0, 1e-3, 0.0, self.max_step)
        h0 = min(h, 1.0 / max(self.rho, 1e-12))
        f1 = self._f(self.t + h0, y + h0 * f0)
        # rkc.f's first step: Euler's error estimate ‖h0 (f(y + h0 f0) − f0)‖ ≈ h0²‖y''‖ = 0.1, h ≥ h0·1e-3
        est = error_ratio(y, y, h0 * (f1 - f0), rtol, atol)
        h = kernel_common.initial_step(est, 0.0, 0.1, 2, h0, h, h0 * 1e-3, h)
        return max(min(h, self.max_step), 1e-12)

    # -- dense output / restart / state -------------------------------------------------
    def dense_output(self, t):
        """Cubic Hermite from y and f at both ends of the last step."""
        return last_step_dense_output(self, t, "f0", "f1")

    def step_interpolant(self):
        return last_step_interpolant(self, "f0", "f1")

    def _restart(self):
        self._restart_pending = False
        self._I[K.HAS_F] = 0
        self._I[K.HAS_DENSE] = 0
        self._S[K.H_LAST] = 0.0
        self._S[K.ERR_LAST] = 0.0
        self._outputs_fresh = False

    def _reset_point(self):
        self._settle()
        self._I[K.HAS_F] = 0
        self._I[K.HAS_DENSE] = 0
        self._outputs_fresh = False
        self._derivative_at_current()

    # -- failures ----------------------------------------------------------------------------
    def _singular_text(self, code, t, ratio):
        """The text of a singular (or non-finite) matrix of the right-hand side at t."""
        what = _J_TEXT if self.alpha is None else _BAYO_TEXT
        if code in (K.NONFINITE_MATRIX, K.C_NONFINITE_MATRIX):
            return f"{what} contains NaN/inf at t={t}, h=None"
        return f"{what} is numerically singular at t={t}, h=None (pivot ratio {ratio:.1e})"

    def _failed(self, status):
        S, I = self._S, self._I
        t, h = float(S[K.F_T]), float(S[K.F_H])
        if status in (K.SINGULAR, K.NONFINITE_MATRIX):
            self._raise_singular(K.C_NONFINITE_MATRIX if status == K.NONFINITE_MATRIX else K.C_SINGULAR)
        if status == K.FIXED_UNRESOLVED:
            raise fixed_step.unresolved_error(self.name, t, self.h_fixed, float(S[K.F_ERR]), self.rtol,
                                              self.atol, refusal=K.RKC_REFUSAL, step=h)
        if status == K.NONFINITE_DERIVATIVE:
            message, h, cause = "right-hand side is not finite", 0.0, "non-finite derivative"
        elif status == K.UNDERFLOW:
            message, cause = "step size underflow", "step does not advance t"
        elif status == K.STAGES_EXCEEDED:
            message = "fixed step needs more RKC stages than max_stages"
            cause = f"h·rho = {float(S[K.F_HRHO]):.3g}, max_stages = {self.opts['max_stages']}"
        elif status == K.RHO_FAILED:
            message, h, cause = "spectral radius estimate is not finite", 0.0, "non-finite right-hand side"
        else:
            message = "RKC step failed" if status == K.STEP_FAILED else "step size became too small"
            code, err = int(I[K.CAUSE]), float(S[K.F_ERR])
            if code == K.C_NONE:
                cause = f"error ratio {err:.3g}"
            elif code == K.C_NONFINITE_SOLUTION:
                cause = "non-finite solution"
            else:
                cause = self._singular_text(code, float(S[K.F_CT]), float(S[K.F_CINFO]))
        raise ConvergenceError(f"{self.name}: {message} at t={t!r}, h={h!r} ({cause})", t=t, h=h,
                               cause=cause)
