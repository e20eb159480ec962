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

No exceptions and no allocation inside the step loop: work arrays are made
once per :func:`advance` call; every function returns a status code that
the integrator object turns into its error messages.
"""
import math

import numpy as np

from .dense_lu import lu_factor_inplace, lu_solve_inplace, pivot_ratio

EPS = 2.220446049250313e-16

# -- algorithm constants (the same names and values as bdf.py) -----------------
MAX_ORDER = 5
SAFETY_DOWN = 1.3
SAFETY_SAME = 1.2
SAFETY_UP = 1.4
MAX_RATIO = (math.inf, math.inf, 2.6, 1.9, 1.5, 1.2)
SKELBOE = (0.0, 0.0, 0.0, 0.59, 0.65, 0.89)
MIN_REJECT_FACTOR = 0.2
MAX_REJECT_FACTOR = 0.9
MAX_GROWTH = 10.0
NEWTON_CUT = 0.25
MAX_FAILURES = 15
NEWTON_MAX_ITER = 8
WEIGHT_FLOOR = 100.0   # error weights' rounding floor (bdf.WEIGHT_FLOOR)
NEWTON_TOL = 1e-4
NEWTON_ERR_TOL = 1e-3
ROUNDOFF_FLOOR = 1e3
ROWS = MAX_ORDER + 3     # rows of D / Dz, entries of τ
HIST = 256               # (t, k) ring buffer of accepted steps

# -- status codes -----------------------------------------------------------------
OK = 0
NEWTON_FAILED = 1        # "Newton iteration failed" (reason in I[REASON])
ERROR_TEST_FAILED = 2    # "local error test failed repeatedly" (ratio in S[F_INFO])
SINGULAR = 3             # iteration matrix numerically singular (ratio in S[F_INFO])
NONFINITE_MATRIX = 4     # iteration matrix has NaN/inf
STEP_BUDGET = 6          # max_steps steps without reaching the target (record restored,
                         # the t reached in S[F_T])
MIN_STEP = 7             # "step size below the minimum"
UNDERFLOW = 8            # "step size underflow" (h no longer moves t)
NOT_IN_KERNEL = 9        # restart: done by the wrapper (Python reference)
# entry modes (cosim.jit's generated entry)
WHOLE_INTERVAL = 0       # advance to the target within max_steps, else STEP_BUDGET
RESTART = 1              # (done by the integrator object: NOT_IN_KERNEL)
ONE_STEP = 2             # at most max_steps steps towards the target
RESTART_THEN_ADVANCE = 3  # (as RESTART: RESTART_STATUS + NOT_IN_KERNEL, nothing changed)
RESTART_STATUS = 100
# Newton failure reasons
R_RESIDUAL = 1           # "residual is not finite"
R_UPDATE = 2             # "Newton update is not finite"
R_NO_CONVERGENCE = 3     # "no convergence in 8 iterations"

# -- scalar slots of S --------------------------------------------------------------
T, T_PREV, H_NEXT, H, SIGMA, H_JAC, RELAX, RTOL, ATOL, H_FIXED, MAX_STEP = range(11)
F_T, F_H, F_HHAT, F_INFO = range(11, 15)
N_SCALARS = 16
# -- slots of I -------------------------------------------------------------------------
(I_N, I_M, NEED_JAC, HAS_FACTOR, HAS_J, K_NEXT, ORDER, K_USED, VALID, N_STEPS, MAX_ORD,
 REUSE, VEL_ERROR, POS_WEIGHTS, CONST_MASS, REASON, F_K, NEWTON_FAILS, ERROR_FAILS,
 HIST_COUNT, I_NS, VARIANT, ERR_RMS) = range(23)
INDEX3, INDEX2, INDEX1 = 0, 1, 2   # I[VARIANT]: "bdf" (eqs. 73-80), "bdf-i2" (GGL, eqs. 81-84),
                                   # "bdf-i1" (q, v, a index-1 variables, the system after eq. 84)
VE_OFF, VE_ON, VE_SCALED = 0, 1, 2   # I[VEL_ERROR]: velocity_error False / True / "scaled"
STATS = 23               # base.STAT_KEYS order
N_STATS = 6
ST_STEPS, ST_REJ, ST_NEWTON, ST_RES, ST_JAC, ST_LU = range(STATS, STATS + N_STATS)
ORDER_COUNTS = STATS + N_STATS        # MAX_ORDER + 1 counters (index = order)
PIV = ORDER_COUNTS + MAX_ORDER + 1


def system_size(variant, n, m):
    """Unknowns of the Newton system: (δ, λ̂) for index 3, (δ, ĥε, ĥ²λ, ĥμ) for
    index 2, (δ, ĥε, ĥ²Δa, ĥ²Δλ, ĥ²τ, ĥμ) for index 1."""
    if variant == INDEX3:
        return n + m
    if variant == INDEX2:
        return 2 * n + 2 * m
    return 3 * n + 3 * m


def offsets(n, m, ns):
    """Start of each array in S: y, y_prev, qdd, lam, D, Dz, tau, J (ns²), hist_t,
    hist_k, and the total length."""
    o_y = N_SCALARS
    o_yp = o_y + 2 * n
    o_qdd = o_yp + 2 * n
    o_lam = o_qdd + n
    o_D = o_lam + m
    o_Dz = o_D + ROWS * 2 * n
    o_tau = o_Dz + ROWS * (n + m)
    o_J = o_tau + ROWS
    o_ht = o_J + ns * ns
    o_hk = o_ht + HIST
    return o_y, o_yp, o_qdd, o_lam, o_D, o_Dz, o_tau, o_J, o_ht, o_hk, o_hk + HIST


def state_view(S, I):
    """(q, v, t) of the record, as views (the compiled entry's outputs)."""
    n = I[I_N]
    return S[N_SCALARS:N_SCALARS + n], S[N_SCALARS + n:N_SCALARS + 2 * n], S[T]


def int_length(n, m, ns):
    return PIV + ns


# ---------------------------------------------------------------------------------
# work arrays (made once per advance call)
# ---------------------------------------------------------------------------------
def workspace(n, m, ns):
    """1-D float work (slots of :func:`_wslots`), the n×n / m×n / ns×ns matrices."""
    N = ns
    vec = np.zeros(28 * n + 18 * m + 4 * N + 8 * ROWS)
    M = np.zeros((n, n))
    Qq = np.zeros((n, n))
    Qv = np.zeros((n, n))
    Hm = np.zeros((n, n))
    Mq = np.zeros((n, n))
    Cq = np.zeros((m, n))
    Jw = np.zeros((N, N))
    return vec, M, Qq, Qv, Hm, Mq, Cq, Jw


# offsets in the 1-D work vector
def _wslots(n, m, ns):
    N = n + m
    o = 0
    winv = o;   o += 2 * n     # 1/W (eq. 35), velocity part = position part by default
    ypred = o;  o += 2 * n
    ydpred = o; o += 2 * n
    zpred = o;  o += N
    a0 = o;     o += n
    lhat = o;   o += m
    w2 = o;     o += 3 * n
    q = o;      o += n
    v = o;      o += n
    a = o;      o += n
    lam = o;    o += m
    Q = o;      o += n
    delta = o;  o += ns
    F = o;      o += ns
    dy = o;     o += 2 * n
    qdd1 = o;   o += n
    lam1 = o;   o += m
    col = o;    o += 2 * n * 3
    rhs = o;    o += ns
    tau = o;    o += ROWS
    omega = o;  o += ROWS
    c = o;      o += ROWS
    ce = o;     o += ROWS
    ct = o;     o += m
    g0 = o;     o += m
    g1 = o;     o += m
    qx = o;     o += n
    mu = o;     o += m
    tq = o;     o += m
    vx = o;     o += n
    return (winv, ypred, ydpred, zpred, a0, lhat, w2, q, v, a, lam, Q, delta, F, dy, qdd1,
            lam1, col, rhs, tau, omega, c, ce, ct, g0, g1, qx, mu, tq, vx, o)


# positions in the tuple of :func:`_wslots`
(WS_WINV, WS_YPRED, WS_YDPRED, WS_ZPRED, WS_A0, WS_LHAT, WS_W2, WS_Q, WS_V, WS_A, WS_LAM, WS_QF,
 WS_DELTA, WS_F, WS_DY, WS_QDD1, WS_LAM1, WS_COL, WS_RHS, WS_TAU, WS_OMEGA, WS_CC, WS_CE,
 WS_CT, WS_G0, WS_G1, WS_QX, WS_MU, WS_TQ, WS_VX) = range(30)


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
    fns[0](qv, t1, p, M)
    fns[1](qv, vv, t1, u, p, W[o_Q:o_Q + n])


def _constraint_jacobian(fns, p, n, m, t1, qv, Cq):
    """C_q(q) into Cq."""
    for k in range(m):
        for j in range(n):
            Cq[k, j] = 0.0
    fns[3](qv, t1, p, Cq)


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
    fns[2](qv, t1, p, W[out:out + m])


def _gamma_at(fns, p, m, t1, qv, vv, W, out):
    """γ(q, v) into W[out:out+m]."""
    for k in range(m):
        W[out + k] = 0.0
    fns[5](qv, vv, t1, p, W[out:out + m])


def _cqv(fns, p, n, m, t1, qv, vv, Cq, W, ct, out):
    """C_q(q) v + C_t(q) into W[out:out+m] (Cq and W[ct] overwritten)."""
    _constraint_jacobian(fns, p, n, m, t1, qv, Cq)
    for k in range(m):
        W[ct + k] = 0.0
    fns[4](qv, t1, p, W[ct:ct + m])
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
    fns[6](qv, vv, t1, u, p, Qq, Qv)
    if m > 0:
        fns[7](qv, W[lam:lam + m], t1, p, Hm)
    if not const_mass:
        fns[8](qv, av, t1, p, Mq)
    fns[0](qv, t1, p, M)


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
    fns[7](qv, W[x:x + m], t1, p, Hm)
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


def _newton(fns, S, I, LU, p, u, n, m, t1, hhat, h2, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw):
    """Algorithm 2 as newton.QuasiNewton.solve (prior_rate, 8 iterations) in the
    RMS norm of BDFIndex3._solve / BDFIndex2._solve.  Returns (converged,
    status); δ in W[delta]."""
    N = I[I_NS]
    index3 = I[VARIANT] == INDEX3
    variant = I[VARIANT]
    nw = (variant + 1) * n                # entries of the update the norm weighs (q; q, v; q, v, a)
    delta, F, w2 = ws[WS_DELTA], ws[WS_F], ws[WS_W2]
    piv = I[PIV:PIV + N]
    const_mass = I[CONST_MASS] == 1
    o_J = offsets(n, m, N)[7]
    old_norm = -1.0
    n_j = 0
    err = math.inf
    sigma = S[SIGMA]
    for i in range(N):
        W[delta + i] = 0.0
    for it in range(1, NEWTON_MAX_ITER + 1):
        if I[NEED_JAC] == 1 or I[HAS_FACTOR] == 0:
            if index3:
                _jacobian(fns, p, u, n, m, t1, hhat, h2, const_mass, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw)
            elif variant == INDEX2:
                _jacobian2(fns, p, u, n, m, t1, hhat, h2, const_mass, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw)
            else:
                _jacobian1(fns, p, u, n, m, t1, hhat, h2, const_mass, W, ws, M, Qq, Qv, Hm, Mq, Cq, Jw)
            I[ST_JAC] += 1
            for i in range(N):
                for j in range(N):
                    S[o_J + i * N + j] = Jw[i, j]
            I[HAS_J] = 1
            for i in range(N):
                for j in range(N):
                    if not math.isfinite(Jw[i, j]):
                        return False, NONFINITE_MATRIX
            for i in range(N):
                for j in range(N):
                    LU[i, j] = Jw[i, j]
            info = lu_factor_inplace(LU, piv)
            ratio = 0.0 if info != 0 else pivot_ratio(LU)
            if ratio <= 1e-14:
                I[HAS_FACTOR] = 0
                S[F_INFO] = ratio
                return False, SINGULAR
            I[HAS_FACTOR] = 1
            I[ST_LU] += 1
            S[H_JAC] = hhat
            I[NEED_JAC] = 0
            S[RELAX] = 1.0
            n_j = 0
            old_norm = -1.0
        if index3:
            _residual(fns, p, u, n, m, t1, hhat, h2, W, ws, M, Cq)
        elif variant == INDEX2:
            _residual2(fns, p, u, n, m, t1, hhat, h2, W, ws, M, Cq)
        else:
            _residual1(fns, p, u, n, m, t1, hhat, h2, W, ws, M, Cq)
        I[ST_RES] += 1
        I[ST_NEWTON] += 1
        finite = True
        for i in range(N):
            if not math.isfinite(W[F + i]):
                finite = False
        if not finite:
            I[NEED_JAC] = 1
            S[SIGMA] = sigma
            I[REASON] = R_RESIDUAL
            return False, OK
        lu_solve_inplace(LU, piv, W[F:F + N])
        relax = S[RELAX]
        s2 = 0.0
        for i in range(N):
            dd = W[F + i] * -relax
            W[delta + i] += dd
            if i < nw:
                s2 += dd * dd * W[w2 + i]
        n_j += 1
        dnorm = math.sqrt(s2)
        if not math.isfinite(dnorm):
            I[NEED_JAC] = 1
            I[REASON] = R_UPDATE
            return False, OK
        if dnorm < NEWTON_TOL:
            S[SIGMA] = sigma
            return True, OK
        if it == 1 and dnorm < 1.0 and 0.0 < sigma < 1.0 \
                and sigma / (1.0 - sigma) * dnorm < NEWTON_ERR_TOL:
            S[SIGMA] = sigma ** 0.8
            return True, OK
        if n_j == 1 or old_norm < 0.0:
            sigma = 0.0
        elif dnorm > 0.9 * old_norm:
            I[NEED_JAC] = 1
        else:
            sigma = max(0.5 * sigma, dnorm / old_norm)
            err = sigma / (1.0 - sigma) * dnorm
            if err < NEWTON_ERR_TOL:
                S[SIGMA] = sigma
                return True, OK
            if n_j >= 5 or err * sigma ** (5 - n_j) > 0.5:
                I[NEED_JAC] = 1
        old_norm = dnorm
    S[SIGMA] = sigma
    I[NEED_JAC] = 1
    if err <= 0.33:
        return True, OK
    I[REASON] = R_NO_CONVERGENCE
    return False, OK


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


def _clamp(S, h, t_limit):
    """Integrator._clamp_step: (h, lands, status)."""
    h = min(h, S[MAX_STEP])
    t = S[T]
    remaining = t_limit - t
    if not h > 4.0 * EPS * abs(t) and h < remaining:
        return h, False, UNDERFLOW
    if S[H_FIXED] > 0.0:
        if h >= remaining - 1e-6 * h:
            return remaining, True, OK
        return h, False, OK
    if h >= remaining or remaining - h < 0.25 * h:
        return remaining, True, OK
    return h, False, OK


# ---------------------------------------------------------------------------------
# one step (BDF._step_inner, BDFIndex3._solve, BDF._accept)
# ---------------------------------------------------------------------------------
def step(fns, S, I, LU, u, p, t_limit, work):
    """One accepted step ending at or before ``t_limit``.  Returns a status
    code; on failure S[F_H] (and S[F_HHAT], I[F_K]) describe the attempt."""
    n, m = I[I_N], I[I_M]
    N = n + m
    ns = I[I_NS]
    index3 = I[VARIANT] == INDEX3
    n2 = 2 * n
    W, M, Qq, Qv, Hm, Mq, Cq, Jw = work
    ws = _wslots(n, m, ns)
    winv, ypred, ydpred, zpred, a0, lhat = ws[WS_WINV], ws[WS_YPRED], ws[WS_YDPRED], ws[WS_ZPRED], \
        ws[WS_A0], ws[WS_LHAT]
    w2, delta, dy, qdd1, lam1, col = ws[WS_W2], ws[WS_DELTA], ws[WS_DY], ws[WS_QDD1], ws[WS_LAM1], \
        ws[WS_COL]
    tau, omega, c, ce = ws[WS_TAU], ws[WS_OMEGA], ws[WS_CC], ws[WS_CE]
    o_y, o_yp, o_qdd, o_lam, o_D, o_Dz, o_tau, o_J, o_ht, o_hk, _ = offsets(n, m, ns)
    Jm = S[o_J:o_J + ns * ns]
    fixed = S[H_FIXED] > 0.0
    ve = I[VEL_ERROR]
    velocity_error = ve != VE_OFF
    velocity_scaled = ve == VE_SCALED
    k = I[K_NEXT]
    h_prop = S[H_NEXT]
    t = S[T]
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
    failures = 0
    error_failures = 0
    h = h_prop
    lands = False
    hhat = h
    h_base = h
    e_k = s_k = e_up = s_up = 0.0
    e_dn = s_dn = math.inf
    h_k = h_dn = 0.0
    decr = False
    has_up = False
    while True:
        h, lands, status = _clamp(S, h_prop, t_limit)
        if status != OK:
            S[F_H] = h
            return status
        h_min = 4.0 * EPS * max(abs(t), abs(t_limit), 1e-300)
        if not h > h_min:
            S[F_H] = h
            return MIN_STEP
        # coefficients, eqs. 58, 64, 66
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
        hhat = h / W[c + k - 1]
        h2 = hhat * hhat
        # predictor, eq. 69, and the (q'', λ) predictor
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
        if I[REUSE] == 0:
            I[NEED_JAC] = 1                       # see BDFIndex3.reuse_matrix
            S[RELAX] = 1.0
        if I[NEED_JAC] == 0:
            # §5.1 reuse test on ĥ (QuasiNewton.plan_reuse)
            if I[HAS_FACTOR] == 0 or S[H_JAC] < 0.0:
                I[NEED_JAC] = 1
            else:
                r = hhat / S[H_JAC]
                if S[SIGMA] * r + abs(r - 1.0) <= 1.0 / 3.0:
                    I[NEED_JAC] = 0
                else:
                    I[NEED_JAC] = 1
            S[RELAX] = 1.0
        if index3:
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
        t1 = t + h
        converged, status = _newton(fns, S, I, LU, p, u, n, m, t1, hhat, h2, W, ws,
                                    M, Qq, Qv, Hm, Mq, Cq, Jw)
        if status != OK:
            S[F_H] = h
            S[F_HHAT] = hhat
            I[F_K] = k
            return status
        if not converged:
            I[ST_REJ] += 1
            I[NEWTON_FAILS] += 1
            failures += 1
            if failures > MAX_FAILURES:
                S[F_H] = h
                return NEWTON_FAILED
            I[NEED_JAC] = 1
            S[RELAX] = 1.0
            h_prop = NEWTON_CUT * h
            if failures >= 3:
                k = 1
            continue
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
        # error estimates of orders k−1, k, k+1 (Algorithm 4 f)
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
        e_k, e_dn, e_up = _error_norms(S, I, LU, n, m, W, ws, Jm, k, has_up, velocity_error,
                                       velocity_scaled, hhat)
        # order tests on the velocity estimate times ĥ (BDFIndex3 only)
        if index3 and velocity_error and not velocity_scaled:
            s_k, s_dn, s_up = _error_norms(S, I, LU, n, m, W, ws, Jm, k, has_up, True, True, hhat)
        elif velocity_error:
            s_k, s_dn, s_up = e_k, e_dn, e_up
        else:
            s_k, s_dn, s_up = _error_norms(S, I, LU, n, m, W, ws, Jm, k, has_up, True,
                                           velocity_scaled, hhat)
        err = W[ce + k] * e_k
        h_base = h_prop if lands and h < h_prop else h
        h_k = _h_order(h, k, W[ce + k] * e_k, SAFETY_SAME, h_base)
        h_dn = _h_order(h, k - 1, W[ce + k - 1] * e_dn, SAFETY_DOWN, h_base) if k > 1 else 0.0
        decr = k >= 3 and s_k > SKELBOE[k] * s_dn            # Table 2 (Skelboe)
        if fixed or err <= 1.0:
            break
        # rejected (Algorithm 4 h i)
        I[ST_REJ] += 1
        I[ERROR_FAILS] += 1
        failures += 1
        error_failures += 1
        if failures > MAX_FAILURES:
            S[F_H] = h
            S[F_INFO] = err
            return ERROR_TEST_FAILED
        if decr:
            k = k - 1
            h_new = h_dn
        else:
            h_new = h_k
        if error_failures >= 2:
            h_new *= 0.5
        if error_failures >= 3:
            k = 1
        h_prop = min(max(h_new, MIN_REJECT_FACTOR * h), MAX_REJECT_FACTOR * h)
    _accept(S, I, n, m, W, ws, h, h_base, lands, t_limit, k, e_k, s_k, s_dn, e_up, s_up,
            h_k, h_dn, decr, fixed, failures > 0)
    return OK


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
    o_y, o_yp, o_qdd, o_lam, o_D, o_Dz, o_tau, o_J, o_ht, o_hk, _ = offsets(n, m, I[I_NS])
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
    work = workspace(n, m, I[I_NS])
    count = 0
    while S[T] < t_target and count < max_steps:
        status = step(fns, S, I, LU, u, p, t_target, work)
        if status != OK:
            t_fail, h_fail, hh, info, reason, kf = S[T], S[F_H], S[F_HHAT], S[F_INFO], I[REASON], I[F_K]
            S[:] = S0
            I[:] = I0
            LU[:, :] = LU0
            S[F_T], S[F_H], S[F_HHAT], S[F_INFO], I[REASON], I[F_K] = t_fail, h_fail, hh, info, reason, kf
            return status
        count += 1
    if whole and S[T] < t_target:
        t_fail = S[T]
        S[:] = S0
        I[:] = I0
        LU[:, :] = LU0
        S[F_T] = t_fail
        return STEP_BUDGET
    return OK


def entry(fns, mode, S, I, LU, u, p, t_target, max_steps, y_out):
    """The method's one entry point, compiled once per machine (cosim.jit.method_entry)
    or run as plain Python.  Modes: WHOLE_INTERVAL advances to ``t_target`` within
    ``max_steps`` (else STEP_BUDGET, record unchanged); ONE_STEP takes at most
    ``max_steps`` steps.  The restart modes are not in the kernel (the integrator
    object restarts).  After a successful advance the model's outputs at the new
    state go into ``y_out`` (the outputs kernel, fns[9]) unless it is empty."""
    if mode == RESTART:
        return NOT_IN_KERNEL
    if mode == RESTART_THEN_ADVANCE:
        return RESTART_STATUS + NOT_IN_KERNEL
    status = advance(fns, S, I, LU, u, p, t_target, max_steps, mode != ONE_STEP)
    if status == OK and y_out.shape[0] > 0:
        y_out[:] = 0.0
        n = I[I_N]
        fns[9](S[N_SCALARS:N_SCALARS + n], S[N_SCALARS + n:N_SCALARS + 2 * n], S[T], u, p, y_out)
    return status
