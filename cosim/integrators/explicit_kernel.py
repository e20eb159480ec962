"""Explicit Runge-Kutta with constraint projection (dopri5, rk4; seed 000 §6,
eqs. 88-89) as pure functions on one flat state record: the one implementation,
run compiled (numba, compiled once per machine by :func:`cosim.jit.method_entry`)
or as plain Python (the same functions); the integrator object around it is
:mod:`cosim.integrators.explicit`.

Stages of the index-1 form
q' = v, [[M, C_qᵀ], [C_q, 0]] [q''; λ] = [Q; γ] (eq. 88, J of eq. 89 factorised
once per evaluation with :mod:`dense_lu`), the Dormand-Prince 5(4) pair with
FSAL and Shampine's dense output, or classical RK4 (fixed step, or step
doubling with the Richardson estimate), the RMS error ratio, the step-size
proposal, and after every accepted step the simplified-Newton projection onto
C = 0 and C_q v + C_t = 0 with the last factor (one refactorisation allowed).
Nonholonomic rows B(q, t) v + b(q, t) = 0 (seed 000 §7, eq. 93; ``I[I_NG]`` > 0):
J = [[M, C_qᵀ, Bᵀ], [C_q, 0, 0], [B, 0, 0]], right-hand side [Q; γ; γ_G], position
projection on C = 0 only, velocity projection on both.  A first-order model
x' = f(t, x, u) (``I[FIRST_ORDER]``, n = m = 0, ``I[I_NY]`` states) is integrated
directly: its f is the forces slot, ``fns[FN_FORCES](x, x, t, u, p, f)``.

The record (everything the method remembers; a snapshot is two array copies):

* ``S`` float64: scalars (slots below), then y, y_prev, q'', λ, f_cur (the
  FSAL / first stage, valid when ``I[HAS_F]``), dense-output data (dopri5:
  Q = Kᵀ P row-major (n_y × 4) and the projection shift (n_y); rk4: f0, f1), with
  n_y = 2n (multibody) or the number of states (first-order);
* ``I`` int64: sizes, the method, flags, statistics, the LU pivots;
* ``LU`` float64 (n+m)²: the factor of J from the last evaluation (work space,
  not state: every projection follows an evaluation in the same step).

J, its LU, the evaluation y' = [v; q''] and the error ratio are
:mod:`.index1_kernel`'s (shared with rkc-penalty's kernel); the projection, the
trial steps and the step loop are here.

No exceptions inside: functions return status / cause codes that the thin
integrator object turns into its error messages.  The model's functions are called
as ``fns[k](…)`` (:func:`cosim.jit.kernel_fields` order).
"""
import math

from .dense_lu import lu_solve_inplace
from .kernel_common import (FN_CONSTRAINTS, FN_CONSTRAINT_DT, FN_CONSTRAINT_JACOBIAN, FN_FORCES,
    all_finite, clamp_step, end_advance, error_ratio, fixed_step_resolved, forget_step, model_outputs,
    keep_alive, next_step, rejected_attempt, unowned)

# the record: every name, so that explicit_kernel is the method's one namespace
from .explicit_record import (  # noqa: F401
    ATOL, CAUSE, C_NONE, C_NONFINITE_MATRIX, C_NONFINITE_SOLUTION, C_POSITION, C_RHS, C_SINGULAR,
    C_VELOCITY, DENSE_H, DOPRI5, DP_A, DP_B, DP_C, DP_E, DP_FSAL, DP_P, EPS, FAILURE_SLOTS,
    FIRST_ORDER, FIXED_ERR, FIXED_RTOL, FIXED_SLOTS, FIXED_UNRESOLVED, F_CINFO, F_CT, F_ERR, F_H, F_T,
    HAS_DENSE, HAS_F, H_FIXED, H_NEXT, I_M, I_N, I_NG, I_NY, MAX_FACTOR, MAX_REJECTIONS, MAX_STEP,
    METHOD, MIN_FACTOR, NONFINITE_DERIVATIVE, NONFINITE_MATRIX, N_SCALARS, N_STATS, OK, ONE_STEP,
    ORDER, PIV, PROJECTION_MAX_ITER, PROJECTION_TOL, PROJ_ITERS, REFUSAL_DOPRI5, REFUSAL_RK4,
    REJECTION_CONTROL, REJECTION_SLOTS, RESTART, RESTART_THEN_ADVANCE, RK4, RTOL, SAFETY, SINGULAR, STATS, STEP_BUDGET, STEP_FAILED,
    ST_JAC, ST_LU, ST_NEWTON, ST_REJ, ST_RES, ST_STEPS, T, TOO_SMALL, T_PREV, UNDERFLOW,
    WHOLE_INTERVAL, W_C, W_CQ, W_CT, W_ERR, W_F, W_FORCES, W_F_HALF, W_GAMMA, W_K, W_K2, W_K3, W_K4, W_LAM, W_M, W_Q,
    W_RHS, W_V, W_Y0, W_Y_FULL, W_Y_HALF, W_Y_NEW, W_Y_PROJ, W_Y_STAGE, O_D, O_F, O_LAM, O_QDD, O_Y,
    O_YP, int_length, offsets, workspace)
# the index-1 form (J, y' = [v; q'']), shared with rkc_kernel
from .index1_kernel import (_evaluate, _factorize,  # noqa: F401
                            _nh_offset, _nh_rows, keep_current_derivative, n_nonholonomic)

# inlined by numba into their one caller (cosim.jit.method_inlined): the helpers of a
# step, most of which take work tuples, which a call of a function compiled on its own
# passes member by member, and restart
INLINED = ("restart", "_rk4_work", "_project", "_project_stage", "_attempt_dopri5", "_attempt_rk4",
           "_fixed_estimate", "_accept")

# the end of the last step left to whoever needs it (I[HAS_DENSE]; rk4 fixed step
# after new inputs): f, q'', λ there and the dense f1 not yet evaluated, I[HAS_F] = 0
END_PENDING = 2
COMPLETE = 4             # entry mode: evaluate that end now (complete_step)


def restart(S, I):
    """Integrator.restart: no FSAL stage, no dense output, t_prev = t, y_prev = y."""
    ny = I[I_NY]
    o_y, o_yp = N_SCALARS, N_SCALARS + ny
    I[HAS_F] = 0
    I[HAS_DENSE] = 0
    forget_step(S, T, T_PREV, o_y, o_yp, ny)
    return OK


# ---------------------------------------------------------------------------------
# the work arrays a helper is given: only those it uses (numba increfs and decrefs
# every array of a tuple argument on each call; the whole workspace is 23)
# ---------------------------------------------------------------------------------
def _index1_work(w):
    """The index-1 form's work arrays w[W_Q] .. w[W_CT], at the same W_ indices
    (for _evaluate, _project)."""
    return (w[W_Q], w[W_V], w[W_M], w[W_CQ], w[W_FORCES], w[W_GAMMA], w[W_RHS], w[W_C], w[W_CT])


def _rk4_work(w):
    """:func:`_rk4`'s work arrays: the stage point, λ of an evaluation, k2, k3, k4."""
    return (w[W_Y_STAGE], w[W_LAM], w[W_K2], w[W_K3], w[W_K4])


# ---------------------------------------------------------------------------------
# the projection (seed 000 §6)
# ---------------------------------------------------------------------------------
def _project(fns, S, I, LU, p, n, m, t, y_new, y_proj, wi):
    """Position then velocity projection (seed 000 §6) of y_new into
    y_proj with the factor in LU (one refactorisation at the current q per
    stage if the simplified iteration is slow).  Returns a cause code.
    Nonholonomic rows: position projection on C = 0 only (none without
    holonomic rows), velocity projection on C_q v + C_t = 0 and B v + b = 0."""
    for i in range(y_new.shape[0]):
        y_proj[i] = y_new[i]
    if m == 0:
        return C_NONE
    q, v = wi[W_Q], wi[W_V]
    for i in range(n):
        q[i] = y_new[i]
        v[i] = y_new[n + i]
    its = 0
    # stage 0 (positions) only with holonomic rows, then stage 1 (velocities); one
    # call site: numba inlines _project_stage once
    for stage in range(0 if m > n_nonholonomic(I) else 1, 2):
        its, cause = _project_stage(fns, S, I, LU, p, n, m, t, y_new, wi, stage, its)
        if cause != C_NONE:
            return cause
    for i in range(n):
        y_proj[i] = q[i]
        y_proj[n + i] = v[i]
    I[PROJ_ITERS] += its
    return C_NONE


def _project_stage(fns, S, I, LU, p, n, m, t, y_new, wi, stage, its):
    """One stage of the projection: C(q) = 0 moving q (stage 0), then
    C_q v + C_t = 0 moving v (stage 1) — seed 000 §6, the position and velocity
    corrections M Δ + C_qᵀ μ = 0 that follow eq. 89 —, simplified Newton with J's
    factor in LU and one refactorisation at the current q.  Returns (its, cause)."""
    M, Cq, rhs, C, Ct = wi[W_M], wi[W_CQ], wi[W_RHS], wi[W_C], wi[W_CT]
    q, v = wi[W_Q], wi[W_V]
    x = q if stage == 0 else v
    off = 0 if stage == 0 else n
    piv = I[PIV:PIV + n + m]
    mh = m - n_nonholonomic(I)
    rtol, atol = S[RTOL], S[ATOL]
    for attempt in range(2):
        for _ in range(PROJECTION_MAX_ITER):
            for i in range(n):
                rhs[i] = 0.0
            if stage == 0:
                C[:] = 0.0
                fns[FN_CONSTRAINTS](q, t, p, C)
                for k in range(mh):
                    rhs[n + k] = -C[k]
                for k in range(mh, m):
                    rhs[n + k] = 0.0
            else:
                Cq[:, :] = 0.0
                fns[FN_CONSTRAINT_JACOBIAN](q, t, p, Cq)
                _nh_rows(fns, p, mh, q, t, Cq)
                Ct[:] = 0.0
                fns[FN_CONSTRAINT_DT](q, t, p, Ct)
                _nh_offset(fns, p, mh, q, t, Ct)
                for k in range(m):
                    s = 0.0
                    for i in range(n):
                        s += Cq[k, i] * v[i]
                    rhs[n + k] = -(s + Ct[k])
            lu_solve_inplace(LU, piv, rhs)
            finite = True
            for i in range(n):
                x[i] += rhs[i]
                if not math.isfinite(rhs[i]):
                    finite = False
            its += 1
            if not finite:
                break
            rel, big, xmax = 0.0, 0.0, 0.0
            for i in range(n):
                d = abs(rhs[i])
                rel = max(rel, d / (rtol * abs(y_new[off + i]) + atol))
                big = max(big, d)
                xmax = max(xmax, abs(x[i]))
            if rel <= PROJECTION_TOL or big <= 4 * EPS * max(1.0, xmax):
                return its, C_NONE
        if attempt == 0:
            cause = _factorize(fns, S, I, LU, PIV, p, n, m, q, t, M, Cq)
            if cause != C_NONE:
                return its, cause
    S[F_CT] = t
    return its, (C_POSITION if stage == 0 else C_VELOCITY)


# ---------------------------------------------------------------------------------
# trial steps
# ---------------------------------------------------------------------------------
def _attempt_dopri5(fns, S, I, LU, p, u, n, m, t, y, h, fixed, w, wi):
    """DormandPrince._attempt: stages in K (K[0] = f0 given), y_new, the FSAL
    stage K[DP_FSAL] (its factor stays for the projection); returns (cause, err)."""
    K, y_new, ys, e, lam = w[W_K], w[W_Y_NEW], w[W_Y_STAGE], w[W_ERR], w[W_LAM]
    n2 = y.shape[0]
    for s in range(1, 6):
        for i in range(n2):
            acc = 0.0
            for j in range(s):
                acc += DP_A[s, j] * K[j, i]
            ys[i] = y[i] + h * acc
        cause = _evaluate(fns, S, I, LU, PIV, p, u, n, m, t + DP_C[s] * h, ys, K[s], lam, wi)
        if cause != C_NONE:
            return cause, 0.0
    for i in range(n2):
        acc = 0.0
        for j in range(6):
            acc += DP_B[j] * K[j, i]
        y_new[i] = y[i] + h * acc
    cause = _evaluate(fns, S, I, LU, PIV, p, u, n, m, t + h, y_new, K[DP_FSAL], lam, wi)
    if cause != C_NONE or fixed:
        return cause, 0.0
    for i in range(n2):
        acc = 0.0
        for j in range(7):
            acc += DP_E[j] * K[j, i]
        e[i] = h * acc
    return C_NONE, error_ratio(y, y_new, e, S[RTOL], S[ATOL])


def _rk4(fns, S, I, LU, p, u, n, m, t, y, h, k1, out, wr, wi):
    """One classical RK4 step from (t, y) with first stage k1 into out (wr: its
    work arrays, :func:`_rk4_work`)."""
    ys, lam, k2, k3, k4 = wr
    n2 = y.shape[0]
    for i in range(n2):
        ys[i] = y[i] + (0.5 * h) * k1[i]
    cause = _evaluate(fns, S, I, LU, PIV, p, u, n, m, t + 0.5 * h, ys, k2, lam, wi)
    if cause != C_NONE:
        return cause
    for i in range(n2):
        ys[i] = y[i] + (0.5 * h) * k2[i]
    cause = _evaluate(fns, S, I, LU, PIV, p, u, n, m, t + 0.5 * h, ys, k3, lam, wi)
    if cause != C_NONE:
        return cause
    for i in range(n2):
        ys[i] = y[i] + h * k3[i]
    cause = _evaluate(fns, S, I, LU, PIV, p, u, n, m, t + h, ys, k4, lam, wi)
    if cause != C_NONE:
        return cause
    c = h / 6.0
    for i in range(n2):
        out[i] = y[i] + c * (((k1[i] + 2.0 * k2[i]) + 2.0 * k3[i]) + k4[i])
    return C_NONE


def _attempt_rk4(fns, S, I, LU, p, u, n, m, t, y, h, w, wr, wi):
    """RK4._attempt of an adaptive step (a fixed step is :func:`_rk4` alone): step
    doubling with the Richardson estimate (y_{h/2,h/2} − y_h)/15; returns (cause, err),
    y_new in w[W_Y_NEW]."""
    K, y_new, e, lam = w[W_K], w[W_Y_NEW], w[W_ERR], w[W_LAM]
    y_full, y_half, f_half = w[W_Y_FULL], w[W_Y_HALF], w[W_F_HALF]
    f0 = K[0]
    cause = _rk4(fns, S, I, LU, p, u, n, m, t, y, h, f0, y_full, wr, wi)
    if cause != C_NONE:
        return cause, 0.0
    cause = _rk4(fns, S, I, LU, p, u, n, m, t, y, 0.5 * h, f0, y_half, wr, wi)
    if cause != C_NONE:
        return cause, 0.0
    cause = _evaluate(fns, S, I, LU, PIV, p, u, n, m, t + 0.5 * h, y_half, f_half, lam, wi)
    if cause != C_NONE:
        return cause, 0.0
    cause = _rk4(fns, S, I, LU, p, u, n, m, t + 0.5 * h, y_half, 0.5 * h, f_half, y_new, wr, wi)
    if cause != C_NONE:
        return cause, 0.0
    for i in range(y.shape[0]):
        e[i] = (y_new[i] - y_full[i]) / 15.0
    return C_NONE, error_ratio(y, y_new, e, S[RTOL], S[ATOL])


def _fixed_estimate(S, I, n, n2, dopri, y, h, y_new, K, ev, ys):
    """A fixed step's local error estimate (K, ev: w[W_K], w[W_ERR]) in the weights RTOL|y| + ATOL:
    dopri5 its embedded estimate's ratio (as the error test); rk4 the positions' part of
    the embedded third-order estimate h/6·(k4 − f(y_new)), i.e. h/6·(v4 − v_new) with
    v4 the velocities of stage 4's point y + h·k3 (still in ys = w[W_Y_STAGE]) — no
    evaluation, no input (first-order models: none, 0)."""
    rtol, atol = S[RTOL], S[ATOL]
    if dopri:
        for i in range(n2):
            acc = 0.0
            for j in range(7):
                acc += DP_E[j] * K[j, i]
            ev[i] = h * acc
        return error_ratio(y, y_new, ev, rtol, atol)
    if I[FIRST_ORDER] == 1:
        return 0.0
    c = h / 6.0
    em = 0.0
    for i in range(n):
        e = abs(c * (ys[n + i] - y_new[n + i])) / (rtol * abs(y[i]) + atol)
        if e > em or e != e:
            em = e
    return em


# ---------------------------------------------------------------------------------
# one step
# ---------------------------------------------------------------------------------
def step(fns, S, I, LU, u, p, t_limit, w, wi, wr, lazy_end):
    """One accepted step ending at or before ``t_limit`` (ExplicitRungeKutta._step_inner;
    w the workspace, wi, wr its :func:`_index1_work`, :func:`_rk4_work`, made once per
    advance: a tuple of arrays costs a reference count per array).  Returns a status code; on failure
    S[F_H] is the step size, I[CAUSE] / S[F_ERR] what made it fail.
    ``lazy_end``: a fixed rk4 step that lands on ``t_limit`` leaves f at its end
    to the next step or :func:`complete_step` (I[HAS_DENSE] = END_PENDING): new
    inputs before the next step then cost no evaluation with the old ones."""
    n, m = I[I_N], I[I_M]
    n2 = I[I_NY]
    first_order = I[FIRST_ORDER] == 1
    o = offsets(n, m, n2)
    o_y, o_qdd, o_lam, o_f = o[O_Y], o[O_QDD], o[O_LAM], o[O_F]
    K, y, y_new, lam, f = w[W_K], w[W_Y0], w[W_Y_NEW], w[W_LAM], w[W_F]
    y_proj = w[W_Y_PROJ]
    dopri = I[METHOD] == DOPRI5
    t = S[T]
    for i in range(n2):
        y[i] = S[o_y + i]
    # f at the current point (FSAL stage when available): _derivative_at_current
    if I[HAS_F] == 0:
        cause = _evaluate(fns, S, I, LU, PIV, p, u, n, m, t, y, f, lam, wi)
        status = keep_current_derivative(S, I, cause, f, lam, n, m, n2, o_f, o_qdd, o_lam)
        if status != OK:
            return status
    for i in range(n2):
        K[0, i] = S[o_f + i]
    fixed = S[H_FIXED] > 0.0
    h_prop = S[H_FIXED] if fixed else S[H_NEXT]
    h, lands, moves = clamp_step(t, h_prop, S[MAX_STEP], fixed, t_limit)
    if not moves:
        S[F_H] = h
        return UNDERFLOW
    h_min = 1e-12 * max(1.0, abs(t))
    rejected = deferred = False
    rejections = 0
    err = 0.0
    t_new = t
    while True:
        if not lands and not fixed:
            h = (t + h) - t   # t + h exact: t = Σh (time rounding drift; ExplicitRungeKutta._step_inner)
        t_new = t_limit if lands else t + h
        if dopri:
            cause, err = _attempt_dopri5(fns, S, I, LU, p, u, n, m, t, y, h, fixed, w, wi)
        elif fixed:
            cause, err = _rk4(fns, S, I, LU, p, u, n, m, t, y, h, K[0], y_new, wr, wi), 0.0
        else:
            cause, err = _attempt_rk4(fns, S, I, LU, p, u, n, m, t, y, h, w, wr, wi)
        if cause == C_NONE and not (all_finite(y_new) and math.isfinite(err)):
            cause = C_NONFINITE_SOLUTION
        if cause == C_NONE and fixed:
            # no error test: the local error estimate in the user's weights is kept
            # (largest so far); one beyond 1/(REFUSAL·rtol) fails the advance
            S[FIXED_RTOL] = (REFUSAL_DOPRI5 if dopri else REFUSAL_RK4) * S[RTOL]
            est = _fixed_estimate(S, I, n, n2, dopri, y, h, y_new, K, w[W_ERR], wr[0])
            if not fixed_step_resolved(S, est, h, FIXED_SLOTS):
                return FIXED_UNRESOLVED
        if cause == C_NONE and err <= 1.0:
            if m > 0:
                cause = _project(fns, S, I, LU, p, n, m, t_new, y_new, y_proj, wi)
            else:   # nothing to project (and no call: it counts a reference per array)
                y_proj[:] = y_new
            deferred = lazy_end and fixed and lands and not dopri
            if cause == C_NONE and not dopri and not deferred:
                # RK4._after_projection: f at the projected point, the next k1
                cause = _evaluate(fns, S, I, LU, PIV, p, u, n, m, t_new, y_proj, f, lam, wi)
                if cause == C_NONE and not all_finite(f):
                    cause = C_RHS
        if cause == C_NONE and err <= 1.0:
            break
        rejections += 1
        failed, h = rejected_attempt(S, I, cause, err, h, fixed, rejections, h_min, REJECTION_CONTROL,
                                     REJECTION_SLOTS)
        if failed:
            return STEP_FAILED if fixed else TOO_SMALL
        lands, rejected = False, True
    _accept(S, I, n, m, n2, t, t_new, h, dopri, first_order, (K, y, y_new, lam, f, y_proj), deferred)
    if fixed:
        S[H_NEXT] = S[H_FIXED]
        return OK
    S[H_NEXT] = next_step(h, h_prop, err, rejected, lands, 1.0 / (ORDER + 1), SAFETY, MAX_FACTOR, S[MAX_STEP])
    return OK


def _accept(S, I, n, m, n2, t, t_new, h, dopri, first_order, wa, deferred):
    """The accepted step into the record: the projected point, the previous one, f
    there (dopri5: the FSAL stage with q' = v of the projected point; rk4: f at the
    projected point, the next k1) with q'' and λ, and the dense-output data (dopri5:
    Q = Kᵀ P and the projection's shift; rk4: f at both ends, cubic Hermite).
    ``deferred`` (rk4): f at the end is not evaluated yet (END_PENDING).  ``wa``: the
    work arrays w[W_K], w[W_Y0], w[W_Y_NEW], w[W_LAM], w[W_F], w[W_Y_PROJ]."""
    o = offsets(n, m, n2)
    o_y, o_yp, o_qdd, o_lam, o_f, o_d = o[O_Y], o[O_YP], o[O_QDD], o[O_LAM], o[O_F], o[O_D]
    K, y, y_new, lam, f, y_proj = wa
    S[T_PREV] = t
    S[o_yp:o_yp + n2] = y
    S[T] = t_new
    S[o_y:o_y + n2] = y_proj
    if dopri:
        # FSAL: f(ŷ) with q' = v of the projected point; dense Q = Kᵀ P, shift = y_proj − ŷ
        if first_order:
            for i in range(n2):
                S[o_f + i] = K[DP_FSAL, i]
        for i in range(n):
            S[o_f + i] = y_proj[n + i]
            S[o_f + n + i] = K[DP_FSAL, n + i]
            S[o_qdd + i] = K[DP_FSAL, n + i]
        for i in range(n2):
            for j in range(4):
                acc = 0.0
                for s in range(7):
                    acc += K[s, i] * DP_P[s, j]
                S[o_d + 4 * i + j] = acc
            S[o_d + 4 * n2 + i] = y_proj[i] - y_new[i]
    else:
        for i in range(n2):
            S[o_d + i] = K[0, i]          # f0: f_cur at the start
        if not deferred:
            _keep_end(S, f, n, n2, o_f, o_qdd, o_d)
    if not deferred:
        S[o_lam:o_lam + m] = lam
    S[DENSE_H] = h
    I[HAS_DENSE] = END_PENDING if deferred else 1
    I[HAS_F] = 0 if deferred else 1
    I[ST_STEPS] += 1


def _keep_end(S, f, n, n2, o_f, o_qdd, o_d):
    """rk4: f at the projected end point as the next k1, q'' there and the dense f1."""
    for i in range(n2):
        S[o_d + n2 + i] = f[i]
        S[o_f + i] = f[i]
    for i in range(n):
        S[o_qdd + i] = f[n + i]


def complete_step(fns, S, I, LU, u, p):
    """The end of the last step where it was left pending (END_PENDING): f, q'' and λ
    at the current point and the dense f1, as the step would have stored them.  If
    f cannot be evaluated there (not finite, J singular) the step keeps no dense
    output and no f (the next step stops there with that error).  Returns the status
    of that evaluation."""
    if I[HAS_DENSE] != END_PENDING:
        return OK
    n, m, n2 = I[I_N], I[I_M], I[I_NY]
    o = offsets(n, m, n2)
    o_y, o_qdd, o_lam, o_f, o_d = o[O_Y], o[O_QDD], o[O_LAM], o[O_F], o[O_D]
    owned = workspace(n, m, n2)
    w = unowned(owned)   # views without reference counts; owned is kept alive below
    y, lam, f, wi = w[W_Y0], w[W_LAM], w[W_F], _index1_work(w)
    for i in range(n2):
        y[i] = S[o_y + i]
    cause = _evaluate(fns, S, I, LU, PIV, p, u, n, m, S[T], y, f, lam, wi)
    status = keep_current_derivative(S, I, cause, f, lam, n, m, n2, o_f, o_qdd, o_lam)
    if status == OK:
        _keep_end(S, f, n, n2, o_f, o_qdd, o_d)
        I[HAS_DENSE] = 1
    else:
        I[HAS_DENSE] = 0
    keep_alive(owned)
    return status


def advance(fns, S, I, LU, u, p, t_target, max_steps, whole, lazy_end=False):
    """Steps until t = t_target (exactly) or ``max_steps`` steps were taken
    (with ``whole``: not reaching the target is the failure STEP_BUDGET;
    ``lazy_end``: see :func:`step`).
    On failure S and I are as on entry (all or nothing) except the failure
    slots F_T (t of the failing step), F_H, F_ERR, F_CT, F_CINFO, I[CAUSE]."""
    owned, status = workspace(I[I_N], I[I_M], I[I_NY]), OK
    w = unowned(owned)   # views without reference counts; owned is kept alive below
    wi, wr = _index1_work(w), _rk4_work(w)
    S0, I0, LU0 = S.copy(), I.copy(), LU.copy()
    while status == OK and S[T] < t_target and max_steps > 0:
        status, max_steps = step(fns, S, I, LU, u, p, t_target, w, wi, wr, lazy_end), max_steps - 1
    status = end_advance(status, whole, t_target, S, I, LU, S0, I0, LU0, STEP_BUDGET, FAILURE_SLOTS, CAUSE)
    keep_alive(owned)
    return status


def entry(fns, mode, S, I, LU, u, p, t_target, max_steps, y_out):
    """The method's one entry point, compiled once per machine (cosim.jit.method_entry)
    or run as plain Python.  Modes: RESTART (forget the FSAL stage and the dense
    output: new inputs or a new point); WHOLE_INTERVAL advances to ``t_target``
    within ``max_steps`` (else STEP_BUDGET, record unchanged); ONE_STEP takes at
    most ``max_steps`` steps; RESTART_THEN_ADVANCE restarts, then advances as
    WHOLE_INTERVAL; a fixed rk4 step then leaves f at the end of the call pending
    (inputs that change every call cost no evaluation with the old ones), which
    COMPLETE evaluates.  After a successful advance the model's outputs at the new
    state go into ``y_out`` (the outputs kernel, fns[FN_OUTPUTS]) unless it is empty."""
    if mode == RESTART:
        return restart(S, I)
    if mode == COMPLETE:
        return complete_step(fns, S, I, LU, u, p)
    if mode == RESTART_THEN_ADVANCE:
        restart(S, I)
    status = advance(fns, S, I, LU, u, p, t_target, max_steps, mode != ONE_STEP,
                     mode == RESTART_THEN_ADVANCE)
    return model_outputs(fns, status, S, N_SCALARS, I[I_N], S[T], u, p, y_out)
