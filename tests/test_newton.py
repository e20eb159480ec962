"""The quasi-Newton decisions every method's kernel shares (seed 000 §5.1, Algorithm 2
and the reuse test of Algorithm 3 g; cosim.integrators.kernel_common), checked on
their own, and the one quasi-Newton loop every implicit method runs (quasi_newton) on a
small system; the methods' jobs in it are checked by each method's tests."""
import math

import numpy as np
import pytest

from cosim.integrators import kernel_common as KC
from cosim.integrators.dense_lu import lu_solve_inplace, pivot_ratio


@pytest.mark.parametrize("sigma, h_new, reuse", [
    (0.1, 1.1, True),     # 0.11 + 0.1 = 0.21 ≤ 1/3
    (0.1, 1.25, False),   # 0.125 + 0.25 = 0.375 > 1/3
    (0.1, 1.5, False),    # 0.15 + 0.5 > 1/3
    (0.3, 1.05, False),   # 0.315 + 0.05 > 1/3
    (0.0, 0.7, True),     # 0 + 0.3 ≤ 1/3
    (0.0, 0.6, False),    # 0 + 0.4 > 1/3
])
def test_reuse_decision_follows_the_sigma_test(sigma, h_new, reuse):
    expected = sigma * h_new + abs(h_new - 1.0) <= 1.0 / 3.0
    assert expected == reuse            # the table above is the σ test
    assert KC.keeps_matrix(sigma, h_new, 1.0) == reuse
    assert KC.relaxation(h_new, 1.0) == pytest.approx(2 * h_new / (h_new + 1.0))   # ν


@pytest.mark.parametrize("h_jac", [-1.0, 0.0, math.nan])
def test_no_matrix_step_means_a_new_matrix(h_jac):
    assert not KC.keeps_matrix(0.0, 1.0, h_jac)


def test_verdict_converges_below_the_tolerance_and_by_the_rate():
    # ‖Δδ‖ < tol
    assert KC.newton_verdict(2, 2, 0.5e-4, 1e-2, 0.1, math.inf, 1e-4, 1e-3, False, False)[0] \
        == KC.NEWTON_CONVERGED
    # the rate σ = ‖Δδ‖/‖Δδ_old‖ = 0.01 predicts σ/(1−σ)‖Δδ‖ ≈ 1e-5 < err_tol
    verdict, sigma, err = KC.newton_verdict(2, 2, 1e-3, 1e-1, 0.0, math.inf, 1e-4, 1e-3, False, False)
    assert verdict == KC.NEWTON_CONVERGED and sigma == pytest.approx(0.01)
    assert err == pytest.approx(0.01 / 0.99 * 1e-3)
    # the GGL rule (rate_only): not on ‖Δδ‖ < tol alone
    verdict, sigma, _ = KC.newton_verdict(1, 1, 1e-9, -1.0, 0.5, math.inf, 1e-4, 1e-8, True, True)
    assert verdict == KC.NEWTON_CONTINUE and sigma == 0.0


@pytest.mark.parametrize("rate_only", [False, True])
def test_an_update_of_exactly_zero_converges_in_every_rule(rate_only):
    """A residual exactly zero (a body at rest in equilibrium) gives a zero update: the
    GGL rule (rate only) used to divide 0 by 0 at the second such update."""
    for it, old in ((1, -1.0), (2, 0.0)):
        verdict, sigma, err = KC.newton_verdict(it, it, 0.0, old, 0.3, math.inf, 1e-4, 1e-8,
                                                False, rate_only)
        assert verdict == KC.NEWTON_CONVERGED and sigma == 0.3 and err == math.inf


def test_prior_rate_accepts_a_first_update_only_when_predicted_converged():
    verdict, sigma, _ = KC.newton_verdict(1, 1, 1e-3, -1.0, 1e-3, math.inf, 1e-4, 1e-3, True, False)
    assert verdict == KC.NEWTON_CONVERGED
    assert sigma == pytest.approx(1e-3 ** 0.8)   # an unmeasured rate relaxes towards 1
    # without the test, or with a first update outside the tolerance scale: iterate
    assert KC.newton_verdict(1, 1, 1e-3, -1.0, 1e-3, math.inf, 1e-4, 1e-3, False, False)[0] \
        == KC.NEWTON_CONTINUE
    assert KC.newton_verdict(1, 1, 2.0, -1.0, 1e-3, math.inf, 1e-4, 1e-3, True, False)[0] \
        == KC.NEWTON_CONTINUE


def test_slow_contraction_refreshes_the_matrix_and_a_growing_update_is_slow():
    # σ = 0.8: err = 4·‖Δδ‖ = 0.4, and 0.4·0.8³ > 1/2 is false, 0.8 ≤ 0.9: after 5 updates refresh
    verdict, sigma, _ = KC.newton_verdict(5, 5, 0.1, 0.125, 0.0, math.inf, 1e-4, 1e-3, False, False)
    assert verdict == KC.NEWTON_REFRESH and sigma == pytest.approx(0.8)
    # σ = 0.6 at the 2nd update: err·σ³ = 1.5·0.6³ = 0.32 ≤ 1/2: continue
    verdict, _, err = KC.newton_verdict(2, 2, 1.0, 1.0 / 0.6, 0.0, math.inf, 1e-4, 1e-3, False, False)
    assert verdict == KC.NEWTON_CONTINUE and err == pytest.approx(1.5)
    # not contracting: the caller's stall test decides
    assert KC.newton_verdict(3, 3, 1.0, 1.0, 0.2, 7.0, 1e-4, 1e-3, False, False) \
        == (KC.NEWTON_SLOW, 0.2, 7.0)


# a record for kernel_common.quasi_newton: I = [HAS_FACTOR, ST_LU, NEED_JAC, ST_RES,
# ST_NEWTON], S = [H_JAC, RELAX, SIGMA]; 25 updates, no prior rate, no stall test
RULE = (25, 0, 0, 0, 1, 2, 3, 4, 0, 1, 2)
ROOT = np.array([np.sqrt(2.0), np.sqrt(2.0)])


def solve_circle(x0, LU, piv, S, I):
    """quasi_newton driven as each kernel drives it, on a circle and a line
    (x² + y² = 4, x = y; root (√2, √2)) from x0, the norm max|Δδ| / 1e-8.  Returns
    (reason, x0 + δ, the jobs asked)."""
    delta, F = np.zeros(2), np.zeros(2)
    job, state = KC.newton_begin(S, I, delta, 2, RULE)
    jobs = []
    while job < KC.NEWTON_END:
        jobs.append(job)
        x = x0 + delta
        if job == KC.JOB_MATRIX:
            answer = float(KC.factor_matrix(np.array([[2 * x[0], 2 * x[1]], [1.0, -1.0]]), LU, piv, 2)[0])
        elif job == KC.JOB_RESIDUAL:
            with np.errstate(over="ignore", invalid="ignore"):   # (a diverged x: inf)
                F[:] = [x[0] ** 2 + x[1] ** 2 - 4.0, x[0] - x[1]]
            answer = 0.0
        else:
            assert job == KC.JOB_NORM   # (no stall test in RULE)
            answer = float(np.max(np.abs(F))) / 1e-8
        job, state = KC.quasi_newton(job, answer, state, S, I, LU, piv, F, delta, 2, 1.0, 1e-4, 1e-3,
                                     False, RULE)
    return job - KC.NEWTON_END, x0 + delta, jobs


def test_the_loop_solves_a_small_system():
    """kernel_common.quasi_newton (every implicit method's loop) from no kept factor:
    forms the matrix first, keeps it until the verdict asks for a new one, counts
    every residual, converges to the root within 1e-10."""
    LU, piv = np.zeros((2, 2)), np.zeros(2, dtype=np.int64)
    S, I = np.array([-1.0, 1.0, 0.0]), np.zeros(5, dtype=np.int64)
    reason, x, jobs = solve_circle(np.array([1.2, 1.5]), LU, piv, S, I)
    assert reason == KC.QN_SOLVED and np.max(np.abs(x - ROOT)) < 1e-10
    assert jobs[0] == KC.JOB_MATRIX and 1 <= jobs.count(KC.JOB_MATRIX) == I[1] <= 4
    assert I[3] == I[4] == jobs.count(KC.JOB_RESIDUAL) <= 15
    assert I[0] == 1 and S[0] == 1.0 and S[1] == 1.0   # a factor kept, formed with h = 1, unrelaxed


def test_the_loop_reports_a_failed_job_and_a_nonfinite_residual():
    """A job's failure ends the solve with QN_ABORTED (the method's code is its
    answer); a residual that is not finite with QN_RESIDUAL and a new matrix asked."""
    LU, piv = np.zeros((2, 2)), np.zeros(2, dtype=np.int64)
    S, I = np.array([-1.0, 1.0, 0.0]), np.zeros(5, dtype=np.int64)
    delta, F = np.zeros(2), np.zeros(2)
    job, state = KC.newton_begin(S, I, delta, 2, RULE)
    assert KC.quasi_newton(job, 7.0, state, S, I, LU, piv, F, delta, 2, 1.0, 1e-4, 1e-3, False,
                           RULE)[0] == KC.NEWTON_END + KC.QN_ABORTED
    job, state = KC.quasi_newton(job, 0.0, state, S, I, LU, piv, F, delta, 2, 1.0, 1e-4, 1e-3, False, RULE)
    assert job == KC.JOB_RESIDUAL
    F[:] = [np.nan, 0.0]
    job, state = KC.quasi_newton(job, 0.0, state, S, I, LU, piv, F, delta, 2, 1.0, 1e-4, 1e-3, False, RULE)
    assert job == KC.NEWTON_END + KC.QN_RESIDUAL and I[2] == 1


def test_every_method_reports_the_loop_reasons_as_its_own():
    """quasi_newton's failure reasons are every implicit method's reason codes."""
    from cosim.integrators import bdf_record, block_record, ga_record, li1_record, spark_record
    for rec in (bdf_record, block_record, ga_record, spark_record):
        assert (rec.R_RESIDUAL, rec.R_UPDATE, rec.R_NO_CONVERGENCE) == (KC.QN_RESIDUAL, KC.QN_UPDATE,
                                                                        KC.QN_NO_CONVERGENCE)
    assert (li1_record.C_NONE, li1_record.C_RESIDUAL, li1_record.C_UPDATE, li1_record.C_NO_CONVERGENCE) \
        == (KC.QN_SOLVED, KC.QN_RESIDUAL, KC.QN_UPDATE, KC.QN_NO_CONVERGENCE)


def test_factor_matrix_refuses_non_finite_and_singular_matrices():
    LU, piv = np.full((2, 2), 7.0), np.zeros(2, dtype=np.int64)
    assert KC.factor_matrix(np.array([[1.0, np.nan], [0.0, 1.0]]), LU, piv, 2) == (KC.MATRIX_NONFINITE, 0.0)
    assert np.all(LU == 7.0)   # untouched
    status, ratio = KC.factor_matrix(np.array([[1.0, 2.0], [2.0, 4.0]]), LU, piv, 2)
    assert status == KC.MATRIX_SINGULAR and ratio <= KC.PIVOT_RATIO_MIN
    status, ratio = KC.factor_matrix(np.array([[4.0, 0.0], [0.0, 2.0]]), LU, piv, 2)
    assert status == KC.FACTORED and ratio == 0.5


def _refactored_ratio(A):
    """The pivot ratio of A equilibrated by an independent route: Ruiz's scaling in
    numpy, then LAPACK's LU of the scaled matrix."""
    import scipy.linalg
    dr, dc = np.ones(len(A)), np.ones(len(A))
    for _ in range(60):
        S = np.abs(dr[:, None] * A * dc[None, :])
        dr /= np.sqrt(S.max(axis=1))
        dc /= np.sqrt(S.max(axis=0))
    d = np.abs(np.diag(scipy.linalg.lu_factor(dr[:, None] * A * dc[None, :])[0]))
    return d.min() / d.max()


@pytest.mark.parametrize("mass", [3e7, 1e12, 1e-12])  # (1e-12: the unscaled test passes)
def test_a_heavy_or_light_body_is_not_a_singular_matrix(mass):
    # [[M, C_qᵀ], [C_q, 0]] of a pendulum bob at (1, -1): the unscaled pivots are m and
    # |C_q|²/m (ratio ~4/m²: 4e-15 at m = 3e7), a change of units, not a singularity
    C = np.array([[2.0, -2.0]])
    A = np.block([[mass * np.eye(2), C.T], [C, np.zeros((1, 1))]])
    LU, piv = np.zeros((3, 3)), np.zeros(3, dtype=np.int64)
    status, ratio = KC.factor_matrix(A, LU, piv, 3)
    assert status == KC.FACTORED
    if pivot_ratio(LU) <= KC.PIVOT_RATIO_MIN:  # re-judged equilibrated (the two routes
        # may pivot differently; both see a well-conditioned matrix)
        assert ratio > 0.1 and 0.1 < ratio / _refactored_ratio(A) < 10
    K = A.copy()   # factored in place (the index-1 form does): judged on the factors alone
    assert KC.factor_matrix(K, K, np.zeros(3, dtype=np.int64), 3)[0] == KC.FACTORED
    x = np.array([0.0, -9.81 * mass, 0.0])
    lu_solve_inplace(LU, piv, x)
    assert np.allclose(A @ x, [0.0, -9.81 * mass, 0.0], rtol=0, atol=1e-12 * 9.81 * mass)


def test_equilibration_does_not_hide_a_singular_matrix():
    # rank-deficient to rounding (two equal constraint rows) and a heavy body: still refused
    C = np.array([[2.0, -2.0], [2.0, -2.0 * (1 + 2e-16)]])
    A = np.block([[1e6 * np.eye(2), C.T], [C, np.zeros((2, 2))]])
    LU, piv = np.zeros((4, 4)), np.zeros(4, dtype=np.int64)
    status, ratio = KC.factor_matrix(A, LU, piv, 4)
    assert status == KC.MATRIX_SINGULAR and ratio <= KC.PIVOT_RATIO_MIN
    assert KC.factor_matrix(A.copy(), A.copy(), piv, 4)[0] == KC.MATRIX_SINGULAR
    K = A.copy()
    assert KC.factor_matrix(K, K, piv, 4)[0] == KC.MATRIX_SINGULAR  # in place


@pytest.mark.parametrize("t, h, fixed, limit, expected", [
    (0.0, 0.1, False, 1.0, (0.1, False, True)),
    (0.0, 0.9, False, 1.0, (1.0, True, True)),      # a sliver < h/4 left: stretched onto it
    (0.0, 0.7, False, 1.0, (0.7, False, True)),
    (0.0, 0.1, True, 0.1 + 1e-9, (0.1 + 1e-9, True, True)),   # fixed: lands on a rounding sliver
    (0.0, 20.0, False, 100.0, (10.0, False, True)),  # capped by max_step 10
    (1e6, 1e-10, True, 2e6, (1e-10, False, False)),  # h ≤ 4 ε |t|: does not move t
])
def test_clamp_step(t, h, fixed, limit, expected):
    assert KC.clamp_step(t, h, 10.0, fixed, limit) == expected


def test_weighted_norms():
    x, w = np.array([3.0, -4.0, 100.0]), np.array([1.0, 0.5, 1.0])
    assert KC.weighted_max(x, w, 2) == 3.0
    assert KC.weighted_rms(x, w * w, 2) == pytest.approx(math.sqrt((9.0 + 4.0) / 2))
    assert KC.weighted_rms(x, w, 0) == 0.0
    assert math.isnan(KC.weighted_max(np.array([np.nan, 1.0]), w, 2))


def test_a_failure_with_a_kept_factor_is_retried_with_a_fresh_matrix():
    """Algorithm 2: a failure with an old matrix is not a failure of the step.  A kept
    factor with a pivot 1e-200 times too small sends the first update to ~1e200 and the
    residual to inf: the loop starts again from δ = 0 with the matrix formed there and
    converges to the root within 1e-10; a solve that failed with a matrix it formed
    itself is not retried."""
    x0 = np.array([1.2, 1.5])
    LU, piv = np.zeros((2, 2)), np.zeros(2, dtype=np.int64)
    KC.factor_matrix(np.array([[2 * x0[0], 2 * x0[1]], [1.0, -1.0]]), LU, piv, 2)
    LU[0, 0] *= 1e-200
    S, I = np.array([1.0, 1.0, 0.0]), np.array([1, 0, 0, 0, 0])   # a factor kept, not asked anew
    reason, x, jobs = solve_circle(x0, LU, piv, S, I)
    assert reason == KC.QN_SOLVED and np.max(np.abs(x - ROOT)) < 1e-10
    assert jobs[:3] == [KC.JOB_RESIDUAL, KC.JOB_NORM, KC.JOB_RESIDUAL] and KC.JOB_MATRIX in jobs
    # a matrix formed in this solve whose residual is not finite: the solve fails
    delta, F = np.zeros(2), np.zeros(2)
    I[2] = 1
    job, state = KC.newton_begin(S, I, delta, 2, RULE)
    assert job == KC.JOB_MATRIX
    job, state = KC.quasi_newton(job, 0.0, state, S, I, LU, piv, F, delta, 2, 1.0, 1e-4, 1e-3, False, RULE)
    F[:] = [np.inf, 0.0]
    job, state = KC.quasi_newton(job, 0.0, state, S, I, LU, piv, F, delta, 2, 1.0, 1e-4, 1e-3, False, RULE)
    assert job == KC.NEWTON_END + KC.QN_RESIDUAL
