"""Generalized-α as pure functions on one flat state record: THE implementation of
the index-3 method and, with the formulation switch ``I[GGL]`` = 1, of the GGL
index-2 form (seed 000 eqs. 37-39).  They share the predictor, the quasi-Newton
loop, the step control and the restart; the GGL form has its own unknowns
(x, y, λ, μ), residual eq. 38, iteration matrix eq. 39, Newton norm and error
estimate.

The algorithm (seed 000 §3, Algorithm 3, with the departures listed in
:class:`cosim.integrators.generalized_alpha.GeneralizedAlpha`'s docstring):
predictor eq. 30-31, Newton on eq. 32 with the iteration matrix eq. 33 and
Algorithm 2's quasi-Newton reuse, error estimate eq. 34, step control eq. 36 with
the deadband, velocity projection (eq. 8-9 with W = M), consistent accelerations
eq. 10 on restart; nonholonomic rows (seed 000 §7, eqs. 93-94).

One implementation, two ways to run it: :func:`entry` compiled by
:func:`cosim.jit.method_entry` (once per machine, for every model) or called as
plain Python (the python backend).  The model enters as ``fns``, its functions
in :func:`cosim.jit.kernel_fields` order (:mod:`cosim.models.kernels`): compiled
kernels given by address, or Python functions
(:mod:`cosim.integrators.model_functions`).  Everything the method remembers
lives in three arrays, so a snapshot or rollback is three array copies:

* ``S`` float64: scalars (offsets below) then y, y_prev, q'', q''_prev, λ, a,
  x_rate, λ_rate, 1/|diag M| (norm scale), 1/diag M (exact, for projection);
* ``I`` int64: sizes, flags, statistics, the LU pivots;
* ``LU`` float64 N² (N = n+m; GGL: 2n+2m): the kept iteration-matrix factors.

The record's layout is :mod:`ga_record`, the model terms (nonholonomic rows, eq. 10,
the restart) :mod:`ga_terms`, the corrector (residuals, iteration matrices, Newton)
:mod:`ga_corrector`; this module is the step and the entry.

No exceptions inside: every function returns a status code that the integrator
object (:mod:`cosim.integrators.generalized_alpha`) turns into error messages.
"""
import math

import numpy as np

# every name of the method's modules, so that ga_kernel is its one namespace
from .ga_record import (  # noqa: F401
    ALPHA_F, ALPHA_M, ATOL, BETA, CONST_MASS, DEADBAND, EPS, ERROR_TEST_FAILED, ERR_SCALE,
    ERR_TANGENT, ETA, FAILURE_SLOTS, FIXED, FIXED_ERR, FIXED_NEWTON_REL, FIXED_SLOTS, FIXED_UNRESOLVED, F_H, F_INFO, F_T, GAMMA, GGL, GGL_RATE_TOL,
    GGL_VELOCITY_FLOOR, HAS_FACTOR, H_FIXED, H_JAC, H_LAST, H_NEXT, I_M, I_N, I_NG, MAX_GROWTH,
    MAX_REJECTIONS, MAX_STEP, MINV_DIAG, MINV_EXACT, NEED_JAC, NEWTON_ERR_TOL, NEWTON_FAILED,
    NEWTON_MAX_ITER, NEWTON_TOL, NONFINITE_MATRIX, N_SCALARS, N_STATS, OK, ONE_STEP, PIV, PROJECT,
    REASON, REFRESH_AFTER, RELAX, RESTART, RESTART_FAILED, RESTART_STATUS, RESTART_THEN_ADVANCE,
    ROUNDOFF, RTOL, R_NO_CONVERGENCE, R_RESIDUAL, R_UPDATE, SAFETY, SIGMA, SINGULAR, STATS,
    STEP_BUDGET, STEP_UNDERFLOW, ST_JAC, ST_LU, ST_NEWTON, ST_REJ, ST_RES, ST_STEPS, T, TINY_STEP,
    T_PREV, WHOLE_INTERVAL, _block, _cut, int_length, matrix_size, offsets, workspace,
    O_A, O_LAM, O_LR, O_MID, O_MIX, O_QDD, O_QDDP, O_XR, O_Y, O_YP,
    W_A_START, W_C, W_CM, W_CMC, W_CQ, W_CQ_START, W_CQT, W_CT, W_FORCES, W_G0, W_G1, W_LAM,
    W_LAM1, W_LAM_HAT, W_LAM_RATE, W_CQT_LAM_SCALE, W_CQT_LAM_SCALE_R, W_LAM_START, W_M, W_MINV_DIAG, W_MU,
    W_Q, W_Q0, W_Q1, W_QD, W_QD0, W_QDD, W_QDD0, W_QDD1, W_QDD_START, W_QX, W_Q_START, W_REST,
    W_CQT_MU_SCALE, W_SCALE, W_SCALE_R, W_SPARE, W_SY, W_V, W_V0, W_V1, W_V_START, W_WEIGHTS, W_WV, W_X,
    W_X_HAT, W_X_RATE, W_Y_HAT)
from .ga_terms import (  # noqa: F401
    _abt_into, _all_finite, _diag_mass_inverse, _gesv, _inv_mass_diag, _nh_jacobian,
    _nh_residual, _nh_rows, n_nonholonomic, restart)
from .ga_corrector import (  # noqa: F401
    _amax, _cqv, _jacobian, _jacobian_ggl, _newton, _norm, _norm_ggl, _pymax, _residual,
    _residual_ggl, _rows_norm)
from .kernel_common import (FN_CONSTRAINT_JACOBIAN, FN_MASS, clamp_step, end_advance, fixed_step_resolved,
    keep_alive, keeps_matrix, model_outputs, relaxation, scaled_max, snapshot_in, unowned)

# inlined by numba into their one caller (cosim.jit.method_inlined): each takes the work
# tuple, which a call of a function compiled on its own passes member by member
INLINED = ("_solve", "_predict", "_step_start", "_accept", "_plan_matrix", "_fixed_estimate",
           "_error_index3", "_step_control")


# ---------------------------------------------------------------------------------
# one step
# ---------------------------------------------------------------------------------
def _m_correct(fns, S, I, p, n, q, t, Cq, r, y, CM, A, tmp):
    """y ← y − M⁻¹Cᵀ(C M⁻¹Cᵀ)⁻¹ r in place, C = Cq (its rows): the M-orthogonal
    correction of seed 000 eq. 8-9 (W = M); y is left as it was in a singular
    configuration.  r is overwritten; CM (rows × n), A (rows × rows), tmp (n)
    are scratch.  Used by the velocity projection and the tangent part of eq. 34."""
    mz = Cq.shape[0]
    o_mix = offsets(n, I[I_M] + n_nonholonomic(I))[O_MIX]
    if _diag_mass_inverse(fns, S, I, q, t, p, o_mix, n):
        minv = S[o_mix:o_mix + n]
        for k in range(mz):
            for j in range(n):
                CM[k, j] = Cq[k, j] * minv[j]
        _abt_into(CM, Cq, A)
        piv = np.empty(mz, dtype=np.int64)
        info = _gesv(A, r, piv)
        if info != 0 or not _all_finite(r):
            return
        tmp[:] = 0.0
        for k in range(mz):
            rk = r[k]
            for j in range(n):
                tmp[j] += CM[k, j] * rk
        for j in range(n):
            y[j] = y[j] - tmp[j]
        return
    K = np.zeros((n + mz, n + mz))
    M = np.zeros((n, n))
    fns[FN_MASS](q, t, p, M)
    K[:n, :n] = M
    K[:n, n:] = Cq.T
    K[n:, :n] = Cq
    rhs = np.zeros(n + mz)
    for k in range(mz):
        rhs[n + k] = -r[k]
    piv = np.empty(n + mz, dtype=np.int64)
    info = _gesv(K, rhs, piv)
    if info != 0 or not _all_finite(rhs):
        return
    for j in range(n):
        y[j] = y[j] + rhs[j]


def _project_velocity(fns, S, I, p, n, m, q, v, t, work):
    """M-orthogonal projection of v onto C_q v + C_t = 0 (seed 000 eq. 8-9, W = M),
    in place, keeping B Δv = 0 on nonholonomic rows; v is left
    as it was in a singular configuration.  Scratch: the work arrays W_CQ, W_CT,
    W_G0, W_QX, W_CM, W_CMC."""
    mz = m + n_nonholonomic(I)
    Cq, Ct, r, tmp, CM, A = work[W_CQ], work[W_CT], work[W_G0], work[W_QX], work[W_CM], work[W_CMC]
    _cqv(fns, p, n, m, t, q, v, Cq, Ct, r)   # C_q v + C_t on the holonomic rows
    _nh_rows(fns, p, m, q, t, Cq)
    for k in range(m, mz):
        r[k] = 0.0
    _m_correct(fns, S, I, p, n, q, t, Cq, r, v, CM, A, tmp)


def _tangent_part(fns, S, I, p, n, m, q, t, x):
    """P x, P = I − M⁻¹C_qᵀ(C_q M⁻¹ C_qᵀ)⁻¹C_q the M-orthogonal projector onto
    ker C_q (holonomic rows): the index-3 error estimate without the rounding
    the Newton iteration leaves along M⁻¹C_qᵀ (option tangent_estimate);
    x unchanged in a singular configuration."""
    Cq = np.zeros((m, n))
    fns[FN_CONSTRAINT_JACOBIAN](q, t, p, Cq)
    r = np.zeros(m)
    for k in range(m):
        s = 0.0
        for j in range(n):
            s += Cq[k, j] * x[j]
        r[k] = s
    y = x.copy()
    _m_correct(fns, S, I, p, n, q, t, Cq, r, y, np.zeros((m, n)), np.zeros((m, m)), np.zeros(n))
    return y


def step(fns, S, I, LU, u, p, t_limit, work, delta, F, Jw):
    """One accepted step ending at or before ``t_limit`` (Algorithm 3; the GGL form
    with I[GGL]).  Returns a status code; on failure S[F_H] is the step size tried."""
    n, m = I[I_N], I[I_M]
    mz = m + n_nonholonomic(I)   # multipliers [λ; ν]
    ggl = I[GGL] == 1
    fixed = S[H_FIXED] > 0.0
    t = S[T]
    h_prop = S[H_NEXT]
    h, lands, moves = clamp_step(t, h_prop, S[MAX_STEP], fixed, t_limit)
    if not moves:
        S[F_H] = h
        return STEP_UNDERFLOW
    if lands and h < TINY_STEP * h_prop:
        return _landing_sliver(S, I, n, t, t_limit)
    qmax = _step_start(fns, S, I, p, n, m, mz, t, work)
    h_last = S[H_LAST]
    h_min = 1e-12 * max(1.0, abs(t))
    failed_once = False
    rejections = 0
    h_err = math.inf
    h_new = h
    x = work[W_X]
    while True:
        if not lands and not fixed:
            # h := (t + h) − t: t + h exact, the accepted t the exact sum of
            # the steps (time rounding drift)
            h = (t + h) - t
        fresh = _plan_matrix(S, I, h)
        t1 = t + h
        _predict(S, n, mz, ggl, h, h_last, qmax, work)
        converged, iters, status = _solve(fns, S, I, LU, p, u, n, m, ggl, t1, h, delta, F, Jw, work)
        if status == SINGULAR or status == NONFINITE_MATRIX:
            S[F_H] = h
            return status
        if converged and not fresh and iters >= REFRESH_AFTER:
            S[SIGMA] = 1.0
        if not converged:
            I[ST_REJ] += 1
            I[NEED_JAC] = 1
            S[RELAX] = 1.0
            rejections += 1
            if h * 0.5 < h_min or rejections > MAX_REJECTIONS:
                S[F_H] = h
                return NEWTON_FAILED
            h *= 0.5
            lands = False
            continue
        # x: the acceleration innovation (index 3: x; GGL: y) that a and x_rate keep
        for i in range(n):
            x[i] = work[W_Y_HAT][i] + delta[n + i] if ggl else work[W_X_HAT][i] + delta[i]
        if fixed:   # no error test: eq. 34's (39's) estimate kept, failing when unresolved
            e = _error_ggl(S, n, h, delta, work) ** 2 if ggl else _fixed_estimate(S, n, h, work)
            if not fixed_step_resolved(S, e, h, FIXED_SLOTS):
                return FIXED_UNRESOLVED
            break
        xi = _error_ggl(S, n, h, delta, work) if ggl else \
            _error_index3(fns, S, I, p, n, m, t1, h, qmax, delta, work)
        accepted, h_err, h_new = _step_control(xi, h, failed_once)
        if accepted:
            break
        I[ST_REJ] += 1
        rejections += 1
        failed_once = True
        if h_new < h_min or rejections > MAX_REJECTIONS:
            S[F_H] = h
            S[F_INFO] = xi
            return ERROR_TEST_FAILED
        h = h_new
        lands = False
    if fixed:
        S[H_NEXT] = S[H_FIXED]
    elif lands and h < h_prop:   # a step shortened to land: the next one as proposed
        S[H_NEXT] = min(h_err, max(MAX_GROWTH * h, h_prop))
    else:
        S[H_NEXT] = h_new
    _accept(fns, S, I, p, n, m, mz, ggl, t, h, t_limit if lands else t + h, delta, work)
    return OK


def _step_control(xi, h, failed_once):
    """Step control eq. 36 with Algorithm 3 f for the estimate Ξ = ``xi`` of step h:
    (accepted, h_err, h_new) with h_err = SAFETY·h/Ξ.  Accepted (Ξ ≤ 1): h_new =
    min(h_err, MAX_GROWTH·h), h kept when that grows it by less than DEADBAND;
    rejected: the retry h_new = min(h_err, MAX_GROWTH·h), h/2 after an earlier
    rejection of this step."""
    h_err = h * SAFETY / xi if xi > 0.0 else math.inf
    h_new = min(h_err, MAX_GROWTH * h)
    if xi <= 1.0:
        if h < h_new < DEADBAND * h:
            h_new = h
        return True, h_err, h_new
    return False, h_err, (h_new if not failed_once else 0.5 * h)


def _solve(fns, S, I, LU, p, u, n, m, ggl, t1, h, delta, F, Jw, work):
    """The Newton solve of step h from the predictor in the work arrays: index 3
    q = q0 + βh² x (eqs. 32-33), GGL q = q0 + βh x (eqs. 38-39)."""
    b, g, eta = S[BETA], S[GAMMA], S[ETA]
    cq = b * h if ggl else b * h * h   # q = q0 + cq·x
    return _newton(fns, S, I, LU, p, u, n, m, t1, h, work[W_Q0], work[W_V0], work[W_QDD0],
                   work[W_LAM_HAT], cq, g * h, eta, work[W_SCALE], work[W_CQT], work[W_CQT_LAM_SCALE],
                   work[W_SCALE_R], work[W_CQT_LAM_SCALE_R], delta, F, Jw, work, ggl, work[W_QD0], b, g,
                   work[W_SY], work[W_CQT_MU_SCALE])


def _plan_matrix(S, I, h):
    """Algorithm 3 g for step h: keep the iteration matrix (with relaxation) when the
    reuse test passes, else form it in the first iteration; True when it is formed."""
    if I[HAS_FACTOR] == 1 and keeps_matrix(S[SIGMA], h, S[H_JAC]):
        I[NEED_JAC] = 0
        S[RELAX] = relaxation(h, S[H_JAC])
        return False
    I[NEED_JAC] = 1
    S[RELAX] = 1.0
    return True


def _landing_sliver(S, I, n, t, t_limit):
    """A step onto ``t_limit`` much shorter than the proposed one: a second-order
    Taylor step, the method memory (a, rates, H_NEXT) kept."""
    o = offsets(n, I[I_M] + n_nonholonomic(I))
    o_y, o_yp, o_qdd, o_qddp = o[O_Y], o[O_YP], o[O_QDD], o[O_QDDP]
    h = t_limit - t
    S[o_yp:o_yp + 2 * n] = S[o_y:o_y + 2 * n]
    S[o_qddp:o_qddp + n] = S[o_qdd:o_qdd + n]
    S[T_PREV] = t
    for i in range(n):
        q, v, qdd = S[o_y + i], S[o_y + n + i], S[o_qdd + i]
        S[o_y + i] = q + h * v + (0.5 * h * h) * qdd
        S[o_y + n + i] = v + h * qdd
    S[T] = t_limit
    I[ST_STEPS] += 1
    return OK


def _step_start(fns, S, I, p, n, m, mz, t, work):
    """The record at the step start copied into the work arrays, the error weights
    w = RTOL|q| + ATOL (eq. 35), C_qᵀ (with the nonholonomic rows) and 1/|diag M| for
    the multipliers' Newton scales; returns max(1, ‖q‖∞)."""
    o = offsets(n, mz)
    o_y, o_qdd, o_lam, o_a = o[O_Y], o[O_QDD], o[O_LAM], o[O_A]
    o_xr, o_lr, o_mid = o[O_XR], o[O_LR], o[O_MID]
    q, v, qdd = work[W_Q_START], work[W_V_START], work[W_QDD_START]
    q[:] = S[o_y:o_y + n]
    v[:] = S[o_y + n:o_y + 2 * n]
    qdd[:] = S[o_qdd:o_qdd + n]
    work[W_A_START][:] = S[o_a:o_a + n]
    work[W_LAM_START][:] = S[o_lam:o_lam + mz]
    work[W_X_RATE][:] = S[o_xr:o_xr + n]
    work[W_LAM_RATE][:] = S[o_lr:o_lr + mz]
    rtol, atol = S[RTOL], S[ATOL]
    w = work[W_WEIGHTS]
    for i in range(n):
        w[i] = rtol * abs(q[i]) + atol
    qmax = 1.0
    for i in range(n):
        if abs(q[i]) > qmax:
            qmax = abs(q[i])
    CqT, minv_d = work[W_CQT], work[W_MINV_DIAG]
    CqT[:, :] = 0.0
    work[W_CQT_LAM_SCALE][:] = 0.0
    work[W_SCALE_R][:] = 0.0
    work[W_CQT_LAM_SCALE_R][:] = 0.0
    minv_d[:] = 0.0
    if mz > 0:
        Cq0 = work[W_CQ_START]
        Cq0[:, :] = 0.0
        fns[FN_CONSTRAINT_JACOBIAN](q, t, p, Cq0)
        _nh_rows(fns, p, m, q, t, Cq0)
        for i in range(n):
            for k in range(mz):
                CqT[i, k] = Cq0[k, i]
        _inv_mass_diag(fns, S, I, q, t, p, o_mid, n, minv_d)
    return qmax


def _predict(S, n, mz, ggl, h, h_last, qmax, work):
    """The predictor for step h (eqs. 30-31, a rescaled to h when h changed) and the
    Newton scales: index 3 the start (q0, v0, q''0, x̂ = h·x_rate) with the scale
    max(βh²/w, γh/w_v) and the stall scales; GGL the start of eqs. 38 (ŷ = h·x_rate,
    x̂ = h ŷ; q = q0 + βh x, q' = q'0 + γ x, v = v0 + γh y, v' = q''0 + η y) with
    s_x, s_y, s_μ; both: λ̂ = λ + h·λ_rate and the multipliers' scales."""
    am, af, g, b, eta = S[ALPHA_M], S[ALPHA_F], S[GAMMA], S[BETA], S[ETA]
    rtol, atol = S[RTOL], S[ATOL]
    q, v, qdd, a_old = work[W_Q_START], work[W_V_START], work[W_QDD_START], work[W_A_START]
    x_rate, w, w_v, minv_d = work[W_X_RATE], work[W_WEIGHTS], work[W_WV], work[W_MINV_DIAG]
    q0, v0, qdd0, x_hat, scale = work[W_Q0], work[W_V0], work[W_QDD0], work[W_X_HAT], work[W_SCALE]
    bh2, gh, bh = b * h * h, g * h, b * h
    rescale = h_last > 0.0 and h != h_last
    # Newton norm (velocity weights floored at 100 rounding units) and the stall norm:
    # once the iteration stops contracting, updates below ROUNDOFF·ε·max(1, |q|) in q
    # (γ/(β h) times that in v) are converged
    floor = (100.0 * EPS * g / (b * h)) * qmax
    qfloor = ROUNDOFF * EPS * qmax / NEWTON_TOL
    vfloor = (g / (b * h)) * qfloor
    for i in range(n):
        ai = a_old[i]
        if rescale:
            ai = qdd[i] + (h / h_last) * (a_old[i] - qdd[i])
        qdd_p = (am * ai + (1.0 - am - af) * qdd[i]) / (1.0 - af)
        v_p = v[i] + h * ((1.0 - g) * ai + g * qdd[i])
        q_p = q[i] + h * v[i] + (h * h) * ((0.5 - b) * ai + b * qdd[i])
        wv0 = rtol * abs(v[i]) + atol
        w_v[i] = wv0 + floor
        if ggl:
            yh = h * x_rate[i]
            xh = h * yh
            work[W_Y_HAT][i] = yh
            x_hat[i] = xh
            q0[i] = q_p + bh * xh
            work[W_QD0][i] = v_p + g * xh
            v0[i] = v_p + gh * yh
            qdd0[i] = qdd_p + eta * yh
            scale[i] = bh / w[i]                    # s_x
            work[W_SY][i] = gh / w_v[i]
            work[W_CQT_MU_SCALE][i] = scale[i] / g
            if mz > 0:
                work[W_CQT_LAM_SCALE][i] = work[W_SY][i] * minv_d[i] / eta
            continue
        xh = h * x_rate[i]
        x_hat[i] = xh
        qdd0[i] = qdd_p + eta * xh
        v0[i] = v_p + gh * xh
        q0[i] = q_p + bh2 * xh
        scale[i] = max(bh2 / w[i], gh / w_v[i])
        work[W_SCALE_R][i] = max(bh2 / (w[i] + qfloor), gh / (wv0 + vfloor))
        if mz > 0:
            work[W_CQT_LAM_SCALE][i] = scale[i] * minv_d[i] / eta
            work[W_CQT_LAM_SCALE_R][i] = work[W_SCALE_R][i] * minv_d[i] / eta
    lam_old, lam_rate, lam_hat = work[W_LAM_START], work[W_LAM_RATE], work[W_LAM_HAT]
    for k in range(mz):
        lam_hat[k] = lam_old[k] + h * lam_rate[k]


def _error_ggl(S, n, h, delta, work):
    """Eq. 39's estimate Ξ = (h · max(‖x‖_q, ‖y‖_v))^{1/2} (W of the user's tolerances;
    the v weights floored at GGL_VELOCITY_FLOOR · ‖v‖∞)."""
    rtol, atol = S[RTOL], S[ATOL]
    v, w, x_hat, x = work[W_V_START], work[W_WEIGHTS], work[W_X_HAT], work[W_X]
    xq = 0.0
    xv = 0.0
    vinf = 0.0
    for i in range(n):
        if abs(v[i]) > vinf:
            vinf = abs(v[i])
    for i in range(n):
        e = abs(x_hat[i] + delta[i]) / w[i]
        if e > xq or e != e:
            xq = e
        e = abs(x[i]) / (rtol * _pymax(abs(v[i]), GGL_VELOCITY_FLOOR * vinf) + atol)
        if e > xv or e != e:
            xv = e
    return math.sqrt(h * _pymax(xq, xv)) if n > 0 else 0.0


def _fixed_estimate(S, n, h, work):
    """Eq. 34's h²‖x‖_W in the user's weights W = RTOL|q| + ATOL (the fixed step's
    local error estimate; the error test's Ξ³ without the proportionality factor)."""
    return h * h * scaled_max(work[W_X], work[W_WEIGHTS], 1.0, 0.0, n)


def _error_index3(fns, S, I, p, n, m, t1, h, qmax, delta, work):
    """Eq. 34's estimate Ξ = (h² ‖x‖)^{1/3} in the weights w scaled by the tolerance
    proportionality factor (ERR_SCALE); below 1, with the rounding floor of h² x, and
    with option tangent_estimate (ERR_TANGENT) on the normal part x − P x only."""
    b = S[BETA]
    w, x = work[W_WEIGHTS], work[W_X]
    xm = 0.0
    es = S[ERR_SCALE]                                 # tolerance proportionality
    if es < 1.0:
        errfloor = (10.0 * ROUNDOFF * EPS / b) * qmax
        if m > 0 and S[ERR_TANGENT] == 1.0:
            xt = _tangent_part(fns, S, I, p, n, m, work[W_Q0] + (b * h * h) * delta[:n], t1, x)
            et = scaled_max(xt, w, es, 0.0, n)
            for i in range(n):
                e = abs(x[i] - xt[i]) / (es * w[i] + errfloor)
                if e > xm:
                    xm = e
            xm = _pymax(et, xm)
        else:
            xm = scaled_max(x, w, es, errfloor, n)
    else:
        xm = scaled_max(x, w, es, 0.0, n)
    return (h * h * xm) ** (1.0 / 3.0) if n > 0 else 0.0


def _accept(fns, S, I, p, n, m, mz, ggl, t, h, t_new, delta, work):
    """Writes the accepted step into the record: the new point from the Newton
    solution (eq. 32 / GGL eq. 38), the previous point (dense output), the
    acceleration-like a = q'' + x and the rates x/h, λ change/h that predict the next
    step, t; the velocity projection (option) last."""
    o = offsets(n, mz)
    o_y, o_yp, o_qdd, o_qddp = o[O_Y], o[O_YP], o[O_QDD], o[O_QDDP]
    o_lam, o_a, o_xr, o_lr = o[O_LAM], o[O_A], o[O_XR], o[O_LR]
    b, g, eta = S[BETA], S[GAMMA], S[ETA]
    q0, v0, qdd0, lam_hat = work[W_Q0], work[W_V0], work[W_QDD0], work[W_LAM_HAT]
    q1, v1, qdd1, lam1 = work[W_Q1], work[W_V1], work[W_QDD1], work[W_LAM1]
    qdd, lam_old, x = work[W_QDD_START], work[W_LAM_START], work[W_X]
    gh = g * h
    if ggl:
        bh = b * h
        for i in range(n):
            q1[i] = q0[i] + bh * delta[i]
            v1[i] = v0[i] + gh * delta[n + i]
            qdd1[i] = qdd0[i] + eta * delta[n + i]
        for k in range(mz):
            lam1[k] = lam_hat[k] + delta[2 * n + k]
    else:
        bh2 = b * h * h
        for i in range(n):
            q1[i] = q0[i] + bh2 * delta[i]
            v1[i] = v0[i] + gh * delta[i]
            qdd1[i] = qdd0[i] + eta * delta[i]
        for k in range(mz):
            lam1[k] = lam_hat[k] + delta[n + k]
    S[T_PREV] = t
    S[o_yp:o_yp + 2 * n] = S[o_y:o_y + 2 * n]
    S[o_qddp:o_qddp + n] = qdd
    for i in range(n):
        S[o_a + i] = qdd[i] + x[i]
    S[H_LAST] = h
    for i in range(n):
        S[o_xr + i] = x[i] / h
    for k in range(mz):
        S[o_lr + k] = (lam1[k] - lam_old[k]) / h
    S[T] = t_new
    if I[PROJECT] == 1 and m > 0:
        _project_velocity(fns, S, I, p, n, m, q1, v1, S[T], work)
    S[o_y:o_y + n] = q1
    S[o_y + n:o_y + 2 * n] = v1
    S[o_qdd:o_qdd + n] = qdd1
    S[o_lam:o_lam + mz] = lam1
    I[ST_STEPS] += 1


def advance(fns, S, I, LU, u, p, t_target, max_steps, whole):
    """Steps until t = t_target (exactly) or ``max_steps`` steps were taken
    (with ``whole``: not reaching the target is the failure STEP_BUDGET).
    Returns a status code; on failure S, I and LU are as they were on entry
    (all or nothing) except the failure slots F_H, F_INFO, F_T and I[REASON]."""
    n, m, ng = I[I_N], I[I_M], n_nonholonomic(I)
    N = matrix_size(n, m, I[GGL], ng)
    r, c = LU.shape
    owned = workspace(n, m + ng, S.shape[0] + r * c + 2 * N + N * N)
    work = unowned(owned)   # views without reference counts; owned is kept alive below
    rest = work[W_REST]
    S0, I0, LU0 = snapshot_in(rest, S, I, LU)      # all or nothing
    o = S.shape[0] + r * c
    delta, F = rest[o:o + N], rest[o + N:o + 2 * N]
    Jw = rest[o + 2 * N:o + 2 * N + N * N].reshape((N, N))
    k = 0
    status = OK
    while S[T] < t_target and k < max_steps:
        status = step(fns, S, I, LU, u, p, t_target, work, delta, F, Jw)
        if status != OK:
            break
        k += 1
    status = end_advance(status, whole, t_target, S, I, LU, S0, I0, LU0, STEP_BUDGET, FAILURE_SLOTS,
                         REASON)
    keep_alive(owned)
    return status


def entry(fns, mode, S, I, LU, u, p, t_target, max_steps, y_out):
    """The method's one entry point, compiled once per machine (cosim.jit.method_entry)
    or run as plain Python: the model arrives as ``fns``, its kernels in
    ``cosim.models.kernels`` field order (compiled functions of fixed signatures, or
    the plain Python functions).  Modes: RESTART; WHOLE_INTERVAL advances to
    ``t_target`` within ``max_steps``; ONE_STEP takes at most ``max_steps`` steps;
    RESTART_THEN_ADVANCE restarts (new inputs held) and then advances as
    WHOLE_INTERVAL — a failed restart returns RESTART_STATUS + its status with
    nothing changed.  After a successful advance the model's outputs at the new
    state go into ``y_out`` (the outputs kernel, fns[FN_OUTPUTS]) unless it is empty."""
    if mode == RESTART:
        return restart(fns, S, I, u, p)
    if mode == RESTART_THEN_ADVANCE:
        status = restart(fns, S, I, u, p)
        if status != OK:
            return RESTART_STATUS + status
    status = advance(fns, S, I, LU, u, p, t_target, max_steps, mode != ONE_STEP)
    return model_outputs(fns, status, S, N_SCALARS, I[I_N], S[T], u, p, y_out)
