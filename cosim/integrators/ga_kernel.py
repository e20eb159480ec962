"""Generalized-α as pure functions on one flat state record: THE implementation of
the index-3 method and, with the formulation switch ``I[GGL]`` = 1, of the GGL
index-2 form (seed 000 eqs. 37-39).  They share the predictor, the quasi-Newton
loop, the step control and the restart; the GGL form has its own unknowns
(x, y, λ, μ), residual eq. 38, iteration matrix eq. 39, Newton norm and error
estimate.

The algorithm (seed 000 §3, Algorithm 3, with the departures listed in
:class:`cosim.integrators.generalized_alpha.GeneralizedAlpha`'s docstring):
predictor eq. 30-31, Newton on eq. 32 with the iteration matrix eq. 33 and
Algorithm 2's quasi-Newton reuse, error estimate eq. 34, step control eq. 36 with
the deadband, velocity projection (eq. 8-9 with W = M), consistent accelerations
eq. 10 on restart; nonholonomic rows (seed 000 §7, eqs. 93-94).

One implementation, two ways to run it: :func:`entry` compiled by
:func:`cosim.jit.method_entry` (once per machine, for every model) or called as
plain Python (the python backend).  The model enters as ``fns``, its functions
in :func:`cosim.jit.kernel_fields` order (:mod:`cosim.models.kernels`): compiled
kernels given by address, or Python functions
(:mod:`cosim.integrators.model_functions`).  Everything the method remembers
lives in three arrays, so a snapshot or rollback is three array copies:

* ``S`` float64: scalars (offsets below) then y, y_prev, q'', q''_prev, λ, a,
  x_rate, λ_rate, 1/|diag M| (norm scale), 1/diag M (exact, for projection);
* ``I`` int64: sizes, flags, statistics, the LU pivots;
* ``LU`` float64 N² (N = n+m; GGL: 2n+2m): the kept iteration-matrix factors.

No exceptions inside: every function returns a status code that the integrator
object (:mod:`cosim.integrators.generalized_alpha`) turns into error messages.
"""
import math

import numpy as np

from .dense_lu import lu_factor_inplace, lu_solve_inplace, pivot_ratio

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


def state_view(S, I):
    """(q, v, t) of the record, as views (the compiled entry's outputs)."""
    n = I[I_N]
    return S[N_SCALARS:N_SCALARS + n], S[N_SCALARS + n:N_SCALARS + 2 * n], S[T]


# ---------------------------------------------------------------------------------
# nonholonomic rows G = B(q, t) v + b(q, t) = 0 (seed 000 §7, eqs. 93-94), n_g = I[I_NG]
# (no-ops for n_g = 0).  Multipliers: λ of the record (and λ̂, C_qᵀ in the norms)
# hold [λ; ν], m + n_g.  Residual: Bᵀν in the force rows, rows (B v + b)/(γ h) last;
# iteration matrix: (Bᵀν)_q in K, Bᵀ under ν, the G rows B + (β/γ) h (B v + b)_q
# (index 3) or (β/γ)(B v + b)_q under x and B under y (GGL).  Kernels fns[10] … fns[14]
# (cosim.models.kernels.NONHOLONOMIC_FIELDS).
# ---------------------------------------------------------------------------------
def n_nonholonomic(I):
    """n_g: the model's nonholonomic rows."""
    return I[I_NG]


def _nh_rows(fns, p, m, q, t, Cq):
    """B(q, t) into rows m: of Cq (zero-filled by the caller)."""
    if Cq.shape[0] == m:
        return
    fns[10](q, t, p, Cq[m:])


def _nh_gamma(fns, p, m, q, v, t, g):
    """γ_G into g[m:] (zero-filled by the caller)."""
    if g.shape[0] == m:
        return
    fns[12](q, v, t, p, g[m:])


def _nh_residual(fns, p, n, m, t1, q, v, lam_hat, delta, c_nu, r_force, gh, F):
    """F[r_force:r_force + n] += Bᵀν, last n_g rows of F = (B v + b)/(γ h)."""
    ng = lam_hat.shape[0] - m
    if ng == 0:
        return
    r_g = F.shape[0] - ng
    B = np.zeros((ng, n))
    fns[10](q, t1, p, B)
    b = np.zeros(ng)
    fns[11](q, t1, p, b)
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
    fns[13](q, nu, t1, p, H)
    for i in range(n):
        for j in range(n):
            K[i, j] += H[i, j]
    B = np.zeros((ng, n))
    fns[10](q, t1, p, B)
    Jv = np.zeros((ng, n))
    fns[14](q, v, t1, p, Jv)
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
    fns[0](q, t, p, M)
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
        fns[0](q, t, p, M)
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


def consistent_accelerations(fns, S, I, q, v, t, u, p, qdd_out, lam_out):
    """Eq. 10: [[M, C_qᵀ], [C_q, 0]] [q''; λ] = [Q; γ]; for a constant diagonal
    M the m×m system C_q M⁻¹ C_qᵀ λ = C_q M⁻¹ Q − γ.
    Returns OK or RESTART_FAILED."""
    n, m = I[I_N], I[I_M]
    mz = m + n_nonholonomic(I)
    o_mix = offsets(n, mz)[9]
    buf = np.zeros(n + 2 * mz * n + 2 * mz + mz * mz)   # one allocation (workspace())
    Q, o = _cut(buf, 0, n)
    fns[1](q, v, t, u, p, Q)
    if mz > 0 and _diag_mass_inverse(fns, S, I, q, t, p, o_mix, n):
        minv = S[o_mix:o_mix + n]
        Cq_flat, o = _cut(buf, o, mz * n)
        CM_flat, o = _cut(buf, o, mz * n)
        A_flat, o = _cut(buf, o, mz * mz)
        gam, o = _cut(buf, o, mz)
        rhs, o = _cut(buf, o, mz)
        Cq, CM, A = Cq_flat.reshape((mz, n)), CM_flat.reshape((mz, n)), A_flat.reshape((mz, mz))
        fns[3](q, t, p, Cq)
        _nh_rows(fns, p, m, q, t, Cq)
        fns[5](q, v, t, p, gam)
        _nh_gamma(fns, p, m, q, v, t, gam)
        for k in range(mz):
            for j in range(n):
                CM[k, j] = Cq[k, j] * minv[j]
        _abt_into(CM, Cq, A)
        for k in range(mz):
            s = 0.0
            for j in range(n):
                s += CM[k, j] * Q[j]
            rhs[k] = s - gam[k]
        piv = np.empty(mz, dtype=np.int64)
        info = _gesv(A, rhs, piv)
        if info == 0 and _all_finite(rhs):
            for i in range(n):
                s = Q[i]
                for k in range(mz):
                    s -= rhs[k] * Cq[k, i]
                qdd_out[i] = minv[i] * s
            lam_out[:] = rhs
            return OK
    # general case: the augmented system with the singularity test of common.lu_factor
    K = np.zeros((n + mz, n + mz))
    M = np.zeros((n, n))
    fns[0](q, t, p, M)
    K[:n, :n] = M
    rhs = np.zeros(n + mz)
    rhs[:n] = Q
    if mz > 0:
        Cq = np.zeros((mz, n))
        fns[3](q, t, p, Cq)
        _nh_rows(fns, p, m, q, t, Cq)
        gam = np.zeros(mz)
        fns[5](q, v, t, p, gam)
        _nh_gamma(fns, p, m, q, v, t, gam)
        K[:n, n:] = Cq.T
        K[n:, :n] = Cq
        rhs[n:] = gam
    for i in range(n + mz):
        for j in range(n + mz):
            if not math.isfinite(K[i, j]):
                return RESTART_FAILED
    piv = np.empty(n + mz, dtype=np.int64)
    info = lu_factor_inplace(K, piv)
    if info != 0 or pivot_ratio(K) <= 1e-14:
        return RESTART_FAILED
    lu_solve_inplace(K, piv, rhs)
    qdd_out[:] = rhs[:n]
    lam_out[:] = rhs[n:]
    return OK


def restart(fns, S, I, u, p):
    """Forget the step history at the current point (inputs changed, event
    jump): q'' and λ from eq. 10, a = q'', h_last = 0, λ_rate = 0; the
    innovation rate x_rate is kept (a fair Newton start).  Also t_prev = t,
    y_prev = y (Integrator.restart)."""
    n, m = I[I_N], I[I_M] + n_nonholonomic(I)   # all multipliers [λ; ν]
    o_y, o_yp, o_qdd, o_qddp, o_lam, o_a, o_xr, o_lr, o_mid, o_mix, _ = offsets(n, m)
    buf = np.empty(3 * n + m)   # one allocation
    q, o = _cut(buf, 0, n)
    v, o = _cut(buf, o, n)
    qdd, o = _cut(buf, o, n)
    lam, o = _cut(buf, o, m)
    q[:] = S[o_y:o_y + n]
    v[:] = S[o_y + n:o_y + 2 * n]
    status = consistent_accelerations(fns, S, I, q, v, S[T], u, p, qdd, lam)
    if status != OK:
        return status
    S[o_qdd:o_qdd + n] = qdd
    S[o_lam:o_lam + m] = lam
    S[o_a:o_a + n] = qdd
    S[H_LAST] = 0.0
    S[o_lr:o_lr + m] = 0.0
    S[o_qddp:o_qddp + n] = qdd
    S[T_PREV] = S[T]
    S[o_yp:o_yp + 2 * n] = S[o_y:o_y + 2 * n]
    return OK


# ---------------------------------------------------------------------------------
# one Newton solve (seed 000 Algorithm 2: quasi-Newton with Jacobian/LU reuse and relaxation)
# ---------------------------------------------------------------------------------
def _cut(buf, o, k):
    """The view buf[o:o + k] and the next offset."""
    return buf[o:o + k], o + k


def _block(buf, o, r, c):
    """The r×c matrix view at buf[o:] and the next offset."""
    return buf[o:o + r * c].reshape((r, c)), o + r * c


def workspace(n, m, extra=0):
    """Work arrays of one advance() call, so the step loop allocates nothing
    (in numba an allocation costs as much as a small model evaluation): views
    into ONE zeroed buffer.  Slots 0-15 (q, v, q'', λ, M, Q, C_q, C, q0, v0,
    q''0, λ̂, x̂, scale, w, w_v), 16-25 the GGL form's (q'0, ŷ, s_y, s_μ, q',
    μ, C_t, g0, g1, q + h e_j), 26-44 step()'s own (q, v, q'', a, λ, x_rate,
    λ_rate at the step start, weights w, C_qᵀ, λ scale, stall scales,
    1/|diag M|, C_q at the start, x, accepted q, v, q'', λ), 45-46 the velocity
    projection's C_q M⁻¹ and C_q M⁻¹ C_qᵀ, and 47: ``extra`` floats
    (advance(): room for the snapshot of S and LU)."""
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


def _residual(fns, p, u, n, m, t1, q0, v0, qdd0, lam_hat, bh2, gh, eta, delta, F, work):
    """Eq. 32: [M(q) q'' − Q(q, q') + C_qᵀ λ ;  C(q)/(β h²)] at predictor + δ."""
    q, v, qdd, lam, M, Q, Cq, C = work[0], work[1], work[2], work[3], work[4], work[5], work[6], work[7]
    for i in range(n):
        q[i] = q0[i] + bh2 * delta[i]
        v[i] = v0[i] + gh * delta[i]
        qdd[i] = qdd0[i] + eta * delta[i]
    M[:, :] = 0.0
    fns[0](q, t1, p, M)
    Q[:] = 0.0
    fns[1](q, v, t1, u, p, Q)
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += M[i, j] * qdd[j]
        F[i] = s - Q[i]
    _nh_residual(fns, p, n, m, t1, q, v, lam_hat, delta, n + m, 0, gh, F)   # seed 000 §7
    if m > 0:
        for k in range(m):
            lam[k] = lam_hat[k] + delta[n + k]
        Cq[:, :] = 0.0
        fns[3](q, t1, p, Cq)
        for i in range(n):
            s = 0.0
            for k in range(m):
                s += Cq[k, i] * lam[k]
            F[i] += s
        C[:] = 0.0
        fns[2](q, t1, p, C)
        inv = 1.0 / bh2
        for k in range(m):
            F[n + k] = inv * C[k]


def _jacobian(fns, p, u, n, m, t1, q0, v0, qdd0, lam_hat, bh2, gh, eta, const_mass, delta, J, cg):
    """Eq. 33: [[η M + β h² (−Q_q + (C_qᵀλ)_q + (M a)_q) − γ h Q_v, C_qᵀ], [C_q, 0]]
    (nonholonomic rows: _nh_jacobian with cg = (β/γ) h)."""
    q = q0 + bh2 * delta[:n]
    v = v0 + gh * delta[:n]
    qdd = qdd0 + eta * delta[:n]
    Qq = np.zeros((n, n))
    Qv = np.zeros((n, n))
    fns[6](q, v, t1, u, p, Qq, Qv)
    K = -Qq
    if m > 0:
        lam = lam_hat + delta[n:]
        H = np.zeros((n, n))
        fns[7](q, lam, t1, p, H)
        K = K + H
    _nh_jacobian(fns, p, n, m, t1, q, v, lam_hat, delta, n + m, 0, -1, cg, K, J)
    if not const_mass:
        Mq = np.zeros((n, n))
        fns[8](q, qdd, t1, p, Mq)
        K = K + Mq
    M = np.zeros((n, n))
    fns[0](q, t1, p, M)
    J[:n, :n] = eta * M + bh2 * K - gh * Qv
    if m > 0:
        Cq = np.zeros((m, n))
        fns[3](q, t1, p, Cq)
        J[:n, n:n + m] = Cq.T
        J[n:n + m, :n] = Cq
        J[n:, n:] = 0.0


def _norm(dd, n, m, scale, CqT, lam_scale):
    """The Newton norm: position/velocity change of Δx, and
    the multipliers' effect C_qᵀ Δz on q, in the weighted norm eq. 35."""
    r = 0.0
    for i in range(n):
        x = abs(dd[i]) * scale[i]
        if x > r or x != x:
            r = x
    if m > 0:
        r2 = 0.0
        for i in range(n):
            s = 0.0
            for k in range(m):
                s += CqT[i, k] * dd[n + k]
            x = abs(s) * lam_scale[i]
            if x > r2 or x != x:
                r2 = x
        if r2 > r or r2 != r2:
            r = r2
    return r


# -- the GGL form: unknowns δ = (Δx, Δy, Δλ, μ),
#    q = q0 + β h x,  q' = q'0 + γ x,  v = v0 + γ h y,  v' = q''0 + η y  (eq. 37 predictor
#    with the extrapolated innovations folded into q0, q'0, v0, q''0)
def _cqv(fns, p, n, m, t1, q, v, Cq, Ct, out):
    """C_q(q) v + C_t(q) into ``out`` (Cq, Ct overwritten)."""
    Cq[:, :] = 0.0
    fns[3](q, t1, p, Cq)
    Ct[:] = 0.0
    fns[4](q, t1, p, Ct)
    for k in range(m):
        s = 0.0
        for j in range(n):
            s += Cq[k, j] * v[j]
        out[k] = s + Ct[k]


def _residual_ggl(fns, p, u, n, m, t1, q0, qd0, v0, qdd0, lam_hat, bh, g, gh, eta, delta, F, work):
    """Eq. 38: [q' − v + C_qᵀ μ ; M v' − Q + C_qᵀ λ ; C/(β h) ; (C_q v + C_t)/(γ h)]."""
    q, v, vd, lam, M, Q, Cq, C = work[0], work[1], work[2], work[3], work[4], work[5], work[6], work[7]
    qd, mu, Ct = work[20], work[21], work[22]
    for i in range(n):
        q[i] = q0[i] + bh * delta[i]
        qd[i] = qd0[i] + g * delta[i]
        v[i] = v0[i] + gh * delta[n + i]
        vd[i] = qdd0[i] + eta * delta[n + i]
    M[:, :] = 0.0
    fns[0](q, t1, p, M)
    Q[:] = 0.0
    fns[1](q, v, t1, u, p, Q)
    for i in range(n):
        F[i] = qd[i] - v[i]
        s = 0.0
        for j in range(n):
            s += M[i, j] * vd[j]
        F[n + i] = s - Q[i]
    i_mu = F.shape[0] - m   # δ = (x, y, λ, ν, μ)
    if m > 0:
        for k in range(m):
            lam[k] = lam_hat[k] + delta[2 * n + k]
            mu[k] = delta[i_mu + k]
        Cq[:, :] = 0.0
        fns[3](q, t1, p, Cq)
        for i in range(n):
            s1 = 0.0
            s2 = 0.0
            for k in range(m):
                s1 += Cq[k, i] * mu[k]
                s2 += Cq[k, i] * lam[k]
            F[i] += s1
            F[n + i] += s2
        C[:] = 0.0
        fns[2](q, t1, p, C)
        inv_bh, inv_gh = 1.0 / bh, 1.0 / gh
        for k in range(m):
            F[2 * n + k] = inv_bh * C[k]
        _cqv(fns, p, n, m, t1, q, v, Cq, Ct, work[23])
        for k in range(m):
            F[2 * n + m + k] = inv_gh * work[23][k]
    _nh_residual(fns, p, n, m, t1, q, v, lam_hat, delta, 2 * n + m, n, gh, F)   # seed 000 eq. 94


def _jacobian_ggl(fns, p, u, n, m, t1, q0, v0, qdd0, lam_hat, bh, b, g, gh, eta, const_mass,
                  delta, J, work):
    """Eq. 39, columns (x, y, λ, μ): [[γ I + β h (C_qᵀμ)_q, −γ h I, 0, C_qᵀ],
    [β h (−Q_q + (M v')_q + (C_qᵀλ)_q), η M − γ h Q_v, C_qᵀ, 0], [C_q, 0, 0, 0],
    [(β/γ) (C_q v + C_t)_q, C_q, 0, 0]]; (C_q v + C_t)_q by forward differences
    (common.fd_jacobian, the same steps); nonholonomic rows and ν columns: _nh_jacobian."""
    q = q0 + bh * delta[:n]
    v = v0 + gh * delta[n:2 * n]
    vd = qdd0 + eta * delta[n:2 * n]
    J[:, :] = 0.0
    Qq = np.zeros((n, n))
    Qv = np.zeros((n, n))
    fns[6](q, v, t1, u, p, Qq, Qv)
    K = -Qq
    if not const_mass:
        Mq = np.zeros((n, n))
        fns[8](q, vd, t1, p, Mq)
        K = K + Mq
    M = np.zeros((n, n))
    fns[0](q, t1, p, M)
    for i in range(n):
        J[i, i] = g
        J[i, n + i] = -gh
        for j in range(n):
            J[n + i, n + j] = eta * M[i, j] - gh * Qv[i, j]
    i_mu = J.shape[0] - m   # columns (x, y, λ, ν, μ)
    if m > 0:
        lam = lam_hat + delta[2 * n:i_mu]
        mu = delta[i_mu:]
        H = np.zeros((n, n))
        fns[7](q, lam, t1, p, H)
        K = K + H
        Hmu = np.zeros((n, n))
        fns[7](q, mu, t1, p, Hmu)
        Cq, Ct, g0, g1, qx = work[6], work[22], work[23], work[24], work[25]
        for i in range(n):
            for j in range(n):
                J[i, j] += bh * Hmu[i, j]
        _cqv(fns, p, n, m, t1, q, v, Cq, Ct, g0)
        sq = math.sqrt(EPS)
        bg = b / g
        for j in range(n):
            qx[:] = q
            hj = sq * max(abs(q[j]), 1e-3)
            qx[j] += hj
            hj = qx[j] - q[j]  # exactly representable step
            _cqv(fns, p, n, m, t1, qx, v, Cq, Ct, g1)
            for k in range(m):
                J[2 * n + m + k, j] = bg * ((g1[k] - g0[k]) / hj)
        Cq[:, :] = 0.0
        fns[3](q, t1, p, Cq)
        for k in range(m):
            for j in range(n):
                J[j, i_mu + k] = Cq[k, j]
                J[n + j, 2 * n + k] = Cq[k, j]
                J[2 * n + k, j] = Cq[k, j]
                J[2 * n + m + k, n + j] = Cq[k, j]
    _nh_jacobian(fns, p, n, m, t1, q, v, lam_hat, delta, 2 * n + m, n, n, b / g, K, J)
    for i in range(n):
        for j in range(n):
            J[n + i, j] = bh * K[i, j]


def _amax(a):
    """max |…| of an array as numpy's .max(): NaN propagates."""
    r = -math.inf
    for i in range(a.shape[0]):
        x = a[i]
        if x > r or x != x:
            r = x
            if x != x:
                return x
    return r


def _pymax(a, b):
    """Python's max(a, b) (keeps a unless b > a)."""
    return b if b > a else a


def _norm_ggl(dd, n, m, mz, sx, sy, CqT, s_lam, s_mu, tmp):
    """The Newton norm of the GGL form: position change β h Δx (W_q),
    velocity change γ h Δy (W_v with the rounding floor), the multipliers
    through [C_q; B]ᵀ (λ, ν on the velocity scale) and C_qᵀ (μ, position scale)."""
    if n == 0:
        return 0.0
    for i in range(n):
        tmp[i] = abs(dd[i]) * sx[i]
    a = _amax(tmp)
    for i in range(n):
        tmp[i] = abs(dd[n + i]) * sy[i]
    val = _pymax(a, _amax(tmp))
    if mz > 0:
        val = _pymax(val, _rows_norm(dd, 2 * n, n, mz, CqT, s_lam, tmp))
    if m > 0:
        val = _pymax(val, _rows_norm(dd, 2 * n + mz, n, m, CqT, s_mu, tmp))
    return val


def _rows_norm(dd, off, n, m, CqT, sc, tmp):
    """max |C_qᵀ dd[off:off+m]| · sc (the first m columns of CqT)."""
    for i in range(n):
        s = 0.0
        for k in range(m):
            s += CqT[i, k] * dd[off + k]
        tmp[i] = abs(s) * sc[i]
    return _amax(tmp)


def _newton(fns, S, I, LU, p, u, n, m, t1, h, q0, v0, qdd0, lam_hat, bh2, gh, eta, scale, CqT,
            lam_scale, scale_r, lam_scale_r, delta, F, Jw, work, ggl, qd0, b, g, sy, s_mu):
    """Returns (converged, iterations, status); δ in ``delta``.  With ``ggl`` the
    GGL form (eqs. 38-39): ``bh2`` is then β h (q = q0 + β h x), ``scale`` and
    ``lam_scale`` are its s_x and s_λ, ``qd0``, ``sy``, ``s_mu`` its own, and
    it accepts on the rate test σ/(1−σ)‖Δδ‖ < GGL_RATE_TOL only, or on a stall
    below NEWTON_TOL with a matrix formed in this solve."""
    ng = n_nonholonomic(I)
    mz = m + ng
    N = matrix_size(n, m, ggl, ng)
    piv = I[PIV:PIV + N]
    const_mass = I[CONST_MASS] == 1
    old_norm = -1.0
    n_j = 0
    err = math.inf
    sigma = S[SIGMA]
    refreshed = False
    delta[:] = 0.0
    # fixed step, index 3: tolerances relative to the step's innovation (FIXED_NEWTON_REL)
    rel = S[H_FIXED] > 0.0 and not ggl
    x_hat = work[12]
    rnd = 0.0
    rnd_q = 0.0
    if rel:
        # rounding-level updates in the Newton norm: rnd_q changes q by
        # ROUNDOFF·ε·max(1, |q|) (where C(q)/(β h²) leaves x, the floor of a stall),
        # rnd (≤ rnd_q) changes v by ROUNDOFF·ε·max(1, |v|): a Newton error at the
        # q level is γ/(β h) times that in v, and accumulates over the steps
        qmax = 1.0
        vmax = 1.0
        smax = 0.0
        for i in range(n):
            if abs(q0[i]) > qmax:
                qmax = abs(q0[i])
            if abs(v0[i]) > vmax:
                vmax = abs(v0[i])
            if scale[i] > smax:
                smax = scale[i]
        rnd_q = ROUNDOFF * EPS * smax * qmax / bh2
        rnd = min(rnd_q, ROUNDOFF * EPS * smax * vmax / gh)
    tol, err_tol = NEWTON_TOL, NEWTON_ERR_TOL
    for it in range(1, NEWTON_MAX_ITER + 1):
        if I[NEED_JAC] == 1 or I[HAS_FACTOR] == 0:
            if ggl:
                _jacobian_ggl(fns, p, u, n, m, t1, q0, v0, qdd0, lam_hat, bh2, b, g, gh, eta, const_mass,
                              delta, Jw, work)
            else:
                _jacobian(fns, p, u, n, m, t1, q0, v0, qdd0, lam_hat, bh2, gh, eta, const_mass, delta, Jw,
                          (b / g) * h)
            I[ST_JAC] += 1
            for i in range(N):
                for j in range(N):
                    if not math.isfinite(Jw[i, j]):
                        return False, it, NONFINITE_MATRIX
            LU[:, :] = Jw
            info = lu_factor_inplace(LU, piv)
            ratio = 0.0 if info != 0 else pivot_ratio(LU)
            if ratio <= 1e-14:
                I[HAS_FACTOR] = 0
                S[F_INFO] = ratio
                return False, it, SINGULAR
            I[HAS_FACTOR] = 1
            I[ST_LU] += 1
            S[H_JAC] = h
            I[NEED_JAC] = 0
            S[RELAX] = 1.0
            n_j = 0
            old_norm = -1.0
            refreshed = True
        if ggl:
            _residual_ggl(fns, p, u, n, m, t1, q0, qd0, v0, qdd0, lam_hat, bh2, g, gh, eta, delta, F, work)
        else:
            _residual(fns, p, u, n, m, t1, q0, v0, qdd0, lam_hat, bh2, gh, eta, delta, F, work)
        I[ST_RES] += 1
        I[ST_NEWTON] += 1
        if not _all_finite(F):
            I[NEED_JAC] = 1
            S[SIGMA] = sigma
            I[REASON] = R_RESIDUAL
            return False, it, NEWTON_FAILED
        lu_solve_inplace(LU, piv, F)
        relax = S[RELAX]
        for i in range(N):
            F[i] *= -relax
        n_j += 1
        delta += F
        if ggl:
            dnorm = _norm_ggl(F, n, m, mz, scale, sy, CqT, lam_scale, s_mu, work[25])  # (q + h e_j: scratch)
        else:
            dnorm = _norm(F, n, mz, scale, CqT, lam_scale)
        if not math.isfinite(dnorm):
            I[NEED_JAC] = 1
            I[REASON] = R_UPDATE
            return False, it, NEWTON_FAILED
        if rel:
            # ‖x‖ in the Newton norm, x = x̂ + δ the innovation so far
            xn = 0.0
            for i in range(n):
                e = abs(x_hat[i] + delta[i]) * scale[i]
                if e > xn:
                    xn = e
            tol = _pymax(min(NEWTON_TOL, FIXED_NEWTON_REL * xn), rnd)
            err_tol = tol * (NEWTON_ERR_TOL / NEWTON_TOL)
        # GGL: the rate test only,
        # or a stall below NEWTON_TOL with a matrix formed in this solve
        if not ggl:
            if dnorm < tol:
                S[SIGMA] = sigma
                return True, it, OK
            if it == 1 and dnorm < 1.0 and 0.0 < sigma < 1.0 \
                    and sigma / (1.0 - sigma) * dnorm < err_tol:
                S[SIGMA] = sigma ** 0.8
                return True, it, OK
        if n_j == 1 or old_norm < 0.0:
            sigma = 0.0
        elif dnorm > 0.9 * old_norm:
            if ggl:
                stalled = dnorm < NEWTON_TOL and refreshed
            elif rel:   # fixed step: a stall at the rounding of q
                stalled = dnorm < _pymax(tol, rnd_q)
            else:
                stalled = _norm(F, n, mz, scale_r, CqT, lam_scale_r) < NEWTON_TOL
            if stalled:
                S[SIGMA] = sigma   # stalled at the rounding level: converged
                return True, it, OK
            I[NEED_JAC] = 1
        else:
            sigma = max(0.5 * sigma, dnorm / old_norm)
            err = sigma / (1.0 - sigma) * dnorm
            if err < (GGL_RATE_TOL if ggl else err_tol):
                S[SIGMA] = sigma
                return True, it, OK
            if n_j >= 5 or err * sigma ** (5 - n_j) > 0.5:
                I[NEED_JAC] = 1
        old_norm = dnorm
    S[SIGMA] = sigma
    I[NEED_JAC] = 1
    if err <= 0.33:
        return True, NEWTON_MAX_ITER, OK
    I[REASON] = R_NO_CONVERGENCE
    return False, NEWTON_MAX_ITER, NEWTON_FAILED


# ---------------------------------------------------------------------------------
# one step
# ---------------------------------------------------------------------------------
def _m_correct(fns, S, I, p, n, q, t, Cq, r, y, CM, A, tmp):
    """y ← y − M⁻¹Cᵀ(C M⁻¹Cᵀ)⁻¹ r in place, C = Cq (its rows): the M-orthogonal
    correction of seed 000 eq. 8-9 (W = M); y is left as it was in a singular
    configuration.  r is overwritten; CM (rows × n), A (rows × rows), tmp (n)
    are scratch.  Used by the velocity projection and the tangent part of eq. 34."""
    mz = Cq.shape[0]
    o_mix = offsets(n, I[I_M] + n_nonholonomic(I))[9]
    if _diag_mass_inverse(fns, S, I, q, t, p, o_mix, n):
        minv = S[o_mix:o_mix + n]
        for k in range(mz):
            for j in range(n):
                CM[k, j] = Cq[k, j] * minv[j]
        _abt_into(CM, Cq, A)
        piv = np.empty(mz, dtype=np.int64)
        info = _gesv(A, r, piv)
        if info != 0 or not _all_finite(r):
            return
        tmp[:] = 0.0
        for k in range(mz):
            rk = r[k]
            for j in range(n):
                tmp[j] += CM[k, j] * rk
        for j in range(n):
            y[j] = y[j] - tmp[j]
        return
    K = np.zeros((n + mz, n + mz))
    M = np.zeros((n, n))
    fns[0](q, t, p, M)
    K[:n, :n] = M
    K[:n, n:] = Cq.T
    K[n:, :n] = Cq
    rhs = np.zeros(n + mz)
    for k in range(mz):
        rhs[n + k] = -r[k]
    piv = np.empty(n + mz, dtype=np.int64)
    info = _gesv(K, rhs, piv)
    if info != 0 or not _all_finite(rhs):
        return
    for j in range(n):
        y[j] = y[j] + rhs[j]


def _project_velocity(fns, S, I, p, n, m, q, v, t, work):
    """M-orthogonal projection of v onto C_q v + C_t = 0 (seed 000 eq. 8-9, W = M),
    in place, keeping B Δv = 0 on nonholonomic rows; v is left
    as it was in a singular configuration.  Scratch: work slots 6, 22, 23, 25, 45, 46."""
    mz = m + n_nonholonomic(I)
    Cq, Ct, r, tmp, CM, A = work[6], work[22], work[23], work[25], work[45], work[46]
    _cqv(fns, p, n, m, t, q, v, Cq, Ct, r)   # C_q v + C_t on the holonomic rows
    _nh_rows(fns, p, m, q, t, Cq)
    for k in range(m, mz):
        r[k] = 0.0
    _m_correct(fns, S, I, p, n, q, t, Cq, r, v, CM, A, tmp)


def _tangent_part(fns, S, I, p, n, m, q, t, x):
    """P x, P = I − M⁻¹C_qᵀ(C_q M⁻¹ C_qᵀ)⁻¹C_q the M-orthogonal projector onto
    ker C_q (holonomic rows): the index-3 error estimate without the rounding
    the Newton iteration leaves along M⁻¹C_qᵀ (option tangent_estimate);
    x unchanged in a singular configuration."""
    Cq = np.zeros((m, n))
    fns[3](q, t, p, Cq)
    r = np.zeros(m)
    for k in range(m):
        s = 0.0
        for j in range(n):
            s += Cq[k, j] * x[j]
        r[k] = s
    y = x.copy()
    _m_correct(fns, S, I, p, n, q, t, Cq, r, y, np.zeros((m, n)), np.zeros((m, m)), np.zeros(n))
    return y


def _clamp(S, h, t_limit):
    """The step towards ``t_limit``: (h, lands, moves).  A step leaving a sliver
    shorter than h/4 before the limit is stretched onto it (adaptive mode), a
    fixed step lands when the rest is a rounding sliver; ``moves`` is False when
    h is too small to change t (h ≤ 4 ε |t|, short of the limit): the caller
    fails with STEP_UNDERFLOW instead of taking steps that do not advance t."""
    h = min(h, S[MAX_STEP])
    remaining = t_limit - S[T]
    if not h > 4.0 * EPS * abs(S[T]) and h < remaining:
        return h, False, False
    if S[H_FIXED] > 0.0:
        if h >= remaining - 1e-6 * h:
            return remaining, True, True
        return h, False, True
    if h >= remaining or remaining - h < 0.25 * h:
        return remaining, True, True
    return h, False, True


def step(fns, S, I, LU, u, p, t_limit, work, delta, F, Jw):
    """One accepted step ending at or before ``t_limit`` (Algorithm 3; the GGL form
    with I[GGL]).  Returns a status code; on failure S[F_H] is the step size tried."""
    n, m = I[I_N], I[I_M]
    mz = m + n_nonholonomic(I)   # multipliers [λ; ν]
    ggl = I[GGL] == 1
    o_y, o_yp, o_qdd, o_qddp, o_lam, o_a, o_xr, o_lr, o_mid, o_mix, _ = offsets(n, mz)
    am, af, g, b, eta = S[ALPHA_M], S[ALPHA_F], S[GAMMA], S[BETA], S[ETA]
    fixed = S[H_FIXED] > 0.0
    t = S[T]
    q, v, qdd = work[26], work[27], work[28]   # the record at the step start (copies)
    q[:] = S[o_y:o_y + n]
    v[:] = S[o_y + n:o_y + 2 * n]
    qdd[:] = S[o_qdd:o_qdd + n]
    h_prop = S[H_NEXT]
    h, lands, moves = _clamp(S, h_prop, t_limit)
    if not moves:
        S[F_H] = h
        return STEP_UNDERFLOW
    if lands and h < TINY_STEP * h_prop:
        # landing sliver: second-order Taylor step, method memory kept
        h = t_limit - t
        S[o_yp:o_yp + 2 * n] = S[o_y:o_y + 2 * n]
        S[o_qddp:o_qddp + n] = qdd
        S[T_PREV] = t
        S[o_y:o_y + n] = q + h * v + (0.5 * h * h) * qdd
        S[o_y + n:o_y + 2 * n] = v + h * qdd
        S[T] = t_limit
        I[ST_STEPS] += 1
        return OK
    rtol, atol = S[RTOL], S[ATOL]
    h_min = 1e-12 * max(1.0, abs(t))
    failed_once = False
    rejections = 0
    a_old, lam_old, x_rate, lam_rate = work[29], work[30], work[31], work[32]
    a_old[:] = S[o_a:o_a + n]
    lam_old[:] = S[o_lam:o_lam + mz]
    x_rate[:] = S[o_xr:o_xr + n]
    lam_rate[:] = S[o_lr:o_lr + mz]
    h_last = S[H_LAST]
    w = work[33]
    for i in range(n):
        w[i] = rtol * abs(q[i]) + atol
    qmax = 1.0
    for i in range(n):
        if abs(q[i]) > qmax:
            qmax = abs(q[i])
    q0, v0, qdd0, lam_hat = work[8], work[9], work[10], work[11]
    x_hat, scale, w_v = work[12], work[13], work[15]
    qd0, y_hat, sy, s_mu = work[16], work[17], work[18], work[19]   # GGL only
    CqT, lam_scale, scale_r, lam_scale_r, minv_d = work[34], work[35], work[36], work[37], work[38]
    CqT[:, :] = 0.0
    lam_scale[:] = 0.0
    scale_r[:] = 0.0
    lam_scale_r[:] = 0.0
    minv_d[:] = 0.0
    if mz > 0:
        Cq0 = work[39]
        Cq0[:, :] = 0.0
        fns[3](q, t, p, Cq0)
        _nh_rows(fns, p, m, q, t, Cq0)
        for i in range(n):
            for k in range(mz):
                CqT[i, k] = Cq0[k, i]
        _inv_mass_diag(fns, S, I, q, t, p, o_mid, n, minv_d)
    h_err = math.inf
    h_new = h
    xi = 0.0
    while True:
        if not lands and not fixed:
            # h := (t + h) − t: t + h exact, the accepted t the exact sum of
            # the steps (time rounding drift)
            h = (t + h) - t
        # Algorithm 3 g: reuse test for this h (seed 000 §5.1: σ·r + |r − 1| ≤ 1/3)
        if I[HAS_FACTOR] == 0 or S[H_JAC] < 0.0:
            I[NEED_JAC] = 1
            S[RELAX] = 1.0
        else:
            r = h / S[H_JAC]
            if S[SIGMA] * r + abs(r - 1.0) <= 1.0 / 3.0:
                I[NEED_JAC] = 0
                S[RELAX] = 2.0 * h / (h + S[H_JAC])
            else:
                I[NEED_JAC] = 1
                S[RELAX] = 1.0
        fresh = I[NEED_JAC] == 1 or I[HAS_FACTOR] == 0
        # predictor (eq. 30 corrected, eq. 31), a rescaled to h
        t1 = t + h
        bh2, gh = b * h * h, g * h
        rescale = h_last > 0.0 and h != h_last
        # Newton norm (velocity weights floored at 100 rounding units) and the
        # stall norm: once the iteration
        # stops contracting, updates below ROUNDOFF·ε·max(1, |q|) in q (γ/(β h)
        # times that in v) are converged
        floor = (100.0 * EPS * g / (b * h)) * qmax
        qfloor = ROUNDOFF * EPS * qmax / NEWTON_TOL
        vfloor = (g / (b * h)) * qfloor
        bh = b * h
        for i in range(n):
            ai = a_old[i]
            if rescale:
                ai = qdd[i] + (h / h_last) * (a_old[i] - qdd[i])
            qdd_p = (am * ai + (1.0 - am - af) * qdd[i]) / (1.0 - af)
            v_p = v[i] + h * ((1.0 - g) * ai + g * qdd[i])
            q_p = q[i] + h * v[i] + (h * h) * ((0.5 - b) * ai + b * qdd[i])
            wv0 = rtol * abs(v[i]) + atol
            w_v[i] = wv0 + floor
            if ggl:
                # GGL Newton start: ŷ = h·x_rate, x̂ = h ŷ; q = q0 + β h x,
                # q' = q'0 + γ x, v = v0 + γ h y, v' = q''0 + η y
                yh = h * x_rate[i]
                xh = h * yh
                y_hat[i] = yh
                x_hat[i] = xh
                q0[i] = q_p + bh * xh
                qd0[i] = v_p + g * xh
                v0[i] = v_p + gh * yh
                qdd0[i] = qdd_p + eta * yh
                scale[i] = bh / w[i]                    # s_x
                sy[i] = gh / w_v[i]
                s_mu[i] = scale[i] / g
                if mz > 0:
                    lam_scale[i] = sy[i] * minv_d[i] / eta
                continue
            xh = h * x_rate[i]
            x_hat[i] = xh
            qdd0[i] = qdd_p + eta * xh
            v0[i] = v_p + gh * xh
            q0[i] = q_p + bh2 * xh
            scale[i] = max(bh2 / w[i], gh / w_v[i])
            scale_r[i] = max(bh2 / (w[i] + qfloor), gh / (wv0 + vfloor))
            if mz > 0:
                lam_scale[i] = scale[i] * minv_d[i] / eta
                lam_scale_r[i] = scale_r[i] * minv_d[i] / eta
        for k in range(mz):
            lam_hat[k] = lam_old[k] + h * lam_rate[k]
        cq = bh if ggl else bh2   # q = q0 + cq·x (numba: no inline conditional in a call)
        converged, iters, status = _newton(fns, S, I, LU, p, u, n, m, t1, h, q0, v0, qdd0, lam_hat,
                                           cq, gh, eta, scale, CqT, lam_scale, scale_r,
                                           lam_scale_r, delta, F, Jw, work, ggl, qd0, b, g, sy, s_mu)
        if status == SINGULAR or status == NONFINITE_MATRIX:
            S[F_H] = h
            return status
        if converged and not fresh and iters >= REFRESH_AFTER:
            S[SIGMA] = 1.0
        if not converged:
            I[ST_REJ] += 1
            I[NEED_JAC] = 1
            S[RELAX] = 1.0
            rejections += 1
            if h * 0.5 < h_min or rejections > MAX_REJECTIONS:
                S[F_H] = h
                return NEWTON_FAILED
            h *= 0.5
            lands = False
            continue
        # x: the acceleration innovation (index 3: x; GGL: y) that a and x_rate keep
        x = work[40]
        for i in range(n):
            x[i] = y_hat[i] + delta[n + i] if ggl else x_hat[i] + delta[i]
        if fixed:
            break
        if ggl:
            # eq. 39's estimate Ξ = (h · max(‖x‖_q, ‖y‖_v))^{1/2} (W of the user's tolerances;
            # the v weights floored at GGL_VELOCITY_FLOOR · ‖v‖∞)
            xt = x_hat + delta[:n]
            xq = 0.0
            xv = 0.0
            vinf = 0.0
            for i in range(n):
                if abs(v[i]) > vinf:
                    vinf = abs(v[i])
            for i in range(n):
                e = abs(xt[i]) / w[i]
                if e > xq or e != e:
                    xq = e
                e = abs(x[i]) / (rtol * _pymax(abs(v[i]), GGL_VELOCITY_FLOOR * vinf) + atol)
                if e > xv or e != e:
                    xv = e
            xi = math.sqrt(h * _pymax(xq, xv)) if n > 0 else 0.0
        else:
            # error estimate eq. 34 and step control eq. 36 with Algorithm 3 f
            xm = 0.0
            es = S[ERR_SCALE]                                 # tolerance proportionality
            if es < 1.0:
                # rounding floor of h² x; with tangent_estimate on its normal
                # part x − P x only (_tangent_part)
                errfloor = (10.0 * ROUNDOFF * EPS / b) * qmax
                if m > 0 and S[ERR_TANGENT] == 1.0:
                    xt = _tangent_part(fns, S, I, p, n, m, q0 + bh2 * delta[:n], t1, x)
                    et = 0.0
                    for i in range(n):
                        e = abs(xt[i]) / (es * w[i])
                        if e > et:
                            et = e
                    for i in range(n):
                        e = abs(x[i] - xt[i]) / (es * w[i] + errfloor)
                        if e > xm:
                            xm = e
                    xm = _pymax(et, xm)
                else:
                    for i in range(n):
                        e = abs(x[i]) / (es * w[i] + errfloor)
                        if e > xm:
                            xm = e
            else:
                for i in range(n):
                    e = abs(x[i]) / (es * w[i])
                    if e > xm:
                        xm = e
            xi = (h * h * xm) ** (1.0 / 3.0) if n > 0 else 0.0
        h_err = h * SAFETY / xi if xi > 0.0 else math.inf
        h_new = min(h_err, MAX_GROWTH * h)
        if xi <= 1.0:
            if h < h_new < DEADBAND * h:
                h_new = h
            break
        I[ST_REJ] += 1
        rejections += 1
        h_try = h_new if not failed_once else 0.5 * h
        failed_once = True
        if h_try < h_min or rejections > MAX_REJECTIONS:
            S[F_H] = h
            S[F_INFO] = xi
            return ERROR_TEST_FAILED
        h = h_try
        lands = False
    # accept
    q1, v1, qdd1, lam1 = work[41], work[42], work[43], work[44]
    if ggl:
        bh = b * h
        for i in range(n):
            q1[i] = q0[i] + bh * delta[i]
            v1[i] = v0[i] + gh * delta[n + i]
            qdd1[i] = qdd0[i] + eta * delta[n + i]
        for k in range(mz):
            lam1[k] = lam_hat[k] + delta[2 * n + k]
    else:
        for i in range(n):
            q1[i] = q0[i] + bh2 * delta[i]
            v1[i] = v0[i] + gh * delta[i]
            qdd1[i] = qdd0[i] + eta * delta[i]
        for k in range(mz):
            lam1[k] = lam_hat[k] + delta[n + k]
    S[T_PREV] = t
    S[o_yp:o_yp + 2 * n] = S[o_y:o_y + 2 * n]
    S[o_qddp:o_qddp + n] = qdd
    for i in range(n):
        S[o_a + i] = qdd[i] + x[i]
    S[H_LAST] = h
    for i in range(n):
        S[o_xr + i] = x[i] / h
    for k in range(mz):
        S[o_lr + k] = (lam1[k] - lam_old[k]) / h
    S[T] = t_limit if lands else t + h
    if fixed:
        S[H_NEXT] = S[H_FIXED]
    elif lands and h < h_prop:
        S[H_NEXT] = min(h_err, max(MAX_GROWTH * h, h_prop))
    else:
        S[H_NEXT] = h_new
    if I[PROJECT] == 1 and m > 0:
        _project_velocity(fns, S, I, p, n, m, q1, v1, S[T], work)
    S[o_y:o_y + n] = q1
    S[o_y + n:o_y + 2 * n] = v1
    S[o_qdd:o_qdd + n] = qdd1
    S[o_lam:o_lam + mz] = lam1
    I[ST_STEPS] += 1
    return OK


def advance(fns, S, I, LU, u, p, t_target, max_steps, whole):
    """Steps until t = t_target (exactly) or ``max_steps`` steps were taken
    (with ``whole``: not reaching the target is the failure STEP_BUDGET).
    Returns a status code; on failure S, I and LU are as they were on entry
    (all or nothing) except the failure slots F_H, F_INFO, F_T and I[REASON]."""
    n, m, ng = I[I_N], I[I_M], n_nonholonomic(I)
    N = matrix_size(n, m, I[GGL], ng)
    r, c = LU.shape
    work = workspace(n, m + ng, S.shape[0] + r * c + 2 * N + N * N)
    rest = work[47]
    S0, o = _cut(rest, 0, S.shape[0])
    LU0_flat, o = _cut(rest, o, r * c)
    delta, o = _cut(rest, o, N)
    F, o = _cut(rest, o, N)
    Jw_flat, o = _cut(rest, o, N * N)
    LU0, Jw = LU0_flat.reshape((r, c)), Jw_flat.reshape((N, N))
    S0[:] = S        # the snapshot: all or nothing
    LU0[:, :] = LU
    I0 = I.copy()
    k = 0
    while S[T] < t_target and k < max_steps:
        status = step(fns, S, I, LU, u, p, t_target, work, delta, F, Jw)
        if status != OK:
            t_fail, h_fail, info, reason = S[T], S[F_H], S[F_INFO], I[REASON]
            S[:] = S0
            I[:] = I0
            LU[:, :] = LU0
            S[F_T], S[F_H], S[F_INFO], I[REASON] = t_fail, h_fail, info, reason
            return status
        k += 1
    if whole and S[T] < t_target:
        S[:] = S0
        I[:] = I0
        LU[:, :] = LU0
        return STEP_BUDGET
    return OK


def entry(fns, mode, S, I, LU, u, p, t_target, max_steps, y_out):
    """The method's one entry point, compiled once per machine (cosim.jit.method_entry)
    or run as plain Python: the model arrives as ``fns``, its kernels in
    ``cosim.models.kernels`` field order (compiled functions of fixed signatures, or
    the plain Python functions).  Modes: RESTART; WHOLE_INTERVAL advances to
    ``t_target`` within ``max_steps``; ONE_STEP takes at most ``max_steps`` steps;
    RESTART_THEN_ADVANCE restarts (new inputs held) and then advances as
    WHOLE_INTERVAL — a failed restart returns RESTART_STATUS + its status with
    nothing changed.  After a successful advance the model's outputs at the new
    state go into ``y_out`` (the outputs kernel, fns[9]) unless it is empty."""
    if mode == RESTART:
        return restart(fns, S, I, u, p)
    if mode == RESTART_THEN_ADVANCE:
        status = restart(fns, S, I, u, p)
        if status != OK:
            return RESTART_STATUS + status
    status = advance(fns, S, I, LU, u, p, t_target, max_steps, mode != ONE_STEP)
    if status == OK and y_out.shape[0] > 0:
        y_out[:] = 0.0
        n = I[I_N]
        fns[9](S[N_SCALARS:N_SCALARS + n], S[N_SCALARS + n:N_SCALARS + 2 * n], S[T], u, p, y_out)
    return status
