"""The corrector of generalized-α (:mod:`cosim.integrators.ga_kernel`): residuals,
iteration matrices and norms of the index-3 (eqs. 32-33, scaled) and GGL (eqs. 38-39)
forms, and the quasi-Newton solve (seed 000 Algorithm 2)."""
import math

import numpy as np

from .ga_record import (CONST_MASS, EPS, FIXED_NEWTON_REL, F_INFO, GGL, GGL_RATE_TOL, HAS_FACTOR,
    H_FIXED, H_JAC, NEED_JAC, NEWTON_ERR_TOL, NEWTON_FAILED, NEWTON_MAX_ITER, NEWTON_TOL,
    NONFINITE_MATRIX, OK, PIV, REASON, RELAX, ROUNDOFF,
    SIGMA, SINGULAR, ST_JAC, ST_LU, ST_NEWTON, ST_RES, W_C, W_CQ, W_CT, W_FORCES, W_G0, W_G1, W_LAM,
    W_M, W_MU, W_Q, W_QD, W_QDD, W_QX, W_V, W_X_HAT, matrix_size)
from .ga_terms import (_nh_jacobian, _nh_residual, n_nonholonomic)
from .kernel_common import (FN_CONSTRAINTS, FN_CONSTRAINT_DT, FN_CONSTRAINT_FORCE_JACOBIAN,
    FN_CONSTRAINT_JACOBIAN, FN_FORCES, FN_FORCE_JACOBIANS, FN_MASS, FN_MASS_JACOBIAN_TERM,
    JOB_MATRIX, JOB_NORM, JOB_RESIDUAL, MATRIX_NONFINITE, MATRIX_SINGULAR, NEWTON_END, NS_DNORM, NS_FRESH,
    NS_ITERATION, QN_ABORTED, QN_SOLVED, factor_matrix, newton_begin, quasi_newton, weighted_max)

# kernel_common.newton_begin's rule: Algorithm 2 with the prior-rate test and the stall test
NEWTON_RULE = (NEWTON_MAX_ITER, 1, 1, HAS_FACTOR, ST_LU, NEED_JAC, ST_RES, ST_NEWTON, H_JAC, RELAX, SIGMA)


# ---------------------------------------------------------------------------------
# one Newton solve (seed 000 Algorithm 2: quasi-Newton with Jacobian/LU reuse and relaxation)
# ---------------------------------------------------------------------------------
def _residual(fns, p, u, n, m, t1, q0, v0, qdd0, lam_hat, bh2, gh, eta, delta, F, work):
    """Eq. 32: [M(q) q'' − Q(q, q') + C_qᵀ λ ;  C(q)/(β h²)] at predictor + δ."""
    q, v, qdd, lam, M, Q = work[W_Q], work[W_V], work[W_QDD], work[W_LAM], work[W_M], work[W_FORCES]
    Cq, C = work[W_CQ], work[W_C]
    for i in range(n):
        q[i] = q0[i] + bh2 * delta[i]
        v[i] = v0[i] + gh * delta[i]
        qdd[i] = qdd0[i] + eta * delta[i]
    M[:, :] = 0.0
    fns[FN_MASS](q, t1, p, M)
    Q[:] = 0.0
    fns[FN_FORCES](q, v, t1, u, p, Q)
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += M[i, j] * qdd[j]
        F[i] = s - Q[i]
    _nh_residual(fns, p, n, m, t1, q, v, lam_hat, delta, n + m, 0, gh, F)   # seed 000 §7
    if m > 0:
        for k in range(m):
            lam[k] = lam_hat[k] + delta[n + k]
        Cq[:, :] = 0.0
        fns[FN_CONSTRAINT_JACOBIAN](q, t1, p, Cq)
        for i in range(n):
            s = 0.0
            for k in range(m):
                s += Cq[k, i] * lam[k]
            F[i] += s
        C[:] = 0.0
        fns[FN_CONSTRAINTS](q, t1, p, C)
        inv = 1.0 / bh2
        for k in range(m):
            F[n + k] = inv * C[k]


def _jacobian(fns, p, u, n, m, t1, q0, v0, qdd0, lam_hat, bh2, gh, eta, const_mass, delta, J, cg):
    """Eq. 33: [[η M + β h² (−Q_q + (C_qᵀλ)_q + (M a)_q) − γ h Q_v, C_qᵀ], [C_q, 0]]
    (nonholonomic rows: _nh_jacobian with cg = (β/γ) h)."""
    q = q0 + bh2 * delta[:n]
    v = v0 + gh * delta[:n]
    qdd = qdd0 + eta * delta[:n]
    Qq = np.zeros((n, n))
    Qv = np.zeros((n, n))
    fns[FN_FORCE_JACOBIANS](q, v, t1, u, p, Qq, Qv)
    K = -Qq
    if m > 0:
        lam = lam_hat + delta[n:]
        H = np.zeros((n, n))
        fns[FN_CONSTRAINT_FORCE_JACOBIAN](q, lam, t1, p, H)
        K = K + H
    _nh_jacobian(fns, p, n, m, t1, q, v, lam_hat, delta, n + m, 0, -1, cg, K, J)
    if not const_mass:
        Mq = np.zeros((n, n))
        fns[FN_MASS_JACOBIAN_TERM](q, qdd, t1, p, Mq)
        K = K + Mq
    M = np.zeros((n, n))
    fns[FN_MASS](q, t1, p, M)
    J[:n, :n] = eta * M + bh2 * K - gh * Qv
    if m > 0:
        Cq = np.zeros((m, n))
        fns[FN_CONSTRAINT_JACOBIAN](q, t1, p, Cq)
        J[:n, n:n + m] = Cq.T
        J[n:n + m, :n] = Cq
        J[n:, n:] = 0.0


def _norm(dd, n, m, scale, CqT, lam_scale):
    """The Newton norm: position/velocity change of Δx, and
    the multipliers' effect C_qᵀ Δz on q, in the weighted norm eq. 35."""
    r = weighted_max(dd, scale, n)
    if m > 0:
        r2 = 0.0
        for i in range(n):
            s = 0.0
            for k in range(m):
                s += CqT[i, k] * dd[n + k]
            x = abs(s) * lam_scale[i]
            if x > r2 or x != x:
                r2 = x
        if r2 > r or r2 != r2:
            r = r2
    return r


# -- the GGL form: unknowns δ = (Δx, Δy, Δλ, μ),
#    q = q0 + β h x,  q' = q'0 + γ x,  v = v0 + γ h y,  v' = q''0 + η y  (eq. 37 predictor
#    with the extrapolated innovations folded into q0, q'0, v0, q''0)
def _cqv(fns, p, n, m, t1, q, v, Cq, Ct, out):
    """C_q(q) v + C_t(q) into ``out`` (Cq, Ct overwritten)."""
    Cq[:, :] = 0.0
    fns[FN_CONSTRAINT_JACOBIAN](q, t1, p, Cq)
    Ct[:] = 0.0
    fns[FN_CONSTRAINT_DT](q, t1, p, Ct)
    for k in range(m):
        s = 0.0
        for j in range(n):
            s += Cq[k, j] * v[j]
        out[k] = s + Ct[k]


def _residual_ggl(fns, p, u, n, m, t1, q0, qd0, v0, qdd0, lam_hat, bh, g, gh, eta, delta, F, work):
    """Eq. 38: [q' − v + C_qᵀ μ ; M v' − Q + C_qᵀ λ ; C/(β h) ; (C_q v + C_t)/(γ h)]."""
    q, v, vd, lam, M, Q = work[W_Q], work[W_V], work[W_QDD], work[W_LAM], work[W_M], work[W_FORCES]
    Cq, C = work[W_CQ], work[W_C]
    qd, mu, Ct = work[W_QD], work[W_MU], work[W_CT]
    for i in range(n):
        q[i] = q0[i] + bh * delta[i]
        qd[i] = qd0[i] + g * delta[i]
        v[i] = v0[i] + gh * delta[n + i]
        vd[i] = qdd0[i] + eta * delta[n + i]
    M[:, :] = 0.0
    fns[FN_MASS](q, t1, p, M)
    Q[:] = 0.0
    fns[FN_FORCES](q, v, t1, u, p, Q)
    for i in range(n):
        F[i] = qd[i] - v[i]
        s = 0.0
        for j in range(n):
            s += M[i, j] * vd[j]
        F[n + i] = s - Q[i]
    i_mu = F.shape[0] - m   # δ = (x, y, λ, ν, μ)
    if m > 0:
        for k in range(m):
            lam[k] = lam_hat[k] + delta[2 * n + k]
            mu[k] = delta[i_mu + k]
        Cq[:, :] = 0.0
        fns[FN_CONSTRAINT_JACOBIAN](q, t1, p, Cq)
        for i in range(n):
            s1 = 0.0
            s2 = 0.0
            for k in range(m):
                s1 += Cq[k, i] * mu[k]
                s2 += Cq[k, i] * lam[k]
            F[i] += s1
            F[n + i] += s2
        C[:] = 0.0
        fns[FN_CONSTRAINTS](q, t1, p, C)
        inv_bh, inv_gh = 1.0 / bh, 1.0 / gh
        for k in range(m):
            F[2 * n + k] = inv_bh * C[k]
        _cqv(fns, p, n, m, t1, q, v, Cq, Ct, work[W_G0])
        for k in range(m):
            F[2 * n + m + k] = inv_gh * work[W_G0][k]
    _nh_residual(fns, p, n, m, t1, q, v, lam_hat, delta, 2 * n + m, n, gh, F)   # seed 000 eq. 94


def _jacobian_ggl(fns, p, u, n, m, t1, q0, v0, qdd0, lam_hat, bh, b, g, gh, eta, const_mass,
                  delta, J, work):
    """Eq. 39, columns (x, y, λ, μ): [[γ I + β h (C_qᵀμ)_q, −γ h I, 0, C_qᵀ],
    [β h (−Q_q + (M v')_q + (C_qᵀλ)_q), η M − γ h Q_v, C_qᵀ, 0], [C_q, 0, 0, 0],
    [(β/γ) (C_q v + C_t)_q, C_q, 0, 0]]; (C_q v + C_t)_q by forward differences
    (common.fd_jacobian, the same steps); nonholonomic rows and ν columns: _nh_jacobian."""
    q = q0 + bh * delta[:n]
    v = v0 + gh * delta[n:2 * n]
    vd = qdd0 + eta * delta[n:2 * n]
    J[:, :] = 0.0
    Qq = np.zeros((n, n))
    Qv = np.zeros((n, n))
    fns[FN_FORCE_JACOBIANS](q, v, t1, u, p, Qq, Qv)
    K = -Qq
    if not const_mass:
        Mq = np.zeros((n, n))
        fns[FN_MASS_JACOBIAN_TERM](q, vd, t1, p, Mq)
        K = K + Mq
    M = np.zeros((n, n))
    fns[FN_MASS](q, t1, p, M)
    for i in range(n):
        J[i, i] = g
        J[i, n + i] = -gh
        for j in range(n):
            J[n + i, n + j] = eta * M[i, j] - gh * Qv[i, j]
    i_mu = J.shape[0] - m   # columns (x, y, λ, ν, μ)
    if m > 0:
        lam = lam_hat + delta[2 * n:i_mu]
        mu = delta[i_mu:]
        H = np.zeros((n, n))
        fns[FN_CONSTRAINT_FORCE_JACOBIAN](q, lam, t1, p, H)
        K = K + H
        Hmu = np.zeros((n, n))
        fns[FN_CONSTRAINT_FORCE_JACOBIAN](q, mu, t1, p, Hmu)
        Cq, Ct, g0, g1, qx = work[W_CQ], work[W_CT], work[W_G0], work[W_G1], work[W_QX]
        for i in range(n):
            for j in range(n):
                J[i, j] += bh * Hmu[i, j]
        _cqv(fns, p, n, m, t1, q, v, Cq, Ct, g0)
        sq = math.sqrt(EPS)
        bg = b / g
        for j in range(n):
            qx[:] = q
            hj = sq * max(abs(q[j]), 1e-3)
            qx[j] += hj
            hj = qx[j] - q[j]  # exactly representable step
            _cqv(fns, p, n, m, t1, qx, v, Cq, Ct, g1)
            for k in range(m):
                J[2 * n + m + k, j] = bg * ((g1[k] - g0[k]) / hj)
        Cq[:, :] = 0.0
        fns[FN_CONSTRAINT_JACOBIAN](q, t1, p, Cq)
        for k in range(m):
            for j in range(n):
                J[j, i_mu + k] = Cq[k, j]
                J[n + j, 2 * n + k] = Cq[k, j]
                J[2 * n + k, j] = Cq[k, j]
                J[2 * n + m + k, n + j] = Cq[k, j]
    _nh_jacobian(fns, p, n, m, t1, q, v, lam_hat, delta, 2 * n + m, n, n, b / g, K, J)
    for i in range(n):
        for j in range(n):
            J[n + i, j] = bh * K[i, j]


def _amax(a):
    """max |…| of an array as numpy's .max(): NaN propagates."""
    r = -math.inf
    for i in range(a.shape[0]):
        x = a[i]
        if x > r or x != x:
            r = x
            if x != x:
                return x
    return r


def _pymax(a, b):
    """Python's max(a, b) (keeps a unless b > a)."""
    return b if b > a else a


def _norm_ggl(dd, n, m, mz, sx, sy, CqT, s_lam, s_mu, tmp):
    """The Newton norm of the GGL form: position change β h Δx (W_q),
    velocity change γ h Δy (W_v with the rounding floor), the multipliers
    through [C_q; B]ᵀ (λ, ν on the velocity scale) and C_qᵀ (μ, position scale)."""
    if n == 0:
        return 0.0
    val = _pymax(weighted_max(dd, sx, n), weighted_max(dd[n:], sy, n))
    if mz > 0:
        val = _pymax(val, _rows_norm(dd, 2 * n, n, mz, CqT, s_lam, tmp))
    if m > 0:
        val = _pymax(val, _rows_norm(dd, 2 * n + mz, n, m, CqT, s_mu, tmp))
    return val


def _rows_norm(dd, off, n, m, CqT, sc, tmp):
    """max |C_qᵀ dd[off:off+m]| · sc (the first m columns of CqT)."""
    for i in range(n):
        s = 0.0
        for k in range(m):
            s += CqT[i, k] * dd[off + k]
        tmp[i] = abs(s) * sc[i]
    return _amax(tmp)


def _newton(fns, S, I, LU, p, u, n, m, t1, h, q0, v0, qdd0, lam_hat, bh2, gh, eta, scale, CqT,
            lam_scale, scale_r, lam_scale_r, delta, F, Jw, work, ggl, qd0, b, g, sy, s_mu):
    """Returns (converged, iterations, status); δ in ``delta``.  The decisions are
    kernel_common's (Algorithm 2).  With ``ggl`` the GGL form (eqs. 38-39): ``bh2``
    is then β h (q = q0 + β h x), ``scale`` and ``lam_scale`` are its s_x and s_λ,
    ``qd0``, ``sy``, ``s_mu`` its own, and it accepts on the rate test
    σ/(1−σ)‖Δδ‖ < GGL_RATE_TOL only, or on a stall below NEWTON_TOL with a matrix
    formed in this solve."""
    mz = m + n_nonholonomic(I)
    N = matrix_size(n, m, ggl, mz - m)
    piv = I[PIV:PIV + N]
    # fixed step, index 3: tolerances relative to the step's innovation (FIXED_NEWTON_REL)
    rel = S[H_FIXED] > 0.0 and not ggl
    rnd, rnd_q = _rounding_floors(n, q0, v0, scale, bh2, gh) if rel else (0.0, 0.0)
    tol = NEWTON_TOL
    err_tol = GGL_RATE_TOL if ggl else NEWTON_ERR_TOL
    job, state = newton_begin(S, I, delta, N, NEWTON_RULE)
    x = 0.0
    while job < NEWTON_END:   # kernel_common.quasi_newton's jobs
        if job == JOB_MATRIX:
            x = float(_form_matrix(fns, S, I, LU, piv, N, p, u, n, m, t1, h, q0, v0, qdd0, lam_hat,
                                   bh2, gh, eta, delta, Jw, work, ggl, b, g))
        elif job == JOB_RESIDUAL:
            x = 0.0
            if ggl:
                _residual_ggl(fns, p, u, n, m, t1, q0, qd0, v0, qdd0, lam_hat, bh2, g, gh, eta, delta, F, work)
            else:
                _residual(fns, p, u, n, m, t1, q0, v0, qdd0, lam_hat, bh2, gh, eta, delta, F, work)
        elif job == JOB_NORM:
            if ggl:
                x = _norm_ggl(F, n, m, mz, scale, sy, CqT, lam_scale, s_mu, work[W_QX])  # (q + h e_j: scratch)
            else:
                x = _norm(F, n, mz, scale, CqT, lam_scale)
            if rel:
                tol = _pymax(min(NEWTON_TOL, FIXED_NEWTON_REL * _innovation(n, work[W_X_HAT], delta, scale)), rnd)
                err_tol = tol * (NEWTON_ERR_TOL / NEWTON_TOL)
        else:   # JOB_STALL: stalled at the rounding level is converged
            if ggl:
                stalled = state[NS_DNORM] < NEWTON_TOL and state[NS_FRESH] == 1   # with a matrix formed in this solve
            elif rel:   # fixed step: a stall at the rounding of q
                stalled = state[NS_DNORM] < _pymax(tol, rnd_q)
            else:
                stalled = _norm(F, n, mz, scale_r, CqT, lam_scale_r) < NEWTON_TOL
            x = 1.0 if stalled else 0.0
        job, state = quasi_newton(job, x, state, S, I, LU, piv, F, delta, N, h, tol, err_tol, ggl,
                                  NEWTON_RULE)
    reason = job - NEWTON_END
    if reason == QN_SOLVED or reason == QN_ABORTED:
        return reason == QN_SOLVED, state[NS_ITERATION], (OK if reason == QN_SOLVED else int(x))
    I[REASON] = reason   # quasi_newton's reasons are R_RESIDUAL, R_UPDATE, R_NO_CONVERGENCE
    return False, state[NS_ITERATION], NEWTON_FAILED


def _form_matrix(fns, S, I, LU, piv, N, p, u, n, m, t1, h, q0, v0, qdd0, lam_hat, bh2, gh, eta,
                 delta, Jw, work, ggl, b, g):
    """The iteration matrix at the current δ (eq. 33, or the GGL eq. 39), factored into
    LU.  Returns OK, NONFINITE_MATRIX, or SINGULAR (pivot ratio in S[F_INFO])."""
    const_mass = I[CONST_MASS] == 1
    if ggl:
        _jacobian_ggl(fns, p, u, n, m, t1, q0, v0, qdd0, lam_hat, bh2, b, g, gh, eta, const_mass,
                      delta, Jw, work)
    else:
        _jacobian(fns, p, u, n, m, t1, q0, v0, qdd0, lam_hat, bh2, gh, eta, const_mass, delta, Jw,
                  (b / g) * h)
    I[ST_JAC] += 1
    formed, ratio = factor_matrix(Jw, LU, piv, N)
    if formed == MATRIX_NONFINITE:
        return NONFINITE_MATRIX
    if formed == MATRIX_SINGULAR:
        I[HAS_FACTOR] = 0
        S[F_INFO] = ratio
        return SINGULAR
    return OK


def _innovation(n, x_hat, delta, scale):
    """‖x‖ in the Newton norm, x = x̂ + δ the innovation of the step so far."""
    xn = 0.0
    for i in range(n):
        e = abs(x_hat[i] + delta[i]) * scale[i]
        if e > xn:
            xn = e
    return xn


def _rounding_floors(n, q0, v0, scale, bh2, gh):
    """Fixed step, index 3: the rounding-level updates in the Newton norm, (rnd, rnd_q).
    rnd_q changes q by ROUNDOFF·ε·max(1, |q|) (where C(q)/(β h²) leaves x, the floor
    of a stall), rnd (≤ rnd_q) changes v by ROUNDOFF·ε·max(1, |v|): a Newton error at
    the q level is γ/(β h) times that in v, and accumulates over the steps."""
    qmax = 1.0
    vmax = 1.0
    smax = 0.0
    for i in range(n):
        if abs(q0[i]) > qmax:
            qmax = abs(q0[i])
        if abs(v0[i]) > vmax:
            vmax = abs(v0[i])
        if scale[i] > smax:
            smax = scale[i]
    rnd_q = ROUNDOFF * EPS * smax * qmax / bh2
    return min(rnd_q, ROUNDOFF * EPS * smax * vmax / gh), rnd_q
