"""The record of generalized-α (:mod:`cosim.integrators.ga_kernel`): the
algorithm's constants, status codes and entry modes, the slots of ``S`` and ``I``,
the layout of the arrays in ``S`` and of the work arrays of one advance call."""
import numpy as np


EPS = 2.220446049250313e-16

# -- algorithm constants (the same names and values as generalized_alpha.py) --
SAFETY = 0.9
MAX_GROWTH = 2.0
DEADBAND = 1.3
REFRESH_AFTER = 4
TINY_STEP = 1e-5
MAX_REJECTIONS = 30
ROUNDOFF = 10.0
NEWTON_MAX_ITER = 25
NEWTON_TOL = 1e-4
NEWTON_ERR_TOL = 1e-3
# fixed step (no error test): Newton converges on ‖Δx‖ ≤ FIXED_NEWTON_REL·‖x‖ (the
# step's own innovation, whose h² x is the scale of the local error eq. 34; x also
# carries the constraint forces' change) instead of on the user's rtol, floored at
# the rounding of q: the error then falls as h² to ~1e-10 whatever rtol
# (UR5, 1 s, rtol 1e-6: 2.7e-7 at h = 62.5 µs before, the h² line after)
FIXED_NEWTON_REL = 1e-6
GGL_RATE_TOL = 1e-8      # GGL: accept on σ/(1−σ)‖Δδ‖ < this only
GGL_VELOCITY_FLOOR = 0.1   # GGL error test: v weights RTOL·max(|v_k|, this·‖v‖∞) + ATOL
                           # (generalized_alpha_i2.VELOCITY_FLOOR)

# -- status codes ---------------------------------------------------------------
OK = 0
NEWTON_FAILED = 1        # "Newton iteration failed" (reason in I[REASON])
ERROR_TEST_FAILED = 2    # "local error test failed repeatedly" (Ξ in S[F_INFO])
SINGULAR = 3             # iteration matrix numerically singular (ratio in S[F_INFO])
NONFINITE_MATRIX = 4     # iteration matrix has NaN/inf
RESTART_FAILED = 5       # consistent accelerations: singular [[M, C_qᵀ], [C_q, 0]]
STEP_BUDGET = 6          # max_steps steps without reaching the target (record restored)
STEP_UNDERFLOW = 7       # the step no longer moves t (h ≤ 4 ε |t|); S[F_H] the step
# entry modes (entry() below)
WHOLE_INTERVAL = 0       # advance to the target within max_steps, else STEP_BUDGET
RESTART = 1
ONE_STEP = 2             # at most max_steps steps towards the target
RESTART_THEN_ADVANCE = 3  # restart (new inputs held), then as WHOLE_INTERVAL
RESTART_STATUS = 100     # mode 3: a failed restart returns this + its status, nothing changed
# Newton failure reasons
R_RESIDUAL = 1           # "residual is not finite"
R_UPDATE = 2             # "Newton update is not finite"
R_NO_CONVERGENCE = 3     # "no convergence in 25 iterations"

# -- scalar slots of S ---------------------------------------------------------
T, T_PREV, H_NEXT, H_LAST, SIGMA, H_JAC, RELAX, RTOL, ATOL, H_FIXED, MAX_STEP = range(11)
ALPHA_M, ALPHA_F, GAMMA, BETA, ETA, F_H, F_INFO, F_T, ERR_SCALE = range(11, 20)
FAILURE_SLOTS = (T, F_T, F_H, F_INFO)   # advance failed: F_T ← t, these and I[REASON] kept
ERR_TANGENT = 20         # 1.0: option tangent_estimate (floor on the normal part of h² x only)
N_SCALARS = 21
# -- slots of I ----------------------------------------------------------------------
I_N, I_M, NEED_JAC, HAS_FACTOR, PROJECT, CONST_MASS, MINV_EXACT, MINV_DIAG, FIXED, REASON = range(10)
GGL = 10                 # formulation: 0 index 3 (eqs. 32-34), 1 GGL index 2 (eqs. 37-39)
I_NG = 11                # n_g: nonholonomic rows (seed 000 §7)
STATS = 12               # steps, rejected, newton_iterations, residual_evaluations,
N_STATS = 6              # jacobian_evaluations, lu_factorizations (base.STAT_KEYS order)
ST_STEPS, ST_REJ, ST_NEWTON, ST_RES, ST_JAC, ST_LU = range(STATS, STATS + N_STATS)
PIV = STATS + N_STATS


def offsets(n, m):
    """Start of each array in S: y, y_prev, qdd, qdd_prev, lam, a, x_rate,
    lam_rate, minv_diag, minv_exact, and the total length."""
    o_y = N_SCALARS
    o_yp = o_y + 2 * n
    o_qdd = o_yp + 2 * n
    o_qddp = o_qdd + n
    o_lam = o_qddp + n
    o_a = o_lam + m
    o_xr = o_a + n
    o_lr = o_xr + n
    o_mid = o_lr + m
    o_mix = o_mid + n
    return o_y, o_yp, o_qdd, o_qddp, o_lam, o_a, o_xr, o_lr, o_mid, o_mix, o_mix + n


def matrix_size(n, m, ggl, ng=0):
    """Unknowns of one Newton solve: (x, λ, ν) index 3, (x, y, λ, ν, μ) GGL
    (ν: the multipliers of n_g nonholonomic rows, seed 000 §7)."""
    return 2 * (n + m) + ng if ggl else n + m + ng


def int_length(n, m, ggl=0, ng=0):
    """Length of I: the slots above, then the LU pivots."""
    return PIV + matrix_size(n, m, ggl, ng)


def _cut(buf, o, k):
    """The view buf[o:o + k] and the next offset."""
    return buf[o:o + k], o + k


def _block(buf, o, r, c):
    """The r×c matrix view at buf[o:] and the next offset."""
    return buf[o:o + r * c].reshape((r, c)), o + r * c


# -- the work arrays of one advance() call: their index in workspace()'s tuple -----------
# the model terms at a Newton point (q, v, q'', λ, M, Q, C_q, C) and the predictor
# (q0, v0, q''0, λ̂, x̂), Newton scales s (index 3: s_x), weights w, w_v
(W_Q, W_V, W_QDD, W_LAM, W_M, W_FORCES, W_CQ, W_C, W_Q0, W_V0, W_QDD0, W_LAM_HAT, W_X_HAT,
 W_SCALE, W_SPARE, W_WV) = range(16)
# the GGL form's (q'0, ŷ, s_y, s_μ, q', μ, C_t, g0, g1, scratch q + h e_j)
W_QD0, W_Y_HAT, W_SY, W_S_MU, W_QD, W_MU, W_CT, W_G0, W_G1, W_QX = range(16, 26)
# step(): the record at the step start (q, v, q'', a, λ, x_rate, λ_rate), error weights w,
# C_qᵀ, the λ scales, the stall scales, 1/|diag M|, C_q at the start, the innovation x,
# the accepted point (q, v, q'', λ); the velocity projection's C_q M⁻¹ and C_q M⁻¹ C_qᵀ;
# and advance()'s room (the snapshot of S and LU, δ, F, the matrix)
(W_Q_START, W_V_START, W_QDD_START, W_A_START, W_LAM_START, W_X_RATE, W_LAM_RATE, W_WEIGHTS,
 W_CQT, W_LAM_SCALE, W_SCALE_R, W_LAM_SCALE_R, W_MINV_DIAG, W_CQ_START, W_X, W_Q1, W_V1, W_QDD1,
 W_LAM1, W_CM, W_CMC, W_REST) = range(26, 48)


def workspace(n, m, extra=0):
    """Work arrays of one advance() call, so the step loop allocates nothing
    (in numba an allocation costs as much as a small model evaluation): views
    into ONE zeroed buffer, in the order of the W_ names above (W_REST: ``extra``
    floats)."""
    buf = np.zeros(31 * n + 10 * m + n * n + 4 * m * n + m * m + extra)
    vn = buf[:31 * n].reshape((31, n))            # the n-vectors, one per row
    o = 31 * n
    vm = buf[o:o + 10 * m].reshape((10, m))       # the m-vectors
    o += 10 * m
    M, o = _block(buf, o, n, n)
    Cq, o = _block(buf, o, m, n)
    CqT, o = _block(buf, o, n, m)
    Cq0, o = _block(buf, o, m, n)
    CM, o = _block(buf, o, m, n)
    A, o = _block(buf, o, m, m)
    return (vn[0], vn[1], vn[2], vm[0], M, vn[3], Cq, vm[1], vn[4], vn[5], vn[6], vm[2],
            vn[7], vn[8], vn[9], vn[10],
            vn[11], vn[12], vn[13], vn[14], vn[15], vm[3], vm[4], vm[5], vm[6], vn[16],
            vn[17], vn[18], vn[19], vn[20], vm[7], vn[21], vm[8], vn[22], CqT, vn[23], vn[24],
            vn[25], vn[26], Cq0, vn[27], vn[28], vn[29], vn[30], vm[9],
            CM, A, buf[o:o + extra])
