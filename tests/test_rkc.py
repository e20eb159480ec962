"""Penalty formulation (seed 000 eqs. 90-92) + Runge-Kutta-Chebyshev: RKC
stability interval, stage count versus penalty factor, order 2, constraint
decay, bit-identical restore, option errors."""
import math

import numpy as np
import pytest

from cosim import load_model, make_integrator
from cosim.errors import InvalidInputError
from cosim.integrators.rkc import stability_boundary, stability_polynomial, stages_for

from reference import index1_reference


def _pendulum():
    return load_model("pendulum", phi0=1.0)


@pytest.mark.parametrize("s", [2, 3, 5, 10, 20, 40])
def test_stability_polynomial_bounded_on_real_interval(s):
    beta = stability_boundary(s)
    z = -np.linspace(0.0, beta, 5001)
    R = stability_polynomial(s, z)
    assert np.max(np.abs(R)) <= 1.0 + 1e-9
    if s >= 10:  # β is then the actual boundary: just beyond it |R| > 1
        assert abs(stability_polynomial(s, -1.02 * beta)) > 1.0
    # consistency: second order, R(z) = 1 + z + z²/2 + O(z³)
    def defect(z):
        return abs(stability_polynomial(s, z) - (1 + z + z * z / 2))
    if s == 2:  # R_2 is exactly the degree-2 Taylor polynomial
        assert defect(1e-3) < 1e-15
    else:
        ratio = defect(1e-3) / defect(5e-4)
        assert 7.0 <= ratio <= 9.0  # defect is O(z³)
    if s >= 10:
        assert 0.64 <= beta / s ** 2 <= 0.66  # β(s) ≈ 0.653 s² for ε = 2/13


def test_stage_count_grows_with_penalty_as_sqrt(backend):
    """s = 1 + ⌊√(1 + 1.54 h ρ)⌋ with ρ ≈ χ: s grows like √χ and β(s) ≥ h ρ."""
    model = _pendulum()
    q, v = index1_reference(model, 0.02)
    ref = np.concatenate([q, v])
    h = 1e-3
    stages = {}
    for chi in (1e4, 1e5, 1e6):
        it = make_integrator(model, "rkc-penalty", backend=backend, h=h, penalty=chi)
        it.initialize()
        it.advance(0.02)
        s = it.last_stages
        stages[chi] = s
        assert it.rho == pytest.approx(1.2 * chi, rel=0.05)   # penalty dominates ρ
        assert s == stages_for(h * it.rho, 400)
        assert stability_boundary(s) >= h * it.rho
        assert np.max(np.abs(it.y - ref)) < 1e-5                # stable and accurate
    for lo, hi in ((1e4, 1e5), (1e5, 1e6)):
        ratio = stages[hi] / stages[lo]
        assert 0.75 * math.sqrt(10) <= ratio <= 1.25 * math.sqrt(10), stages


def test_order_two(backend):
    model = _pendulum()
    T = 0.5
    q, v = index1_reference(model, T)
    ref = np.concatenate([q, v])
    hs = [0.004, 0.002, 0.001]
    errs = []
    for h in hs:
        it = make_integrator(model, "rkc-penalty", backend=backend, h=h, penalty=100.0)
        it.initialize()
        it.advance(T)
        errs.append(np.max(np.abs(it.y - ref)))
    order = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert abs(order - 2.0) <= 0.3, errs


def test_penalty_pulls_perturbed_state_back_to_manifold(backend):
    """ḟ + χ f = 0: a position/velocity violation decays like e^{−χ t}."""
    model = _pendulum()
    chi = 200.0
    it = make_integrator(model, "rkc-penalty", backend=backend, h=2e-4, penalty=chi)
    it.initialize()
    y = it.y.copy()
    y[:2] *= 1.001           # violate C by ~2e-3
    y[2:] += [0.01, -0.02]   # and the velocity constraint
    it.y = y
    it._reset_point()
    c0 = abs(model.constraints(it.y[:2], 0.0)[0])
    it.advance(0.02)          # χ t = 4
    c1 = abs(model.constraints(it.y[:2], it.t)[0])
    assert c1 / c0 == pytest.approx(math.exp(-chi * 0.02), rel=0.1)


def test_adaptive_accuracy_and_auto_penalty(backend):
    model = _pendulum()
    it = make_integrator(model, "rkc-penalty", backend=backend, rtol=1e-7, atol=1e-7)
    it.initialize()
    assert it.penalty >= 100.0
    it.advance(1.0)
    q, v = index1_reference(model, 1.0)
    assert np.max(np.abs(it.y - np.concatenate([q, v]))) < 1e-4
    # the penalty keeps the drift bounded (not zero): far below the state error
    assert max(model.residual_levels(it.t, it.y)[:2]) < 1e-5


@pytest.mark.parametrize("opts", [{}, {"h": 1e-3, "penalty": 1e4}, {"formulation": "bayo"}])
def test_restore_and_continue_bit_identical(opts, backend):
    model = _pendulum()
    base = {"rtol": 1e-5, "atol": 1e-5}
    it = make_integrator(model, "rkc-penalty", backend=backend, **base, **opts)
    it.initialize()
    it.advance(0.2)
    snap = it.state()
    it.advance(0.5)
    y1, stats1 = it.y.copy(), dict(it.stats)
    it.restore(snap)
    it.advance(0.5)
    assert np.array_equal(it.y, y1) and it.stats == stats1
    it2 = make_integrator(_pendulum(), "rkc-penalty", backend=backend, **base, **opts)
    it2.initialize()
    it2.restore(snap)
    it2.advance(0.5)
    assert np.array_equal(it2.y, y1) and it2.stats == stats1


@pytest.mark.parametrize("opts,match", [
    ({"penalty": -1.0}, "penalty must be finite and > 0, got -1.0"),
    ({"penalty": float("inf")}, "penalty must be finite and > 0"),
    ({"penalty": "big"}, "penalty must be a number > 0 or 'auto', got 'big'"),
    ({"damping": 1.5}, "damping must be in \\[0, 1\\], got 1.5"),
    ({"max_stages": 1}, "max_stages must be an integer >= 2, got 1"),
    ({"max_stages": 2.5}, "max_stages must be an integer >= 2, got 2.5"),
    ({"rho_interval": 0}, "rho_interval must be an integer >= 1, got 0"),
])
def test_bad_options(opts, match):
    with pytest.raises(InvalidInputError, match=match):
        make_integrator(_pendulum(), "rkc-penalty", **opts)


def test_fixed_step_beyond_max_stages_fails_clearly(backend):
    from cosim.errors import ConvergenceError
    it = make_integrator(_pendulum(), "rkc-penalty", backend=backend, h=1e-2, penalty=1e6, max_stages=5)
    it.initialize()
    y0 = it.y.copy()
    with pytest.raises(ConvergenceError, match="max_stages"):
        it.advance(0.1)
    assert np.array_equal(it.y, y0) and it.t == 0.0


# -- Bayo penalty form: M q'' + C_qᵀ α (C̈ + 2ξωĊ + ω²C) = Q --------------------------------
def test_bayo_form_order_two(backend):
    model = _pendulum()
    T = 0.5
    q, v = index1_reference(model, T)
    ref = np.concatenate([q, v])
    hs = [0.002, 0.001, 0.0005]
    errs = []
    for h in hs:
        it = make_integrator(model, "rkc-penalty", backend=backend, h=h, formulation="bayo", omega=50.0)
        it.initialize()
        it.advance(T)
        errs.append(np.max(np.abs(it.y - ref)))
    order = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert abs(order - 2.0) <= 0.3, errs


def test_bayo_stage_count_follows_omega(backend):
    """Constraint modes c̈ + 2ξωċ + ω²c = 0 (ξ = 1): ρ ≈ ω, s grows like √ω."""
    model = _pendulum()
    h = 1e-3
    stages = {}
    for omega in (1e4, 1e5, 1e6):
        it = make_integrator(model, "rkc-penalty", backend=backend, h=h, formulation="bayo", omega=omega)
        it.initialize()
        it.advance(0.01)
        assert it.rho == pytest.approx(1.2 * omega, rel=0.25)
        assert stability_boundary(it.last_stages) >= h * it.rho
        stages[omega] = it.last_stages
    for lo, hi in ((1e4, 1e5), (1e5, 1e6)):
        ratio = stages[hi] / stages[lo]
        assert 0.75 * math.sqrt(10) <= ratio <= 1.25 * math.sqrt(10), stages


@pytest.mark.parametrize("opts,match", [
    ({"formulation": "baumgarte"}, "formulation must be 'seed' or 'bayo', got 'baumgarte'"),
    ({"formulation": "bayo", "alpha": 0.0}, "alpha must be finite and > 0, got 0.0"),
    ({"formulation": "bayo", "omega": float("nan")}, "omega must be finite and > 0"),
    ({"formulation": "bayo", "xi": -1.0}, "xi must be finite and > 0, got -1.0"),
])
def test_bayo_bad_options(opts, match):
    with pytest.raises(InvalidInputError, match=match):
        make_integrator(_pendulum(), "rkc-penalty", **opts)


def test_undamped_scheme(backend):
    """ε = 0 (allowed by the option's range; the former implementation divided 0 by 0):
    the limit w0 = 1, w1 = T_s'(1)/T_s''(1) = 3/(s² − 1), β(s) = 2(s² − 1)/3 (the limit of
    the damped β(s, ε)), and a run with it is accurate."""
    for s in (2, 5, 20):
        beta = stability_boundary(s, 0.0)
        assert beta == pytest.approx(2.0 * (s * s - 1) / 3.0, rel=1e-14)
        assert beta == pytest.approx(stability_boundary(s, 1e-6), rel=1e-5)
        z = -np.linspace(0.0, beta, 2001)
        assert np.max(np.abs(stability_polynomial(s, z, 0.0))) <= 1.0 + 1e-9
    model = _pendulum()
    it = make_integrator(model, "rkc-penalty", backend=backend, h=1e-3, penalty=1e3, damping=0.0)
    it.initialize()
    it.advance(0.2)
    q, v = index1_reference(model, 0.2)
    assert np.max(np.abs(it.y - np.concatenate([q, v]))) < 1e-5
