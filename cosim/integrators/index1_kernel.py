"""The index-1 form of a multibody model (seed 000 eq. 88) with the matrix J of
eq. 89, for kernels: forming and factorising J (nonholonomic rows B of eq. 93
appended), the right-hand side [Q; γ; γ_G], the evaluation y' = [v; q''] with λ,
(the error ratio is :func:`.kernel_common.error_ratio`).  Written once for the two
kernels that use it: :mod:`.explicit_kernel` (dopri5/rk4) and :mod:`.rkc_kernel`
(rkc-penalty, whose penalty right-hand side of eqs. 91-92 uses the same factor
of J); pasted into both compiled methods (``helpers`` of
:func:`cosim.jit.method_entry`, after :mod:`.explicit_record`, whose slots and
codes these functions use — rkc_record shares them; the pivots of J, which follow
each method's own slots of I, start where the argument ``piv`` says).
"""
from .kernel_common import (FACTORED, FN_FORCES, FN_NH_MATRIX, FN_NH_OFFSET, MATRIX_NONFINITE, all_finite,
    augmented_factor, augmented_rhs, consistent_accelerations)
from .explicit_record import (C_NONE, C_NONFINITE_MATRIX, C_SINGULAR, F_CINFO, F_CT, F_H, FIRST_ORDER,
                              HAS_F, I_NG, NONFINITE_DERIVATIVE, NONFINITE_MATRIX, OK, SINGULAR,
                              ST_LU, ST_RES, W_CQ, W_FORCES, W_GAMMA, W_M, W_Q, W_RHS, W_V)


# ---------------------------------------------------------------------------------
# nonholonomic rows G = B(q, t) v + b(q, t) = 0 (seed 000 §7, eq. 93).  Record:
# I[I_M] = m + n_g (all multiplier rows; λ in S holds both), I[I_NG] = n_g.
# ---------------------------------------------------------------------------------
def n_nonholonomic(I):
    """n_g: the model's nonholonomic rows."""
    return I[I_NG]


def _nh_rows(fns, p, mh, q, t, Cq):
    """B(q, t) into rows mh: of Cq (zero-filled by the caller)."""
    if Cq.shape[0] > mh:
        fns[FN_NH_MATRIX](q, t, p, Cq[mh:])


def _nh_offset(fns, p, mh, q, t, Ct):
    """b(q, t) into Ct[mh:] (zero-filled by the caller)."""
    if Ct.shape[0] > mh:
        fns[FN_NH_OFFSET](q, t, p, Ct[mh:])


# ---------------------------------------------------------------------------------
# J (eq. 89), the right-hand side and y' = [v; q''] (eq. 88)
# ---------------------------------------------------------------------------------
def _factorize(fns, S, I, LU, piv, p, n, m, q, t, M, Cq):
    """LU of J(q, t) = [[M, C_qᵀ], [C_q, 0]] (eq. 89; with nonholonomic rows
    [[M, C_qᵀ, Bᵀ], [C_q, 0, 0], [B, 0, 0]]: :func:`.kernel_common.augmented_factor`) into
    LU and its pivots into I from ``piv`` (the record's PIV); returns a cause code."""
    ng = n_nonholonomic(I)
    status, ratio = augmented_factor(fns, p, n, m - ng, ng, q, t, M, Cq, LU, LU, I[piv:piv + n + m])
    return _factor_cause(S, I, status, ratio, t)


def _factor_cause(S, I, status, ratio, t):
    """The cause code of a factorisation of J at t (:func:`.kernel_common.factor_matrix`'s
    status, pivot ratio): a failure's t and ratio into S[F_CT], S[F_CINFO]; a success
    counted in I[ST_LU]."""
    if status == MATRIX_NONFINITE:
        S[F_CT] = t
        return C_NONFINITE_MATRIX
    if status != FACTORED:
        S[F_CT] = t
        S[F_CINFO] = ratio
        return C_SINGULAR
    I[ST_LU] += 1
    return C_NONE


def _factor_and_rhs(fns, S, I, LU, piv, p, u, n, m, t, y, w):
    """q, v of y = [q; v] into w[W_Q], w[W_V], J of eq. 89 at (q, t) factored into LU
    (its pivots in I from ``piv``; M, C_q in w[W_M], w[W_CQ]) and its right-hand side
    [Q; γ; γ_G] of eq. 88 in w[W_RHS] (Q, γ: w[W_FORCES], w[W_GAMMA];
    :func:`.kernel_common.augmented_rhs`).  Returns a cause
    code (C_NONE on success)."""
    q, v, M, Cq, Q, g, rhs = w[W_Q], w[W_V], w[W_M], w[W_CQ], w[W_FORCES], w[W_GAMMA], w[W_RHS]
    for i in range(n):
        q[i] = y[i]
        v[i] = y[n + i]
    cause = _factorize(fns, S, I, LU, piv, p, n, m, q, t, M, Cq)
    if cause != C_NONE:
        return cause
    ng = n_nonholonomic(I)
    augmented_rhs(fns, p, u, n, m - ng, ng, q, v, t, Q, g, rhs)      # [Q; γ; γ_G]
    return C_NONE


def _evaluate(fns, S, I, LU, piv, p, u, n, m, t, y, f, lam, w):
    """f = y' = [v; q''] at (t, y) (eq. 88) and λ (with the
    rows B q'' = γ_G, λ = [λ; μ]): :func:`.kernel_common.consistent_accelerations` at
    (q, v) of y (eq. 88's solve is eq. 10's); the factor of J stays in LU.  Returns a
    cause code (C_NONE on success)."""
    q, v, rhs = w[W_Q], w[W_V], w[W_RHS]
    I[ST_RES] += 1
    if I[FIRST_ORDER] == 1:              # x' = f(t, x, u): the forces slot
        f[:] = 0.0
        fns[FN_FORCES](y, y, t, u, p, f)
        return C_NONE
    for i in range(n):
        q[i] = y[i]
        v[i] = y[n + i]
    ng = n_nonholonomic(I)
    status, ratio = consistent_accelerations(fns, p, u, n, m - ng, ng, t, q, v, w[W_M], w[W_CQ], LU, LU,
                                             I[piv:piv + n + m], w[W_FORCES], w[W_GAMMA], rhs)
    cause = _factor_cause(S, I, status, ratio, t)
    if cause != C_NONE:
        return cause
    for i in range(n):
        f[i] = v[i]
        f[n + i] = rhs[i]
    for k in range(m):
        lam[k] = rhs[n + k]
    return C_NONE


def keep_current_derivative(S, I, cause, f, lam, n, m, ny, o_f, o_qdd, o_lam):
    """After the evaluation (``cause``, f, λ) at the current point of a step: its
    failure status, or OK with f, q'' and λ in the record (I[HAS_F])."""
    if cause == C_SINGULAR:
        return SINGULAR
    if cause == C_NONFINITE_MATRIX:
        return NONFINITE_MATRIX
    if not all_finite(f):
        S[F_H] = 0.0
        return NONFINITE_DERIVATIVE
    for i in range(ny):
        S[o_f + i] = f[i]
    for i in range(n):
        S[o_qdd + i] = f[n + i]
    for k in range(m):
        S[o_lam + k] = lam[k]
    I[HAS_F] = 1
    return OK
