"""Generalized-α, index 3 (seed 000 §3, Algorithm 3): accuracy against
independent references, order, invariants, restart and error handling."""
import math

import numpy as np
import pytest
from reference import (andrews_reference, index1_reference, index1_solution, pendulum_reference,
                       two_link_reference)

from cosim.errors import ConvergenceError, InvalidInputError, UnknownParameterError
from cosim.integrators import make_integrator
from cosim.integrators.generalized_alpha import GeneralizedAlpha, alpha_parameters, auto_tangent
from cosim.models import load_model
from cosim.models.pendulum import Pendulum


def run(model, t_end, backend="python", **options):
    ig = GeneralizedAlpha(model, backend=backend, **options)
    ig.initialize(0.0)
    ig.advance(t_end)
    return ig


# -- parameters ------------------------------------------------------------------------
@pytest.mark.parametrize("rho", [0.0, 0.5, 0.8, 1.0])
def test_parameters_are_second_order_chung_hulbert(rho):
    am, af, gamma, beta, eta = alpha_parameters(rho)
    assert am == pytest.approx((2 * rho - 1) / (rho + 1))
    assert af == pytest.approx(rho / (rho + 1))
    assert gamma == pytest.approx(0.5 - am + af)          # second order
    assert beta == pytest.approx(0.25 * (gamma + 0.5) ** 2)  # eq. 18
    assert eta == pytest.approx((1 - am) / (1 - af))


def test_registered_under_its_method_name():
    ig = make_integrator(Pendulum(), "generalized-alpha", rho_inf=0.5)
    assert isinstance(ig, GeneralizedAlpha) and ig.opts["rho_inf"] == 0.5


# -- pendulum ---------------------------------------------------------------------------
def test_pendulum_constraint_residual_stays_at_solver_tolerance(backend):
    m = Pendulum()
    ig = GeneralizedAlpha(m, backend=backend, rtol=1e-6, atol=1e-8)
    ig.initialize(0.0)
    worst = 0.0
    for k in range(1, 101):
        ig.advance(0.02 * k)
        worst = max(worst, abs(float(m.constraints(ig.q, ig.t)[0])))
    # Newton stops when the position update is 1e-4 of W = rtol|q| + atol
    assert worst < 1e-9, worst


def test_pendulum_energy_drift_shrinks_as_rtol_tightens(backend):
    m = Pendulum()
    e0 = m.energy(0.0, m.initial_y())
    drifts = []
    for rtol in (1e-4, 1e-6, 1e-8):
        ig = GeneralizedAlpha(m, backend=backend, rtol=rtol, atol=rtol)
        ig.initialize(0.0)
        drift = 0.0
        for k in range(1, 31):
            ig.advance(0.1 * k)
            drift = max(drift, abs(m.energy(ig.t, ig.y) - e0))
        drifts.append(drift)
    print("max energy drift over 3 s for rtol 1e-4, 1e-6, 1e-8:", drifts)
    assert drifts[1] < drifts[0] / 3 and drifts[2] < drifts[1] / 3, drifts
    assert drifts[2] < 1e-4


def test_pendulum_fixed_step_converges_with_order_two(backend):
    m = Pendulum()
    q_ref, v_ref = pendulum_reference(1.0)
    steps = (0.02, 0.01, 0.005, 0.0025)
    errors = []
    for h in steps:
        ig = run(m, 1.0, backend=backend, h=h, rtol=1e-10, atol=1e-10)
        assert ig.stats["steps"] == round(1.0 / h) and ig.stats["rejected"] == 0
        errors.append(float(np.max(np.abs(ig.q - q_ref))))
    orders = [math.log2(errors[i] / errors[i + 1]) for i in range(len(errors) - 1)]
    print("fixed-step errors", errors, "observed orders", orders)
    for p in orders:
        assert abs(p - 2.0) <= 0.2, orders


@pytest.mark.parametrize("rtol", [1e-3, 1e-6])
def test_two_link_fixed_step_error_falls_as_h2_whatever_rtol(rtol):
    """Fixed h: Newton stops relative to the step's own innovation
    (ga_kernel.FIXED_NEWTON_REL), not to rtol, so the error falls 4x per halving
    down to ~1e-9 at h = 0.125 ms even at rtol 1e-3 (reference: scipy DOP853 on the
    index-1 ODE at 1e-12; measured ratios 4.00 at rtol 1e-3)."""
    m = load_model("two_link")
    q_ref, _ = two_link_reference(0.2)
    errors = []
    for h in (1e-3, 5e-4, 2.5e-4, 1.25e-4):
        ig = run(m, 0.2, h=h, rtol=rtol, atol=rtol / 100)
        errors.append(float(np.max(np.abs(ig.q - q_ref) / np.maximum(1.0, np.abs(q_ref)))))
    ratios = [errors[i] / errors[i + 1] for i in range(3)]
    print("two_link fixed-step errors", errors, "ratios", ratios)
    assert all(3.6 <= r <= 4.4 for r in ratios), ratios
    assert errors[-1] < 2e-9, errors


def test_fixed_step_lands_exactly_and_keeps_h(backend):
    m = Pendulum()
    ig = GeneralizedAlpha(m, backend=backend, h=1e-3)
    ig.initialize(0.0)
    ig.advance(0.0105)   # 10 steps of 1e-3 and one cut to 5e-4
    assert ig.t == 0.0105
    assert ig.stats["steps"] == 11
    assert ig.h_next == 1e-3


def test_pendulum_adaptive_matches_reference_and_dense_output(backend):
    m = Pendulum()
    ig = GeneralizedAlpha(m, backend=backend, rtol=1e-8, atol=1e-8)
    ig.initialize(0.0)
    ig.advance(0.7)
    q_ref, v_ref = pendulum_reference(0.7)
    assert np.max(np.abs(ig.q - q_ref)) < 2e-6
    assert np.max(np.abs(ig.v - v_ref)) < 2e-5
    # dense output inside the last step against the reference
    ig.step(10.0)
    tm = 0.5 * (ig.t_prev + ig.t)
    y = ig.dense_output(tm)
    q_m, v_m = pendulum_reference(tm)
    assert np.max(np.abs(y[:2] - q_m)) < 1e-5
    assert np.max(np.abs(y[2:] - v_m)) < 1e-4
    assert np.array_equal(ig.dense_output(ig.t), ig.y)


def test_landing_on_targets_does_not_shrink_the_step(backend):
    m = Pendulum()
    direct = run(m, 2.0, backend=backend, rtol=1e-6)
    chunked = GeneralizedAlpha(m, backend=backend, rtol=1e-6)
    chunked.initialize(0.0)
    for k in range(1, 41):
        chunked.advance(0.05 * k)
    # every one of the 40 targets can cost at most one extra (landing) step
    assert chunked.stats["steps"] <= direct.stats["steps"] + 40, (
        chunked.stats["steps"], direct.stats["steps"])


def test_restart_gives_consistent_accelerations_for_new_inputs(backend):
    m = Pendulum()
    ig = GeneralizedAlpha(m, backend=backend, rtol=1e-6)
    ig.initialize(0.0)
    ig.advance(0.3)
    ig.set_inputs([0.5, 1.0, 0.0])   # torque, fx, fy: a discontinuity
    q, v, u = ig.q, ig.v, ig.u
    Cq = m.constraint_jacobian(q, ig.t)
    assert np.allclose(Cq @ ig.qdd, m.gamma(q, v, ig.t), atol=1e-10)
    assert np.allclose(m.mass(q, ig.t) @ ig.qdd + Cq.T @ ig.lam, m.forces(q, v, ig.t, u), atol=1e-10)
    assert np.array_equal(ig.a, ig.qdd)
    ig.advance(0.6)
    assert abs(m.constraints(ig.q, ig.t)[0]) < 1e-9


# -- Andrews' squeezer -----------------------------------------------------------------------
def test_andrews_positions_at_0_03_and_error_falls_with_rtol(backend):
    """Global error against the independent index-1 DOP853 solution, sampled
    every millisecond (the integrator lands on each sample) up to t = 0.03."""
    m = load_model("andrews")
    sol = index1_solution(m, 0.03).sol
    errors, end_errors = {}, {}
    for rtol in (1e-4, 1e-6, 1e-8):
        # the seed's per-step control (eq. 34 on the user's tolerances); the
        # tolerance-proportional option is tested below
        ig = GeneralizedAlpha(m, backend=backend, rtol=rtol, atol=rtol, tolerance_proportional=False)
        ig.initialize(0.0)
        worst = 0.0
        for k in range(1, 31):
            ig.advance(0.001 * k)
            q_ref = sol(ig.t)[:7]
            worst = max(worst, float(np.max(np.abs(ig.q - q_ref) / np.maximum(1.0, np.abs(q_ref)))))
            assert np.max(np.abs(m.constraints(ig.q, ig.t))) < 1e-9
        errors[rtol] = worst
        q_ref, _ = andrews_reference(0.03)
        end_errors[rtol] = float(np.max(np.abs(ig.q - q_ref) / np.maximum(1.0, np.abs(q_ref))))
    print("Andrews max error over t in (0, 0.03]:", errors, "at t = 0.03:", end_errors)
    # stated tolerance (2nd-order method, local error control, ~1e3 steps):
    # the global error stays below 500·rtol for rtol 1e-6 and 3000·rtol for 1e-8
    assert errors[1e-6] < 5e-4 and end_errors[1e-6] < 5e-4
    assert errors[1e-8] < 3e-5 and end_errors[1e-8] < 3e-5
    assert errors[1e-4] > 5 * errors[1e-6] > 25 * errors[1e-8]


# -- Newton at small steps (issue 12) -------------------------------------------------------
# Fixed h, 300 steps: (error in q against the index-1 DOP853 reference at
# t = 300 h, relative as max |Δq|/max(1, |q_ref|)).  Measured on the Python
# reference before the scale-aware Newton test (20.5 iterations and 9.1 LU per
# step at h = 1e-6 on Andrews) and after (≤ 2.95 iterations and ≤ 0.17 LU per
# step): the same errors, 3.35e-7 / 2.52e-11 / ≤ 2.6e-15 on Andrews at
# h = 1e-5 / 1e-6 / 1e-7, ≤ 3.1e-15 on the pendulum.
SMALL_H_ERRORS = {("andrews", 1e-5): 3.35e-7, ("andrews", 1e-6): 2.52e-11}


@pytest.mark.parametrize("model_name", ["andrews", "pendulum"])
@pytest.mark.parametrize("h", [1e-5, 1e-6, 1e-7])
def test_newton_iterations_per_step_stay_bounded_as_h_shrinks(model_name, h, backend):
    """The index-3 system is scaled (constraint rows by 1/(β h²), eq. 32-33),
    and a Newton update at the rounding level of q counts as converged: the
    iteration count per step does not grow as h → 0, accuracy unchanged."""
    m = load_model(model_name)
    ig = GeneralizedAlpha(m, backend=backend, h=h)
    ig.initialize(0.0)
    ig.advance(300 * h)
    st = ig.stats
    assert st["steps"] == 300 and st["rejected"] == 0
    assert st["newton_iterations"] <= 3.5 * st["steps"], st
    assert st["lu_factorizations"] <= 0.25 * st["steps"], st
    q_ref, _ = index1_reference(load_model(model_name), 300 * h)
    err = float(np.max(np.abs(ig.q - q_ref) / np.maximum(1.0, np.abs(q_ref))))
    assert err <= 2 * SMALL_H_ERRORS.get((model_name, h), 1e-13), err
    assert np.max(np.abs(m.constraints(ig.q, ig.t))) < 1e-15


# -- tolerance proportionality (issue 12) -------------------------------------------------
def _wp_error(model_name, rtol):
    """Mixed error max|Δq|/max(1,|q_ref|) at the end time of benchmarks/work_precision.py
    (Andrews t = 0.03 against the IVP test set, pendulum t = 3 against DOP853 at
    1e-12), atol = rtol/100; compiled backend where it exists (within the
    reference's 1e-15 perturbation spread: tests/test_backends.py)."""
    if model_name == "andrews":
        from cosim.models.andrews import REFERENCE_Q as q_ref, REFERENCE_T as t_end
    else:
        t_end = 3.0
        q_ref = pendulum_reference(t_end)[0]
    # the default (tolerance_proportional on since issue 12)
    ig = make_integrator(load_model(model_name), "generalized-alpha", backend="auto",
                         rtol=rtol, atol=rtol / 100)
    ig.initialize(0.0)
    ig.advance(t_end)
    return float(np.max(np.abs(ig.q - q_ref) / np.maximum(1.0, np.abs(q_ref))))


# err/rtol measured with 8 starts perturbed by 1e-15 (python
# benchmarks/work_precision.py --models andrews pendulum --methods
# generalized-alpha --backend numba --starts 8): Andrews 1.03, 0.61, 0.49,
# 0.39, 0.27, 0.45, 0.78 at rtol 1e-3 … 1e-9 (spread ≤ 1.26; against the IVP
# test set's q(0.03), 9.1e-11 from the benchmark's DOP853 reference: no
# difference at these errors); pendulum 2.2-2.8 (spread ≤ 1.04); slope over
# 1e-3, 1e-5, 1e-7: 1.15 / 1.00.
# Bands: ≥ 2× beyond the measured values and their spread.
ERR_BAND = {"andrews": (0.09, 2.1), "pendulum": (1.1, 5.4)}


@pytest.mark.parametrize("model_name", ["andrews", "pendulum"])
def test_error_follows_rtol_in_a_bounded_band(model_name):
    """Tolerance-proportional control: err/rtol stays in a band from rtol 1e-3 to
    1e-7 and the log-log slope is ~1 (measured 1.15 / 1.00 over these three;
    the plain eq. 34 gives slopes 0.72 / 0.67 over 1e-3 … 1e-9 with err/rtol
    growing to 45 / 259 at 1e-9)."""
    rtols = (1e-3, 1e-5, 1e-7)
    errs = [_wp_error(model_name, r) for r in rtols]
    ratios = [e / r for e, r in zip(errs, rtols)]
    print(model_name, "err/rtol", ratios)
    lo, hi = ERR_BAND[model_name]
    assert all(lo <= x <= hi for x in ratios), ratios
    slope = np.polyfit(np.log10(rtols), np.log10(errs), 1)[0]
    assert 0.85 <= slope <= 1.3, slope


def test_andrews_restore_and_continue_is_bit_identical(backend):
    m = load_model("andrews")
    a = GeneralizedAlpha(m, backend=backend, rtol=1e-5, atol=1e-5)
    a.initialize(0.0)
    a.advance(0.011)
    snap = a.state()
    a.advance(0.02)
    b = GeneralizedAlpha(load_model("andrews"), backend=backend, rtol=1e-5, atol=1e-5)
    b.initialize(0.0)
    b.restore(snap)
    b.advance(0.02)
    assert np.array_equal(a.y, b.y) and np.array_equal(a.lam, b.lam)
    assert a.stats == b.stats and a.h_next == b.h_next
    # and restoring into the same object again repeats it once more
    a.restore(snap)
    a.advance(0.02)
    assert np.array_equal(a.y, b.y)


@pytest.mark.parametrize("options", [{"rtol": 1e-6}, {"h": 2e-3}])
def test_pendulum_restore_and_continue_is_bit_identical(options, backend):
    a = GeneralizedAlpha(Pendulum(), backend=backend, **options)
    a.initialize(0.0)
    a.advance(0.537)
    snap = a.state()
    a.advance(1.5)
    b = GeneralizedAlpha(Pendulum(), backend=backend, **options)
    b.initialize(0.0)
    b.restore(snap)
    b.advance(1.5)
    assert np.array_equal(a.y, b.y) and np.array_equal(a.qdd, b.qdd)
    assert a.stats == b.stats


# -- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan"), float("inf"), "abc"])
def test_bad_rho_inf_is_rejected_naming_the_value(bad):
    with pytest.raises(InvalidInputError, match="rho_inf") as exc:
        GeneralizedAlpha(Pendulum(), rho_inf=bad)
    assert str(bad) in str(exc.value) or repr(bad) in str(exc.value)


def test_unknown_option_is_rejected():
    with pytest.raises(UnknownParameterError, match="rho"):
        GeneralizedAlpha(Pendulum(), rho=0.5)


class _BrokenPendulum(Pendulum):
    """Forces turn NaN after t = 0.2: every step beyond must fail."""

    def forces(self, q, v, t, u):
        if t > 0.2:
            return np.full(2, np.nan)
        return super().forces(q, v, t, u)


def test_failed_step_raises_with_t_h_cause_and_leaves_state_unchanged():
    # (python backend: the subclass overrides the forces its kernels describe)
    ig = GeneralizedAlpha(_BrokenPendulum(), rtol=1e-6)
    ig.initialize(0.0)
    ig.advance(0.2)
    before = ig.state()
    with pytest.raises(ConvergenceError) as exc:
        ig.advance(0.5)
    err = exc.value
    assert err.t == pytest.approx(0.2) and err.h > 0 and "not finite" in err.cause
    assert "t=" in str(err) and "h=" in str(err)
    after = ig.state()
    assert after["t"] == before["t"] and np.array_equal(after["y"], before["y"])
    assert after["stats"] == before["stats"]
    assert after["method_state"]["h_next"] == before["method_state"]["h_next"]
    # a direct step() failure also leaves t, y and the step proposal alone
    h_next = ig.h_next
    with pytest.raises(ConvergenceError):
        ig.step(0.5)
    assert ig.t == before["t"] and np.array_equal(ig.y, before["y"]) and ig.h_next == h_next


@pytest.mark.parametrize("method", ["generalized-alpha", "generalized-alpha-i2"])
def test_restore_into_a_fresh_uninitialised_integrator(method):
    """A snapshot continues in a new object that never ran initialize()."""
    a = make_integrator(Pendulum(), method, rtol=1e-4)
    a.initialize(0.0)
    a.advance(0.3)
    snap = a.state()
    a.advance(0.6)
    b = make_integrator(Pendulum(), method, rtol=1e-4)
    b.restore(snap)
    b.advance(0.6)
    assert np.array_equal(a.y, b.y) and a.stats == b.stats


@pytest.mark.parametrize("model_name", ["andrews", "pendulum"])
def test_error_estimate_tangent_part_is_the_m_orthogonal_projection(model_name):
    """The tolerance-proportional estimate's P h²x (ga_kernel._tangent_part):
    P = I − M⁻¹C_qᵀ(C_q M⁻¹C_qᵀ)⁻¹C_q, against numpy's dense solve — C_q P x = 0,
    P annihilates the Newton correction direction M⁻¹C_qᵀ z, P² = P, and P keeps
    M-orthogonal complements (Andrews: q-dependent M through the augmented
    system; pendulum: constant diagonal M through the m×m system)."""
    m = load_model(model_name)
    ig = GeneralizedAlpha(m, rtol=1e-6, atol=1e-8)
    ig.initialize(0.0)
    ig.advance(1e-3)
    q, t = ig.q, ig.t
    C, M = m.constraint_jacobian(q, t), m.mass(q, t)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(m.n_q)
    MiCt = np.linalg.solve(M, C.T)
    expected = x - MiCt @ np.linalg.solve(C @ MiCt, C @ x)
    px = ig.tangent_part(q, t, x)
    scale = np.abs(x).max()
    assert np.abs(px - expected).max() <= 1e-12 * scale
    assert np.abs(C @ px).max() <= 1e-12 * scale * np.abs(C).max()
    z = rng.standard_normal(m.n_c)
    assert np.abs(ig.tangent_part(q, t, MiCt @ z)).max() <= 1e-12 * np.abs(MiCt @ z).max()
    assert np.abs(ig.tangent_part(q, t, px) - px).max() <= 1e-12 * scale


def test_tangent_estimate_auto_is_on_only_where_the_weights_reach_the_rounding_floor():
    """tangent_estimate="auto" (default): eq. 34's split is on where the
    proportional internal rtol s·rtol is below AUTO_TANGENT·ERR_FLOOR·ROUNDOFF·ε/β
    = 7.2e-13 at ρ∞ = 0.8 (user rtol < 8.02e-10; ρ∞ = 1, β = 1/4: < 9.24e-10);
    true/false are taken as given, and the plain eq. 34 never splits."""
    model = load_model("andrews")

    def tangent(rtol, **kw):
        return GeneralizedAlpha(model, rtol=rtol, atol=rtol / 100, **kw)._tangent

    assert [tangent(r) for r in (1e-3, 1e-8, 1e-9, 8.1e-10, 7.9e-10, 1e-10)] == [False] * 4 + [True] * 2
    assert not tangent(9e-10) and tangent(9e-10, rho_inf=1.0) and not tangent(9.3e-10, rho_inf=1.0)
    assert tangent(1e-3, tangent_estimate=True) and not tangent(1e-10, tangent_estimate="false")
    assert not tangent(1e-10, tolerance_proportional=False)
    assert GeneralizedAlpha(model, tangent_estimate=" Auto").opts["tangent_estimate"] == "auto"
    assert GeneralizedAlpha(model, tangent_estimate="on").opts["tangent_estimate"] is True
    assert auto_tangent(7.9e-10, alpha_parameters(0.8)[3]) and not auto_tangent(8.1e-10, alpha_parameters(0.8)[3])
    with pytest.raises(InvalidInputError, match="tangent_estimate must be true or false or 'auto', got 'maybe'"):
        tangent(1e-6, tangent_estimate="maybe")


def test_tangent_estimate_auto_runs_the_explicit_option_where_on_and_the_plain_estimate_elsewhere(backend):
    """Andrews from rest to t = 1e-4: the default at rtol 1e-10 takes exactly the
    steps of tangent_estimate=true (both backends read the resolved switch; the
    kernel through ERR_TANGENT), which differ from the plain estimate's
    (rtol 1e-10 to t = 3e-4: 3178 against 577-578 steps on either backend), and at
    rtol 1e-8 exactly those of tangent_estimate=false."""
    def go(rtol, **kw):
        ig = make_integrator(load_model("andrews"), "generalized-alpha", backend=backend, rtol=rtol,
                             atol=rtol / 100, **kw)
        ig.initialize(0.0)
        ig.advance(1e-4)
        return dict(ig.stats), ig.y.copy()

    for rtol, same, other in ((1e-10, True, False), (1e-8, False, True)):
        auto, explicit, different = go(rtol), go(rtol, tangent_estimate=same), go(rtol, tangent_estimate=other)
        assert auto[0] == explicit[0] and np.array_equal(auto[1], explicit[1])
        assert auto[0]["steps"] != different[0]["steps"], (rtol, auto[0], different[0])


@pytest.mark.parametrize("start", [1e6, 1e7])
def test_a_step_too_small_to_move_t_fails_the_same_way_compiled_and_uncompiled(start, backend):
    """Fixed h = 1e-10 from t = 1e6 or 1e7 (h ≤ 4 ε |t|: t + h rounds back to t or moves
    it by one ulp): one communication step of 1e-7 fails at once with "step size
    underflow", the state unchanged — once the compiled kernel took 859 steps with a
    16 % time error (t moved by ulps while the formulas used h) or burnt 100 000 steps."""
    ig = make_integrator(load_model("two_link"), "generalized-alpha", backend=backend, h=1e-10)
    ig.initialize(start)
    y0 = ig.y
    with pytest.raises(ConvergenceError, match="step size underflow") as exc:
        ig.advance(start + 1e-7)
    assert exc.value.cause == "step does not advance t" and exc.value.h == 1e-10
    assert ig.t == start and np.array_equal(ig.y, y0) and ig.stats["steps"] == 0
