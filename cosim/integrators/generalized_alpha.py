"""Generalized-α method for index-3 multibody DAEs (seed 000 §3, Appendix
Algorithm 3), adaptive or fixed step.

Unknowns per step: the innovation x = a_{n+1} − a^{(0)}_{n+1} (an
acceleration) and z = λ_{n+1} − λ_n.  With a^{(0)}_{n+1} = q''_n the
corrector is (eqs. 26, 28, 29)

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
import math

import numpy as np
from scipy.linalg.lapack import dgesv as _gesv

from ..errors import InvalidInputError
from ..validation import finite_float, flag
from .base import MultibodyIntegrator
from .common import (EPS, augmented_matrix, consistent_accelerations, constraint_force_jacobian,
                     error_weights, fd_jacobian, force_jacobians, initial_step, mass_term_jacobian)
from .newton import QuasiNewton

SAFETY = 0.9        # eq. 36
MAX_GROWTH = 2.0    # Algorithm 3 f
# Keep h unless the controller allows at least 30 % growth: in the index-3
# formulation every step-size change excites the parasitic constraint mode
# (a double root −ρ∞ of the q''/λ recursion), which the error estimate then
# sees as noise; fewer small changes give fewer rejections and LU updates
# (Andrews, rtol 1e-6: 1935 -> 1538 steps, 1056 -> 387 LU).
DEADBAND = 1.3
REFRESH_AFTER = 4   # iterations with a kept matrix that trigger a refresh
TINY_STEP = 1e-5    # landing steps below this fraction of h: Taylor step
MAX_REJECTIONS = 30  # consecutive rejections in one step before giving up
# Newton updates below ROUNDOFF·ε·max(1, |q|) in q (and the matching γ/(β h)
# multiple in v) are converged.  Measured (Andrews, rtol = 1e-9, plain eq. 34,
# fixed h = 1e-6): 100 lost accuracy (error 1.7e-7 instead of 2.2e-8 — a
# real velocity update of 1e-8 passed as rounding); 3 left 0.56 LU per step
# at h = 1e-6 (the rounding of the updates is ~4 units); 10: 1.97 iterations
# and 0.001 LU per step, error 2.2e-8 (before the change 4.5e-8).
ROUNDOFF = 10.0
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
# of ga_kernel.py's errfloor); what limits rtol 1e-10: README "generalized-α
# tolerances", benchmarks/tight_tolerance_probe.py
ERR_FLOOR = 10.0
# option tangent_estimate: the tangent part of h² x (GeneralizedAlpha._tangent_part)
# has no floor, so the internal rtol may go down to this one (rtol 1e-10 → 3.2e-14)
RTOL_FLOOR_TANGENT = 1e-15
# tangent_estimate="auto" (default): the split is on when the proportional
# internal rtol s·rtol is below AUTO_TANGENT × the weights' rounding floor
# ERR_FLOOR·ROUNDOFF·ε/β (7.2e-14 at ρ∞ = 0.8), i.e. where that floor would
# be a sizeable part of the weights and eq. 34 stops following rtol
# (README "generalized-α tolerances"; measured with benchmarks/work_precision.py)
AUTO_TANGENT = 10.0


def nonholonomic_force_jacobian(model, q, mu, t):
    """(Bᵀ μ)_q: the model's ``nonholonomic_force_jacobian`` if it has one,
    else forward differences."""
    fun = getattr(model, "nonholonomic_force_jacobian", None)
    jac = fun(q, mu, t) if fun is not None else None
    if jac is not None:
        return jac
    return fd_jacobian(lambda qq: model.nonholonomic_matrix(qq, t).T @ mu, q)


def nonholonomic_velocity_jacobian(model, q, v, t):
    """(B v + b)_q: the model's ``nonholonomic_velocity_jacobian`` if it has
    one, else forward differences."""
    fun = getattr(model, "nonholonomic_velocity_jacobian", None)
    jac = fun(q, v, t) if fun is not None else None
    if jac is not None:
        return jac
    return fd_jacobian(lambda qq: model.nonholonomic_matrix(qq, t) @ v
                       + model.nonholonomic_offset(qq, t), q)


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
    return r < AUTO_TANGENT * (ERR_FLOOR * ROUNDOFF * EPS / beta)


def alpha_parameters(rho_inf):
    """(α_m, α_f, γ, β, η) of the generalized-α method for ρ∞ (eq. 27)."""
    r = float(rho_inf)
    am = (2.0 * r - 1.0) / (r + 1.0)
    af = r / (r + 1.0)
    gamma = 0.5 - am + af
    beta = 0.25 * (1.0 - am + af) ** 2
    eta = (1.0 - am) / (1.0 - af)
    return am, af, gamma, beta, eta


class GeneralizedAlpha(MultibodyIntegrator):
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
    * velocity projection after each step (option ``project_velocities``)
      and a step-size deadband (h grows only by ≥ 30 %): both keep step-size
      changes from exciting the parasitic constraint mode.
    * Newton at small steps (issue 12): the system is the scaled one of
      eq. 32-33 (constraint rows by 1/(β h²), as Bottasso, Bauchau & Cardona
      2007 and Arnold & Brüls 2007 §4), so its conditioning does not depend on
      h; what grew as h → 0 was the convergence test, which asked for updates
      below the O(ε/h) rounding of the velocities.  Once the iteration stops
      contracting, an update at the rounding level (ROUNDOFF) is accepted:
      fixed h = 1e-6 on Andrews: 20.0 → 2.9 iterations, 8.9 → 0.11 LU per step;
      adaptive, rtol 1e-8: 5.5 → 2.1 iterations, 1.73 → 0.05 LU per step.
    * tolerance-proportional step control (option ``tolerance_proportional``,
      default on; false = the plain eq. 34): the error test uses the weights
      of tol·(tol/TOL_REF)^(1/2), so the global error follows rtol (Andrews
      err/rtol 0.27-4.6 over rtol 1e-3…1e-10, slope 0.95; plain eq. 34: 1-96,
      slope 0.71).  At equal achieved error it takes no more steps than the
      plain test (benchmarks/work_precision.py); at equal rtol it takes more
      (Andrews rtol 1e-6: 7578 vs 2405 steps) because it delivers rtol.
    * option ``tangent_estimate`` (only with the proportional scaling): the
      estimate splits h² x into its tangent part P h² x (P the M-orthogonal
      projector onto ker C_q, ``_tangent_part``) and the normal rest, and
      only the rest, where the Newton rounding lies, gets the rounding floor
      ERR_FLOOR in its weights.  Default ``"auto"``: on only where the
      internal rtol is below AUTO_TANGENT × that floor (``auto_tangent``; user
      rtol < 8.0e-10 at ρ∞ = 0.8), where the floored estimate stops
      following rtol (Andrews path err/rtol at rtol 2e-10 / 1e-10: 14.6 / 29
      → 6.6 / 7.9); looser rtols run the floored estimate unchanged, because
      there the split costs the crank-slider 1.4-2.4× the steps (README
      "generalized-α tolerances").  ``true``/``false`` force it.
    * a_n is rescaled when h changes; the Newton iteration starts from the
      extrapolated innovation (neither changes the converged solution).
    * rejections: first retry with h_new (eq. 36), then halve; the step
      fails with ConvergenceError(t, h, cause) only after 30 rejections or
      below the minimum step (the seed would call a discontinuity locator).
      A Newton failure halves the step, in fixed-step mode too.
    """

    name = "generalized-alpha"
    description = "generalized-alpha, index 3, adaptive step (seed 000 Alg. 3)"
    options = {"rho_inf": 0.8, "project_velocities": True, "tolerance_proportional": True,
               "tangent_estimate": "auto"}
    flag_words = {"tangent_estimate": ("auto",)}

    def check_options(self):
        rho = self.opts["rho_inf"]
        try:
            r = float(rho)
        except (TypeError, ValueError):
            raise InvalidInputError(f"rho_inf must be a number in [0, 1], got {rho!r}") from None
        if not (0.0 <= r <= 1.0):  # also rejects NaN
            raise InvalidInputError(f"rho_inf must be in [0, 1], got {rho!r}")
        self.opts["rho_inf"] = r
        self._project = flag("project_velocities", self.opts["project_velocities"])
        # (generalized-alpha-i2 has no such option: its own eq. 39 estimate)
        prop = flag("tolerance_proportional", self.opts.get("tolerance_proportional", False))
        self.alpha_m, self.alpha_f, self.gamma, self.beta, self.eta = alpha_parameters(r)
        tangent = self.opts.get("tangent_estimate", False)  # True, False or "auto" (flag_words)
        if tangent == "auto":   # on only near the rounding floor of the weights
            tangent = auto_tangent(self.rtol, self.beta)
        self._tangent = prop and tangent
        self._err_rtol, self._err_atol = internal_tolerances(
            self.rtol, self.atol, prop, RTOL_FLOOR_TANGENT if self._tangent else None)
        # the error test's weights are s·W (W of the user's tolerances); the
        # Newton norm keeps W: 1e-4·W is already far below s·W ≥ 1e-3·W, and a
        # Newton norm on s·W would sit at the rounding level of v at moderate
        # rtol (decisions on noise: the backends' counts then differ)
        self._err_scale = self._err_rtol / self.rtol

    # -- set-up ------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        self._ic(t0, y0, **ic_options)
        self.a = self.qdd.copy()          # Algorithm 3 step 1: a_0 = q''_0
        self.h_last = 0.0                 # step size a belongs to (0: a = q'')
        # innovation and multiplier change per unit step of the last step:
        # only used to start the Newton iteration (kept through a restart)
        self.x_rate = np.zeros_like(self.a)
        self.lam_rate = np.zeros_like(self.lam)
        self.qdd_prev = self.qdd.copy()
        self._setup_work()
        self.h_next = self._initial_step() if self.h_fixed is None else self.h_fixed

    def _setup_work(self):
        """Newton object and work arrays (also for a restore into a fresh object)."""
        self.newton = QuasiNewton(self.stats, what=f"{self.name} iteration matrix", prior_rate=True)
        self._n_g = len(getattr(self.model, "nonholonomic_names", ()))
        n = self.model.n_q
        self._J = np.zeros(self._matrix_shape(n, self.model.n_c, self._n_g))
        self._minv_diag = None
        self._minv_exact = None

    def _matrix_shape(self, n, m, ng):
        return (n + m + ng, n + m + ng)

    def _initial_step(self):
        if self.first_step is not None:
            return min(self.first_step, self.max_step)
        # Ξ³ ≈ h³‖q'''‖; without q''' take the step whose position change from
        # the initial acceleration, h²‖q''‖/2, is 1/100 of the tolerance-scaled
        # scale — cautious; the controller doubles it per step.
        w = error_weights(self.q, self._err_rtol, self._err_atol)
        acc = float(np.max(np.abs(self.qdd) / w)) if self.qdd.size else 0.0
        return initial_step(acc, 0.01, self.max_step)

    # -- restart / state -------------------------------------------------------------
    def _restart(self):
        q, v = self.model.split(self.y)
        self.qdd, self.lam = self._consistent_accelerations(q, v)
        self.a = self.qdd.copy()
        self.h_last = 0.0
        self.lam_rate = np.zeros_like(self.lam)   # λ jumps here; x_rate stays a fair guess
        self.qdd_prev = self.qdd.copy()

    def _method_state(self):
        return {"a": self.a, "qdd_prev": self.qdd_prev, "h_next": float(self.h_next),
                "h_last": float(self.h_last), "x_rate": self.x_rate,
                "lam_rate": self.lam_rate,
                "newton": self.newton.state()}

    def _restore_method_state(self, d):
        self.a = np.array(d["a"], dtype=float)
        self.qdd_prev = np.array(d["qdd_prev"], dtype=float)
        self.h_next = float(d["h_next"])
        self.h_last = float(d["h_last"])
        self.x_rate = np.array(d["x_rate"], dtype=float)
        self.lam_rate = np.array(d["lam_rate"], dtype=float)
        if getattr(self, "newton", None) is None:
            self._setup_work()
        self.newton.stats = self.stats
        self.newton.restore(d["newton"])

    # -- dense output -------------------------------------------------------------------
    def dense_output(self, t):
        """Cubic Hermite: q from (q, q') and q' from (q', q'') at both ends."""
        t0, t1 = self.t_prev, self.t
        n = self.model.n_q
        if t1 == t0:
            return self.y.copy()
        h = t1 - t0
        s = (float(t) - t0) / h
        h00 = (1 + 2 * s) * (1 - s) ** 2
        h10 = s * (1 - s) ** 2
        h01 = s * s * (3 - 2 * s)
        h11 = s * s * (s - 1)
        q0, v0 = self.y_prev[:n], self.y_prev[n:]
        q1, v1 = self.y[:n], self.y[n:]
        q = h00 * q0 + h10 * h * v0 + h01 * q1 + h11 * h * v1
        v = h00 * v0 + h10 * h * self.qdd_prev + h01 * v1 + h11 * h * self.qdd
        return np.concatenate([q, v])

    def _inv_mass_diag(self, q):
        """1/|diag M| (cached for constant mass), used only to scale norms."""
        if self._minv_diag is not None:
            return self._minv_diag
        d = np.abs(np.diagonal(self.model.mass(q, self.t)))
        d = np.where(d > 0.0, d, max(float(d.max()), 1.0) if d.size else 1.0)
        if self.model.constant_mass:
            self._minv_diag = 1.0 / d
        return 1.0 / d

    # -- one step --------------------------------------------------------------------------
    def _predict(self, h):
        """Predictor, eq. 30 (corrected) and eq. 31."""
        am, af, g, b = self.alpha_m, self.alpha_f, self.gamma, self.beta
        n = self.model.n_q
        q, v, qdd, a = self.y[:n], self.y[n:], self.qdd, self.a
        if self.h_last > 0.0 and h != self.h_last:
            # a_n - q''_n ~ (α_m − α_f) h q''' belongs to the last step size;
            # rescale it to h so a step change does not excite the parasitic
            # root of the a-recursion (variable-step generalized-α).
            a = qdd + (h / self.h_last) * (a - qdd)
        qdd0 = (am * a + (1.0 - am - af) * qdd) / (1.0 - af)
        v0 = v + h * ((1.0 - g) * a + g * qdd)
        q0 = q + h * v + (h * h) * ((0.5 - b) * a + b * qdd)
        return q0, v0, qdd0

    def _attempt(self, h):
        """Solve eq. 32 (with the nonholonomic rows of seed 000 §7 when the
        model has them) for the innovations (x, z) at step h.

        Returns (result, q, v, q'', multipliers, x, Ξ) with Ξ from eq. 34
        (None in fixed-step mode)."""
        model, t1, u = self.model, self.t + h, self.u
        n, m, ng = model.n_q, model.n_c, self._n_g
        mz = m + ng
        g, b, eta = self.gamma, self.beta, self.eta
        bh2, gh = b * h * h, g * h
        q0, v0, qdd0 = self._predict(h)
        lam0 = self.lam
        # Newton starting guess (does not change the solution or the error
        # estimate): x ≈ h·q⁽³⁾ is smooth, so extrapolate the last
        # innovation and λ linearly; the iteration then starts O(h²) close.
        x_hat = h * self.x_rate
        lam_hat = lam0 + h * self.lam_rate
        q0 = q0 + bh2 * x_hat
        v0 = v0 + gh * x_hat
        qdd0 = qdd0 + eta * x_hat
        inv_bh2, inv_gh = 1.0 / bh2, 1.0 / gh
        y = self.y
        w = error_weights(y[:n], self.rtol, self.atol)
        # Newton norm: the larger of the position change β h² Δx and the
        # velocity change γ h Δx in the weighted norm eq. 35 (a velocity bias
        # left by a loosely converged iteration accumulates over the steps).
        # Scale-aware test: with the constraint rows scaled by 1/(β h²)
        # (eq. 32-33; Bottasso, Bauchau & Cardona 2007; Arnold & Brüls 2007
        # §4) the iteration matrix is h-independent, but rounding ε|q| of
        # C(q) still moves x by ~ε|q|/(β h²), i.e. q by ~ε|q| and v by
        # ~γ ε|q|/(β h) — the O(1/h) sensitivity of the index-3 velocities.
        # The plain norm (velocity weights floored at 100 such units) stalls
        # there for h ≲ 1e-5 (20 iterations, 9 LU per step at h = 1e-6 on
        # Andrews).  Second norm, used only once the iteration has stopped
        # contracting: an update below ROUNDOFF·ε·max(1,|q|) in q (γ/(β h)
        # times that in v) is rounding, and the iterate is converged.
        qmax = max(1.0, float(np.abs(y[:n]).max()) if n else 1.0)
        w_v0 = error_weights(y[n:], self.rtol, self.atol)
        w_v = w_v0 + (100.0 * EPS * g / (b * h)) * qmax
        scale = np.maximum(bh2 / w, gh / w_v)
        qfloor = ROUNDOFF * EPS * qmax / self.newton.tol
        scale_r = np.maximum(bh2 / (w + qfloor), gh / (w_v0 + (g / (b * h)) * qfloor))
        J = self._J

        def unpack(delta):
            x = delta[:n]
            return q0 + bh2 * x, v0 + gh * x, qdd0 + eta * x, lam_hat + delta[n:]

        if ng == 0:
            def residual(delta):  # eq. 32
                x = delta[:n]
                q = q0 + bh2 * x
                r1 = model.mass(q, t1) @ (qdd0 + eta * x) - model.forces(q, v0 + gh * x, t1, u)
                if m:
                    r1 += model.constraint_jacobian(q, t1).T @ (lam_hat + delta[n:])
                    return np.concatenate([r1, inv_bh2 * model.constraints(q, t1)])
                return r1
        else:
            def residual(delta):  # seed 000 §7: eq. 32 plus G/(γh) = 0
                q, v, qdd, lam = unpack(delta)
                B = model.nonholonomic_matrix(q, t1)
                r1 = model.mass(q, t1) @ qdd - model.forces(q, v, t1, u) + B.T @ lam[m:]
                G = inv_gh * (B @ v + model.nonholonomic_offset(q, t1))
                if m:
                    r1 += model.constraint_jacobian(q, t1).T @ lam[:m]
                    return np.concatenate([r1, inv_bh2 * model.constraints(q, t1), G])
                return np.concatenate([r1, G])

        def jacobian(delta):  # eq. 33 (and seed 000 §7)
            q, v, qdd, lam = unpack(delta)
            Qq, Qv = force_jacobians(model, q, v, t1, u)
            K = -Qq
            if m:
                K = K + constraint_force_jacobian(model, q, lam[:m], t1)
            if ng:
                K = K + nonholonomic_force_jacobian(model, q, lam[m:], t1)
            Mq = mass_term_jacobian(model, q, qdd, t1)
            if Mq is not None:
                K = K + Mq
            J[:n, :n] = eta * model.mass(q, t1) + bh2 * K - gh * Qv
            if m:
                Cq = model.constraint_jacobian(q, t1)
                J[:n, n:n + m] = Cq.T
                J[n:n + m, :n] = Cq
            if ng:
                B = model.nonholonomic_matrix(q, t1)
                J[:n, n + m:] = B.T
                # d(G/(γh))/dx = B + (β/γ) h (B v + b)_q
                J[n + m:, :n] = B + (b / g) * h * nonholonomic_velocity_jacobian(model, q, v, t1)
            return J

        if mz:
            # a change Δz of λ moves q by about β h²/η · M⁻¹ C_qᵀ Δz (and v by
            # γ h/η · M⁻¹ C_qᵀ Δz); measure it like Δx so λ converges too
            # (diagonal of M as the estimate of M)
            minv = self._inv_mass_diag(y[:n])
            CqT = self._constraint_rows(y[:n], self.t).T

            def norm_with(sc):
                lam_sc = sc * minv / eta
                return lambda dd: max((np.abs(dd[:n]) * sc).max(),
                                      (np.abs(CqT @ dd[n:]) * lam_sc).max())
        else:
            def norm_with(sc):
                return lambda dd: (np.abs(dd) * sc).max() if n else 0.0

        # the stall acceptance in adaptive runs too (Andrews rtol 1e-8,
        # tolerance-proportional: 5.48 -> 2.10 iterations, 1.73 -> 0.05 LU per
        # step).  Adaptive step sequences are roundoff-chaotic (the innovation x
        # carries ε|q|/(β h²)): the two backends' counts agree to within the
        # reference's own 1e-15 perturbation spread, not exactly
        # (tests/test_backends.py)
        res = self.newton.solve(residual, jacobian, n + mz, norm_with(scale), h=h, t=self.t,
                                stall_norm=norm_with(scale_r))
        q, v, qdd, lam = unpack(res.delta)
        x = x_hat + res.delta[:n]
        xi = None
        if self.h_fixed is None:
            # error estimate, eq. 34: Ξ = (h² ‖x‖)^{1/3} ∝ h.  h² x carries the
            # Newton's accepted rounding, up to ROUNDOFF·ε·max(1,|q|)/β (it is
            # β h² x in q), almost all of it along M⁻¹C_qᵀ, the direction the
            # iteration corrects C(q) = 0 in (_tangent_part).  With the
            # tolerance-proportional scaling the weights of h² x get 10× the
            # rounding as a floor (else a tiny internal atol makes Ξ > 1 for
            # every h: failure at t = 0); with option ``tangent_estimate`` only
            # those of its normal part N x = x − P x, the tangent part P x none.
            # The plain eq. 34 (scaling off) stays exactly as it was.
            w_err = self._err_scale * w
            if self._err_scale < 1.0:
                ef = (ERR_FLOOR * ROUNDOFF * EPS / b) * qmax
                if self._tangent and m:
                    xt = self._tangent_part(q, t1, x)
                    xm = max(float(np.max(np.abs(xt) / w_err)),
                             float(np.max(np.abs(x - xt) / (w_err + ef))))
                else:
                    xm = float(np.max(np.abs(x) / (w_err + ef))) if n else 0.0
            else:
                xm = float(np.max(np.abs(x) / w_err)) if n else 0.0
            xi = (h * h * xm) ** (1.0 / 3.0)
        return res, q, v, qdd, lam, x, xi

    def _tangent_part(self, q, t, x):
        """P x with the M-orthogonal projector onto ker C_q(q),
        P = I − M⁻¹C_qᵀ(C_q M⁻¹ C_qᵀ)⁻¹C_q (holonomic rows only).

        In the index-3 form C(q_{n+1}) = 0 holds at every step, so the local
        position error has no first-order component normal to the constraint
        manifold (Hairer & Wanner II §VII.3: the error estimate of an index-3
        method must leave out the components the constraints fix), while the
        rounding the Newton iteration leaves in h² x lies along M⁻¹C_qᵀ (for
        h → 0 the iteration matrix eq. 33 is [[ηM, C_qᵀ], [C_q, 0]]), which P
        annihilates.  x is returned unchanged in a singular configuration."""
        Cq = self.model.constraint_jacobian(q, t)
        return self._m_correction(q, t, Cq, x, Cq @ x)

    def _m_correction(self, q, t, Cq, y, r):
        """y − M⁻¹Cᵀ(C M⁻¹Cᵀ)⁻¹ r, C = Cq: the M-orthogonal correction of seed 000
        eq. 8-9 (W = M); y itself in a singular configuration."""
        minv = self._diagonal_mass_inverse(q, t)
        if minv is not None:
            # constant diagonal M: an m×m solve
            CM = Cq * minv
            _lu, _piv, mult, info = _gesv(CM @ Cq.T, r)
            if info != 0 or not np.isfinite(mult).all():
                return y
            return y - mult @ CM
        K = augmented_matrix(self.model.mass(q, t), Cq)
        n = q.size
        rhs = np.zeros(K.shape[0])
        rhs[n:] = -r
        _lu, _piv, sol, info = _gesv(K, rhs)
        if info != 0 or not np.isfinite(sol).all():
            return y   # singular configuration: y unchanged
        return y + sol[:n]

    def _constraint_rows(self, q, t):
        """[C_q; B]: the rows the multipliers act through."""
        Cq = self.model.constraint_jacobian(q, t)
        if self._n_g:
            return np.vstack([Cq, self.model.nonholonomic_matrix(q, t)])
        return Cq

    # -- advancing ------------------------------------------------------------------------
    _SNAP = ("t", "y", "t_prev", "y_prev", "qdd", "lam", "a", "qdd_prev", "h_next", "h_last",
             "x_rate", "lam_rate")

    def advance(self, t_target):
        """As :meth:`Integrator.advance` (exact landing, state unchanged on
        failure) with a cheap rollback: a step only rebinds arrays, never
        writes into them, so references are a complete snapshot — no deep
        copy per communication step."""
        t_target = finite_float("t_target", t_target)
        if t_target < self.t:
            raise InvalidInputError(f"target time {t_target!r} is before t={self.t!r}")
        if t_target == self.t:
            return self.t
        self.check_step_budget(t_target)  # as Integrator.advance: refuse a hopeless interval at once
        nt = self.newton
        saved = ([getattr(self, k) for k in self._SNAP], dict(self.stats), nt.snapshot())
        try:
            n = 0
            while self.t < t_target:
                n += 1
                if n > self.max_steps:
                    self.too_many_steps(t_target)
                self._step(t_target)
        except BaseException:
            for k, val in zip(self._SNAP, saved[0]):
                setattr(self, k, val)
            self.stats.clear()
            self.stats.update(saved[1])
            nt.rollback(saved[2])
            raise
        return self.t

    def _step(self, t_limit):
        nt = self.newton
        saved, h_next = nt.snapshot(), self.h_next
        try:
            self._step_inner(t_limit)
        except BaseException:
            nt.rollback(saved)
            self.h_next = h_next
            raise

    def _project_velocity(self, q, v, t):
        """M-orthogonal projection of v onto C_q v + C_t = 0 (seed 000 eq. 8-9
        with W = M).  Not part of Algorithm 3: in the index-3 scheme the
        velocity-constraint drift left by a step-size change feeds the
        parasitic constraint mode (double root −ρ∞), which the error estimate
        then reads as noise; projecting removes that excitation (Andrews,
        rtol 1e-6: 1538 -> 1166 steps, 107 -> 3 rejections, 387 -> 87 LU)
        and keeps second order.  ``project_velocities=False`` gives the
        plain seed scheme."""
        model = self.model
        Cq = model.constraint_jacobian(q, t)
        r = Cq @ v + model.constraint_dt(q, t)
        if self._n_g:  # keep B v + b = 0 while projecting
            Cq = np.vstack([Cq, model.nonholonomic_matrix(q, t)])
            r = np.concatenate([r, np.zeros(self._n_g)])
        return self._m_correction(q, t, Cq, v, r)   # Δv = −M⁻¹C_qᵀ (C_q M⁻¹ C_qᵀ)⁻¹ r

    def _consistent_accelerations(self, q, v):
        """Eq. 10 (common.consistent_accelerations); for a constant diagonal M
        through the m×m system C_q M⁻¹ C_qᵀ λ = C_q M⁻¹ Q − γ — the stepper
        restarts after every input change, so this is on the hot path."""
        model, t = self.model, self.t
        minv = self._diagonal_mass_inverse(q, t) if getattr(self, "newton", None) else None
        if minv is None or model.n_c + self._n_g == 0:
            return consistent_accelerations(model, t, q, v, self.u)
        Q = model.forces(q, v, t, self.u)
        Cq = model.constraint_jacobian(q, t)
        gam = model.gamma(q, v, t)
        if self._n_g:
            Cq = np.vstack([Cq, model.nonholonomic_matrix(q, t)])
            gam = np.concatenate([gam, model.nonholonomic_gamma(q, v, t)])
        CM = Cq * minv
        _lu, _piv, lam, info = _gesv(CM @ Cq.T, CM @ Q - gam)
        if info != 0 or not np.isfinite(lam).all():
            return consistent_accelerations(model, t, q, v, self.u)  # raises a clear error
        return minv * (Q - lam @ Cq), lam

    def _diagonal_mass_inverse(self, q, t):
        """1/diag(M) when M is constant and diagonal (checked once), else None."""
        if self._minv_exact is None:
            M = self.model.mass(q, t)
            d = np.diagonal(M)
            ok = self.model.constant_mass and np.array_equal(M, np.diag(d)) and np.all(d > 0)
            self._minv_exact = (1.0 / d) if ok else False
        return None if self._minv_exact is False else self._minv_exact

    def _tiny_step(self, t_limit):
        """A landing step far below the working step (e.g. a target a rounding
        error away): the Newton system scaled by 1/(β h²) is ill-conditioned
        there, and a second-order Taylor step is exact to O(h³) ≪ tolerance.
        The method memory (a, h_last, h_next) is kept as it was."""
        h = t_limit - self.t
        n = self.model.n_q
        q, v = self.y[:n], self.y[n:]
        self.t_prev, self.y_prev, self.qdd_prev = self.t, self.y, self.qdd
        self.y = np.concatenate([q + h * v + (0.5 * h * h) * self.qdd, v + h * self.qdd])
        self.t = t_limit
        self.stats["steps"] += 1

    def _step_inner(self, t_limit):
        fixed = self.h_fixed is not None
        h_prop = self.h_next
        h, lands = self._clamp_step(h_prop, t_limit)
        if lands and h < TINY_STEP * h_prop:
            return self._tiny_step(t_limit)
        h_min = 1e-12 * max(1.0, abs(self.t))
        failed_once = False
        rejections = 0
        n = self.model.n_q
        while True:
            if not lands and not fixed:
                # h := (t + h) − t, so that t + h is exact and the accepted t is
                # the exact sum of the steps taken: t_new = t + h rounded loses
                # up to ε|t|/2 per step, and over 10^6 steps (Andrews, rtol 1e-10)
                # t drifted ~2e-13 from Σh, so the landing step h = t_end − t
                # integrated over a wrong total time (ga_kernel.step does the
                # same).  Fixed-step mode keeps the user's h exactly.
                h = (self.t + h) - self.t
            self.newton.plan_reuse(h, None)  # Algorithm 3 g: reuse test for this h
            fresh = self.newton.need_jac or self.newton.factor is None
            res, q, v, qdd, lam, x, xi = self._attempt(h)
            if res.converged and not fresh and res.iterations >= REFRESH_AFTER:
                # the kept matrix has become slow (σ large but below the 1/3 of
                # the reuse test): refresh it for the next step — cheaper than
                # 4+ quasi-Newton iterations per step (σ = 1 fails the reuse test)
                self.newton.sigma = 1.0
            if not res.converged:
                # Newton failure: halve and retry with a fresh Jacobian.
                self.stats["rejected"] += 1
                self.newton.invalidate()
                rejections += 1
                if h * 0.5 < h_min or rejections > MAX_REJECTIONS:
                    self._fail("Newton iteration failed", h, res.reason)
                h *= 0.5
                lands = False
                continue
            if fixed:
                break
            h_err = h * SAFETY / xi if xi > 0.0 else math.inf
            h_new = min(h_err, MAX_GROWTH * h)  # eq. 36 with Algorithm 3 f
            if xi <= 1.0:
                if h < h_new < DEADBAND * h:
                    h_new = h
                break
            # rejected: first failure retry with h_new, then halve (§3)
            self.stats["rejected"] += 1
            rejections += 1
            h_try = h_new if not failed_once else 0.5 * h
            failed_once = True
            if h_try < h_min or rejections > MAX_REJECTIONS:
                self._fail("local error test failed repeatedly", h,
                           f"error ratio Xi={xi:.3g}")
            h = h_try
            lands = False
        # accept
        self.t_prev = self.t
        self.y_prev = self.y
        self.qdd_prev = self.qdd
        self.a = self.qdd + x  # a_{n+1} = a^{(0)} + x with a^{(0)} = q''_n
        self.h_last = h
        self.x_rate = x / h
        self.lam_rate = (lam - self.lam) / h
        self.t = t_limit if lands else self.t + h
        if fixed:
            self.h_next = self.h_fixed
        elif lands and h < h_prop:
            # a landing step cut short by the target: keep the proposal
            self.h_next = min(h_err, max(MAX_GROWTH * h, h_prop))
        else:
            self.h_next = h_new
        if self._project and self.model.n_c:
            # every step: projecting only before step-size changes was tried
            # and gives 5x the rejections on Andrews (the drift between
            # changes matters too)
            v = self._project_velocity(q, v, self.t)
        self.y = np.concatenate([q, v])
        self.qdd = qdd
        self.lam = lam
        self.stats["steps"] += 1
