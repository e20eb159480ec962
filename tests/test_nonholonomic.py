"""Nonholonomic constraints in generalized-α (seed 000 §7, eqs. 93-94) on the
knife edge, and the index-2 GGL generalized-α (seed 000 eqs. 37-39)."""
import math

import numpy as np
import pytest
from reference import pendulum_reference

from cosim.errors import InvalidInputError, UnknownParameterError
from cosim.integrators import make_integrator
from cosim.integrators.generalized_alpha import GeneralizedAlpha
from cosim.integrators.generalized_alpha import GeneralizedAlphaIndex2
from cosim.models import load_model
from cosim.models.knife_edge import KnifeEdge


def side_slip(model, q, v):
    return float((model.nonholonomic_matrix(q, 0.0) @ v + model.nonholonomic_offset(q, 0.0))[0])


def test_knife_edge_exact_solution_satisfies_the_model():
    """The closed form used as reference obeys M q'' + Bᵀμ = Q and B v = 0."""
    m = KnifeEdge()
    t, dt = 0.7, 1e-6
    q, v = m.exact_solution(t)
    qdd = (m.exact_solution(t + dt)[1] - m.exact_solution(t - dt)[1]) / (2 * dt)
    assert abs(side_slip(m, q, v)) < 1e-14
    B = m.nonholonomic_matrix(q, t)[0]
    r = m.mass(q, t) @ qdd - m.forces(q, v, t, m.default_inputs())
    # the residual force is normal to the blade (a multiple of Bᵀ)
    mu = -(r @ B) / (B @ B)
    assert np.max(np.abs(r + B * mu)) < 1e-7
    q0, v0 = m.initial_state()
    assert np.allclose(m.exact_solution(0.0)[0], q0) and np.allclose(m.exact_solution(0.0)[1], v0)


@pytest.mark.parametrize("cls", [GeneralizedAlpha, GeneralizedAlphaIndex2])
def test_knife_edge_fixed_step_matches_closed_form_with_order_two(cls):
    m = KnifeEdge()
    errors = []
    for h in (0.02, 0.01, 0.005):
        ig = cls(m, h=h, rtol=1e-10, atol=1e-10)
        ig.initialize(0.0)
        worst_g = 0.0
        for k in range(1, 11):
            ig.advance(0.2 * k)
            worst_g = max(worst_g, abs(side_slip(m, ig.q, ig.v)))
        assert worst_g < 1e-10
        q_ex, _ = m.exact_solution(2.0)
        errors.append(float(np.max(np.abs(ig.q - q_ex))))
    orders = [math.log2(errors[i] / errors[i + 1]) for i in range(2)]
    print(cls.name, "knife-edge errors", errors, "orders", orders)
    assert errors[-1] < 1e-4
    assert all(abs(p - 2.0) < 0.2 for p in orders), orders


def test_knife_edge_adaptive_keeps_g_at_tolerance_and_energy():
    m = KnifeEdge()
    e0 = m.energy(0.0, m.initial_y())
    drifts = []
    for rtol in (1e-4, 1e-6):
        ig = GeneralizedAlpha(m, rtol=rtol, atol=rtol)
        ig.initialize(0.0)
        worst_g, drift = 0.0, 0.0
        for k in range(1, 31):
            ig.advance(0.1 * k)
            worst_g = max(worst_g, abs(side_slip(m, ig.q, ig.v)))
            drift = max(drift, abs(m.energy(ig.t, ig.y) - e0))
            # the constraint-free invariant: θ' stays ω0 (no torque, B has no θ entry)
            assert ig.v[2] == pytest.approx(2.0, abs=1e-9)
        q_ex, _ = m.exact_solution(3.0)
        assert np.max(np.abs(ig.q - q_ex)) < 3e3 * rtol
        assert worst_g < 10 * rtol      # G is solved to the Newton tolerance
        drifts.append(drift)
    print("knife-edge energy drift for rtol 1e-4, 1e-6:", drifts)
    assert drifts[1] < drifts[0] / 10
    assert drifts[1] < 1e-4


def test_knife_edge_side_slip_in_the_start_is_repaired():
    m = KnifeEdge()
    q0, v0 = m.initial_state()
    v_bad = v0 + np.array([0.0, 0.4, 0.0])   # slides sideways
    ig = GeneralizedAlpha(m)
    report = ig.initialize(0.0, np.concatenate([q0, v_bad]))
    assert report.velocity_change > 0.1
    assert abs(side_slip(m, ig.q, ig.v)) < 1e-14
    # consistent accelerations include the nonholonomic row: B q'' = γ_G
    B = m.nonholonomic_matrix(ig.q, 0.0)
    assert np.allclose(B @ ig.qdd, m.nonholonomic_gamma(ig.q, ig.v, 0.0))
    assert ig.lam.shape == (1,)


def test_knife_edge_restore_is_bit_identical_with_inputs():
    m = KnifeEdge()
    a = GeneralizedAlpha(m, rtol=1e-6)
    a.initialize(0.0)
    a.set_inputs([0.5, -0.2])
    a.advance(0.4)
    snap = a.state()
    a.advance(1.0)
    b = GeneralizedAlpha(KnifeEdge(), rtol=1e-6)
    b.initialize(0.0)
    b.restore(snap)
    b.advance(1.0)
    assert np.array_equal(a.y, b.y) and a.stats == b.stats


# -- index-2 GGL -----------------------------------------------------------------------------
def test_index2_is_registered_and_has_only_rho_inf_and_tolerance_factor():
    ig = make_integrator(load_model("pendulum"), "generalized-alpha-i2", rho_inf=0.6, rtol=1e-6, atol=1e-8)
    assert isinstance(ig, GeneralizedAlphaIndex2) and ig.opts == {"rho_inf": 0.6, "tolerance_factor": 30.0}
    # the error test's tolerances: the user's × 30 (issue 12 item 7), capped at rtol 0.1
    assert (ig.user_rtol, ig.user_atol) == (1e-6, 1e-8)
    assert ig.rtol == pytest.approx(3e-5, rel=1e-15) and ig.atol == pytest.approx(3e-7, rel=1e-15)
    plain = GeneralizedAlphaIndex2(load_model("pendulum"), rtol=1e-6, atol=1e-8, tolerance_factor=1)
    assert (plain.rtol, plain.atol) == (1e-6, 1e-8)
    capped = GeneralizedAlphaIndex2(load_model("pendulum"), rtol=1e-2, atol=1e-4)
    assert capped.rtol == 0.1 and capped.atol == pytest.approx(1e-3, rel=1e-15)
    with pytest.raises(UnknownParameterError):
        GeneralizedAlphaIndex2(load_model("pendulum"), project_velocities=True)
    for bad in (0.5, -1, float("nan"), "x", True):
        with pytest.raises(InvalidInputError, match="tolerance_factor must be a number in"):
            GeneralizedAlphaIndex2(load_model("pendulum"), tolerance_factor=bad)


@pytest.mark.parametrize("factor,q_tol,v_tol", [(1, 1e-4, 1e-3), (30, 1e-3, 1e-2)])
def test_index2_pendulum_holds_both_constraint_levels_and_matches_reference(factor, q_tol, v_tol):
    # factor 1: the seed's test (W = 1e-4); 30 (default): W = 3e-3, and the
    # error follows rtol within the issue-12 band (err/rtol ≤ 10)
    m = load_model("pendulum")
    ig = GeneralizedAlphaIndex2(m, rtol=1e-4, atol=1e-4, tolerance_factor=factor)
    ig.initialize(0.0)
    for k in range(1, 11):
        ig.advance(0.1 * k)
        pos, vel, _ = m.residual_levels(ig.t, ig.y)
        assert pos < factor * 1e-8 and vel < factor * 1e-6    # at the Newton tolerance (∝ W)
    q_ref, v_ref = pendulum_reference(1.0)
    assert np.max(np.abs(ig.q - q_ref)) < q_tol and np.max(np.abs(ig.v - v_ref)) < v_tol


def test_index2_pendulum_fixed_step_order_two():
    m = load_model("pendulum")
    q_ref, _ = pendulum_reference(1.0)
    errors = []
    for h in (0.01, 0.005, 0.0025):
        ig = GeneralizedAlphaIndex2(m, h=h, rtol=1e-10, atol=1e-10)
        ig.initialize(0.0)
        ig.advance(1.0)
        errors.append(float(np.max(np.abs(ig.q - q_ref))))
    orders = [math.log2(errors[i] / errors[i + 1]) for i in range(2)]
    print("index-2 fixed-step errors", errors, "orders", orders)
    assert all(abs(p - 2.0) < 0.2 for p in orders), orders


def test_index2_restore_and_continue_is_bit_identical():
    m = load_model("andrews")
    a = GeneralizedAlphaIndex2(m, rtol=1e-3, atol=1e-3)
    a.initialize(0.0)
    a.advance(0.002)
    snap = a.state()
    a.advance(0.004)
    b = GeneralizedAlphaIndex2(load_model("andrews"), rtol=1e-3, atol=1e-3)
    b.initialize(0.0)
    b.restore(snap)
    b.advance(0.004)
    assert np.array_equal(a.y, b.y) and np.array_equal(a.lam, b.lam) and a.stats == b.stats
    assert np.max(np.abs(m.constraints(a.q, a.t))) < 1e-9


def _lambda_roughness(ig):
    """Max |second difference| of λ sampled on a uniform grid of 0.0037 s
    while the integrator steps with h = 0.0025: every landing cuts a step,
    so the step size keeps changing (the source of index-3 spikes)."""
    ig.initialize(0.0)
    lam = []
    for k in range(1, 301):
        ig.advance(0.0037 * k)
        lam.append(ig.lam[0])
    return float(np.max(np.abs(np.diff(lam, 2))))


def test_index2_gives_smoother_multipliers_than_index3():
    m = load_model("pendulum")
    rough_i2 = _lambda_roughness(GeneralizedAlphaIndex2(m, h=0.0025))
    rough_i3_seed = _lambda_roughness(GeneralizedAlpha(m, h=0.0025, project_velocities=False))
    rough_i3_default = _lambda_roughness(GeneralizedAlpha(m, h=0.0025))
    print("max |Δ²λ|: index-2", rough_i2, "index-3 (seed scheme)", rough_i3_seed,
          "index-3 with velocity projection", rough_i3_default)
    # the smooth part of λ alone gives |Δ²λ| ≈ 8e-4 here; index-3 spikes add to it
    assert rough_i2 < 0.5 * rough_i3_seed
    assert rough_i2 <= 1.01 * rough_i3_default
