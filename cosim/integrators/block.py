"""L-stable block implicit one-step methods for multibody DAEs (seed 004,
Li, Ding & Li 2019), fixed step.

Seed 004 §2.1 (the OCR lost the formulas; rebuilt from the construction it
describes).  On [t_k, t_k + h] take r nodes 0 < c_1 < … < c_r = 1 and, for the
first-order form y' = f(t, y), the block formula (Shampine & Watts 1972,
seed eq. 5)

    Y = e ⊗ y_k + h (d ⊗ f(y_k)) + h (B ⊗ I) F(Y),     y_{k+1} = Y_r,

with stability function (seed eq. 7)  R(z) = e_rᵀ (I − zB)⁻¹ (e + z d).
B and d come from a Taylor expansion with undetermined constants (seed
eq. 8-9): row i of [d | B] makes the stage exact for y = t^m, m = 1..r, and
gives the (r+1)-th Taylor term the free coefficient μ_i:

    c_i^m / m! = d_i δ_{m1} + Σ_j B_ij c_j^{m−1}/(m−1)!,  m = 1..r,
    μ_i        = Σ_j B_ij c_j^r / r!.

So B = B_0 + μ wᵀ, d = d_0 + w_d μ (a rank-one family), and
det(I − zB) = det(I − zB_0) − z wᵀ adj(I − zB_0) μ is affine in μ.  We choose
μ so that det(I − zB) equals the denominator Q_r of the (k, r) Padé
approximant of e^z (r linear equations for r unknowns).  Since every stage is
exact to degree r, R(z) = e^z + O(z^{r+1}); with the denominator Q_r the
numerator N = R·Q_r is then the truncation of e^z Q_r to degree r, i.e. the
Padé numerator P_k:  R = P_k / Q_r exactly (the seed's "compare with the
Padé approximant to get B, d").  k ∈ {r−2, r−1} gives k < j ≤ k + 2, so the
method is L-stable by Ehle's theorem (seed Theorem 1); the default k follows
the seed's examples: (1, 2) for r = 2, (2, 3) for r = 3, (2, 4) for r = 4, and
k = r − 2 beyond.  Stage order r; the classical order (``classical_order``,
from the rooted-tree conditions) is r + 1 or more, e.g. 3, 4, 6 for equidistant
r = 2, 3, 4 with the default k; ``stability_function``
and ``check_l_stability`` verify |R(iy)| ≤ 1 and R(−∞) = 0 numerically.

Nodes (seed §2.2-2.3): "equidistant" c_i = i/r; "chebyshev" / "legendre":
the r − 1 zeros of the Chebyshev T_{r−1} / Legendre P_{r−1} polynomial mapped to
(0, 1), plus c_r = 1 (the seed requires c_r = t_{k+1}; which zeros its lost
eq. 12 used cannot be recovered, this is our choice).

DAE forms (seed eqs. 1-3), stage unknowns A_i = q''(t_k + c_i h) and Λ_i:

    V_i = v_k + h d_i a_k + h Σ_j B_ij A_j,
    Q_i = q_k + h c_i v_k + h² (B d)_i a_k + h² Σ_j (B²)_ij A_j,
    M(Q_i) A_i + C_q(Q_i)ᵀ Λ_i = Q(Q_i, V_i, t_i),
    index 3: C(Q_i) = 0;  index 2: C_q V_i + C_t = 0;  index 1: C_q A_i = γ(Q_i, V_i),

solved with the quasi-Newton iteration of seed 000 Algorithm 2 (Jacobian at
the step start, reused across steps by the reuse test).  a_{k+1} = A_r,
λ_{k+1} = Λ_r.
"""
import math
import warnings

import numpy as np

from ..errors import InvalidInputError, SingularMatrixError
from .base import MultibodyIntegrator
from .common import (EPS, constraint_force_jacobian, error_weights, fd_jacobian, force_jacobians,
                     mass_term_jacobian, weighted_rms_norm)
from .newton import QuasiNewton

NODE_FAMILIES = ("equidistant", "chebyshev", "legendre")
DEFAULT_H = 1e-2


# -- construction ----------------------------------------------------------------------
def block_nodes(r, family):
    """Nodes 0 < c_1 < … < c_r = 1 of an r-node block (see module docstring)."""
    if family == "equidistant":
        return np.arange(1, r + 1) / r
    if family == "chebyshev":
        k = np.arange(1, r)
        x = np.cos((2 * k - 1) * np.pi / (2 * (r - 1)))
    elif family == "legendre":
        x = np.polynomial.legendre.leggauss(r - 1)[0]
    else:
        raise InvalidInputError(f"nodes must be one of {', '.join(NODE_FAMILIES)}, got {family!r}")
    return np.concatenate([np.sort(0.5 * (1.0 + x)), [1.0]])


def pade_coefficients(k, j):
    """Ascending coefficients (P, Q) of the (k, j) Padé approximant of e^z."""
    f = math.factorial
    P = np.array([f(k + j - i) * f(k) / (f(k + j) * f(i) * f(k - i)) for i in range(k + 1)])
    Q = np.array([(-1) ** i * f(k + j - i) * f(j) / (f(k + j) * f(i) * f(j - i)) for i in range(j + 1)])
    return P, Q


def default_pade_k(r):
    """Numerator degree matching the seed's examples ((2,3) for r = 3, (2,4) for r = 4)."""
    return r - 1 if r <= 3 else r - 2


def _det_coefficients(B):
    """Ascending coefficients of det(I − zB)."""
    return np.poly(B)  # det(xI − B) = x^r + p1 x^{r−1} + …  ⇒  det(I − zB) = 1 + p1 z + … + p_r z^r


def block_coefficients(c, k):
    """(B, d) of the r-node block whose stability function is the (k, r) Padé approximant."""
    c = np.asarray(c, dtype=float)
    r = c.size
    f = math.factorial
    # G [d_i, B_i1..B_ir]ᵀ = [c_i/1!, …, c_i^r/r!, μ_i]ᵀ  (seed eq. 8-9)
    G = np.zeros((r + 1, r + 1))
    G[0, 0] = 1.0
    for m in range(1, r + 2):
        G[m - 1, 1:] = c ** (m - 1) / f(m - 1)
    rhs0 = np.zeros((r + 1, r))
    for m in range(1, r + 1):
        rhs0[m - 1] = c ** m / f(m)
    X0 = np.linalg.solve(G, rhs0)          # columns: rows i of [d | B] with μ = 0
    w = np.linalg.solve(G, np.eye(r + 1)[:, r])
    d0, B0 = X0[0], X0[1:].T
    wd, wB = w[0], w[1:]
    D0 = _det_coefficients(B0)
    E = np.empty((r + 1, r))
    for i in range(r):
        E[:, i] = _det_coefficients(B0 + np.outer(np.eye(r)[i], wB)) - D0
    _, Q = pade_coefficients(k, r)
    mu = np.linalg.solve(E[1:], Q[1:] - D0[1:])
    B = B0 + np.outer(mu, wB)
    d = d0 + wd * mu
    return B, d


def stability_function(B, d, z):
    """R(z) = e_rᵀ (I − zB)⁻¹ (e + z d) (seed eq. 7), vectorised over z."""
    r = B.shape[0]
    z = np.atleast_1d(np.asarray(z, dtype=complex))
    out = np.empty(z.shape, dtype=complex)
    e = np.ones(r)
    for n, zz in enumerate(z):
        out[n] = np.linalg.solve(np.eye(r) - zz * B, e + zz * d)[-1]
    return out


def check_l_stability(B, d, y_max=1e4, n=4001):
    """(max |R(iy)| on the imaginary axis, |R(−10⁶)|)."""
    y = np.concatenate([np.linspace(0.0, 50.0, n), np.geomspace(50.0, y_max, n)])
    Rim = np.abs(stability_function(B, d, 1j * y))
    return float(Rim.max()), float(abs(stability_function(B, d, -1e6)[0]))


def _rooted_trees(max_order):
    """Rooted trees up to ``max_order`` as nested sorted tuples of children."""
    by_order = {1: [()]}
    for n in range(2, max_order + 1):
        found = set()

        def children(remaining, min_key, acc):
            if remaining == 0:
                found.add(tuple(sorted(acc)))
                return
            for k in range(1, remaining + 1):
                for t in by_order[k]:
                    key = (k, t)
                    if min_key is None or key >= min_key:
                        children(remaining - k, key, acc + [t])

        children(n - 1, None, [])
        by_order[n] = sorted(found)
    return by_order


def classical_order(B, d, max_order=8):
    """Classical order of the block method, seen as the (r+1)-stage Runge-Kutta
    method c = (0, c), A = [[0, 0], [d, B]], b = (d_r, B_r), from the rooted-tree
    order conditions bᵀΦ(t) = 1/γ(t) (checked to 1e-10)."""
    r = B.shape[0]
    A = np.zeros((r + 1, r + 1))
    A[1:, 0] = d
    A[1:, 1:] = B
    b = A[-1]
    trees = _rooted_trees(max_order)
    cache = {}

    def phi_gamma(t):
        if t not in cache:
            phi, gam, size = np.ones(r + 1), 1.0, 1
            for child in t:
                p, g, sz = phi_gamma(child)
                phi = phi * (A @ p)
                gam *= g
                size += sz
            cache[t] = (phi, gam * size, size)
        return cache[t]

    for n in range(1, max_order + 1):
        for t in trees[n]:
            phi, gam, _ = phi_gamma(t)
            if abs(b @ phi - 1.0 / gam) > 1e-10:
                return n - 1
    return max_order


class LStableBlock(MultibodyIntegrator):
    """r-node L-stable block method (seed 004) for index-1/2/3 multibody DAEs, fixed step.

    Options: ``nodes`` ("equidistant" | "chebyshev" | "legendre"), ``r`` ≥ 2,
    ``index`` (1 | 2 | 3), ``pade_k`` (numerator degree, r−2 or r−1; default
    as in the seed's examples), ``newton_tol`` (stage solve: the velocity
    change h·ΔA of the last update must be below newton_tol·(1 + |v|); index 3
    adds the round-off floor 1e2·eps·(1 + |q|)/h), ``error_estimate``
    (compute ``self.error_estimate`` each step: weighted RMS of y_{k+1} minus a quadrature of order r on the nodes
    0, c_1..c_{r−1}).  Fixed step: pass ``h`` (else ``first_step`` or 0.01).
    """

    name = "block-lstable"
    supports_nonholonomic = False  # seed 004 covers holonomic constraints only
    description = "L-stable block implicit one-step method, Padé (k, r), index 1/2/3 (seed 004)"
    options = {"nodes": "equidistant", "r": 4, "index": 3, "pade_k": None, "newton_tol": 1e-14,
               "error_estimate": False}

    def check_options(self):
        o = self.opts
        r = o["r"]
        try:
            r_int = int(r)
            ok = float(r) == r_int and not isinstance(r, bool)
        except (TypeError, ValueError):
            ok = False
        if not ok or r_int < 2:
            raise InvalidInputError(f"r (number of block nodes) must be an integer >= 2, got {r!r}")
        if r_int > 8:
            raise InvalidInputError(f"r must be <= 8 (coefficients become ill-conditioned), got {r!r}")
        nodes = o["nodes"]
        if nodes not in NODE_FAMILIES:
            raise InvalidInputError(f"nodes must be one of {', '.join(NODE_FAMILIES)}, got {nodes!r}")
        index = o["index"]
        try:
            index_ok = int(index) in (1, 2, 3) and float(index) == int(index) and not isinstance(index, bool)
        except (TypeError, ValueError):
            index_ok = False
        if not index_ok:
            raise InvalidInputError(f"index must be 1, 2 or 3, got {index!r}")
        k = default_pade_k(r_int) if o["pade_k"] is None else o["pade_k"]
        if not (isinstance(k, (int, np.integer)) and not isinstance(k, bool) and r_int - 2 <= k <= r_int - 1
                and k >= 0):
            raise InvalidInputError(
                f"pade_k must be r-2 or r-1 (L-stable (k, r) Padé, k < r <= k+2), got {o['pade_k']!r}")
        tol = o["newton_tol"]
        try:
            tol = float(tol)
        except (TypeError, ValueError):
            tol = float("nan")
        if not (math.isfinite(tol) and 0.0 < tol < 1.0):
            raise InvalidInputError(f"newton_tol must be in (0, 1), got {o['newton_tol']!r}")
        o.update(r=r_int, index=int(index), pade_k=int(k), newton_tol=tol,
                 error_estimate=o["error_estimate"])
        self.r, self.index, self.pade_k = r_int, int(index), int(k)
        self.c = block_nodes(r_int, nodes)
        self.B, self.d = block_coefficients(self.c, self.pade_k)
        self.order = classical_order(self.B, self.d)
        self.B2 = self.B @ self.B
        self.Bd = self.B @ self.d
        # quadrature weights on nodes (0, c_1..c_{r-1}) for the optional error estimate
        nodes_hat = np.concatenate([[0.0], self.c[:-1]])
        V = np.vander(nodes_hat, r_int, increasing=True).T
        self.b_hat = np.linalg.solve(V, 1.0 / np.arange(1, r_int + 1))
        self.h = self.h_fixed if self.h_fixed is not None else (self.first_step or DEFAULT_H)
        if self.h_fixed is None:
            warnings.warn(f"{self.name} is a fixed-step method without error control: no h given, "
                          f"using h={self.h!r} (rtol/atol only weight the optional error estimate)", stacklevel=3)

    # -- set-up ------------------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        self._ic(t0, y0, **ic_options)
        self.newton = QuasiNewton(self.stats, max_iter=25, tol=1.0, err_tol=1.0, what="block iteration matrix")
        self.h_last = None
        self.error_estimate = 0.0
        self.stage_q = np.tile(self.q, (self.r, 1))
        self.stage_v = np.tile(self.v, (self.r, 1))
        self.stage_t0 = self.t

    # -- residual and iteration matrix ----------------------------------------------------------
    def _stages(self, z, q0, v0, a0, h):
        n, r = self.model.n_q, self.r
        A = z[:r * n].reshape(r, n)
        V = v0 + h * self.d[:, None] * a0 + h * (self.B @ A)
        Q = q0 + h * self.c[:, None] * v0 + h * h * self.Bd[:, None] * a0 + h * h * (self.B2 @ A)
        return A, V, Q

    def _residual(self, z, q0, v0, a0, t0, h):
        model, u = self.model, self.u
        n, m, r = model.n_q, model.n_c, self.r
        A, V, Q = self._stages(z, q0, v0, a0, h)
        L = z[r * n:].reshape(r, m)
        res_d = np.empty((r, n))
        res_c = np.empty((r, m))
        for i in range(r):
            ti = t0 + self.c[i] * h
            Cq = model.constraint_jacobian(Q[i], ti)
            res_d[i] = model.mass(Q[i], ti) @ A[i] + Cq.T @ L[i] - model.forces(Q[i], V[i], ti, u)
            if self.index == 3:
                res_c[i] = model.constraints(Q[i], ti) / (h * h)
            elif self.index == 2:
                res_c[i] = (Cq @ V[i] + model.constraint_dt(Q[i], ti)) / h
            else:
                res_c[i] = Cq @ A[i] - model.gamma(Q[i], V[i], ti)
        return np.concatenate([res_d.ravel(), res_c.ravel()])

    def _iteration_matrix(self, q0, v0, a0, lam0, t0, h):
        model = self.model
        n, m, r = model.n_q, model.n_c, self.r
        M = model.mass(q0, t0)
        Cq = model.constraint_jacobian(q0, t0)
        Fq, Fv = force_jacobians(model, q0, v0, t0, self.u)
        Kq = constraint_force_jacobian(model, q0, lam0, t0) - Fq
        Mq = mass_term_jacobian(model, q0, a0, t0)
        if Mq is not None:
            Kq = Kq + Mq
        Kv = -Fv
        J = np.zeros((r * (n + m), r * (n + m)))
        J[:r * n, :r * n] = (np.kron(np.eye(r), M) + h * h * np.kron(self.B2, Kq)
                             + h * np.kron(self.B, Kv))
        J[:r * n, r * n:] = np.kron(np.eye(r), Cq.T)
        if self.index == 3:
            J[r * n:, :r * n] = np.kron(self.B2, Cq)
        elif self.index == 2:
            # (C_q V + C_t)/h:  C_q B + h B² (C_q v)_q
            Hq = fd_jacobian(lambda qq: model.constraint_jacobian(qq, t0) @ v0
                             + model.constraint_dt(qq, t0), q0)
            J[r * n:, :r * n] = np.kron(self.B, Cq) + h * np.kron(self.B2, Hq)
        else:
            # C_q A − γ:  C_q + h² B² ((C_q a)_q − γ_q) − h B γ_v
            Gq = fd_jacobian(lambda qq: model.constraint_jacobian(qq, t0) @ a0 - model.gamma(qq, v0, t0), q0)
            Gv = fd_jacobian(lambda vv: -model.gamma(q0, vv, t0), v0)
            J[r * n:, :r * n] = (np.kron(np.eye(r), Cq) + h * h * np.kron(self.B2, Gq)
                                 + h * np.kron(self.B, Gv))
        return J

    # -- one step --------------------------------------------------------------------------------
    def _step(self, t_limit):
        h, _ = self._clamp_step(self.h, t_limit)
        model = self.model
        n, r = model.n_q, self.r
        t0 = self.t
        q0, v0 = self.y[:n].copy(), self.y[n:].copy()
        a0, lam0 = self.qdd.copy(), self.lam.copy()
        z0 = np.concatenate([np.tile(a0, r), np.tile(lam0, r)])
        # Convergence is judged on the velocity change the update causes over the
        # step: h·ΔA for the accelerations and h·ΔΛ/m for the multipliers (m: the
        # largest mass entry), relative to 1 + |v|.  The index-3 multipliers carry
        # an O(eps/h²) round-off floor that a test on Λ itself would never pass.
        v_scale = self.opts["newton_tol"] * (1.0 + float(np.max(np.abs(v0))))
        if self.index == 3:  # round-off floor of C(Q)/h² seen as a velocity change
            v_scale = max(v_scale, 1e2 * EPS * (1.0 + float(np.max(np.abs(q0)))) / h)
        m_scale = float(np.max(np.abs(np.diag(model.mass(q0, t0)))))
        w = np.concatenate([np.full(r * n, v_scale / h), np.full(r * model.n_c, v_scale * m_scale / h)])

        def residual(delta):
            return self._residual(z0 + delta, q0, v0, a0, t0, h)

        def jacobian(delta):
            return self._iteration_matrix(q0, v0, a0, lam0, t0, h)

        def norm(dd):
            return float(np.max(np.abs(dd) / w))

        newton = self.newton
        newton.plan_reuse(h, self.h_last if self.h_last is not None else h)
        saved = newton.snapshot()
        result = newton.solve(residual, jacobian, z0.size, norm, h=h, t=t0)
        if not result.converged:
            newton.invalidate()
            result = newton.solve(residual, jacobian, z0.size, norm, h=h, t=t0)
        if not result.converged:
            # last resort: the full Jacobian of the stage residual by differences
            newton.invalidate()
            analytic = result
            try:
                result = newton.solve(residual, lambda delta: fd_jacobian(residual, delta), z0.size,
                                      norm, h=h, t=t0)
            except SingularMatrixError:
                # index 3 at a small h: C(Q)/h² does not resolve the difference step, so the
                # difference Jacobian is singular; the failure to report is the analytic one
                result = analytic
            newton.invalidate()  # do not keep the difference Jacobian for the next step
        if not result.converged:
            newton.rollback(saved)
            hint = ("; index 3 stalls at its round-off floor (eps·cond/h²) on stiff models such as "
                    "andrews: index=2 or index=1, or another h" if self.index == 3 else "")
            self._fail(f"block stage equations did not converge{hint}", h, result.reason)
        z = z0 + result.delta
        A, V, Q = self._stages(z, q0, v0, a0, h)
        lam1 = z[r * n:].reshape(r, model.n_c)[-1].copy()
        y1 = np.concatenate([Q[-1], V[-1]])
        if self.opts["error_estimate"]:
            vq = np.vstack([v0, V[:-1]])
            va = np.vstack([a0, A[:-1]])
            y_hat = np.concatenate([q0 + h * (self.b_hat @ vq), v0 + h * (self.b_hat @ va)])
            self.error_estimate = weighted_rms_norm(y1 - y_hat, error_weights(y1, self.rtol, self.atol))
        self.t_prev, self.y_prev = t0, self.y.copy()
        self.stage_q, self.stage_v, self.stage_t0 = Q.copy(), V.copy(), t0
        self.t = t0 + h
        self.y = y1
        self.qdd, self.lam = A[-1].copy(), lam1
        self.h_last = h
        self.stats["steps"] += 1

    # -- dense output: the degree-r polynomial through (0, y_k), (c_i, Y_i) ---------------------
    def dense_output(self, t):
        n = self.model.n_q
        h = self.t - self.t_prev
        if h == 0.0 or self.stage_t0 != self.t_prev:
            return self.y.copy()
        th = (float(t) - self.t_prev) / h
        nodes = np.concatenate([[0.0], self.c])
        ell = np.ones(nodes.size)
        for j in range(nodes.size):
            for k in range(nodes.size):
                if k != j:
                    ell[j] *= (th - nodes[k]) / (nodes[j] - nodes[k])
        qs = np.vstack([self.y_prev[:n], self.stage_q])
        vs = np.vstack([self.y_prev[n:], self.stage_v])
        return np.concatenate([ell @ qs, ell @ vs])

    # -- state -------------------------------------------------------------------------------------
    def _restart(self):
        self.stage_t0 = None

    def _method_state(self):
        return {"h": float(self.h), "h_last": -1.0 if self.h_last is None else float(self.h_last),
                "stage_q": self.stage_q.copy(), "stage_v": self.stage_v.copy(),
                "stage_t0": self.stage_t0, "error_estimate": float(self.error_estimate),
                "newton": self.newton.state()}

    def _restore_method_state(self, d):
        self.h = float(d["h"])
        self.h_last = None if d["h_last"] < 0 else float(d["h_last"])
        self.stage_q = np.array(d["stage_q"], dtype=float)
        self.stage_v = np.array(d["stage_v"], dtype=float)
        self.stage_t0 = d["stage_t0"]
        self.error_estimate = float(d["error_estimate"])
        self.newton.restore(d["newton"])
        self.newton.stats = self.stats  # base restore() rebinds the statistics dict
