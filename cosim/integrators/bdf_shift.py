"""A new held input for the BDF family (:mod:`cosim.integrators.bdf_kernel`): the
history shifted onto the past of the solution under the new input, so that order and
step are kept (docs/methods/bdf.md "A new held input").  A kernel function, run
compiled (the entry's modes NEW_INPUTS and RESTART_THEN_ADVANCE) or as plain Python.

The record keeps, after its arrays (at ``offsets(…)[O_END]``), the held input the
history was built under: every advance writes ``u`` there, so that a caller that
writes new inputs into ``u`` in place (the FMU binary) leaves the old ones in the
record."""
import numpy as np

from .bdf_record import I_M, I_N, I_NS, N_STEPS, NEED_JAC, O_D, O_DZ, O_END, O_LAM, O_QDD, O_TAU, O_Y, \
    O_YP, OK, ROWS, SHIFT_MAX, SHIFT_REFUSED, T, T_PREV, VALID, offsets
from .kernel_common import FACTORED, restart_accelerations


def held_input_into(S, I, u):
    """The held input ``u`` into the record's slot after its arrays (as far as it holds)."""
    o = offsets(I[I_N], I[I_M], I[I_NS])[O_END]
    for i in range(min(u.size, S.size - o)):
        S[o + i] = u[i]


def held_input(S, I, n_u):
    """A copy of the held input in the record's slot (n_u entries, as far as it holds)."""
    o = offsets(I[I_N], I[I_M], I[I_NS])[O_END]
    u = np.zeros(n_u)
    for i in range(min(n_u, S.size - o)):
        u[i] = S[o + i]
    return u


def new_inputs(fns, S, I, u, p):
    """Mode NEW_INPUTS: the history shifted from the held input in the record to ``u``
    (:func:`shift_history`), which the record then holds."""
    status = shift_history(fns, S, I, held_input(S, I, u.size), u, p)
    if status == OK:
        held_input_into(S, I, u)
    return status


def _eq10(fns, X, t, y, o_y, n, m, u, p, out, o_out):
    """q'', λ (seed 000 eq. 10, :func:`kernel_common.restart_accelerations`) at (t, y =
    y[o_y:o_y + 2n]) under ``u`` into out[o_out:o_out + n + m]; X is scratch (t in slot 0,
    the failure slots 1, 2, then y, q'', λ).  False where eq. 10 is singular."""
    X[0] = t
    for i in range(2 * n):
        X[3 + i] = y[o_y + i]
    if restart_accelerations(fns, X, u, p, n, m, 0, 3, 3 + 2 * n, 3 + 3 * n, (0, 1, 2)) != FACTORED:
        return False
    for i in range(n + m):
        out[o_out + i] = X[3 + 2 * n + i]
    return True


def shift_history(fns, S, I, u_old, u_new, p):
    """Carry the difference arrays across a jump of the held input from ``u_old`` to
    ``u_new`` at t_n (OK), or leave the record as it is (SHIFT_REFUSED: no step since
    the last start, eq. 10 singular, a shift over SHIFT_MAX; the caller restarts).

    The solution under ``u_new`` through the current (q, v) differs from the one the
    history follows by its acceleration jump: Δa = q''(u_new) − q''(u_old) at the
    current state (eq. 10 twice; M, C_q and γ are the same, so Δa is M⁻¹ΔQ on the
    constraints' tangent space, C_q Δa = 0).  So the history points s_i = t_{n−i} − t_n
    are moved by the jump polynomial

        Δq(s) = Δa s²/2 + Δa' s³/6,   Δv(s) = Δa s + Δa' s²/2,   Δq''(s) = Δa + Δa' s

    (λ likewise with Δλ, Δλ'), zero at s = 0 for (q, v): y_n is unchanged.  Δa', the
    jump of the third derivative, is a backward difference over the last step:
    q''(u_new) at the previous point moved by the quadratic part, minus q''(u_old)
    at the previous point, so that it also holds the forces' response to the
    velocity change (∂Q/∂v Δa).  With Δa' = 0 (no difference to take) the history
    is off by Δa' s³/6, which at order ≥ 3 the first step's error estimate sees
    (driven Andrews, three forms × rtol 1e-4, 1e-6, 1e-8: the Δa' term saves 6-25 %
    of the steps in 8 of the 9 runs).  The difference arrays are linear in the
    values: each row j gains the modified divided difference (eqs. 57-58) of the
    polynomial over the history's grid τ, (∏_{i≤j} τ_i)·[p_0, …, p_j]; with s_0 = 0,
    [s] = (1, 0, …), [s²] = (s_1, 1, 0, …), [s³] = (s_1², s_1 + s_2, 1, 0, …) in rows
    1, 2, 3, …"""
    if I[N_STEPS] == 0:
        return SHIFT_REFUSED   # the order-1 start's history is ẏ_0 alone: the restart renews it
    n, m = I[I_N], I[I_M]
    N = n + m
    o = offsets(n, m, I[I_NS])
    o_y, o_yp, o_qdd, o_lam, o_D, o_Dz, o_tau = o[O_Y], o[O_YP], o[O_QDD], o[O_LAM], o[O_D], o[O_DZ], o[O_TAU]
    n2 = 2 * n
    t, t_prev = S[T], S[T_PREV]
    X = np.empty(3 + 3 * n + m)
    A = np.empty(4 * N)        # q'', λ: new and old at t_n, new and old at t_{n−1}
    d = np.empty(2 * N)        # (Δa, Δλ), (Δa', Δλ')
    if not _eq10(fns, X, t, S, o_y, n, m, u_new, p, A, 0):
        return SHIFT_REFUSED
    if not _eq10(fns, X, t, S, o_y, n, m, u_old, p, A, N):
        return SHIFT_REFUSED
    for i in range(N):
        d[i] = A[i] - A[N + i]
    has_dj = False
    if t_prev < t:   # Δa', Δλ' over the last step (taken under u_old)
        hp = t - t_prev
        moved = np.empty(n2)
        for i in range(n):
            moved[i] = S[o_yp + i] + (0.5 * hp * hp) * d[i]
            moved[n + i] = S[o_yp + n + i] - hp * d[i]
        if _eq10(fns, X, t_prev, moved, 0, n, m, u_new, p, A, 2 * N) and \
                _eq10(fns, X, t_prev, S, o_yp, n, m, u_old, p, A, 3 * N):
            has_dj = True
            for i in range(N):
                d[N + i] = (d[i] - (A[2 * N + i] - A[3 * N + i])) / hp
    rows = min(I[VALID], ROWS - 1)
    tau0, tau1, tau2 = S[o_tau], S[o_tau + 1], S[o_tau + 2]
    # the size test: a bound of the shift over the history points the rows span
    far = S[o_tau + rows - 1]
    for i in range(n):
        bound = (0.5 * far * far) * abs(d[i])
        if has_dj:
            bound += (far * far * far / 6.0) * abs(d[N + i])
        y = abs(S[o_y + i])
        if not bound <= SHIFT_MAX * (y if y > 1.0 or y != y else 1.0):
            return SHIFT_REFUSED
    s1, s2 = -tau0, -tau1
    p1, p2, p3 = tau0, tau0 * tau1, tau0 * tau1 * tau2   # ∏_{i≤j} τ_i
    rq, rv = min(rows, 3), min(rows, 2)
    cq = (0.5 * s1 * p1, 0.5 * p2, 0.0)                                  # Δa s²/2
    cv = (p1, 0.0)                                                       # Δa s
    cq3 = (s1 * s1 / 6.0 * p1, (s1 + s2) / 6.0 * p2, p3 / 6.0)           # Δa' s³/6
    cv3 = (0.5 * s1 * p1, 0.5 * p2)                                      # Δa' s²/2
    for j in range(rq):
        row = o_D + (1 + j) * n2
        for i in range(n):
            S[row + i] += cq[j] * d[i]
    for j in range(rv):
        row = o_D + (1 + j) * n2 + n
        for i in range(n):
            S[row + i] += cv[j] * d[i]
    if has_dj:
        for j in range(rq):
            row = o_D + (1 + j) * n2
            for i in range(n):
                S[row + i] += cq3[j] * d[N + i]
        for j in range(rv):
            row = o_D + (1 + j) * n2 + n
            for i in range(n):
                S[row + i] += cv3[j] * d[N + i]
        for i in range(N):                                               # Δa' s, Δλ' s
            S[o_Dz + N + i] += p1 * d[N + i]
    for i in range(n):
        S[o_qdd + i] += d[i]
    for k in range(m):
        S[o_lam + k] += d[n + k]
    S[T_PREV] = t                      # (no dense output across the jump)
    for i in range(n2):
        S[o_yp + i] = S[o_y + i]
    I[NEED_JAC] = 1                    # the forces' Jacobians may depend on u
    return OK
