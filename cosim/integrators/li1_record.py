"""The record of local-index1 (:mod:`cosim.integrators.li1_kernel`): the algorithm's
constants, status and cause codes, entry modes, the slots of ``S`` and ``I``, and the
layout of the arrays in ``S`` and of the work arrays of one advance call."""
import numpy as np

# -- algorithm constants (as the object-oriented implementation had them) ----------
SAFETY = 0.9
MIN_FACTOR = 0.2
MAX_FACTOR = 5.0
MAX_REJECTIONS = 60
RANK_TOL = 1e-12          # null-space basis: |pivot| ≤ RANK_TOL·max: C_q rank deficient
NEWTON_MAX_ITER = 25      # updates per solve (plain Algorithm 2)
NEWTON_TOL = 1e-4
NEWTON_ERR_TOL = 1e-3
NULLSPACE_QR = 0          # option nullspace
NULLSPACE_GAUSS = 1
ITERATION_SEED = 0        # option iteration
ITERATION_NEWTON = 1

# -- status codes (returned by step/advance) ---------------------------------------
OK = 0
STEP_FAILED = 1           # fixed step: "trapezoidal step failed" (cause in I[CAUSE])
TOO_SMALL = 2             # "step size became too small" (cause in I[CAUSE])
UNDERFLOW = 3             # the step no longer moves t
STEP_BUDGET = 4           # max_steps steps without reaching the target (record restored)
ACC_SINGULAR = 5          # restart: [[M, C_qᵀ], [C_q, 0]] singular at S[F_CT] (ratio S[F_CINFO])
ACC_NONFINITE = 6         # restart: that matrix has NaN/inf at S[F_CT]
# entry modes (cosim.jit's generated entry)
WHOLE_INTERVAL = 0        # advance to the target within max_steps, else STEP_BUDGET
RESTART = 1               # q'', λ at the current point from eq. 2.5; no dense output
ONE_STEP = 2              # at most max_steps steps towards the target
# causes of a rejected / failed trial step (the reference's exception texts)
C_NONE = 0                # error ratio above 1 (in S[F_ERR])
C_RESIDUAL = 1            # "residual is not finite"
C_UPDATE = 2              # "Newton update is not finite"
C_NO_CONVERGENCE = 3      # "no convergence in NEWTON_MAX_ITER iterations"
C_ACC_SINGULAR = 4        # [[M, C_qᵀ], [C_q, 0]] singular at S[F_CT] (ratio S[F_CINFO])
C_ACC_NONFINITE = 5       # [[M, C_qᵀ], [C_q, 0]] has NaN/inf at S[F_CT]
C_ITER_SINGULAR = 6       # iteration matrix (eq. 4.5) singular at S[F_CT], h = S[F_CH]
C_ITER_NONFINITE = 7      # iteration matrix has NaN/inf at S[F_CT], h = S[F_CH]
C_RANK_QR = 8             # C_q rank deficient (QR null-space basis)
C_RANK_GAUSS = 9          # C_q rank deficient (Gauss null-space basis)

# -- scalar slots of S -------------------------------------------------------------
(T, T_PREV, H_NEXT, RTOL, ATOL, H_FIXED, MAX_STEP, SIGMA, H_JAC, RELAX,
 F_T, F_H, F_ERR, F_CT, F_CH, F_CINFO) = range(16)
N_SCALARS = 16
FAILURE_SLOTS = (T, F_T, F_H, F_ERR, F_CT, F_CH, F_CINFO)   # advance failed: F_T ← t, these and I[CAUSE] kept
# -- slots of I ----------------------------------------------------------------------
I_N, I_M, I_NG, NULLSPACE, ITERATION, HAS_DENSE, HAS_FACTOR, NEED_JAC, CAUSE = range(9)
STATS = 9                 # steps, rejected, newton_iterations, residual_evaluations,
N_STATS = 6               # jacobian_evaluations, lu_factorizations (base.STAT_KEYS order)
ST_STEPS, ST_REJ, ST_NEWTON, ST_RES, ST_JAC, ST_LU = range(STATS, STATS + N_STATS)
MATRIX_INTS, MATRIX_FLOATS = (HAS_FACTOR, ST_LU, NEED_JAC), (H_JAC, RELAX)   # matrix_formed's
REJECTION_SLOTS = (CAUSE, F_ERR, F_H, ST_REJ)   # rejected_attempt's
REJECTION_CONTROL = (MIN_FACTOR, SAFETY, 1.0 / 3.0, MAX_REJECTIONS)
PIV = STATS + N_STATS     # pivots of the iteration matrix's LU (2n)


def offsets(n, m, g):
    """Start of y, y_prev, q'', λ (m + g: holonomic, then nonholonomic rows), the dense
    output slopes g0 = [v; q''] at t_prev and g1 at t, and the total length of S."""
    o_y = N_SCALARS
    o_yp = o_y + 2 * n
    o_qdd = o_yp + 2 * n
    o_lam = o_qdd + n
    o_g0 = o_lam + m + g
    o_g1 = o_g0 + 2 * n
    return o_y, o_yp, o_qdd, o_lam, o_g0, o_g1, o_g1 + 2 * n


def int_length(n):
    return PIV + 2 * n


def workspace(n, m, g):
    """Work arrays of one advance() call:
    0-5:   q, v, Q (n), M (n×n), Cq ((m+g)×n: C_q then B), K ([[M, C_qᵀ, Bᵀ], ...], n+m+g square),
    6-9:   rhs (n+m+g), kpiv (int, n+m+g), C / γ (m+g), C_t / b (m+g),
    10-15: null-space work: A (n×n), V (n×n), τ (n), cols (int, n); A_qᵀ = VᵀM, A_vᵀ (n×n),
    16-22: qk, vk, ak, qe, ve, ae, a (n),
    23-27: x_pred, δ, F, (spare), inverse error weights (2n),
    28-33: J (2n×2n), fd: f0, f1 (m+g), a0 (n), ∂ψ/∂q, ∂ψ/∂v (n×n),
    34-35: λ (m+g), ∂[C_q v + C_t; B v + b]/∂q ((m+g)×n)."""
    k = n + m + g
    r = m + g
    return (np.zeros(n), np.zeros(n), np.zeros(n), np.zeros((n, n)), np.zeros((r, n)),
            np.zeros((k, k)),
            np.zeros(k), np.zeros(k, dtype=np.int64), np.zeros(r), np.zeros(r),
            np.zeros((n, n)), np.zeros((n, n)), np.zeros(n), np.zeros(n, dtype=np.int64),
            np.zeros((n, n)),
            np.zeros((n, n)),
            np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n),
            np.zeros(n),
            np.zeros(2 * n), np.zeros(2 * n), np.zeros(2 * n), np.zeros(2 * n), np.zeros(2 * n),
            np.zeros((2 * n, 2 * n)), np.zeros(r), np.zeros(r), np.zeros(n), np.zeros((n, n)),
            np.zeros((n, n)),
            np.zeros(r), np.zeros((r, n)))
