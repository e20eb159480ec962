"""The record of the BDF family (:mod:`cosim.integrators.bdf_kernel`): the
algorithm's constants, status codes and entry modes, the slots of ``S`` and ``I``,
the layout of the arrays in ``S`` and of the work arrays of one advance call."""
import math

import numpy as np

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
# index 3's Newton norm weighs δq through the velocity it implies, δq/ĥ, with the
# velocity weights floored at ROUNDOFF_FLOOR·EPS·max|q|/ĥ: a δq of round-off size
# (≈ EPS·|q|) must then weigh well below NEWTON_TOL, or Newton never converges where
# the velocity weights are small (v ≈ 0 with a small atol: Andrews started at rest
# with the torque off failed at t = 0 with h → 1e-16); 10 / NEWTON_TOL leaves a margin of 10
ROUNDOFF_FLOOR = 10.0 / NEWTON_TOL
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
FAILURE_SLOTS = (T, F_T, F_H, F_HHAT, F_INFO)   # advance failed: F_T ← t, these and I[REASON] kept
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



def int_length(n, m, ns):
    return PIV + ns


# ---------------------------------------------------------------------------------
# work arrays (made once per advance call)
# ---------------------------------------------------------------------------------
def workspace(n, m, ns):
    """1-D float work (slots of :func:`wslots`), the n×n / m×n / ns×ns matrices."""
    N = ns
    nv = 28 * n + 18 * m + 4 * N + 8 * ROWS
    nn = n * n
    buf = np.zeros(nv + 5 * nn + m * n + N * N)   # one allocation, views into it
    vec = buf[:nv]
    mats = buf[nv:nv + 5 * nn].reshape((5, n, n))
    o = nv + 5 * nn
    Cq = buf[o:o + m * n].reshape((m, n))
    Jw = buf[o + m * n:o + m * n + N * N].reshape((N, N))
    return vec, mats[0], mats[1], mats[2], mats[3], mats[4], Cq, Jw


# offsets in the 1-D work vector
def wslots(n, m, ns):
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


# positions in the tuple of :func:`wslots`
(WS_WINV, WS_YPRED, WS_YDPRED, WS_ZPRED, WS_A0, WS_LHAT, WS_W2, WS_Q, WS_V, WS_A, WS_LAM, WS_QF,
 WS_DELTA, WS_F, WS_DY, WS_QDD1, WS_LAM1, WS_COL, WS_RHS, WS_TAU, WS_OMEGA, WS_CC, WS_CE,
 WS_CT, WS_G0, WS_G1, WS_QX, WS_MU, WS_TQ, WS_VX) = range(30)
