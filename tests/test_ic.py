"""Initial-condition analysis (seed 000 §1, Appendix Algorithm 1)."""
import warnings

import numpy as np
import pytest
from reference import pendulum_reference

from cosim.errors import InconsistentConstraintsError, InvalidInputError
from cosim.ic import analyse_initial_conditions
from cosim.integrators.generalized_alpha import GeneralizedAlpha
from cosim.models.pendulum import Pendulum


class DuplicatedLengthPendulum(Pendulum):
    """The length constraint written twice (a redundant constraint)."""

    name = "pendulum_duplicated"
    constraint_names = ("length", "length_again")

    # the kernel methods size their output by n_c (2 here): keep the first row
    def constraints(self, q, t):
        c = super().constraints(q, t)[:1]
        return np.concatenate([c, c])

    def constraint_jacobian(self, q, t):
        j = super().constraint_jacobian(q, t)[:1]
        return np.vstack([j, j])

    def constraint_dt(self, q, t):
        return np.zeros(2)

    def gamma(self, q, v, t):
        g = super().gamma(q, v, t)[:1]
        return np.concatenate([g, g])

    def constraint_force_jacobian(self, q, lam, t):
        return 2.0 * (lam[0] + lam[1]) * np.eye(2)


class ContradictoryPendulum(DuplicatedLengthPendulum):
    """Rod length 1 and rod length 2 at the same time."""

    name = "pendulum_contradictory"
    constraint_names = ("length_1", "length_2")

    def constraints(self, q, t):
        r2 = q[0] * q[0] + q[1] * q[1]
        return np.array([r2 - 1.0, r2 - 4.0])


class PinnedAtBottomPendulum(DuplicatedLengthPendulum):
    """Adds x² = 0 (bob on the vertical): its gradient 2x vanishes at x = 0,
    so at the bottom the constraint rank drops — a singular configuration."""

    name = "pendulum_pinned"
    constraint_names = ("length", "vertical")
    parameters = Pendulum.parameters

    def constraints(self, q, t):
        return np.array([q[0] ** 2 + q[1] ** 2 - 1.0, q[0] ** 2])

    def constraint_jacobian(self, q, t):
        return np.array([[2 * q[0], 2 * q[1]], [2 * q[0], 0.0]])

    def gamma(self, q, v, t):
        return np.array([-2.0 * (v @ v), -2.0 * v[0] ** 2])

    def constraint_force_jacobian(self, q, lam, t):
        return np.diag([2.0 * (lam[0] + lam[1]), 2.0 * lam[0]])


def test_perturbed_pendulum_start_is_repaired_and_reported():
    m = Pendulum()
    q0 = np.array([0.8, -0.75])      # |q| = 1.097: off the unit circle
    v0 = np.array([0.3, 0.1])        # not tangent
    rep = analyse_initial_conditions(m, 0.0, q0, v0, m.default_inputs())
    assert abs(float(m.constraints(rep.q, 0.0)[0])) < 1e-12
    assert abs(float((m.constraint_jacobian(rep.q, 0.0) @ rep.v)[0])) < 1e-12
    assert rep.position_change > 0.01 and rep.velocity_change > 0.01
    text = "\n".join(rep.summary())
    assert "positions repaired" in text and "velocities repaired" in text
    # equal weights: the closest point on the circle, i.e. q0 scaled radially
    assert np.allclose(rep.q, q0 / np.linalg.norm(q0), atol=1e-10)
    # and the integrator starts from the repaired state and reports it
    ig = GeneralizedAlpha(m)
    report = ig.initialize(0.0, np.concatenate([q0, v0]))
    assert report is ig.ic_report and np.allclose(ig.q, rep.q)


def test_weights_are_honoured():
    m = Pendulum()
    q0 = np.array([0.6, -0.9])       # |q| = 1.08
    rep = analyse_initial_conditions(m, 0.0, q0, np.zeros(2), m.default_inputs(),
                                     weights_q=[1e6, 1.0])
    assert abs(rep.q[0] - 0.6) < 1e-5                       # heavy weight: x stays put
    assert rep.q[1] == pytest.approx(-np.sqrt(1 - rep.q[0] ** 2), abs=1e-12)
    rep_v = analyse_initial_conditions(m, 0.0, rep.q, np.array([0.5, 0.5]), m.default_inputs(),
                                       weights_v=[1.0, 1e6])
    assert abs(rep_v.v[1] - 0.5) < 1e-5


def test_bad_weights_are_rejected():
    m = Pendulum()
    q0, v0 = m.initial_state()
    with pytest.raises(InvalidInputError, match="weights_q"):
        analyse_initial_conditions(m, 0.0, q0, v0, m.default_inputs(), weights_q=[1.0, -1.0])
    with pytest.raises(InvalidInputError, match="weights_v"):
        analyse_initial_conditions(m, 0.0, q0, v0, m.default_inputs(), weights_v=[1.0])


def test_duplicated_constraint_is_reported_by_name_and_integrates():
    m = DuplicatedLengthPendulum()
    ig = GeneralizedAlpha(m, rtol=1e-8, atol=1e-8)
    report = ig.initialize(0.0)
    assert report.redundant_constraints == ("length_again",)
    assert any("length_again" in line for line in report.summary())
    ig.advance(0.5)
    q_ref, _ = pendulum_reference(0.5)
    assert np.max(np.abs(ig.q - q_ref)) < 1e-5
    assert np.max(np.abs(m.constraints(ig.q, ig.t))) < 1e-10   # both rows hold


def test_contradictory_constraints_raise():
    m = ContradictoryPendulum()
    with pytest.raises(InconsistentConstraintsError, match="length"):
        GeneralizedAlpha(m).initialize(0.0)


def test_singular_configuration_warns_and_is_reported():
    m = PinnedAtBottomPendulum(phi0=0.0)          # bob at the bottom: x = 0
    with pytest.warns(RuntimeWarning, match="singular"):
        rep = analyse_initial_conditions(m, 0.0, *m.initial_state(), m.default_inputs())
    assert rep.singular_configuration
    assert any("singular" in line for line in rep.summary())


def test_regular_start_gives_no_warning():
    m = Pendulum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep = analyse_initial_conditions(m, 0.0, *m.initial_state(), m.default_inputs())
    assert not rep.singular_configuration and rep.summary() == []
    # consistent accelerations (eq. 10)
    q, v = rep.q, rep.v
    Cq = m.constraint_jacobian(q, 0.0)
    assert np.allclose(m.mass(q, 0.0) @ rep.qdd + Cq.T @ rep.lam, m.forces(q, v, 0.0, m.default_inputs()))
    assert np.allclose(Cq @ rep.qdd, m.gamma(q, v, 0.0))


def test_a_repair_larger_than_max_ic_repair_is_an_error(capsys):
    """Issue 19 item 4: max_ic_repair turns a large silent-looking repair into an error
    naming its size; below the threshold the run starts (repaired, with the warning)."""
    from cosim.cli import main as cli_main
    from cosim.errors import InitialConditionWarning
    from cosim.simulation import Simulation
    params = {"seed_initial_velocity": 1.0}  # only phi1' = omega given: phi2' is 75 rad/s off
    with pytest.raises(InconsistentConstraintsError,
                       match=r"velocities by 7\.500e\+01 \(dphi2\), more than max_ic_repair=1\.0"):
        Simulation("crank_slider", params=params, max_ic_repair=1.0, backend="python")
    with pytest.warns(InitialConditionWarning):
        sim = Simulation("crank_slider", params=params, max_ic_repair=100.0, backend="python")
    assert 70.0 < sim.ic_report.velocity_change < 80.0  # φ2' = −l1 ω / (l2 + q4): 74.996
    assert cli_main(["simulate", "crank_slider", "--param", "seed_initial_velocity=1",
                     "--max-ic-repair", "1", "--t-end", "0.001"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "more than max_ic_repair=1.0" in err[0]


def test_rank_test_matches_scipy_pivoted_qr():
    """independent_constraints calls LAPACK geqp3 directly: the kept rows equal those of
    scipy.linalg.qr(C_qᵀ, pivoting=True) with the same relative threshold, on random,
    rank-deficient (repeated / nearly repeated rows, zero columns) and wide/tall C_q."""
    import scipy.linalg as sla
    from cosim.ic import independent_constraints

    def reference(Cq, tol=1e-9):
        _, R, piv = sla.qr(Cq.T, mode="economic", pivoting=True)
        d = np.abs(np.diag(R))
        if d.size == 0 or d[0] == 0.0:
            return np.zeros(0, dtype=int)
        return np.sort(piv[:int(np.sum(d > tol * d[0]))])

    rng = np.random.default_rng(7)
    deficient = 0
    for k in range(400):
        m, n = int(rng.integers(1, 10)), int(rng.integers(1, 12))
        Cq = rng.standard_normal((m, n))
        if k % 3 == 0 and m > 1:
            Cq[-1] = 2.0 * Cq[0] + (1e-13 if k % 2 else 0.0)  # redundant row
        if k % 5 == 0:
            Cq[:, 0] = 0.0
        keep = independent_constraints(Cq)
        assert keep.tolist() == reference(Cq).tolist(), Cq
        deficient += keep.size < m
    assert deficient > 100  # the rank-deficient cases were exercised
    assert independent_constraints(np.zeros((2, 3))).size == 0
    with pytest.raises(ValueError, match="infs or NaNs"):
        independent_constraints(np.array([[np.nan, 1.0]]))
