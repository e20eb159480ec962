"""The record of rkc-penalty (:mod:`cosim.integrators.rkc_kernel`): the algorithm's
constants, status and cause codes, entry modes, the slots of ``S`` and ``I`` and
the layout of the arrays in ``S`` and of the work arrays of one advance call.

The record extends the one of dopri5/rk4 (:mod:`.explicit_record`): its slots up to
``N_SCALARS`` (S) and up to ``PIV`` and the pivots (I) are the same, so that the
index-1 form shared by both kernels (:mod:`.index1_kernel`: J, its LU, the error
ratio) reads and writes the same places.  Those names are imported from there,
not defined again (both modules are pasted into one compiled module); the names
below are rkc-penalty's own.
"""
import numpy as np

from .explicit_record import (  # noqa: F401
    ATOL, CAUSE, C_NONE, C_NONFINITE_MATRIX, C_NONFINITE_SOLUTION, C_SINGULAR, DENSE_H, EPS,
    FIRST_ORDER, F_CINFO, F_CT, F_ERR, F_H, F_T, HAS_DENSE, HAS_F, H_FIXED, H_NEXT, I_M, I_N, I_NG,
    I_NY, MAX_REJECTIONS, MAX_STEP, METHOD, NONFINITE_DERIVATIVE, NONFINITE_MATRIX, N_SCALARS,
    N_STATS, OK, ONE_STEP, PIV, RESTART, RESTART_THEN_ADVANCE, RTOL, SINGULAR, STATS, STEP_BUDGET,
    STEP_FAILED, ST_JAC, ST_LU, ST_NEWTON, ST_REJ, ST_RES, ST_STEPS, T, TOO_SMALL, T_PREV,
    UNDERFLOW, WHOLE_INTERVAL)

# -- algorithm constants (rkc.f, Sommeijer, Shampine & Verwer 1997) ---------------
RHO_MAX_ITER = 50        # power-method iterations of one spectral-radius estimate
RHO_SAFETY = 1.2         # ρ = 1.2 σ
STAGE_FACTOR = 1.54      # s = 1 + ⌊√(1 + 1.54 h ρ)⌋
# -- rkc-penalty's own status codes (after explicit_record's) ------------------------
STAGES_EXCEEDED = 8      # fixed step: h ρ needs more than max_stages stages (h ρ in S[F_HRHO])
RHO_FAILED = 9           # the spectral-radius estimate is not finite
# -- rkc-penalty's scalar slots of S (after explicit_record's N_SCALARS) ------------
RHO, CHI, ALPHA, XI, DAMPING, H_LAST, ERR_LAST, F_HRHO = range(N_SCALARS, N_SCALARS + 8)
# CHI: the penalty χ (seed form) or ω (Bayo form); ALPHA: α of the Bayo form, < 0: seed form
RKC_SCALARS = N_SCALARS + 8
RKC_FAILURE_SLOTS = (T, F_T, F_H, F_ERR, F_CT, F_CINFO, F_HRHO)   # advance failed: F_T ← t, these and I[CAUSE] kept
# -- rkc-penalty's slots of I, after the n + m pivots (rkc_ints(n, m) + slot) ----------
X_HAS_EIGVEC, X_STEPS_SINCE_RHO, X_LAST_STAGES, X_MAX_STAGES_USED, X_MAX_STAGES, X_RHO_INTERVAL = range(6)
N_RKC_INTS = 6


def rkc_offsets(n, m, ny):
    """Start of y, y_prev, q'', λ, f_cur, dense data (f0, f1), the power method's
    eigenvector in S, and the total length."""
    o_y = RKC_SCALARS
    o_yp = o_y + ny
    o_qdd = o_yp + ny
    o_lam = o_qdd + n
    o_f = o_lam + m
    o_d = o_f + ny
    o_e = o_d + 2 * ny
    return o_y, o_yp, o_qdd, o_lam, o_f, o_d, o_e, o_e + ny


def rkc_ints(n, m):
    """Start of rkc-penalty's slots of I (after the pivots of J)."""
    return PIV + n + m


def rkc_int_length(n, m):
    return rkc_ints(n, m) + N_RKC_INTS


def rkc_workspace(n, m, ny, s_max):
    """Work arrays of one advance() call: (q, v, M, C_q, Q, γ, rhs, C, C_t — the
    index-1 form's, as explicit_record.workspace —, rhs of eq. 91, f_new, λ_new,
    stages Y (3 × n_y), estimate, f of the power method, its probe point, λ scratch,
    RKC coefficients (s_max × 5), Bayo matrix, its LU, its pivots, f0, y)."""
    return (np.zeros(n), np.zeros(n), np.zeros((n, n)), np.zeros((m, n)), np.zeros(n), np.zeros(m),
            np.zeros(n + m), np.zeros(m), np.zeros(m), np.zeros(n + m), np.zeros(ny), np.zeros(m),
            np.zeros((3, ny)), np.zeros(ny), np.zeros(ny), np.zeros(ny), np.zeros(m),
            np.zeros((s_max, 5)), np.zeros((n, n)), np.zeros((n, n)), np.zeros(n, dtype=np.int64),
            np.zeros(ny), np.zeros(ny))
