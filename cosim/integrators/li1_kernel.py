"""The local equivalent index-1 method (seed 002, Wang, Zhao & Pan) as pure functions
on one flat state record: the one implementation, run compiled (numba, compiled once
per machine by :func:`cosim.jit.method_entry`) or as plain Python (the same
functions); the integrator object around it is :mod:`cosim.integrators.local_index1`.

First-order form x = [q; q'] (seed 002 eqs. 2.6-2.7): x' = g(x) = [q'; ψ(q, q')],
f(x) = [C(q, t); C_q q' + C_t] = 0, ψ from [[M, C_qᵀ], [C_q, 0]] [ψ; λ] = [Q; γ]
(eqs. 2.3-2.5, :func:`_accelerations`).  Near x_k the square, locally equivalent
system A_kᵀ (x' − g(x)) = 0, f(x) = 0 with A_kᵀ = diag(VᵀM, VᵀM) at x_k (eq. 4.4),
V a basis of null(C_q(q_k)) by Householder QR of C_qᵀ (§5.1, :func:`nullspace_qr`)
or by Gauss-Jordan elimination with complete pivoting (§5.2,
:func:`nullspace_gauss`), discretised by the trapezoidal rule (eq. 3.7) and solved
by the quasi-Newton iteration of seed 000 Algorithm 2 (the decisions of
:mod:`.kernel_common`) with the iteration matrix of eq. 4.5 ("seed") or the full
Jacobian with −h/2·A_kᵀ ∂g/∂x by forward differences ("newton").  The matrix is
formed afresh every step (A_k changes with x_k).  Heun's predictor; (x_trap −
x_Heun)/3 estimates the local error (the error test; at a fixed step judged by
kernel_common.fixed_step_resolved).  Nonholonomic rows B v + b = 0
(seed 000 eq. 93, ``I[I_NG]`` > 0): the velocity rows use V ⊥ [C_q; B], and
B v + b joins f(x).

The record (everything the method remembers; a snapshot is array copies):

* ``S`` float64: scalars (slots in :mod:`.li1_record`), then y, y_prev, q'', λ,
  the dense-output slopes g0 = [v; q''] at t_prev and g1 at t;
* ``I`` int64: sizes, options, flags, statistics, the pivots of the LU;
* ``LU`` float64 (2n)²: the LU of the last iteration matrix.

No exceptions inside: functions return status / cause codes that the thin
integrator object turns into its error messages.  The model's functions are called
as ``fns[k](…)`` (:func:`cosim.jit.kernel_fields` order).
"""
import math

from .kernel_common import (EPS, FACTORED, FN_CONSTRAINTS, FN_CONSTRAINT_DT,
    FN_CONSTRAINT_JACOBIAN, FN_MASS, FN_NH_MATRIX,
    FN_NH_OFFSET, JOB_NORM, JOB_RESIDUAL, MATRIX_NONFINITE, NEWTON_END, QN_ABORTED,
    clamp_step, consistent_accelerations, end_advance, factor_matrix, forget_step,
    error_ratio, fixed_step_resolved, model_outputs, newton_begin, next_step, quasi_newton,
    keep_alive, rejected_attempt, unowned, weighted_max)
from .li1_nullspace import nullspace_gauss, nullspace_qr

from .li1_record import (  # noqa: F401  (FIXED_ERR: record.py reads it through the kernel)
    ACC_NONFINITE, ACC_SINGULAR, ATOL, CAUSE, C_ACC_NONFINITE, C_ACC_SINGULAR, C_ITER_NONFINITE,
    C_ITER_SINGULAR, C_NONE, C_NO_CONVERGENCE, C_RANK_GAUSS, C_RANK_QR, C_RESIDUAL, C_UPDATE,
    FAILURE_SLOTS, FIXED_ERR, FIXED_RTOL, FIXED_SLOTS, FIXED_UNRESOLVED, F_CH, F_CINFO, F_CT, F_H, F_T,
    HAS_DENSE, HAS_FACTOR, H_FIXED, H_JAC, H_NEXT,
    ITERATION, ITERATION_SEED, I_M, I_N, I_NG, MATRIX_FLOATS, MATRIX_INTS, MAX_FACTOR, MAX_STEP,
    NEED_JAC, NEWTON_ERR_TOL, NEWTON_MAX_ITER, NEWTON_TOL, NULLSPACE, NULLSPACE_GAUSS,
    N_SCALARS, OK, ONE_STEP, PIV, REFUSAL, REJECTION_CONTROL, REJECTION_SLOTS, RELAX, RESTART, RTOL,
    SAFETY, SIGMA, STATS, STEP_BUDGET, STEP_FAILED, ST_JAC, ST_LU, ST_NEWTON, ST_RES, ST_STEPS,
    T, TOO_SMALL, T_PREV, UNDERFLOW, WHOLE_INTERVAL, W_A, W_A0, W_AE, W_AK, W_AQ, W_AV, W_C,
    W_AUG, W_AUG_PIV, W_AUG_RHS, W_CQ, W_CT, W_DELTA, W_DPSI_DQ, W_DPSI_DV, W_DVC_DQ, W_EST, W_FD0, W_FD1,
    W_FORCES, W_J, W_LAM, W_M,
    W_NS_A, W_NS_COLS, W_NS_TAU, W_NS_V, W_Q, W_QE, W_QK, W_RESIDUAL, W_V, W_VE, W_VK, W_WEIGHTS,
    W_X_PRED, O_G, O_LAM, O_QDD, O_Y, O_YP, offsets, workspace)

# what RecordIntegrator reads from a method's kernel module (besides ``entry``, the
# step options and the Newton state's slots the functions below use); the integrator
# object takes the rest of the record from li1_record
RECORD_INTERFACE = (T, STATS, WHOLE_INTERVAL, ONE_STEP, F_T, H_JAC)
# kernel_common.newton_begin's rule: plain Algorithm 2 (no prior rate, no stall test)
NEWTON_RULE = (NEWTON_MAX_ITER, 0, 0, HAS_FACTOR, ST_LU, NEED_JAC, ST_RES, ST_NEWTON, H_JAC, RELAX, SIGMA)

# inlined by numba into their one caller (cosim.jit.method_inlined): each takes the work
# tuple, which a call of a function compiled on its own passes member by member
INLINED = ("_attempt", "_newton", "_newton_job", "_residual", "_jacobian", "_velocity_jacobian")


def _basis_times_mass(I, C, r, n, M, out, A, V, tau, cols):
    """out[:n−r] ← Vᵀ M with V a basis of null(C[:r]) (eq. 4.4); returns a cause code."""
    if I[NULLSPACE] == NULLSPACE_GAUSS:
        if not nullspace_gauss(C, r, n, V, A, cols):
            return C_RANK_GAUSS
    elif not nullspace_qr(C, r, n, V, A, tau):
        return C_RANK_QR
    for i in range(n - r):
        for j in range(n):
            s = 0.0
            for k in range(n):
                s += V[k, i] * M[k, j]
            out[i, j] = s
    return C_NONE


# ---------------------------------------------------------------------------------
# the model's terms
# ---------------------------------------------------------------------------------
def _constraint_rows(fns, p, m, g, q, t, Cq):
    """[C_q; B] at (q, t) into Cq ((m + g) × n)."""
    Cq[:, :] = 0.0
    if m > 0:
        fns[FN_CONSTRAINT_JACOBIAN](q, t, p, Cq)
    if g > 0:
        fns[FN_NH_MATRIX](q, t, p, Cq[m:])


def _velocity_constraints(fns, p, m, g, q, v, t, Cq, Ct, out):
    """out[:m + g] ← [C_q v + C_t; B v + b] at (q, v, t) (f's velocity rows)."""
    _constraint_rows(fns, p, m, g, q, t, Cq)
    Ct[:] = 0.0
    if m > 0:
        fns[FN_CONSTRAINT_DT](q, t, p, Ct)
    if g > 0:
        fns[FN_NH_OFFSET](q, t, p, Ct[m:])
    for k in range(m + g):
        s = 0.0
        for i in range(q.shape[0]):
            s += Cq[k, i] * v[i]
        out[k] = s + Ct[k]


def _accelerations(fns, S, I, p, u, n, m, g, t, q, v, a, lam, count, w):
    """ψ(q, v) and λ (seed 002 eq. 2.5 = seed 000 eq. 10; with nonholonomic rows
    B q'' = γ_G: :func:`kernel_common.consistent_accelerations`).
    ``count``: one residual evaluation and one LU in the statistics.  Returns a cause
    code (the matrix's t in S[F_CT], its pivot ratio in S[F_CINFO])."""
    rhs = w[W_AUG_RHS]
    if count:
        I[ST_RES] += 1
        I[ST_LU] += 1
    status, ratio = consistent_accelerations(fns, p, u, n, m, g, t, q, v, w[W_M], w[W_CQ], w[W_AUG], w[W_AUG],
                                             w[W_AUG_PIV], w[W_FORCES], w[W_C], rhs)
    if status != FACTORED:
        S[F_CT] = t
        S[F_CINFO] = ratio
        return C_ACC_NONFINITE if status == MATRIX_NONFINITE else C_ACC_SINGULAR
    for i in range(n):
        a[i] = rhs[i]
    for k in range(m + g):
        lam[k] = rhs[n + k]
    return C_NONE


def _fd_step(x, j):
    """The forward-difference step of column j (cosim.derivatives.forward_jacobian):
    √ε·max(|x_j|, 10⁻³), rounded so that x_j + h is exact."""
    h = math.sqrt(EPS) * max(abs(x[j]), 1e-3)
    return (x[j] + h) - x[j]


def _velocity_jacobian(fns, p, m, g, q, v, t, xp, D, w):
    """D[:m + g] ← ∂[C_q v + C_t; B v + b]/∂q at (q, v, t) by forward differences."""
    Cq, Ct, f0, f1 = w[W_CQ], w[W_CT], w[W_FD0], w[W_FD1]
    n = q.shape[0]
    _velocity_constraints(fns, p, m, g, q, v, t, Cq, Ct, f0)
    for i in range(n):
        xp[i] = q[i]
    for j in range(n):
        h = _fd_step(q, j)
        xp[j] = q[j] + h
        _velocity_constraints(fns, p, m, g, xp, v, t, Cq, Ct, f1)
        xp[j] = q[j]
        for k in range(m + g):
            D[k, j] = (f1[k] - f0[k]) / h


def _acceleration_jacobian(fns, S, I, p, u, n, m, g, t, q, v, wrt_v, xp, D, w):
    """D ← ∂ψ/∂q (``wrt_v`` False) or ∂ψ/∂v at (q, v, t) by forward differences;
    every evaluation of ψ counts.  Returns a cause code."""
    a0, a1, lam = w[W_A0], w[W_A], w[W_LAM]    # ψ at the shifted points in w[W_A]
    x = v if wrt_v else q
    cause = _accelerations(fns, S, I, p, u, n, m, g, t, q, v, a0, lam, True, w)
    if cause != C_NONE:
        return cause
    for i in range(n):
        xp[i] = x[i]
    for j in range(n):
        h = _fd_step(x, j)
        xp[j] = x[j] + h
        if wrt_v:
            cause = _accelerations(fns, S, I, p, u, n, m, g, t, q, xp, a1, lam, True, w)
        else:
            cause = _accelerations(fns, S, I, p, u, n, m, g, t, xp, v, a1, lam, True, w)
        if cause != C_NONE:
            return cause
        xp[j] = x[j]
        for i in range(n):
            D[i, j] = (a1[i] - a0[i]) / h
    return C_NONE


# ---------------------------------------------------------------------------------
# the trapezoidal system (eq. 3.7) and its iteration matrix (eq. 4.5)
# ---------------------------------------------------------------------------------
def _unpack(n, x_pred, delta, q, v):
    for i in range(n):
        q[i] = x_pred[i] + delta[i]
        v[i] = x_pred[n + i] + delta[n + i]


def _residual(fns, S, I, p, u, n, m, g, t1, h, pq, pv, w):
    """F ← [A_qᵀ(q − q_k − h/2 (v + v_k)); A_vᵀ(v − v_k − h/2 (a + a_k)); f(x)] at
    x = x_pred + δ (eq. 3.7).  Returns a cause code."""
    q, v, Cq, C, Ct, Aq, Av = w[W_Q], w[W_V], w[W_CQ], w[W_C], w[W_CT], w[W_AQ], w[W_AV]
    qk, vk, ak, tmp, a = w[W_QK], w[W_VK], w[W_AK], w[W_QE], w[W_A]     # tmp: q_e is free
    x_pred, delta, F, lam, fv = w[W_X_PRED], w[W_DELTA], w[W_RESIDUAL], w[W_LAM], w[W_FD0]
    _unpack(n, x_pred, delta, q, v)
    cause = _accelerations(fns, S, I, p, u, n, m, g, t1, q, v, a, lam, True, w)
    if cause != C_NONE:
        return cause
    hh = 0.5 * h
    for i in range(n):
        tmp[i] = (q[i] - qk[i]) - hh * (v[i] + vk[i])
    for i in range(pq):
        s = 0.0
        for j in range(n):
            s += Aq[i, j] * tmp[j]
        F[i] = s
    for i in range(n):
        tmp[i] = (v[i] - vk[i]) - hh * (a[i] + ak[i])
    for i in range(pv):
        s = 0.0
        for j in range(n):
            s += Av[i, j] * tmp[j]
        F[pq + i] = s
    r = pq + pv
    C[:] = 0.0
    if m > 0:
        fns[FN_CONSTRAINTS](q, t1, p, C)
    for k in range(m):
        F[r + k] = C[k]
    _velocity_constraints(fns, p, m, g, q, v, t1, Cq, Ct, fv)
    for k in range(m + g):
        F[r + m + k] = fv[k]
    return C_NONE


def _jacobian(fns, S, I, p, u, n, m, g, t1, h, pq, pv, w):
    """J ← the iteration matrix at x_pred + δ: eq. 4.5
    [[VᵀM, 0], [0, VᵀM], [C_q, 0], [(C_q q')_q, C_q]] (+ B rows) for "seed", with
    −h/2·A_kᵀ ∂g/∂x (forward differences) for "newton".  Returns a cause code."""
    q, v, Cq, Aq, Av, xp = w[W_Q], w[W_V], w[W_CQ], w[W_AQ], w[W_AV], w[W_VE]   # xp: v_e is free
    x_pred, delta, J = w[W_X_PRED], w[W_DELTA], w[W_J]
    Dq, Dv, Dg = w[W_DPSI_DQ], w[W_DPSI_DV], w[W_DVC_DQ]
    _unpack(n, x_pred, delta, q, v)
    N = 2 * n
    r = pq + pv
    for i in range(N):
        for j in range(N):
            J[i, j] = 0.0
    _velocity_jacobian(fns, p, m, g, q, v, t1, xp, Dg, w)
    _constraint_rows(fns, p, m, g, q, t1, Cq)
    for k in range(m):
        for j in range(n):
            J[r + k, j] = Cq[k, j]
            J[r + m + k, j] = Dg[k, j]
            J[r + m + k, n + j] = Cq[k, j]
    for k in range(m, m + g):
        for j in range(n):
            J[r + m + k, j] = Dg[k, j]
            J[r + m + k, n + j] = Cq[k, j]
    for i in range(pq):
        for j in range(n):
            J[i, j] = Aq[i, j]
    if I[ITERATION] == ITERATION_SEED:
        for i in range(pv):
            for j in range(n):
                J[pq + i, n + j] = Av[i, j]
        return C_NONE
    cause = _acceleration_jacobian(fns, S, I, p, u, n, m, g, t1, q, v, False, xp, Dq, w)
    if cause != C_NONE:
        return cause
    cause = _acceleration_jacobian(fns, S, I, p, u, n, m, g, t1, q, v, True, xp, Dv, w)
    if cause != C_NONE:
        return cause
    c = -0.5 * h
    for i in range(pq):
        for j in range(n):
            J[i, n + j] = c * Aq[i, j]
    hh = 0.5 * h
    for i in range(pv):
        for j in range(n):
            sq, sv = 0.0, 0.0
            for k in range(n):
                sq += Av[i, k] * Dq[k, j]
                sv += Av[i, k] * Dv[k, j]
            J[pq + i, j] = c * sq
            J[pq + i, n + j] = Av[i, j] - hh * sv
    return C_NONE


def _newton_job(job, fns, S, I, LU, p, u, n, m, g, t0, t1, h, pq, pv, w):
    """A job of kernel_common.quasi_newton: ‖Δδ‖ (the max norm in the error weights of
    the predictor), the residual, or the iteration matrix formed and factored.
    Returns the answer (a failure: its cause code)."""
    N = 2 * n
    if job == JOB_NORM:
        return weighted_max(w[W_RESIDUAL], w[W_WEIGHTS], N)
    if job == JOB_RESIDUAL:
        return float(_residual(fns, S, I, p, u, n, m, g, t1, h, pq, pv, w))
    cause = _jacobian(fns, S, I, p, u, n, m, g, t1, h, pq, pv, w)
    if cause != C_NONE:
        return float(cause)
    I[ST_JAC] += 1
    status, ratio = factor_matrix(w[W_J], LU, I[PIV:PIV + N], N)
    if status != FACTORED:
        I[HAS_FACTOR] = 0
        S[F_CT], S[F_CH], S[F_CINFO] = t0, h, ratio
        return float(C_ITER_NONFINITE if status == MATRIX_NONFINITE else C_ITER_SINGULAR)
    return 0.0


def _newton(fns, S, I, LU, p, u, n, m, g, t0, t1, h, pq, pv, w):
    """Seed 000 Algorithm 2 (kernel_common.quasi_newton, 25 iterations, plain: no prior
    rate, no stall test).  δ in w[W_DELTA]; returns a cause code (C_NONE: converged;
    quasi_newton's reasons are C_RESIDUAL, C_UPDATE, C_NO_CONVERGENCE)."""
    N = 2 * n
    piv, F, delta = I[PIV:PIV + N], w[W_RESIDUAL][:N], w[W_DELTA]
    job, state = newton_begin(S, I, delta, N, NEWTON_RULE)
    x = 0.0
    while job < NEWTON_END:
        x = _newton_job(job, fns, S, I, LU, p, u, n, m, g, t0, t1, h, pq, pv, w)
        job, state = quasi_newton(job, x, state, S, I, LU, piv, F, delta, N, h, NEWTON_TOL,
                                  NEWTON_ERR_TOL, False, NEWTON_RULE)
    reason = job - NEWTON_END
    return int(x) if reason == QN_ABORTED else reason


def _attempt(fns, S, I, LU, p, u, t0, t1, h, w):
    """One trapezoidal step from (t0, x_k) to t1 (LocalEquivalentIndex1._attempt):
    A_k, Heun's predictor, the Newton solve, ψ and λ at the result.  Returns (cause,
    err), err the local error estimate (x_trap − x_Heun)/3 in the weights; the result
    in q = w[W_Q], v = w[W_V], a = w[W_A], λ = w[W_LAM]."""
    n, m, g = I[I_N], I[I_M], I[I_NG]
    o = offsets(n, m, g)
    o_y, o_qdd = o[O_Y], o[O_QDD]
    q, v, M, Cq, Aq, Av = w[W_Q], w[W_V], w[W_M], w[W_CQ], w[W_AQ], w[W_AV]
    A, V, tau, cols = w[W_NS_A], w[W_NS_V], w[W_NS_TAU], w[W_NS_COLS]
    qk, vk, ak, qe, ve, ae, a = w[W_QK], w[W_VK], w[W_AK], w[W_QE], w[W_VE], w[W_AE], w[W_A]
    x_pred, delta, w_inv, lam = w[W_X_PRED], w[W_DELTA], w[W_WEIGHTS], w[W_LAM]
    for i in range(n):
        qk[i] = S[o_y + i]
        vk[i] = S[o_y + n + i]
        ak[i] = S[o_qdd + i]
    M[:, :] = 0.0
    fns[FN_MASS](qk, t0, p, M)
    _constraint_rows(fns, p, m, g, qk, t0, Cq)
    cause = _basis_times_mass(I, Cq, m, n, M, Aq, A, V, tau, cols)   # eq. 4.4 at x_k
    if cause != C_NONE:
        return cause, 0.0
    pq, pv = n - m, n - m - g
    if g > 0:                                   # velocity rows: V ⊥ [C_q; B]
        cause = _basis_times_mass(I, Cq, m + g, n, M, Av, A, V, tau, cols)
        if cause != C_NONE:
            return cause, 0.0
    else:
        for i in range(pq):
            for j in range(n):
                Av[i, j] = Aq[i, j]
    # Heun's predictor x_e = x_k + h g(x_k); x_pred = x_k + h/2 (g(x_k) + g(x_e))
    for i in range(n):
        qe[i] = qk[i] + h * vk[i]
        ve[i] = vk[i] + h * ak[i]
    cause = _accelerations(fns, S, I, p, u, n, m, g, t1, qe, ve, ae, lam, True, w)
    if cause != C_NONE:
        return cause, 0.0
    hh = 0.5 * h
    rtol, atol = S[RTOL], S[ATOL]
    for i in range(n):
        x_pred[i] = qk[i] + hh * (vk[i] + ve[i])
        x_pred[n + i] = vk[i] + hh * (ak[i] + ae[i])
    for i in range(2 * n):
        w_inv[i] = 1.0 / (rtol * abs(x_pred[i]) + atol)
    I[NEED_JAC] = 1                             # A_k changes every step
    S[RELAX] = 1.0
    cause = _newton(fns, S, I, LU, p, u, n, m, g, t0, t1, h, pq, pv, w)
    if cause != C_NONE:
        return cause, 0.0
    _unpack(n, x_pred, delta, q, v)
    cause = _accelerations(fns, S, I, p, u, n, m, g, t1, q, v, a, lam, True, w)
    if cause != C_NONE:
        return cause, 0.0
    # (x_trap − x_Heun)/3 in the weights rtol·max(|x_k|, |x_pred|) + atol, RMS
    e = w[W_EST]
    for i in range(2 * n):
        e[i] = ((q[i] if i < n else v[i - n]) - x_pred[i]) / 3.0
    return C_NONE, error_ratio(S[o_y:o_y + 2 * n], x_pred, e, rtol, atol)


# ---------------------------------------------------------------------------------
# one step, advance, entry
# ---------------------------------------------------------------------------------
def step(fns, S, I, LU, u, p, t_limit, w):
    """One accepted step ending at or before ``t_limit``
    (LocalEquivalentIndex1._step_inner).  Returns a status code; on failure S[F_H]
    is the step size, I[CAUSE] / S[F_ERR] what made it fail."""
    n, m, g = I[I_N], I[I_M], I[I_NG]
    o = offsets(n, m, g)
    o_y, o_yp, o_qdd, o_lam, o_g = o[O_Y], o[O_YP], o[O_QDD], o[O_LAM], o[O_G]
    q, v, a, lam = w[W_Q], w[W_V], w[W_A], w[W_LAM]
    t = S[T]
    fixed = S[H_FIXED] > 0.0
    h_prop = S[H_NEXT]
    h, lands, moves = clamp_step(t, h_prop, S[MAX_STEP], fixed, t_limit)
    if not moves:
        S[F_H] = h
        return UNDERFLOW
    h_min = 1e-12 * max(1.0, abs(t))
    rejections = 0
    rejected = False
    err = 0.0
    t1 = t
    while True:
        t1 = t_limit if lands else t + h
        cause, err = _attempt(fns, S, I, LU, p, u, t, t1, h, w)
        if cause == C_NONE and fixed:   # no error test: the estimate is judged
            S[FIXED_RTOL] = REFUSAL * S[RTOL]   # (li1_record.REFUSAL: a tenth of the state)
            if not fixed_step_resolved(S, err, h, FIXED_SLOTS):
                return FIXED_UNRESOLVED
            break
        if cause == C_NONE and err <= 1.0:
            break
        rejections += 1
        failed, h = rejected_attempt(S, I, cause, err, h, fixed, rejections, h_min, REJECTION_CONTROL,
                                     REJECTION_SLOTS)
        if failed:
            return STEP_FAILED if fixed else TOO_SMALL
        lands, rejected = False, True
    # accept: dense slopes g0 = [v; q''] before, g1 after (one after the other at o_g)
    for i in range(n):
        S[o_g + i] = S[o_y + n + i]
        S[o_g + n + i] = S[o_qdd + i]
        S[o_g + 2 * n + i] = v[i]
        S[o_g + 3 * n + i] = a[i]
    for i in range(2 * n):
        S[o_yp + i] = S[o_y + i]
    S[T_PREV] = t
    S[T] = t1
    for i in range(n):
        S[o_y + i] = q[i]
        S[o_y + n + i] = v[i]
        S[o_qdd + i] = a[i]
    for k in range(m + g):
        S[o_lam + k] = lam[k]
    I[HAS_DENSE] = 1
    I[ST_STEPS] += 1
    if fixed:
        S[H_NEXT] = S[H_FIXED]
        return OK
    S[H_NEXT] = next_step(h, h_prop, err, rejected, lands, 1.0 / 3.0, SAFETY, MAX_FACTOR, S[MAX_STEP])
    return OK


def restart(fns, S, I, u, p, w):
    """Integrator.restart: q'' and λ at the current point from eq. 2.5 (not counted in
    the statistics, as consistent_accelerations), no dense output, t_prev = t,
    y_prev = y.  Returns OK, ACC_SINGULAR or ACC_NONFINITE (record unchanged)."""
    n, m, g = I[I_N], I[I_M], I[I_NG]
    o = offsets(n, m, g)
    o_y, o_yp, o_qdd, o_lam = o[O_Y], o[O_YP], o[O_QDD], o[O_LAM]
    q, v, a, lam = w[W_QK], w[W_VK], w[W_A], w[W_LAM]
    for i in range(n):
        q[i] = S[o_y + i]
        v[i] = S[o_y + n + i]
    cause = _accelerations(fns, S, I, p, u, n, m, g, S[T], q, v, a, lam, False, w)
    if cause == C_ACC_SINGULAR:
        return ACC_SINGULAR
    if cause != C_NONE:
        return ACC_NONFINITE
    for i in range(n):
        S[o_qdd + i] = a[i]
    for k in range(m + g):
        S[o_lam + k] = lam[k]
    I[HAS_DENSE] = 0
    forget_step(S, T, T_PREV, o_y, o_yp, 2 * n)
    return OK


def advance(fns, S, I, LU, u, p, t_target, max_steps, whole):
    """Steps until t = t_target (exactly) or ``max_steps`` steps were taken
    (with ``whole``: not reaching the target is the failure STEP_BUDGET).
    On failure S, I and LU are as on entry (all or nothing) except the failure
    slots F_T (t of the failing step), F_H, F_ERR, F_CT, F_CH, F_CINFO, I[CAUSE]."""
    owned, status = workspace(I[I_N], I[I_M], I[I_NG]), OK
    w = unowned(owned)   # views without reference counts; owned is kept alive below
    S0, I0, LU0 = S.copy(), I.copy(), LU.copy()
    while status == OK and S[T] < t_target and max_steps > 0:
        status, max_steps = step(fns, S, I, LU, u, p, t_target, w), max_steps - 1
    status = end_advance(status, whole, t_target, S, I, LU, S0, I0, LU0, STEP_BUDGET, FAILURE_SLOTS, CAUSE)
    keep_alive(owned)
    return status


def entry(fns, mode, S, I, LU, u, p, t_target, max_steps, y_out):
    """The method's one entry point, compiled once per machine (cosim.jit.method_entry)
    or run as plain Python.  Modes: RESTART (q'', λ at the current point, no dense
    output); WHOLE_INTERVAL advances to ``t_target`` within ``max_steps`` (else
    STEP_BUDGET, record unchanged); ONE_STEP takes at most ``max_steps`` steps.  After
    a successful advance the model's outputs at the new state go into ``y_out`` (the
    outputs kernel, fns[FN_OUTPUTS]) unless it is empty."""
    if mode == RESTART:
        status = restart(fns, S, I, u, p, workspace(I[I_N], I[I_M], I[I_NG]))
    else:
        status = advance(fns, S, I, LU, u, p, t_target, max_steps, mode != ONE_STEP)
    return model_outputs(fns, status, S, N_SCALARS, I[I_N], S[T], u, p, y_out)
