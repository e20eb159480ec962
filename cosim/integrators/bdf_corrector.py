"""The corrector of the BDF family (:mod:`cosim.integrators.bdf_kernel`): the model
evaluations shared by the three formulations, the residual and iteration matrix of
each — index 3 (eqs. 78-79, scaled by ĥ²), index 2 (GGL, eq. 84), index 1 (the
system after eq. 84) — and the quasi-Newton solve (seed 000 Algorithm 2)."""
import math

from .kernel_common import (FN_CONSTRAINTS, FN_CONSTRAINT_DT, FN_CONSTRAINT_FORCE_JACOBIAN,
    FN_CONSTRAINT_JACOBIAN, FN_FORCES, FN_FORCE_JACOBIANS, FN_GAMMA, FN_MASS,
    FN_MASS_JACOBIAN_TERM, JOB_MATRIX, JOB_NORM, MATRIX_NONFINITE, MATRIX_SINGULAR, NEWTON_END,
    QN_ABORTED, QN_SOLVED, factor_matrix, newton_begin, quasi_newton)
from .bdf_record import (CONST_MASS, EPS, F_INFO, HAS_FACTOR, HAS_J, H_JAC, INDEX2, INDEX3, I_NS,
    NEED_JAC, NEWTON_ERR_TOL, NEWTON_MAX_ITER, NEWTON_TOL, NONFINITE_MATRIX, OK, PIV, REASON,
    RELAX, SIGMA, SINGULAR, ST_JAC, ST_LU, ST_NEWTON,
    ST_RES, VARIANT, WS_A, WS_A0, WS_CT, WS_DELTA, WS_F, WS_G0, WS_G1, WS_LAM, WS_LHAT, WS_MU,
    WS_Q, WS_QF, WS_QX, WS_TQ, WS_V, WS_VX, WS_W2, WS_YDPRED, WS_YPRED, WS_ZPRED, O_J, offsets)

# kernel_common.newton_begin's rule: Algorithm 2 with the prior-rate test, no stall test
NEWTON_RULE = (NEWTON_MAX_ITER, 1, 0, HAS_FACTOR, ST_LU, NEED_JAC, ST_RES, ST_NEWTON, H_JAC, RELAX, SIGMA)

# inlined by numba into their one caller (cosim.jit.method_inlined): the Newton loop and
# its residuals, called once per iteration with the work arrays and the slot tuple
INLINED = ("_newton", "_newton_job", "_residual", "_residual2", "_residual1")


# ---------------------------------------------------------------------------------
# model evaluations shared by the three formulations (the kernels accumulate into
# their outputs, so every output is zeroed first)
# ---------------------------------------------------------------------------------
def _dot(A, r, xv, n):
    """Row r of A times xv."""
    s = 0.0
    for j in range(n):
        s += A[r, j] * xv[j]
    return s


def _mass_and_forces(fns, p, u, n, t1, qv, vv, W, o_Q, M):
    """M(q) into M, Q(q, v) into W[o_Q:o_Q+n]."""
    for i in range(n):
        for j in range(n):
            M[i, j] = 0.0
        W[o_Q + i] = 0.0
    fns[FN_MASS](qv, t1, p, M)
    fns[FN_FORCES](qv, vv, t1, u, p, W[o_Q:o_Q + n])


def _constraint_jacobian(fns, p, n, m, t1, qv, Cq):
    """C_q(q) into Cq."""
    for k in range(m):
        for j in range(n):
            Cq[k, j] = 0.0
    fns[FN_CONSTRAINT_JACOBIAN](qv, t1, p, Cq)


def _add_cq_t(Cq, xv, scale, W, out, n, m):
    """W[out:out+n] += scale · C_qᵀ x."""
    for i in range(n):
        s = 0.0
        for k in range(m):
            s += Cq[k, i] * xv[k]
        W[out + i] += scale * s


def _constraints(fns, p, m, t1, qv, W, out):
    """C(q) into W[out:out+m]."""
    for k in range(m):
        W[out + k] = 0.0
    fns[FN_CONSTRAINTS](qv, t1, p, W[out:out + m])


def _gamma_at(fns, p, m, t1, qv, vv, W, out):
    """γ(q, v) into W[out:out+m]."""
    for k in range(m):
        W[out + k] = 0.0
    fns[FN_GAMMA](qv, vv, t1, p, W[out:out + m])


def _cqv(fns, p, n, m, t1, qv, vv, Cq, W, ct, out):
    """C_q(q) v + C_t(q) into W[out:out+m] (Cq and W[ct] overwritten)."""
    _constraint_jacobian(fns, p, n, m, t1, qv, Cq)
    for k in range(m):
        W[ct + k] = 0.0
    fns[FN_CONSTRAINT_DT](qv, t1, p, W[ct:ct + m])
    for k in range(m):
        W[out + k] = _dot(Cq, k, vv, n) + W[ct + k]


def _cqa_gamma(fns, p, n, m, t1, qv, vv, av, Cq, W, tmp, out):
    """C_q(q) a − γ(q, v) into W[out:out+m] (Cq and W[tmp] overwritten)."""
    _constraint_jacobian(fns, p, n, m, t1, qv, Cq)
    _gamma_at(fns, p, m, t1, qv, vv, W, tmp)
    for k in range(m):
        W[out + k] = _dot(Cq, k, av, n) - W[tmp + k]


G_CQV, G_CQA, G_GAMMA = 0, 1, 2   # what _fd_block differentiates


def _fd_block(kind, fns, p, n, m, t1, W, ws, Cq, Jw, row, col, scale):
    """Jw[row:row+m, col:col+n] = scale · ∂g/∂x by forward differences
    (bdf._cq_v_jacobian, common.fd_jacobian): g = C_q v + C_t (G_CQV) or
    C_q a − γ (G_CQA) over x = q, g = γ over x = v (G_GAMMA)."""
    q, v, a, ct, g0, g1 = ws[WS_Q], ws[WS_V], ws[WS_A], ws[WS_CT], ws[WS_G0], ws[WS_G1]
    x, xp = (v, ws[WS_VX]) if kind == G_GAMMA else (q, ws[WS_QX])
    qv, vv, av = W[q:q + n], W[v:v + n], W[a:a + n]
    if kind == G_CQV:
        _cqv(fns, p, n, m, t1, qv, vv, Cq, W, ct, g0)
    elif kind == G_CQA:
        _cqa_gamma(fns, p, n, m, t1, qv, vv, av, Cq, W, ct, g0)
    else:
        _gamma_at(fns, p, m, t1, qv, vv, W, g0)
    sq = math.sqrt(EPS)
    for j in range(n):
        for i in range(n):
            W[xp + i] = W[x + i]
        hj = sq * max(abs(W[x + j]), 1e-3)
        W[xp + j] += hj
        hj = W[xp + j] - W[x + j]
        if kind == G_CQV:
            _cqv(fns, p, n, m, t1, W[xp:xp + n], vv, Cq, W, ct, g1)
        elif kind == G_CQA:
            _cqa_gamma(fns, p, n, m, t1, W[xp:xp + n], vv, av, Cq, W, ct, g1)
        else:
            _gamma_at(fns, p, m, t1, qv, W[xp:xp + n], W, g1)
        for k in range(m):
            Jw[row + k, col + j] = scale * ((W[g1 + k] - W[g0 + k]) / hj)


def _matrices(fns, p, u, n, m, t1, W, ws, const_mass, M, Qq, Qv, Hm, Mq, Jw, n_zero):
    """M, Q_q, Q_v, (C_qᵀλ)_q (m > 0) and (M a)_q (mass not constant) at the
    point (q, v, a, λ) in W; Jw[:n_zero, :n_zero] = 0."""
    q, v, a, lam = ws[WS_Q], ws[WS_V], ws[WS_A], ws[WS_LAM]
    qv, vv, av = W[q:q + n], W[v:v + n], W[a:a + n]
    for i in range(n_zero):
        for j in range(n_zero):
            Jw[i, j] = 0.0
    for i in range(n):
        for j in range(n):
            Qq[i, j] = 0.0
            Qv[i, j] = 0.0
            Hm[i, j] = 0.0
            Mq[i, j] = 0.0
            M[i, j] = 0.0
    fns[FN_FORCE_JACOBIANS](qv, vv, t1, u, p, Qq, Qv)
    if m > 0:
        fns[FN_CONSTRAINT_FORCE_JACOBIAN](qv, W[lam:lam + m], t1, p, Hm)
    if not const_mass:
        fns[FN_MASS_JACOBIAN_TERM](qv, av, t1, p, Mq)
    fns[FN_MASS](qv, t1, p, M)


def _stiffness(Qq, Hm, Mq, i, j, m, const_mass, constraint_first):
    """Entry (i, j) of −Q_q + (C_qᵀλ)_q + (M a)_q, summed in the reference's order."""
    K = -Qq[i, j]
    if m > 0 and constraint_first:
        K = K + Hm[i, j]
    if not const_mass:
        K = K + Mq[i, j]
    if m > 0 and not constraint_first:
        K = K + Hm[i, j]
    return K


def _hessian_rows(fns, p, n, m, t1, qv, W, x, Hm, Jw, row, add):
    """Jw[row:row+n, :n] = (or +=) (C_qᵀ x)_q with x = W[x:x+m] (Hm overwritten)."""
    for i in range(n):
        for j in range(n):
            Hm[i, j] = 0.0
    fns[FN_CONSTRAINT_FORCE_JACOBIAN](qv, W[x:x + m], t1, p, Hm)
    for i in range(n):
        for j in range(n):
            if add:
                Jw[row + i, j] += Hm[i, j]
            else:
                Jw[row + i, j] = Hm[i, j]


def _put_cq(Jw, Cq, n, m, row, col):
    """C_q at Jw[row:row+m, col:col+n] and C_qᵀ at Jw[col:col+n, row:row+m]."""
    for k in range(m):
        for j in range(n):
            Jw[row + k, col + j] = Cq[k, j]
            Jw[col + j, row + k] = Cq[k, j]


# ---------------------------------------------------------------------------------
# eq. 78 and eq. 79 (scaled by ĥ²), index 3
# ---------------------------------------------------------------------------------
def _point(W, n, m, ws, hhat, h2):
    """q, v, a at predictor + δ (eqs. 75-77) and λ̂ = λ̂0 + Δ."""
    ypred, ydpred, a0, lhat, delta = ws[WS_YPRED], ws[WS_YDPRED], ws[WS_A0], ws[WS_LHAT], ws[WS_DELTA]
    q, v, a, lam = ws[WS_Q], ws[WS_V], ws[WS_A], ws[WS_LAM]
    for i in range(n):
        d = W[delta + i]
        W[q + i] = W[ypred + i] + d
        W[v + i] = W[ydpred + i] + d / hhat
        W[a + i] = W[a0 + i] + d / h2
    for k in range(m):
        W[lam + k] = W[lhat + k] + W[delta + n + k]


def _residual(fns, p, u, n, m, t1, hhat, h2, W, ws, M, Cq):
    """F into W[F:F+N]: [ĥ²(M a − Q) + C_qᵀ λ̂ ; C(q)] (eq. 78 scaled by ĥ²)."""
    q, v, a, lam, Q, F = ws[WS_Q], ws[WS_V], ws[WS_A], ws[WS_LAM], ws[WS_QF], ws[WS_F]
    _point(W, n, m, ws, hhat, h2)
    qv, av = W[q:q + n], W[a:a + n]
    _mass_and_forces(fns, p, u, n, t1, qv, W[v:v + n], W, Q, M)
    for i in range(n):
        W[F + i] = h2 * (_dot(M, i, av, n) - W[Q + i])
    if m > 0:
        _constraint_jacobian(fns, p, n, m, t1, qv, Cq)
        _add_cq_t(Cq, W[lam:lam + m], 1.0, W, F, n, m)
        _constraints(fns, p, m, t1, qv, W, F + n)


def _jacobian(fns, p, u, n, m, t1, hhat, h2, const_mass, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw):
    """Eq. 79 times ĥ²: [[M − ĥQ_v + ĥ²(−Q_q + (C_qᵀλ)_q + (M a)_q), C_qᵀ], [C_q, 0]]."""
    q, lam = ws[WS_Q], ws[WS_LAM]
    _point(W, n, m, ws, hhat, h2)
    qv = W[q:q + n]
    for k in range(m):
        W[lam + k] = W[lam + k] / h2          # λ = (λ̂0 + Δ)/ĥ²
    _matrices(fns, p, u, n, m, t1, W, ws, const_mass, M, Qq, Qv, Hm, Mq, Jw, 0)
    for i in range(n):
        for j in range(n):
            Jw[i, j] = M[i, j] - hhat * Qv[i, j] + h2 * _stiffness(Qq, Hm, Mq, i, j, m, const_mass, True)
    if m > 0:
        _constraint_jacobian(fns, p, n, m, t1, qv, Cq)
        _put_cq(Jw, Cq, n, m, n, 0)
        for k in range(m):
            for l in range(m):
                Jw[n + k, n + l] = 0.0


# ---------------------------------------------------------------------------------
# eq. 84 and its Jacobian, scaled (index 2, GGL: BDFIndex2._solve)
# unknowns x = (δ, ĥε, ĥ²Δλ, ĥμ); rows (ĥ·dynamics, kinematics, C, ĥ·(C_q v + C_t))
# ---------------------------------------------------------------------------------
def _point2(W, n, m, ws, hhat):
    """q, v, ĥ v' (in a), Λ = Λ0 + x_λ (in lam), μ at predictor + x."""
    ypred, ydpred, lhat, delta = ws[WS_YPRED], ws[WS_YDPRED], ws[WS_LHAT], ws[WS_DELTA]
    q, v, a, lam, mu = ws[WS_Q], ws[WS_V], ws[WS_A], ws[WS_LAM], ws[WS_MU]
    for i in range(n):
        W[q + i] = W[ypred + i] + W[delta + i]
        W[v + i] = W[ypred + n + i] + W[delta + n + i] / hhat
        W[a + i] = hhat * W[ydpred + n + i] + W[delta + n + i] / hhat
    for k in range(m):
        W[lam + k] = W[lhat + k] + W[delta + 2 * n + k]
        W[mu + k] = W[delta + 2 * n + m + k]


def _residual2(fns, p, u, n, m, t1, hhat, h2, W, ws, M, Cq):
    q, v, a, lam, Q, F, mu = ws[WS_Q], ws[WS_V], ws[WS_A], ws[WS_LAM], ws[WS_QF], ws[WS_F], ws[WS_MU]
    ydpred, delta, ct, g0 = ws[WS_YDPRED], ws[WS_DELTA], ws[WS_CT], ws[WS_G0]
    _point2(W, n, m, ws, hhat)
    qv, vv, av = W[q:q + n], W[v:v + n], W[a:a + n]
    _mass_and_forces(fns, p, u, n, t1, qv, vv, W, Q, M)
    for i in range(n):
        W[F + i] = hhat * _dot(M, i, av, n) - h2 * W[Q + i]
        W[F + n + i] = hhat * W[ydpred + i] + W[delta + i] - hhat * W[v + i]
    if m > 0:
        _cqv(fns, p, n, m, t1, qv, vv, Cq, W, ct, g0)
        _add_cq_t(Cq, W[lam:lam + m], 1.0, W, F, n, m)
        _add_cq_t(Cq, W[mu:mu + m], 1.0, W, F + n, n, m)
        _constraints(fns, p, m, t1, qv, W, F + 2 * n)
        for k in range(m):
            W[F + 2 * n + m + k] = hhat * W[g0 + k]


def _jacobian2(fns, p, u, n, m, t1, hhat, h2, const_mass, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw):
    q, mu = ws[WS_Q], ws[WS_MU]
    N = 2 * n + 2 * m
    _point2(W, n, m, ws, hhat)
    qv = W[q:q + n]
    _matrices(fns, p, u, n, m, t1, W, ws, const_mass, M, Qq, Qv, Hm, Mq, Jw, N)
    for i in range(n):
        for j in range(n):
            Kij = -h2 * Qq[i, j]
            if not const_mass:
                Kij = Kij + hhat * Mq[i, j]
            if m > 0:
                Kij = Kij + Hm[i, j]
            Jw[i, j] = Kij
            Jw[i, n + j] = M[i, j] - hhat * Qv[i, j]
        Jw[n + i, i] = 1.0
        Jw[n + i, n + i] = -1.0
    if m > 0:
        _hessian_rows(fns, p, n, m, t1, qv, W, mu, Hm, Jw, n, True)
        _fd_block(G_CQV, fns, p, n, m, t1, W, ws, Cq, Jw, 2 * n + m, 0, hhat)
        _constraint_jacobian(fns, p, n, m, t1, qv, Cq)
        _put_cq(Jw, Cq, n, m, 2 * n, 0)
        _put_cq(Jw, Cq, n, m, 2 * n + m, n)


# ---------------------------------------------------------------------------------
# index 1 (BDFIndex1._solve): unknowns x = (δ, ĥε, ĥ²Δa, ĥ²Δλ, ĥ²τ... as
# bdf.py: τ and μ unscaled), rows (ĥ²·dynamics, ĥ·(ĥv' − ĥa + C_qᵀτ),
# ĥq' − ĥv + C_qᵀμ, C, ĥ·(C_q v + C_t), ĥ²·(C_q a − γ))
# ---------------------------------------------------------------------------------
def _point1(W, n, m, ws, hhat, h2):
    """q, v, a, λ, τ (in tq), μ at predictor + x."""
    ypred, zpred, delta = ws[WS_YPRED], ws[WS_ZPRED], ws[WS_DELTA]
    q, v, a, lam, tq, mu = ws[WS_Q], ws[WS_V], ws[WS_A], ws[WS_LAM], ws[WS_TQ], ws[WS_MU]
    for i in range(n):
        W[q + i] = W[ypred + i] + W[delta + i]
        W[v + i] = W[ypred + n + i] + W[delta + n + i] / hhat
        W[a + i] = W[zpred + i] + W[delta + 2 * n + i] / h2
    for k in range(m):
        W[lam + k] = W[zpred + n + k] + W[delta + 3 * n + k] / h2
        W[tq + k] = W[delta + 3 * n + m + k]
        W[mu + k] = W[delta + 3 * n + 2 * m + k]


def _residual1(fns, p, u, n, m, t1, hhat, h2, W, ws, M, Cq):
    q, v, a, lam, Q, F = ws[WS_Q], ws[WS_V], ws[WS_A], ws[WS_LAM], ws[WS_QF], ws[WS_F]
    ct, g0, g1, mu, tq = ws[WS_CT], ws[WS_G0], ws[WS_G1], ws[WS_MU], ws[WS_TQ]
    ydpred, delta = ws[WS_YDPRED], ws[WS_DELTA]
    _point1(W, n, m, ws, hhat, h2)
    qv, vv, av = W[q:q + n], W[v:v + n], W[a:a + n]
    _mass_and_forces(fns, p, u, n, t1, qv, vv, W, Q, M)
    for i in range(n):
        W[F + i] = h2 * (_dot(M, i, av, n) - W[Q + i])
        W[F + n + i] = hhat * (hhat * W[ydpred + n + i] + W[delta + n + i] / hhat) - h2 * W[a + i]
        W[F + 2 * n + i] = hhat * W[ydpred + i] + W[delta + i] - hhat * W[v + i]
    if m > 0:
        _cqv(fns, p, n, m, t1, qv, vv, Cq, W, ct, g0)
        _add_cq_t(Cq, W[lam:lam + m], h2, W, F, n, m)
        _add_cq_t(Cq, W[tq:tq + m], 1.0, W, F + n, n, m)
        _add_cq_t(Cq, W[mu:mu + m], 1.0, W, F + 2 * n, n, m)
        _constraints(fns, p, m, t1, qv, W, F + 3 * n)
        _gamma_at(fns, p, m, t1, qv, vv, W, g1)
        for k in range(m):
            W[F + 3 * n + m + k] = hhat * W[g0 + k]
            W[F + 3 * n + 2 * m + k] = h2 * (_dot(Cq, k, av, n) - W[g1 + k])


def _jacobian1(fns, p, u, n, m, t1, hhat, h2, const_mass, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw):
    q, mu, tq = ws[WS_Q], ws[WS_MU], ws[WS_TQ]
    N = 3 * n + 3 * m
    i_a, i_l, i_t, i_m = 2 * n, 3 * n, 3 * n + m, 3 * n + 2 * m
    _point1(W, n, m, ws, hhat, h2)
    qv = W[q:q + n]
    _matrices(fns, p, u, n, m, t1, W, ws, const_mass, M, Qq, Qv, Hm, Mq, Jw, N)
    for i in range(n):
        for j in range(n):
            Jw[i, j] = h2 * _stiffness(Qq, Hm, Mq, i, j, m, const_mass, False)
            Jw[i, n + j] = -hhat * Qv[i, j]
            Jw[i, i_a + j] = M[i, j]
        Jw[n + i, n + i] = 1.0
        Jw[n + i, i_a + i] = -1.0
        Jw[i_a + i, i] = 1.0
        Jw[i_a + i, n + i] = -1.0
    if m > 0:
        _constraint_jacobian(fns, p, n, m, t1, qv, Cq)
        _put_cq(Jw, Cq, n, m, i_l, 0)
        _put_cq(Jw, Cq, n, m, i_t, n)
        _put_cq(Jw, Cq, n, m, i_m, i_a)
        _hessian_rows(fns, p, n, m, t1, qv, W, tq, Hm, Jw, n, False)
        _hessian_rows(fns, p, n, m, t1, qv, W, mu, Hm, Jw, i_a, True)
        # ĥ ∂(C_q v + C_t)/∂q, ĥ² ∂(C_q a − γ)/∂q and −ĥ ∂γ/∂v by forward differences
        _fd_block(G_CQV, fns, p, n, m, t1, W, ws, Cq, Jw, i_t, 0, hhat)
        _fd_block(G_CQA, fns, p, n, m, t1, W, ws, Cq, Jw, i_m, 0, h2)
        _fd_block(G_GAMMA, fns, p, n, m, t1, W, ws, Cq, Jw, i_m, n, -hhat)


def _newton_job(job, fns, S, I, LU, piv, N, p, u, n, m, t1, hhat, h2, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw):
    """A job of kernel_common.quasi_newton: ‖Δδ‖ (the RMS norm of the weights in W[w2]
    over the entries the formulation weighs: q; q, v; q, v, a), the residual of the
    variant, or the matrix formed and factored (:func:`_form_matrix`).  Returns the
    answer (a failure: the status)."""
    variant = I[VARIANT]
    if job == JOB_NORM:
        F, w2 = W[ws[WS_F]:], W[ws[WS_W2]:]
        s2 = 0.0
        for i in range((variant + 1) * n):   # ‖Δδ‖ (eq. 35; W[w2]: squared weights over their count)
            s2 += F[i] * F[i] * w2[i]
        return math.sqrt(s2)
    if job == JOB_MATRIX:
        return float(_form_matrix(fns, S, I, LU, piv, N, p, u, n, m, t1, hhat, h2, W, ws, M, Qq, Qv,
                                  Hm, Mq, Cq, Jw))
    if variant == INDEX3:
        _residual(fns, p, u, n, m, t1, hhat, h2, W, ws, M, Cq)
    elif variant == INDEX2:
        _residual2(fns, p, u, n, m, t1, hhat, h2, W, ws, M, Cq)
    else:
        _residual1(fns, p, u, n, m, t1, hhat, h2, W, ws, M, Cq)
    return 0.0


def _newton(fns, S, I, LU, p, u, n, m, t1, hhat, h2, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw):
    """Algorithm 2 (kernel_common.quasi_newton, the prior-rate test on) in the norm of
    :func:`_newton_job`.  Returns (converged, status); δ in W[delta], on a failure of
    the iteration the reason (quasi_newton's: R_RESIDUAL, R_UPDATE, R_NO_CONVERGENCE)
    in I[REASON]."""
    N = I[I_NS]
    delta, F, piv = W[ws[WS_DELTA]:ws[WS_DELTA] + N], W[ws[WS_F]:ws[WS_F] + N], I[PIV:PIV + N]
    job, state = newton_begin(S, I, delta, N, NEWTON_RULE)
    x = 0.0
    while job < NEWTON_END:
        x = _newton_job(job, fns, S, I, LU, piv, N, p, u, n, m, t1, hhat, h2, W, ws, M, Qq, Qv, Hm, Mq,
                        Cq, Jw)
        job, state = quasi_newton(job, x, state, S, I, LU, piv, F, delta, N, hhat, NEWTON_TOL,
                                  NEWTON_ERR_TOL, False, NEWTON_RULE)
    reason = job - NEWTON_END
    if reason == QN_ABORTED:
        return False, int(x)
    if reason != QN_SOLVED:
        I[REASON] = reason
    return reason == QN_SOLVED, OK


def _form_matrix(fns, S, I, LU, piv, N, p, u, n, m, t1, hhat, h2, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw):
    """The iteration matrix of the formulation at the current δ, kept in S for the
    next step's reuse (HAS_J) and factored into LU.  Returns OK, NONFINITE_MATRIX or
    SINGULAR (pivot ratio in S[F_INFO])."""
    variant = I[VARIANT]
    const_mass = I[CONST_MASS] == 1
    if variant == INDEX3:
        _jacobian(fns, p, u, n, m, t1, hhat, h2, const_mass, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw)
    elif variant == INDEX2:
        _jacobian2(fns, p, u, n, m, t1, hhat, h2, const_mass, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw)
    else:
        _jacobian1(fns, p, u, n, m, t1, hhat, h2, const_mass, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw)
    I[ST_JAC] += 1
    o_J = offsets(n, m, N)[O_J]
    for i in range(N):
        for j in range(N):
            S[o_J + i * N + j] = Jw[i, j]
    I[HAS_J] = 1
    formed, ratio = factor_matrix(Jw, LU, piv, N)
    if formed == MATRIX_NONFINITE:
        return NONFINITE_MATRIX
    if formed == MATRIX_SINGULAR:
        I[HAS_FACTOR] = 0
        S[F_INFO] = ratio
        return SINGULAR
    return OK
