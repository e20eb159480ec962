"""Penalty formulation + Runge-Kutta-Chebyshev (rkc-penalty; seed 000 §6, eqs. 90-92)
as pure functions on one flat state record: the one implementation, run compiled
(numba, compiled once per machine by :func:`cosim.jit.method_entry`) or as plain
Python (the same functions); the integrator object around it is
:mod:`cosim.integrators.rkc` (which also describes the method).

* the right-hand side y' of eqs. 91-92, both solves with one LU of J (eq. 89; J
  formed and factorised by :mod:`.index1_kernel`, shared with dopri5/rk4, as is
  its right-hand side [Q; γ; γ_G]), or of the Bayo form (M + α C_qᵀC_q) v' = …
  (its LU by :func:`kernel_common.factor_matrix`);
* the spectral radius ρ of ∂f/∂y by the nonlinear power method of rkc.f (RKCRHO),
  warm-started from the last eigenvector;
* the stage count s = 1 + ⌊√(1 + 1.54 h ρ)⌋, the coefficients of the s-stage
  second-order RKC scheme (damping ε) and its stage recursion;
* the error estimate 0.8 (y_n − y_{n+1}) + 0.4 h (f_n + f_{n+1}), the step
  controller of rkc.f, the step clamp (:func:`kernel_common.clamp_step`).

The record (everything the method remembers): ``S`` float64 — explicit_record's
scalar slots, rkc-penalty's (ρ, χ, α, ξ, ε, h_last, err_last), then y, y_prev,
q'', λ, f_cur, the dense data f0, f1 (cubic Hermite), the power method's
eigenvector; ``I`` int64 — explicit_record's slots (sizes, flags, statistics),
rkc-penalty's (eigenvector valid, steps since the last ρ estimate, last and
largest stage count, max_stages, rho_interval), then the pivots of J; ``LU`` the
factor of J of the last evaluation (work space).  No exceptions inside: status
and cause codes, which the integrator object turns into its messages.
"""
import math

from .dense_lu import lu_solve_inplace
from .index1_kernel import (_factor_and_rhs, _nh_offset, keep_current_derivative,
                            n_nonholonomic)
from .kernel_common import (FACTORED, FN_CONSTRAINTS, FN_CONSTRAINT_DT, FN_CONSTRAINT_JACOBIAN,
    FN_FORCES, FN_GAMMA, FN_MASS, MATRIX_NONFINITE, all_finite, clamp_step, end_advance, error_ratio,
    factor_matrix, fixed_step_resolved, forget_step, keep_alive, model_outputs, reduced_step, unowned)

# the record: every name, so that rkc_kernel is the method's one namespace
from .rkc_record import (  # noqa: F401
    ALPHA, ATOL, CAUSE, CF_A, CF_C, CF_MU, CF_MU_TILDE, CF_NU, CHI, C_NONE, C_NONFINITE_MATRIX,
    C_NONFINITE_SOLUTION, C_SINGULAR, DAMPING, DENSE_H, EPS, ERR_LAST, FIXED_ERR, FIXED_RTOL,
    FIXED_SLOTS, FIXED_UNRESOLVED, F_CINFO, F_CT, F_ERR, F_H, F_HRHO, F_T, HAS_DENSE,
    HAS_EIGVEC, HAS_F, H_FIXED, H_LAST, H_NEXT, I_M, I_N, I_NG, I_NY, LAST_STAGES,
    MAX_REJECTIONS, MAX_STAGES, MAX_STAGES_USED, MAX_STEP, NONFINITE_DERIVATIVE,
    NONFINITE_MATRIX, N_CF, N_STATS, OK, ONE_STEP, RESTART, RESTART_THEN_ADVANCE, RHO,
    RHO_FAILED, RHO_INTERVAL, RHO_MAX_ITER, RHO_SAFETY, RKC_FAILURE_SLOTS, RKC_O_D, RKC_O_E,
    RKC_O_END, RKC_O_F, RKC_O_LAM, RKC_O_QDD, RKC_O_Y, RKC_O_YP, RKC_PIV, RKC_REFUSAL,
    RKC_SCALARS, RTOL, SINGULAR, STAGES_EXCEEDED, STAGE_FACTOR, STATS, STEPS_SINCE_RHO,
    STEP_BUDGET, STEP_FAILED, ST_LU, ST_REJ, ST_RES, ST_STEPS, T, TOO_SMALL, T_PREV, UNDERFLOW,
    WHOLE_INTERVAL, W_BAYO, W_BAYO_LU, W_BAYO_PIV, W_C, W_COEF, W_CQ, W_CT, W_EST, W_FORCES,
    W_F_END, W_F_START, W_F_TRIAL, W_GAMMA, W_LAM_END, W_LAM_TRIAL, W_M, W_PROBE, W_Q, W_RHS,
    W_RHS91, W_STAGES, W_V, W_Y_START, XI, rkc_int_length, rkc_offsets, rkc_workspace)

# inlined by numba into their one caller (cosim.jit.method_inlined): the per-step
# helpers (most take the work tuples, passed member by member to a function compiled
# on its own)
INLINED = ("restart", "_start_point", "_accept", "_control", "_rkc_stages", "stages_for",
           "rkc_coefficients_into", "chebyshev_w", "_penalty_work", "_bayo_work", "_bayo_evaluate",
           "estimate_rho", "_norm2")


def restart(S, I):
    """Integrator.restart: no f at the current point, no dense output, no controller
    memory (h_last, err_last); t_prev = t, y_prev = y.  ρ and its eigenvector stay."""
    ny = I[I_NY]
    o_y, o_yp = RKC_SCALARS, RKC_SCALARS + ny
    I[HAS_F] = 0
    I[HAS_DENSE] = 0
    S[H_LAST] = 0.0
    S[ERR_LAST] = 0.0
    forget_step(S, T, T_PREV, o_y, o_yp, ny)
    return OK


# ---------------------------------------------------------------------------------
# the RKC scheme (Sommeijer, Shampine & Verwer 1997, rkc.f)
# ---------------------------------------------------------------------------------
def chebyshev_w(s, damping):
    """(w0, w1) of the damped s-stage scheme: w0 = 1 + ε/s², w1 = T_s'(w0)/T_s''(w0)
    (undamped, ε = 0: the limit w0 = 1, w1 = 3/(s² − 1))."""
    w0 = 1.0 + damping / (s * s)
    temp1 = w0 * w0 - 1.0
    if not temp1 > 0.0:
        return w0, 3.0 / (s * s - 1)
    temp2 = math.sqrt(temp1)
    arg = s * math.log(w0 + temp2)
    w1 = math.sinh(arg) * temp1 / (math.cosh(arg) * s * temp2 - w0 * math.sinh(arg))
    return w0, w1


def rkc_coefficients_into(s, damping, C):
    """C[j − 1] = (μ_j, ν_j, μ̃_j, a_{j−1}, c_j) for j = 1..s of 2nd-order RKC:
    Y_j = (1−μ−ν) y_n + μ Y_{j−1} + ν Y_{j−2} + h μ̃ (F(Y_{j−1}) − a_{j−1} F_n),
    Y_1 = y_n + h μ̃_1 F_n (rkc.f)."""
    w0, w1 = chebyshev_w(s, damping)
    bjm1 = 1.0 / (2.0 * w0) ** 2
    bjm2 = bjm1
    mus = w1 * bjm1
    C[0, CF_MU] = 0.0
    C[0, CF_NU] = 0.0
    C[0, CF_MU_TILDE] = mus
    C[0, CF_A] = 0.0
    C[0, CF_C] = mus
    thjm2, thjm1 = 0.0, mus
    zjm1, zjm2 = w0, 1.0
    dzjm1, dzjm2 = 1.0, 0.0
    d2zjm1, d2zjm2 = 0.0, 0.0
    for j in range(1, s):
        zj = 2.0 * w0 * zjm1 - zjm2
        dzj = 2.0 * w0 * dzjm1 - dzjm2 + 2.0 * zjm1
        d2zj = 2.0 * w0 * d2zjm1 - d2zjm2 + 4.0 * dzjm1
        bj = d2zj / dzj ** 2
        ajm1 = 1.0 - zjm1 * bjm1
        mu = 2.0 * w0 * bj / bjm1
        nu = -bj / bjm2
        mus = mu * w1 / w0
        thj = mu * thjm1 + nu * thjm2 + mus * (1.0 - ajm1)
        C[j, CF_MU] = mu
        C[j, CF_NU] = nu
        C[j, CF_MU_TILDE] = mus
        C[j, CF_A] = ajm1
        C[j, CF_C] = thj
        thjm2, thjm1 = thjm1, thj
        bjm2, bjm1 = bjm1, bj
        zjm2, zjm1 = zjm1, zj
        dzjm2, dzjm1 = dzjm1, dzj
        d2zjm2, d2zjm1 = d2zjm1, d2zj


def stages_for(h_rho, max_stages):
    """Smallest stage count whose stability interval covers h ρ, within [2, max_stages]
    (rkc.f)."""
    s = 1 + int(math.sqrt(1.0 + STAGE_FACTOR * max(h_rho, 0.0)))
    return min(max(s, 2), max_stages)


def _norm2(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * x[i]
    return math.sqrt(s)


# ---------------------------------------------------------------------------------
# the work arrays a helper is given: only those it uses (numba increfs and decrefs
# every array of a tuple argument on each call; the whole workspace is 23)
# ---------------------------------------------------------------------------------
def _penalty_work(w):
    """An evaluation's work arrays: the index-1 form's w[W_Q] .. w[W_CT] and
    w[W_RHS91], at the same W_ indices (for :func:`_penalty_evaluate`)."""
    return (w[W_Q], w[W_V], w[W_M], w[W_CQ], w[W_FORCES], w[W_GAMMA], w[W_RHS], w[W_C], w[W_CT],
            w[W_RHS91])


def _bayo_work(w):
    """The Bayo form's matrix, its LU and pivots (for :func:`_bayo_evaluate`)."""
    return (w[W_BAYO], w[W_BAYO_LU], w[W_BAYO_PIV])


# ---------------------------------------------------------------------------------
# the right-hand side: eqs. 91-92 (seed form) or the Bayo form
# ---------------------------------------------------------------------------------
def _penalty_evaluate(fns, S, I, LU, p, u, n, m, t, y, f, lam, wp, wb):
    """f = y' at (t, y) and λ: eqs. 91-92 with one LU of J (eq. 89) for both
    right-hand sides, [M v; −C_t − χ C] and [Q; γ − χ (C_q v + C_t)] (nonholonomic
    rows: [0] and [γ_G − χ (B v + b)]); the Bayo form when S[ALPHA] ≥ 0 (wp, wb:
    :func:`_penalty_work`, :func:`_bayo_work`).  Returns a cause code (C_NONE on success)."""
    if S[ALPHA] >= 0.0:
        return _bayo_evaluate(fns, S, I, p, u, n, m, t, y, f, lam, wp, wb)
    q, v, M, Cq, rhs, C, Ct = wp[W_Q], wp[W_V], wp[W_M], wp[W_CQ], wp[W_RHS], wp[W_C], wp[W_CT]
    rhs0 = wp[W_RHS91]
    I[ST_RES] += 1
    cause = _factor_and_rhs(fns, S, I, LU, RKC_PIV, p, u, n, m, t, y, wp)      # J factored, [Q; γ; γ_G]
    if cause != C_NONE:
        return cause
    for i in range(n):
        acc = 0.0
        for j in range(n):
            acc += M[i, j] * v[j]
        rhs0[i] = acc
    if m > 0:
        mh = m - n_nonholonomic(I)
        chi = S[CHI]
        C[:] = 0.0
        fns[FN_CONSTRAINTS](q, t, p, C)
        Ct[:] = 0.0
        fns[FN_CONSTRAINT_DT](q, t, p, Ct)
        _nh_offset(fns, p, mh, q, t, Ct)
        for k in range(m):
            acc = 0.0
            for i in range(n):
                acc += Cq[k, i] * v[i]
            rhs[n + k] = rhs[n + k] - chi * (acc + Ct[k])      # eq. 92 (and B v + b)
            if k < mh:
                rhs0[n + k] = -Ct[k] - chi * C[k]               # eq. 91
            else:
                rhs0[n + k] = 0.0
    piv = I[RKC_PIV:RKC_PIV + n + m]
    lu_solve_inplace(LU, piv, rhs0)
    lu_solve_inplace(LU, piv, rhs)
    for i in range(n):
        f[i] = rhs0[i]
        f[n + i] = rhs[i]
    for k in range(m):
        lam[k] = rhs[n + k]
    return C_NONE


def _bayo_evaluate(fns, S, I, p, u, n, m, t, y, f, lam, wp, wb):
    """The Bayo form: q' = v, (M + α C_qᵀC_q) v' = Q + α C_qᵀ (γ − 2ξω (C_q v + C_t)
    − ω² C), λ = α (C_q v' − (γ − 2ξω Ċ − ω² C)) over the holonomic rows (the
    nonholonomic ones are not part of this form: their λ is 0).  Returns a cause
    code; the matrix's LU stays in the work arrays."""
    q, v, M, Cq, Q, g = wp[W_Q], wp[W_V], wp[W_M], wp[W_CQ], wp[W_FORCES], wp[W_GAMMA]
    rhs, C, Ct = wp[W_RHS], wp[W_C], wp[W_CT]
    A, LUb, pivb = wb
    I[ST_RES] += 1
    mh = m - n_nonholonomic(I)
    alpha = S[ALPHA]
    for i in range(n):
        q[i] = y[i]
        v[i] = y[n + i]
    M[:, :] = 0.0
    fns[FN_MASS](q, t, p, M)
    Q[:] = 0.0
    fns[FN_FORCES](q, v, t, u, p, Q)
    for i in range(n):
        rhs[i] = Q[i]
        for j in range(n):
            A[i, j] = M[i, j]
    if mh > 0:
        om, xi = S[CHI], S[XI]
        Cq[:, :] = 0.0
        fns[FN_CONSTRAINT_JACOBIAN](q, t, p, Cq)
        Ct[:] = 0.0
        fns[FN_CONSTRAINT_DT](q, t, p, Ct)
        g[:] = 0.0
        fns[FN_GAMMA](q, v, t, p, g)
        C[:] = 0.0
        fns[FN_CONSTRAINTS](q, t, p, C)
        for k in range(mh):   # r = γ − 2ξω (C_q v + C_t) − ω² C, into g
            acc = 0.0
            for i in range(n):
                acc += Cq[k, i] * v[i]
            g[k] = g[k] - 2.0 * xi * om * (acc + Ct[k]) - om * om * C[k]
        for i in range(n):
            for j in range(n):
                acc = 0.0
                for k in range(mh):
                    acc += Cq[k, i] * Cq[k, j]
                A[i, j] = M[i, j] + alpha * acc
            acc = 0.0
            for k in range(mh):
                acc += Cq[k, i] * g[k]
            rhs[i] = Q[i] + alpha * acc
    status, ratio = factor_matrix(A, LUb, pivb, n)
    if status != FACTORED:
        S[F_CT] = t
        S[F_CINFO] = ratio
        return C_NONFINITE_MATRIX if status == MATRIX_NONFINITE else C_SINGULAR
    I[ST_LU] += 1
    lu_solve_inplace(LUb, pivb, rhs)
    for i in range(n):
        f[i] = v[i]
        f[n + i] = rhs[i]
    for k in range(m):
        lam[k] = 0.0
    for k in range(mh):
        acc = 0.0
        for i in range(n):
            acc += Cq[k, i] * rhs[i]
        lam[k] = alpha * (acc - g[k])
    return C_NONE


# ---------------------------------------------------------------------------------
# the spectral radius (rkc.f RKCRHO)
# ---------------------------------------------------------------------------------
def estimate_rho(fns, S, I, LU, p, u, n, m, y, f0, fv, v, lam, wp, wb):
    """ρ ≈ 1.2 σ, σ the spectral radius of ∂f/∂y at (S[T], y) (f(y) = f0) by the
    nonlinear power method on finite differences of f, warm-started from the last
    eigenvector (else f0 plus a deterministic symmetry breaker); writes S[RHO], the
    eigenvector, and sets the steps since the estimate to 0 (fv, v, lam: f, the point
    and λ of a probe, w[W_F_TRIAL], w[W_PROBE], w[W_LAM_TRIAL]).  Returns a cause code
    (an evaluation failed: nothing written)."""
    ny = y.shape[0]
    o_e = rkc_offsets(n, m, ny)[RKC_O_E]
    t = S[T]
    ynrm = _norm2(y)
    warm = False
    if I[HAS_EIGVEC] == 1:
        warm = _norm2(S[o_e:o_e + ny]) > 0.0
    if warm:
        for i in range(ny):
            v[i] = S[o_e + i]
    else:
        nonzero = False
        for i in range(ny):
            v[i] = f0[i]
            if f0[i] != 0.0:
                nonzero = True
        if not nonzero:
            for i in range(ny):
                v[i] = 1.0
        for i in range(ny):
            v[i] = v[i] + 1e-3 * (i + 1)   # break symmetry deterministically
    vnrm = _norm2(v)
    sqrt_eps = math.sqrt(EPS)
    dynrm = ynrm * sqrt_eps if ynrm > 0.0 else sqrt_eps
    c = dynrm / vnrm
    for i in range(ny):
        v[i] = y[i] + v[i] * c
    sigma = 0.0
    for it in range(RHO_MAX_ITER):
        cause = _penalty_evaluate(fns, S, I, LU, p, u, n, m, t, v, fv, lam, wp, wb)
        if cause != C_NONE:
            return cause
        for i in range(ny):
            fv[i] = fv[i] - f0[i]
        dfnrm = _norm2(fv)
        sigma_old = sigma
        sigma = dfnrm / dynrm
        if it > 0 and abs(sigma - sigma_old) <= 0.01 * sigma:
            break
        if dfnrm > 0.0:
            c = dynrm / dfnrm
            for i in range(ny):
                v[i] = y[i] + fv[i] * c
        else:
            for i in range(ny):
                v[i] = y[i] + (v[i] - y[i]) * 0.5 + 1e-3 * dynrm
    for i in range(ny):
        S[o_e + i] = v[i] - y[i]
    I[HAS_EIGVEC] = 1
    I[STEPS_SINCE_RHO] = 0
    S[RHO] = RHO_SAFETY * sigma
    return C_NONE


def _refresh_rho(fns, S, I, LU, p, u, n, m, y, f0, fv, v, lam, wp, wb):
    """estimate_rho as a step status (OK, SINGULAR, NONFINITE_MATRIX, RHO_FAILED)."""
    cause = estimate_rho(fns, S, I, LU, p, u, n, m, y, f0, fv, v, lam, wp, wb)
    if cause == C_SINGULAR:
        return SINGULAR
    if cause == C_NONFINITE_MATRIX:
        return NONFINITE_MATRIX
    if not math.isfinite(S[RHO]):
        S[F_H] = 0.0
        return RHO_FAILED
    return OK


# ---------------------------------------------------------------------------------
# one step
# ---------------------------------------------------------------------------------
def _rkc_stages(fns, S, I, LU, p, u, n, m, t, y, h, f0, s, Y, Cf, fj, lam, wp, wb):
    """The s-stage RKC step from (t, y) with F_n = f0: the stages rotate through the
    rows of Y = w[W_STAGES] (Cf, fj, lam: w[W_COEF], w[W_F_TRIAL], w[W_LAM_TRIAL]);
    returns (cause, row of Y_s)."""
    ny = y.shape[0]
    rkc_coefficients_into(s, S[DAMPING], Cf)
    i2, i1, i0 = 0, 1, 2        # rows of Y_{j−2}, Y_{j−1}, Y_j
    c = h * Cf[0, CF_MU_TILDE]
    for i in range(ny):
        Y[i2, i] = y[i]              # Y_0 = y_n
        Y[i1, i] = y[i] + c * f0[i]  # Y_1 = y_n + h μ̃_1 F_n
    thjm1 = Cf[0, CF_C]
    for j in range(1, s):
        mu, nu, mus, ajm1 = Cf[j, CF_MU], Cf[j, CF_NU], Cf[j, CF_MU_TILDE], Cf[j, CF_A]
        cause = _penalty_evaluate(fns, S, I, LU, p, u, n, m, t + h * thjm1, Y[i1], fj, lam, wp, wb)
        if cause != C_NONE:
            return cause, i1
        a0 = 1.0 - mu - nu
        hm = h * mus
        for i in range(ny):
            Y[i0, i] = a0 * y[i] + mu * Y[i1, i] + nu * Y[i2, i] + hm * (fj[i] - ajm1 * f0[i])
        i2, i1, i0 = i1, i0, i2
        thjm1 = Cf[j, CF_C]
    return C_NONE, i1


def step(fns, S, I, LU, u, p, t_limit, w):
    """One accepted step ending at or before ``t_limit`` (RKCPenalty._step_inner of
    the reference).  Returns a status code; on failure S[F_H] is the step size,
    I[CAUSE] / S[F_ERR] / S[F_HRHO] what made it fail."""
    n, m, ny = I[I_N], I[I_M], I[I_NY]
    Y, f_new, lam_new, est = w[W_STAGES], w[W_F_END], w[W_LAM_END], w[W_EST]
    f0, y = w[W_F_START], w[W_Y_START]
    fv, probe, lam = w[W_F_TRIAL], w[W_PROBE], w[W_LAM_TRIAL]
    wp, wb = _penalty_work(w), _bayo_work(w)
    t = S[T]
    status = _start_point(fns, S, I, LU, u, p, y, f0, f_new, lam_new, fv, probe, lam, wp, wb)
    if status != OK:
        return status
    fixed = S[H_FIXED] > 0.0
    s_max = I[MAX_STAGES]
    rho = S[RHO]
    h_prop = S[H_FIXED] if fixed else S[H_NEXT]
    if not fixed:
        # keep h within the reach of s_max stages (rkc.f)
        h_stab = ((s_max - 1) ** 2 - 1) / (STAGE_FACTOR * rho) if rho > 0.0 else math.inf
        h_prop = min(h_prop, h_stab)
    h, lands, moves = clamp_step(t, h_prop, S[MAX_STEP], fixed, t_limit)
    if not moves:
        S[F_H] = h
        return UNDERFLOW
    h_min = 1e-12 * max(1.0, abs(t))
    rejected = False
    rejections = 0
    err = 0.0
    s = 2
    last = 0
    t_new = t
    while True:
        t_new = t_limit if lands else t + h
        s = stages_for(h * rho, s_max)
        if fixed and 1.0 + math.sqrt(1.0 + STAGE_FACTOR * h * rho) > s_max + 1:
            S[F_H] = h
            S[F_HRHO] = h * rho
            return STAGES_EXCEEDED
        err = 0.0
        cause, last = _rkc_stages(fns, S, I, LU, p, u, n, m, t, y, h, f0, s, Y, w[W_COEF], fv, lam, wp, wb)
        if cause == C_NONE:
            cause = _penalty_evaluate(fns, S, I, LU, p, u, n, m, t_new, Y[last], f_new, lam_new, wp, wb)
            if cause == C_NONE and not (all_finite(Y[last]) and all_finite(f_new)):
                cause = C_NONFINITE_SOLUTION
        if cause == C_NONE:
            y_new = Y[last]
            for i in range(ny):
                est[i] = 0.8 * (y[i] - y_new[i]) + 0.4 * h * (f0[i] + f_new[i])
            err = error_ratio(y, y_new, est, S[RTOL], S[ATOL])
            if fixed:   # no error test: the estimate is judged
                S[FIXED_RTOL] = RKC_REFUSAL * S[RTOL]
                if not fixed_step_resolved(S, err, h, FIXED_SLOTS):
                    return FIXED_UNRESOLVED
                break
        if cause == C_NONE and err <= 1.0:
            break
        I[CAUSE] = cause
        S[F_ERR] = err
        if fixed:
            S[F_H] = h
            return STEP_FAILED
        I[ST_REJ] += 1
        rejections += 1
        h = reduced_step(h, cause, err, 0.1, 0.8, 1.0 / 3.0)
        lands = False
        rejected = True
        status = _refresh_rho(fns, S, I, LU, p, u, n, m, y, f0, fv, probe, lam, wp, wb)
        if status != OK:
            return status
        rho = S[RHO]
        if h < h_min or rejections > MAX_REJECTIONS:
            S[F_H] = h
            return TOO_SMALL
    _accept(S, I, n, m, ny, t, t_new, h, s, y, Y[last], f0, f_new, lam_new)
    if fixed:
        S[H_NEXT] = S[H_FIXED]
    else:
        _control(S, h, h_prop, err, rejected, lands)
    return OK


def _start_point(fns, S, I, LU, u, p, y, f0, f_new, lam_new, fv, probe, lam, wp, wb):
    """y and f0 ← the current point and f there (evaluated unless kept:
    _derivative_at_current), and the spectral radius ρ refreshed when due (fv, probe,
    lam: the power method's, :func:`estimate_rho`)."""
    n, m, ny = I[I_N], I[I_M], I[I_NY]
    o = rkc_offsets(n, m, ny)
    o_y, o_qdd, o_lam, o_f = o[RKC_O_Y], o[RKC_O_QDD], o[RKC_O_LAM], o[RKC_O_F]
    for i in range(ny):
        y[i] = S[o_y + i]
    if I[HAS_F] == 0:
        cause = _penalty_evaluate(fns, S, I, LU, p, u, n, m, S[T], y, f_new, lam_new, wp, wb)
        status = keep_current_derivative(S, I, cause, f_new, lam_new, n, m, ny, o_f, o_qdd, o_lam)
        if status != OK:
            return status
    for i in range(ny):
        f0[i] = S[o_f + i]
    if I[STEPS_SINCE_RHO] >= I[RHO_INTERVAL]:
        return _refresh_rho(fns, S, I, LU, p, u, n, m, y, f0, fv, probe, lam, wp, wb)
    return OK


def _accept(S, I, n, m, ny, t, t_new, h, s, y, y_new, f0, f_new, lam_new):
    """The accepted step into the record: the new point, the previous one, f at both
    ends (cubic Hermite dense output; f at the new point is the next step's first
    stage), q'' and λ there, and the stage statistics."""
    o = rkc_offsets(n, m, ny)
    o_y, o_yp, o_qdd, o_lam = o[RKC_O_Y], o[RKC_O_YP], o[RKC_O_QDD], o[RKC_O_LAM]
    o_f, o_d = o[RKC_O_F], o[RKC_O_D]
    S[T_PREV] = t
    S[o_yp:o_yp + ny] = y
    S[T] = t_new
    S[o_y:o_y + ny] = y_new
    for i in range(ny):
        S[o_d + i] = f0[i]              # dense: f at both ends (cubic Hermite)
        S[o_d + ny + i] = f_new[i]
        S[o_f + i] = f_new[i]
    for i in range(n):
        S[o_qdd + i] = f_new[n + i]
    S[o_lam:o_lam + m] = lam_new
    S[DENSE_H] = h
    I[HAS_DENSE] = 1
    I[HAS_F] = 1
    I[LAST_STAGES] = s
    if s > I[MAX_STAGES_USED]:
        I[MAX_STAGES_USED] = s
    I[STEPS_SINCE_RHO] += 1
    I[ST_STEPS] += 1


def _control(S, h, h_prop, err, rejected, lands):
    """The next step size: the second-order controller of rkc.f (the error ratios of
    this and the last step), at most 10× and at least 0.1× h, not above 1× after a
    rejection; a step cut short by the target says nothing new about h."""
    fac = 10.0
    if err > 0.0:
        if S[H_LAST] > 0.0 and S[ERR_LAST] > 0.0:
            fac = 0.8 * (h / S[H_LAST]) * S[ERR_LAST] ** (1.0 / 3.0) / err ** (2.0 / 3.0)
        else:
            fac = 0.8 * (1.0 / err) ** (1.0 / 3.0)
    if rejected:
        fac = min(fac, 1.0)
    fac = min(10.0, max(0.1, fac))
    h_new = h * fac
    if lands and h < h_prop and not rejected:
        h_new = max(h_new, h_prop)   # a step cut by the target says nothing new
    S[H_LAST] = h
    S[ERR_LAST] = err
    S[H_NEXT] = min(h_new, S[MAX_STEP])


def advance(fns, S, I, LU, u, p, t_target, max_steps, whole):
    """Steps until t = t_target (exactly) or ``max_steps`` steps were taken
    (with ``whole``: not reaching the target is the failure STEP_BUDGET).
    On failure S, I and LU are as on entry (all or nothing) except the failure
    slots F_T (t of the failing step), F_H, F_ERR, F_CT, F_CINFO, F_HRHO, I[CAUSE]."""
    owned, status = rkc_workspace(I[I_N], I[I_M], I[I_NY], I[MAX_STAGES]), OK
    w = unowned(owned)   # views without reference counts; owned is kept alive below
    S0, I0, LU0 = S.copy(), I.copy(), LU.copy()
    while status == OK and S[T] < t_target and max_steps > 0:
        status, max_steps = step(fns, S, I, LU, u, p, t_target, w), max_steps - 1
    status = end_advance(status, whole, t_target, S, I, LU, S0, I0, LU0, STEP_BUDGET, RKC_FAILURE_SLOTS, CAUSE)
    keep_alive(owned)
    return status


def entry(fns, mode, S, I, LU, u, p, t_target, max_steps, y_out):
    """The method's one entry point, compiled once per machine (cosim.jit.method_entry)
    or run as plain Python.  Modes: RESTART (forget f at the current point, the
    dense output and the controller memory); WHOLE_INTERVAL advances to
    ``t_target`` within ``max_steps`` (else STEP_BUDGET, record unchanged);
    ONE_STEP takes at most ``max_steps`` steps; RESTART_THEN_ADVANCE restarts, then
    advances as WHOLE_INTERVAL.  After a successful advance the model's outputs at
    the new state go into ``y_out`` (the outputs kernel, fns[FN_OUTPUTS]) unless it is empty."""
    if mode == RESTART:
        return restart(S, I)
    if mode == RESTART_THEN_ADVANCE:
        restart(S, I)
    status = advance(fns, S, I, LU, u, p, t_target, max_steps, mode != ONE_STEP)
    return model_outputs(fns, status, S, RKC_SCALARS, I[I_N], S[T], u, p, y_out)
