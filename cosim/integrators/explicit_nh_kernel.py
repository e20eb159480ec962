"""Nonholonomic rows for the compiled dopri5/rk4 (seed 000 §7, eq. 93): the
functions of :mod:`cosim.integrators.explicit_kernel` that build and use J,
written for G = B(q, t) v + b(q, t) = 0 as well.

Pasted by :mod:`cosim.jit` after ``explicit_kernel`` into the entry of a
model that declares nonholonomic rows only (``extras=``); its definitions
replace the holonomic-only ones of the same names there, so every other
model's entry (and its cached machine code) stays as it was.  Same algorithm
as :class:`cosim.integrators.explicit.IndexOneRHS`:

* J = [[M, C_qᵀ, Bᵀ], [C_q, 0, 0], [B, 0, 0]] (eq. 89 with the rows of
  eq. 93), right-hand side [Q; γ; γ_G] with B q'' = γ_G;
* position projection on C = 0 only (the B rows' right-hand side is 0, none
  at all when the model has no holonomic rows); velocity projection on
  C_q v + C_t = 0 and B v + b = 0.

Record: ``I[I_M]`` = m + n_g (all multiplier rows: λ in S holds both, as the
reference's ``lam``), the last slot of ``I`` (after the pivots) holds n_g.
Kernels ``fns[10]`` … ``fns[14]``: :data:`cosim.models.kernels.NONHOLONOMIC_FIELDS`.
"""
import math

from .dense_lu import lu_factor_inplace, lu_solve_inplace, pivot_ratio
# one line each: cosim.jit drops "from ." lines when it pastes this module after explicit_kernel
from .explicit_kernel import ATOL, C_NONE, C_NONFINITE_MATRIX, C_POSITION, C_SINGULAR, C_VELOCITY, EPS
from .explicit_kernel import F_CINFO, F_CT, PIV, PROJ_ITERS, PROJECTION_MAX_ITER, PROJECTION_TOL, RTOL
from .explicit_kernel import ST_LU, ST_RES


def n_nonholonomic(I):
    """n_g, kept in the last slot of I."""
    return I[I.shape[0] - 1]


def _constraint_rows(fns, p, mh, q, t, Cq):
    """Cq (m + n_g, n) = [C_q; B] at (q, t), zero-filled first."""
    Cq[:, :] = 0.0
    fns[3](q, t, p, Cq)
    fns[10](q, t, p, Cq[mh:])


def _factorize(fns, S, I, LU, p, n, m, q, t, M, Cq):
    """LU of J(q, t) = [[M, C_qᵀ, Bᵀ], [C_q, 0, 0], [B, 0, 0]] into LU / I[PIV]
    with the singularity test of common.lu_factor; returns a cause code."""
    N = n + m
    mh = m - n_nonholonomic(I)
    for i in range(N):
        for j in range(N):
            LU[i, j] = 0.0
    M[:, :] = 0.0
    fns[0](q, t, p, M)
    for i in range(n):
        for j in range(n):
            LU[i, j] = M[i, j]
    if m > 0:
        _constraint_rows(fns, p, mh, q, t, Cq)
        for k in range(m):
            for i in range(n):
                LU[i, n + k] = Cq[k, i]
                LU[n + k, i] = Cq[k, i]
    for i in range(N):
        for j in range(N):
            if not math.isfinite(LU[i, j]):
                S[F_CT] = t
                return C_NONFINITE_MATRIX
    info = lu_factor_inplace(LU, I[PIV:PIV + N])
    ratio = 0.0 if info != 0 else pivot_ratio(LU)
    if ratio <= 1e-14:
        S[F_CT] = t
        S[F_CINFO] = ratio
        return C_SINGULAR
    I[ST_LU] += 1
    return C_NONE


def _evaluate(fns, S, I, LU, p, u, n, m, t, y, f, lam, w):
    """f = y' = [v; q''] at (t, y) and the multipliers [λ; μ] (IndexOneRHS.__call__
    with the rows B q'' = γ_G); the factor of J stays in LU."""
    q, v, M, Cq, Q, g, rhs = w[0], w[1], w[2], w[3], w[4], w[5], w[6]
    mh = m - n_nonholonomic(I)
    I[ST_RES] += 1
    for i in range(n):
        q[i] = y[i]
        v[i] = y[n + i]
    cause = _factorize(fns, S, I, LU, p, n, m, q, t, M, Cq)
    if cause != C_NONE:
        return cause
    Q[:] = 0.0
    fns[1](q, v, t, u, p, Q)
    for i in range(n):
        rhs[i] = Q[i]
    if m > 0:
        g[:] = 0.0
        fns[5](q, v, t, p, g)
        fns[12](q, v, t, p, g[mh:])
        for k in range(m):
            rhs[n + k] = g[k]
    lu_solve_inplace(LU, I[PIV:PIV + n + m], rhs)
    for i in range(n):
        f[i] = v[i]
        f[n + i] = rhs[i]
    for k in range(m):
        lam[k] = rhs[n + k]
    return C_NONE


def _project(fns, S, I, LU, p, n, m, t, y_new, y_proj, w):
    """IndexOneRHS.project with nonholonomic rows: position projection on C = 0
    (skipped without holonomic rows), velocity projection on C_q v + C_t = 0 and
    B v + b = 0, with the factor in LU (one refactorisation per stage)."""
    for i in range(2 * n):
        y_proj[i] = y_new[i]
    if m == 0:
        return C_NONE
    M, Cq, rhs, C, Ct = w[2], w[3], w[6], w[7], w[8]
    q, v = w[0], w[1]
    N = n + m
    mh = m - n_nonholonomic(I)
    piv = I[PIV:PIV + N]
    rtol, atol = S[RTOL], S[ATOL]
    for i in range(n):
        q[i] = y_new[i]
        v[i] = y_new[n + i]
    its = 0
    done = mh == 0
    for attempt in range(2):
        if done:
            break
        for _ in range(PROJECTION_MAX_ITER):
            C[:] = 0.0
            fns[2](q, t, p, C)
            for i in range(N):
                rhs[i] = 0.0
            for k in range(mh):
                rhs[n + k] = -C[k]
            lu_solve_inplace(LU, piv, rhs)
            finite = True
            for i in range(n):
                q[i] += rhs[i]
                if not math.isfinite(rhs[i]):
                    finite = False
            its += 1
            if not finite:
                break
            rel, big, qmax = 0.0, 0.0, 0.0
            for i in range(n):
                d = abs(rhs[i])
                rel = max(rel, d / (rtol * abs(y_new[i]) + atol))
                big = max(big, d)
                qmax = max(qmax, abs(q[i]))
            if rel <= PROJECTION_TOL or big <= 4 * EPS * max(1.0, qmax):
                done = True
                break
        if done:
            break
        if attempt == 0:
            cause = _factorize(fns, S, I, LU, p, n, m, q, t, M, Cq)
            if cause != C_NONE:
                return cause
    if not done:
        S[F_CT] = t
        return C_POSITION
    done = False
    for attempt in range(2):
        for _ in range(PROJECTION_MAX_ITER):
            _constraint_rows(fns, p, mh, q, t, Cq)
            Ct[:] = 0.0
            fns[4](q, t, p, Ct)
            fns[11](q, t, p, Ct[mh:])
            for i in range(n):
                rhs[i] = 0.0
            for k in range(m):
                s = 0.0
                for i in range(n):
                    s += Cq[k, i] * v[i]
                rhs[n + k] = -(s + Ct[k])
            lu_solve_inplace(LU, piv, rhs)
            finite = True
            for i in range(n):
                v[i] += rhs[i]
                if not math.isfinite(rhs[i]):
                    finite = False
            its += 1
            if not finite:
                break
            rel, big, vmax = 0.0, 0.0, 0.0
            for i in range(n):
                d = abs(rhs[i])
                rel = max(rel, d / (rtol * abs(y_new[n + i]) + atol))
                big = max(big, d)
                vmax = max(vmax, abs(v[i]))
            if rel <= PROJECTION_TOL or big <= 4 * EPS * max(1.0, vmax):
                done = True
                break
        if done:
            break
        if attempt == 0:
            cause = _factorize(fns, S, I, LU, p, n, m, q, t, M, Cq)
            if cause != C_NONE:
                return cause
    if not done:
        S[F_CT] = t
        return C_VELOCITY
    for i in range(n):
        y_proj[i] = q[i]
        y_proj[n + i] = v[i]
    I[PROJ_ITERS] += its
    return C_NONE
