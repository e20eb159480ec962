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

Limits: RKC's stability region hugs the negative real axis; lightly damped
physical oscillations (eigenvalues near the imaginary axis) still restrict h,
as the seed says ("在虚轴上收敛区域有限") — e.g. Andrews' squeezer needs
thousands of steps (benchmarks/seed000.py --with-rkc).
"""
import math

import numpy as np

from ..errors import InvalidInputError, SingularMatrixError
from .base import MultibodyIntegrator
from .common import error_weights, last_step_dense_output, lu_factor, lu_solve
from .index_one import IndexOneRHS, rms_norm

MAX_REJECTIONS = 60


def rkc_coefficients(s, damping=2.0 / 13.0):
    """Per-stage coefficients (μ, ν, μ̃, γ̃-weight a_{j-1}, c_j) of 2nd-order RKC.

    Returns a list for j = 1..s of tuples (mu, nu, mus, ajm1, c) where stage j is
    Y_j = (1−μ−ν) y_n + μ Y_{j−1} + ν Y_{j−2} + h μ̃ (F(Y_{j−1}) − a_{j−1} F_n)
    (for j = 1: Y_1 = y_n + h μ̃_1 F_n).  Follows rkc.f (Sommeijer et al. 1997).
    """
    w0 = 1.0 + damping / (s * s)
    temp1 = w0 * w0 - 1.0
    temp2 = math.sqrt(temp1)
    arg = s * math.log(w0 + temp2)
    w1 = math.sinh(arg) * temp1 / (math.cosh(arg) * s * temp2 - w0 * math.sinh(arg))
    bjm1 = 1.0 / (2.0 * w0) ** 2
    bjm2 = bjm1
    mus = w1 * bjm1
    out = [(0.0, 0.0, mus, 0.0, mus)]
    thjm2, thjm1 = 0.0, mus
    zjm1, zjm2 = w0, 1.0
    dzjm1, dzjm2 = 1.0, 0.0
    d2zjm1, d2zjm2 = 0.0, 0.0
    for _ in range(2, s + 1):
        zj = 2.0 * w0 * zjm1 - zjm2
        dzj = 2.0 * w0 * dzjm1 - dzjm2 + 2.0 * zjm1
        d2zj = 2.0 * w0 * d2zjm1 - d2zjm2 + 4.0 * dzjm1
        bj = d2zj / dzj ** 2
        ajm1 = 1.0 - zjm1 * bjm1
        mu = 2.0 * w0 * bj / bjm1
        nu = -bj / bjm2
        mus = mu * w1 / w0
        thj = mu * thjm1 + nu * thjm2 + mus * (1.0 - ajm1)
        out.append((mu, nu, mus, ajm1, thj))
        thjm2, thjm1 = thjm1, thj
        bjm2, bjm1 = bjm1, bj
        zjm2, zjm1 = zjm1, zj
        dzjm2, dzjm1 = dzjm1, dzj
        d2zjm2, d2zjm1 = d2zjm1, d2zj
    return out


def stability_polynomial(s, z, damping=2.0 / 13.0):
    """R_s(z) of the RKC scheme, evaluated by running the stages on y' = λy."""
    coeffs = rkc_coefficients(s, damping)
    z = np.asarray(z, dtype=complex)
    y0 = np.ones_like(z)
    yjm2 = y0
    yjm1 = y0 + coeffs[0][2] * z * y0
    for mu, nu, mus, ajm1, _ in coeffs[1:]:
        yj = (1 - mu - nu) * y0 + mu * yjm1 + nu * yjm2 + mus * z * (yjm1 - ajm1 * y0)
        yjm2, yjm1 = yjm1, yj
    return yjm1


def stability_boundary(s, damping=2.0 / 13.0):
    """Real stability interval β(s) = (1 + w0)/w1 of the s-stage scheme
    (≈ (2/3)(1 − 2ε/15) s² ≈ 0.653 s² for ε = 2/13)."""
    w0 = 1.0 + damping / (s * s)
    temp1 = w0 * w0 - 1.0
    temp2 = math.sqrt(temp1)
    arg = s * math.log(w0 + temp2)
    w1 = math.sinh(arg) * temp1 / (math.cosh(arg) * s * temp2 - w0 * math.sinh(arg))
    return (1.0 + w0) / w1


def stages_for(h_rho, max_stages):
    """Smallest RKC stage count whose stability interval covers h ρ (rkc.f)."""
    s = 1 + int(math.sqrt(1.0 + 1.54 * max(h_rho, 0.0)))
    return min(max(s, 2), max_stages)


class PenaltyRHS(IndexOneRHS):
    """y' of eqs. 91-92 with the factor of J (eq. 89) shared by both solves
    (or of the Bayo form when ``alpha`` is set)."""

    def __init__(self, model, stats, penalty, alpha=None, xi=1.0):
        super().__init__(model, stats)
        self.chi = penalty          # χ (seed form) or ω (Bayo form)
        self.alpha = alpha
        self.xi = xi
        self.rhs2 = np.zeros((self.K.shape[0], 2))

    def _bayo(self, t, q, v, u):
        """(M + α C_qᵀC_q) v' = Q + α C_qᵀ (γ − 2ξω Ċ − ω² C)."""
        model, n, m = self.model, self.n, self.m
        M = model.mass(q, t)
        Q = model.forces(q, v, t, u)
        if m:
            Cq = model.constraint_jacobian(q, t)
            w = self.chi
            c_dot = Cq @ v + model.constraint_dt(q, t)
            r = model.gamma(q, v, t) - 2.0 * self.xi * w * c_dot - w * w * model.constraints(q, t)
            A = M + self.alpha * (Cq.T @ Cq)
            rhs = Q + self.alpha * (Cq.T @ r)
        else:
            A, rhs, r, Cq = M, Q, None, None
        self.factor = lu_factor(A, "M + alpha C_q^T C_q (Bayo penalty form)", t=t)
        self.stats["lu_factorizations"] += 1
        a = lu_solve(self.factor, rhs)
        self.lam = self.alpha * (Cq @ a - r) if m else np.zeros(0)
        f = np.empty(2 * n)
        f[:n] = v
        f[n:] = a
        return f

    def __call__(self, t, y, u):
        n, m, model = self.n, self.m, self.model
        q, v = y[:n], y[n:]
        self.stats["residual_evaluations"] += 1
        if self.alpha is not None:
            return self._bayo(t, q, v, u)
        self.factorize(q, t)
        M = self.K[:n, :n]
        R = self.rhs2
        R[:n, 0] = M @ v
        R[:n, 1] = model.forces(q, v, t, u)
        if m:
            chi = self.chi
            Ct = model.constraint_dt(q, t)
            g = self.K[n:n + m, :n] @ v + Ct
            R[n:n + m, 0] = -Ct - chi * model.constraints(q, t)          # eq. 91
            R[n:n + m, 1] = model.gamma(q, v, t) - chi * g                # eq. 92
        if self.n_g:
            B = self.K[n + m:, :n]
            b = model.nonholonomic_offset(q, t)
            R[n + m:, 0] = 0.0
            R[n + m:, 1] = model.nonholonomic_gamma(q, v, t) - self.chi * (B @ v + b)
        sol = lu_solve(self.factor, R)
        self.lam = sol[n:, 1]
        f = np.empty(2 * n)
        f[:n] = sol[:n, 0]
        f[n:] = sol[:n, 1]
        return f


class RKCPenalty(MultibodyIntegrator):
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

    # -- set-up --------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        self._ic(t0, y0, **ic_options)
        self.n = self.model.n_q
        o = self.opts
        bayo = o["formulation"] == "bayo"
        chi = o["omega"] if bayo else o["penalty"]
        alpha = None
        if bayo:
            alpha = o["alpha"]
            if alpha == "auto":   # α C_qᵀC_q ≈ 1e7 × M on the diagonal
                q0 = self.q
                M0 = np.abs(np.diag(self.model.mass(q0, t0)))
                Cq0 = self.model.constraint_jacobian(q0, t0)
                cc = np.diag(Cq0.T @ Cq0) if Cq0.size else np.zeros(0)
                alpha = 1e7 * float(M0.max()) / float(cc.max()) if cc.size and cc.max() > 0 else 1.0
        self._rhs = PenaltyRHS(self.model, self.stats, 0.0 if chi == "auto" else chi,
                               alpha=alpha, xi=o["xi"])
        self.eigvec = None
        self.f_cur = None
        self._dense = None
        self.rho = None
        self.steps_since_rho = 0
        self.last_stages = 0
        self.max_stages_used = 0
        self.h_last = 0.0
        self.err_last = 0.0
        if chi == "auto":
            rho0 = self._estimate_rho(self._derivative_at_current())
            self._rhs.chi = max(10.0 * rho0, 100.0)
            self.f_cur = None
            self.eigvec = None
        self.penalty = self._rhs.chi
        f0 = self._derivative_at_current()
        self.rho = self._estimate_rho(f0)
        self.h_next = self.h_fixed if self.h_fixed is not None else self._initial_step(f0)

    def _f(self, t, y):
        return self._rhs(t, y, self.u)

    def _derivative_at_current(self):
        if self.f_cur is None:
            f = self._f(self.t, self.y)
            if not np.all(np.isfinite(f)):
                self._fail("right-hand side is not finite", 0.0, "non-finite derivative")
            self.f_cur = f
            self.qdd = f[self.n:].copy()
            self.lam = self._rhs.lam.copy()
        return self.f_cur

    def _estimate_rho(self, f0, max_iter=50):
        """Spectral radius of ∂f/∂y by the nonlinear power method (rkc.f RKCRHO)."""
        y = self.y
        ynrm = float(np.linalg.norm(y))
        if self.eigvec is not None and np.linalg.norm(self.eigvec) > 0:
            v = self.eigvec.copy()
        else:
            v = f0.copy()
            if not np.any(v):
                v = np.ones_like(y)
            v = v + 1e-3 * np.arange(1, y.size + 1)  # break symmetry deterministically
        vnrm = float(np.linalg.norm(v))
        sqrt_eps = math.sqrt(np.finfo(float).eps)
        dynrm = ynrm * sqrt_eps if ynrm > 0 else sqrt_eps
        v = y + v * (dynrm / vnrm)
        sigma = 0.0
        for _ in range(max_iter):
            fv = self._f(self.t, v)
            diff = fv - f0
            dfnrm = float(np.linalg.norm(diff))
            sigma_old = sigma
            sigma = dfnrm / dynrm
            if _ > 0 and abs(sigma - sigma_old) <= 0.01 * sigma:
                break
            if dfnrm > 0:
                v = y + diff * (dynrm / dfnrm)
            else:
                v = y + (v - y) * 0.5 + 1e-3 * dynrm
        self.eigvec = v - y
        self.steps_since_rho = 0
        return 1.2 * sigma

    def _initial_step(self, f0):
        if self.first_step is not None:
            return min(self.first_step, self.max_step)
        scale = error_weights(self.y, self.rtol, self.atol)
        d1 = rms_norm(f0, scale)
        h = min(self.max_step, 0.1 / d1 if d1 > 0 else 1e-3)
        # Euler error estimate (as in rkc.f): ‖h0 (f(y + h0 f) − f)‖ ≈ h0² ‖y''‖
        h0 = min(h, 1.0 / max(self.rho, 1e-12))
        f1 = self._f(self.t + h0, self.y + h0 * f0)
        est = rms_norm(h0 * (f1 - f0), scale)
        if est > 0:
            h = min(h, max(h0 * 1e-3, h0 * math.sqrt(0.1 / est)))
        return max(min(h, self.max_step), 1e-12)

    # -- RKC step ---------------------------------------------------------------------
    def _rkc(self, t, y, h, f0, s):
        coeffs = rkc_coefficients(s, self.opts["damping"])
        yjm2 = y
        yjm1 = y + (h * coeffs[0][2]) * f0
        thjm1 = coeffs[0][4]
        for mu, nu, mus, ajm1, thj in coeffs[1:]:
            fj = self._f(t + h * thjm1, yjm1)
            yj = (1.0 - mu - nu) * y + mu * yjm1 + nu * yjm2 + (h * mus) * (fj - ajm1 * f0)
            yjm2, yjm1, thjm1 = yjm1, yj, thj
        return yjm1

    def _step(self, t_limit):
        saved = (dict(self.stats), self.rho, None if self.eigvec is None else self.eigvec.copy(),
                 self.steps_since_rho)
        try:
            self._step_inner(t_limit)
        except BaseException:
            self.stats.update(saved[0])
            self.rho, self.eigvec, self.steps_since_rho = saved[1:]
            raise

    def _step_inner(self, t_limit):
        t, y = self.t, self.y
        f0 = self._derivative_at_current()
        fixed = self.h_fixed is not None
        if self.rho is None or self.steps_since_rho >= self.opts["rho_interval"]:
            self.rho = self._estimate_rho(f0)
        s_max = self.opts["max_stages"]
        h_prop = self.h_fixed if fixed else self.h_next
        if not fixed:
            # keep h within the reach of s_max stages (rkc.f)
            h_stab = ((s_max - 1) ** 2 - 1) / (1.54 * self.rho) if self.rho > 0 else math.inf
            h_prop = min(h_prop, h_stab)
        h, lands = self._clamp_step(h_prop, t_limit)
        h_min = 1e-12 * max(1.0, abs(t))
        rejected = False
        rejections = 0
        while True:
            t_new = t_limit if lands else t + h
            s = stages_for(h * self.rho, s_max)
            if fixed and 1 + math.sqrt(1.0 + 1.54 * h * self.rho) > s_max + 1:
                self._fail("fixed step needs more RKC stages than max_stages", h,
                           f"h·rho = {h * self.rho:.3g}, max_stages = {s_max}")
            cause = None
            err = 0.0
            try:
                y_new = self._rkc(t, y, h, f0, s)
                f_new = self._f(t_new, y_new)
                lam_new = self._rhs.lam.copy()
                if not (np.all(np.isfinite(y_new)) and np.all(np.isfinite(f_new))):
                    cause = "non-finite solution"
            except SingularMatrixError as exc:
                cause = str(exc)
            if cause is None and not fixed:
                est = 0.8 * (y - y_new) + 0.4 * h * (f0 + f_new)
                scale = error_weights(np.maximum(np.abs(y), np.abs(y_new)), self.rtol, self.atol)
                err = rms_norm(est, scale)
            if cause is None and err <= 1.0:
                break
            if fixed:
                self._fail("RKC step failed", h, cause)
            self.stats["rejected"] += 1
            rejections += 1
            factor = 0.5 if cause is not None else max(0.1, 0.8 * err ** (-1.0 / 3.0))
            h *= factor
            lands = False
            rejected = True
            self.rho = self._estimate_rho(f0)
            if h < h_min or rejections > MAX_REJECTIONS:
                self._fail("step size became too small", h, cause or f"error ratio {err:.3g}")
        # accept
        self.t_prev, self.y_prev = t, y
        self.t, self.y = t_new, y_new
        self._dense = {"f0": f0, "f1": f_new, "h": np.array(h)}
        self.f_cur = f_new
        self.qdd = f_new[self.n:].copy()
        self.lam = lam_new
        self.last_stages = s
        self.max_stages_used = max(self.max_stages_used, s)
        self.steps_since_rho += 1
        self.stats["steps"] += 1
        if fixed:
            self.h_next = self.h_fixed
            return
        # second-order controller of rkc.f
        fac = 10.0
        if err > 0:
            if self.h_last > 0 and self.err_last > 0:
                fac = 0.8 * (h / self.h_last) * self.err_last ** (1.0 / 3.0) / err ** (2.0 / 3.0)
            else:
                fac = 0.8 * (1.0 / err) ** (1.0 / 3.0)
        if rejected:
            fac = min(fac, 1.0)
        fac = min(10.0, max(0.1, fac))
        h_new = h * fac
        if lands and h < h_prop and not rejected:
            h_new = max(h_new, h_prop)
        self.h_last, self.err_last = h, err
        self.h_next = min(h_new, self.max_step)

    # -- dense output / restart / state -------------------------------------------------
    def dense_output(self, t):
        """Cubic Hermite from y and f at both ends of the last step."""
        return last_step_dense_output(self, t, "f0", "f1")

    def _restart(self):
        self.f_cur = None
        self._dense = None
        self.h_last = 0.0
        self.err_last = 0.0

    def _reset_point(self):
        self.f_cur = None
        self._dense = None
        self._derivative_at_current()

    def _method_state(self):
        return {"h_next": float(self.h_next),
                "f_cur": None if self.f_cur is None else self.f_cur.copy(),
                "dense": None if self._dense is None else {k: np.array(v) for k, v in self._dense.items()},
                "rho": float(self.rho), "eigvec": None if self.eigvec is None else self.eigvec.copy(),
                "steps_since_rho": int(self.steps_since_rho), "penalty": float(self._rhs.chi),
                "alpha": -1.0 if self._rhs.alpha is None else float(self._rhs.alpha),
                "h_last": float(self.h_last), "err_last": float(self.err_last),
                "last_stages": int(self.last_stages), "max_stages_used": int(self.max_stages_used)}

    def _restore_method_state(self, d):
        self.h_next = float(d["h_next"])
        self.f_cur = None if d["f_cur"] is None else np.array(d["f_cur"], dtype=float)
        self._dense = None if d["dense"] is None else {k: np.array(v, dtype=float)
                                                         for k, v in d["dense"].items()}
        self.rho = float(d["rho"])
        self.eigvec = None if d["eigvec"] is None else np.array(d["eigvec"], dtype=float)
        self.steps_since_rho = int(d["steps_since_rho"])
        self._rhs.chi = self.penalty = float(d["penalty"])
        self._rhs.alpha = None if d["alpha"] < 0 else float(d["alpha"])
        self.h_last = float(d["h_last"])
        self.err_last = float(d["err_last"])
        self.last_stages = int(d["last_stages"])
        self.max_stages_used = int(d["max_stages_used"])
        self._rhs.stats = self.stats

    def restore(self, state):
        super().restore(state)
        self._rhs.stats = self.stats
