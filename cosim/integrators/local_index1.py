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

solved by the quasi-Newton iteration of seed 000 Algorithm 2
(:class:`~cosim.integrators.newton.QuasiNewton`).  Option ``iteration``:

* "seed" (default): the iteration matrix of eq. 4.5,
  [[VᵀM, 0], [0, VᵀM], [C_q, 0], [(C_q q')_q, C_q]] — the differential rows
  are iterated directly (the h/2·∂g term is dropped, eqs. 3.8, 4.6-4.7);
* "newton": the full Jacobian including −h/2·A_kᵀ ∂g/∂x (finite differences).

Predictor: Heun's explicit step.  In adaptive mode its difference to the
trapezoidal result estimates the local error, (x_trap − x_Heun)/3 (both are
2nd order; for y' = λy the trapezoidal error is z³/12 and the difference
z³/4).  Dense output: cubic Hermite from x and g at both ends.
"""

import numpy as np
import scipy.linalg as sla

from ..errors import InvalidInputError, SingularMatrixError
from .base import MultibodyIntegrator
from .common import (consistent_accelerations, error_weights, fd_jacobian, initial_step,
                     last_step_dense_output)
from .newton import QuasiNewton

SAFETY = 0.9
MIN_FACTOR = 0.2
MAX_FACTOR = 5.0
MAX_REJECTIONS = 60


def nullspace_qr(Cq):
    """Orthonormal basis V of null(C_q) from the full QR of C_qᵀ (seed 002 §5.1)."""
    m = Cq.shape[0]
    Qf, R = sla.qr(Cq.T, check_finite=False)
    d = np.abs(np.diag(R)) if m else np.zeros(0)
    if m and d.min() <= 1e-12 * max(d.max(), 1e-300):
        raise SingularMatrixError("C_q is rank deficient (QR null-space basis)", cause="rank")
    return Qf[:, m:]


def nullspace_gauss(Cq):
    """Basis V = Π [−W; I] of null(C_q) by Gauss-Jordan elimination with complete
    pivoting, P C_q Π → [I, W] (seed 002 §5.2)."""
    A = np.array(Cq, dtype=float)
    m, n = A.shape
    cols = np.arange(n)
    scale = float(np.max(np.abs(A))) if A.size else 1.0
    for k in range(m):
        sub = np.abs(A[k:, k:])
        i, j = np.unravel_index(int(np.argmax(sub)), sub.shape)
        i += k
        j += k
        if sub[i - k, j - k] <= 1e-12 * scale:
            raise SingularMatrixError("C_q is rank deficient (Gauss null-space basis)", cause="rank")
        if i != k:
            A[[k, i]] = A[[i, k]]
        if j != k:
            A[:, [k, j]] = A[:, [j, k]]
            cols[[k, j]] = cols[[j, k]]
        A[k] /= A[k, k]
        col = A[:, k].copy()
        col[k] = 0.0
        A -= np.outer(col, A[k])
    V = np.zeros((n, n - m))
    V[cols[:m]] = -A[:, m:]
    V[cols[m:]] = np.eye(n - m)
    return V


NULLSPACE = {"qr": nullspace_qr, "gauss": nullspace_gauss}


class LocalEquivalentIndex1(MultibodyIntegrator):
    """Seed 002: locally equivalent square index-1 system + trapezoidal rule.

    Fixed step with ``h=`` (the seed's use, h = 1e-3) or adaptive with the
    Heun-difference error estimate.  Options: ``nullspace`` ("qr" | "gauss"),
    ``iteration`` ("seed" | "newton").
    """

    name = "local-index1"
    description = "local equivalent index-1 system + trapezoidal rule (seed 002)"
    options = {"nullspace": "qr", "iteration": "seed"}

    def check_options(self):
        ns = self.opts["nullspace"]
        if ns not in NULLSPACE:
            raise InvalidInputError(f"nullspace must be 'qr' or 'gauss', got {ns!r}")
        it = self.opts["iteration"]
        if it not in ("seed", "newton"):
            raise InvalidInputError(f"iteration must be 'seed' or 'newton', got {it!r}")

    def _initialize(self, t0, y0, **ic_options):
        self._ic(t0, y0, **ic_options)
        self.newton = QuasiNewton(self.stats, what="local index-1 iteration matrix (seed 002 eq. 4.5)")
        self._dense = None
        self.h_next = self.h_fixed if self.h_fixed is not None else self._initial_step()

    def _initial_step(self):
        if self.first_step is not None:
            return min(self.first_step, self.max_step)
        # trapezoidal error ≈ h³‖x'''‖/12; without x''' use h²‖q''‖ ≈ tolerance
        w = error_weights(self.y, self.rtol, self.atol)
        g = np.concatenate([self.v, self.qdd])
        d = float(np.max(np.abs(g) / w)) if g.size else 0.0
        return initial_step(d, 0.005, self.max_step, h_min=1e-8)

    # -- pieces ------------------------------------------------------------------------
    def _g(self, t, q, v):
        """ψ(q, q') and λ, seed 002 eq. 2.5 (= seed 000 eq. 10)."""
        self.stats["residual_evaluations"] += 1
        self.stats["lu_factorizations"] += 1
        return consistent_accelerations(self.model, t, q, v, self.u)

    def _f(self, q, v, t):
        """f(x) of eq. 2.7 (plus nonholonomic rows B v + b, seed 000 eq. 93)."""
        model = self.model
        parts = [model.constraints(q, t),
                 model.constraint_jacobian(q, t) @ v + model.constraint_dt(q, t)]
        if self._n_g:
            parts.append(model.nonholonomic_matrix(q, t) @ v + model.nonholonomic_offset(q, t))
        return np.concatenate(parts)

    @property
    def _n_g(self):
        return len(getattr(self.model, "nonholonomic_names", ()))

    def _attempt(self, h, t1):
        model, n = self.model, self.model.n_q
        t0 = self.t
        qk, vk, ak = self.q, self.v, self.qdd
        basis = NULLSPACE[self.opts["nullspace"]]
        Mk = model.mass(qk, t0)
        Cqk = model.constraint_jacobian(qk, t0)
        Aq = basis(Cqk).T @ Mk                 # eq. 4.4: A_kᵀ = diag(VᵀM, VᵀM) at x_k
        if self._n_g:                          # velocity rows: V ⊥ [C_q; B]
            Av = basis(np.vstack([Cqk, model.nonholonomic_matrix(qk, t0)])).T @ Mk
        else:
            Av = Aq
        pq, pv = Aq.shape[0], Av.shape[0]
        # Heun predictor
        qe, ve = qk + h * vk, vk + h * ak
        ae, _ = self._g(t1, qe, ve)
        q_pred = qk + 0.5 * h * (vk + ve)
        v_pred = vk + 0.5 * h * (ak + ae)
        x_pred = np.concatenate([q_pred, v_pred])

        def unpack(delta):
            return q_pred + delta[:n], v_pred + delta[n:]

        def residual(delta):                   # eq. 3.7
            q, v = unpack(delta)
            a, _ = self._g(t1, q, v)
            return np.concatenate([Aq @ (q - qk - 0.5 * h * (v + vk)),
                                   Av @ (v - vk - 0.5 * h * (a + ak)),
                                   self._f(q, v, t1)])

        def jacobian(delta):                   # eq. 4.5 (or the full Newton matrix)
            q, v = unpack(delta)
            Cq = model.constraint_jacobian(q, t1)
            m = Cq.shape[0]
            J = np.zeros((2 * n, 2 * n))
            r = pq + pv
            D = fd_jacobian(lambda qq: model.constraint_jacobian(qq, t1) @ v
                            + model.constraint_dt(qq, t1), q)
            J[r:r + m, :n] = Cq
            J[r + m:r + 2 * m, :n] = D
            J[r + m:r + 2 * m, n:] = Cq
            if self._n_g:
                J[r + 2 * m:, :n] = fd_jacobian(lambda qq: model.nonholonomic_matrix(qq, t1) @ v
                                                + model.nonholonomic_offset(qq, t1), q)
                J[r + 2 * m:, n:] = model.nonholonomic_matrix(q, t1)
            if self.opts["iteration"] == "seed":
                J[:pq, :n] = Aq
                J[pq:r, n:] = Av
            else:
                a_q = fd_jacobian(lambda qq: self._g(t1, qq, v)[0], q)
                a_v = fd_jacobian(lambda vv: self._g(t1, q, vv)[0], v)
                J[:pq, :n] = Aq
                J[:pq, n:] = -0.5 * h * Aq
                J[pq:r, :n] = -0.5 * h * (Av @ a_q)
                J[pq:r, n:] = Av - 0.5 * h * (Av @ a_v)
            return J

        w = error_weights(x_pred, self.rtol, self.atol)

        def norm(dd):
            return float(np.max(np.abs(dd) / w))

        self.newton.invalidate()               # A_k changes every step
        res = self.newton.solve(residual, jacobian, 2 * n, norm, h=h, t=t0)
        if not res.converged:
            return None, res.reason
        q1, v1 = unpack(res.delta)
        a1, lam1 = self._g(t1, q1, v1)
        err = 0.0
        if self.h_fixed is None:
            est = (np.concatenate([q1, v1]) - x_pred) / 3.0
            scale = error_weights(np.maximum(np.abs(self.y), np.abs(x_pred)), self.rtol, self.atol)
            err = float(np.sqrt(np.mean((est / scale) ** 2)))
        return (q1, v1, a1, lam1, err), None

    # -- step ----------------------------------------------------------------------------
    def _step(self, t_limit):
        nt = self.newton
        saved, h_next = nt.snapshot(), self.h_next
        try:
            self._step_inner(t_limit)
        except BaseException:
            nt.rollback(saved)
            self.h_next = h_next
            raise

    def _step_inner(self, t_limit):
        fixed = self.h_fixed is not None
        h_prop = self.h_next
        h, lands = self._clamp_step(h_prop, t_limit)
        h_min = 1e-12 * max(1.0, abs(self.t))
        rejections = 0
        rejected = False
        while True:
            t1 = t_limit if lands else self.t + h
            try:
                out, reason = self._attempt(h, t1)
            except SingularMatrixError as exc:
                out, reason = None, str(exc)
            if out is not None and out[4] <= 1.0:
                break
            if fixed:
                self._fail("trapezoidal step failed", h, reason or "error test")
            self.stats["rejected"] += 1
            rejections += 1
            if out is None:
                factor = 0.5
            else:
                factor = max(MIN_FACTOR, SAFETY * out[4] ** (-1.0 / 3.0))
            h *= factor
            lands = False
            rejected = True
            if h < h_min or rejections > MAX_REJECTIONS:
                self._fail("step size became too small", h, reason or f"error ratio {out[4]:.3g}")
        q1, v1, a1, lam1, err = out
        self.t_prev, self.y_prev = self.t, self.y
        self._dense = {"g0": np.concatenate([self.v, self.qdd]), "g1": np.concatenate([v1, a1])}
        self.t = t1
        self.y = np.concatenate([q1, v1])
        self.qdd, self.lam = a1, lam1
        self.stats["steps"] += 1
        if fixed:
            self.h_next = self.h_fixed
            return
        factor = MAX_FACTOR if err == 0.0 else min(MAX_FACTOR, SAFETY * err ** (-1.0 / 3.0))
        if rejected:
            factor = min(factor, 1.0)
        h_new = h * factor
        if lands and h < h_prop and not rejected:
            h_new = max(h_new, h_prop)
        self.h_next = min(h_new, self.max_step)

    # -- dense output / state ---------------------------------------------------------------
    def dense_output(self, t):
        return last_step_dense_output(self, t, "g0", "g1")

    def _restart(self):
        q, v = self.model.split(self.y)
        self.qdd, self.lam = consistent_accelerations(self.model, self.t, q, v, self.u)
        self._dense = None

    def _method_state(self):
        return {"h_next": float(self.h_next),
                "dense": None if self._dense is None else {k: np.array(v) for k, v in self._dense.items()},
                "newton": self.newton.state()}

    def _restore_method_state(self, d):
        self.h_next = float(d["h_next"])
        self._dense = None if d["dense"] is None else {k: np.array(v, dtype=float)
                                                         for k, v in d["dense"].items()}
        self.newton.stats = self.stats
        self.newton.restore(d["newton"])
