"""Parameter-preadjusted symplectic SPARK / Lobatto IIIA-IIIB (seed 003) as pure functions on one
flat state record: the one implementation, run compiled (numba, compiled once per machine by
:func:`cosim.jit.method_entry`) or as plain Python (the same functions); the integrator object
around it, with the equations, is :mod:`cosim.integrators.symplectic`.

Per step: the stage equations (Gauss-Lobatto SPARK or Lobatto IIIA-IIIB, written for H = T_γ + V
with the stage velocities and the impulses h·Λ_j as unknowns) with the modified mass M_γ = M +
γ(I − S) (body-wise for a natural-coordinate chain, seed 003 eqs. 22-25, else I − S = C_qᵀ(C_q
C_qᵀ)⁻¹C_q, eq. 7), solved by the quasi-Newton iteration of seed 000 Algorithm 2
(:mod:`.kernel_common`: the verdict, the matrix reuse test, the LU with its checks) on a
forward-difference stage matrix (a step that fails after a solve with the kept matrix is taken
once more with a fresh one); then the end point, the velocity constraint by one linear solve
with [[M_γ, C_qᵀ], [C_q, 0]], and the consistent accelerations q'', λ (seed 000 eq. 10) for the
predictor and the dense output.

The record (S: scalars, y, y_prev, q'', q''_prev, λ, the tableau and the bodies' set-up; I:
sizes, flags, statistics, pivots; LU: the kept stage-matrix factors) is declared in
:mod:`.spark_record`. No exceptions inside: status codes, which the integrator object turns into
messages; the model's functions are ``fns[k](…)`` (:func:`cosim.jit.kernel_fields` order). A
singular C_q C_qᵀ (γ's projector) gives NaN terms that Newton or the end matrix reports.
"""
import math

from .dense_lu import lu_solve_inplace
from .kernel_common import (FACTORED, FN_CONSTRAINTS, FN_CONSTRAINT_DT,
    FN_CONSTRAINT_JACOBIAN, FN_FORCES, JOB_NORM, JOB_RESIDUAL, NEWTON_END, NS_KEPT, QN_ABORTED, QN_SOLVED,
    clamp_step, end_advance, factor_matrix, fixed_step_resolved, consistent_accelerations,
    forget_step, keep_alive, keeps_matrix, model_outputs, newton_begin, quasi_newton, relaxation,
    snapshot_in, unowned)
# the record: every name, so that spark_kernel is the method's one namespace
from .spark_terms import _kinetic_gradient, _layout, _mass_gamma  # noqa: F401
from .spark_record import (  # noqa: F401
    ACCEL_MATRIX, ATOL, CHAIN, CONST_MASS, END_MATRIX, EPS, FAILURE_SLOTS, FD_SCALE, FIXED,
    FIXED_ERR, FIXED_SLOTS, FIXED_UNRESOLVED, F_CT, F_H, F_INFO, F_T, GAMMA, GAUSS_LOBATTO, H,
    HAS_FACTOR, H_JAC, H_LAST, I_M, I_N, I_NB, I_NV, I_S, LOBATTO, MATRIX_FLOATS, MATRIX_INTS, MAX_STEP, NEED_JAC, NEWTON_ERR_TOL,
    NEWTON_FAILED, NEWTON_MAX_ITER, NEWTON_REL, NEWTON_TOL, N_SCALARS, N_STATS, OK, ONE_STEP,
    PIV, REASON, RELAX, RESTART, RTOL, R_NO_CONVERGENCE, R_RESIDUAL, R_UPDATE, SCHEME, SIGMA,
    STAGE_MATRIX, STATS, STEP_BUDGET, STEP_UNDERFLOW, ST_JAC, ST_LU, ST_NEWTON, ST_RES, ST_STEPS, T, T_PREV, TWO_STEP_STAGES,
    WHOLE_INTERVAL, matrix_size, offsets, workspace,
    O_A, O_AH, O_AT, O_B, O_BL, O_C, O_CL, O_LAM, O_QDD, O_QDDP, O_Y, O_YP,
    W_AUG, W_AUG_LU, W_AUG_PIV, W_AUG_RHS, W_C, W_CQ, W_CT, W_DELTA, W_FD0, W_FD1, W_FORCES,
    W_IMPULSES, W_KINETIC_GRADIENT, W_LAM0, W_LAM1, W_LAST_FORCE, W_LOBATTO_Q, W_M, W_P0, W_P1,
    W_Q0, W_Q1, W_QDD0, W_QDD1, W_RESIDUAL, W_SNAPSHOT, W_STAGE_FORCES, W_STAGE_MATRIX, W_STAGE_Q,
    W_V0, W_V1, W_Z, W_Z0, W_Z_SHIFTED,
    W_CCT, W_CCT_INV_CQ, W_CCT_PIV, W_CONSTRAINT_FORCE_JAC, W_CQ_COLUMN, W_MV_Q, W_PROJ_W, W_V_TANGENT)

# kernel_common.newton_begin's rule: plain Algorithm 2 (no prior rate, no stall test)
NEWTON_RULE = (NEWTON_MAX_ITER, 0, 0, HAS_FACTOR, ST_LU, NEED_JAC, ST_RES, ST_NEWTON, H_JAC, RELAX, SIGMA)

# inlined by numba into their one caller (cosim.jit.method_inlined): they take the work tuple
INLINED = ("_newton", "_newton_job", "_stage_matrix", "_lobatto_stages", "_gauss_lobatto_stages", "_predict",
           "_end_point", "_estimate", "_two_step_estimate")


def restart(S, I):
    """Integrator.restart: t_prev = t, y_prev = y, q''_prev = q'' (the dense output of
    the last step is forgotten; q'' and λ stay the predictor's)."""
    n = I[I_N]
    o = _layout(I)
    o_y, o_yp, o_qdd, o_qddp = o[O_Y], o[O_YP], o[O_QDD], o[O_QDDP]
    forget_step(S, T, T_PREV, o_y, o_yp, 2 * n)
    for i in range(n):
        S[o_qddp + i] = S[o_qdd + i]
    return OK


def _amax_abs(x, k):
    """max |x_i| over the first k entries as numpy's max: NaN propagates (0 for k = 0)."""
    r = 0.0
    for i in range(k):
        a = abs(x[i])
        if a > r or a != a:
            r = a
            if a != a:
                return a
    return r


def _force(fns, S, I, p, u, q, v, t, out, w):
    """f(q, v) = ∂T_γ/∂q + Q (seed 003 eq. 9, the protocol's Q) into ``out``."""
    n = I[I_N]
    g, Qf = w[W_KINETIC_GRADIENT], w[W_FORCES]
    _kinetic_gradient(fns, S, I, p, q, v, t, g, w)
    Qf[:] = 0.0
    fns[FN_FORCES](q, v, t, u, p, Qf)
    for i in range(n):
        out[i] = g[i] + Qf[i]


# ---------------------------------------------------------------------------------
# the stage equations
# ---------------------------------------------------------------------------------
def _stages(fns, S, I, p, u, z, q0, p0, t0, h, res, final, w):
    """The stage residual at z = [V (nv × n); h·Λ (s × m)] into ``res``; with ``final``
    instead the end point q_{n+1} (W_Q1) and p_{n+1} without the last constraint
    impulse (W_P1), which the velocity-constraint solve adds."""
    n, nv = I[I_N], I[I_NV]
    A = _tableau(S, I)[1]
    Q = w[W_STAGE_Q]
    for i in range(nv):   # Q = q_n + h A V
        for k in range(n):
            acc = 0.0
            for j in range(nv):
                acc += A[i, j] * z[j * n + k]
            Q[i, k] = q0[k] + h * acc
    if I[SCHEME] == LOBATTO:
        _lobatto_stages(fns, S, I, p, u, z, q0, p0, t0, h, res, final, w)
    else:
        _gauss_lobatto_stages(fns, S, I, p, u, z, q0, p0, t0, h, res, final, w)


def _tableau(S, I):
    """The scheme's coefficients in S: (c, A, b) of the nv dynamics stages, Â (the
    constraint stages from V), Ã (their impulses in the dynamics), c̃, b̃ of the
    s + 1 constraint stages."""
    s, nv = I[I_S], I[I_NV]
    nl = s + 1
    o = _layout(I)
    o_c, o_a, o_b, o_ah, o_at, o_cl, o_bl = o[O_C], o[O_A], o[O_B], o[O_AH], o[O_AT], o[O_CL], o[O_BL]
    return (S[o_c:o_c + nv], S[o_a:o_a + nv * nv].reshape((nv, nv)), S[o_b:o_b + nv],
            S[o_ah:o_ah + nl * nv].reshape((nl, nv)), S[o_at:o_at + s * nl].reshape((s, nl)),
            S[o_cl:o_cl + nl], S[o_bl:o_bl + nl])


def _lobatto_stages(fns, S, I, p, u, z, q0, p0, t0, h, res, final, w):
    """_stages for Lobatto IIIA-IIIB: nv = s + 1 stages at the Lobatto points (Q formed)."""
    n, m, nv = I[I_N], I[I_M], I[I_NV]
    c, A, b, Ah, At, cl, bl = _tableau(S, I)
    Q, Fs = w[W_STAGE_Q], w[W_STAGE_FORCES]
    M, Cq, C, fo = w[W_M], w[W_CQ], w[W_C], w[W_LAST_FORCE]
    oh = nv * n   # start of the impulses h·Λ_j in z
    for k in range(n):
        Q[0, k] = q0[k]
    for j in range(nv - 1):
        tj = t0 + c[j] * h
        _force(fns, S, I, p, u, Q[j], z[j * n:(j + 1) * n], tj, Fs[j], w)
        Cq[:, :] = 0.0
        fns[FN_CONSTRAINT_JACOBIAN](Q[j], tj, p, Cq)
        for k in range(n):
            acc = 0.0
            for r in range(m):
                acc += Cq[r, k] * z[oh + j * m + r]
            Fs[j, k] = h * Fs[j, k] - acc
    if final:
        q1, pt = w[W_Q1], w[W_P1]
        for k in range(n):
            q1[k] = Q[nv - 1, k]
        _force(fns, S, I, p, u, Q[nv - 1], z[(nv - 1) * n:nv * n], t0 + h, fo, w)
        hb = h * b[nv - 1]
        for k in range(n):
            acc = 0.0
            for j in range(nv - 1):
                acc += b[j] * Fs[j, k]
            pt[k] = p0[k] + acc + hb * fo[k]
        return
    for i in range(nv):
        ti = t0 + c[i] * h
        _mass_gamma(fns, S, I, p, Q[i], ti, M, w)
        for k in range(n):
            mv = 0.0
            for j in range(n):
                mv += M[k, j] * z[i * n + j]
            acc = 0.0
            for j in range(nv - 1):
                acc += Ah[i, j] * Fs[j, k]
            res[i * n + k] = mv - p0[k] - acc
        if i > 0:
            C[:] = 0.0
            fns[FN_CONSTRAINTS](Q[i], ti, p, C)
            for r in range(m):
                res[oh + (i - 1) * m + r] = C[r] / h


def _gauss_lobatto_stages(fns, S, I, p, u, z, q0, p0, t0, h, res, final, w):
    """_stages for the Gauss-Lobatto SPARK: s Gauss stages for the dynamics, s + 1
    Lobatto stages for the constraints (Q formed)."""
    n, m, s, nv = I[I_N], I[I_M], I[I_S], I[I_NV]
    nl = s + 1
    c, A, b, Ah, At, cl, bl = _tableau(S, I)
    Q, Qt, Fs, GL = w[W_STAGE_Q], w[W_LOBATTO_Q], w[W_STAGE_FORCES], w[W_IMPULSES]
    M, Cq, C = w[W_M], w[W_CQ], w[W_C]
    oh = nv * n   # start of the impulses h·Λ_j in z
    for i in range(nl):   # Q̃ = q_n + h Â V
        for k in range(n):
            acc = 0.0
            for j in range(nv):
                acc += Ah[i, j] * z[j * n + k]
            Qt[i, k] = q0[k] + h * acc
    for k in range(n):
        Qt[0, k] = q0[k]
    for j in range(s):
        Cq[:, :] = 0.0
        fns[FN_CONSTRAINT_JACOBIAN](Qt[j], t0 + cl[j] * h, p, Cq)
        for k in range(n):
            acc = 0.0
            for r in range(m):
                acc += Cq[r, k] * z[oh + j * m + r]
            GL[j, k] = acc
    for i in range(nv):
        _force(fns, S, I, p, u, Q[i], z[i * n:(i + 1) * n], t0 + c[i] * h, Fs[i], w)
        for k in range(n):
            Fs[i, k] = h * Fs[i, k]
    if final:
        q1, pt = w[W_Q1], w[W_P1]
        for k in range(n):
            q1[k] = Qt[nl - 1, k]
            acc = 0.0
            for i in range(nv):
                acc += b[i] * Fs[i, k]
            acc2 = 0.0
            for j in range(s):
                acc2 += bl[j] * GL[j, k]
            pt[k] = p0[k] + acc - acc2
        return
    for i in range(nv):
        ti = t0 + c[i] * h
        _mass_gamma(fns, S, I, p, Q[i], ti, M, w)
        for k in range(n):
            mv = 0.0
            for j in range(n):
                mv += M[k, j] * z[i * n + j]
            acc = 0.0
            for j in range(nv):
                acc += A[i, j] * Fs[j, k]
            acc2 = 0.0
            for j in range(s):
                acc2 += At[i, j] * GL[j, k]
            res[i * n + k] = mv - p0[k] - acc + acc2
    for j in range(1, s + 1):
        C[:] = 0.0
        fns[FN_CONSTRAINTS](Qt[j], t0 + cl[j] * h, p, C)
        for r in range(m):
            res[oh + (j - 1) * m + r] = C[r] / h


def _stage_matrix(fns, S, I, p, u, x, q0, p0, t0, h, J, w):
    """The stage matrix at x by forward differences (common.fd_jacobian with the
    scale FD_SCALE·(1 + ‖x‖∞)) into J."""
    N = matrix_size(I[I_N], I[I_M], I[I_S], I[I_NV])
    xp, f0, f1 = w[W_Z_SHIFTED], w[W_FD0], w[W_FD1]
    _stages(fns, S, I, p, u, x, q0, p0, t0, h, f0, False, w)
    scale = FD_SCALE * (1.0 + _amax_abs(x, N))
    sq = math.sqrt(EPS)
    for j in range(N):
        ref = abs(x[j])
        if scale > ref or scale != scale:
            ref = scale
        hj = sq * max(ref, 1e-3)
        for i in range(N):
            xp[i] = x[i]
        xp[j] += hj
        hj = xp[j] - x[j]   # exactly representable step
        _stages(fns, S, I, p, u, xp, q0, p0, t0, h, f1, False, w)
        for i in range(N):
            J[i, j] = (f1[i] - f0[i]) / hj


def _newton_job(job, fns, S, I, LU, p, u, q0, p0, t0, h, wt, w):
    """A job of kernel_common.quasi_newton at z = z0 + δ: ‖Δz‖ = max|Δz| / ``wt``, the
    stage residual, or the stage matrix formed and factored.  Returns the answer (a
    failure: STAGE_MATRIX, I[REASON] the factor status, S[F_INFO] the pivot ratio)."""
    N = matrix_size(I[I_N], I[I_M], I[I_S], I[I_NV])
    z, z0, delta, F, Jw = w[W_Z], w[W_Z0], w[W_DELTA], w[W_RESIDUAL], w[W_STAGE_MATRIX]
    if job == JOB_NORM:
        return _amax_abs(F, N) / wt
    for i in range(N):
        z[i] = z0[i] + delta[i]
    if job == JOB_RESIDUAL:
        _stages(fns, S, I, p, u, z, q0, p0, t0, h, F, False, w)
        return 0.0
    _stage_matrix(fns, S, I, p, u, z, q0, p0, t0, h, Jw, w)
    I[ST_JAC] += 1
    status, ratio = factor_matrix(Jw, LU, I[PIV:PIV + N], N)
    if status != FACTORED:
        I[HAS_FACTOR] = 0
        I[REASON] = status
        S[F_INFO] = ratio
        return float(STAGE_MATRIX)
    return 0.0


def _newton(fns, S, I, LU, p, u, q0, p0, t0, h, w):
    """One quasi-Newton solve of the stage equations from z0 (W_Z0) (seed 000
    Algorithm 2, kernel_common.quasi_newton; the norm max|Δz| / (newton_tol·(1 + ‖z0‖∞))).
    Returns (status, kept): OK, NEWTON_FAILED (I[REASON]) or STAGE_MATRIX
    (I[REASON] the factor status, S[F_INFO] the pivot ratio), and 1 when the solve
    started with the factor kept from an earlier step and was not retried (the
    iterate may owe its way to that factor), else 0; z − z0 in W_DELTA."""
    N = matrix_size(I[I_N], I[I_M], I[I_S], I[I_NV])
    piv, F, delta = I[PIV:PIV + N], w[W_RESIDUAL][:N], w[W_DELTA]
    wt = S[NEWTON_REL] * (1.0 + _amax_abs(w[W_Z0], N))
    job, state = newton_begin(S, I, delta, N, NEWTON_RULE)
    x = 0.0
    while job < NEWTON_END:
        x = _newton_job(job, fns, S, I, LU, p, u, q0, p0, t0, h, wt, w)
        job, state = quasi_newton(job, x, state, S, I, LU, piv, F, delta, N, h, NEWTON_TOL,
                                  NEWTON_ERR_TOL, False, NEWTON_RULE)
    reason, kept = job - NEWTON_END, state[NS_KEPT]
    if reason == QN_SOLVED or reason == QN_ABORTED:
        return (OK if reason == QN_SOLVED else int(x)), kept
    I[REASON] = reason   # quasi_newton's reasons are R_RESIDUAL, R_UPDATE, R_NO_CONVERGENCE
    return NEWTON_FAILED, kept


# ---------------------------------------------------------------------------------
# one step
# ---------------------------------------------------------------------------------
def _augmented(M, Cq, n, m, K):
    """K = [[M, C_qᵀ], [C_q, 0]]."""
    for i in range(n):
        for j in range(n):
            K[i, j] = M[i, j]
        for k in range(m):
            K[i, n + k] = Cq[k, i]
            K[n + k, i] = Cq[k, i]
    for k in range(m):
        for r in range(m):
            K[n + k, n + r] = 0.0


def step(fns, S, I, LU, u, p, t_limit, w):
    """One step ending at or before ``t_limit``.  Returns a status code; on failure
    S[F_H] is the step tried (S[F_CT] the time of a failed end matrix).  An attempt
    (:func:`_attempt`) that fails after a stage solve that started with the kept
    factor (the solve converged, the step then failed: the factor may have led the
    iterate astray) is taken once more from the predictor with a fresh matrix
    (Algorithm 2: a failure with an old matrix is not a failure of the step; a failed
    solve is retried so in :func:`kernel_common.newton_end`); when that fails too, the
    first attempt's failure is the one reported (status, failure slots, I[REASON])."""
    n, m, s, nv = I[I_N], I[I_M], I[I_S], I[I_NV]
    t0 = S[T]
    h, lands, moves = clamp_step(t0, S[H], S[MAX_STEP], I[FIXED] == 1, t_limit)
    if not moves:
        S[F_H] = h
        return STEP_UNDERFLOW
    sigma = S[SIGMA]
    # Algorithm 3 g: keep the matrix for this h?
    if I[HAS_FACTOR] == 1 and keeps_matrix(sigma, h, S[H_JAC]):
        I[NEED_JAC] = 0
        S[RELAX] = relaxation(h, S[H_JAC])
    else:
        I[NEED_JAC] = 1
        S[RELAX] = 1.0
    status, retry = _attempt(fns, S, I, LU, p, u, n, m, s, nv, t0, h, w)
    if retry:
        first = (S[F_H], S[F_INFO], S[F_CT], I[REASON])
        I[NEED_JAC] = 1
        S[RELAX] = 1.0
        S[SIGMA] = sigma   # the retry as a step that formed its matrix from the start
        status2, retry = _attempt(fns, S, I, LU, p, u, n, m, s, nv, t0, h, w)
        if status2 != OK:
            S[F_H], S[F_INFO], S[F_CT], I[REASON] = first
            return status
        status = OK
    if status != OK:
        return status
    # accept
    o = _layout(I)
    o_y, o_yp, o_qdd, o_qddp, o_lam = o[O_Y], o[O_YP], o[O_QDD], o[O_QDDP], o[O_LAM]
    q1, v1, qdd1, lam1 = w[W_Q1], w[W_V1], w[W_QDD1], w[W_LAM1]
    S[T_PREV] = t0
    for i in range(2 * n):
        S[o_yp + i] = S[o_y + i]
    for i in range(n):
        S[o_qddp + i] = S[o_qdd + i]
        S[o_y + i] = q1[i]
        S[o_y + n + i] = v1[i]
        S[o_qdd + i] = qdd1[i]
    for k in range(m):
        S[o_lam + k] = lam1[k]
    S[T] = t_limit if lands else t0 + h
    S[H_LAST] = h
    I[ST_STEPS] += 1
    return OK


def _attempt(fns, S, I, LU, p, u, n, m, s, nv, t0, h, w):
    """An attempt of step h from t0 with the matrix plan in I[NEED_JAC], S[RELAX]: the
    predictor, the stage solve (:func:`_newton`), the end point and the verdict on the
    local error estimate; the accepted values in W_Q1, W_V1, W_QDD1, W_LAM1.  Returns
    (status, retry): retry is True when the solve started with the kept factor,
    converged and the attempt then failed (status ≠ OK)."""
    q0, p0 = w[W_Q0], w[W_P0]
    _predict(fns, S, I, p, n, m, s, nv, t0, h, w)
    status, kept = _newton(fns, S, I, LU, p, u, q0, p0, t0, h, w)   # (retried with a fresh matrix there)
    if status != OK:
        S[F_H] = h
        return status, False
    N = matrix_size(n, m, s, nv)
    z, z0, delta = w[W_Z], w[W_Z0], w[W_DELTA]
    for i in range(N):
        z[i] = z0[i] + delta[i]
    t1 = t0 + h
    _stages(fns, S, I, p, u, z, q0, p0, t0, h, w[W_RESIDUAL], True, w)
    status = _end_point(fns, S, I, p, u, n, m, t1, h, w)
    if status == OK and s == 1:   # the second-order methods: no error test decides the step
        status, err = _estimate(fns, S, I, p, u, n, m, t0, h, w)
        if status == OK and not fixed_step_resolved(S, err, h, FIXED_SLOTS):
            status = FIXED_UNRESOLVED
    elif status == OK and s <= TWO_STEP_STAGES and S[T_PREV] < t0:   # orders 4 and 6, after a step of these inputs
        judged, err = _two_step_estimate(S, I, n, s, t0, h, w)
        if judged and not fixed_step_resolved(S, err, h, FIXED_SLOTS):
            status = FIXED_UNRESOLVED
    return status, status != OK and kept == 1


def _predict(fns, S, I, p, n, m, s, nv, t0, h, w):
    """The step start: q0, v0, the momentum p0 = M_γ v0, and the Newton start
    V_i ≈ v_n + c_i h q''_n, h Λ_j ≈ h λ_n."""
    o = _layout(I)
    o_y, o_qdd, o_lam, o_c = o[O_Y], o[O_QDD], o[O_LAM], o[O_C]
    c = S[o_c:o_c + nv]
    q0, v0, p0, M, z0 = w[W_Q0], w[W_V0], w[W_P0], w[W_M], w[W_Z0]
    for k in range(n):
        q0[k] = S[o_y + k]
        v0[k] = S[o_y + n + k]
    _mass_gamma(fns, S, I, p, q0, t0, M, w)
    for i in range(n):
        acc = 0.0
        for j in range(n):
            acc += M[i, j] * v0[j]
        p0[i] = acc
    for i in range(nv):
        ch = c[i] * h
        for k in range(n):
            z0[i * n + k] = v0[k] + ch * S[o_qdd + k]
    for j in range(s):
        for r in range(m):
            z0[nv * n + j * m + r] = h * S[o_lam + r]


def _end_point(fns, S, I, p, u, n, m, t1, h, w):
    """At the new point q1 (momentum p̃ from the stages): v1 from the velocity
    constraint (linear) [[M_γ, C_qᵀ], [C_q, 0]] [v; h λ_last] = [p̃; −C_t], then the
    consistent accelerations q''1, λ1 (seed 000 eq. 10).  Returns a status code."""
    q1, pt, v1, qdd1, lam1 = w[W_Q1], w[W_P1], w[W_V1], w[W_QDD1], w[W_LAM1]
    M, Cq, Ct = w[W_M], w[W_CQ], w[W_CT]
    K, KLU, rhs = w[W_AUG], w[W_AUG_LU], w[W_AUG_RHS]
    piv = w[W_AUG_PIV]
    _mass_gamma(fns, S, I, p, q1, t1, M, w)
    Cq[:, :] = 0.0
    fns[FN_CONSTRAINT_JACOBIAN](q1, t1, p, Cq)
    _augmented(M, Cq, n, m, K)
    fstat, ratio = factor_matrix(K, KLU, piv, n + m)
    if fstat != FACTORED:
        S[F_H], S[F_CT], S[F_INFO] = h, t1, ratio
        I[REASON] = fstat
        return END_MATRIX
    Ct[:] = 0.0
    fns[FN_CONSTRAINT_DT](q1, t1, p, Ct)
    for i in range(n):
        rhs[i] = pt[i]
    for k in range(m):
        rhs[n + k] = -Ct[k]
    lu_solve_inplace(KLU, piv, rhs)
    for i in range(n):
        v1[i] = rhs[i]
    return _accelerations(fns, S, I, p, u, n, m, t1, h, q1, v1, qdd1, lam1, w)


def _accelerations(fns, S, I, p, u, n, m, t, h, q, v, qdd, lam, w):
    """The consistent accelerations q'', λ at (q, v, t) (seed 000 eq. 10:
    :func:`kernel_common.consistent_accelerations`).  Returns OK or ACCEL_MATRIX (S[F_CT] = t)."""
    rhs = w[W_AUG_RHS]
    fstat, ratio = consistent_accelerations(fns, p, u, n, m, 0, t, q, v, w[W_M], w[W_CQ], w[W_AUG],
                                            w[W_AUG_LU], w[W_AUG_PIV], w[W_FORCES], w[W_C], rhs)
    if fstat != FACTORED:
        S[F_H], S[F_CT], S[F_INFO] = h, t, ratio
        I[REASON] = fstat
        return ACCEL_MATRIX
    for i in range(n):
        qdd[i] = rhs[i]
    for k in range(m):
        lam[k] = rhs[n + k]
    return OK


def _estimate(fns, S, I, p, u, n, m, t0, h, w):
    """The step's local error estimate: the positions' Hermite defect
    q_{n+1} − q_n − h/2 (v_n + v_{n+1}) + h²/12 (q''_{n+1} − q''_n), which the exact
    solution makes O(h⁵) (−h⁵ q⁽⁵⁾/720), as an RMS norm in the weights
    rtol·|q_{n+1}| + atol: for a second-order method (stages = 1) the positions' local
    error to leading order (the h·δv and h²·δq'' terms are O(h⁴)).  Not for stages ≥ 2:
    there the method's own leading error cancels the defect's (measured: an estimate
    ~1e-7 of the true local error; stages 2 and 3 take :func:`_two_step_estimate`).  q''_n is the
    record's (the last step's end, the same inputs) except after a restart (new inputs,
    parameters or a jump: t_prev = t), where it is solved afresh at (q_n, v_n) into
    W_QDD0.  Returns (status, estimate); the end point q_{n+1}, v_{n+1}, q''_{n+1} in
    W_Q1, W_V1, W_QDD1."""
    q0, v0, q1, v1, qdd1, a0 = w[W_Q0], w[W_V0], w[W_Q1], w[W_V1], w[W_QDD1], w[W_QDD0]
    if S[T_PREV] == S[T]:
        status = _accelerations(fns, S, I, p, u, n, m, t0, h, q0, v0, a0, w[W_LAM0], w)
        if status != OK:
            return status, 0.0
    else:
        o_qdd = _layout(I)[O_QDD]
        for k in range(n):
            a0[k] = S[o_qdd + k]
    rtol, atol = S[RTOL], S[ATOL]
    s = 0.0
    for k in range(n):
        e = (q1[k] - q0[k]) - 0.5 * h * (v0[k] + v1[k]) + h * h / 12.0 * (qdd1[k] - a0[k])
        wk = rtol * abs(q1[k]) + atol
        s += (e / wk) ** 2
    return OK, math.sqrt(s / n) if n > 0 else 0.0


def _two_step_weights(r):
    """The weights of q(1) − q(−r) = Σ_j β_j q'(x_j) + γ_j q''(x_j) at the nodes x = −r,
    0, 1 (units of the step h), exact for polynomials of degree 6: the integrals over
    [−r, 1] of the Hermite basis functions of the three nodes, by 3-point Gauss-Legendre
    (exact for their degree 5).  Returns (β_−1, β_0, β_1, γ_−1, γ_0, γ_1); r = 1:
    (7, 16, 7)/15 and (1, 0, −1)/15."""
    mid, half = 0.5 * (1.0 - r), 0.5 * (1.0 + r)
    g = math.sqrt(0.6)
    b0 = b1 = b2 = c0 = c1 = c2 = 0.0
    for i in range(3):
        tau = mid + half * g * (i - 1)
        wq = half * (8.0 / 9.0 if i == 1 else 5.0 / 9.0)
        for j in range(3):
            xj = -r if j == 0 else (0.0 if j == 1 else 1.0)
            ell, dl = 1.0, 0.0
            for k in range(3):
                if k != j:
                    xk = -r if k == 0 else (0.0 if k == 1 else 1.0)
                    ell *= (tau - xk) / (xj - xk)
                    dl += 1.0 / (xj - xk)
            hb = wq * (1.0 - 2.0 * dl * (tau - xj)) * ell * ell
            hc = wq * (tau - xj) * ell * ell
            if j == 0:
                b0 += hb
                c0 += hc
            elif j == 1:
                b1 += hb
                c1 += hc
            else:
                b2 += hb
                c2 += hc
    return b0, b1, b2, c0, c1, c2


def _two_step_estimate(S, I, n, s, t0, h, w):
    """The local error estimate of a step of order 2s = 4 or 6 (stages 2, 3), where the
    Hermite defect of one step cancels the method's own error (the step is a collocation
    polynomial of that degree): the two-step defect of the positions over the last step
    (t_−1 = t_prev, from the record: y_prev, q''_prev) and this one,
    D = q_{n+1} − q_{n−1} − h Σ β_j v_j − h² Σ γ_j q''_j (:func:`_two_step_weights`,
    O(h⁷) for the exact solution), which the two steps' local errors enter as
    ≈ e_n + e_{n+1}; this step's share, D/(1 + r^(2s+1)) with r = h_prev/h (D/2 at equal
    steps), as an RMS norm in the weights rtol·|q_{n+1}| + atol.  Measured against the
    true local error (benchmarks/fixed_step_accuracy.py): 0.23-6.8 × at stages = 2,
    3-570 × at stages = 3 (there D's own h⁷ term leads).  Not judged (False) after a
    step more than 10 × longer (D's own term, over the long step, would lead) or 100 ×
    shorter (the weights grow as r⁻³: rounding).  Returns (judged, estimate)."""
    hp = S[T] - S[T_PREV]
    r = hp / h
    if not (0.01 <= r <= 10.0):
        return False, 0.0
    o = _layout(I)
    o_y, o_yp, o_qdd, o_qddp = o[O_Y], o[O_YP], o[O_QDD], o[O_QDDP]
    q1, v1, a1 = w[W_Q1], w[W_V1], w[W_QDD1]
    bm, b0, b1, cm, c0, c1 = _two_step_weights(r)
    share = 1.0 / (1.0 + r ** (2 * s + 1))
    rtol, atol = S[RTOL], S[ATOL]
    hh = h * h
    acc = 0.0
    for k in range(n):
        d = (q1[k] - S[o_yp + k]
             - h * (bm * S[o_yp + n + k] + b0 * S[o_y + n + k] + b1 * v1[k])
             - hh * (cm * S[o_qddp + k] + c0 * S[o_qdd + k] + c1 * a1[k]))
        e = share * d / (rtol * abs(q1[k]) + atol)
        acc += e * e
    return True, math.sqrt(acc / n) if n > 0 else 0.0


def advance(fns, S, I, LU, u, p, t_target, max_steps, whole):
    """Steps until t = t_target (exactly) or ``max_steps`` steps were taken (with
    ``whole``: not reaching the target is the failure STEP_BUDGET).  Returns a status
    code; on failure S, I and LU are as they were on entry (all or nothing) except
    the failure slots F_T, F_H, F_INFO, F_CT and I[REASON]."""
    owned, status = workspace(I[I_N], I[I_M], I[I_S], I[I_NV], S.shape[0] + LU.size), OK
    w = unowned(owned)   # views without reference counts; owned is kept alive below
    S0, I0, LU0 = snapshot_in(w[W_SNAPSHOT], S, I, LU)
    while status == OK and S[T] < t_target and max_steps > 0:
        status, max_steps = step(fns, S, I, LU, u, p, t_target, w), max_steps - 1
    status = end_advance(status, whole, t_target, S, I, LU, S0, I0, LU0, STEP_BUDGET, FAILURE_SLOTS, REASON)
    keep_alive(owned)
    return status


def entry(fns, mode, S, I, LU, u, p, t_target, max_steps, y_out):
    """The method's one entry point, compiled once per machine (cosim.jit.method_entry)
    or run as plain Python.  Modes: RESTART; WHOLE_INTERVAL advances to ``t_target``
    within ``max_steps``; ONE_STEP takes at most ``max_steps`` steps.  After a
    successful advance the model's outputs at the new state go into ``y_out`` (the
    outputs kernel, fns[FN_OUTPUTS]) unless it is empty."""
    if mode == RESTART:
        return restart(S, I)
    status = advance(fns, S, I, LU, u, p, t_target, max_steps, mode != ONE_STEP)
    return model_outputs(fns, status, S, N_SCALARS, I[I_N], S[T], u, p, y_out)
