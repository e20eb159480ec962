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

The algorithm (the stage equations, their quasi-Newton solve, the end point and
the velocity constraint) is :mod:`cosim.integrators.spark_kernel` — one
implementation, run compiled (numba, compiled once per machine, the model given as
compiled functions) or as plain Python (the same functions).  This module is the
integrator object around it: options, the tableaux and γ (set-up), the IC
analysis, the record (``S``, ``I``, ``LU``: :mod:`spark_record` lists the slots),
dense output, state capture and error messages.

Choice of γ: ``gamma`` = a number, "0", "T" (γ_T of seed 003 eqs. 31-32, from
the model's ``gamma_T()``), or "opt": the a-posteriori optimum of
seed 003 eq. 11, γ_opt = (γ1 δW2 − γ2 δW1)/(δW2 − δW1) with γ1 = 0, γ2 = γ_T,
δW = E[δx] + E[δy] (eqs. 38-39) from a short run (``opt_steps`` steps of
``opt_h``) against a reference at ``opt_h``/100.
"""
from __future__ import annotations

import math

import numpy as np

from .. import fixed_step, jit
from ..errors import ConvergenceError, InvalidInputError, SingularMatrixError
from ..models.ranges import DEFAULT
from . import dense_lu, kernel_common, spark_record, spark_terms
from . import spark_kernel as K
from .base import MultibodyIntegrator
from .common import qv_hermite_interpolant
from .model_functions import compiled_unsupported, python_functions
from .record import RecordIntegrator, record_point
from .spark_state import RECORD


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
    if not DEFAULT.contains(x):   # (the bound of a restored state's gamma)
        raise InvalidInputError(f"gamma must be {DEFAULT}, got {x!r}")
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


def optimal_gamma(model, stages, h, steps, gamma2, t0=0.0, y0=None, u=None, refine=100, backend="python",
                  tolerances=None):
    """γ_opt by linear interpolation of δW(γ) through γ1 = 0 and γ2 (seed 003 eq. 11),
    the calibration runs on ``backend`` (``tolerances``: the dict of rtol, atol that
    weigh their steps' local error estimates, cosim.fixed_step — the run's own).

    Returns (γ_opt, δW1, δW2)."""
    tolerances = tolerances or {}

    def run(gamma, hh, n):
        integ = PreadjustedSPARK(model, h=hh, stages=stages, gamma=gamma, backend=backend, **tolerances)
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


_NEWTON_REASONS = {K.R_RESIDUAL: "residual is not finite", K.R_UPDATE: "Newton update is not finite",
                   K.R_NO_CONVERGENCE: f"no convergence in {K.NEWTON_MAX_ITER} iterations"}
_MATRICES = {K.STAGE_MATRIX: "SPARK stage matrix", K.END_MATRIX: "[[M_γ, C_q^T], [C_q, 0]]",
             K.ACCEL_MATRIX: "[[M, C_q^T], [C_q, 0]]"}


def supports(model):
    """Why the compiled spark cannot run ``model`` (None: it can)."""
    return compiled_unsupported(model)


def compiled_entry():
    """The compiled method (compiled once per machine, cached; cosim.jit.method_entry)."""
    return jit.method_entry(K, "spark", helpers=(dense_lu, kernel_common, spark_record, spark_terms))


class PreadjustedSPARK(record_point(K.T, K.T_PREV, ("y", "y_prev", "qdd", "qdd_prev", "lam")), RecordIntegrator,
                       MultibodyIntegrator):
    """Parameter-preadjusted symplectic Gauss-Lobatto SPARK / Lobatto IIIA-IIIB (seed 003), fixed step.

    Options: ``stages`` s ∈ {1, 2, 3, 4} (order 2s), ``scheme``
    ("gauss-lobatto" | "lobatto"; the latter with s = 1 is RATTLE),
    ``gamma`` ('0' | 'T' | 'opt' | number), ``newton_tol`` (relative
    tolerance of the stage solve), ``opt_h`` / ``opt_steps`` / ``gamma_ref``
    (calibration run of gamma='opt': step, number of steps, and γ2 — default
    γ_T).  This is a fixed-step method: pass ``h``.  Without ``h`` it uses
    ``first_step`` or else h = 0.01 (rtol/atol weigh the local error estimate of the
    accuracy rule, cosim.fixed_step).
    """

    name = "spark"
    supports_nonholonomic = False  # seed 003 covers holonomic constraints only
    description = ("parameter-preadjusted symplectic Gauss-Lobatto SPARK (or Lobatto IIIA-IIIB/RATTLE), "
                   "fixed step (seed 003)")
    options = {"stages": 1, "gamma": "0", "scheme": "gauss-lobatto", "newton_tol": 1e-12, "opt_h": None,
               "opt_steps": 10, "gamma_ref": None}
    _kernel = K
    compiled_entry = staticmethod(compiled_entry)

    state_declaration = RECORD   # the record, the state dictionary and its schema
    h = RECORD.view("method_state.h")
    gamma_value = RECORD.view("method_state.gamma")

    def __init__(self, model, backend="python", **kwargs):
        self._construct(model, backend, supports, K.N_SCALARS, kwargs)

    # the accuracy rule (cosim.fixed_step) judges every step of this fixed-step method with
    # stages ≤ K.TWO_STEP_STAGES, h given or not: with stages = 1 the positions' Hermite
    # defect (spark_kernel._estimate, ∝ h³), with stages 2, 3 the two-step defect
    # (spark_kernel._two_step_estimate, ∝ h^(2s+1)); stages = 4 has none
    fixed_step_alternative = fixed_step.FIXED_ONLY

    @property
    def fixed_step_size(self):
        return self._h0 if self.stages <= K.TWO_STEP_STAGES else None

    @property
    def fixed_error_order(self):
        """The estimate ∝ h^this (the local error of an order-2s step)."""
        return 2 * self.stages + 1

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
        nl = s_int + 1
        if scheme == "lobatto":
            self.c, self.A, self.Ahat, self.b = lobatto_iiia_iiib(nl)
            self.c_lob, self.b_lob, self.Atilde = self.c, self.b, np.zeros((s_int, nl))
        else:
            (self.c, self.A, self.b, self.c_lob, self.b_lob,
             self.Ahat, self.Atilde) = gauss_lobatto_spark(s_int)
        self._h0 = self._fixed_step_size()

    # -- the record ------------------------------------------------------------------------
    def _allocate(self):
        """The record for the current model: state NaN/zero, the tableau and the
        natural-coordinate bodies written once."""
        model = self.model
        n, m, s = model.n_q, model.n_c, self.stages
        nv = self.c.size
        chain = natural_chain(model) or []
        nb = len(chain)
        self._N = K.matrix_size(n, m, s, nv)
        R, o = spark_record, K.offsets(n, m, s, nv, nb)   # (R.O_*: the positions in o)
        self._slices = [(o[R.O_Y], 2 * n), (o[R.O_YP], 2 * n), (o[R.O_QDD], n), (o[R.O_QDDP], n), (o[R.O_LAM], m)]
        S = np.zeros(o[R.O_END])
        S[K.T] = S[K.T_PREV] = math.nan
        S[K.H_LAST] = S[K.H_JAC] = -1.0
        S[K.RELAX] = 1.0
        S[K.H] = self._h0
        S[K.MAX_STEP] = self.max_step
        S[K.RTOL], S[K.ATOL] = self.rtol, self.atol   # the weights of the local error estimate
        S[K.NEWTON_REL] = self.opts["newton_tol"]
        for start, values in ((o[R.O_C], self.c), (o[R.O_A], self.A), (o[R.O_B], self.b), (o[R.O_AH], self.Ahat),
                              (o[R.O_AT], self.Atilde), (o[R.O_CL], self.c_lob), (o[R.O_BL], self.b_lob)):
            flat = np.asarray(values, dtype=float).reshape(-1)
            S[start:start + flat.size] = flat
        I = np.zeros(spark_record.int_length(n, m, s, nv), dtype=np.int64)
        I[K.I_N], I[K.I_M], I[K.I_S], I[K.I_NV] = n, m, s, nv
        I[K.SCHEME] = K.LOBATTO if self.scheme == "lobatto" else K.GAUSS_LOBATTO
        I[K.FIXED] = 1 if self.h_fixed is not None else 0
        I[K.CONST_MASS] = 1 if model.constant_mass else 0
        I[K.NEED_JAC] = 1
        I[K.CHAIN] = 1 if natural_chain(model) is not None else 0
        I[K.I_NB] = nb
        for k, (ip, inx, length, J) in enumerate(chain):
            S[o[R.O_L] + k], S[o[R.O_J] + k] = length, J
            S[o[R.O_PTS] + 2 * k] = -1 if ip is None else ip.start
            S[o[R.O_PTS] + 2 * k + 1] = inx.start
        self._set_record(S, I, self._N)

    # -- set-up --------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        report = self._analyse_start(t0, y0, **ic_options)
        y = np.concatenate([report.q, report.v])
        g = self.opts["gamma"]
        if g == "T":
            g = gamma_T(self.model)
        elif g == "opt":
            g2 = self.opts["gamma_ref"] if self.opts["gamma_ref"] is not None else gamma_T(self.model)
            h_cal = self.opts["opt_h"] or self._h0
            backend = self.backend if supports(self.model) is None else "python"
            g, self.opt_dW1, self.opt_dW2 = optimal_gamma(
                self.model, self.stages, h_cal, self.opts["opt_steps"], g2, t0, y.copy(), self.u,
                backend=backend, tolerances={"rtol": self.rtol, "atol": self.atol})
        self._allocate()
        self._S[K.GAMMA] = float(g)
        self._first_point(t0, (y, y, report.qdd, report.qdd, report.lam))
        self._load_machine_code(K.RESTART)

    @property
    def h_last(self):
        """The last step taken (None before the first)."""
        value = float(self._S[K.H_LAST])
        return None if value < 0.0 else value

    # -- model terms (the kernel's, run as Python: set-up checks and tests) -----------------
    def _terms(self):
        n = self.model.n_q
        return python_functions(self.model), K.workspace(n, self.model.n_c, self.stages, self.c.size), n

    def _mass_gamma(self, q, t):
        """M_γ(q) (seed 003 eqs. 7-10, 22-25)."""
        fns, w, n = self._terms()
        M = np.zeros((n, n))
        K._mass_gamma(fns, self._S, self._I, self._parameters(), np.ascontiguousarray(q, dtype=float),
                      float(t), M, w)
        return M

    def _kinetic_gradient(self, q, v, t):
        """∂T_γ/∂q at fixed q' less the model's quadratic-velocity force (seed 003 eq. 9)."""
        fns, w, n = self._terms()
        g = np.zeros(n)
        K._kinetic_gradient(fns, self._S, self._I, self._parameters(), np.ascontiguousarray(q, dtype=float),
                            np.ascontiguousarray(v, dtype=float), float(t), g, w)
        return g

    # -- dense output (cubic Hermite in q and in v) ----------------------------------------
    def dense_output(self, t):
        return self.step_interpolant()(t)

    def step_interpolant(self):
        t0, t1 = self.t_prev, self.t
        y1 = self.y
        if t1 == t0:
            return lambda t: y1.copy()
        return qv_hermite_interpolant(t0, t1, self.y_prev, y1, self.qdd_prev, self.qdd, self.model.n_q)

    # -- restart / state ----------------------------------------------------------------------
    def restart(self):
        """Forget the last step at the current point (t_prev = t, y_prev = y, q''_prev = q'')."""
        self._outputs_fresh = False
        K.restart(self._S, self._I)

    # -- failures ----------------------------------------------------------------------------
    def _budget_spent(self, t_target):
        self.too_many_steps(t_target)

    def _failed(self, status):
        S, I = self._S, self._I
        t, h = float(S[K.F_T]), float(S[K.F_H])
        name = self.name
        if status == K.FIXED_UNRESOLVED:
            raise fixed_step.unresolved_error(name, t, self._h0, float(S[K.F_INFO]), self.rtol, self.atol,
                                              self.fixed_error_order, self.fixed_step_alternative, step=h)
        if status == K.NEWTON_FAILED:
            cause = _NEWTON_REASONS.get(int(I[K.REASON]), "Newton iteration failed")
            raise ConvergenceError(f"{name}: stage equations did not converge at t={t!r}, h={h!r} ({cause})",
                                   t=t, h=h, cause=cause)
        if status == K.STEP_UNDERFLOW:
            cause = "step does not advance t"
            raise ConvergenceError(f"{name}: step size underflow at t={t!r}, h={h!r} ({cause})",
                                   t=t, h=h, cause=cause)
        what = _MATRICES[status]
        if status != K.STAGE_MATRIX:
            t = float(S[K.F_CT])
        if status == K.ACCEL_MATRIX:
            h = None
        if int(I[K.REASON]) == kernel_common.MATRIX_NONFINITE:
            raise SingularMatrixError(f"{what} contains NaN/inf at t={t}, h={h}", t=t, h=h,
                                      cause="non-finite matrix")
        raise SingularMatrixError(f"{what} is numerically singular at t={t}, h={h} "
                                  f"(pivot ratio {float(S[K.F_INFO]):.1e})", t=t, h=h, cause="singular matrix")
