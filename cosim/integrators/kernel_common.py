"""What every method's kernel shares, written once: the quasi-Newton loop with its
decisions (seed 000 §5.1, Algorithm 2: :func:`quasi_newton`, run by every implicit
method — generalized-α, the BDF family, local-index1, spark, block-lstable — which
supplies only its iteration matrix, its residual, the norm of an update and, for
generalized-α, a stall test), the matrix reuse test (Algorithm 3 g), its LU with checks, the
consistent accelerations (eq. 10: every kernel's solve of [[M, C_qᵀ], [C_q, 0]]), the
step clamp towards a target time, the weighted norms (eq. 35) and the one-step
methods' error ratio, the first step of every adaptive method (:func:`initial_step`,
called by the integrator objects with their estimate), the step-size control after an
attempt, and the verdict on a fixed step's local error estimate.  Spark and
block-lstable take their fixed h from ``Integrator._fixed_step_size``.

Kept in a method on purpose, because its seed paper's algorithm differs: the
step-size controllers of generalized-α (eq. 36 with the deadband, Algorithm 3 f),
of the BDF family (step and order selection) and of rkc-penalty (rkc.f's
second-order controller), beside :func:`next_step` (dopri5/rk4, local-index1).

The norms (eq. 35), also the first-step estimates': which method uses which, and why
the others stay in their methods: docs/compiled-backend.md ("The norms").

Plain functions of numbers and arrays: pasted into each compiled method (``helpers``
of :func:`cosim.jit.method_entry`, after :mod:`.dense_lu`), called as plain Python by
the python backend (and ``clamp_step`` by the Integrator base class).
"""
import math

import numpy as np

from .dense_lu import ldl_factor_inplace, lu_factor_inplace, lu_solve_inplace, pivot_ratio, scaled_pivot_ratio

EPS = 2.220446049250313e-16
# inlined by numba into their one caller in each compiled method (cosim.jit.method_inlined)
INLINED = ("snapshot_in", "end_advance", "model_outputs")

# -- the model's functions in a kernel's ``fns`` (cosim.jit.kernel_fields() order) -------
(FN_MASS, FN_FORCES, FN_CONSTRAINTS, FN_CONSTRAINT_JACOBIAN, FN_CONSTRAINT_DT, FN_GAMMA,
 FN_FORCE_JACOBIANS, FN_CONSTRAINT_FORCE_JACOBIAN, FN_MASS_JACOBIAN_TERM, FN_OUTPUTS,
 FN_NH_MATRIX, FN_NH_OFFSET, FN_NH_GAMMA, FN_NH_FORCE_JACOBIAN, FN_NH_VELOCITY_JACOBIAN) = range(15)
# a first-order model x' = f(t, x, u) gives f in the forces slot (model_functions)
FN_RHS = FN_FORCES

# -- quasi-Newton (Algorithm 2) ----------------------------------------------------
# verdicts of newton_verdict
NEWTON_CONTINUE = 0      # take another update with the same matrix
NEWTON_CONVERGED = 1
NEWTON_REFRESH = 2       # contracting too slowly: re-form the matrix, then continue
NEWTON_SLOW = 3          # ‖Δδ‖ > 0.9‖Δδ_old‖: the caller's stall test, else refresh
NEWTON_LAST_CHANCE = 0.33   # after the last iteration: accepted when σ/(1−σ)‖Δδ‖ ≤ this
PIVOT_RATIO_MIN = 1e-14  # LU pivots min/max at or below this: numerically singular


def newton_verdict(it, n_j, dnorm, old_norm, sigma, err, tol, err_tol, prior_rate, rate_only):
    """Algorithm 2 steps 4-5 after update ``it`` of a solve (the ``n_j``-th with the
    current matrix; ``old_norm`` < 0: none before it with this matrix), ``dnorm`` =
    ‖Δδ‖ in the method's norm (1 ≈ the tolerance).  Returns (verdict, σ, err):

    * ‖Δδ‖ < ``tol`` converges (not with ``rate_only``);
    * ``prior_rate`` (Hairer & Wanner's RADAU5 test): a first update ‖Δδ‖ < 1 whose
      rate σ from the previous solve predicts σ/(1−σ)‖Δδ‖ < ``err_tol`` converges,
      and σ is relaxed to σ^0.8 so that an unmeasured rate is re-measured;
    * the rate σ = max(σ/2, ‖Δδ‖/‖Δδ_old‖) measured with this matrix: converged when
      err = σ/(1−σ)‖Δδ‖ < ``err_tol``; refresh the matrix when the iteration would
      not get there within 5 updates of it (err·σ^(5−n_j) > 1/2);
    * ``rate_only`` (the GGL form): accept on the rate test only;
    * an update of exactly zero converges whatever the rule.

    ``err`` is returned unchanged unless this update measured it; after the last
    iteration :data:`NEWTON_LAST_CHANCE` judges it."""
    if dnorm == 0.0:   # the update vanished (the residual is exactly zero): converged in
        return NEWTON_CONVERGED, sigma, err   # every rule (and no 0/0 in the rate below)
    if not rate_only:
        if dnorm < tol:
            return NEWTON_CONVERGED, sigma, err
        if prior_rate and it == 1 and dnorm < 1.0 and 0.0 < sigma < 1.0 \
                and sigma / (1.0 - sigma) * dnorm < err_tol:
            return NEWTON_CONVERGED, sigma ** 0.8, err
    if n_j == 1 or old_norm < 0.0:
        return NEWTON_CONTINUE, 0.0, err
    if dnorm > 0.9 * old_norm:
        return NEWTON_SLOW, sigma, err
    sigma = max(0.5 * sigma, dnorm / old_norm)
    err = sigma / (1.0 - sigma) * dnorm
    if err < err_tol:
        return NEWTON_CONVERGED, sigma, err
    if n_j >= 5 or err * sigma ** float(5 - n_j) > 0.5:   # (float: pow as in Python)
        return NEWTON_REFRESH, sigma, err
    return NEWTON_CONTINUE, sigma, err


def keeps_matrix(sigma, h_new, h_jac):
    """Algorithm 3 g (seed 000 §5.1): may a solve with step ``h_new`` keep the matrix
    formed with ``h_jac`` (< 0: none)?  σ·r + |r − 1| ≤ 1/3 with r = h_new/h_jac."""
    if not h_jac > 0.0:
        return False
    r = h_new / h_jac
    return sigma * r + abs(r - 1.0) <= 1.0 / 3.0


def relaxation(h_new, h_jac):
    """The relaxation ν = 2 h_new/(h_new + h_jac) of updates with a kept matrix."""
    return 2.0 * h_new / (h_new + h_jac)


def newton_start(delta, N, sigma):
    """The start of a quasi-Newton solve: δ = 0 over the first N entries.  Returns
    (old_norm, n_j, err, σ) = (−1: no update with this matrix yet, 0, ∞, ``sigma``:
    the rate kept from the last solve) for :func:`newton_verdict`."""
    for i in range(N):
        delta[i] = 0.0
    return -1.0, 0, math.inf, sigma


def matrix_formed(S, I, h, ints, floats):
    """Bookkeeping after a new iteration matrix for step h was factored: with
    ``ints`` = (HAS_FACTOR, ST_LU, NEED_JAC) slots of I and ``floats`` = (H_JAC,
    RELAX) slots of S, the factor is kept, counted and fresh, formed with h, and the
    updates unrelaxed.  Returns (n_j, old_norm) = (0, −1) for newton_verdict."""
    I[ints[0]] = 1
    I[ints[1]] += 1
    I[ints[2]] = 0
    S[floats[0]] = h
    S[floats[1]] = 1.0
    return 0, -1.0


def relaxed_update(LU, piv, F, delta, N, relax):
    """One quasi-Newton update with the kept factor: F ← −ν J⁻¹F (ν = ``relax``),
    δ ← δ + F over the first N entries."""
    lu_solve_inplace(LU, piv, F)
    for i in range(N):
        F[i] *= -relax
        delta[i] += F[i]


# -- the quasi-Newton loop (Algorithm 2), one implementation for every implicit method ----
# The loop below asks its method for what only the method knows: it returns the next
# job, the method does it and calls again with the answer ``x`` ("reverse
# communication": numba cannot cache a function that is given another as argument).
JOB_MATRIX = 0     # form and factor the iteration matrix at δ: x = 0, or ≠ 0: the method's failure code
JOB_RESIDUAL = 1   # F ← the residual at δ: x = 0, or ≠ 0: the method's failure code
JOB_NORM = 2       # F holds the update Δδ: x = ‖Δδ‖ in the method's norm
JOB_STALL = 3      # a slow update (NEWTON_SLOW): x = 1 when it is a stall at rounding (converged)
NEWTON_END = 4     # jobs ≥ this: the solve ended with reason job − NEWTON_END, one of
QN_SOLVED = 0
QN_RESIDUAL = 1    # the residual is not finite        (every record's R_RESIDUAL / C_RESIDUAL)
QN_UPDATE = 2      # the update is not finite           (R_UPDATE / C_UPDATE)
QN_NO_CONVERGENCE = 3   # no convergence in max_iter updates (R_NO_CONVERGENCE / C_NO_CONVERGENCE)
QN_ABORTED = 4     # a job failed: its answer x is the method's code
# the fields of the loop's state (quasi_newton): the update number, n_j, ‖Δδ_old‖, err, σ,
# ‖Δδ‖, whether a matrix was formed in this solve, whether a failure is retried
(NS_ITERATION, NS_N_J, NS_OLD_NORM, NS_ERR, NS_SIGMA, NS_DNORM, NS_FRESH, NS_KEPT) = range(8)
# a method's NEWTON_RULE (newton_begin): its options, then the slots of its record
(RULE_MAX_ITER, RULE_PRIOR_RATE, RULE_STALL_TEST, RULE_HAS_FACTOR, RULE_ST_LU, RULE_NEED_JAC,
 RULE_ST_RES, RULE_ST_NEWTON, RULE_H_JAC, RULE_RELAX, RULE_SIGMA) = range(11)


def newton_begin(S, I, delta, N, rule):
    """The start of a solve (δ = 0 over N entries): returns (first job, loop state) for
    :func:`quasi_newton`, ``rule`` = (max_iter, prior_rate, stall_test, HAS_FACTOR,
    ST_LU, NEED_JAC, ST_RES, ST_NEWTON, H_JAC, RELAX, SIGMA): the method's Newton
    options and the slots of its record (I: the first five, S: the last three)."""
    old_norm, n_j, err, sigma = newton_start(delta, N, S[rule[RULE_SIGMA]])
    kept = 0 if I[rule[RULE_NEED_JAC]] == 1 or I[rule[RULE_HAS_FACTOR]] == 0 else 1
    return (JOB_RESIDUAL if kept == 1 else JOB_MATRIX), (1, n_j, old_norm, err, sigma, 0.0, 0, kept)


def newton_end(reason, state, S, I, delta, N, rule):
    """The end of a solve for ``reason``, or (Algorithm 2: a failure with an old matrix
    is not a failure of the step) when a solve that started with a factor kept from an
    earlier step failed, its one retry: δ = 0 again and the matrix re-formed there.
    Returns (job, state) for :func:`quasi_newton`."""
    if reason == QN_SOLVED or state[NS_KEPT] == 0:
        return NEWTON_END + reason, state
    I[rule[RULE_NEED_JAC]] = 1
    old_norm, n_j, err, sigma = newton_start(delta, N, S[rule[RULE_SIGMA]])
    return JOB_MATRIX, (1, n_j, old_norm, err, sigma, 0.0, 0, 0)


def quasi_newton(job, x, state, S, I, LU, piv, F, delta, N, h, tol, err_tol, rate_only, rule):
    """Seed 000 Algorithm 2 with LU reuse and relaxation, one job at a time: called
    with the ``job`` :func:`newton_begin` or the last call returned, done by the
    method with answer ``x``; returns (next job, state).  Forms the matrix when
    I[NEED_JAC] asks or no factor is kept (:func:`matrix_formed` after it), counts
    the residual, fails on a non-finite residual or update, takes the
    :func:`relaxed_update`, judges it with :func:`newton_verdict` (tolerances
    ``tol``, ``err_tol``; ``rule``: see :func:`newton_begin`) — a slow update asks
    the method's stall test when ``rule[RULE_STALL_TEST]``, else re-forms the matrix — and after
    ``max_iter`` updates accepts on :data:`NEWTON_LAST_CHANCE`.  S[SIGMA] keeps the
    rate.  A failed solve that started with a kept factor is retried once
    (:func:`newton_end`).  ``state`` = (update number, n_j, ‖Δδ_old‖, err, σ, ‖Δδ‖,
    whether a matrix was formed in this solve, whether a failure is retried)."""
    it, n_j, old_norm, err, sigma, dnorm, fresh, kept = state
    if job == JOB_MATRIX:
        if x != 0.0:
            return newton_end(QN_ABORTED, state, S, I, delta, N, rule)
        n_j, old_norm = matrix_formed(S, I, h, (rule[RULE_HAS_FACTOR], rule[RULE_ST_LU], rule[RULE_NEED_JAC]), (rule[RULE_H_JAC], rule[RULE_RELAX]))
        return JOB_RESIDUAL, (it, n_j, old_norm, err, sigma, dnorm, 1, kept)
    if job == JOB_RESIDUAL:
        if x != 0.0:
            return newton_end(QN_ABORTED, state, S, I, delta, N, rule)
        I[rule[RULE_ST_RES]] += 1
        I[rule[RULE_ST_NEWTON]] += 1
        if not all_finite(F):
            I[rule[RULE_NEED_JAC]] = 1
            S[rule[RULE_SIGMA]] = sigma
            return newton_end(QN_RESIDUAL, state, S, I, delta, N, rule)
        relaxed_update(LU, piv, F, delta, N, S[rule[RULE_RELAX]])
        return JOB_NORM, (it, n_j + 1, old_norm, err, sigma, dnorm, fresh, kept)
    if job == JOB_NORM:
        dnorm = x
        if not math.isfinite(dnorm):
            I[rule[RULE_NEED_JAC]] = 1
            return newton_end(QN_UPDATE, state, S, I, delta, N, rule)
        verdict, sigma, err = newton_verdict(it, n_j, dnorm, old_norm, sigma, err, tol, err_tol,
                                             rule[RULE_PRIOR_RATE] == 1, rate_only)
        if verdict == NEWTON_SLOW and rule[RULE_STALL_TEST] == 1:
            return JOB_STALL, (it, n_j, old_norm, err, sigma, dnorm, fresh, kept)
    else:   # JOB_STALL
        verdict = NEWTON_CONVERGED if x != 0.0 else NEWTON_REFRESH
    if verdict == NEWTON_CONVERGED:
        S[rule[RULE_SIGMA]] = sigma
        return NEWTON_END + QN_SOLVED, state
    if verdict != NEWTON_CONTINUE:   # diverging, stalling or too slow: re-form the matrix
        I[rule[RULE_NEED_JAC]] = 1
    if it == rule[RULE_MAX_ITER]:
        S[rule[RULE_SIGMA]] = sigma
        I[rule[RULE_NEED_JAC]] = 1
        return newton_end(QN_SOLVED if err <= NEWTON_LAST_CHANCE else QN_NO_CONVERGENCE, state, S, I,
                          delta, N, rule)
    job = JOB_MATRIX if I[rule[RULE_NEED_JAC]] == 1 or I[rule[RULE_HAS_FACTOR]] == 0 else JOB_RESIDUAL
    return job, (it + 1, n_j, dnorm, err, sigma, dnorm, fresh, kept)


# factor_matrix statuses
FACTORED = 0
MATRIX_NONFINITE = 1
MATRIX_SINGULAR = 2


def factor_matrix(J, LU, piv, N, spd=False):
    """LU ← the LU factors of the leading N×N block of ``J`` (:mod:`.dense_lu`, pivots
    in ``piv``).  Returns (status, pivot ratio): :data:`MATRIX_NONFINITE` when J has
    a NaN or inf (LU untouched), :data:`MATRIX_SINGULAR` when min/max |pivot| ≤
    :data:`PIVOT_RATIO_MIN` on J and on J equilibrated (:func:`.dense_lu.scaled_pivot_ratio`:
    a heavy body is not a singular matrix), else :data:`FACTORED`.  ``spd`` (a mass
    matrix; J is not LU): by :func:`.dense_lu.ldl_factor_inplace` (L D Lᵀ stored as LU
    factors, piv[k] = k; min/max d_k judged) when J is symmetric positive definite, else
    by partial pivoting as any matrix."""
    for i in range(N):
        for j in range(N):
            if not math.isfinite(J[i, j]):
                return MATRIX_NONFINITE, 0.0
    for i in range(N):
        for j in range(N):
            LU[i, j] = J[i, j]
    info = ldl_factor_inplace(LU, piv) if spd else 1
    if info != 0:
        if spd:   # not symmetric positive definite: partial pivoting from J again
            for i in range(N):
                for j in range(N):
                    LU[i, j] = J[i, j]
        info = lu_factor_inplace(LU, piv)
    ratio = 0.0 if info != 0 else pivot_ratio(LU)
    if ratio <= PIVOT_RATIO_MIN and info == 0:  # the same factors, judged scale-free
        ratio = scaled_pivot_ratio(LU, piv)
    if ratio <= PIVOT_RATIO_MIN:
        return MATRIX_SINGULAR, ratio
    return FACTORED, ratio


# -- the consistent accelerations (seed 000 eq. 10) -------------------------------------
# [[M, C_qᵀ, Bᵀ], [C_q, 0, 0], [B, 0, 0]] [q''; λ; μ] = [Q; γ; γ_G] at (q, v, t): m
# holonomic rows C_q, g nonholonomic rows B (seed 000 §7; none for g = 0).  Every method
# solves it here: at a restart (local-index1, generalized-α, block-lstable), at the end of
# a step (spark), as the index-1 form's y' (eq. 88-89: dopri5/rk4, rkc-penalty) and as
# local-index1's ψ(q, v).
def augmented_factor(fns, p, n, m, g, q, t, M, Cq, K, LU, piv):
    """K (N×N, N = n + m + g) ← [[M, C_qᵀ, Bᵀ], [C_q, 0, 0], [B, 0, 0]] at (q, t), LU ← its
    LU factors, pivots in ``piv`` (``LU`` may be ``K``: factored in place); M and
    [C_q; B] are left in ``M`` and ``Cq`` ((m + g)×n).  Without constraint rows K is
    M, not copied: LU ← the L D Lᵀ factors of M (:func:`factor_matrix` ``spd``).  Returns
    :func:`factor_matrix`'s (status, pivot ratio)."""
    N = n + m + g
    M[:, :] = 0.0
    fns[FN_MASS](q, t, p, M)
    if N == n:   # no constraint rows: K = M, symmetric positive definite (L D Lᵀ)
        return factor_matrix(M, LU, piv, n, True)
    Cq[:, :] = 0.0
    if m > 0:
        fns[FN_CONSTRAINT_JACOBIAN](q, t, p, Cq)
    if g > 0:
        fns[FN_NH_MATRIX](q, t, p, Cq[m:])
    for i in range(N):
        for j in range(N):
            K[i, j] = 0.0
    for i in range(n):
        for j in range(n):
            K[i, j] = M[i, j]
    for k in range(m + g):
        for i in range(n):
            K[i, n + k] = Cq[k, i]
            K[n + k, i] = Cq[k, i]
    return factor_matrix(K, LU, piv, N)


def augmented_rhs(fns, p, u, n, m, g, q, v, t, Q, gam, rhs):
    """rhs[:n + m + g] ← [Q; γ; γ_G] at (q, v, t); Q and [γ; γ_G] are left in ``Q`` (n)
    and ``gam`` (m + g)."""
    Q[:] = 0.0
    fns[FN_FORCES](q, v, t, u, p, Q)
    gam[:] = 0.0
    if m > 0:
        fns[FN_GAMMA](q, v, t, p, gam)
    if g > 0:
        fns[FN_NH_GAMMA](q, v, t, p, gam[m:])
    for i in range(n):
        rhs[i] = Q[i]
    for k in range(m + g):
        rhs[n + k] = gam[k]


def consistent_accelerations(fns, p, u, n, m, g, t, q, v, M, Cq, K, LU, piv, Q, gam, rhs):
    """The consistent accelerations at (q, v, t) (seed 000 eq. 10): q'' into rhs[:n],
    [λ; μ] into rhs[n:n + m + g]; the factors stay in LU, ``piv`` (:func:`augmented_factor`,
    :func:`augmented_rhs`: the work arrays).  Returns :func:`factor_matrix`'s (status,
    pivot ratio); on a failure rhs is not written."""
    status, ratio = augmented_factor(fns, p, n, m, g, q, t, M, Cq, K, LU, piv)
    if status != FACTORED:
        return status, ratio
    augmented_rhs(fns, p, u, n, m, g, q, v, t, Q, gam, rhs)
    lu_solve_inplace(LU, piv, rhs)
    return FACTORED, ratio


def restart_accelerations(fns, S, u, p, n, m, g, o_y, o_qdd, o_lam, slots):
    """A restart's :func:`consistent_accelerations` on a record: at (q, v) = S[o_y:o_y + 2n]
    and t = S[slots[0]], q'' into S[o_qdd:o_qdd + n] and [λ; μ] into S[o_lam:o_lam + m + g]
    (work arrays allocated here).  Returns :func:`factor_matrix`'s status; on a failure
    only t and the pivot ratio are written, into S[slots[1]] and S[slots[2]] (``slots`` =
    (T, F_T, F_INFO) of the record)."""
    t = S[slots[0]]
    N = n + m + g
    q = S[o_y:o_y + n].copy()
    v = S[o_y + n:o_y + 2 * n].copy()
    rhs = np.zeros(N)
    status, ratio = consistent_accelerations(fns, p, u, n, m, g, t, q, v, np.zeros((n, n)), np.zeros((m + g, n)),
                                             np.zeros((N, N)), np.zeros((N, N)), np.zeros(N, dtype=np.int64),
                                             np.zeros(n), np.zeros(m + g), rhs)
    if status != FACTORED:
        S[slots[1]] = t
        S[slots[2]] = ratio
        return status
    for i in range(n):
        S[o_qdd + i] = rhs[i]
    for k in range(m + g):
        S[o_lam + k] = rhs[n + k]
    return status


# -- step clamp ------------------------------------------------------------------
def clamp_step(t, h, max_step, fixed, t_limit):
    """The step from ``t`` towards ``t_limit``: (h, lands, moves).  h is capped by
    ``max_step``; an adaptive step that would leave a sliver shorter than h/4 before
    the limit is stretched onto it (no tiny steps), a ``fixed`` step lands when the
    rest is a rounding sliver (t accumulates rounding over many fixed steps);
    ``moves`` is False when h is too small to change t (h ≤ 4 ε |t|, short of the
    limit): the caller fails with "step size underflow" instead of looping."""
    h = min(h, max_step)
    remaining = t_limit - t
    if not h > 4.0 * EPS * abs(t) and h < remaining:
        return h, False, False
    if fixed:
        if h >= remaining - 1e-6 * h:
            return remaining, True, True
        return h, False, True
    if h >= remaining or remaining - h < 0.25 * h:
        return remaining, True, True
    return h, False, True


def all_finite(x):
    """No NaN or inf in the vector ``x``."""
    for i in range(x.shape[0]):
        if not math.isfinite(x[i]):
            return False
    return True


# -- weighted norms (seed 000 eq. 35) ----------------------------------------------
def weighted_max(x, w, k):
    """max_i |x_i|·w_i over the first ``k`` entries (w: inverse error weights)."""
    s = 0.0
    for i in range(k):
        e = abs(x[i]) * w[i]
        if e > s or e != e:
            s = e
    return s


def scaled_max(x, w, s, floor, k):
    """max_i |x_i| / (s·w_i + ``floor``) over the first ``k`` entries (w: error weights,
    divided by; ``s`` a scale of them, ``floor`` a rounding floor; s = 1, floor = 0: the
    plain ‖x‖_W of eq. 35, the same bits); a NaN sticks."""
    r = 0.0
    for i in range(k):
        e = abs(x[i]) / (s * w[i] + floor)
        if e > r or e != e:
            r = e
    return r


def weighted_rms(x, w2, k):
    """√(Σ x_i²·w2_i / k) over the first ``k`` entries (w2: squared inverse error
    weights); 0 for k = 0."""
    if k == 0:
        return 0.0
    s = 0.0
    for i in range(k):
        s += x[i] * x[i] * w2[i]
    return math.sqrt(s / k)


def error_ratio(y, y_new, e, rtol, atol):
    """The error test's ratio of the one-step methods (dopri5/rk4, rkc-penalty,
    local-index1; Hairer-Nørsett-Wanner I, II.4): the RMS of e_i / (rtol·max(|y_i|,
    |y_new,i|) + atol) over the entries of y (the step's start and end)."""
    N = y.shape[0]
    if N == 0:
        return 0.0
    s = 0.0
    for i in range(N):
        a, b = abs(y[i]), abs(y_new[i])
        x = e[i] / (rtol * (a if a >= b else b) + atol)
        s += x * x
    return math.sqrt(s / N)


# -- the first step (every adaptive method; seed 000 eq. 35's norm) ------------------------
def initial_step(est, tiny, c, p, h_ref, h_zero, h_lo, h_hi):
    """Every step-size guess before the first step, and the pilot steps on the way
    (Hairer-Nørsett-Wanner I, II.4): the h whose term of order p, est·(h/h_ref)^p
    with ``est`` a weighted norm (1 ≈ the tolerance) for a step ``h_ref``, is the
    fraction ``c`` of the tolerance, h = h_ref·(c/est)^(1/p); ``h_zero`` when est or
    h_ref ≤ ``tiny`` (no information, also NaN); then clamped to [h_lo, h_hi].  (p = 1
    as c·h_ref/est, p = 2 by √: the numbers of the formulas it replaced.)  The callers,
    with a comment line on their parameters at each call: generalized-α, BDF,
    local-index1 (‖q''‖, p = 2), dopri5/rk4 (HNW's pilot 0.01·‖y0‖/‖f0‖, 1e-6 when a
    norm ≤ 1e-5 as in their HINIT, then their h1) and rkc-penalty (rkc.f's pilot
    h‖f0‖ = 0.1, then its Euler estimate)."""
    if est > tiny and h_ref > tiny:
        if p == 1:
            h = c * h_ref / est
        elif p == 2:
            h = h_ref * math.sqrt(c / est)
        else:
            h = h_ref * (c / est) ** (1.0 / p)
    else:
        h = h_zero
    return min(max(h, h_lo), h_hi)


# -- step-size control after an attempt (explicit RK, rkc-penalty, local-index1) ----------
def rejected_attempt(S, I, cause, err, h, fixed, rejections, h_min, control, slots):
    """After the ``rejections``-th failed attempt of step h (``cause`` ≠ 0, or the
    error ratio ``err`` > 1): the cause and ratio into the failure slots ``slots`` =
    (I cause, S ratio, S step, I rejection count).  A fixed step fails; an adaptive
    one is counted and retried with :func:`reduced_step` (``control`` = (min factor,
    safety, exponent, max rejections)), failing when below ``h_min`` or after too
    many rejections.  Returns (failed, h); S[slots[2]] = h on failure."""
    I[slots[0]] = cause
    S[slots[1]] = err
    if not fixed:
        I[slots[3]] += 1
        h = reduced_step(h, cause, err, control[0], control[1], control[2])
        if not (h < h_min or rejections > control[3]):
            return False, h
    S[slots[2]] = h
    return True, h


def reduced_step(h, cause, err, min_factor, safety, exponent):
    """The step after a rejected adaptive attempt: h/2 after a failure (``cause`` ≠ 0),
    else h·max(min_factor, safety·err^(−exponent))."""
    if cause != 0:
        return h * 0.5
    return h * max(min_factor, safety * err ** (-exponent))


def next_step(h, h_prop, err, rejected, lands, exponent, safety, max_factor, max_step):
    """The step proposed after an accepted adaptive step h (error ratio ``err``,
    proposal ``h_prop``): h·min(max_factor, safety·err^(−exponent)), not growing after
    a rejection, not below the proposal when the target cut h, at most ``max_step``."""
    if err == 0.0:
        factor = max_factor
    else:
        factor = min(max_factor, safety * err ** (-exponent))
    if rejected:
        factor = min(1.0, factor)
    h_new = h * factor
    if lands and h < h_prop and not rejected:
        h_new = max(h_new, h_prop)   # a step cut by the target says nothing new
    return min(h_new, max_step)


# -- a fixed step's accuracy rule (cosim.fixed_step) ---------------------------------
# a fixed step whose local error estimate (in the weights RTOL|y| + ATOL) exceeds
# UNRESOLVED / RTOL — some |e_k| > UNRESOLVED·(|y_k| + ATOL/RTOL), an error larger than
# the state itself — resolves nothing: the advance fails (cosim.fixed_step.UNRESOLVED)
UNRESOLVED = 1.0


def fixed_step_resolved(S, est, h, slots):
    """The verdict on a fixed step h (no error test decides it) from its local error
    estimate ``est`` in the user's tolerance weights, ``slots`` = (RTOL, F_H, F_INFO,
    FIXED_ERR) of S: one beyond the state's own scale (est·RTOL > :data:`UNRESOLVED`,
    or NaN) is False with S[F_H] = h, S[F_INFO] = est (the caller fails the advance);
    else True, the largest estimate so far kept in S[FIXED_ERR]."""
    if not est * S[slots[0]] <= UNRESOLVED:   # NaN too
        S[slots[1]] = h
        S[slots[2]] = est
        return False
    if est > S[slots[3]]:
        S[slots[3]] = est
    return True


# -- the all-or-nothing advance and the outputs after it (every method's entry) -------
def forget_step(S, t, t_prev, o_y, o_yp, k):
    """A restart's t_prev = t, y_prev = y (slots ``t``, ``t_prev`` of S; y the k
    entries at ``o_y``, y_prev those at ``o_yp``)."""
    S[t_prev] = S[t]
    for i in range(k):
        S[o_yp + i] = S[o_y + i]


def snapshot_in(rest, S, I, LU):
    """The snapshot of an all-or-nothing advance: S and LU copied into the work array
    ``rest`` (no allocation per call), I into a new array.  Returns (S0, I0, LU0)."""
    n_s = S.shape[0]
    r, c = LU.shape
    S0 = rest[:n_s]
    LU0 = rest[n_s:n_s + r * c].reshape((r, c))
    S0[:] = S
    LU0[:, :] = LU
    return S0, I.copy(), LU0


def end_advance(status, whole, t_target, S, I, LU, S0, I0, LU0, budget, kept, kept_int):
    """The end of an advance that took its steps from the snapshot S0, I0, LU0: status
    OK but short of ``t_target`` when the ``whole`` interval was asked for is
    ``budget`` (STEP_BUDGET).  On failure (status ≠ 0) the record is put back as it
    was (all or nothing) except the failure slots ``kept`` = (T, F_T, slots…): F_T ←
    t where it failed, the other slots of S and I[kept_int] as the failure left them.
    Returns the status."""
    if status == 0 and whole and S[kept[0]] < t_target:
        status = budget
    if status != 0:
        S0[kept[1]] = S[kept[0]]
        for j in range(2, len(kept)):
            S0[kept[j]] = S[kept[j]]
        I0[kept_int] = I[kept_int]
        S[:] = S0
        I[:] = I0
        LU[:, :] = LU0
    return status


def model_outputs(fns, status, S, o_y, n, t, u, p, y_out):
    """After a successful advance (``status`` 0): the model's outputs at (q, v) =
    S[o_y:o_y + 2n] and t into ``y_out`` (zero-filled first; nothing when it is
    empty).  Returns the status."""
    if status == 0 and y_out.shape[0] > 0:
        y_out[:] = 0.0
        fns[FN_OUTPUTS](S[o_y:o_y + n], S[o_y + n:o_y + 2 * n], t, u, p, y_out)
    return status


# -- array views without reference counting (compiled methods) ---------------------
def unowned(arrays):
    """``arrays`` (an array or a tuple of arrays) as they are.  In a compiled method
    (cosim.jit.method_entry) this name is a numba intrinsic that returns them without
    their owner (no NRT meminfo): numba then counts no references on them or on views
    of them — those atomic increments and decrements were about a third of a
    two_link generalized-α step.  The caller keeps an owned reference alive for as
    long as the views are used (:func:`keep_alive`)."""
    return arrays


def keep_alive(owned):
    """Nothing in Python.  In a compiled method (cosim.jit.method_entry): a use of
    ``owned`` at this point, so numba releases it (and the memory the views of
    :func:`unowned` point into) only after it."""
    return None
