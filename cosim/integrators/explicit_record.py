"""The record of dopri5/rk4 (:mod:`cosim.integrators.explicit_kernel`): the
algorithm's constants and the Dormand-Prince tableau, status and cause codes, entry
modes, the slots of ``S`` and ``I``, and the layout of the arrays in ``S`` and of the
work arrays of one advance call."""
import numpy as np

EPS = 2.220446049250313e-16

# -- algorithm constants (the same names and values as explicit.py) --------------
SAFETY = 0.9
MIN_FACTOR = 0.2
MAX_FACTOR = 10.0
MAX_REJECTIONS = 60
PROJECTION_TOL = 1e-6
PROJECTION_MAX_ITER = 8
ORDER = 4                 # err ∝ h^(ORDER+1) for both methods
DOPRI5 = 0
RK4 = 1

# Dormand-Prince 5(4) (Hairer-Nørsett-Wanner I, II.5), as explicit.DP_*
DP_C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0])
DP_A = np.array([
    [0.0, 0.0, 0.0, 0.0, 0.0],
    [1 / 5, 0.0, 0.0, 0.0, 0.0],
    [3 / 40, 9 / 40, 0.0, 0.0, 0.0],
    [44 / 45, -56 / 15, 32 / 9, 0.0, 0.0],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0.0],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
])
DP_B = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
DP_E = np.array([-71 / 57600, 0.0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40])
DP_P = np.array([
    [1.0, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
    [0.0, 0.0, 0.0, 0.0],
    [0.0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
    [0.0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
    [0.0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632],
    [0.0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
    [0.0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423],
])

# -- status codes (returned by step/advance) ---------------------------------------
OK = 0
STEP_FAILED = 1          # fixed step: "explicit step failed" (cause in I[CAUSE])
TOO_SMALL = 2            # "step size became too small" (cause in I[CAUSE])
NONFINITE_DERIVATIVE = 3  # f at the start of a step is not finite
SINGULAR = 4             # J singular at the start of a step (ratio in S[F_CINFO], t in S[F_CT])
NONFINITE_MATRIX = 5     # J has NaN/inf at the start of a step (t in S[F_CT])
UNDERFLOW = 6            # the step no longer moves t
STEP_BUDGET = 7          # max_steps steps without reaching the target (record restored)
# entry modes (cosim.jit's generated entry)
WHOLE_INTERVAL = 0       # advance to the target within max_steps, else STEP_BUDGET
RESTART = 1              # forget the FSAL stage and the dense output
ONE_STEP = 2             # at most max_steps steps towards the target
RESTART_THEN_ADVANCE = 3  # restart (new inputs held), then as WHOLE_INTERVAL
# causes of a rejected / failed trial step (the reference's exception texts)
C_NONE = 0               # error ratio above 1 (in S[F_ERR])
C_NONFINITE_SOLUTION = 1
C_SINGULAR = 2           # J singular at S[F_CT] (pivot ratio S[F_CINFO])
C_NONFINITE_MATRIX = 3   # J has NaN/inf at S[F_CT]
C_POSITION = 4           # position projection did not converge at S[F_CT]
C_VELOCITY = 5           # velocity projection did not converge at S[F_CT]
C_RHS = 6                # rk4: f at the projected point is not finite

# -- scalar slots of S -------------------------------------------------------------
T, T_PREV, H_NEXT, RTOL, ATOL, H_FIXED, MAX_STEP, DENSE_H, F_T, F_H, F_ERR, F_CT, F_CINFO = range(13)
N_SCALARS = 13
FAILURE_SLOTS = (T, F_T, F_H, F_ERR, F_CT, F_CINFO)   # advance failed: F_T ← t, these and I[CAUSE] kept
# -- slots of I ----------------------------------------------------------------------
I_N, I_M, METHOD, HAS_F, HAS_DENSE, PROJ_ITERS, CAUSE = range(7)
STATS = 7                # steps, rejected, newton_iterations, residual_evaluations,
N_STATS = 6              # jacobian_evaluations, lu_factorizations (base.STAT_KEYS order)
ST_STEPS, ST_REJ, ST_NEWTON, ST_RES, ST_JAC, ST_LU = range(STATS, STATS + N_STATS)
REJECTION_SLOTS = (CAUSE, F_ERR, F_H, ST_REJ)   # rejected_attempt's
REJECTION_CONTROL = (MIN_FACTOR, SAFETY, 1.0 / (ORDER + 1), MAX_REJECTIONS)
I_NY = STATS + N_STATS   # length of y: 2n, or the states of a first-order model
I_NG = I_NY + 1          # nonholonomic rows n_g (the last n_g of the I[I_M] multiplier rows)
FIRST_ORDER = I_NG + 1   # 1: x' = f(t, x, u) (n = m = 0)
PIV = FIRST_ORDER + 1


def offsets(n, m, ny):
    """Start of y, y_prev, q'', λ, f_cur, dense data in S, and the total length."""
    o_y = N_SCALARS
    o_yp = o_y + ny
    o_qdd = o_yp + ny
    o_lam = o_qdd + n
    o_f = o_lam + m
    o_d = o_f + ny
    return o_y, o_yp, o_qdd, o_lam, o_f, o_d, o_d + 5 * ny


def int_length(n, m):
    return PIV + n + m


def workspace(n, m, n2):
    """Work arrays of one advance() call: (q, v, M, C_q, Q, γ, rhs, C, C_t, stages K (7 × n_y),
    y0, y_new, y_stage, y_proj, err/tmp, λ, k2, k3, k4, y_full, y_half, f_half, f): views
    into ONE zeroed buffer (in numba each allocation costs about what a small model
    evaluation costs; 23 of them were most of a call's fixed cost)."""
    buf = np.zeros(3 * n + n * n + m * n + 4 * m + (n + m) + 7 * n2 + 12 * n2)
    q, o = buf[0:n], n
    v, o = buf[o:o + n], o + n
    M, o = buf[o:o + n * n].reshape((n, n)), o + n * n
    Cq, o = buf[o:o + m * n].reshape((m, n)), o + m * n
    Q, o = buf[o:o + n], o + n
    g, o = buf[o:o + m], o + m
    rhs, o = buf[o:o + n + m], o + n + m
    C, o = buf[o:o + m], o + m
    Ct, o = buf[o:o + m], o + m
    K, o = buf[o:o + 7 * n2].reshape((7, n2)), o + 7 * n2
    lam = buf[o:o + m]
    o += m
    vy = buf[o:o + 12 * n2].reshape((12, n2))   # the n_y-vectors, one per row
    return (q, v, M, Cq, Q, g, rhs, C, Ct, K, vy[0], vy[1], vy[2], vy[3], vy[4], lam,
            vy[5], vy[6], vy[7], vy[8], vy[9], vy[10], vy[11])
