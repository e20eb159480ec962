"""Quasi-Newton iteration with Jacobian/LU reuse (seed 000 §5.1, Algorithm 2)."""
import numpy as np
import pytest

from cosim.errors import SingularMatrixError
from cosim.integrators.base import STAT_KEYS
from cosim.integrators.newton import QuasiNewton

ROOT = np.array([np.sqrt(2.0), np.sqrt(2.0)])
X0 = np.array([1.2, 1.5])


def circle_and_line(x):
    return np.array([x[0] ** 2 + x[1] ** 2 - 4.0, x[0] - x[1]])


def circle_and_line_jacobian(x):
    return np.array([[2 * x[0], 2 * x[1]], [1.0, -1.0]])


def solve(qn, x0=X0, fun=circle_and_line, jac=circle_and_line_jacobian, scale=1e-8):
    return qn.solve(lambda d: fun(x0 + d), lambda d: jac(x0 + d), x0.size,
                    lambda dd: float(np.max(np.abs(dd))) / scale, h=0.1, t=0.0)


def test_converges_on_a_small_nonlinear_system_and_counts():
    stats = dict.fromkeys(STAT_KEYS, 0)
    qn = QuasiNewton(stats)
    res = solve(qn)
    assert res.converged and res.reason == "converged"
    assert np.max(np.abs(X0 + res.delta - ROOT)) < 1e-10
    assert stats["newton_iterations"] == stats["residual_evaluations"] == res.iterations
    assert stats["jacobian_evaluations"] == stats["lu_factorizations"] >= 1
    assert 3 <= res.iterations <= 10


def test_stale_jacobian_still_converges_and_is_reused():
    stats = dict.fromkeys(STAT_KEYS, 0)
    qn = QuasiNewton(stats)
    solve(qn)
    n_lu = stats["lu_factorizations"]
    qn.plan_reuse(0.1, None)          # same ĥ: reuse test σ·1 + 0 ≤ 1/3
    assert qn.need_jac is False and qn.relax == pytest.approx(1.0)
    # a nearby problem with the old factorisation: converges without a new LU
    res = solve(qn, x0=np.array([1.3, 1.45]))
    assert res.converged and np.max(np.abs(np.array([1.3, 1.45]) + res.delta - ROOT)) < 1e-9
    assert stats["lu_factorizations"] == n_lu


@pytest.mark.parametrize("sigma, h_new, reuse", [
    (0.1, 1.1, True),     # 0.11 + 0.1 = 0.21 ≤ 1/3
    (0.1, 1.25, False),   # 0.125 + 0.25 = 0.375 > 1/3
    (0.1, 1.5, False),    # 0.15 + 0.5 > 1/3
    (0.3, 1.05, False),   # 0.315 + 0.05 > 1/3
    (0.0, 0.7, True),     # 0 + 0.3 ≤ 1/3
    (0.0, 0.6, False),    # 0 + 0.4 > 1/3
])
def test_reuse_decision_follows_the_sigma_test(sigma, h_new, reuse):
    qn = QuasiNewton(dict.fromkeys(STAT_KEYS, 0))
    qn.factor = ("lu", "piv")   # any existing factorisation
    qn.h_jac = 1.0
    qn.sigma = sigma
    qn.plan_reuse(h_new, None)
    expected = sigma * h_new + abs(h_new - 1.0) <= 1.0 / 3.0
    assert expected == reuse            # the table above is the σ test
    assert (not qn.need_jac) == reuse
    if expected:
        assert qn.relax == pytest.approx(2 * h_new / (h_new + 1.0))   # ν = 2ĥ_new/(ĥ_new + ĥ_old)
    else:
        assert qn.relax == 1.0


def test_no_factorisation_means_a_new_jacobian():
    qn = QuasiNewton(dict.fromkeys(STAT_KEYS, 0))
    qn.plan_reuse(1.0, None)
    assert qn.need_jac and qn.relax == 1.0


def test_no_root_is_reported_not_converged():
    stats = dict.fromkeys(STAT_KEYS, 0)
    qn = QuasiNewton(stats, max_iter=15)
    res = solve(qn, x0=np.array([0.5]), fun=lambda x: np.array([x[0] ** 2 + 1.0]),
                jac=lambda x: np.array([[2 * x[0]]]))
    assert not res.converged and "no convergence" in res.reason
    assert qn.need_jac   # the next solve starts with a fresh Jacobian


def test_non_finite_residual_is_reported():
    qn = QuasiNewton(dict.fromkeys(STAT_KEYS, 0))
    res = solve(qn, fun=lambda x: np.array([np.nan, 0.0]))
    assert not res.converged and "not finite" in res.reason


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")
def test_singular_jacobian_raises_naming_the_matrix():
    qn = QuasiNewton(dict.fromkeys(STAT_KEYS, 0), what="test matrix")
    with pytest.raises(SingularMatrixError, match="test matrix"):
        solve(qn, jac=lambda x: np.zeros((2, 2)))


def test_prior_rate_accepts_after_one_iteration_only_when_predicted_converged():
    stats = dict.fromkeys(STAT_KEYS, 0)
    qn = QuasiNewton(stats, prior_rate=True)
    solve(qn)
    # start practically at the root: first update is inside the tolerance scale
    qn.sigma = 1e-3
    res = solve(qn, x0=ROOT + 1e-9)
    assert res.converged and res.iterations == 1
    assert qn.sigma == pytest.approx(1e-3 ** 0.8)   # unmeasured rate relaxes towards 1
    # far away: the first update is large, so it must iterate
    res = solve(qn, x0=np.array([1.0, 2.0]))
    assert res.converged and res.iterations > 1
    assert np.max(np.abs(np.array([1.0, 2.0]) + res.delta - ROOT)) < 1e-10


def test_state_carries_the_factorisation_for_bit_identical_restore():
    stats = dict.fromkeys(STAT_KEYS, 0)
    qn = QuasiNewton(stats)
    solve(qn)
    snap = qn.state()
    a = solve(qn, x0=np.array([1.3, 1.45]))
    other = QuasiNewton(dict.fromkeys(STAT_KEYS, 0))
    other.restore(snap)
    b = solve(other, x0=np.array([1.3, 1.45]))
    assert np.array_equal(a.delta, b.delta) and a.iterations == b.iterations
    # snapshots without a factorisation (older format) rebuild it
    other.restore({"sigma": 0.0, "h_jac": -1.0})
    assert other.factor is None and other.need_jac
