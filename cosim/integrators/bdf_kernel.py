"""BDF, variable step and order 1-5 (seed 000 §4, Algorithm 4), as pure functions on
one flat state record: the one implementation of "bdf" (index 3 with the projection
filter, eqs. 73-80), "bdf-i2" (GGL, eqs. 81-84) and "bdf-i1" (q, v, a as index-1
variables), run compiled (numba, compiled once per machine by
:func:`cosim.jit.method_entry`) or as plain Python (the same functions).  The
integrator object around it is :mod:`cosim.integrators.bdf`, whose docstring lists
the choices made beyond the seed's text.

Variable-step divided differences (eqs. 57-69), Newton with the iteration matrix
formed at every attempt (index 3, unless ``reuse_matrix``) or reused across steps
(§5.1), the projection filter eq. 80 for the velocity error, order/step selection
with eq. 85, Table 1 and Skelboe's test (Table 2).

The model enters as ``fns``, its functions in :func:`cosim.jit.kernel_fields`
order (compiled functions of fixed signatures, or plain Python ones; see
:mod:`cosim.integrators.model_functions`).  Everything the method remembers
lives in three arrays:

* ``S`` float64: scalars (slots below), then y, y_prev, q'', λ, the
  difference arrays D ((MAX_ORDER+3)×2n) and Dz ((MAX_ORDER+3)×(n+m)), τ,
  the iteration matrix J of the current LU, and a ring buffer of
  the (t, k) of the last HIST accepted steps;
* ``I`` int64: sizes, flags, order bookkeeping, statistics, order counts,
  the LU pivots;
* ``LU`` float64: the kept factors.

The record's layout is :mod:`bdf_record`, the corrector (residuals, iteration
matrices, Newton) :mod:`bdf_corrector`; this module is the step: predictor,
error norms, order and step selection, acceptance.

No exceptions and no allocation inside the step loop: work arrays are made
once per :func:`advance` call; every function returns a status code that
the integrator object turns into its error messages.
"""
import math

from .dense_lu import lu_solve_inplace

# the record: every name, so that bdf_kernel is the method's one namespace (bdf.py)
from .bdf_record import (  # noqa: F401
    ATOL, CONST_MASS, EPS, ERROR_FAILS, FAILURE_SLOTS, ERROR_TEST_FAILED, ERR_RMS, FIXED_ERR,
    FIXED_SLOTS, FIXED_UNRESOLVED, F_H, F_HHAT, F_INFO, F_K, F_T, H, HAS_FACTOR, HAS_J, HIST,
    HIST_COUNT, H_FIXED, H_JAC, H_NEXT,
    INDEX1, INDEX2, INDEX3, I_M, I_N, I_NS, K_NEXT, K_USED, MAX_FAILURES, MAX_GROWTH, MAX_ORD,
    MAX_ORDER, MAX_RATIO, MAX_REJECT_FACTOR, MAX_STEP, MIN_REJECT_FACTOR, MIN_STEP, NEED_JAC,
    NEW_INPUTS, NEWTON_CUT, NEWTON_ERR_TOL, NEWTON_FAILED, NEWTON_FAILS, NEWTON_MAX_ITER, NEWTON_TOL,
    NONFINITE_MATRIX, NOT_IN_KERNEL, N_SCALARS, N_STATS, N_STEPS, OK, ONE_STEP, ORDER,
    ORDER_COUNTS, PIV, POS_WEIGHTS, REASON, RELAX, RESTART, RESTART_STATUS, RESTART_THEN_ADVANCE,
    REUSE, ROUNDOFF_FLOOR, ROWS, RTOL, R_NO_CONVERGENCE, R_RESIDUAL, R_UPDATE, SAFETY_DOWN,
    SAFETY_SAME, SAFETY_UP, SHIFT_MAX, SHIFT_REFUSED, SIGMA, SINGULAR, SKELBOE, STATS, STEP_BUDGET, ST_JAC, ST_LU, ST_NEWTON,
    ST_REJ, ST_RES, ST_STEPS, T, T_PREV, UNDERFLOW, VALID, VARIANT, VEL_ERROR, VE_OFF, VE_ON,
    VE_SCALED, WEIGHT_FLOOR, WHOLE_INTERVAL, WS_A, WS_A0, WS_CC, WS_CE, WS_COL, WS_CT, WS_DELTA,
    WS_DY, WS_F, WS_G0, WS_G1, WS_LAM, WS_LAM1, WS_LHAT, WS_MU, WS_OMEGA, WS_Q, WS_QDD1, WS_QF,
    WS_QX, WS_RHS, WS_TAU, WS_TQ, WS_V, WS_VX, WS_W2, WS_WINV, WS_YDPRED, WS_YPRED, WS_ZPRED,
    O_D, O_DZ, O_HK, O_HT, O_J, O_LAM, O_QDD, O_TAU, O_Y, O_YP, int_length, offsets, system_size,
    workspace, wslots)
from .bdf_corrector import _newton
from .bdf_shift import held_input_into, new_inputs
from .kernel_common import (FACTORED, MATRIX_NONFINITE, clamp_step, end_advance, fixed_step_resolved, keep_alive,
    keeps_matrix, model_outputs, restart_accelerations, unowned)

# inlined by numba into their one caller (cosim.jit.method_inlined): each takes the work
# vector and its slot tuple ws (31 ints), which a call of a function compiled on its own
# passes member by member (not _error_norm: its three calls in _error_norms made the
# method's compile about 28 % longer for no measurable gain)
INLINED = ("_inverse_weights", "_predict", "_plan_matrix", "_newton_weights", "_corrected_point",
           "_difference_columns", "_order_test_norms", "_accept", "_push_difference",
           "_after_newton_failure", "_after_rejection")


# ---------------------------------------------------------------------------------
# error norms (Algorithm 4 f, eq. 35, projection filter eq. 80)
# ---------------------------------------------------------------------------------
def _nanmax(r, x):
    """max as np.max: a NaN sticks."""
    if x > r or x != x:
        return x
    return r


def _error_norm(S, I, LU, n, m, W, ws, Jm, o_col, velocity, scaled, hhat):
    """‖col‖ of BDFIndex3._error_norms for one column at W[o_col:o_col+2n]:
    the max (eq. 35) or, with I[ERR_RMS], the RMS of the weighted components."""
    winv, rhs = ws[WS_WINV], ws[WS_RHS]
    rms = I[ERR_RMS] != 0
    r = 0.0
    s2 = 0.0
    for i in range(n):
        x = W[o_col + i] * W[winv + i]
        r = _nanmax(r, abs(x))
        s2 += x * x
    if not velocity:
        return math.sqrt(s2 / n) if rms else r
    if m == 0 or I[HAS_FACTOR] == 0 or I[VARIANT] != INDEX3:
        for i in range(n):
            wv = W[winv + n + i] * hhat if scaled else W[winv + n + i]
            x = W[o_col + n + i] * wv
            r = _nanmax(r, abs(x))
            s2 += x * x
        return math.sqrt(s2 / (2 * n)) if rms else r
    # eq. 80: ε̂ solves J [ε̂; μ] = [M̂ ε; 0] with the LU at hand (M̂ = J[:n, :n])
    N = n + m
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += Jm[i * N + j] * W[o_col + n + j]
        W[rhs + i] = s
    for k in range(m):
        W[rhs + n + k] = 0.0
    lu_solve_inplace(LU, I[PIV:PIV + N], W[rhs:rhs + N])
    rp = 0.0
    for i in range(n):
        wv = W[winv + n + i] * hhat if scaled else W[winv + n + i]
        x = W[rhs + i] * wv
        rp = _nanmax(rp, abs(x))
        s2 += x * x
    if rms:
        return math.sqrt(s2 / (2 * n))
    if rp > r:     # Python's max(q part, p part)
        return rp
    return r


def _error_norms(S, I, LU, n, m, W, ws, Jm, k, has_up, velocity, scaled, hhat):
    """The norms of the columns ∇^{k+1}, ∇^k (inf at k = 1) and ∇^{k+2} (inf
    without the history) at W[col] (BDF._error_norms)."""
    c0 = ws[WS_COL]
    n2 = 2 * n
    e_k = _error_norm(S, I, LU, n, m, W, ws, Jm, c0, velocity, scaled, hhat)
    e_dn = _error_norm(S, I, LU, n, m, W, ws, Jm, c0 + n2, velocity, scaled, hhat) \
        if k > 1 else math.inf
    e_up = _error_norm(S, I, LU, n, m, W, ws, Jm, c0 + 2 * n2, velocity, scaled, hhat) \
        if has_up else math.inf
    return e_k, e_dn, e_up


def _h_order(h, j, err, safety, h_base):
    """Eq. 85 step of order j capped by Table 1 (BDF._h_order)."""
    if j < 1:
        return 0.0
    eps = err ** (1.0 / (j + 1)) if err > 0.0 else 0.0
    h_j = h / (safety * eps) if eps > 0.0 else math.inf
    return min(h_j, MAX_RATIO[j] * h_base, MAX_GROWTH * h_base)


# ---------------------------------------------------------------------------------
# one step (BDF._step_inner, BDFIndex3._solve, BDF._accept)
# ---------------------------------------------------------------------------------
def step(fns, S, I, LU, u, p, t_limit, work):
    """One accepted step ending at or before ``t_limit``.  Returns a status
    code; on failure S[F_H] (and S[F_HHAT], I[F_K]) describe the attempt."""
    n, m = I[I_N], I[I_M]
    ns = I[I_NS]
    W, M, Qq, Qv, Hm, Mq, Cq, Jw = work
    ws = wslots(n, m, ns)
    ce = ws[WS_CE]
    o = offsets(n, m, ns)
    o_y, o_J = o[O_Y], o[O_J]
    Jm = S[o_J:o_J + ns * ns]
    fixed = S[H_FIXED] > 0.0
    velocity_error = I[VEL_ERROR] != VE_OFF
    velocity_scaled = I[VEL_ERROR] == VE_SCALED
    k = I[K_NEXT]
    h_prop = S[H_NEXT]
    t = S[T]
    _inverse_weights(S, I, n, o_y, W, ws[WS_WINV])
    failures = 0
    error_failures = 0
    h = hhat = h_base = h_prop
    lands = decr = False
    e_k = s_k = e_up = s_up = h_k = h_dn = 0.0
    e_dn = s_dn = math.inf
    while True:
        h, lands, moves = clamp_step(S[T], h_prop, S[MAX_STEP], S[H_FIXED] > 0.0, t_limit)
        if not moves:
            S[F_H] = h
            return UNDERFLOW
        h_min = 4.0 * EPS * max(abs(t), abs(t_limit), 1e-300)
        if not h > h_min:
            S[F_H] = h
            return MIN_STEP
        hhat = _predict(S, I, n, m, ns, k, h, W, ws)
        h2 = hhat * hhat
        _plan_matrix(S, I, hhat)
        _newton_weights(I, n, m, hhat, h2, W, ws)
        t1 = t + h
        converged, status = _newton(fns, S, I, LU, p, u, n, m, t1, hhat, h2, W, ws,
                                    M, Qq, Qv, Hm, Mq, Cq, Jw)
        if status != OK:
            S[F_H] = h
            S[F_HHAT] = hhat
            I[F_K] = k
            return status
        if not converged:
            failures += 1
            status, k, h_prop = _after_newton_failure(S, I, h, k, failures)
            if status != OK:
                return status
            continue
        _corrected_point(I, n, m, hhat, h2, W, ws)
        # error estimates of orders k−1, k, k+1 (Algorithm 4 f)
        has_up = _difference_columns(S, I, n, m, ns, k, h, W, ws)
        e_k, e_dn, e_up = _error_norms(S, I, LU, n, m, W, ws, Jm, k, has_up, velocity_error,
                                       velocity_scaled, hhat)
        s_k, s_dn, s_up = _order_test_norms(S, I, LU, n, m, W, ws, Jm, k, has_up, hhat,
                                            e_k, e_dn, e_up)
        err = W[ce + k] * e_k
        h_base = h_prop if lands and h < h_prop else h
        h_k = _h_order(h, k, W[ce + k] * e_k, SAFETY_SAME, h_base)
        h_dn = _h_order(h, k - 1, W[ce + k - 1] * e_dn, SAFETY_DOWN, h_base) if k > 1 else 0.0
        decr = k >= 3 and s_k > SKELBOE[k] * s_dn            # Table 2 (Skelboe)
        if fixed:   # no error test: the estimate is judged (largest kept, beyond the state fails)
            if not fixed_step_resolved(S, err, h, FIXED_SLOTS):
                I[F_K] = k
                return FIXED_UNRESOLVED
            break
        if err <= 1.0:
            break
        failures += 1                                        # rejected (Algorithm 4 h i)
        error_failures += 1
        status, k, h_prop = _after_rejection(S, I, h, k, err, decr, h_k, h_dn, failures, error_failures)
        if status != OK:
            return status
    _accept(S, I, n, m, W, ws, h, h_base, lands, t_limit, k, e_k, s_k, s_dn, e_up, s_up,
            h_k, h_dn, decr, fixed, failures > 0)
    return OK


def _order_test_norms(S, I, LU, n, m, W, ws, Jm, k, has_up, hhat, e_k, e_dn, e_up):
    """The norms the order tests use: the error estimates' own when the velocity
    error is in them (index 2/1, or scaled), else those of the velocity estimate
    (times ĥ for index 3: BDFIndex3's order tests)."""
    ve = I[VEL_ERROR]
    velocity_error = ve != VE_OFF
    velocity_scaled = ve == VE_SCALED
    if velocity_error and not (I[VARIANT] == INDEX3 and not velocity_scaled):
        return e_k, e_dn, e_up
    return _error_norms(S, I, LU, n, m, W, ws, Jm, k, has_up, True,
                        velocity_scaled or velocity_error, hhat)


def _after_newton_failure(S, I, h, k, failures):
    """After the ``failures``-th failed attempt, Newton's: a fresh matrix, the step cut
    by NEWTON_CUT, order 1 from the third failure.  Returns (status, k, h):
    NEWTON_FAILED after MAX_FAILURES (S[F_H] = h), else OK."""
    I[ST_REJ] += 1
    I[NEWTON_FAILS] += 1
    if failures > MAX_FAILURES:
        S[F_H] = h
        return NEWTON_FAILED, k, h
    I[NEED_JAC] = 1
    S[RELAX] = 1.0
    return OK, 1 if failures >= 3 else k, NEWTON_CUT * h


def _after_rejection(S, I, h, k, err, decr, h_k, h_dn, failures, error_failures):
    """Algorithm 4 h i: after a failed error test (ratio ``err``; the ``failures``-th
    failed attempt, the ``error_failures``-th of the error test) the order drops when
    Skelboe's test said so (``decr``), the step is the order's proposal, halved from the
    second failure on, order 1 from the third; within [MIN, MAX]_REJECT_FACTOR × h.
    Returns (status, k, h): ERROR_TEST_FAILED after MAX_FAILURES (S[F_H] = h,
    S[F_INFO] = err), else OK."""
    I[ST_REJ] += 1
    I[ERROR_FAILS] += 1
    if failures > MAX_FAILURES:
        S[F_H] = h
        S[F_INFO] = err
        return ERROR_TEST_FAILED, k, h
    if decr:
        k = k - 1
        h_new = h_dn
    else:
        h_new = h_k
    if error_failures >= 2:
        h_new *= 0.5
    if error_failures >= 3:
        k = 1
    return OK, k, min(max(h_new, MIN_REJECT_FACTOR * h), MAX_REJECT_FACTOR * h)


def _plan_matrix(S, I, hhat):
    """§5.1 reuse test on ĥ (Algorithm 3 g, no relaxation here): keep the iteration
    matrix when it passes, unless REUSE is off or a re-formation is already due."""
    if I[REUSE] == 0:
        I[NEED_JAC] = 1                       # see BDFIndex3.reuse_matrix
    elif I[NEED_JAC] == 0:
        if I[HAS_FACTOR] == 1 and keeps_matrix(S[SIGMA], hhat, S[H_JAC]):
            I[NEED_JAC] = 0
        else:
            I[NEED_JAC] = 1
    S[RELAX] = 1.0


def _inverse_weights(S, I, n, o_y, W, winv):
    """1/W of eq. 35 at the step start for y = (q, v): RTOL|y| + ATOL (with
    POS_WEIGHTS the q weights for v too), floored at WEIGHT_FLOOR rounding units of
    max|q| and max|v|."""
    n2 = 2 * n
    rtol, atol = S[RTOL], S[ATOL]
    for i in range(n2):
        W[winv + i] = rtol * abs(S[o_y + i]) + atol
    if I[POS_WEIGHTS] == 1:                       # eq. 35: W_q^k for q_k and v_k
        for i in range(n):
            W[winv + n + i] = W[winv + i]
    qmax = 0.0                                    # rounding floor (bdf.WEIGHT_FLOOR)
    vmax = 0.0
    for i in range(n):
        qmax = max(qmax, abs(S[o_y + i]))
        vmax = max(vmax, abs(S[o_y + n + i]))
    for i in range(n):
        W[winv + i] = max(W[winv + i], WEIGHT_FLOOR * EPS * qmax)
        W[winv + n + i] = max(W[winv + n + i], WEIGHT_FLOOR * EPS * vmax)
    for i in range(n2):
        W[winv + i] = 1.0 / W[winv + i]


def _predict(S, I, n, m, ns, k, h, W, ws):
    """The variable-step coefficients τ, ω, c of order k for step h (eqs. 58, 64, 66)
    and the predictors of y, y' (eq. 69) and of (q'', λ); returns ĥ = h/c_k."""
    n2, N = 2 * n, n + m
    tau, omega, c = ws[WS_TAU], ws[WS_OMEGA], ws[WS_CC]
    ypred, ydpred, zpred = ws[WS_YPRED], ws[WS_YDPRED], ws[WS_ZPRED]
    o = offsets(n, m, ns)
    o_y, o_qdd, o_lam, o_D, o_Dz, o_tau = o[O_Y], o[O_QDD], o[O_LAM], o[O_D], o[O_DZ], o[O_TAU]
    W[tau] = h
    for j in range(1, ROWS):
        W[tau + j] = h + S[o_tau + j - 1]
    kk = min(k + 1, I[VALID])
    prod = 1.0
    for j in range(kk):
        prod = prod * (W[tau + j] / S[o_tau + j])
        W[omega + j] = prod
    acc = 0.0
    for j in range(k):
        acc = acc + h / W[tau + j]
        W[c + j] = acc
    for i in range(n2):
        s = 0.0
        sd = 0.0
        for j in range(k):
            dji = S[o_D + (j + 1) * n2 + i]
            s += W[omega + j] * dji
            sd += (W[c + j] * W[omega + j]) * dji
        W[ypred + i] = S[o_y + i] + s
        W[ydpred + i] = sd / h
    for i in range(N):
        s = 0.0
        for j in range(k):
            s += W[omega + j] * S[o_Dz + (j + 1) * N + i]
        z = S[o_qdd + i] if i < n else S[o_lam + i - n]
        W[zpred + i] = z + s
    return h / W[c + k - 1]


def _newton_weights(I, n, m, hhat, h2, W, ws):
    """The squared weights of the Newton norm over the entries the formulation weighs
    and the multipliers' start λ̂ = ĥ² λ_pred; index 3 also a0 (eq. 77 without δ)."""
    winv, ypred, ydpred, zpred = ws[WS_WINV], ws[WS_YPRED], ws[WS_YDPRED], ws[WS_ZPRED]
    a0, lhat, w2 = ws[WS_A0], ws[WS_LHAT], ws[WS_W2]
    if I[VARIANT] == INDEX3:
        # BDFIndex3._solve: eq. 77 without δ, λ̂0, Newton weights
        qmax = 0.0
        for i in range(n):
            x = abs(W[ypred + i])
            if x > qmax or x != x:
                qmax = x
        floor = ROUNDOFF_FLOOR * EPS * qmax / hhat
        wscale = 0.5 / max(n, 1)
        for i in range(n):
            W[a0 + i] = W[ydpred + n + i] + (W[ydpred + i] - W[ypred + n + i]) / hhat
            wvi = 1.0 / W[winv + n + i]
            if not wvi >= floor:                  # np.maximum (NaN sticks)
                wvi = floor if floor >= wvi or floor != floor else wvi
            wq = W[winv + i]
            x = 1.0 / (wvi * hhat)
            W[w2 + i] = (wq * wq + x * x) * wscale
    else:
        # BDFIndex2._solve / BDFIndex1._solve: RMS of the q and v updates
        # (winv_v = winv/ĥ), and of the a updates for index 1 (winv_a = winv_v/ĥ²·ĥ)
        wdiv = max((I[VARIANT] + 1) * n, 1)
        for i in range(n):
            x = W[winv + i]
            W[w2 + i] = x * x / wdiv
            x = W[winv + n + i] / hhat
            W[w2 + n + i] = x * x / wdiv
            if I[VARIANT] == INDEX1:
                x = W[winv + n + i] / h2 * hhat
                W[w2 + 2 * n + i] = x * x / wdiv
    for kk2 in range(m):
        W[lhat + kk2] = h2 * W[zpred + n + kk2]


def _corrected_point(I, n, m, hhat, h2, W, ws):
    """From the Newton solution δ: the change dy = y_{n+1} − predictor of (q, v)
    (index 3: v by eq. 76), q''_{n+1} and λ_{n+1} of the formulation."""
    index3 = I[VARIANT] == INDEX3
    delta, dy, qdd1, lam1 = ws[WS_DELTA], ws[WS_DY], ws[WS_QDD1], ws[WS_LAM1]
    ypred, ydpred, zpred, a0, lhat = ws[WS_YPRED], ws[WS_YDPRED], ws[WS_ZPRED], ws[WS_A0], ws[WS_LHAT]
    for i in range(n):
        d = W[delta + i]
        W[dy + i] = d
        if index3:
            W[dy + n + i] = W[ydpred + i] - W[ypred + n + i] + d / hhat     # eq. 76
            W[qdd1 + i] = W[a0 + i] + d / h2
        elif I[VARIANT] == INDEX1:
            W[dy + n + i] = W[delta + n + i] / hhat
            W[qdd1 + i] = W[zpred + i] + W[delta + 2 * n + i] / h2
        else:
            eps = W[delta + n + i] / hhat
            W[dy + n + i] = eps
            W[qdd1 + i] = W[ydpred + n + i] + eps / hhat
    if I[VARIANT] == INDEX1:
        for kk2 in range(m):
            W[lam1 + kk2] = W[zpred + n + kk2] + W[delta + 3 * n + kk2] / h2
    else:
        o_l = n if index3 else 2 * n
        for kk2 in range(m):
            W[lam1 + kk2] = (W[lhat + kk2] + W[delta + o_l + kk2]) / h2


def _difference_columns(S, I, n, m, ns, k, h, W, ws):
    """The error constants h/τ_j and the backward differences the estimates of orders
    k, k−1, k+1 weigh: ∇^{k+1}, ∇^k and (when the history allows, returned True)
    ∇^{k+2} of y_{n+1}."""
    n2 = 2 * n
    tau, omega, ce, col, dy = ws[WS_TAU], ws[WS_OMEGA], ws[WS_CE], ws[WS_COL], ws[WS_DY]
    o_D = offsets(n, m, ns)[O_D]
    for j in range(ROWS):
        W[ce + j] = h / W[tau + j]
    c0, c1, c2 = col, col + n2, col + 2 * n2
    for i in range(n2):
        W[c0 + i] = W[dy + i]                                  # ∇^{k+1} y_{n+1}
    if k > 1:
        for i in range(n2):
            W[c1 + i] = W[omega + k - 1] * S[o_D + k * n2 + i] + W[dy + i]   # ∇^k y_{n+1}
    has_up = I[VALID] >= k + 1
    if has_up:
        for i in range(n2):
            W[c2 + i] = W[dy + i] - W[omega + k] * S[o_D + (k + 1) * n2 + i]  # ∇^{k+2}
    return has_up


def _push_difference(S, o, width, i, x, k, valid_old, W, omega):
    """Eq. 59 for component i of the difference array at S[o] (rows of
    ``width``): ∇^{k+1} = x = y_{n+1} − predictor, ∇^{k+2}, and ∇^j for j ≤ k."""
    if valid_old >= k + 1:
        S[o + (k + 2) * width + i] = x - W[omega + k] * S[o + (k + 1) * width + i]
    else:
        S[o + (k + 2) * width + i] = x
    S[o + (k + 1) * width + i] = x
    for j in range(k, 0, -1):
        S[o + j * width + i] = W[omega + j - 1] * S[o + j * width + i] + S[o + (j + 1) * width + i]
    for j in range(k + 3, ROWS):
        S[o + j * width + i] = 0.0


def _accept(S, I, n, m, W, ws, h, h_base, lands, t_limit, k, e_k, s_k, s_dn, e_up, s_up,
            h_k, h_dn, decr, fixed, failed):
    """BDF._accept: difference update eq. 59, then order and step (Algorithm 4 i-j)."""
    N = n + m
    n2 = 2 * n
    ypred, zpred, dy, qdd1, lam1 = ws[WS_YPRED], ws[WS_ZPRED], ws[WS_DY], ws[WS_QDD1], ws[WS_LAM1]
    tau, omega, ce = ws[WS_TAU], ws[WS_OMEGA], ws[WS_CE]
    o = offsets(n, m, I[I_NS])
    o_y, o_yp, o_qdd, o_lam, o_D = o[O_Y], o[O_YP], o[O_QDD], o[O_LAM], o[O_D]
    o_Dz, o_tau, o_ht, o_hk = o[O_DZ], o[O_TAU], o[O_HT], o[O_HK]
    valid_old = I[VALID]
    for i in range(n2):
        _push_difference(S, o_D, n2, i, W[dy + i], k, valid_old, W, omega)
    I[VALID] = k + 2 if valid_old >= k + 1 else k + 1
    for i in range(N):
        z1 = W[qdd1 + i] if i < n else W[lam1 + i - n]
        _push_difference(S, o_Dz, N, i, z1 - W[zpred + i], k, valid_old, W, omega)
    for j in range(ROWS):
        S[o_tau + j] = W[tau + j]
    t_old = S[T]
    S[T_PREV] = t_old
    S[T] = t_limit if lands else t_old + h
    for i in range(n2):
        S[o_yp + i] = S[o_y + i]
        S[o_y + i] = W[ypred + i] + W[dy + i]
    for i in range(n):
        S[o_qdd + i] = W[qdd1 + i]
    for i in range(m):
        S[o_lam + i] = W[lam1 + i]
    S[H] = h
    I[K_USED] = k
    I[ORDER] = k
    I[N_STEPS] += 1
    I[ST_STEPS] += 1
    I[ORDER_COUNTS + k] += 1
    slot = I[HIST_COUNT] % HIST
    S[o_ht + slot] = S[T]
    S[o_hk + slot] = k
    I[HIST_COUNT] += 1
    # order and step for the next step (Algorithm 4 i-j)
    kmax = I[MAX_ORD]
    if I[N_STEPS] == 1:
        k_new, h_new = k, h_base
    else:
        k_new, h_new = k, h_k
        if k > 1 and h_dn >= h_new:
            k_new, h_new = k - 1, h_dn
        incr = (s_k <= s_dn) and (s_up <= s_k) and math.isfinite(s_up)   # relaxed smoothness
        if incr and k < kmax and I[VALID] >= k + 2:
            h_up = _h_order(h, k + 1, W[ce + k + 1] * e_up, SAFETY_UP, h_base)
            if h_up > h_new:
                k_new, h_new = k + 1, h_up
        if decr:
            k_new, h_new = k - 1, h_dn
    k_new = min(k_new, kmax)
    if failed:
        h_new = min(h_new, h_base)
    S[H_NEXT] = S[H_FIXED] if fixed else h_new
    I[K_NEXT] = k_new


def advance(fns, S, I, LU, u, p, t_target, max_steps, whole):
    """Steps until t = t_target or ``max_steps`` steps were taken (``whole``: not
    reaching the target is STEP_BUDGET).  On failure S, I and LU are as on
    entry except the failure slots F_T, F_H, F_HHAT, F_INFO, I[REASON], I[F_K]."""
    n, m = I[I_N], I[I_M]
    S0, I0, LU0 = S.copy(), I.copy(), LU.copy()
    owned = workspace(n, m, I[I_NS])
    work = unowned(owned)   # views without reference counts; owned is kept alive below
    count = 0
    status = OK
    while S[T] < t_target and count < max_steps:
        status = step(fns, S, I, LU, u, p, t_target, work)
        if status != OK:
            break
        count += 1
    k_failed = I[F_K]
    status = end_advance(status, whole, t_target, S, I, LU, S0, I0, LU0, STEP_BUDGET, FAILURE_SLOTS,
                         REASON)
    keep_alive(owned)
    if status != OK:
        I[F_K] = k_failed   # the order of the failed attempt
    return status


def restart(fns, S, I, u, p):
    """The restart's consistent accelerations: q'', λ at the current point with what is
    held now (seed 000 eq. 10, :func:`kernel_common.restart_accelerations`) into the
    record; the integrator object then starts again at order 1 (bdf.py ``_restart``).
    Returns OK, or SINGULAR / NONFINITE_MATRIX (S[F_T] = t, the pivot ratio in
    S[F_INFO]) with the rest of the record unchanged."""
    n, m = I[I_N], I[I_M]
    o = offsets(n, m, I[I_NS])
    o_y, o_qdd, o_lam = o[O_Y], o[O_QDD], o[O_LAM]
    status = restart_accelerations(fns, S, u, p, n, m, 0, o_y, o_qdd, o_lam, (T, F_T, F_INFO))
    if status != FACTORED:
        return NONFINITE_MATRIX if status == MATRIX_NONFINITE else SINGULAR
    return OK


def entry(fns, mode, S, I, LU, u, p, t_target, max_steps, y_out):
    """The method's one entry point, compiled once per machine (cosim.jit.method_entry)
    or run as plain Python.  Modes: WHOLE_INTERVAL advances to ``t_target`` within
    ``max_steps`` (else STEP_BUDGET, record unchanged); ONE_STEP takes at most
    ``max_steps`` steps; RESTART solves q'', λ at the current point (:func:`restart`;
    the integrator object does the rest of the restart); NEW_INPUTS shifts the
    history from the held input in the record to ``u`` (:func:`bdf_shift.new_inputs`;
    SHIFT_REFUSED: the integrator object restarts); RESTART_THEN_ADVANCE (new inputs
    written into ``u`` in place, the FMU binary's) shifts, then advances as
    WHOLE_INTERVAL, all or nothing but :func:`advance`'s failure slots (a refused
    shift: RESTART_STATUS + NOT_IN_KERNEL).
    An advance first writes ``u`` into the record's held-input slot.  After a
    successful advance the model's outputs at the new state go into ``y_out`` (the
    outputs kernel, fns[FN_OUTPUTS]) unless it is empty."""
    if mode == RESTART:
        return restart(fns, S, I, u, p)
    if mode == NEW_INPUTS:
        return new_inputs(fns, S, I, u, p)
    S0, I0 = S, I
    if mode == RESTART_THEN_ADVANCE:
        S0, I0 = S.copy(), I.copy()
        if new_inputs(fns, S, I, u, p) != OK:
            return RESTART_STATUS + NOT_IN_KERNEL
    held_input_into(S, I, u)
    status = advance(fns, S, I, LU, u, p, t_target, max_steps, mode != ONE_STEP)
    if status != OK and mode == RESTART_THEN_ADVANCE:
        for j in range(1, len(FAILURE_SLOTS)):   # (the failure slots advance kept, and
            S0[FAILURE_SLOTS[j]] = S[FAILURE_SLOTS[j]]   # the record before the shift: the
        I0[REASON], I0[F_K] = I[REASON], I[F_K]          # caller takes the step again)
        S[:] = S0
        I[:] = I0
    return model_outputs(fns, status, S, N_SCALARS, I[I_N], S[T], u, p, y_out)
