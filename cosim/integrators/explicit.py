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
"""
import math

import numpy as np

from ..errors import ConvergenceError, SingularMatrixError
from .base import MultibodyIntegrator
from .common import EPS, error_weights, last_step_dense_output, lu_factor, lu_solve

SAFETY = 0.9
MIN_FACTOR = 0.2
MAX_FACTOR = 10.0
MAX_REJECTIONS = 60
PROJECTION_TOL = 1e-6      # stop when the correction is below 1e-6 × error weight
PROJECTION_MAX_ITER = 8    # per factorisation; one refactorisation is allowed

# Dormand-Prince 5(4) coefficients (Dormand & Prince 1980; Hairer-Nørsett-Wanner I, II.5)
DP_C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0])
DP_A = [
    np.array([]),
    np.array([1 / 5]),
    np.array([3 / 40, 9 / 40]),
    np.array([44 / 45, -56 / 15, 32 / 9]),
    np.array([19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729]),
    np.array([9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656]),
]
DP_B = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
# error estimator: b - b̂ (7 stages, the 7th is f at the new point: FSAL)
DP_E = np.array([-71 / 57600, 0.0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40])
# continuous extension (Shampine 1986), y(θ) = y0 + h K^T P [θ, θ², θ³, θ⁴]
DP_P = np.array([
    [1.0, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
    [0.0, 0.0, 0.0, 0.0],
    [0.0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
    [0.0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
    [0.0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632],
    [0.0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
    [0.0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423],
])


def rms_norm(x, scale):
    if x.size == 0:
        return 0.0
    return float(np.sqrt(np.mean((x / scale) ** 2)))


class IndexOneRHS:
    """y' = [v; q''] of seed 000 eq. 88 for y = [q, v].

    Keeps the LU factor of J (eq. 89) and λ of the last evaluation; nonholonomic
    rows B q'' = γ_G (seed 000 eq. 93) are appended when the model has them.
    """

    def __init__(self, model, stats):
        self.model = model
        self.stats = stats
        self.n = model.n_q
        self.m = model.n_c
        self.n_g = len(getattr(model, "nonholonomic_names", ()))
        size = self.n + self.m + self.n_g
        self.K = np.zeros((size, size))
        self.rhs = np.zeros(size)
        self.factor = None
        self.lam = np.zeros(self.m + self.n_g)

    def _fill(self, q, t):
        """Write M and the constraint rows at (q, t) into K; returns C_q (with B)."""
        n, m, model, K = self.n, self.m, self.model, self.K
        K[:n, :n] = model.mass(q, t)
        if m:
            Cq = model.constraint_jacobian(q, t)
            K[:n, n:n + m] = Cq.T
            K[n:n + m, :n] = Cq
        if self.n_g:
            B = model.nonholonomic_matrix(q, t)
            K[:n, n + m:] = B.T
            K[n + m:, :n] = B

    def factorize(self, q, t):
        """Factor J(q, t) of eq. 89 (used by the projection when it must refresh)."""
        self._fill(q, t)
        self.factor = lu_factor(self.K, "[[M, C_q^T], [C_q, 0]] (seed 000 eq. 89)", t=t)
        self.stats["lu_factorizations"] += 1
        return self.factor

    def __call__(self, t, y, u):
        n, m, model = self.n, self.m, self.model
        q, v = y[:n], y[n:]
        self.stats["residual_evaluations"] += 1
        self.factorize(q, t)
        rhs = self.rhs
        rhs[:n] = model.forces(q, v, t, u)
        if m:
            rhs[n:n + m] = model.gamma(q, v, t)
        if self.n_g:
            rhs[n + m:] = model.nonholonomic_gamma(q, v, t)
        sol = lu_solve(self.factor, rhs)
        self.lam = sol[n:]
        f = np.empty(2 * n)
        f[:n] = v
        f[n:] = sol[:n]
        return f

    def project(self, t, q, v, wq, wv):
        """Position then velocity projection onto C = 0, C_q v + C_t = 0 (and
        B v + b = 0) with the factor of the last evaluation (seed 000 §6);
        one refactorisation at the current q if the simplified iteration is slow.
        Raises ConvergenceError when it cannot converge."""
        n, m, model = self.n, self.m, self.model
        if m + self.n_g == 0:
            return q, v, 0
        factor = self.factor
        rhs = np.zeros(n + m + self.n_g)
        q = q.copy()
        iterations = 0
        if m:
            for attempt in range(2):
                done = False
                for _ in range(PROJECTION_MAX_ITER):
                    rhs[n:n + m] = -model.constraints(q, t)
                    dq = lu_solve(factor, rhs)[:n]
                    q += dq
                    iterations += 1
                    if not np.all(np.isfinite(dq)):
                        break
                    if np.max(np.abs(dq) / wq) <= PROJECTION_TOL or \
                            np.max(np.abs(dq)) <= 4 * EPS * max(1.0, float(np.max(np.abs(q)))):
                        done = True
                        break
                if done:
                    break
                if attempt == 0:
                    factor = self.factorize(q, t)
            else:
                raise ConvergenceError(f"position projection did not converge at t={t!r}",
                                       t=t, cause="projection")
        v = v.copy()
        rhs[:] = 0.0
        for attempt in range(2):
            done = False
            for _ in range(PROJECTION_MAX_ITER):
                if m:
                    rhs[n:n + m] = -(model.constraint_jacobian(q, t) @ v + model.constraint_dt(q, t))
                if self.n_g:
                    rhs[n + m:] = -(model.nonholonomic_matrix(q, t) @ v
                                    + model.nonholonomic_offset(q, t))
                dv = lu_solve(factor, rhs)[:n]
                v += dv
                iterations += 1
                if not np.all(np.isfinite(dv)):
                    break
                if np.max(np.abs(dv) / wv) <= PROJECTION_TOL or \
                        np.max(np.abs(dv)) <= 4 * EPS * max(1.0, float(np.max(np.abs(v)))):
                    done = True
                    break
            if done:
                break
            if attempt == 0:
                factor = self.factorize(q, t)
        else:
            raise ConvergenceError(f"velocity projection did not converge at t={t!r}",
                                   t=t, cause="projection")
        return q, v, iterations


class ExplicitRungeKutta(MultibodyIntegrator):
    """Common part: right-hand side, projection, step control, state."""

    model_kinds = ("multibody", "first_order")
    implicit = False
    order = 4          # order of the error estimate's exponent (err ∝ h^(order+1))

    # -- set-up --------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        self.multibody = self.model.kind == "multibody"
        if self.multibody:
            self._ic(t0, y0, **ic_options)
            self._rhs = IndexOneRHS(self.model, self.stats)
            self.n = self.model.n_q
        else:
            self.t = t0
            self.y = y0.copy()
            self.qdd = np.zeros(0)
            self.lam = np.zeros(0)
            self.n = 0
        self.f_cur = None
        self._dense = None
        self.projection_iterations = 0
        f0 = self._derivative_at_current()
        self.h_next = self.h_fixed if self.h_fixed is not None else self._initial_step(f0)

    def _f(self, t, y):
        if self.multibody:
            return self._rhs(t, y, self.u)
        self.stats["residual_evaluations"] += 1
        return np.asarray(self.model.rhs(t, y, self.u), dtype=float)

    def _derivative_at_current(self):
        """f at the current point (FSAL stage when available)."""
        if self.f_cur is None:
            f = self._f(self.t, self.y)
            if not np.all(np.isfinite(f)):
                self._fail("right-hand side is not finite", 0.0, "non-finite derivative")
            self.f_cur = f
            if self.multibody:
                self.qdd = f[self.n:].copy()
                self.lam = self._rhs.lam.copy()
        return self.f_cur

    def _initial_step(self, f0):
        """Hairer-Nørsett-Wanner I, II.4 (as in scipy.integrate)."""
        if self.first_step is not None:
            return min(self.first_step, self.max_step)
        y0 = self.y
        if y0.size == 0:
            return min(1.0, self.max_step)
        scale = error_weights(y0, self.rtol, self.atol)
        with np.errstate(over="ignore"):  # an overflow gives inf, handled below
            d0, d1 = rms_norm(y0, scale), rms_norm(f0, scale)
        h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
        if not h0 >= 1e-300:  # |f| / |y| beyond the float range: no step can be taken (issue 14)
            self._fail(f"the initial derivative is too large for any step (|f| / |y| = {d1:.3g} / "
                       f"{d0:.3g} in tolerance units; parameters out of range?)", h0,
                       "initial step underflows")
        try:
            f1 = self._f(self.t + h0, y0 + h0 * f0)
            d2 = rms_norm(f1 - f0, scale) / h0
        except SingularMatrixError:
            d2 = 0.0
        if not math.isfinite(d2):
            d2 = 0.0
        if d1 <= 1e-15 and d2 <= 1e-15:
            h1 = max(1e-6, h0 * 1e-3)
        else:
            h1 = (0.01 / max(d1, d2)) ** (1.0 / (self.order + 1))
        return min(100 * h0, h1, self.max_step)

    # -- projection ------------------------------------------------------------------
    def _project(self, t, y):
        """Projected copy of y (multibody); identity for first-order models."""
        if not self.multibody:
            return y
        n = self.n
        q, v = y[:n], y[n:]
        wq = error_weights(q, self.rtol, self.atol)
        wv = error_weights(v, self.rtol, self.atol)
        q, v, its = self._rhs.project(t, q, v, wq, wv)
        self.projection_iterations += its
        return np.concatenate([q, v])

    # -- stepping -----------------------------------------------------------------------
    def _attempt(self, t, y, h, f0):
        """One trial step: returns (y_new unprojected, error ratio, data for accept)."""
        raise NotImplementedError

    def _after_projection(self, t_new, y_proj, data):
        """Work at the projected point that may still reject the step."""
        return data

    def _accept(self, t_new, y_proj, y_new, h, data):
        raise NotImplementedError

    def _step(self, t_limit):
        saved = (dict(self.stats), self.projection_iterations)
        try:
            self._step_inner(t_limit)
        except BaseException:
            self.stats.update(saved[0])
            self.projection_iterations = saved[1]
            raise

    def _step_inner(self, t_limit):
        t, y = self.t, self.y
        f0 = self._derivative_at_current()
        fixed = self.h_fixed is not None
        h_prop = self.h_fixed if fixed else self.h_next
        h, lands = self._clamp_step(h_prop, t_limit)
        h_min = 1e-12 * max(1.0, abs(t))
        rejected = False
        rejections = 0
        while True:
            if not lands and not fixed:
                # h := (t + h) − t: t + h exact, so the accepted t is the exact sum
                # of the steps (time rounding drift; GeneralizedAlpha._step_inner;
                # fixed-step mode keeps the user's h)
                h = (t + h) - t
            t_new = t_limit if lands else t + h
            cause = None
            err = 0.0
            try:
                y_new, err, data = self._attempt(t, y, h, f0)
                if not np.all(np.isfinite(y_new)) or not math.isfinite(err):
                    cause = "non-finite solution"
            except SingularMatrixError as exc:
                cause = str(exc)
            if cause is None and err <= 1.0:
                try:
                    y_proj = self._project(t_new, y_new)
                    data = self._after_projection(t_new, y_proj, data)
                except SingularMatrixError as exc:
                    cause = str(exc)
                except (ConvergenceError, ValueError) as exc:
                    cause = f"constraint projection failed: {exc}"
            if cause is None and err <= 1.0:
                break
            if fixed:
                self._fail("explicit step failed", h, cause or f"error ratio {err:.3g}")
            self.stats["rejected"] += 1
            rejections += 1
            if cause is not None:
                factor = 0.5
            else:
                factor = max(MIN_FACTOR, SAFETY * err ** (-1.0 / (self.order + 1)))
            h *= factor
            lands = False
            rejected = True
            if h < h_min or rejections > MAX_REJECTIONS:
                self._fail("step size became too small", h, cause or f"error ratio {err:.3g}")
        # accept
        self.t_prev, self.y_prev = t, y
        self.t, self.y = t_new, y_proj
        self._accept(t_new, y_proj, y_new, h, data)
        self.stats["steps"] += 1
        if fixed:
            self.h_next = self.h_fixed
            return
        if err == 0.0:
            factor = MAX_FACTOR
        else:
            factor = min(MAX_FACTOR, SAFETY * err ** (-1.0 / (self.order + 1)))
        if rejected:
            factor = min(1.0, factor)
        h_new = h * factor
        if lands and h < h_prop and not rejected:
            h_new = max(h_new, h_prop)  # a step cut by the target says nothing new
        self.h_next = min(h_new, self.max_step)

    def _error_ratio(self, y, y_new, err_vec):
        scale = error_weights(np.maximum(np.abs(y), np.abs(y_new)), self.rtol, self.atol)
        return rms_norm(err_vec, scale)

    # -- restart / state ---------------------------------------------------------------
    def _restart(self):
        self.f_cur = None   # inputs or the state changed: no FSAL stage
        self._dense = None

    def _reset_point(self):
        self.f_cur = None
        self._dense = None
        if self.multibody:
            self._derivative_at_current()

    def _method_state(self):
        return {"h_next": float(self.h_next),
                "f_cur": None if self.f_cur is None else self.f_cur.copy(),
                "dense": None if self._dense is None else {k: np.array(v) for k, v in self._dense.items()},
                "projection_iterations": int(self.projection_iterations)}

    def _restore_method_state(self, d):
        self.h_next = float(d["h_next"])
        self.f_cur = None if d["f_cur"] is None else np.array(d["f_cur"], dtype=float)
        self._dense = None if d["dense"] is None else {k: np.array(v, dtype=float)
                                                         for k, v in d["dense"].items()}
        self.projection_iterations = int(d.get("projection_iterations", 0))
        if self.multibody:
            self._rhs.stats = self.stats

    def restore(self, state):
        super().restore(state)
        if self.multibody:
            self._rhs.stats = self.stats


class DormandPrince(ExplicitRungeKutta):
    """Dormand-Prince 5(4) with projection (seed 000 eqs. 88-89), FSAL, dense output.

    The FSAL stage f(ŷ) of the unprojected end point starts the next step, with
    its velocity part replaced by the projected velocity (q' = v exactly); the
    difference in the acceleration part is of the size of the projection
    correction, far below the local error.
    """

    name = "dopri5"
    description = "Dormand-Prince 5(4), index-1 form + constraint projection (seed 000 §6)"
    order = 4

    def _attempt(self, t, y, h, f0):
        K = np.empty((7, y.size))
        K[0] = f0
        for s in range(1, 6):
            dy = DP_A[s] @ K[:s]
            K[s] = self._f(t + DP_C[s] * h, y + h * dy)
        y_new = y + h * (DP_B @ K[:6])
        K[6] = self._f(t + h, y_new)   # FSAL stage; its J factor is reused by the projection
        if self.h_fixed is not None:
            err = 0.0
        else:
            err = self._error_ratio(y, y_new, h * (DP_E @ K))
        return y_new, err, (K, self._rhs.lam.copy() if self.multibody else None)

    def _accept(self, t_new, y_proj, y_new, h, data):
        K, lam = data
        f_new = K[6].copy()
        if self.multibody:
            f_new[:self.n] = y_proj[self.n:]
            self.qdd = K[6][self.n:].copy()
            self.lam = lam
        self.f_cur = f_new
        self._dense = {"Q": K.T @ DP_P, "h": np.array(h), "shift": y_proj - y_new}

    def dense_output(self, t):
        t0, t1 = self.t_prev, self.t
        t = float(t)
        if t1 == t0 or self._dense is None or t == t1:
            return self.y.copy()
        if t == t0:
            return self.y_prev.copy()
        theta = (float(t) - t0) / (t1 - t0)
        d = self._dense
        p = np.array([theta, theta ** 2, theta ** 3, theta ** 4])
        return self.y_prev + float(d["h"]) * (d["Q"] @ p) + theta * d["shift"]


class RK4(ExplicitRungeKutta):
    """Classical Runge-Kutta of order 4 with projection (seed 000 §6).

    Fixed step with ``h=`` (4 evaluations per step, real-time use); without
    ``h`` the error is estimated by step doubling (Richardson: (y_{h/2,h/2} −
    y_h)/15) and the two half steps' result is kept.  Dense output: cubic
    Hermite from y and f at both ends.
    """

    name = "rk4"
    description = "classical Runge-Kutta 4, fixed step or step doubling, + projection (seed 000 §6)"
    order = 4

    def _rk4(self, t, y, h, k1):
        k2 = self._f(t + 0.5 * h, y + 0.5 * h * k1)
        k3 = self._f(t + 0.5 * h, y + 0.5 * h * k2)
        k4 = self._f(t + h, y + h * k3)
        return y + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)

    def _attempt(self, t, y, h, f0):
        if self.h_fixed is not None:
            return self._rk4(t, y, h, f0), 0.0, None
        y_full = self._rk4(t, y, h, f0)
        y_half = self._rk4(t, y, 0.5 * h, f0)
        f_half = self._f(t + 0.5 * h, y_half)
        y_new = self._rk4(t + 0.5 * h, y_half, 0.5 * h, f_half)
        err = self._error_ratio(y, y_new, (y_new - y_full) / 15.0)
        return y_new, err, None

    def _after_projection(self, t_new, y_proj, data):
        f_new = self._f(t_new, y_proj)   # f at the projected point: the next k1
        if not np.all(np.isfinite(f_new)):
            raise ConvergenceError("right-hand side is not finite", t=t_new, cause="non-finite")
        return f_new, (self._rhs.lam.copy() if self.multibody else None)

    def _accept(self, t_new, y_proj, y_new, h, data):
        f_new, lam = data
        self._dense = {"f0": self.f_cur, "f1": f_new, "h": np.array(h)}
        self.f_cur = f_new
        if self.multibody:
            self.qdd = f_new[self.n:].copy()
            self.lam = lam

    def dense_output(self, t):
        return last_step_dense_output(self, t, "f0", "f1")
