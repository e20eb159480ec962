"""The index-1 form of a multibody model, y' = [v; q''] (seed 000 eq. 88) with the
matrix J of eq. 89, and the projection onto the constraints (seed 000 §6), in numpy:
the right-hand side of rkc-penalty (:class:`cosim.integrators.rkc.PenaltyRHS`).
dopri5/rk4 have the same in their kernel (``explicit_kernel._evaluate`` and
``_project``), run compiled or uncompiled; rkc-penalty moves onto that kernel when
it is compiled."""
import numpy as np

from ..errors import ConvergenceError
from .common import EPS, lu_factor, lu_solve
from .explicit_kernel import PROJECTION_MAX_ITER, PROJECTION_TOL


def rms_norm(x, scale):
    if x.size == 0:
        return 0.0
    return float(np.sqrt(np.mean((x / scale) ** 2)))


class IndexOneRHS:
    """y' = [v; q''] of seed 000 eq. 88 for y = [q, v] (numpy; the base of
    :class:`PenaltyRHS`; dopri5/rk4 have it in ``explicit_kernel._evaluate``).

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
