"""Variable-step, variable-order BDF integrators for multibody DAEs
(seed 000 §4, Appendix Algorithm 4).

Variable-step (divided-difference) formulation, eqs. 57-69.  With
τ_j^n = t_n − t_{n−j} and the modified divided differences
∇^j x_n = (∏_{i≤j} τ_i^n)[x_n, …, x_{n−j}], a step of order k and size h is

    τ_1^{n+1} = h,  τ_{j+1}^{n+1} = h + τ_j^n                    (eq. 66)
    ω_j = ∏_{i≤j} τ_i^{n+1}/τ_i^n,   c_j = Σ_{i≤j} h/τ_i^{n+1}    (eqs. 58, 64)
    x^{(0)} = x_n + Σ_{j≤k} ω_j ∇^j x_n,  h ẋ^{(0)} = Σ_{j≤k} c_j ω_j ∇^j x_n   (eq. 69)
    x_{n+1} = x^{(0)} + δ,  ẋ_{n+1} = ẋ^{(0)} + δ/ĥ,  ĥ = h/c_k    (eqs. 68, 71)

with δ = ∇^{k+1} x_{n+1} and the local error c_e^k ‖δ‖, c_e^k = h/τ_{k+1}^{n+1}.
After acceptance the differences are updated by eq. 59,
∇^j x_{n+1} = ω_j ∇^j x_n + ∇^{j+1} x_{n+1}, and ∇^{k+2} x_{n+1} =
δ − ω_{k+1}∇^{k+1} x_n gives the order k+1 estimate.  No rescaling is
needed when h or k changes: the time vector carries the grid.

Three formulations share this machinery (x = (q, v) in all of them):

* :class:`BDFIndex3` ("bdf"): eqs. 73-79, unknowns δ and λ̂ = ĥ²λ; the
  velocity error ε (eq. 76) is filtered by the projection of eq. 80 with the
  LU already at hand before it enters the error test and the order choice.
* :class:`BDFIndex2` ("bdf-i2"): the stabilised GGL form, eqs. 81-84,
  unknowns (δ, ε, ĥλ, ĥμ).
* :class:`BDFIndex1` ("bdf-i1"): q, v, a all index-1 variables (the system
  after eq. 84), unknowns (δ, ε, a, λ, ĥτ, ĥμ).

Order and step selection (§4 "变步长变阶", Algorithm 4 f-j): candidates
k−1, k, k+1 with the safety factors of eq. 85, the maximum step ratio per
order of Table 1 (Skelboe), Skelboe's instability test of Table 2 combined
with the relaxed smoothness condition ‖∇^k‖ ≥ ‖∇^{k+1}‖ ≥ ‖∇^{k+2}‖ for
raising the order.  Newton: :class:`~cosim.integrators.newton.QuasiNewton`
(Algorithm 2) with the reuse test on ĥ (§5.1) — across steps for bdf-i2 and
bdf-i1, within a step for bdf (see below).

Choices beyond the seed's text (each commented where it is made):
* the unknowns and rows are scaled to position size, so the iteration
  matrices hardly depend on ĥ; the reuse relaxation ν is therefore 1;
* q'' and λ get the same difference-array predictor as (q, v) (better
  Newton start, far fewer Jacobian refreshes);
* Newton convergence is judged in the weighted RMS norm (as DASSL), the
  local error test and order choice in the weighted max norm of eq. 35
  (bdf-i2, bdf-i1) or, for bdf since issue 12, in the weighted RMS norm as
  DASSL's (option ``error_norm``, see _BDF);
* after an error-test failure the next step does not grow (as DASSL);
  h_{n+1}/h_n ≤ 10 overall (Table 1 has no cap for order 1);
* option ``velocity_error`` (default True = Algorithm 4; "scaled": see below) — False tests q only
  for the error and step size; the order-stability tests still use q and v.
* option ``velocity_weights``: "position" (default for bdf and bdf-i2)
  measures the velocity parts of the error test and of the Newton norm in
  the weights W_q^k of the coordinate they belong to, as the seed's norm
  (eq. 35) on the stacked (∇^{j+1}q; ∇̂^{j+1}v) reads; "velocity" uses
  RTOL·|v_k| + ATOL (DASSL / IDA; default for bdf-i1, see BDFIndex1).
  On Andrews (atol 1e-8), "velocity" at rtol 1e-4 takes 175 steps with error
  4.4e-3 (like IDA's 2.5e-2 and scipy BDF's 1.4e-2); "position" takes 492-503
  steps with error 1.3e-6 … 1.1e-5 over 1e-15 perturbations of q0, the seed's
  Table 5 (568 steps, as accurate as generalized-α at 1e-6: 8.1e-5).

Index 3 (:class:`BDFIndex3`), roundoff robustness (issue 12).  The velocity
estimate ε = q'^{(0)} − v^{(0)} + δ/ĥ (eq. 76) carries the roundoff and
Newton remainder of δ's constraint-normal part times 1/ĥ (unprojected it is
~400× the projected one on Andrews at rtol 1e-8).  Eq. 80 removes it only
if the projector — the LU at hand — belongs to the current step; with the
LU reused across steps (Algorithm 4 c) the leak drove the error test at
rtol ≤ 1e-8 (19-33 % rejections, 2.5-10× the steps of bdf-i2, step sequences
chaotic in roundoff).  So the index-3 form forms its iteration matrix at
every attempt (option ``reuse_matrix`` restores the reuse), and its order
tests see the velocity estimate times ĥ (Hairer & Wanner II §VII.3: index-2
components are one order lower and are scaled by h for the error control);
the error test and step size keep the seed's norm.  ``velocity_error="scaled"``
uses the ĥ-scaled velocity for the error test too (RADAU5's convention):
roundoff-insensitive, fewer steps, error a few times rtol.
"""
import math
from collections import deque

import numpy as np

from ..errors import ConvergenceError, InvalidInputError, SingularMatrixError
from .base import MultibodyIntegrator
from .common import (EPS, consistent_accelerations, constraint_force_jacobian, error_weights,
                     fd_jacobian, force_jacobians, initial_step, lu_factor, lu_solve, mass_term_jacobian)
from .newton import QuasiNewton

MAX_ORDER = 5
ORDER_HISTORY_MAX = 10_000   # (t, k) entries kept in BDF.order_history
SAFETY_DOWN, SAFETY_SAME, SAFETY_UP = 1.3, 1.2, 1.4        # eq. 85
MAX_RATIO = (math.inf, math.inf, 2.6, 1.9, 1.5, 1.2)        # Table 1, index = order
SKELBOE = (0.0, 0.0, 0.0, 0.59, 0.65, 0.89)                 # Table 2, index = order
MIN_REJECT_FACTOR, MAX_REJECT_FACTOR = 0.2, 0.9            # step cut after an error failure
MAX_GROWTH = 10.0            # overall cap on h_{n+1}/h_n (order 1 has none in Table 1)
NEWTON_CUT = 0.25            # step cut after a Newton failure (as DASSL)
MAX_FAILURES = 15            # failed attempts within one step before giving up
NEWTON_MAX_ITER = 8
REUSE_LIMIT = 1.0 / 3.0   # §5.1 reuse test bound (tighter: more LUs, fewer iterations)
# Algorithm 2 thresholds in the error-weighted RMS norm (1 = the local tolerance)
# (looser values, e.g. 1e-3 / 1e-2, save ~20% of the iterations but make the
# index-3 velocities, hence the Andrews global error, visibly noisier)
NEWTON_TOL = 1e-4
ROUNDOFF_FLOOR = 1e3          # velocity weights ≥ this × ε_mach·‖q‖∞/ĥ (index 3)
# error weights ≥ this × ε_mach × the largest |q| (q part) or |v| (v part): a
# component's difference below that is rounding of the coupled solve, not error
# (issue 12: a velocity crossing zero at rtol 1e-12, atol 1e-14 has W = 6e-14
# against ~2e-13 of noise, and the step size collapsed to 1e-17 chasing it)
WEIGHT_FLOOR = 100.0
NEWTON_ERR_TOL = 1e-3


TIGHT_RTOL = 1e-9   # below it a collapsed step is most likely the rounding level


def tolerance_hint(name, rtol, atol):
    """Appended to "step size below the minimum" when the tolerance is tight: the
    error estimate has then most likely reached the rounding of the solution (as
    IDA's / CVODE's "too much accuracy requested"); "" otherwise."""
    if rtol >= TIGHT_RTOL:
        return ""
    return (f"; rtol {rtol:g}, atol {atol:g} may ask for more than {name} resolves in double "
            f"precision on this model (its error estimate at the rounding level): loosen them, "
            f"or use generalized-alpha, whose estimate is floored there")


class _BDF(MultibodyIntegrator):
    """Machinery common to the three BDF formulations."""

    # velocity_error: include v in the local error test (seed Algorithm 4 f:
    # e^j = ‖(∇^{j+1}q; ∇̂^{j+1}v)‖).  False tests q only, as the index-3
    # generalized-α estimate does, while the Skelboe / smoothness order tests
    # keep watching q and v: on wide-band models (crank-slider) the
    # unresolved stiff velocities then no longer dictate the step and the
    # order settles at 2 (seed Fig. 7).
    # velocity_weights: the weights the velocity parts of the error test and
    # the Newton norm are measured in.  "position" (default; bdf-i1: "velocity") is the seed's
    # norm, eq. 35, applied to the stacked (∇^{j+1}q; ∇̂^{j+1}v) of Algorithm 4 f:
    # both parts of coordinate k use W_q^k = RTOL·|q_k| + ATOL.  "velocity"
    # weighs v_k by RTOL·|v_k| + ATOL (the DASSL / IDA convention); measured on
    # Andrews it controls the true local error at the tolerance but needs a
    # tolerance ~1e-3 tighter for the seed's Table 5 accuracy (see the README).
    # error_norm: how the weighted components of the local error estimate
    # are combined.  "max" is the seed's norm, eq. 35 (max over the
    # components); "rms" the root mean square over them, the norm of DASSL's
    # and IDA's error test and order selection (Brenan, Campbell & Petzold
    # 1996, §5.2; Hindmarsh et al. 2005, eq. 2.6), and of our Newton norm.
    # Default "rms" for bdf (index 3) since issue 12: in the max norm its error
    # at Andrews' t = 0.03 was 0.0070 × rtol at rtol 1e-4 and its spread over
    # 1e-15 perturbations of q0 up to 9× at 1e-9 (README "BDF error norm").
    options = {"max_order": MAX_ORDER, "velocity_error": True, "velocity_weights": "position",
               "error_norm": "max"}
    flag_words = {"velocity_error": ("scaled",)}

    def check_options(self):
        k = self.opts["max_order"]
        if isinstance(k, bool) or not isinstance(k, (int, np.integer, float)) or \
                not float(k).is_integer() or not 1 <= int(k) <= MAX_ORDER:
            raise InvalidInputError(f"max_order must be an integer 1..{MAX_ORDER}, got {k!r}")
        self.opts["max_order"] = self.max_order = int(k)
        ve = self.opts["velocity_error"]   # parsed by validation.flag (base class)
        self._velocity_scaled = ve == "scaled"
        self.velocity_error = True if self._velocity_scaled else ve
        self.opts["velocity_error"] = "scaled" if self._velocity_scaled else self.velocity_error
        vw = self.opts["velocity_weights"]
        if not isinstance(vw, str) or vw.strip().lower() not in ("position", "velocity"):
            raise InvalidInputError(f"velocity_weights must be 'position' or 'velocity', got {vw!r}")
        self.opts["velocity_weights"] = vw.strip().lower()
        self._position_weights = self.opts["velocity_weights"] == "position"
        en = self.opts["error_norm"]
        if not isinstance(en, str) or en.strip().lower() not in ("max", "rms"):
            raise InvalidInputError(f"error_norm must be 'max' or 'rms', got {en!r}")
        self.opts["error_norm"] = en.strip().lower()
        self._rms_norm = self.opts["error_norm"] == "rms"
        self._reuse_across_steps = True
        self._order_tests_scaled = False

    # -- set-up ------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        if getattr(self.model, "nonholonomic_names", ()):
            raise InvalidInputError(f"method {self.name!r} does not support nonholonomic "
                                    f"constraints (model {self.model.name!r})")
        self._ic(t0, y0, **ic_options)
        self.newton = QuasiNewton(self.stats, max_iter=NEWTON_MAX_ITER, tol=NEWTON_TOL,
                                  err_tol=NEWTON_ERR_TOL, what=f"{self.name} iteration matrix",
                                  prior_rate=True)
        self._J = None            # matrix of the current LU (kept for restore)
        # (t, k) of the last ORDER_HISTORY_MAX accepted steps: a ring buffer, so a
        # long run's memory stays flat (issue 14); order_counts keeps the totals
        self.order_history = deque(maxlen=ORDER_HISTORY_MAX)
        self.newton_failures = 0  # rejected attempts by cause (diagnostics)
        self.error_test_failures = 0
        self.order_counts = [0] * (MAX_ORDER + 1)
        ny = 2 * self.model.n_q
        self._D = np.zeros((MAX_ORDER + 3, ny))   # row j = ∇^j y_n, j = 1..k+2
        # the same differences of z = (q'', λ): predictor only, no error control
        self._Dz = np.zeros((MAX_ORDER + 3, self.model.n_q + self.model.n_c))
        self._tau = np.zeros(MAX_ORDER + 3)       # τ_j^n in slot j−1
        self._start(self._initial_step())

    def _initial_step(self):
        if self.h_fixed is not None:
            return self.h_fixed
        if self.first_step is not None:
            return min(self.first_step, self.max_step)
        # order-1 error ≈ h²/2 ‖q''‖: take 1/50 of the tolerance in q.
        w = error_weights(self.q, self.rtol, self.atol)
        acc = float(np.max(np.abs(self.qdd) / w)) if self.qdd.size else 0.0
        return initial_step(acc, 0.02, self.max_step)

    def _start(self, h):
        """Order 1 from the current point: D_0 = h ẏ_0, τ = (h, 2h) (Algorithm 4 step 3)."""
        self._D[:] = 0.0
        self._D[1] = h * np.concatenate([self.v, self.qdd])
        self._Dz[:] = 0.0
        self._tau[:] = 0.0
        self._tau[0], self._tau[1] = h, 2.0 * h
        self._k = 1            # order of the next step
        self.order = 1         # order of the last accepted step
        self._k_used = 1
        self._valid = 1        # rows 1.._valid of D hold true differences
        self._n_steps = 0      # accepted steps since the (re)start
        self.h_next = h
        self.h = h
        self.newton.invalidate()

    def _restart(self):
        q, v = self.model.split(self.y)
        self.qdd, self.lam = consistent_accelerations(self.model, self.t, q, v, self.u)
        self._start(min(self._initial_step(), self.h_next))

    # -- state -------------------------------------------------------------------------
    def _method_state(self):
        nt = self.newton
        return {
            "D": self._D.copy(), "Dz": self._Dz.copy(), "tau": self._tau.copy(), "k": self._k, "order": self.order,
            "k_used": self._k_used, "valid": self._valid, "n_steps": self._n_steps,
            "h_next": float(self.h_next), "h": float(self.h),
            "order_counts": list(self.order_counts),
            "newton": {**nt.state(), "need_jac": bool(nt.need_jac), "relax": float(nt.relax)},
            "J": None if self._J is None or nt.factor is None else self._J.copy(),
        }

    def _restore_method_state(self, d):
        if not hasattr(self, "newton"):   # restore into a never-initialised integrator
            self.newton = QuasiNewton(self.stats, max_iter=NEWTON_MAX_ITER, tol=NEWTON_TOL,
                                      err_tol=NEWTON_ERR_TOL, what=f"{self.name} iteration matrix",
                                      prior_rate=True)
            self.order_history = deque(maxlen=ORDER_HISTORY_MAX)
            self.newton_failures = self.error_test_failures = 0
        self._D = np.array(d["D"], dtype=float)
        self._Dz = np.array(d["Dz"], dtype=float)
        self._tau = np.array(d["tau"], dtype=float)
        self._k, self.order, self._k_used = int(d["k"]), int(d["order"]), int(d["k_used"])
        self._valid, self._n_steps = int(d["valid"]), int(d["n_steps"])
        self.h_next, self.h = float(d["h_next"]), float(d["h"])
        self.order_counts = list(d["order_counts"])
        self.order_history = deque((e for e in self.order_history if e[0] <= self.t),
                                   maxlen=ORDER_HISTORY_MAX)
        nt = self.newton
        nt.stats = self.stats
        nt.restore(d["newton"])
        self._J = None if d["J"] is None else np.array(d["J"], dtype=float)
        if self._J is not None and nt.factor is None:
            # refactorise the same matrix: identical LU, identical continuation
            nt.factor = lu_factor(self._J, nt.what, t=self.t)
        nt.need_jac = bool(d["newton"]["need_jac"])
        nt.relax = float(d["newton"]["relax"])

    # -- dense output ---------------------------------------------------------------------
    def dense_output(self, t):
        """Interpolating polynomial of the last step's order through y_{n+1}, …, y_{n+1−k}."""
        if self.t == self.t_prev:
            return self.y.copy()
        s = float(t) - self.t
        out = self.y.copy()
        fac = 1.0
        tau = self._tau
        for j in range(1, self._k_used + 1):
            fac *= (s + (tau[j - 2] if j > 1 else 0.0)) / tau[j - 1]
            out += fac * self._D[j]
        return out

    # -- formulation hooks ---------------------------------------------------------------
    def _solve(self, t1, h, hhat, y_pred, yd_pred, winv):
        """Newton solve of the corrector; returns (result, Δy, qdd, lam)."""
        raise NotImplementedError

    # -- one step ------------------------------------------------------------------------------
    def _coefficients(self, h, k):
        """τ^{n+1}, ω_1..ω_{k+1}, c_1..c_k for step h at order k (eqs. 58, 64, 66)."""
        tau_old = self._tau
        tau = np.empty(MAX_ORDER + 3)
        tau[0] = h
        tau[1:] = h + tau_old[:-1]
        kk = min(k + 1, self._valid)
        omega = np.cumprod(tau[:kk] / tau_old[:kk])
        c = np.cumsum(h / tau[:k])
        return tau, omega, c

    @property
    def _z(self):
        return np.concatenate([self.qdd, self.lam])

    def _step(self, t_limit):
        nt = self.newton
        saved = (nt.snapshot(), self._J, dict(self.stats))
        try:
            self._step_inner(t_limit)
        except BaseException:
            newton, self._J, stats = saved
            nt.rollback(newton)
            self.stats.clear()
            self.stats.update(stats)
            raise

    def _step_inner(self, t_limit):
        fixed = self.h_fixed is not None
        k = self._k
        h_prop = self.h_next
        D = self._D
        y_n = self.y
        w = error_weights(y_n, self.rtol, self.atol)
        n = self.model.n_q
        if self._position_weights:                  # eq. 35: W_q^k for q_k and v_k
            w[n:] = w[:n]
        if n:                                       # rounding floor (WEIGHT_FLOOR)
            w[:n] = np.maximum(w[:n], WEIGHT_FLOOR * EPS * float(np.max(np.abs(y_n[:n]))))
            w[n:] = np.maximum(w[n:], WEIGHT_FLOOR * EPS * float(np.max(np.abs(y_n[n:]))))
        winv = 1.0 / w
        failures = 0
        error_failures = 0
        while True:
            h, lands = self._clamp_step(float(h_prop), t_limit)
            h = float(h)
            h_min = 4.0 * np.finfo(float).eps * max(abs(self.t), abs(t_limit), 1e-300)
            if not h > h_min:
                self._fail("step size below the minimum", h, "minimum step reached",
                           tolerance_hint(self.name, self.rtol, float(np.max(self.atol))))
            tau, omega, c = self._coefficients(h, k)
            hhat = h / c[k - 1]
            Dk = D[1:k + 1]
            y_pred = y_n + omega[:k] @ Dk                 # eq. 69
            yd_pred = ((c * omega[:k]) @ Dk) / h
            self._z_pred = self._z + omega[:k] @ self._Dz[1:k + 1]   # (q'', λ) predictor
            if not self._reuse_across_steps:
                self.newton.invalidate()                  # see BDFIndex3.reuse_matrix
            if not self.newton.need_jac:
                self.newton.plan_reuse(hhat, None)        # §5.1 reuse test on ĥ
                nt = self.newton
                if REUSE_LIMIT < 1.0 / 3.0 and not nt.need_jac:
                    r = hhat / nt.h_jac
                    if nt.sigma * r + abs(r - 1.0) > REUSE_LIMIT:
                        nt.invalidate()
                # The iteration matrices here are scaled so that they hardly
                # depend on ĥ (M − ĥQ_v + ĥ²K, constraint rows C_q): the
                # relaxation ν = 2ĥ/(ĥ + ĥ_old) of the unscaled eq. 79 would
                # spoil the exact position update of the constraint rows, and
                # v = q'^{(0)} + δ/ĥ amplifies that by 1/ĥ.
                self.newton.relax = 1.0
            try:
                res, dy, qdd, lam = self._solve(self.t + h, h, hhat, y_pred, yd_pred, winv)
            except SingularMatrixError as exc:
                raise SingularMatrixError(
                    f"{self.name}: singular iteration matrix at t={self.t!r}, h={h!r}, order {k} "
                    f"({exc})", t=self.t, h=h, cause="singular iteration matrix") from None
            except (ValueError, FloatingPointError, ArithmeticError) as exc:
                raise ConvergenceError(
                    f"{self.name}: model evaluation failed at t={self.t!r}, h={h!r} ({exc})",
                    t=self.t, h=h, cause="model evaluation failed") from None
            if not res.converged:
                self.stats["rejected"] += 1
                self.newton_failures += 1
                failures += 1
                if failures > MAX_FAILURES:
                    self._fail("Newton iteration failed", h, res.reason)
                self.newton.invalidate()
                h_prop = NEWTON_CUT * h
                if failures >= 3:
                    k = 1
                continue
            # error estimates of orders k−1, k, k+1 (Algorithm 4 f)
            ce = h / tau[:MAX_ORDER + 2]                   # c_e^j = h/τ_{j+1}, slot j
            cols = [dy]                                    # ∇^{k+1} y_{n+1}
            if k > 1:
                cols.append(omega[k - 1] * D[k] + dy)     # ∇^k y_{n+1}
            has_up = self._valid >= k + 1
            if has_up:
                cols.append(dy - omega[k] * D[k + 1])     # ∇^{k+2} y_{n+1}
            self._hhat = hhat
            errs = self._error_norms(cols, winv, self.velocity_error)
            e_k = errs[0]
            e_dn = errs[1] if k > 1 else math.inf
            e_up = errs[-1] if has_up else math.inf
            # stability / smoothness tests always look at q and v: with the
            # error test on q only, an unstable stiff velocity shows there first
            if self._order_tests_scaled and self.velocity_error and not self._velocity_scaled:
                # index 3: the order tests see the velocity estimate times ĥ
                # (see BDFIndex3); acceptance and step size keep eq. 35
                self._velocity_scaled = True
                try:
                    st = self._error_norms(cols, winv, True)
                finally:
                    self._velocity_scaled = False
            else:
                st = errs if self.velocity_error else self._error_norms(cols, winv, True)
            s_k, s_dn = st[0], (st[1] if k > 1 else math.inf)
            s_up = st[-1] if has_up else math.inf
            err = ce[k] * e_k
            # a landing step cut short by the target does not shrink the
            # history: its successor's ratio caps refer to the proposal h_prop
            h_base = h_prop if lands and h < h_prop else h
            h_k = self._h_order(h, k, ce[k] * e_k, SAFETY_SAME, h_base)
            h_dn = self._h_order(h, k - 1, ce[k - 1] * e_dn, SAFETY_DOWN, h_base) if k > 1 else 0.0
            decr = k >= 3 and s_k > SKELBOE[k] * s_dn    # Table 2 (Skelboe)
            if fixed or err <= 1.0:
                break
            # rejected (Algorithm 4 h i)
            self.stats["rejected"] += 1
            self.error_test_failures += 1
            failures += 1
            error_failures += 1
            if failures > MAX_FAILURES:
                self._fail("local error test failed repeatedly", h, f"error ratio {err:.3g}")
            if decr:
                k, h_new = k - 1, h_dn
            else:
                h_new = h_k
            if error_failures >= 2:
                h_new *= 0.5
            if error_failures >= 3:
                k = 1
            h_prop = min(max(h_new, MIN_REJECT_FACTOR * h), MAX_REJECT_FACTOR * h)
        self._accept(h, h_base, lands, t_limit, k, tau, omega, y_pred + dy, dy, qdd, lam,
                     (e_k, s_k), (e_dn, s_dn), (e_up, s_up), h_k, h_dn, decr, ce, fixed,
                     failures > 0)

    def _h_order(self, h, j, err, safety, h_base=None):
        """Step of order j from its error estimate (eq. 85) capped by Table 1
        (ratio to ``h_base``, default h)."""
        if j < 1:
            return 0.0
        h_base = h if h_base is None else h_base
        eps = err ** (1.0 / (j + 1)) if err > 0.0 else 0.0
        h_j = h / (safety * eps) if eps > 0.0 else math.inf
        return min(h_j, MAX_RATIO[j] * h_base, MAX_GROWTH * h_base)

    def _velocity_winv(self, winv):
        """Inverse weights of the velocity part of the error test: with
        velocity_error="scaled" the estimate is multiplied by ĥ (Hairer &
        Wanner II §VII.3 / RADAU5: index-2 components scaled by h)."""
        wv = winv[self.model.n_q:]
        return wv * self._hhat if self._velocity_scaled else wv

    def _norm(self, x):
        """The error test's norm of the weighted estimate x (option error_norm)."""
        if self._rms_norm:
            s2 = 0.0
            for xi in x.tolist():        # in order, as the kernel sums (bdf_kernel._error_norm)
                s2 += xi * xi
            return math.sqrt(s2 / x.size)
        return float(np.max(np.abs(x)))

    def _error_norms(self, cols, winv, velocity=True):
        n = self.model.n_q
        if not velocity:
            winv = winv[:n]
            return [self._norm(col[:n] * winv) for col in cols]
        winv = np.concatenate([winv[:n], self._velocity_winv(winv)])
        return [self._norm(col * winv) for col in cols]

    def _accept(self, h, h_base, lands, t_limit, k, tau, omega, y1, dy, qdd, lam,
                e_k, e_dn, e_up, h_k, h_dn, decr, ce, fixed, failed):
        (e_k, s_k), (e_dn, s_dn), (e_up, s_up) = e_k, e_dn, e_up
        D = self._D
        valid_old = self._valid
        # difference update, eq. 59
        if valid_old >= k + 1:
            D[k + 2] = dy - omega[k] * D[k + 1]
            self._valid = k + 2
        else:
            D[k + 2] = dy
            self._valid = k + 1
        D[k + 1] = dy
        for j in range(k, 0, -1):
            D[j] = omega[j - 1] * D[j] + D[j + 1]
        D[k + 3:] = 0.0
        Dz = self._Dz
        z1 = np.concatenate([qdd, lam])
        dz = z1 - self._z_pred
        Dz[k + 2] = dz - omega[k] * Dz[k + 1] if valid_old >= k + 1 else dz
        Dz[k + 1] = dz
        for j in range(k, 0, -1):
            Dz[j] = omega[j - 1] * Dz[j] + Dz[j + 1]
        Dz[k + 3:] = 0.0
        self._tau = tau
        self.t_prev, self.y_prev = self.t, self.y
        self.t = float(t_limit) if lands else float(self.t_prev + h)
        self.y = y1
        self.qdd, self.lam = qdd, lam
        self.h = h
        self._k_used = self.order = k
        self._n_steps += 1
        self.stats["steps"] += 1
        self.order_counts[k] += 1
        self.order_history.append((self.t, k))
        # order and step for the next step (Algorithm 4 i-j)
        kmax = self.max_order
        if self._n_steps == 1:
            k_new, h_new = k, h_base  # first step: keep order and step
        else:
            k_new, h_new = k, h_k
            if k > 1 and h_dn >= h_new:
                k_new, h_new = k - 1, h_dn
            incr = (s_k <= s_dn) and (s_up <= s_k) and math.isfinite(s_up)   # relaxed smoothness
            if incr and k < kmax and self._valid >= k + 2:
                h_up = self._h_order(h, k + 1, ce[k + 1] * e_up, SAFETY_UP, h_base)
                if h_up > h_new:
                    k_new, h_new = k + 1, h_up
            if decr:
                k_new, h_new = k - 1, h_dn
        k_new = min(k_new, kmax)
        if failed:
            # after a rejected attempt in this step do not grow again at once
            # (as DASSL): avoids the reject/grow see-saw
            h_new = min(h_new, h_base)
        self.h_next = self.h_fixed if fixed else h_new
        self._k = k_new


class BDFIndex3(_BDF):
    """Index-3 BDF with the projection filter for the velocity error (eqs. 73-80)."""

    name = "bdf"
    description = "BDF variable step/order 1-5, index 3 with projection filter (seed 000 Alg. 4)"

    # reuse_matrix: keep the iteration matrix across steps (Algorithm 4 c,
    # reuse test on ĥ).  Off by default: the projection filter of eq. 80 takes
    # its projector from the LU at hand, and it removes the 1/ĥ-amplified
    # part of ε only if that LU belongs to the current step (C_q and M̂ at
    # this step's predictor).  A reused LU, formed several steps back, lets a
    # fraction ~ (rotation of C_q since then) of that part leak into the
    # error estimate: at rtol ≤ 1e-7 on Andrews the leak reaches the
    # tolerance (27-33 % rejected steps, step sequences chaotic in roundoff).
    options = {**_BDF.options, "reuse_matrix": False, "error_norm": "rms"}

    def check_options(self):
        super().check_options()
        self._reuse_across_steps = self.opts["reuse_matrix"]   # parsed by validation.flag
        # Order tests (Skelboe, Table 2; smoothness ‖∇^k‖ ≥ ‖∇^{k+1}‖ ≥ ‖∇^{k+2}‖)
        # on the velocity estimate times ĥ.  The index-3 velocity is the BDF
        # derivative of q: its local error is one order lower than q's and
        # its differences carry the step-ratio changes (Hairer & Wanner II
        # §VII.3: scale index-2 components by h), so unscaled they flip the
        # order 3 ↔ 4 ↔ 5 on roundoff-size differences; scaled they measure
        # the same order in h as the positions.  The error test and the step
        # size keep the seed's norm (eq. 35, Algorithm 4 f).
        self._order_tests_scaled = True

    def _solve(self, t1, h, hhat, y_pred, yd_pred, winv):
        model, u = self.model, self.u
        n, m = model.n_q, model.n_c
        qp, vp = y_pred[:n], y_pred[n:]
        qdp, vdp = yd_pred[:n], yd_pred[n:]
        h2 = hhat * hhat
        a0 = vdp + (qdp - vp) / hhat          # eq. 77 without δ
        lam_hat0 = h2 * self._z_pred[n:]
        winv_q = winv[:n]
        nt = self.newton

        def residual(x):                     # eq. 78 scaled by ĥ²
            d = x[:n]
            q = qp + d
            v = qdp + d / hhat                # eqs. 75-76: v = q'^{(0)} + δ/ĥ
            a = a0 + d / h2
            r = np.empty(n + m)
            r1 = h2 * (model.mass(q, t1) @ a - model.forces(q, v, t1, u))
            if m:
                r1 += model.constraint_jacobian(q, t1).T @ (lam_hat0 + x[n:])
                r[n:] = model.constraints(q, t1)
            r[:n] = r1
            return r

        def jacobian(x):                     # eq. 79 times ĥ²
            d = x[:n]
            q = qp + d
            v = qdp + d / hhat
            a = a0 + d / h2
            Qq, Qv = force_jacobians(model, q, v, t1, u)
            K = -Qq
            if m:
                K = K + constraint_force_jacobian(model, q, (lam_hat0 + x[n:]) / h2, t1)
            Mq = mass_term_jacobian(model, q, a, t1)
            if Mq is not None:
                K = K + Mq
            J = np.zeros((n + m, n + m))
            J[:n, :n] = model.mass(q, t1) - hhat * Qv + h2 * K
            if m:
                Cq = model.constraint_jacobian(q, t1)
                J[:n, n:] = Cq.T
                J[n:, :n] = Cq
            self._J = J
            return J

        # RMS over q and v = δ/ĥ of the update (as DASSL): one weight per δ
        # v = q'^{(0)} + δ/ĥ carries δ's roundoff (≈ ε_mach·‖q‖) times 1/ĥ: the
        # velocity weights get that floor, or a tiny ATOL (1e-12 on a body at
        # rest) asks Newton for an accuracy below roundoff at small ĥ
        w_v = np.maximum(1.0 / winv[n:], ROUNDOFF_FLOOR * EPS * float(np.max(np.abs(qp))) / hhat)
        w2 = (winv_q * winv_q + (1.0 / (w_v * hhat)) ** 2) * (0.5 / max(n, 1))

        def norm(dx):
            d = dx[:n]
            return math.sqrt(float(np.dot(d * d, w2)))

        res = nt.solve(residual, jacobian, n + m, norm, h=hhat, t=self.t)
        d = res.delta[:n]
        eps = qdp - vp + d / hhat              # eq. 76
        dy = np.concatenate([d, eps])
        qdd = a0 + d / h2
        lam = (lam_hat0 + res.delta[n:]) / h2
        return res, dy, qdd, lam

    def _error_norms(self, cols, winv, velocity=True):
        """Projection filter, eq. 80: ε̂ solves J [ε̂; μ] = [M̂ ε; 0] with the LU at hand."""
        n, m = self.model.n_q, self.model.n_c
        if m == 0 or self.newton.factor is None or not velocity:
            return super()._error_norms(cols, winv, velocity)
        Mhat = self._J[:n, :n]
        wq, wv = winv[:n], self._velocity_winv(winv)
        rhs = np.zeros(n + m)
        out = []
        for col in cols:
            # one vector solve per column: a multi-column getrs is far slower
            # for these tiny systems when BLAS threads compete for cores
            rhs[:n] = Mhat @ col[n:]
            p = lu_solve(self.newton.factor, rhs)[:n]
            if self._rms_norm:
                out.append(self._norm(np.concatenate([col[:n] * wq, p * wv])))
            else:
                out.append(max(float(np.max(np.abs(col[:n]) * wq)), float(np.max(np.abs(p) * wv))))
        return out


def _cq_v_jacobian(model, q, v, t):
    """∂(C_q v + C_t)/∂q by forward differences (the (C_q v)_q + C_tq block)."""
    return fd_jacobian(lambda qq: model.constraint_jacobian(qq, t) @ v + model.constraint_dt(qq, t), q)


class BDFIndex2(_BDF):
    """Index-2 (GGL stabilised) BDF, eqs. 81-84: q and v both error-controlled.

    Rows and unknowns are scaled to the size of a position so that the
    iteration matrix stays well conditioned for small ĥ: unknowns
    (δ, ĥε, ĥ²λ, ĥμ), rows (ĥ·dynamics, kinematics, C, ĥ·(C_q v + C_t)).
    """

    name = "bdf-i2"
    description = "BDF variable step/order 1-5, stabilised index-2 (GGL) form (seed 000 eqs. 81-84)"

    def _solve(self, t1, h, hhat, y_pred, yd_pred, winv):
        model, u = self.model, self.u
        n, m = model.n_q, model.n_c
        qp, vp = y_pred[:n], y_pred[n:]
        hqd0, hvd0 = hhat * yd_pred[:n], hhat * yd_pred[n:]
        h2 = hhat * hhat
        Lam0 = h2 * self._z_pred[n:]
        N = 2 * n + 2 * m
        i_l, i_m = 2 * n, 2 * n + m
        winv_q, winv_v = winv[:n], winv[n:] / hhat

        def unpack(x):
            return qp + x[:n], vp + x[n:i_l] / hhat, Lam0 + x[i_l:i_m], x[i_m:]

        def residual(x):                     # eq. 84, scaled
            q, v, Lam, mu = unpack(x)
            r = np.empty(N)
            r[:n] = hhat * (model.mass(q, t1) @ (hvd0 + x[n:i_l] / hhat)) - h2 * model.forces(q, v, t1, u)
            r[n:i_l] = hqd0 + x[:n] - hhat * v
            if m:
                Cq = model.constraint_jacobian(q, t1)
                r[:n] += Cq.T @ Lam
                r[n:i_l] += Cq.T @ mu
                r[i_l:i_m] = model.constraints(q, t1)
                r[i_m:] = hhat * (Cq @ v + model.constraint_dt(q, t1))
            return r

        def jacobian(x):                     # J_n after eq. 84, scaled
            q, v, Lam, mu = unpack(x)
            Qq, Qv = force_jacobians(model, q, v, t1, u)
            K = -h2 * Qq
            Mq = mass_term_jacobian(model, q, hvd0 + x[n:i_l] / hhat, t1)
            if Mq is not None:
                K = K + hhat * Mq
            J = np.zeros((N, N))
            J[:n, :n] = K
            J[:n, n:i_l] = model.mass(q, t1) - hhat * Qv
            J[n:i_l, :n] = np.eye(n)
            J[n:i_l, n:i_l] = -np.eye(n)
            if m:
                Cq = model.constraint_jacobian(q, t1)
                J[:n, :n] += constraint_force_jacobian(model, q, Lam, t1)
                J[:n, i_l:i_m] = Cq.T
                J[n:i_l, :n] += constraint_force_jacobian(model, q, mu, t1)
                J[n:i_l, i_m:] = Cq.T
                J[i_l:i_m, :n] = Cq
                J[i_m:, :n] = hhat * _cq_v_jacobian(model, q, v, t1)
                J[i_m:, n:i_l] = Cq
            self._J = J
            return J

        w2 = np.concatenate([winv_q, winv_v]) ** 2 / max(2 * n, 1)

        def norm(dx):                        # RMS of the q and v updates (as DASSL)
            d = dx[:i_l]
            return math.sqrt(float(np.dot(d * d, w2)))

        res = self.newton.solve(residual, jacobian, N, norm, h=hhat, t=self.t)
        x = res.delta
        eps = x[n:i_l] / hhat
        dy = np.concatenate([x[:n], eps])
        qdd = yd_pred[n:] + eps / hhat
        lam = (Lam0 + x[i_l:i_m]) / h2
        return res, dy, qdd, lam


class BDFIndex1(_BDF):
    """BDF with q, v, a all index-1 variables (seed 000 §4, system after eq. 84).

    The local error test (Algorithm 4 f) is on (q, v) only: a, λ and the
    index-2 multipliers τ, μ are left out, as IDA's ``IDASetSuppressAlg(TRUE)``
    and Hairer & Wanner II §VII for index-2 components; they enter only the
    Newton norm (a scaled by ĥ).  In their own weights a would exceed the (q, v)
    estimate at most steps of the pendulum and crank-slider (more accurate, not
    less); ĥ-scaled it never does (benchmarks/bdf_error_components.py).

    Scaled like :class:`BDFIndex2`: unknowns (δ, ĥε, ĥ²Δa, ĥ²Δλ, ĥ²τ, ĥμ),
    rows (ĥ²·dynamics, ĥ·(ĥv' − ĥa + …), ĥq' − ĥv + …, C, ĥ·(C_q v + C_t),
    ĥ²·(C_q a − γ)).

    Error weights of the velocities (issue 12): RTOL·|v_k| + ATOL, the DASSL /
    IDA convention (``velocity_weights="velocity"``, the default here).  With
    the seed's norm (eq. 35, ``"position"``) v_k is held to RTOL·|q_k|, up to
    ~10³ times tighter than its own size on Andrews, and the velocity part
    decides every step (benchmarks/bdf_error_components.py): errors 0.0018-0.043
    × rtol at t = 0.03 with a 162× spread over 1e-15 perturbations at rtol
    1e-9.  In velocity weights the error follows rtol on Andrews, the pendulum
    and the crank-slider (slopes 0.93 / 1.00 / 0.58 against 0.95 / 0.84 / 0.47)
    in half the steps on Andrews (README "Work-precision on Andrews").
    """

    name = "bdf-i1"
    description = "BDF variable step/order 1-5, q, v, a as index-1 variables (seed 000 §4)"
    options = {**_BDF.options, "velocity_weights": "velocity"}

    def _solve(self, t1, h, hhat, y_pred, yd_pred, winv):
        model, u = self.model, self.u
        n, m = model.n_q, model.n_c
        qp, vp = y_pred[:n], y_pred[n:]
        hqd0, hvd0 = hhat * yd_pred[:n], hhat * yd_pred[n:]
        h2 = hhat * hhat
        a0 = self._z_pred[:n]
        lam0 = self._z_pred[n:]
        N = 3 * n + 3 * m
        i_a, i_l, i_t, i_m = 2 * n, 3 * n, 3 * n + m, 3 * n + 2 * m
        winv_q, winv_v, winv_a = winv[:n], winv[n:] / hhat, winv[n:] / h2 * hhat

        def unpack(x):
            return (qp + x[:n], vp + x[n:i_a] / hhat, a0 + x[i_a:i_l] / h2,
                    lam0 + x[i_l:i_t] / h2, x[i_t:i_m], x[i_m:])

        def residual(x):
            q, v, a, lam, tau, mu = unpack(x)
            r = np.empty(N)
            r[:n] = h2 * (model.mass(q, t1) @ a - model.forces(q, v, t1, u))
            r[n:i_a] = hhat * (hvd0 + x[n:i_a] / hhat) - h2 * a
            r[i_a:i_l] = hqd0 + x[:n] - hhat * v
            if m:
                Cq = model.constraint_jacobian(q, t1)
                r[:n] += h2 * (Cq.T @ lam)
                r[n:i_a] += Cq.T @ tau
                r[i_a:i_l] += Cq.T @ mu
                r[i_l:i_t] = model.constraints(q, t1)
                r[i_t:i_m] = hhat * (Cq @ v + model.constraint_dt(q, t1))
                r[i_m:] = h2 * (Cq @ a - model.gamma(q, v, t1))
            return r

        def jacobian(x):
            q, v, a, lam, tau, mu = unpack(x)
            Qq, Qv = force_jacobians(model, q, v, t1, u)
            M = model.mass(q, t1)
            J = np.zeros((N, N))
            K = -Qq
            Mq = mass_term_jacobian(model, q, a, t1)
            if Mq is not None:
                K = K + Mq
            I = np.eye(n)
            J[:n, n:i_a] = -hhat * Qv
            J[:n, i_a:i_l] = M
            J[n:i_a, n:i_a] = I
            J[n:i_a, i_a:i_l] = -I
            J[i_a:i_l, :n] = I
            J[i_a:i_l, n:i_a] = -I
            if m:
                Cq = model.constraint_jacobian(q, t1)
                K = K + constraint_force_jacobian(model, q, lam, t1)
                J[:n, i_l:i_t] = Cq.T
                J[n:i_a, :n] = constraint_force_jacobian(model, q, tau, t1)
                J[n:i_a, i_t:i_m] = Cq.T
                J[i_a:i_l, :n] += constraint_force_jacobian(model, q, mu, t1)
                J[i_a:i_l, i_m:] = Cq.T
                J[i_l:i_t, :n] = Cq
                J[i_t:i_m, :n] = hhat * _cq_v_jacobian(model, q, v, t1)
                J[i_t:i_m, n:i_a] = Cq
                g0 = model.gamma(q, v, t1)
                J[i_m:, :n] = h2 * fd_jacobian(
                    lambda qq: model.constraint_jacobian(qq, t1) @ a - model.gamma(qq, v, t1), q)
                J[i_m:, n:i_a] = -hhat * fd_jacobian(lambda vv: model.gamma(q, vv, t1), v, g0)
                J[i_m:, i_a:i_l] = Cq
            J[:n, :n] = h2 * K
            self._J = J
            return J

        w2 = np.concatenate([winv_q, winv_v, winv_a]) ** 2 / max(3 * n, 1)

        def norm(dx):                        # RMS of the q, v and a updates
            d = dx[:i_l]
            return math.sqrt(float(np.dot(d * d, w2)))

        res = self.newton.solve(residual, jacobian, N, norm, h=hhat, t=self.t)
        x = res.delta
        dy = np.concatenate([x[:n], x[n:i_a] / hhat])
        qdd = a0 + x[i_a:i_l] / h2
        lam = lam0 + x[i_l:i_t] / h2
        return res, dy, qdd, lam
