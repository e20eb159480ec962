"""The model terms of spark's stage equations (seed 003 eqs. 7-10, 22-25): the modified
mass M_γ and ∂T_γ/∂q, body-wise on a natural-coordinate chain, else with the
projector C_qᵀ(C_q C_qᵀ)⁻¹C_q, for kernels.  Pasted into the compiled method
(``helpers`` of :func:`cosim.jit.method_entry`, after :mod:`.spark_record`) and called
by :mod:`.spark_kernel`.
"""
import math

from .dense_lu import lu_factor_inplace, lu_solve_inplace
from .kernel_common import (FN_CONSTRAINT_FORCE_JACOBIAN, FN_CONSTRAINT_JACOBIAN, FN_MASS,
    FN_MASS_JACOBIAN_TERM)
from .spark_record import (CHAIN, CONST_MASS, GAMMA, I_M, I_N, I_NB, I_NV, I_S, W_CCT,
    W_CCT_INV_CQ, W_CCT_PIV, W_CONSTRAINT_FORCE_JAC, W_CQ, W_CQ_COLUMN, W_MV_Q, W_PROJ_W,
    W_V_TANGENT, O_J, O_L, O_PTS, offsets)

# inlined by numba into its one caller, spark_kernel._force (cosim.jit.method_inlined): it takes
# the work tuple, which a call of a function compiled on its own passes member by member
INLINED = ("_kinetic_gradient",)


def _layout(I):
    """offsets() of this record."""
    return offsets(I[I_N], I[I_M], I[I_S], I[I_NV], I[I_NB])


def _body(S, I, o, gamma, bdy):
    """Body ``bdy`` of a natural-coordinate chain: the start of its previous point
    (−1: fixed) and of its next point in q, its length and γ − J_i."""
    o_l, o_j, o_pts = o[O_L], o[O_J], o[O_PTS]
    return int(S[o_pts + 2 * bdy]), int(S[o_pts + 2 * bdy + 1]), S[o_l + bdy], gamma - S[o_j + bdy]


def _difference(x, ip, ix):
    """x at the body's next point less x at its previous one (the point itself when fixed)."""
    if ip >= 0:
        return x[ix] - x[ip], x[ix + 1] - x[ip + 1]
    return x[ix], x[ix + 1]


def _projector_factor(fns, p, n, m, q, t, Cq, AAt, piv):
    """C_q(q, t) into Cq and the LU of C_q C_qᵀ into AAt; False when it is singular."""
    Cq[:, :] = 0.0
    fns[FN_CONSTRAINT_JACOBIAN](q, t, p, Cq)
    for i in range(m):
        for j in range(m):
            acc = 0.0
            for k in range(n):
                acc += Cq[i, k] * Cq[j, k]
            AAt[i, j] = acc
    return lu_factor_inplace(AAt, piv) == 0


def _mass_gamma(fns, S, I, p, q, t, M, w):
    """M_γ(q) into M: the model's M plus Σ_i (γ − J_i) D_i1ᵀ(I − ṽ_iṽ_iᵀ)D_i1 on a
    natural-coordinate chain (the model's M is the γ_i = J_i member), else
    M + γ C_qᵀ(C_q C_qᵀ)⁻¹C_q."""
    n, m = I[I_N], I[I_M]
    gamma = S[GAMMA]
    M[:, :] = 0.0
    fns[FN_MASS](q, t, p, M)
    if I[CHAIN] == 1:
        o = _layout(I)
        for bdy in range(I[I_NB]):
            ip, ix, ln, coef = _body(S, I, o, gamma, bdy)
            if coef == 0.0:
                continue
            # u = D1 x = (r_next − r_prev)/l, ṽ = D2 x = u rotated by +90°
            r0, r1 = _difference(q, ip, ix)
            u0 = r0 / ln
            u1 = r1 / ln
            vt0 = -u1
            vt1 = u0
            l2 = ln * ln
            for a in range(2):
                for c in range(2):
                    va = vt0 if a == 0 else vt1
                    vc = vt0 if c == 0 else vt1
                    e = 1.0 if a == c else 0.0
                    blk = coef * (e - va * vc) / l2
                    M[ix + a, ix + c] += blk
                    if ip >= 0:
                        M[ip + a, ip + c] += blk
                        M[ip + a, ix + c] -= blk
                        M[ix + a, ip + c] -= blk
        return
    if gamma == 0.0 or m == 0:
        return
    Cq, AAt, X, piv, tm = w[W_CQ], w[W_CCT], w[W_CCT_INV_CQ], w[W_CCT_PIV], w[W_CQ_COLUMN]
    if not _projector_factor(fns, p, n, m, q, t, Cq, AAt, piv):
        M[:, :] = math.nan
        return
    for k in range(n):   # X = (C_q C_qᵀ)⁻¹ C_q
        for r in range(m):
            tm[r] = Cq[r, k]
        lu_solve_inplace(AAt, piv, tm)
        for r in range(m):
            X[r, k] = tm[r]
    for i in range(n):
        for j in range(n):
            acc = 0.0
            for r in range(m):
                acc += Cq[r, i] * X[r, j]
            M[i, j] = M[i, j] + gamma * acc


def _kinetic_gradient(fns, S, I, p, q, v, t, g, w):
    """∂T_γ/∂q at fixed q' less the quadratic-velocity force the model's Q holds:
    Ṁ q' = (M(q) q')_q q' (the model's mass term), plus on a chain
    −(γ − J_i)(ṽ_i·u̇_i) D_i2ᵀu̇_i, else γ K(w)ᵀ(v − C_qᵀw) with w = (C_q C_qᵀ)⁻¹C_q v
    and K(w) = (C_qᵀw)_q (the model's constraint force Jacobian)."""
    n, m = I[I_N], I[I_M]
    gamma = S[GAMMA]
    for i in range(n):
        g[i] = 0.0
    if I[CONST_MASS] == 0:
        Mq = w[W_MV_Q]
        Mq[:, :] = 0.0
        fns[FN_MASS_JACOBIAN_TERM](q, v, t, p, Mq)
        for i in range(n):
            acc = 0.0
            for j in range(n):
                acc += Mq[i, j] * v[j]
            g[i] = acc
    if I[CHAIN] == 1:
        o = _layout(I)
        for bdy in range(I[I_NB]):
            ip, ix, ln, coef = _body(S, I, o, gamma, bdy)
            if coef == 0.0:
                continue
            r0, r1 = _difference(q, ip, ix)
            d0, d1 = _difference(v, ip, ix)
            u0 = r0 / ln
            u1 = r1 / ln
            du0 = d0 / ln
            du1 = d1 / ln
            sv = -u1 * du0 + u0 * du1                  # ṽ·u̇
            f = -coef * sv
            gn0 = f * du1 / ln                         # −(ṽ·u̇) D2ᵀu̇ on r_next
            gn1 = f * (-du0) / ln
            g[ix] += gn0
            g[ix + 1] += gn1
            if ip >= 0:
                g[ip] -= gn0
                g[ip + 1] -= gn1
        return
    if gamma == 0.0 or m == 0:
        return
    Cq, AAt, piv, wv = w[W_CQ], w[W_CCT], w[W_CCT_PIV], w[W_PROJ_W]
    K, r = w[W_CONSTRAINT_FORCE_JAC], w[W_V_TANGENT]
    if not _projector_factor(fns, p, n, m, q, t, Cq, AAt, piv):
        for i in range(n):
            g[i] = math.nan
        return
    nonzero = False
    for k in range(m):
        acc = 0.0
        for j in range(n):
            acc += Cq[k, j] * v[j]
        wv[k] = acc
    lu_solve_inplace(AAt, piv, wv)
    for k in range(m):
        if wv[k] != 0.0:
            nonzero = True
    if not nonzero:
        return
    K[:, :] = 0.0
    fns[FN_CONSTRAINT_FORCE_JACOBIAN](q, wv, t, p, K)
    for j in range(n):
        acc = 0.0
        for k in range(m):
            acc += Cq[k, j] * wv[k]
        r[j] = v[j] - acc
    for i in range(n):
        acc = 0.0
        for j in range(n):
            acc += K[j, i] * r[j]
        g[i] = g[i] + gamma * acc
