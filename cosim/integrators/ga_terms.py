"""Model terms of generalized-α (:mod:`cosim.integrators.ga_kernel`): the
nonholonomic rows, the diagonal-mass shortcut and the restart (consistent
accelerations, eq. 10: :func:`.kernel_common.restart_accelerations`)."""
import math

import numpy as np

from .dense_lu import lu_factor_inplace, lu_solve_inplace
from .ga_record import (CONST_MASS, GGL, H_LAST, I_M, I_N, I_NG, MINV_DIAG, MINV_EXACT, OK,
    RESTART_FAILED, F_INFO, F_T, T, T_PREV, O_A, O_LAM, O_LR, O_QDD, O_QDDP, O_Y, O_YP, offsets,
    workspace)
from .kernel_common import (FACTORED, FN_MASS,
    FN_NH_FORCE_JACOBIAN, FN_NH_MATRIX, FN_NH_OFFSET, FN_NH_VELOCITY_JACOBIAN,
    restart_accelerations)


# ---------------------------------------------------------------------------------
# nonholonomic rows G = B(q, t) v + b(q, t) = 0 (seed 000 §7, eqs. 93-94), n_g = I[I_NG]
# (no-ops for n_g = 0).  Multipliers: λ of the record (and λ̂, C_qᵀ in the norms)
# hold [λ; ν], m + n_g.  Residual: Bᵀν in the force rows, rows (B v + b)/(γ h) last;
# iteration matrix: (Bᵀν)_q in K, Bᵀ under ν, the G rows B + (β/γ) h (B v + b)_q
# (index 3) or (β/γ)(B v + b)_q under x and B under y (GGL).  Kernels fns[FN_NH_MATRIX] … fns[FN_NH_VELOCITY_JACOBIAN]
# (cosim.models.kernels.NONHOLONOMIC_FIELDS).
# ---------------------------------------------------------------------------------
def n_nonholonomic(I):
    """n_g: the model's nonholonomic rows."""
    return I[I_NG]


def _nh_rows(fns, p, m, q, t, Cq):
    """B(q, t) into rows m: of Cq (zero-filled by the caller)."""
    if Cq.shape[0] == m:
        return
    fns[FN_NH_MATRIX](q, t, p, Cq[m:])


def _nh_residual(fns, p, n, m, t1, q, v, lam_hat, delta, c_nu, r_force, gh, F):
    """F[r_force:r_force + n] += Bᵀν, last n_g rows of F = (B v + b)/(γ h)."""
    ng = lam_hat.shape[0] - m
    if ng == 0:
        return
    r_g = F.shape[0] - ng
    B = np.zeros((ng, n))
    fns[FN_NH_MATRIX](q, t1, p, B)
    b = np.zeros(ng)
    fns[FN_NH_OFFSET](q, t1, p, b)
    for j in range(n):
        s = 0.0
        for k in range(ng):
            s += B[k, j] * (lam_hat[m + k] + delta[c_nu + k])
        F[r_force + j] += s
    inv_gh = 1.0 / gh
    for k in range(ng):
        s = 0.0
        for j in range(n):
            s += B[k, j] * v[j]
        F[r_g + k] = inv_gh * (s + b[k])


def _nh_jacobian(fns, p, n, m, t1, q, v, lam_hat, delta, c_nu, r_force, c_y, cg, K, J):
    """K += (Bᵀν)_q; J[force rows, ν columns] = Bᵀ; last n_g rows: index 3
    (c_y < 0) B + cg (B v + b)_q, GGL cg (B v + b)_q under x and B under y."""
    ng = lam_hat.shape[0] - m
    if ng == 0:
        return
    r_g = J.shape[0] - ng
    nu = np.empty(ng)
    for k in range(ng):
        nu[k] = lam_hat[m + k] + delta[c_nu + k]
    H = np.zeros((n, n))
    fns[FN_NH_FORCE_JACOBIAN](q, nu, t1, p, H)
    for i in range(n):
        for j in range(n):
            K[i, j] += H[i, j]
    B = np.zeros((ng, n))
    fns[FN_NH_MATRIX](q, t1, p, B)
    Jv = np.zeros((ng, n))
    fns[FN_NH_VELOCITY_JACOBIAN](q, v, t1, p, Jv)
    for k in range(ng):
        for j in range(n):
            J[r_force + j, c_nu + k] = B[k, j]
            if c_y < 0:
                J[r_g + k, j] = B[k, j] + cg * Jv[k, j]
            else:
                J[r_g + k, j] = cg * Jv[k, j]
                J[r_g + k, c_y + j] = B[k, j]


# ---------------------------------------------------------------------------------
# model terms
# ---------------------------------------------------------------------------------
def _inv_mass_diag(fns, S, I, q, t, p, o_mid, n, out):
    """1/|diag M| (zeros replaced by max(max|diag M|, 1)) into ``out``, cached
    for constant M: only scales the multiplier part of the Newton norm."""
    if I[MINV_DIAG] == 1:
        out[:] = S[o_mid:o_mid + n]
        return
    M = np.zeros((n, n))
    fns[FN_MASS](q, t, p, M)
    d = np.empty(n)
    dmax = 0.0
    for i in range(n):
        d[i] = abs(M[i, i])
        if d[i] > dmax:
            dmax = d[i]
    fill = max(dmax, 1.0) if n > 0 else 1.0
    for i in range(n):
        out[i] = 1.0 / (d[i] if d[i] > 0.0 else fill)
    if I[CONST_MASS] == 1:
        S[o_mid:o_mid + n] = out
        I[MINV_DIAG] = 1


def _diag_mass_inverse(fns, S, I, q, t, p, o_mix, n):
    """1/diag M when M is constant and diagonal (checked once), else None
    (signalled by returning False in the first slot)."""
    if I[MINV_EXACT] < 0:
        M = np.zeros((n, n))
        fns[FN_MASS](q, t, p, M)
        ok = I[CONST_MASS] == 1
        for i in range(n):
            for j in range(n):
                if i != j and M[i, j] != 0.0:
                    ok = False
            if not M[i, i] > 0.0:
                ok = False
        if ok:
            for i in range(n):
                S[o_mix + i] = 1.0 / M[i, i]
            I[MINV_EXACT] = 1
        else:
            I[MINV_EXACT] = 0
    return I[MINV_EXACT] == 1


def _abt_into(A, B, out):
    """out = A @ B.T as plain loops (as _abt)."""
    ra, c = A.shape
    rb = B.shape[0]
    for i in range(ra):
        for k in range(rb):
            s = 0.0
            for j in range(c):
                s += A[i, j] * B[k, j]
            out[i, k] = s


def _gesv(A, b, piv):
    """Solve A x = b in place (b becomes x); returns LAPACK-style info."""
    info = lu_factor_inplace(A, piv)
    if info != 0:
        return info
    lu_solve_inplace(A, piv, b)
    return 0


def _all_finite(x):
    for i in range(x.shape[0]):
        if not math.isfinite(x[i]):
            return False
    return True


def restart(fns, S, I, u, p):
    """Forget the step history at the current point (inputs changed, event
    jump): q'' and λ from eq. 10 (kernel_common.restart_accelerations), a = q'',
    h_last = 0, λ_rate = 0; the innovation rate x_rate is kept (a fair Newton start).
    Also t_prev = t, y_prev = y (Integrator.restart).  Returns OK or RESTART_FAILED
    (the record unchanged but its failure slots F_T, F_INFO)."""
    n, mh, ng = I[I_N], I[I_M], n_nonholonomic(I)
    m = mh + ng                                 # all multipliers [λ; ν]
    o = offsets(n, m)
    o_y, o_yp, o_qdd, o_qddp, o_lam = o[O_Y], o[O_YP], o[O_QDD], o[O_QDDP], o[O_LAM]
    o_a, o_lr = o[O_A], o[O_LR]
    status = restart_accelerations(fns, S, u, p, n, mh, ng, o_y, o_qdd, o_lam, (T, F_T, F_INFO))
    if status != FACTORED:
        return RESTART_FAILED
    S[o_a:o_a + n] = S[o_qdd:o_qdd + n]
    S[H_LAST] = 0.0
    S[o_lr:o_lr + m] = 0.0
    S[o_qddp:o_qddp + n] = S[o_qdd:o_qdd + n]
    S[T_PREV] = S[T]
    S[o_yp:o_yp + 2 * n] = S[o_y:o_y + 2 * n]
    return OK
