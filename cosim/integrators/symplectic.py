"""Parameter-preadjusted symplectic integration of constrained mechanical
systems (seed 003, Wu & Xu 2024), fixed step.

Modified mass matrix (seed 003 eqs. 7-10)

    M_γ(q) = M(q) + γ (I − S),   p = M_γ q',   T_γ = ½ q'ᵀ M_γ q',

where S is the orthogonal projector onto the null space of the constraint
Jacobian A = C_q.  On the constraint manifold (A q' = 0) the extra term has
zero kinetic energy, so the exact motion does not depend on γ, but the
discretisation error does: a suitable γ cancels part of the phase error.
For planar bodies in natural coordinates (a model with ``natural_chain()``
returning (i_prev, i_next, l_i, J_i) per body, or the library's
``double_pendulum_natural``) the body-wise form of seed 003 eqs. 22-25 is used:

    M_γ = Σ_i M̄_Gi + M̄_Ri + γ D_i1ᵀ (I − S_1,i) D_i1,   S_1,i = ṽ_i ṽ_iᵀ, ṽ_i = D_i2 x_i,

assembled on q (γ = 0 is the seed's original, configuration-dependent M).
Because such a model's ``mass`` is the γ_i = J_i member of the family, we
form M_γ = M_model + Σ_i (γ − J_i) D_i1ᵀ(I − ṽ_iṽ_iᵀ)D_i1 with the analytic
gradient ∂(½ u̇ᵀ(I − ṽṽᵀ)u̇)/∂x = −(ṽ·u̇) D_i2ᵀ u̇.  For other models
I − S is the orthogonal projector onto the row space of A,
I − S = Aᵀ(AAᵀ)⁻¹A (eq. 7), with gradient formed from (C_qᵀ w)_q.

Discretisation (option ``scheme``), written for H = T_γ + V with the stage
velocities V_i = H_p(Q_i, P_i) as unknowns and
f(q, v) = ∂T_γ/∂q + Q(q, v) (seed 003 eq. 9):

* "gauss-lobatto" (default, the seed's method, Jay 2007): s Gauss stages for
  the dynamics and s + 1 Lobatto stages for the constraints,

      M_γ(Q_i) V_i = p_n + h Σ_j a_ij f(Q_j, V_j) − h Σ_j ã_ij C_q(Q̃_j)ᵀ Λ_j,   i = 1..s
      Q_i = q_n + h Σ_j a_ij V_j,   Q̃_j = q_n + h Σ_i â_ji V_i,   0 = C(Q̃_j), j = 2..s+1
      q_{n+1} = Q̃_{s+1},  p_{n+1} = p_n + h Σ b_i f_i − h Σ_j b̃_j C_q(Q̃_j)ᵀ Λ_j,
      C_q(q_{n+1}) v_{n+1} + C_t = 0,

  (a, b) Gauss, (c̃, b̃) Lobatto, â_ji = ∫_0^{c̃_j} ℓ_i, ã_ij = b̃_j (1 − â_ji/b_i)
  (b_i ã_ij + b̃_j â_ji = b_i b̃_j: symplectic; it is what the discrete
  variational principle with Gauss quadrature of L and Lobatto quadrature of
  λᵀC gives).  Order 2s.  With it our E|δx|, E|δy|, E|δH| reproduce seed 003
  Table 1 to the printed digits (benchmarks/seed003.py).
* "lobatto": the Lobatto IIIA-IIIB partitioned Runge-Kutta method (Jay 1996;
  Hairer, Lubich & Wanner, GNI §VII.1.4) with s + 1 Lobatto stages, order 2s;
  for s = 1 it is RATTLE (generalised to a configuration-dependent mass).

Both are symplectic and keep C = 0 and C_q q' + C_t = 0 at every step end (the
last constraint impulse comes from a linear solve with [[M_γ, C_qᵀ], [C_q, 0]]).

Choice of γ: ``gamma`` = a number, "0", "T" (γ_T of seed 003 eqs. 31-32, from
the model's ``gamma_T()``), or "opt": the a-posteriori optimum of
seed 003 eq. 11, γ_opt = (γ1 δW2 − γ2 δW1)/(δW2 − δW1) with γ1 = 0, γ2 = γ_T,
δW = E[δx] + E[δy] (eqs. 38-39) from a short run (``opt_steps`` steps of
``opt_h``) against a reference at ``opt_h``/100.
"""
import math
import warnings

import numpy as np

from ..errors import ConvergenceError, InvalidInputError
from .base import MultibodyIntegrator
from .common import EPS, augmented_matrix, consistent_accelerations, fd_jacobian, lu_factor, lu_solve
from .newton import QuasiNewton

DEFAULT_H = 1e-2


# -- Lobatto tableaux ------------------------------------------------------------
def lobatto_nodes(n_points):
    """Gauss-Lobatto points on [0, 1] (zeros of (1 − x²) P'_{N−1}(x) mapped)."""
    N = n_points - 1
    inner = np.polynomial.legendre.Legendre.basis(N).deriv().roots() if N >= 2 else np.zeros(0)
    x = np.concatenate([[-1.0], np.sort(inner.real), [1.0]])
    return 0.5 * (x + 1.0)


def lobatto_iiia_iiib(n_points):
    """(c, a, â, b): Lobatto IIIA (collocation) and IIIB (â_ij = b_j (1 − a_ji/b_i))."""
    c = lobatto_nodes(n_points)
    S = c.size
    V = np.vander(c, S, increasing=True)            # V[i, k] = c_i^k
    # Lagrange basis coefficients: ℓ_j(t) = Σ_k L[k, j] t^k
    L = np.linalg.inv(V)
    k = np.arange(S)
    # a_ij = ∫_0^{c_i} ℓ_j,  b_j = ∫_0^1 ℓ_j
    powers = c[:, None] ** (k + 1)[None, :] / (k + 1)[None, :]
    a = powers @ L
    b = (1.0 / (k + 1)) @ L
    ahat = b[None, :] * (1.0 - a.T / b[:, None])
    return c, a, ahat, b


def gauss_lobatto_spark(s):
    """Coefficients of the s-stage Gauss-Lobatto SPARK method (Jay 2007).

    Dynamics at the s Gauss points (c, A, b: Gauss-Legendre), constraint
    stages at the s + 1 Lobatto points (c̃, b̃), Q̃_j = q_n + h Σ_i Â_ji V_i with
    Â_ji = ∫_0^{c̃_j} ℓ_i (Gauss Lagrange basis), and constraint impulses in the
    momentum stages with Ã_ij = b̃_j (1 − Â_ji / b_i), the symplecticity
    condition b_i Ã_ij + b̃_j Â_ji = b_i b̃_j (what the variational derivation with
    Gauss quadrature for L and Lobatto quadrature for λᵀg gives)."""
    x, wq = np.polynomial.legendre.leggauss(s)
    c, b = 0.5 * (x + 1.0), 0.5 * wq
    L = np.linalg.inv(np.vander(c, s, increasing=True))
    k = np.arange(s)

    def integrals(points):
        return (points[:, None] ** (k + 1)[None, :] / (k + 1)[None, :]) @ L

    A = integrals(c)
    c_lob = lobatto_nodes(s + 1)
    b_lob = lobatto_iiia_iiib(s + 1)[3]
    Ahat = integrals(c_lob)
    Atilde = b_lob[None, :] * (1.0 - Ahat.T / b[:, None])
    return c, A, b, c_lob, b_lob, Ahat, Atilde


# -- γ handling ------------------------------------------------------------------
def parse_gamma(value):
    """'0' | 'T' | 'opt' | a finite number → float or 'T' / 'opt'."""
    if isinstance(value, str):
        text = value.strip()
        if text.upper() == "T":
            return "T"
        if text.lower() == "opt":
            return "opt"
        try:
            value = float(text)
        except ValueError:
            raise InvalidInputError(
                f"gamma must be '0', 'T', 'opt' or a finite number, got {value!r}") from None
    if isinstance(value, bool):
        raise InvalidInputError(f"gamma must be '0', 'T', 'opt' or a finite number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"gamma must be '0', 'T', 'opt' or a finite number, got {value!r}") from None
    if not math.isfinite(x):
        raise InvalidInputError(f"gamma must be finite, got {x!r}")
    return x


def gamma_T(model):
    """γ_T = γ_R + Tr(M̄_G)/(2N) (seed 003 eqs. 31-32), provided by the model."""
    fun = getattr(model, "gamma_T", None)
    if fun is None:
        raise InvalidInputError(
            f"gamma='T' needs a model in natural coordinates that defines gamma_T() "
            f"(seed 003 eq. 32); model {model.name!r} does not")
    return float(fun())


def natural_chain(model):
    """Bodies (i_prev, i_next, l, J) of a planar natural-coordinate chain, or None.

    i_prev / i_next: index in q of the x of a body's two points (the model
    hook gives ints; returned as 2-slices; i_prev None:
    the fixed origin).  Uses ``model.natural_chain()`` when defined; the
    library's double_pendulum_natural (points O1 = q[0:2], O2 = q[2:4], O0 fixed)
    is recognised by name."""
    fun = getattr(model, "natural_chain", None)
    if fun is not None:
        return [(None if a is None else slice(int(a), int(a) + 2), slice(int(b), int(b) + 2),
                 float(l), float(J)) for a, b, l, J in fun()]
    if getattr(model, "name", "") == "double_pendulum_natural":
        p = model.params
        return [(None, slice(0, 2), p["l1"], p["m1"] * p["l1"] ** 2 / 12.0),
                (slice(0, 2), slice(2, 4), p["l2"], p["m2"] * p["l2"] ** 2 / 12.0)]
    return None


def signed_trajectory_error(q_num, q_ref):
    """δW = E[δx] + E[δy] (seed 003 eqs. 38-39) for planar point coordinates
    q = [x1, y1, x2, y2, ...]: sum over points of the signed time means."""
    d = np.asarray(q_num) - np.asarray(q_ref)
    return float(np.sum(np.mean(d, axis=0)))


def optimal_gamma(model, stages, h, steps, gamma2, t0=0.0, y0=None, u=None, refine=100):
    """γ_opt by linear interpolation of δW(γ) through γ1 = 0 and γ2 (seed 003 eq. 11).

    Returns (γ_opt, δW1, δW2)."""
    def run(gamma, hh, n):
        integ = PreadjustedSPARK(model, h=hh, stages=stages, gamma=gamma)
        integ.initialize(t0, y0, u)
        n_q = integ.model.n_q
        out = [integ.q.copy()]
        for k in range(1, n + 1):
            integ.advance(t0 + k * h)
            out.append(integ.y[:n_q].copy())
        return np.array(out)

    ref = run(0.0, h / refine, steps)
    dW1 = signed_trajectory_error(run(0.0, h, steps), ref)
    dW2 = signed_trajectory_error(run(gamma2, h, steps), ref)
    if (not math.isfinite(dW1) or not math.isfinite(dW2)
            or abs(dW2 - dW1) <= 1e-2 * max(abs(dW1), abs(dW2))):
        raise ConvergenceError(
            f"spark: gamma='opt' cannot interpolate: δW(0)={dW1!r} and δW({gamma2!r})={dW2!r} "
            f"differ by less than 1 %, the trajectory error of stages={stages} does not depend "
            f"measurably on γ at h={h!r} (seed 003 eq. 11)", t=t0, h=h, cause="degenerate interpolation")
    g1 = 0.0
    return (g1 * dW2 - gamma2 * dW1) / (dW2 - dW1), dW1, dW2


class PreadjustedSPARK(MultibodyIntegrator):
    """Parameter-preadjusted symplectic Gauss-Lobatto SPARK / Lobatto IIIA-IIIB (seed 003), fixed step.

    Options: ``stages`` s ∈ {1, 2, 3, 4} (order 2s), ``scheme``
    ("gauss-lobatto" | "lobatto"; the latter with s = 1 is RATTLE),
    ``gamma`` ('0' | 'T' | 'opt' | number), ``newton_tol`` (relative
    tolerance of the stage solve), ``opt_h`` / ``opt_steps`` / ``gamma_ref``
    (calibration run of gamma='opt': step, number of steps, and γ2 — default
    γ_T).  This is a fixed-step method: pass ``h``.  Without ``h`` it uses
    ``first_step`` or else h = 0.01 (rtol/atol are not used).
    """

    name = "spark"
    supports_nonholonomic = False  # seed 003 covers holonomic constraints only
    description = ("parameter-preadjusted symplectic Gauss-Lobatto SPARK (or Lobatto IIIA-IIIB/RATTLE), "
                   "fixed step (seed 003)")
    options = {"stages": 1, "gamma": "0", "scheme": "gauss-lobatto", "newton_tol": 1e-12, "opt_h": None,
               "opt_steps": 10, "gamma_ref": None}

    def check_options(self):
        s = self.opts["stages"]
        try:
            s_int = int(s)
            ok = float(s) == s_int
        except (TypeError, ValueError):
            ok = False
        if not ok or not 1 <= s_int <= 4:
            raise InvalidInputError(f"stages must be an integer in 1..4, got {s!r}")
        self.opts["stages"] = s_int
        self.opts["gamma"] = parse_gamma(self.opts["gamma"])
        tol = self.opts["newton_tol"]
        try:
            tol = float(tol)
        except (TypeError, ValueError):
            tol = float("nan")
        if not (math.isfinite(tol) and 0.0 < tol < 1.0):
            raise InvalidInputError(f"newton_tol must be in (0, 1), got {self.opts['newton_tol']!r}")
        self.opts["newton_tol"] = tol
        for key in ("opt_h", "gamma_ref"):
            val = self.opts[key]
            if val is not None:
                try:
                    x = float(val)
                except (TypeError, ValueError):
                    x = float("nan")
                if not math.isfinite(x) or (key == "opt_h" and x <= 0):
                    raise InvalidInputError(f"{key} must be a finite {'positive ' if key == 'opt_h' else ''}"
                                            f"number, got {val!r}")
                self.opts[key] = x
        n = self.opts["opt_steps"]
        if not (isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1):
            raise InvalidInputError(f"opt_steps must be an integer >= 1, got {n!r}")
        scheme = self.opts["scheme"]
        if scheme not in ("gauss-lobatto", "lobatto"):
            raise InvalidInputError(f"scheme must be 'gauss-lobatto' or 'lobatto', got {scheme!r}")
        self.scheme = scheme
        self.stages = s_int
        self.order = 2 * s_int
        if scheme == "lobatto":
            self.c, self.A, self.Ahat, self.b = lobatto_iiia_iiib(s_int + 1)
        else:
            (self.c, self.A, self.b, self.c_lob, self.b_lob,
             self.Ahat, self.Atilde) = gauss_lobatto_spark(s_int)
        self.h = self.h_fixed if self.h_fixed is not None else (self.first_step or DEFAULT_H)
        if self.h_fixed is None:
            warnings.warn(f"{self.name} is a fixed-step method without error control: no h given, "
                          f"using h={self.h!r} (rtol/atol are ignored)", stacklevel=3)

    # -- set-up --------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        self._ic(t0, y0, **ic_options)
        g = self.opts["gamma"]
        if g == "T":
            g = gamma_T(self.model)
        elif g == "opt":
            g2 = self.opts["gamma_ref"] if self.opts["gamma_ref"] is not None else gamma_T(self.model)
            h_cal = self.opts["opt_h"] or self.h
            g, self.opt_dW1, self.opt_dW2 = optimal_gamma(
                self.model, self.stages, h_cal, self.opts["opt_steps"], g2, t0, self.y.copy(), self.u)
        self.gamma_value = float(g)
        self._chain = natural_chain(self.model)
        self.newton = QuasiNewton(self.stats, max_iter=30, tol=1.0, err_tol=1.0, what="SPARK stage matrix")
        self.h_last = None
        self.qdd_prev = self.qdd.copy()

    # -- model terms ---------------------------------------------------------------------
    def _modification(self, q, t):
        """Generic (I − S)(q) = Aᵀ(AAᵀ)⁻¹A (seed 003 eq. 7)."""
        A = self.model.constraint_jacobian(q, t)
        if A.shape[0] == 0:
            return np.zeros((q.size, q.size))
        return A.T @ np.linalg.solve(A @ A.T, A)

    def _modification_gradient(self, q, v, t):
        """∂(½ vᵀAᵀ(AAᵀ)⁻¹Av)/∂q = K(w)ᵀ(v − Aᵀw), w = (AAᵀ)⁻¹Av, K(w) = (C_qᵀw)_q."""
        A = self.model.constraint_jacobian(q, t)
        if A.shape[0] == 0:
            return np.zeros(q.size)
        w = np.linalg.solve(A @ A.T, A @ v)
        if not np.any(w):
            return np.zeros(q.size)
        K = self.model.constraint_force_jacobian(q, w, t)
        if K is None:
            from .common import constraint_force_jacobian
            K = constraint_force_jacobian(self.model, q, w, t)
        return K.T @ (v - A.T @ w)

    def _mass_gamma(self, q, t):
        M = self.model.mass(q, t)
        if self._chain is not None:
            M = M.copy()
            for ip, inx, l, J in self._chain:
                coef = self.gamma_value - J
                if coef == 0.0:
                    continue
                # D1ᵀ(I − ṽṽᵀ)D1 with u = D1 x = (r_next − r_prev)/l, ṽ = D2 x = u rotated by +90°
                u = (q[inx] - (q[ip] if ip is not None else 0.0)) / l
                P = np.eye(2) - np.outer([-u[1], u[0]], [-u[1], u[0]])
                blk = coef * P / (l * l)
                M[inx, inx] += blk
                if ip is not None:
                    M[ip, ip] += blk
                    M[ip, inx] -= blk
                    M[inx, ip] -= blk
            return M
        if self.gamma_value != 0.0:
            M = M + self.gamma_value * self._modification(q, t)
        return M

    def _kinetic_gradient(self, q, v, t):
        """∂T_γ/∂q at fixed q' (seed 003 eq. 9), less the quadratic-velocity force the
        model's Q already holds: the protocol's Q is M q'' − applied forces, i.e. it
        includes ∂T/∂q − Ṁ q' (base.MultibodyModel.forces), while p' = ∂T/∂q + applied
        forces; so with M = M(q) the term added to Q here is Ṁ q' = (M(q) q')_q q'."""
        model = self.model
        if model.constant_mass:
            g = np.zeros(q.size)
        else:
            J = model.mass_jacobian_term(q, v, t)
            if J is None:  # (M(q) v)_q by central differences
                J = np.empty((q.size, q.size))
                for k in range(q.size):
                    dq = EPS ** (1.0 / 3.0) * max(1.0, abs(q[k]))
                    qp, qm = q.copy(), q.copy()
                    qp[k] += dq
                    qm[k] -= dq
                    J[:, k] = (model.mass(qp, t) @ v - model.mass(qm, t) @ v) / (qp[k] - qm[k])
            g = J @ v
        if self._chain is not None:
            for ip, inx, l, J in self._chain:
                coef = self.gamma_value - J
                if coef == 0.0:
                    continue
                u = (q[inx] - (q[ip] if ip is not None else 0.0)) / l
                du = (v[inx] - (v[ip] if ip is not None else 0.0)) / l
                s = -u[1] * du[0] + u[0] * du[1]          # ṽ·u̇
                # −(ṽ·u̇) D2ᵀu̇ with D2ᵀu̇ = [−u̇_y, u̇_x, u̇_y, −u̇_x]/l on (r_prev, r_next)
                gn = -coef * s * np.array([du[1], -du[0]]) / l
                g[inx] += gn
                if ip is not None:
                    g[ip] -= gn
        elif self.gamma_value != 0.0:
            g = g + self.gamma_value * self._modification_gradient(q, v, t)
        return g

    def _force(self, q, v, t):
        return self._kinetic_gradient(q, v, t) + self.model.forces(q, v, t, self.u)

    # -- one step -----------------------------------------------------------------------
    def _stage_residual(self, z, q0, p0, t0, h, final=False):
        """Stage residual; with ``final`` the end point q_{n+1} and p_{n+1} without
        the last constraint impulse (added by the velocity-constraint solve)."""
        model = self.model
        n, m, s = model.n_q, model.n_c, self.stages
        nv = self.c.size
        V = z[:nv * n].reshape(nv, n)
        hL = z[nv * n:].reshape(s, m)                 # unknowns h·Λ_j, j = 1..s
        F = np.empty((nv, n))
        res_c = np.empty((s, m))
        if self.scheme == "lobatto":
            # Lobatto IIIA-IIIB: S = s + 1 stages at the Lobatto points
            Q = q0 + h * (self.A @ V)
            Q[0] = q0
            for j in range(nv - 1):
                tj = t0 + self.c[j] * h
                F[j] = h * self._force(Q[j], V[j], tj) - model.constraint_jacobian(Q[j], tj).T @ hL[j]
            if final:
                t1 = t0 + h
                return Q[-1].copy(), p0 + self.b[:-1] @ F[:-1] + h * self.b[-1] * self._force(Q[-1], V[-1], t1)
            res_p = np.empty((nv, n))
            for i in range(nv):
                ti = t0 + self.c[i] * h
                res_p[i] = self._mass_gamma(Q[i], ti) @ V[i] - p0 - self.Ahat[i, :-1] @ F[:-1]
                if i > 0:
                    res_c[i - 1] = model.constraints(Q[i], ti) / h
            return np.concatenate([res_p.ravel(), res_c.ravel()])
        # Gauss-Lobatto SPARK: s Gauss stages for the dynamics, s + 1 Lobatto stages for the constraints
        Q = q0 + h * (self.A @ V)
        Qt = q0 + h * (self.Ahat @ V)
        Qt[0] = q0
        GL = np.empty((s, n))
        for j in range(s):
            tj = t0 + self.c_lob[j] * h
            GL[j] = model.constraint_jacobian(Qt[j], tj).T @ hL[j]
        for i in range(nv):
            F[i] = h * self._force(Q[i], V[i], t0 + self.c[i] * h)
        if final:
            return Qt[-1].copy(), p0 + self.b @ F - self.b_lob[:-1] @ GL
        res_p = np.empty((nv, n))
        for i in range(nv):
            ti = t0 + self.c[i] * h
            res_p[i] = self._mass_gamma(Q[i], ti) @ V[i] - p0 - self.A[i] @ F + self.Atilde[i, :-1] @ GL
        for j in range(1, s + 1):
            res_c[j - 1] = model.constraints(Qt[j], t0 + self.c_lob[j] * h) / h
        return np.concatenate([res_p.ravel(), res_c.ravel()])

    def _step(self, t_limit):
        h, _ = self._clamp_step(self.h, t_limit)
        model = self.model
        n = model.n_q
        t0 = self.t
        q0, v0 = self.y[:n].copy(), self.y[n:].copy()
        p0 = self._mass_gamma(q0, t0) @ v0
        # predictor: V_i ≈ v_n + c_i h q''_n, hΛ ≈ h λ_n
        z0 = np.concatenate([(v0[None, :] + (self.c * h)[:, None] * self.qdd[None, :]).ravel(),
                             np.tile(h * self.lam, self.stages)])
        w = self.opts["newton_tol"] * (1.0 + float(np.max(np.abs(z0))))

        def residual(delta):
            return self._stage_residual(z0 + delta, q0, p0, t0, h)

        def jacobian(delta):
            x = z0 + delta
            return fd_jacobian(lambda zz: self._stage_residual(zz, q0, p0, t0, h), x,
                               scale=np.full(x.size, 1e-3 * (1.0 + float(np.max(np.abs(x))))))

        def norm(dd):
            return float(np.max(np.abs(dd))) / w

        newton = self.newton
        newton.plan_reuse(h, self.h_last if self.h_last is not None else h)
        saved = newton.snapshot()
        result = newton.solve(residual, jacobian, z0.size, norm, h=h, t=t0)
        if not result.converged:
            newton.invalidate()
            result = newton.solve(residual, jacobian, z0.size, norm, h=h, t=t0)
        if not result.converged:
            newton.rollback(saved)
            self._fail("stage equations did not converge", h, result.reason)
        z = z0 + result.delta
        t1 = t0 + h
        # q_{n+1}, p_{n+1} without the last constraint impulse, then the velocity constraint (linear)
        q1, p_tilde = self._stage_residual(z, q0, p0, t0, h, final=True)
        Mg = self._mass_gamma(q1, t1)
        Cq = model.constraint_jacobian(q1, t1)
        K = augmented_matrix(Mg, Cq)
        sol = lu_solve(lu_factor(K, "[[M_γ, C_q^T], [C_q, 0]]", t=t1, h=h),
                       np.concatenate([p_tilde, -model.constraint_dt(q1, t1)]))
        v1 = sol[:n]
        qdd1, lam1 = consistent_accelerations(model, t1, q1, v1, self.u)
        # accept
        self.t_prev, self.y_prev, self.qdd_prev = t0, self.y.copy(), self.qdd.copy()
        self.t = t1
        self.y = np.concatenate([q1, v1])
        self.qdd, self.lam = qdd1, lam1
        self.h_last = h
        self.stats["steps"] += 1

    # -- dense output (cubic Hermite in q and in v) ----------------------------------------
    def dense_output(self, t):
        n = self.model.n_q
        t0, t1 = self.t_prev, self.t
        if t1 == t0:
            return self.y.copy()
        h = t1 - t0
        th = (float(t) - t0) / h
        h00 = (1 + 2 * th) * (1 - th) ** 2
        h10 = th * (1 - th) ** 2
        h01 = th * th * (3 - 2 * th)
        h11 = th * th * (th - 1)
        q0, v0 = self.y_prev[:n], self.y_prev[n:]
        q1, v1 = self.y[:n], self.y[n:]
        q = h00 * q0 + h * h10 * v0 + h01 * q1 + h * h11 * v1
        v = h00 * v0 + h * h10 * self.qdd_prev + h01 * v1 + h * h11 * self.qdd
        return np.concatenate([q, v])

    # -- state ------------------------------------------------------------------------------
    def _restart(self):
        self.qdd_prev = self.qdd.copy()

    def _method_state(self):
        return {"h": float(self.h), "gamma": float(self.gamma_value),
                "h_last": -1.0 if self.h_last is None else float(self.h_last),
                "qdd_prev": self.qdd_prev.copy(), "newton": self.newton.state()}

    def _restore_method_state(self, d):
        self.h = float(d["h"])
        self.gamma_value = float(d["gamma"])
        self.h_last = None if d["h_last"] < 0 else float(d["h_last"])
        self.qdd_prev = np.array(d["qdd_prev"], dtype=float)
        self.newton.restore(d["newton"])
        self.newton.stats = self.stats  # base restore() rebinds the statistics dict
