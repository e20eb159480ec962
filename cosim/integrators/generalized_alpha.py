"""Generalized-α for index-3 multibody DAEs (seed 000 §3, Appendix Algorithm 3),
adaptive or fixed step, and its GGL index-2 form (eqs. 37-39,
``generalized-alpha-i2``).

The algorithm is :mod:`cosim.integrators.ga_kernel` — one implementation, run
compiled (numba, compiled once per machine, the model given as compiled
functions) or as plain Python (the same functions, the model's own methods
wrapped by :func:`cosim.integrators.model_functions.python_functions`).  This
module is the integrator object around it: options, the IC analysis, the
method's record (``S``, ``I``, ``LU``: :mod:`ga_record` lists the slots), dense
output, state capture and error messages.

Unknowns per step (index 3): the innovation x = a_{n+1} − a^{(0)}_{n+1} (an
acceleration) and z = λ_{n+1} − λ_n.  With a^{(0)}_{n+1} = q''_n the corrector
is (eqs. 26, 28, 29)

    q''_{n+1} = q''^{(0)} + η x,   q'_{n+1} = q'^{(0)} + γ h x,
    q_{n+1}   = q^{(0)} + β h² x,  a_{n+1} = q''_n + x,

and the predictor (eq. 30, OCR typos corrected by deriving it from eqs. 26
and 28 with a_{n+1} = q''_n):

    q''^{(0)} = [α_m a_n + (1 − α_m − α_f) q''_n] / (1 − α_f)
    q'^{(0)}  = q'_n + h (1 − γ) a_n + h γ q''_n
    q^{(0)}   = q_n + h q'_n + h² (1/2 − β) a_n + h² β q''_n.

Parameters (eq. 27, Chung & Hulbert 1993, Arnold & Brüls 2007):
α_m = (2ρ∞ − 1)/(ρ∞ + 1), α_f = ρ∞/(ρ∞ + 1), γ = 1/2 − α_m + α_f,
β = (1 − α_m + α_f)²/4, η = (1 − α_m)/(1 − α_f).
"""
from __future__ import annotations

import math

import numpy as np

from .. import fixed_step, jit
from ..errors import ConvergenceError, InvalidInputError, SingularMatrixError
from ..validation import flag
from . import dense_lu, ga_corrector, ga_record, ga_terms, kernel_common
from . import ga_kernel as K
from .base import EPS, MultibodyIntegrator
from .common import consistent_accelerations, error_weights, qv_hermite_interpolant
from .ga_record import O_A, O_END, O_LAM, O_LR, O_QDD, O_QDDP, O_XR, O_Y, O_YP
from .ga_state import RECORD
from .model_functions import compiled_unsupported, n_nonholonomic, python_functions
from .record import RecordIntegrator, record_array, record_scalar, record_time

# the modules ga_kernel's functions call, pasted before it into the compiled method
KERNEL_HELPERS = (dense_lu, kernel_common, ga_record, ga_terms, ga_corrector)

# Tolerance proportionality (Stetter 1980; Hairer, Nørsett & Wanner I §II.4):
# eq. 34 bounds the error of each step, and for a second-order method that
# makes the global error ∝ tol^(2/3) (Andrews: err/rtol 1 at rtol 1e-3, 21-89
# at 1e-10, slope 0.74).  The controller therefore works with the weights of
# tol_int = tol·(tol/TOL_REF)^(1/2) (p = 2), equal to the user's at TOL_REF:
# the global error then falls ∝ tol.  TOL_REF = 1e-3: loose-tolerance step
# counts are those of the plain eq. 34 (measured: benchmarks/work_precision.py).
TOL_REF = 1e-3
RTOL_FLOOR = 1e-13
# floor of eq. 34's weights in units of ROUNDOFF·ε·max(1, |q|)/β (the literal 10.0
# of ga_kernel.py's errfloor)
ERR_FLOOR = 10.0
# option tangent_estimate: the tangent part of h² x (ga_kernel._tangent_part) has no
# floor, so the internal rtol may go down to this one (rtol 1e-10 → 3.2e-14)
RTOL_FLOOR_TANGENT = 1e-15
# tangent_estimate="auto" (default): the split is on when the proportional
# internal rtol s·rtol is below AUTO_TANGENT × the weights' rounding floor
# ERR_FLOOR·ROUNDOFF·ε/β (7.2e-14 at ρ∞ = 0.8), i.e. where that floor would
# be a sizeable part of the weights and eq. 34 stops following rtol
AUTO_TANGENT = 10.0
# generalized-alpha-i2: tolerance calibration of the eq. 39 test (GeneralizedAlphaIndex2)
TOL_FACTOR = 30.0
RTOL_CAP = 0.1
# A tolerance an adaptive run cannot reach within its step budget, or reaches at a cost
# far above another method's, is refused or warned about before the run, by
# measurement: cosim/step_budget.py (steps ∝ rtol^(-1/2) here, step_exponent).

_NEWTON_REASONS = {K.R_RESIDUAL: "residual is not finite", K.R_UPDATE: "Newton update is not finite",
                   K.R_NO_CONVERGENCE: f"no convergence in {K.NEWTON_MAX_ITER} iterations"}


def internal_tolerances(rtol, atol, proportional, floor=None):
    """(rtol, atol) the error test uses: the user's, or with
    ``proportional`` both scaled by s = min(1, (rtol/TOL_REF)^(1/2)) so that the
    global error follows rtol (TOL_REF above), the internal rtol kept
    ≥ min(rtol, floor) (default RTOL_FLOOR)."""
    if not proportional:
        return rtol, atol
    # never below min(rtol, RTOL_FLOOR): there the local error test would
    # chase the rounding of q (h²‖x‖ carries ~ε|q|/β)
    floor = RTOL_FLOOR if floor is None else floor
    r = max(min(1.0, math.sqrt(rtol / TOL_REF)) * rtol, min(rtol, floor))
    return r, atol * (r / rtol)


def auto_tangent(rtol, beta):
    """Whether tangent_estimate="auto" splits eq. 34's estimate at this user
    rtol: the unclipped proportional internal rtol below AUTO_TANGENT times
    the rounding floor of the weights (in units of max(1, |q|))."""
    r = min(1.0, math.sqrt(rtol / TOL_REF)) * rtol
    return r < AUTO_TANGENT * (ERR_FLOOR * K.ROUNDOFF * EPS / beta)


def alpha_parameters(rho_inf):
    """(α_m, α_f, γ, β, η) of the generalized-α method for ρ∞ (eq. 27)."""
    r = float(rho_inf)
    am = (2.0 * r - 1.0) / (r + 1.0)
    af = r / (r + 1.0)
    gamma = 0.5 - am + af
    beta = 0.25 * (1.0 - am + af) ** 2
    eta = (1.0 - am) / (1.0 - af)
    return am, af, gamma, beta, eta


def supports(model):
    """Why the compiled generalized-α cannot run ``model`` (None: it can)."""
    return compiled_unsupported(model, nonholonomic=True)


def compiled_entry():
    """The compiled method (compiled once per machine, cached; cosim.jit.method_entry)."""
    return jit.method_entry(K, "generalized-alpha", helpers=KERNEL_HELPERS)


# the C entry the FMU binary runs the compiled method through (one for every method,
# given the method's own address by cosim.jit.native_addresses)
compiled_native_step = jit.native_step_address


class GeneralizedAlpha(RecordIntegrator, MultibodyIntegrator):
    """Adaptive (or fixed-step) index-3 generalized-α, seed 000 Algorithm 3.

    Option ``rho_inf`` ∈ [0, 1]: spectral radius at infinite frequency.
    Default 0.8: second order for any value; 0.8 damps the high-frequency
    (constraint-induced) parasitic modes of the index-3 formulation enough to
    keep λ and q'' free of persistent oscillation, while the physical low
    frequencies are almost undamped (ρ∞ = 1 is the undamped trapezoidal rule,
    ρ∞ = 0 annihilates high frequencies in one step but damps more in the
    resolved range).

    Where this departs from the letter of Algorithm 3 (each measured on
    Andrews' squeezer / the pendulum, see benchmarks/andrews.py):

    * Newton convergence (Algorithm 2) is judged on the position change
      β h² Δx, the velocity change γ h Δx and the multipliers' effect, all in
      the weighted norm eq. 35; position alone left a velocity bias that
      accumulated into an O(1e-5) error at rtol 1e-6.
    * velocity projection after each step (option ``project_velocities``,
      seed 000 eq. 8-9 with W = M: in the index-3 scheme the velocity-constraint
      drift left by a step-size change feeds the parasitic constraint mode,
      double root −ρ∞; Andrews, rtol 1e-6: 1538 → 1166 steps, 107 → 3
      rejections) and a step-size deadband (h grows only by ≥ 30 %,
      ``ga_kernel.DEADBAND``): both keep step-size changes from exciting the
      parasitic constraint mode.
    * Newton at small steps: the system is the scaled one of eq. 32-33
      (constraint rows by 1/(β h²), as Bottasso, Bauchau & Cardona 2007 and
      Arnold & Brüls 2007 §4), so its conditioning does not depend on h; once
      the iteration stops contracting, an update at the rounding level
      (``ga_kernel.ROUNDOFF``) is accepted: fixed h = 1e-6 on Andrews: 20.0 →
      2.9 iterations, 8.9 → 0.11 LU per step.
    * fixed step: Newton stops relative to the step's own innovation x
      (``ga_kernel.FIXED_NEWTON_REL``) or at the rounding of v, not at a
      fraction of the user's rtol, whose Newton error added up to a floor (UR5,
      rtol 1e-6: 2.7e-7 at h = 62.5 µs); the error falls as h² whatever rtol
      (benchmarks/fixed_step_floor.py).
    * tolerance-proportional step control (option ``tolerance_proportional``,
      default on; false = the plain eq. 34): the error test uses the weights
      of tol·(tol/TOL_REF)^(1/2), so the global error follows rtol.
    * option ``tangent_estimate`` (only with the proportional scaling): the
      estimate splits h² x into its tangent part P h² x (P the M-orthogonal
      projector onto ker C_q) and the normal rest, and only the rest, where
      the Newton rounding lies, gets the rounding floor ERR_FLOOR in its
      weights.  Default ``"auto"``: on only where the internal rtol is below
      AUTO_TANGENT × that floor (user rtol < 8.0e-10 at ρ∞ = 0.8).
    * a_n is rescaled when h changes; the Newton iteration starts from the
      extrapolated innovation (neither changes the converged solution).
    * rejections: first retry with h_new (eq. 36), then halve; the step
      fails with ConvergenceError(t, h, cause) only after 30 rejections or
      below the minimum step (the seed would call a discontinuity locator).
      A Newton failure halves the step, in fixed-step mode too.  A step too
      small to move t (h ≤ 4 ε |t|) fails with "step size underflow".
    """

    name = "generalized-alpha"
    description = "generalized-alpha, index 3, adaptive step (seed 000 Alg. 3)"
    options = {"rho_inf": 0.8, "project_velocities": True, "tolerance_proportional": True,
               "tangent_estimate": "auto"}
    flag_words = {"tangent_estimate": ("auto",)}
    _ggl = 0   # the kernel's formulation switch I[GGL]
    _kernel = K
    state_declaration = RECORD   # the record, the state dictionary and its schema
    compiled_entry = staticmethod(compiled_entry)
    compiled_native_step = staticmethod(compiled_native_step)

    t = record_time(K.T)
    t_prev = record_time(K.T_PREV, settle=True)
    h_next = record_scalar(K.H_NEXT)
    h_last = record_scalar(K.H_LAST)
    y = record_array(O_Y, writable=True)   # (_slices[O_Y]: see _allocate)
    y_prev = record_array(O_YP, writable=True)
    qdd = record_array(O_QDD)
    qdd_prev = record_array(O_QDDP)
    lam = record_array(O_LAM)
    a = record_array(O_A)
    x_rate = record_array(O_XR)
    lam_rate = record_array(O_LR)

    def __init__(self, model, backend="python", **kwargs):
        self._choose_backend(model, backend, supports)
        self._S = np.zeros(K.N_SCALARS)
        self._has_state = False
        super().__init__(model, **kwargs)
        self._bind_model()
        self._allocate(model.n_q, model.n_c)

    # -- options -------------------------------------------------------------------------
    def check_options(self):
        rho = self.opts["rho_inf"]
        try:
            r = float(rho)
        except (TypeError, ValueError):
            raise InvalidInputError(f"rho_inf must be a number in [0, 1], got {rho!r}") from None
        if not (0.0 <= r <= 1.0):  # also rejects NaN
            raise InvalidInputError(f"rho_inf must be in [0, 1], got {rho!r}")
        self.opts["rho_inf"] = r
        self._project = flag("project_velocities", self.opts.get("project_velocities", False))
        prop = flag("tolerance_proportional", self.opts.get("tolerance_proportional", False))
        self.alpha_m, self.alpha_f, self.gamma, self.beta, self.eta = alpha_parameters(r)
        tangent = self.opts.get("tangent_estimate", False)  # True, False or "auto" (flag_words)
        if tangent == "auto":   # on only near the rounding floor of the weights
            tangent = auto_tangent(self.rtol, self.beta)
        self._tangent = prop and tangent
        self._err_rtol, self._err_atol = internal_tolerances(
            self.rtol, self.atol, prop, RTOL_FLOOR_TANGENT if self._tangent else None)
        # the error test's weights are s·W (W of the user's tolerances); the Newton
        # norm keeps W (1e-4·W is already far below s·W ≥ 1e-3·W)
        self._err_scale = self._err_rtol / self.rtol

    # -- the record ----------------------------------------------------------------------------
    def _allocate(self, n, m):
        g = n_nonholonomic(self.model)
        offsets = K.offsets(n, m + g)   # multipliers [λ; ν]
        self._slices = [(offsets[O_Y], 2 * n), (offsets[O_YP], 2 * n), (offsets[O_QDD], n), (offsets[O_QDDP], n),
                        (offsets[O_LAM], m + g), (offsets[O_A], n), (offsets[O_XR], n), (offsets[O_LR], m + g)]
        self._N = K.matrix_size(n, m, self._ggl, g)
        stats = self._I[K.STATS:K.STATS + K.N_STATS].copy() if hasattr(self, "_I") else None
        self._S = np.zeros(offsets[O_END])
        self._S[K.T] = self._S[K.T_PREV] = math.nan
        self._S[K.H_JAC] = -1.0
        self._S[K.RELAX] = 1.0
        I = np.zeros(K.int_length(n, m, self._ggl, g), dtype=np.int64)
        I[K.I_N], I[K.I_M], I[K.I_NG], I[K.GGL] = n, m, g, self._ggl
        I[K.NEED_JAC] = 1
        I[K.MINV_EXACT] = -1
        if stats is not None:
            I[K.STATS:K.STATS + K.N_STATS] = stats
        self._I = I
        self._LU = np.zeros((self._N, self._N))
        self._y_out = np.zeros(len(self.model.output_names) if self._kernel_outputs else 0)
        self._outputs_fresh = False
        self._restart_pending = False
        self._has_state = False
        self._sync_parameters()

    def _sync_parameters(self):
        """Method constants and options into the record."""
        S, I = self._S, self._I
        S[K.RTOL], S[K.ATOL] = self.rtol, self.atol
        S[K.ERR_SCALE] = self._err_scale  # internal_tolerances: error-test weights s·W
        S[K.ERR_TANGENT] = 1.0 if self._tangent else 0.0
        S[K.H_FIXED] = 0.0 if self.h_fixed is None else self.h_fixed
        S[K.MAX_STEP] = self.max_step
        S[K.ALPHA_M], S[K.ALPHA_F], S[K.GAMMA], S[K.BETA], S[K.ETA] = (
            self.alpha_m, self.alpha_f, self.gamma, self.beta, self.eta)
        I[K.PROJECT] = 1 if self._project else 0
        I[K.CONST_MASS] = 1 if self.model.constant_mass else 0

    # -- set-up ------------------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        report = self._analyse_start(t0, y0, **ic_options)
        self._allocate(self.model.n_q, self.model.n_c)
        S = self._S
        S[K.T] = S[K.T_PREV] = t0
        qdd = report.qdd
        self._write(O_Y, np.concatenate([report.q, report.v]))
        self._write(O_YP, np.concatenate([report.q, report.v]))
        self._write(O_QDD, qdd)
        self._write(O_QDDP, qdd)
        self._write(O_LAM, report.lam)
        self._write(O_A, qdd)           # Algorithm 3 step 1: a_0 = q''_0
        S[K.H_LAST] = 0.0               # step size a belongs to (0: a = q'')
        self._has_state = True
        S[K.H_NEXT] = self._initial_step() if self.h_fixed is None else self.h_fixed
        self._load_machine_code(K.RESTART)

    def _initial_step(self):
        if self.first_step is not None:
            return min(self.first_step, self.max_step)
        # Ξ³ ≈ h³‖q'''‖; without q''' take the step whose position change from
        # the initial acceleration, h²‖q''‖/2, is 1/100 of the tolerance-scaled
        # scale — cautious; the controller doubles it per step.
        n = self.model.n_q
        weights = error_weights(self.y[:n], self._err_rtol, self._err_atol)
        acc = kernel_common.scaled_max(self.qdd, weights, 1.0, 0.0, self.qdd.size)
        # h²/2·‖q''‖ (eq. 35) = 1/100 of the tolerance; h in [1e-10, 1e-2], 1e-3 if q'' = 0
        return kernel_common.initial_step(acc, 0.0, 2.0 * 0.01, 2, 1.0, 1e-3, 1e-10, min(1e-2, self.max_step))

    def tangent_part(self, q, t, x):
        """P x, P = I − M⁻¹C_qᵀ(C_q M⁻¹C_qᵀ)⁻¹C_q the M-orthogonal projector onto ker C_q at
        (q, t): the kernel's ``_tangent_part`` (the split error estimate), run as Python."""
        q = np.ascontiguousarray(q, dtype=float)
        x = np.ascontiguousarray(x, dtype=float)
        return K._tangent_part(python_functions(self.model), self._S, self._I, self._parameters(),
                               self.model.n_q, self.model.n_c, q, float(t), x)

    # -- dense output --------------------------------------------------------------------------
    def dense_output(self, t):
        """Cubic Hermite: q from (q, q') and q' from (q', q'') at both ends."""
        return self.step_interpolant()(t)

    def step_interpolant(self):
        t0, t1 = self.t_prev, self.t
        y1 = self.y
        if t1 == t0:
            return lambda t: y1.copy()
        return qv_hermite_interpolant(t0, t1, self.y_prev, y1, self.qdd_prev, self.qdd, self.model.n_q)

    # -- state -------------------------------------------------------------------------------
    def reset_point(self, t, y):
        """Continue from (t, y) — e.g. after an event's jump map — and restart."""
        self._settle()
        self._S[K.T] = float(t)
        self._write(O_Y, y)
        self._outputs_fresh = False
        self._restart_now()

    # -- stepping ----------------------------------------------------------------------------
    def _run(self, t_target, max_steps, mode):
        # the kernel is all or nothing: on failure it restores S, I, LU itself
        self._outputs_fresh = False
        if self._restart_pending and mode == K.WHOLE_INTERVAL:
            # new inputs: restart and advance in one call
            status = self._call(K.RESTART_THEN_ADVANCE, t_target, max_steps)
            if status >= K.RESTART_STATUS:   # the restart failed, nothing changed
                self._restart_now()          # raises its clear error
            else:
                self._restart_pending = False
                self._finish(status, t_target)
                return
        self._settle()
        status = self._call(mode, t_target, max_steps)
        self._finish(status, t_target)

    def _finish(self, status, t_target):
        if status == K.OK:
            self._outputs_fresh = self._kernel_outputs
            return
        if status == K.STEP_BUDGET:
            self.too_many_steps(t_target)
        S, I = self._S, self._I
        t, h, info = float(S[K.F_T]), float(S[K.F_H]), float(S[K.F_INFO])
        name = self.name
        if status == K.NEWTON_FAILED:
            cause = _NEWTON_REASONS.get(int(I[K.REASON]), "Newton iteration failed")
            raise ConvergenceError(f"{name}: Newton iteration failed at t={t!r}, h={h!r} ({cause})",
                                   t=t, h=h, cause=cause)
        if status == K.ERROR_TEST_FAILED:
            cause = f"error ratio Xi={info:.3g}"
            raise ConvergenceError(f"{name}: local error test failed repeatedly at t={t!r}, h={h!r} ({cause})",
                                   t=t, h=h, cause=cause)
        if status == K.FIXED_UNRESOLVED:
            raise fixed_step.unresolved_error(name, t, self.h_fixed, info, self.rtol, self.atol, step=h)
        if status == K.STEP_UNDERFLOW:
            cause = "step does not advance t"
            raise ConvergenceError(f"{name}: step size underflow at t={t!r}, h={h!r} ({cause})",
                                   t=t, h=h, cause=cause)
        what = f"{name} iteration matrix"
        if status == K.NONFINITE_MATRIX:
            raise SingularMatrixError(f"{what} contains NaN/inf at t={t}, h={h}", t=t, h=h,
                                      cause="non-finite matrix")
        raise SingularMatrixError(f"{what} is numerically singular at t={t}, h={h} "
                                  f"(pivot ratio {info:.1e})", t=t, h=h, cause="singular matrix")

    # -- inputs, restart, outputs ---------------------------------------------------------------
    def restart(self):
        """Forget the step history at the current point (eq. 10 for q'' and λ).
        Deferred while a state exists: the next advance restarts first, in the same
        call (one call per new input); :meth:`_settle` carries it out before
        anything else reads or writes the record."""
        self._outputs_fresh = False
        if self._has_state:
            self._restart_pending = True
        else:
            self._restart_now()

    def _settle(self):
        """Carry out a deferred restart."""
        if self._restart_pending:
            self._restart_pending = False
            self._restart_now()

    def _restart_now(self):
        self._outputs_fresh = False
        status = self._call(K.RESTART, 0.0, 0)
        if status != K.OK:
            # eq. 10's matrix [[M, C_qᵀ], [C_q, 0]] is singular: the shared IC helper
            # names the cause (common.consistent_accelerations raises)
            n = self.model.n_q
            y = self.y
            consistent_accelerations(self.model, self.t, y[:n], y[n:], self._u_c)
            raise SingularMatrixError(f"{self.name}: consistent accelerations (eq. 10) failed "
                                      f"at t={self.t!r}", t=self.t, h=None, cause="singular matrix")


class GeneralizedAlphaIndex2(GeneralizedAlpha):
    """Generalized-α on the GGL index-2 form (seed 000 eqs. 37-39, Gear, Gupta &
    Leimkuhler): the same kernel with the formulation switch I[GGL] = 1.

        q' − v + C_qᵀ μ = 0,   M v' + C_qᵀ λ (+ Bᵀ ν) = Q,
        C(q, t) = 0,           C_q v + C_t = 0   (+ B v + b = 0, seed 000 eq. 94)

    Both the position and the velocity constraints hold at every step, so v,
    q'' and λ have no index-3 "spikes".  Per step the unknowns are x (position
    innovation, velocity units), y (acceleration innovation), λ, μ (and the
    nonholonomic ν); eq. 38 is solved with the iteration matrix eq. 39 (rows
    scaled by 1/(βh) and 1/(γh) so that the constraint blocks are C_q).  Error
    estimate (seed, after eq. 39): Ξ = (h · max(‖x‖_q, ‖y‖_v))^{1/2}, with the
    velocity weights floored at ``ga_kernel.GGL_VELOCITY_FLOOR``·‖v‖∞; Newton
    accepts on the rate test σ/(1−σ)‖Δδ‖ < ``ga_kernel.GGL_RATE_TOL``.

    Tolerance mapping (option ``tolerance_factor``, default TOL_FACTOR = 30; 1 =
    the seed's test with the user's tolerances): eq. 39 is an error-per-unit-step
    test, so the global error follows rtol but far below it; the whole step works
    with the tolerances × the factor (the user's kept in ``user_rtol``/``user_atol``),
    so generalized-alpha-i2 and generalized-alpha deliver about the same error at
    the same rtol (measured with benchmarks/work_precision.py)."""

    name = "generalized-alpha-i2"
    description = "generalized-alpha, index 2 (GGL stabilised), adaptive step (seed 000 eqs. 37-39)"
    options = {"rho_inf": 0.8, "tolerance_factor": TOL_FACTOR}
    flag_words = {}
    _ggl = 1

    def check_options(self):
        k = self.opts["tolerance_factor"]
        try:
            kf = float(k)
        except (TypeError, ValueError):
            kf = math.nan
        if not (1.0 <= kf <= 1e4) or isinstance(k, bool):   # also rejects NaN
            raise InvalidInputError(f"tolerance_factor must be a number in [1, 1e4], got {k!r}")
        self.opts["tolerance_factor"] = kf
        # the internal rtol never above max(user's rtol, RTOL_CAP)
        self.user_rtol, self.user_atol = self.rtol, self.atol
        r = max(self.rtol, min(kf * self.rtol, RTOL_CAP))
        self.rtol, self.atol = r, self.atol * (r / self.user_rtol)
        super().check_options()   # no project_velocities: the velocity constraint is solved for
        self._project = False
