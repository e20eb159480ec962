"""The record of the L-stable block methods (:mod:`cosim.integrators.block_kernel`,
seed 004): the algorithm's constants, status codes and entry modes, the slots of
``S`` and ``I``, the layout of the arrays in ``S`` and of the work arrays of one
advance call.  The coefficients (nodes c, B, d, B², B d and the error estimate's
quadrature weights) are computed in Python at set-up
(:mod:`cosim.integrators.block`) and stored in ``S``."""
import numpy as np

EPS = 2.220446049250313e-16

# -- algorithm constants (the values of the object-oriented block.py before) ------
NEWTON_MAX_ITER = 25     # updates per solve
NEWTON_TOL = 1.0         # ‖Δδ‖ below this (the norm is scaled to newton_tol): converged
NEWTON_ERR_TOL = 1.0     # σ/(1−σ)‖Δδ‖ below this: converged
ROUND_OFF_FLOOR = 1e2    # index 3: C(Q)/h² floor, 1e2·ε·(1 + |q|)/h as a velocity change

# -- status codes ----------------------------------------------------------------
OK = 0
NEWTON_FAILED = 1        # "block stage equations did not converge" (reason in I[REASON])
SINGULAR = 2             # the iteration matrix is numerically singular (ratio in S[F_INFO])
NONFINITE_MATRIX = 3     # the iteration matrix has NaN/inf
STEP_UNDERFLOW = 4       # the step no longer moves t (S[F_H] the step)
STEP_BUDGET = 5          # max_steps steps without reaching the target (record restored)
# entry modes (block_kernel.entry)
WHOLE_INTERVAL = 0       # advance to the target within max_steps, else STEP_BUDGET
RESTART = 1              # forget the stage data (dense output): t_prev = t, y_prev = y
ONE_STEP = 2             # at most max_steps steps towards the target
# Newton failure reasons
R_RESIDUAL = 1           # "residual is not finite"
R_UPDATE = 2             # "Newton update is not finite"
R_NO_CONVERGENCE = 3     # "no convergence in 25 iterations"

# -- scalar slots of S -------------------------------------------------------------
T, T_PREV, H, H_LAST, SIGMA, H_JAC, RELAX, RTOL, ATOL, MAX_STEP = range(10)
NEWTON_SCALE = 10        # option newton_tol
STAGE_T0 = 11            # start of the step the stage data belong to (NaN: none)
ERR_EST = 12             # the optional error estimate of the last step
F_T, F_H, F_INFO = 13, 14, 15   # failure: t of the step, its h, pivot ratio
N_SCALARS = 16
FAILURE_SLOTS = (T, F_T, F_H, F_INFO)   # advance failed: F_T ← t, these and I[REASON] kept
# -- slots of I ----------------------------------------------------------------------
I_N, I_M, I_R, INDEX, FIXED, ERROR_EST, NEED_JAC, HAS_FACTOR, CONST_MASS, REASON = range(10)
STATS = 10               # steps, rejected, newton_iterations, residual_evaluations,
N_STATS = 6              # jacobian_evaluations, lu_factorizations (base.STAT_KEYS order)
ST_STEPS, ST_REJ, ST_NEWTON, ST_RES, ST_JAC, ST_LU = range(STATS, STATS + N_STATS)
MATRIX_INTS, MATRIX_FLOATS = (HAS_FACTOR, ST_LU, NEED_JAC), (H_JAC, RELAX)   # matrix_formed's
PIV = STATS + N_STATS


def matrix_size(n, m, r):
    """Unknowns of one stage solve: r accelerations and r multiplier vectors."""
    return r * (n + m)


def offsets(n, m, r):
    """Start of each array in S: y, y_prev, q'', λ, c, d, B (r×r), B² (r×r), B d,
    the quadrature weights b̂, the stage positions and velocities (r×n each), and
    the total length."""
    o_y = N_SCALARS
    o_yp = o_y + 2 * n
    o_qdd = o_yp + 2 * n
    o_lam = o_qdd + n
    o_c = o_lam + m
    o_d = o_c + r
    o_B = o_d + r
    o_B2 = o_B + r * r
    o_Bd = o_B2 + r * r
    o_bh = o_Bd + r
    o_sq = o_bh + r
    o_sv = o_sq + r * n
    return o_y, o_yp, o_qdd, o_lam, o_c, o_d, o_B, o_B2, o_Bd, o_bh, o_sq, o_sv, o_sv + r * n


def int_length(n, m, r):
    """Length of I: the slots above, then the LU pivots."""
    return PIV + matrix_size(n, m, r)


def _block(buf, o, rows, cols):
    """The rows×cols matrix view at buf[o:] and the next offset."""
    return buf[o:o + rows * cols].reshape((rows, cols)), o + rows * cols


def workspace(n, m, r, extra=0):
    """Work arrays of one advance() call (views into one zeroed buffer, so the step
    loop allocates nothing): 0-3 q0, v0, a0, λ0 (the step start), 4 the inverse
    Newton weights, 5 δ, 6 F, 7 the iteration matrix, 8-10 the stages A, V, Q
    (r×n), 11 M, 12 C_q, 13 Q, 14 C, 15 C_t, 16 γ, 17 Q_q, 18 Q_v, 19 (C_qᵀλ)_q,
    20 (M a)_q, 21 K_q, 22 the constraint rows' q-derivative (index 2: (C_q v +
    C_t)_q, index 1: (C_q a − γ)_q), 23 index 1: −γ_v, 24-25 two m-vectors, 26 a
    shifted q or v, 27-29 the difference Jacobian's F0, F1 and shifted δ, 30-32 the
    error estimate's difference, squared inverse weights and y_{k+1}, 33 ``extra``
    floats (advance(): room for the snapshot of S and LU)."""
    N = matrix_size(n, m, r)
    nv = 5 * n + 3 * N + 6 * n
    buf = np.zeros(nv + 3 * N + 6 * m + N * N + 3 * r * n + 6 * n * n + 3 * m * n + extra)
    o = 0
    q0, o = buf[o:o + n], o + n
    v0, o = buf[o:o + n], o + n
    a0, o = buf[o:o + n], o + n
    Qf, o = buf[o:o + n], o + n
    x, o = buf[o:o + n], o + n
    winv, o = buf[o:o + N], o + N
    delta, o = buf[o:o + N], o + N
    F, o = buf[o:o + N], o + N
    e, o = buf[o:o + 2 * n], o + 2 * n
    w2, o = buf[o:o + 2 * n], o + 2 * n
    y1, o = buf[o:o + 2 * n], o + 2 * n
    lam0, o = buf[o:o + m], o + m
    C, o = buf[o:o + m], o + m
    Ct, o = buf[o:o + m], o + m
    g, o = buf[o:o + m], o + m
    g0, o = buf[o:o + m], o + m
    g1, o = buf[o:o + m], o + m
    F0, o = buf[o:o + N], o + N
    F1, o = buf[o:o + N], o + N
    dx, o = buf[o:o + N], o + N
    J, o = _block(buf, o, N, N)
    A, o = _block(buf, o, r, n)
    V, o = _block(buf, o, r, n)
    Q, o = _block(buf, o, r, n)
    M, o = _block(buf, o, n, n)
    Qq, o = _block(buf, o, n, n)
    Qv, o = _block(buf, o, n, n)
    Hm, o = _block(buf, o, n, n)
    Mq, o = _block(buf, o, n, n)
    Kq, o = _block(buf, o, n, n)
    Cq, o = _block(buf, o, m, n)
    Gq, o = _block(buf, o, m, n)
    Gv, o = _block(buf, o, m, n)
    rest = buf[o:o + extra]
    return (q0, v0, a0, lam0, winv, delta, F, J, A, V, Q, M, Cq, Qf, C, Ct, g, Qq, Qv, Hm, Mq, Kq,
            Gq, Gv, g0, g1, x, F0, F1, dx, e, w2, y1, rest)
