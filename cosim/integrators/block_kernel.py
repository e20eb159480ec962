"""The L-stable block methods (seed 004, Li, Ding & Li 2019; fixed step) as pure
functions on one flat state record: the one implementation, run compiled (numba,
compiled once per machine by :func:`cosim.jit.method_entry`) or as plain Python
(the same functions); the integrator object around it, with the construction of
the coefficients, is :mod:`cosim.integrators.block`.

One step from (t_k, q_k, v_k, a_k, λ_k) with r nodes c_i and the coefficients B, d
(module docstring of :mod:`cosim.integrators.block`): the stage unknowns
A_i = q''(t_k + c_i h) and Λ_i, with

    V_i = v_k + h d_i a_k + h Σ_j B_ij A_j,
    Q_i = q_k + h c_i v_k + h² (B d)_i a_k + h² Σ_j (B²)_ij A_j,
    M(Q_i) A_i + C_q(Q_i)ᵀ Λ_i − Q(Q_i, V_i, t_i) = 0,
    index 3: C(Q_i)/h² = 0;  index 2: (C_q V_i + C_t)/h = 0;  index 1: C_q A_i − γ(Q_i, V_i) = 0,

solved by the quasi-Newton iteration of seed 000 Algorithm 2
(:func:`kernel_common.quasi_newton`) with the iteration matrix at the step
start, kept across steps by the reuse test (:func:`kernel_common.keeps_matrix`);
a solve that fails with a kept matrix is retried with a fresh one (there), one that
still fails with the difference Jacobian of the whole stage residual.  y_{k+1} = (Q_r, V_r), a_{k+1} = A_r,
λ_{k+1} = Λ_r; the stage values Q_i, V_i are kept for the dense output.

The record (everything the method remembers; a snapshot is three array copies):

* ``S`` float64: scalars (:mod:`block_record` slots), then y, y_prev, q'', λ, the
  coefficients c, d, B, B², B d, b̂ and the stage positions and velocities;
* ``I`` int64: sizes, flags, statistics, the LU pivots;
* ``LU`` float64 N² (N = r (n+m)): the kept iteration-matrix factors.

No exceptions inside: functions return status codes that the integrator object
turns into its error messages.  The model's functions are called as ``fns[k](…)``
(:func:`cosim.jit.kernel_fields` order).
"""
import math

# every name of the method's modules, so that block_kernel is its one namespace
from .block_record import (  # noqa: F401
    ATOL, CONST_MASS, EPS, ERROR_EST, ERR_EST, FAILURE_SLOTS, FIXED, FIXED_ERR, FIXED_SLOTS,
    FIXED_UNRESOLVED, F_H, F_INFO, F_T, H,
    HAS_FACTOR, H_JAC, H_LAST, INDEX, I_M, I_N, I_R, MATRIX_FLOATS, MATRIX_INTS, MAX_STEP,
    NEED_JAC, NEWTON_ERR_TOL, NEWTON_FAILED, NEWTON_MAX_ITER, NEWTON_SCALE, NEWTON_TOL,
    NONFINITE_MATRIX, N_SCALARS, N_STATS, OK, ONE_STEP, PIV, REASON, RELAX, RESTART,
    ROUND_OFF_FLOOR, RTOL, R_NO_CONVERGENCE, R_RESIDUAL, R_UPDATE, SIGMA, SINGULAR, STAGE_T0,
    STATS, STEP_BUDGET, STEP_UNDERFLOW, ST_JAC, ST_LU, ST_NEWTON, ST_REJ, ST_RES, ST_STEPS, T,
    T_PREV, WHOLE_INTERVAL, W_A0, W_C, W_CQ, W_CT, W_DCQT_LAM_DQ, W_DELTA, W_DFORCES_DQ,
    W_DFORCES_DV, W_DMA_DQ, W_DROWS_DQ, W_DROWS_DV, W_EST, W_EST_WEIGHTS, W_FD_DELTA,
    W_FD_RESIDUAL0, W_FD_RESIDUAL1, W_FORCES, W_GAMMA, W_J, W_KQ, W_LAM0, W_M, W_NEWTON_WEIGHTS,
    W_Q0, W_RESIDUAL, W_ROWS0, W_ROWS1, W_SHIFTED, W_SNAPSHOT, W_STAGE_A, W_STAGE_Q, W_STAGE_V,
    W_V0, W_Y_NEW, O_B, O_B2, O_BD, O_BH, O_C, O_D, O_LAM, O_QDD, O_SQ, O_SV, O_Y, O_YP,
    int_length, matrix_size, offsets, workspace)
from .kernel_common import (FACTORED, FN_CONSTRAINTS, FN_CONSTRAINT_DT,
    FN_CONSTRAINT_FORCE_JACOBIAN, FN_CONSTRAINT_JACOBIAN, FN_FORCES, FN_FORCE_JACOBIANS,
    FN_GAMMA, FN_MASS, FN_MASS_JACOBIAN_TERM, JOB_NORM, JOB_RESIDUAL, MATRIX_NONFINITE, NEWTON_END,
    QN_ABORTED, QN_SOLVED, clamp_step, end_advance, factor_matrix, fixed_step_resolved,
    forget_step, keeps_matrix, model_outputs, newton_begin, quasi_newton, relaxation,
    keep_alive, restart_accelerations, snapshot_in, unowned, weighted_max, weighted_rms)

# the record's names the integrator object reads through this module (RecordIntegrator:
# ``_kernel.STATS``, the modes) besides the ones the functions below use
__all__ = ["N_STATS", "STATS", "ST_REJ", "WHOLE_INTERVAL", "int_length", "entry", "restart"]
# kernel_common.newton_begin's rule: plain Algorithm 2 (no prior rate, no stall test)
NEWTON_RULE = (NEWTON_MAX_ITER, 0, 0, HAS_FACTOR, ST_LU, NEED_JAC, ST_RES, ST_NEWTON, H_JAC, RELAX, SIGMA)

# inlined by numba into their one caller (cosim.jit.method_inlined): each takes the work
# tuple, which a call of a function compiled on its own passes member by member
INLINED = ("_step_start", "_newton_job", "_iteration_matrix", "_difference_matrix", "_estimate", "_accept")


def restart(fns, S, I, u, p):
    """Integrator.restart (new inputs or parameters, an event's new point): the
    consistent accelerations q'', λ at the current point with what is held now (seed
    000 eq. 10, :func:`kernel_common.restart_accelerations`), which the next step
    starts from (a_k enters every stage: the last step's A_r, Λ_r belong to the old
    inputs); no stage data (dense output), t_prev = t, y_prev = y.  Returns OK, or
    SINGULAR / NONFINITE_MATRIX (S[F_T] = t, the pivot ratio in S[F_INFO]) with the
    rest of the record unchanged."""
    n, m = I[I_N], I[I_M]
    o = offsets(n, m, I[I_R])
    o_y, o_yp, o_qdd, o_lam = o[O_Y], o[O_YP], o[O_QDD], o[O_LAM]
    status = restart_accelerations(fns, S, u, p, n, m, 0, o_y, o_qdd, o_lam, (T, F_T, F_INFO))
    if status != FACTORED:
        return NONFINITE_MATRIX if status == MATRIX_NONFINITE else SINGULAR
    S[STAGE_T0] = math.nan
    forget_step(S, T, T_PREV, o_y, o_yp, 2 * n)
    return OK


# ---------------------------------------------------------------------------------
# stages, residual, iteration matrices
# ---------------------------------------------------------------------------------
def _stages(S, n, m, r, h, q0, v0, a0, delta, A, V, Q):
    """A_i = a_k + δ_i, V_i, Q_i (module docstring) of the unknowns a_k + δ."""
    o = offsets(n, m, r)
    o_c, o_d, o_B, o_B2, o_Bd = o[O_C], o[O_D], o[O_B], o[O_B2], o[O_BD]
    hh = h * h
    for i in range(r):
        for k in range(n):
            A[i, k] = a0[k] + delta[i * n + k]
    for i in range(r):
        hd = h * S[o_d + i]
        hc = h * S[o_c + i]
        hbd = hh * S[o_Bd + i]
        for k in range(n):
            sb = 0.0
            sb2 = 0.0
            for j in range(r):
                sb += S[o_B + i * r + j] * A[j, k]
                sb2 += S[o_B2 + i * r + j] * A[j, k]
            V[i, k] = v0[k] + hd * a0[k] + h * sb
            Q[i, k] = q0[k] + hc * v0[k] + hbd * a0[k] + hh * sb2


def _residual(fns, S, I, p, u, n, m, r, t0, h, q0, v0, a0, lam0, delta, F, w):
    """The stage residual at the unknowns (a_k, λ_k) + δ into F:
    [M(Q_i) A_i + C_qᵀ Λ_i − Q(Q_i, V_i, t_i) (i = 1..r) ; the r constraint rows]."""
    A, V, Q, M, Cq = w[W_STAGE_A], w[W_STAGE_V], w[W_STAGE_Q], w[W_M], w[W_CQ]
    Qf, C, Ct, g = w[W_FORCES], w[W_C], w[W_CT], w[W_GAMMA]
    index = I[INDEX]
    o_c = offsets(n, m, r)[O_C]
    rn = r * n
    _stages(S, n, m, r, h, q0, v0, a0, delta, A, V, Q)
    for i in range(r):
        ti = t0 + S[o_c + i] * h
        qi, vi, ai = Q[i], V[i], A[i]
        M[:, :] = 0.0
        fns[FN_MASS](qi, ti, p, M)
        Qf[:] = 0.0
        fns[FN_FORCES](qi, vi, ti, u, p, Qf)
        if m > 0:
            Cq[:, :] = 0.0
            fns[FN_CONSTRAINT_JACOBIAN](qi, ti, p, Cq)
        for k in range(n):
            s = 0.0
            for j in range(n):
                s += M[k, j] * ai[j]
            s2 = 0.0
            for l in range(m):
                s2 += Cq[l, k] * (lam0[l] + delta[rn + i * m + l])
            F[i * n + k] = (s + s2) - Qf[k]
        if m == 0:
            continue
        o = rn + i * m
        if index == 3:
            C[:] = 0.0
            fns[FN_CONSTRAINTS](qi, ti, p, C)
            for l in range(m):
                F[o + l] = C[l] / (h * h)
        elif index == 2:
            Ct[:] = 0.0
            fns[FN_CONSTRAINT_DT](qi, ti, p, Ct)
            for l in range(m):
                s = 0.0
                for k in range(n):
                    s += Cq[l, k] * vi[k]
                F[o + l] = (s + Ct[l]) / h
        else:
            g[:] = 0.0
            fns[FN_GAMMA](qi, vi, ti, p, g)
            for l in range(m):
                s = 0.0
                for k in range(n):
                    s += Cq[l, k] * ai[k]
                F[o + l] = s - g[l]


def _constraint_rows(fns, p, n, m, index, t0, q, v, a, out, Cq, Ct, g):
    """index 2: C_q(q) v + C_t(q);  index 1: C_q(q) a − γ(q, v)  (into ``out``)."""
    Cq[:, :] = 0.0
    fns[FN_CONSTRAINT_JACOBIAN](q, t0, p, Cq)
    if index == 2:
        Ct[:] = 0.0
        fns[FN_CONSTRAINT_DT](q, t0, p, Ct)
    else:
        g[:] = 0.0
        fns[FN_GAMMA](q, v, t0, p, g)
    for l in range(m):
        s = 0.0
        for k in range(n):
            s += Cq[l, k] * (v[k] if index == 2 else a[k])
        out[l] = s + Ct[l] if index == 2 else s - g[l]


def _difference_columns(fns, p, n, m, index, t0, q0, v0, a0, wrt_v, G, w):
    """Forward differences (common.fd_jacobian's steps) of the index-2 / index-1
    constraint rows: with respect to q (``wrt_v`` False; index 1: C_q a − γ), or,
    index 1, of −γ with respect to v, into G (m×n)."""
    Cq, Ct, g = w[W_CQ], w[W_CT], w[W_GAMMA]
    g0, g1, x = w[W_ROWS0], w[W_ROWS1], w[W_SHIFTED]
    sq = math.sqrt(EPS)
    if wrt_v:
        g[:] = 0.0
        fns[FN_GAMMA](q0, v0, t0, p, g)
        for l in range(m):
            g0[l] = -g[l]
    else:
        _constraint_rows(fns, p, n, m, index, t0, q0, v0, a0, g0, Cq, Ct, g)
    base = v0 if wrt_v else q0
    for j in range(n):
        for k in range(n):
            x[k] = base[k]
        hj = sq * max(abs(base[j]), 1e-3)
        x[j] += hj
        hj = x[j] - base[j]   # exactly representable step
        if wrt_v:
            g[:] = 0.0
            fns[FN_GAMMA](q0, x, t0, p, g)
            for l in range(m):
                g1[l] = -g[l]
        else:
            _constraint_rows(fns, p, n, m, index, t0, x, v0, a0, g1, Cq, Ct, g)
        for l in range(m):
            G[l, j] = (g1[l] - g0[l]) / hj


def _iteration_matrix(fns, S, I, p, u, n, m, r, t0, h, q0, v0, a0, lam0, J, w):
    """The iteration matrix at the step start (seed 004 §2, block.py before):
    [[I⊗M + h² B²⊗K_q + h B⊗K_v, I⊗C_qᵀ], [constraint rows, 0]] with
    K_q = (C_qᵀλ)_q − Q_q + (M a)_q, K_v = −Q_v; constraint rows index 3: B²⊗C_q;
    index 2: B⊗C_q + h B²⊗(C_q v + C_t)_q; index 1: I⊗C_q + h² B²⊗(C_q a − γ)_q
    + h B⊗(−γ_v)."""
    M, Cq, Qq, Qv = w[W_M], w[W_CQ], w[W_DFORCES_DQ], w[W_DFORCES_DV]
    Hm, Mq, Kq, Gq, Gv = w[W_DCQT_LAM_DQ], w[W_DMA_DQ], w[W_KQ], w[W_DROWS_DQ], w[W_DROWS_DV]
    index = I[INDEX]
    o = offsets(n, m, r)
    o_B, o_B2 = o[O_B], o[O_B2]
    rn = r * n
    N = r * (n + m)
    hh = h * h
    M[:, :] = 0.0
    fns[FN_MASS](q0, t0, p, M)
    Qq[:, :] = 0.0
    Qv[:, :] = 0.0
    fns[FN_FORCE_JACOBIANS](q0, v0, t0, u, p, Qq, Qv)
    Hm[:, :] = 0.0
    if m > 0:
        Cq[:, :] = 0.0
        fns[FN_CONSTRAINT_JACOBIAN](q0, t0, p, Cq)
        fns[FN_CONSTRAINT_FORCE_JACOBIAN](q0, lam0, t0, p, Hm)
    for k in range(n):
        for j in range(n):
            Kq[k, j] = Hm[k, j] - Qq[k, j]
    if I[CONST_MASS] == 0:
        Mq[:, :] = 0.0
        fns[FN_MASS_JACOBIAN_TERM](q0, a0, t0, p, Mq)
        for k in range(n):
            for j in range(n):
                Kq[k, j] = Kq[k, j] + Mq[k, j]
    for i in range(N):
        for j in range(N):
            J[i, j] = 0.0
    for i in range(r):
        for j in range(r):
            b2 = S[o_B2 + i * r + j]
            b = S[o_B + i * r + j]
            for k in range(n):
                for l in range(n):
                    diag = M[k, l] if i == j else 0.0
                    J[i * n + k, j * n + l] = (diag + hh * (b2 * Kq[k, l])) + h * (b * -Qv[k, l])
    if m == 0:
        return
    for i in range(r):
        for k in range(n):
            for l in range(m):
                J[i * n + k, rn + i * m + l] = Cq[l, k]
    if index == 2:
        _difference_columns(fns, p, n, m, 2, t0, q0, v0, a0, False, Gq, w)
    elif index == 1:
        _difference_columns(fns, p, n, m, 1, t0, q0, v0, a0, False, Gq, w)
        _difference_columns(fns, p, n, m, 1, t0, q0, v0, a0, True, Gv, w)
        Cq[:, :] = 0.0   # (the differences used Cq as scratch)
        fns[FN_CONSTRAINT_JACOBIAN](q0, t0, p, Cq)
    if index == 2:
        Cq[:, :] = 0.0
        fns[FN_CONSTRAINT_JACOBIAN](q0, t0, p, Cq)
    for i in range(r):
        for j in range(r):
            b2 = S[o_B2 + i * r + j]
            b = S[o_B + i * r + j]
            for l in range(m):
                for k in range(n):
                    if index == 3:
                        x = b2 * Cq[l, k]
                    elif index == 2:
                        x = b * Cq[l, k] + h * (b2 * Gq[l, k])
                    else:
                        diag = Cq[l, k] if i == j else 0.0
                        x = (diag + hh * (b2 * Gq[l, k])) + h * (b * Gv[l, k])
                    J[rn + i * m + l, j * n + k] = x


def _difference_matrix(fns, S, I, p, u, n, m, r, t0, h, q0, v0, a0, lam0, delta, J, w):
    """The last resort: the forward-difference Jacobian of the whole stage residual
    at the unknowns + δ (common.fd_jacobian's steps)."""
    F0, F1, dx = w[W_FD_RESIDUAL0], w[W_FD_RESIDUAL1], w[W_FD_DELTA]
    N = r * (n + m)
    sq = math.sqrt(EPS)
    _residual(fns, S, I, p, u, n, m, r, t0, h, q0, v0, a0, lam0, delta, F0, w)
    for j in range(N):
        for i in range(N):
            dx[i] = delta[i]
        hj = sq * max(abs(delta[j]), 1e-3)
        dx[j] += hj
        hj = dx[j] - delta[j]   # exactly representable step
        _residual(fns, S, I, p, u, n, m, r, t0, h, q0, v0, a0, lam0, dx, F1, w)
        for i in range(N):
            J[i, j] = (F1[i] - F0[i]) / hj


# ---------------------------------------------------------------------------------
# one stage solve (seed 000 Algorithm 2)
# ---------------------------------------------------------------------------------
def _newton_job(job, fns, S, I, LU, p, u, n, m, r, t0, h, q0, v0, a0, lam0, differences, w):
    """A job of kernel_common.quasi_newton: ‖Δδ‖ (max norm in the Newton weights), the
    stage residual, or the matrix (the analytic one, or with ``differences`` the
    difference Jacobian) formed and factored.  Returns the answer (a failure:
    SINGULAR / NONFINITE_MATRIX, the pivot ratio in S[F_INFO])."""
    winv, delta, F, J = w[W_NEWTON_WEIGHTS], w[W_DELTA], w[W_RESIDUAL], w[W_J]
    N = r * (n + m)
    if job == JOB_NORM:
        return weighted_max(F, winv, N)
    if job == JOB_RESIDUAL:
        _residual(fns, S, I, p, u, n, m, r, t0, h, q0, v0, a0, lam0, delta, F, w)
        return 0.0
    if differences:
        _difference_matrix(fns, S, I, p, u, n, m, r, t0, h, q0, v0, a0, lam0, delta, J, w)
    else:
        _iteration_matrix(fns, S, I, p, u, n, m, r, t0, h, q0, v0, a0, lam0, J, w)
    I[ST_JAC] += 1
    status, ratio = factor_matrix(J, LU, I[PIV:PIV + N], N)
    if status != FACTORED:
        if status != MATRIX_NONFINITE:
            I[HAS_FACTOR] = 0   # LU partly overwritten
        S[F_INFO] = ratio
        return float(NONFINITE_MATRIX if status == MATRIX_NONFINITE else SINGULAR)
    return 0.0


def _solve(fns, S, I, LU, p, u, n, m, r, t0, h, q0, v0, a0, lam0, differences, w):
    """One quasi-Newton solve of the stage equations from δ = 0 (kernel_common.quasi_newton,
    up to NEWTON_MAX_ITER updates; the matrix: see :func:`_newton_job`).
    Returns (converged, status, reason): status SINGULAR / NONFINITE_MATRIX when
    the matrix cannot be factored (pivot ratio in S[F_INFO]), else OK; reason
    quasi_newton's (R_RESIDUAL, R_UPDATE, R_NO_CONVERGENCE; 0: converged); δ in w[W_DELTA]."""
    N = r * (n + m)
    piv, F, delta = I[PIV:PIV + N], w[W_RESIDUAL], w[W_DELTA]
    job, state = newton_begin(S, I, delta, N, NEWTON_RULE)
    x = 0.0
    while job < NEWTON_END:
        x = _newton_job(job, fns, S, I, LU, p, u, n, m, r, t0, h, q0, v0, a0, lam0, differences, w)
        job, state = quasi_newton(job, x, state, S, I, LU, piv, F, delta, N, h, NEWTON_TOL,
                                  NEWTON_ERR_TOL, False, NEWTON_RULE)
    reason = job - NEWTON_END
    if reason == QN_ABORTED:
        return False, int(x), 0
    return reason == QN_SOLVED, OK, reason


# ---------------------------------------------------------------------------------
# one step
# ---------------------------------------------------------------------------------
def step(fns, S, I, LU, u, p, t_limit, w):
    """One step ending at or before ``t_limit``.  Returns a status code; on
    failure S[F_H] is the step size, I[REASON] why the stage solve failed (the
    caller restores the record)."""
    n, m, r = I[I_N], I[I_M], I[I_R]
    q0, v0, a0, lam0 = w[W_Q0], w[W_V0], w[W_A0], w[W_LAM0]
    t0 = S[T]
    h, lands, moves = clamp_step(t0, S[H], S[MAX_STEP], I[FIXED] == 1, t_limit)
    if not moves:
        S[F_H] = h
        return STEP_UNDERFLOW
    _step_start(fns, S, I, p, n, m, r, t0, h, w)
    # Algorithm 3 g: may this step keep the matrix?
    h_jac = S[H_JAC] if I[HAS_FACTOR] == 1 else -1.0
    if keeps_matrix(S[SIGMA], h, h_jac):
        I[NEED_JAC] = 0
        S[RELAX] = relaxation(h, h_jac)
    else:
        I[NEED_JAC] = 1
        S[RELAX] = 1.0
    # (a failure with a kept matrix is retried with a fresh one there)
    converged, status, reason = _solve(fns, S, I, LU, p, u, n, m, r, t0, h, q0, v0, a0, lam0, False, w)
    if status != OK:
        S[F_H] = h
        return status
    if not converged:
        # last resort: the full Jacobian of the stage residual by differences
        I[NEED_JAC] = 1
        S[RELAX] = 1.0
        fd_converged, fd_status, fd_reason = _solve(fns, S, I, LU, p, u, n, m, r, t0, h, q0, v0, a0,
                                                    lam0, True, w)
        # index 3 at a small h: C(Q)/h² does not resolve the difference step, so the
        # difference Jacobian is singular; the failure to report is the analytic one
        if fd_status == OK:
            converged, reason = fd_converged, fd_reason
        I[NEED_JAC] = 1   # do not keep the difference Jacobian for the next step
        S[RELAX] = 1.0
    if not converged:
        I[REASON] = reason
        S[F_H] = h
        return NEWTON_FAILED
    _stages(S, n, m, r, h, q0, v0, a0, w[W_DELTA], w[W_STAGE_A], w[W_STAGE_V], w[W_STAGE_Q])
    err_q, err = _estimate(S, n, m, r, h, w)
    if not fixed_step_resolved(S, err_q, h, FIXED_SLOTS):   # no error test decides the step
        return FIXED_UNRESOLVED
    if I[ERROR_EST] == 1:
        S[ERR_EST] = err
    _accept(S, I, n, m, r, t0, h, t_limit if lands else t0 + h, w)
    return OK


def _step_start(fns, S, I, p, n, m, r, t0, h, w):
    """The record's point into the work arrays (q0, v0, a0, λ0) and the inverse Newton
    weights: convergence is judged on the velocity change the update causes over
    the step, h·ΔA for the accelerations and h·ΔΛ/m for the multipliers (m: the
    largest mass entry), relative to 1 + |v|.  The index-3 multipliers carry an
    O(eps/h²) round-off floor that a test on Λ itself would never pass."""
    o = offsets(n, m, r)
    o_y, o_qdd, o_lam = o[O_Y], o[O_QDD], o[O_LAM]
    q0, v0, a0, lam0 = w[W_Q0], w[W_V0], w[W_A0], w[W_LAM0]
    winv, M = w[W_NEWTON_WEIGHTS], w[W_M]
    rn = r * n
    N = r * (n + m)
    vmax = 0.0
    qmax = 0.0
    for k in range(n):
        q0[k] = S[o_y + k]
        v0[k] = S[o_y + n + k]
        a0[k] = S[o_qdd + k]
        vmax = max(vmax, abs(v0[k]))
        qmax = max(qmax, abs(q0[k]))
    for l in range(m):
        lam0[l] = S[o_lam + l]
    v_scale = S[NEWTON_SCALE] * (1.0 + vmax)
    if I[INDEX] == 3:   # round-off floor of C(Q)/h² seen as a velocity change
        v_scale = max(v_scale, ROUND_OFF_FLOOR * EPS * (1.0 + qmax) / h)
    M[:, :] = 0.0
    fns[FN_MASS](q0, t0, p, M)
    m_scale = 0.0
    for k in range(n):
        m_scale = max(m_scale, abs(M[k, k]))
    for i in range(rn):
        winv[i] = h / v_scale
    for i in range(rn, N):
        winv[i] = h / (v_scale * m_scale)


def _estimate(S, n, m, r, h, w):
    """The local error estimate of the step whose stages are in w[W_STAGE_A], w[W_STAGE_V]:
    y_{k+1} minus the quadrature of order r on the nodes 0, c_1..c_{r−1} (weights b̂) of the
    stage velocities and accelerations, in the eq. 35 weights rtol·|y_{k+1}| + atol.
    Returns (the RMS norm of its positions' part: the fixed-step verdict's, the RMS
    norm over q and v: the option error_estimate's)."""
    o_bh = offsets(n, m, r)[O_BH]
    q0, v0, a0 = w[W_Q0], w[W_V0], w[W_A0]
    A, V, Q = w[W_STAGE_A], w[W_STAGE_V], w[W_STAGE_Q]
    e, w2, y1 = w[W_EST], w[W_EST_WEIGHTS], w[W_Y_NEW]
    rtol, atol = S[RTOL], S[ATOL]
    for k in range(n):
        sq = S[o_bh] * v0[k]
        sa = S[o_bh] * a0[k]
        for j in range(1, r):
            sq += S[o_bh + j] * V[j - 1, k]
            sa += S[o_bh + j] * A[j - 1, k]
        y1[k] = Q[r - 1, k]
        y1[n + k] = V[r - 1, k]
        e[k] = y1[k] - (q0[k] + h * sq)
        e[n + k] = y1[n + k] - (v0[k] + h * sa)
    for k in range(2 * n):
        wk = rtol * abs(y1[k]) + atol
        w2[k] = 1.0 / (wk * wk)
    return weighted_rms(e, w2, n), weighted_rms(e, w2, 2 * n)


def _accept(S, I, n, m, r, t0, h, t_new, w):
    """The accepted step (stages formed by _stages): y_{k+1} = (Q_r, V_r), a_{k+1} =
    A_r, λ_{k+1} = Λ_r into the record with the previous point and the stages (dense
    output)."""
    o = offsets(n, m, r)
    o_y, o_yp, o_qdd, o_lam, o_sq, o_sv = o[O_Y], o[O_YP], o[O_QDD], o[O_LAM], o[O_SQ], o[O_SV]
    lam0, delta = w[W_LAM0], w[W_DELTA]
    A, V, Q = w[W_STAGE_A], w[W_STAGE_V], w[W_STAGE_Q]
    rn = r * n
    S[T_PREV] = t0
    for k in range(2 * n):
        S[o_yp + k] = S[o_y + k]
    for i in range(r):
        for k in range(n):
            S[o_sq + i * n + k] = Q[i, k]
            S[o_sv + i * n + k] = V[i, k]
    S[STAGE_T0] = t0
    S[T] = t_new
    for k in range(n):
        S[o_y + k] = Q[r - 1, k]
        S[o_y + n + k] = V[r - 1, k]
        S[o_qdd + k] = A[r - 1, k]
    for l in range(m):
        S[o_lam + l] = lam0[l] + delta[rn + (r - 1) * m + l]
    S[H_LAST] = h
    I[ST_STEPS] += 1


def advance(fns, S, I, LU, u, p, t_target, max_steps, whole):
    """Steps until t = t_target (exactly) or ``max_steps`` steps were taken
    (with ``whole``: not reaching the target is the failure STEP_BUDGET).
    Returns a status code; on failure S, I and LU are as they were on entry
    (all or nothing) except the failure slots F_T, F_H, F_INFO and I[REASON]."""
    owned, status = workspace(I[I_N], I[I_M], I[I_R], S.shape[0] + LU.size), OK
    w = unowned(owned)   # views without reference counts; owned is kept alive below
    S0, I0, LU0 = snapshot_in(w[W_SNAPSHOT], S, I, LU)
    while status == OK and S[T] < t_target and max_steps > 0:
        status, max_steps = step(fns, S, I, LU, u, p, t_target, w), max_steps - 1
    status = end_advance(status, whole, t_target, S, I, LU, S0, I0, LU0, STEP_BUDGET, FAILURE_SLOTS, REASON)
    keep_alive(owned)
    return status


def entry(fns, mode, S, I, LU, u, p, t_target, max_steps, y_out):
    """The method's one entry point, compiled once per machine (cosim.jit.method_entry)
    or run as plain Python.  Modes: RESTART (q'', λ solved at the current point, the
    stage data forgotten: new inputs, parameters or a new point); WHOLE_INTERVAL
    advances to ``t_target`` within ``max_steps`` (else STEP_BUDGET, record unchanged);
    ONE_STEP takes at most ``max_steps`` steps.  After a successful advance the model's
    outputs at the new state go into ``y_out`` (the outputs kernel, fns[FN_OUTPUTS])
    unless it is empty."""
    if mode == RESTART:
        return restart(fns, S, I, u, p)
    status = advance(fns, S, I, LU, u, p, t_target, max_steps, mode != ONE_STEP)
    return model_outputs(fns, status, S, N_SCALARS, I[I_N], S[T], u, p, y_out)
