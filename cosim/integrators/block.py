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

The step is :mod:`cosim.integrators.block_kernel` — one implementation, run
compiled (numba, compiled once per machine, the model given as compiled
functions) or as plain Python (the same functions).  This module builds the
coefficients (Python, at set-up: they fill the record) and is the integrator
object around the kernel: options, the IC analysis, the record (``S``, ``I``,
``LU``: :mod:`block_record` lists the slots), dense output, state capture and
error messages.
"""
import math

import numpy as np

from .. import fixed_step, jit
from ..errors import ConvergenceError, InvalidInputError, SingularMatrixError
from . import block_record, dense_lu, kernel_common
from . import block_kernel as K
from .base import MultibodyIntegrator
from .model_functions import compiled_unsupported
from .block_state import RECORD
from .record import RecordIntegrator, record_point

NODE_FAMILIES = ("equidistant", "chebyshev", "legendre")


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
    X_mu = np.linalg.solve(G, np.eye(r + 1)[:, r])   # [d_i | B_i] per unit μ_i
    d0, B0 = X0[0], X0[1:].T
    wd, wB = X_mu[0], X_mu[1:]
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


def supports(model):
    """Why the compiled block method cannot run ``model`` (None: it can): a multibody
    model with kernels (no nonholonomic rows: seed 004 has holonomic constraints only)."""
    return compiled_unsupported(model)


def compiled_entry():
    """The compiled method (compiled once per machine, cached; cosim.jit.method_entry)."""
    return jit.method_entry(K, "block-lstable", helpers=(dense_lu, kernel_common, block_record))


_NEWTON_REASONS = {K.R_RESIDUAL: "residual is not finite", K.R_UPDATE: "Newton update is not finite",
                   K.R_NO_CONVERGENCE: f"no convergence in {K.NEWTON_MAX_ITER} iterations"}


class LStableBlock(record_point(K.T, K.T_PREV, ("y", "y_prev", "qdd", "lam")), RecordIntegrator, MultibodyIntegrator):
    """r-node L-stable block method (seed 004) for index-1/2/3 multibody DAEs, fixed step.

    Options: ``nodes`` ("equidistant" | "chebyshev" | "legendre"), ``r`` ≥ 2,
    ``index`` (1 | 2 | 3), ``pade_k`` (numerator degree, r−2 or r−1; default
    as in the seed's examples), ``newton_tol`` (stage solve: the velocity
    change h·ΔA of the last update must be below newton_tol·(1 + |v|); index 3
    adds the round-off floor 1e2·eps·(1 + |q|)/h), ``error_estimate``
    (compute ``self.error_estimate`` each step: weighted RMS of y_{k+1} minus a quadrature of order r on the nodes
    0, c_1..c_{r−1}).  Fixed step: pass ``h`` (else ``first_step`` or 0.01).

    The coefficients are computed here at set-up and stored in the record; the
    step (stages, residual, iteration matrix, the quasi-Newton solve, the stage
    data of the dense output) is :mod:`cosim.integrators.block_kernel`, run
    compiled (backend "numba") or as plain Python.
    """

    name = "block-lstable"
    supports_nonholonomic = False  # seed 004 covers holonomic constraints only
    description = "L-stable block implicit one-step method, Padé (k, r), index 1/2/3 (seed 004)"
    options = {"nodes": "equidistant", "r": 4, "index": 3, "pade_k": None, "newton_tol": 1e-14,
               "error_estimate": False}
    _kernel = K
    compiled_entry = staticmethod(compiled_entry)

    state_declaration = RECORD   # the record, the state dictionary and its schema
    h = RECORD.view("method_state.h")
    error_estimate = RECORD.view("method_state.error_estimate")
    stage_q = RECORD.view("method_state.stage_q")   # (r, n): the stage positions of the last step
    stage_v = RECORD.view("method_state.stage_v")
    stage_t0 = RECORD.view("method_state.stage_t0",
                           "Start of the step whose stage data the record holds (None: none, after a restart).")

    def __init__(self, model, backend="python", **kwargs):
        self._construct(model, backend, supports, K.N_SCALARS, kwargs)

    # the accuracy rule (cosim.fixed_step) judges every step of this fixed-step method,
    # h given or not: its estimate is y_{k+1} minus the order-r quadrature (∝ h^(r+1))
    fixed_step_alternative = fixed_step.FIXED_ONLY

    @property
    def fixed_error_order(self):
        return self.r + 1

    @property
    def fixed_step_size(self):
        return self._h_step

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
        self._h_step = self._fixed_step_size()
        self._S[K.H] = self._h_step

    # -- the record ----------------------------------------------------------------------------
    def _allocate(self):
        n, m, r = self.model.n_q, self.model.n_c, self.r
        R, offs = block_record, K.offsets(n, m, r)   # (R.O_*: the positions in offs)
        # y, y_prev, qdd, lam (record_point's), then the stages' q and v (_first_point's)
        self._slices = [(offs[R.O_Y], 2 * n), (offs[R.O_YP], 2 * n), (offs[R.O_QDD], n), (offs[R.O_LAM], m),
                        (offs[R.O_SQ], r * n), (offs[R.O_SV], r * n)]
        self._n, self._m = n, m
        self._N = K.matrix_size(n, m, r)
        S = np.zeros(offs[R.O_END])
        S[K.T] = S[K.T_PREV] = S[K.STAGE_T0] = math.nan
        S[K.H] = self._h_step
        S[K.H_LAST] = S[K.H_JAC] = -1.0
        S[K.RELAX] = 1.0
        o_c, o_d, o_B, o_B2, o_Bd, o_bh = (offs[R.O_C], offs[R.O_D], offs[R.O_B], offs[R.O_B2], offs[R.O_BD],
                                           offs[R.O_BH])
        S[o_c:o_c + r] = self.c
        S[o_d:o_d + r] = self.d
        S[o_B:o_B + r * r] = self.B.ravel()
        S[o_B2:o_B2 + r * r] = self.B2.ravel()
        S[o_Bd:o_Bd + r] = self.Bd
        S[o_bh:o_bh + r] = self.b_hat
        I = np.zeros(K.int_length(n, m, r), dtype=np.int64)
        I[K.I_N], I[K.I_M], I[K.I_R], I[K.INDEX] = n, m, r, self.index
        I[K.NEED_JAC] = 1
        self._set_record(S, I, self._N)
        self._sync_parameters()

    def _sync_parameters(self):
        """Tolerances, options and model flags into the record."""
        S, I = self._S, self._I
        S[K.RTOL], S[K.ATOL] = self.rtol, self.atol
        S[K.MAX_STEP] = self.max_step
        S[K.NEWTON_SCALE] = self.opts["newton_tol"]
        I[K.FIXED] = 0 if self.h_fixed is None else 1
        I[K.ERROR_EST] = 1 if self.opts["error_estimate"] else 0
        I[K.CONST_MASS] = 1 if self.model.constant_mass else 0

    @property
    def h_last(self):
        """The last step's size (None before the first step)."""
        value = float(self._S[K.H_LAST])
        return None if value < 0 else value

    # -- set-up ------------------------------------------------------------------------------
    def _initialize(self, t0, y0, **ic_options):
        report = self._analyse_start(t0, y0, **ic_options)
        self._allocate()
        y = np.concatenate([report.q, report.v])
        self._first_point(t0, (y, y, report.qdd, report.lam, np.tile(report.q, self.r), np.tile(report.v, self.r)))
        self._S[K.STAGE_T0] = t0
        self._load_machine_code(K.RESTART)

    # -- dense output: the degree-r polynomial through (0, y_k), (c_i, Y_i) ---------------------
    def dense_output(self, t):
        n = self._n
        t_prev = self.t_prev
        h = self.t - t_prev
        if h == 0.0 or self.stage_t0 != t_prev:
            return self.y
        th = (float(t) - t_prev) / h
        nodes = np.concatenate([[0.0], self.c])
        ell = np.ones(nodes.size)
        for j in range(nodes.size):
            for k in range(nodes.size):
                if k != j:
                    ell[j] *= (th - nodes[k]) / (nodes[j] - nodes[k])
        y_prev = self.y_prev
        qs = np.vstack([y_prev[:n], self.stage_q])
        vs = np.vstack([y_prev[n:], self.stage_v])
        return np.concatenate([ell @ qs, ell @ vs])

    # -- restart / state -------------------------------------------------------------------------
    def restart(self):
        """At the current point (new inputs or parameters, an event's new point): the
        consistent accelerations q'', λ solved with what is held now, which the next step
        starts from; the stage data forgotten, t_prev = t, y_prev = y (the kernel's
        ``restart``; the Newton matrix is kept)."""
        self._outputs_fresh = False
        if not self._has_state:
            return
        status = self._call(K.RESTART, 0.0, 0)
        if status != K.OK:
            t, info = float(self._S[K.F_T]), float(self._S[K.F_INFO])
            what = f"{self.name}: the matrix [[M, C_q^T], [C_q, 0]] of the consistent accelerations"
            if status == K.NONFINITE_MATRIX:
                raise SingularMatrixError(f"{what} contains NaN/inf at t={t}", t=t, h=None,
                                          cause="non-finite matrix")
            raise SingularMatrixError(f"{what} is numerically singular at t={t} (pivot ratio {info:.1e})",
                                      t=t, h=None, cause="singular matrix")

    def _reset_point(self):
        """(q'' and λ at the new point: the restart that follows solves them.)"""

    # -- failures ----------------------------------------------------------------------------
    def _failed(self, status):
        S, I = self._S, self._I
        t, h, info = float(S[K.F_T]), float(S[K.F_H]), float(S[K.F_INFO])
        name = self.name
        if status == K.FIXED_UNRESOLVED:
            raise fixed_step.unresolved_error(name, t, self._h_step, info, self.rtol, self.atol,
                                              self.fixed_error_order, self.fixed_step_alternative, step=h)
        if status == K.STEP_UNDERFLOW:
            cause = "step does not advance t"
            raise ConvergenceError(f"{name}: step size underflow at t={t!r}, h={h!r} ({cause})",
                                   t=t, h=h, cause=cause)
        if status == K.NEWTON_FAILED:
            cause = _NEWTON_REASONS.get(int(I[K.REASON]), "Newton iteration failed")
            hint = ("; index 3 stalls at its round-off floor (eps·cond/h²) on stiff models such as "
                    "andrews: index=2 or index=1, or another h" if self.index == 3 else "")
            raise ConvergenceError(f"{name}: block stage equations did not converge{hint} at t={t!r}, "
                                   f"h={h!r} ({cause})", t=t, h=h, cause=cause)
        what = "block iteration matrix"
        if status == K.NONFINITE_MATRIX:
            raise SingularMatrixError(f"{what} contains NaN/inf at t={t}, h={h}", t=t, h=h,
                                      cause="non-finite matrix")
        raise SingularMatrixError(f"{what} is numerically singular at t={t}, h={h} "
                                  f"(pivot ratio {info:.1e})", t=t, h=h, cause="singular matrix")
