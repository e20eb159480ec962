"""BDF family (seed 000 §4, Algorithm 4): bdf (index 3 + projection filter),
bdf-i2 (GGL) and bdf-i1 against independent references (tests/reference.py,
scipy on the index-1 ODE) and against generalized-α."""
import math
import re
import warnings

import numpy as np
import pytest
from reference import andrews_reference, held_input_trajectory, index1_rhs, pendulum_reference
from scipy.integrate import solve_ivp

import cosim
from cosim.errors import (ConvergenceError, FixedStepAccuracyWarning, FixedStepError,
                          InvalidInputError, SingularMatrixError, UnknownParameterError)
from cosim.integrators import make_integrator
from cosim.integrators.common import consistent_accelerations
from cosim.models import load_model

BDF_METHODS = ("bdf", "bdf-i2", "bdf-i1")


def run(model, method, t_end, **options):
    # the one implementation, compiled (the uncompiled run of the same functions is held
    # to it in test_backends.py)
    options.setdefault("backend", "auto")
    integ = make_integrator(load_model(model) if isinstance(model, str) else model, method, **options)
    integ.initialize()
    integ.advance(t_end)
    return integ


# -- Andrews' squeezer (seed 000 §8.1, Table 5) ---------------------------------------
@pytest.fixture(scope="module")
def andrews_ref():
    return andrews_reference(0.03)


def test_andrews_rtol_1e4_within_seed_step_count_and_as_accurate_as_generalized_alpha(andrews_ref):
    """Seed 000 §8.1, Table 5, in the seed's norm (eq. 35, error_norm="max"):
    BDF-I3 at rtol 1e-4 in at most 568 steps, error at t = 0.03 no worse than
    generalized-α at rtol 1e-6 (same atol)."""
    qr, _ = andrews_ref
    integ = run("andrews", "bdf", 0.03, rtol=1e-4, atol=1e-8, error_norm="max")
    ga = run("andrews", "generalized-alpha", 0.03, rtol=1e-6, atol=1e-8)
    assert integ.t == 0.03
    assert integ.stats["steps"] <= 568
    err = np.max(np.abs(integ.q - qr))
    err_ga = np.max(np.abs(ga.q - qr))
    # measured over 9 starts (q0 and 8 perturbations of 1e-15, as in the loop of
    # test_andrews_default_rms_norm_error_follows_rtol with error_norm="max"): bdf 488-503
    # steps, error 1.2e-6 … 1.5e-5 (round-off decides where in that range a start lands);
    # generalized-α (today's tolerance mapping) 7576-7582 steps, 6.0e-6 … 6.2e-6 — the
    # same accuracy within bdf's spread (at most 2.5× generalized-α's error)
    assert err <= 4.0 * err_ga
    assert integ.stats["steps"] * 3 < ga.stats["steps"]
    # the high orders carry the run (seed Fig. 4: mostly above order 2)
    assert sum(integ.order_counts[3:]) > 0.8 * integ.stats["steps"]


@pytest.mark.parametrize("rtol", [1e-4, 1e-9])
def test_andrews_default_rms_norm_error_follows_rtol(rtol, andrews_ref):
    """The default error norm of bdf (RMS, as DASSL / IDA; issue 12): at
    t = 0.03 err/rtol within [0.01, 10] and the spread over 1e-15 perturbed
    starts ≤ 3× — the two goals the seed's max norm missed (0.0070 × rtol at
    rtol 1e-4; spread up to 9.2× at 1e-9)."""
    qr, _ = andrews_ref
    errs, steps = [], []
    for seed in range(1, 9):
        model = load_model("andrews")
        integ = make_integrator(model, "bdf", rtol=rtol, atol=rtol / 100, backend="auto")
        assert integ.opts["error_norm"] == "rms"
        integ.initialize(0.0, perturbed_start(model, seed))
        integ.advance(0.03)
        errs.append(andrews_error(integ, qr) / rtol)
        steps.append(integ.stats["steps"])
    # measured (benchmarks/work_precision.py --methods bdf, both backends):
    # rtol 1e-4: 0.077 × rtol, 388 steps at every start; rtol 1e-9: 0.25 × rtol
    # (spread 1.67 python), 2361-2459 steps
    assert 0.01 <= min(errs) and max(errs) <= 10.0
    assert max(errs) <= 3.0 * min(errs)


def test_andrews_velocity_weights_option_dassl_convention(andrews_ref):
    """velocity_weights="velocity" (W = RTOL|v_k| + ATOL, as DASSL / IDA):
    fewer steps at the same rtol and a correspondingly larger error; at the
    tightened rtol it matches the default's accuracy in fewer steps than the
    seed's 568."""
    qr, _ = andrews_ref
    loose = run("andrews", "bdf", 0.03, rtol=1e-4, atol=1e-8, velocity_weights="velocity")
    seed = run("andrews", "bdf", 0.03, rtol=1e-4, atol=1e-8)
    tight = run("andrews", "bdf", 0.03, rtol=1e-7, atol=1e-8, velocity_weights="velocity")
    err = {k: np.max(np.abs(r.q - qr)) for k, r in (("loose", loose), ("seed", seed), ("tight", tight))}
    # measured over 9 starts (1e-15 perturbations): loose 175 steps, 4.4e-3;
    # seed 492-503 steps, 1.3e-6 … 1.1e-5; tight 455 steps, 6.6e-6
    assert loose.stats["steps"] < 0.6 * seed.stats["steps"]
    assert err["loose"] > 100 * err["seed"]
    assert err["tight"] < 1e-4 and tight.stats["steps"] <= 568


def andrews_error(integ, qr):
    """Mixed norm of benchmarks/work_precision.py: max |Δq_k| / max(1, |q_ref,k|)."""
    return float(np.max(np.abs(integ.q - qr) / np.maximum(1.0, np.abs(qr))))


def perturbed_start(model, seed):
    """The model's initial state with q0 perturbed by 1e-15·max(1, |q0_k|)."""
    y0 = model.initial_y()
    n = model.n_q
    y0[:n] += 1e-15 * np.maximum(1.0, np.abs(y0[:n])) * np.random.default_rng(seed).standard_normal(n)
    return y0


@pytest.mark.parametrize("method", ["bdf", "bdf-i2"])
def test_andrews_error_falls_with_rtol(method, andrews_ref):
    """Tolerance proportionality with atol = rtol/100 (issue 12's convention:
    with a fixed atol = 1e-8 the error stops at ~7e-7, set by atol on the
    near-zero coordinates, and which rtol reaches it first is roundoff)."""
    qr, _ = andrews_ref
    rtols = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
    errs = [andrews_error(run("andrews", method, 0.03, rtol=r, atol=r / 100), qr) for r in rtols]
    # measured (benchmarks/work_precision.py, median of 8 perturbed starts,
    # spread ≤ 1.31 at these rtols), rtol 1e-3 … 1e-7:
    #   bdf    3.1e-5 7.0e-7 1.1e-7 1.6e-8 4.4e-9
    #   bdf-i2 1.2e-5 3.0e-6 7.0e-7 8.6e-8 1.0e-8
    for tighter, looser in zip(errs[1:], errs[:-1]):
        assert tighter < 2.0 * looser
    for r, e in zip(rtols, errs):
        assert 1e-3 * r < e < 10.0 * r
    slope = np.polyfit(np.log10(rtols), np.log10(errs), 1)[0]
    assert 0.7 < slope < 1.3          # measured: bdf 0.93, bdf-i2 0.76


@pytest.mark.parametrize("method", ["bdf-i2", "bdf-i1"])
def test_rtol_1e12_completes_with_the_weights_rounding_floor(method, andrews_ref):
    """rtol 1e-12, atol 1e-14: a velocity near a zero crossing has error weight
    ~6e-14 against ~2e-13 of rounding from the coupled solve (ε·max|v|), so its
    difference never fell below the weight and the step collapsed (bdf-i1 failed
    at t = 0.0104 with h = 1.5e-17, bdf-i2 already at rtol 1e-11).  The weights are
    floored at WEIGHT_FLOOR·ε·max|v| (and ·max|q|): the run completes.  Measured
    (compiled): bdf-i2 5534 steps, error 9.2e-13; bdf-i1 4056, 2.8e-12 (relative,
    against the converged index-1 solution)."""
    qr, _ = andrews_ref
    integ = run("andrews", method, 0.03, rtol=1e-12, atol=1e-14, backend="auto")
    assert integ.t == 0.03
    assert np.max(np.abs(integ.q - qr) / np.maximum(1.0, np.abs(qr))) < 1e-10


def test_min_step_error_names_a_tight_tolerance():
    """Where the step collapses at a tight tolerance the error says that the tolerance
    is the likely cause and what to do (as IDA's "too much accuracy requested"); both
    backends append bdf.tolerance_hint.  (Index-3 bdf at rtol 1e-12 on Andrews
    collapses from rest at t ≈ 6.4e-6 on the compiled backend and completes on the
    reference: which one fails there is a matter of rounding, so no run is asserted.)"""
    from cosim.integrators.bdf import tolerance_hint
    tight = tolerance_hint("bdf", 1e-12, 1e-14)
    assert tight.startswith("; rtol 1e-12, atol 1e-14 may ask for more than bdf resolves")
    assert "generalized-alpha" in tight
    assert tolerance_hint("bdf", 1e-6, 1e-8) == ""


@pytest.mark.parametrize("method", BDF_METHODS)
def test_tiny_atol_from_rest(method, andrews_ref):
    """atol 1e-12 with every velocity zero at t = 0: the index-3 v = q'^{(0)} + δ/ĥ
    would ask Newton for less than roundoff without the velocity-weight floor
    (it failed at t = 8.6e-9 with h = 7.9e-18 before)."""
    qr, _ = andrews_ref
    integ = run("andrews", method, 0.03, rtol=1e-5, atol=1e-12)
    assert integ.t == 0.03
    # relative to max(1, |q_ref|) (q1, q2 ≈ ±15.8), against 5 × rtol; measured:
    # bdf 6.1e-7, bdf-i2 1.6e-7, bdf-i1 9.5e-6 (velocity weights, issue 12)
    assert np.max(np.abs(integ.q - qr) / np.maximum(1.0, np.abs(qr))) < 5e-5


@pytest.mark.parametrize("method", BDF_METHODS)
def test_pendulum_accuracy_and_tolerance_proportionality(method):
    qr, vr = pendulum_reference(3.0)
    errs = []
    for rtol in (1e-4, 1e-7):
        integ = run("pendulum", method, 3.0, rtol=rtol, atol=rtol * 1e-2)
        errs.append(max(np.max(np.abs(integ.q - qr)), np.max(np.abs(integ.v - vr))))
    assert errs[0] < 5e-3
    assert errs[1] < 1e-5
    assert errs[1] < 1e-2 * errs[0]


@pytest.mark.parametrize("rtol", [1e-4, 1e-6])
def test_andrews_error_spread_over_perturbed_starts(rtol, andrews_ref):
    """Roundoff robustness (issue 12): 8 starts with q0 perturbed by 1e-15
    give errors within a factor 3 (before the per-step iteration matrix and
    the scaled order tests: 7-14× at rtol 1e-5 … 1e-6)."""
    qr, _ = andrews_ref
    errs, steps = [], []
    for seed in range(1, 9):
        model = load_model("andrews")
        integ = make_integrator(model, "bdf", rtol=rtol, atol=rtol / 100, backend="auto")
        integ.initialize(0.0, perturbed_start(model, seed))
        integ.advance(0.03)
        errs.append(andrews_error(integ, qr))
        steps.append(integ.stats["steps"])
    # measured (benchmarks/work_precision.py): spread 1.00 at 1e-4 (457 steps),
    # 1.17 at 1e-6 (949-963 steps)
    assert max(errs) <= 3.0 * min(errs)
    assert max(steps) <= 1.1 * min(steps)


def test_andrews_tight_rtol_no_step_explosion():
    """rtol 1e-8 (atol 1e-10): the index-3 form needs no more steps than the
    index-2 one and rejects few (before: 3400-5800 steps, 19-27 % rejected;
    measured now 1894-1942 steps, ~5 % rejected; bdf-i2 2345 steps)."""
    bdf = run("andrews", "bdf", 0.03, rtol=1e-8, atol=1e-10)
    i2 = run("andrews", "bdf-i2", 0.03, rtol=1e-8, atol=1e-10)
    assert bdf.stats["steps"] <= 1.2 * i2.stats["steps"]
    assert bdf.stats["rejected"] < 0.1 * bdf.stats["steps"]


def test_andrews_velocity_error_scaled_option(andrews_ref):
    """velocity_error="scaled" (Hairer & Wanner II §VII.3): the velocity
    estimate times ĥ, the same order in h as the positions.  Fewer steps,
    error a few times rtol (measured at rtol 1e-4, atol 1e-6: 156 steps,
    3.8e-4, identical over perturbed starts; default 457 steps, 7.0e-7)."""
    qr, _ = andrews_ref
    # both in the seed's norm (eq. 35), where the figures above were measured
    scaled = run("andrews", "bdf", 0.03, rtol=1e-4, atol=1e-6, velocity_error="scaled",
                 error_norm="max")
    default = run("andrews", "bdf", 0.03, rtol=1e-4, atol=1e-6, error_norm="max")
    assert scaled.opts["velocity_error"] == "scaled"
    assert scaled.stats["steps"] < 0.5 * default.stats["steps"]
    assert andrews_error(default, qr) < andrews_error(scaled, qr) < 10 * 1e-4


# -- crank-slider (seed 000 §8.2, Fig. 7, Table 6) --------------------------------------
# per error norm: the seed's (eq. 35) and the default RMS, with what each was
# measured to give (bdf at rtol 1e-3, atol 1e-2, identical over 8 starts
# perturbed by 1e-15): max 465 steps, late orders {1: 165, 2: 205, 3: 38, 4: 1},
# 9.7e-5 from the reference; rms 321 steps, late orders ≤ 2 in 95.5 %, 3 of 264
# above 3, 2.3e-4 from the reference and from generalized-α
CRANK_BOUNDS = {"max": dict(err=2e-4, above3=0.01), "rms": dict(err=5e-4, above3=0.02)}


@pytest.fixture(scope="module", params=sorted(CRANK_BOUNDS))
def crank_runs(request):
    bdf = make_integrator(load_model("crank_slider"), "bdf", rtol=1e-3, atol=1e-2,
                          error_norm=request.param, backend="auto")
    bdf.initialize()
    bdf.advance(0.1)
    ga = run("crank_slider", "generalized-alpha", 0.1, rtol=1e-4, atol=1e-6)
    return bdf, ga, CRANK_BOUNDS[request.param]


def test_crank_slider_bdf_settles_at_low_order(crank_runs):
    bdf, _, bound = crank_runs
    assert bdf.max_order == 5                      # no manual max_order
    late = [k for t, k in bdf.order_history if t > 0.02]
    assert late, "no steps recorded"
    low = sum(1 for k in late if k <= 2) / len(late)
    assert low > 0.85                              # seed Fig. 7: order ~2
    assert sum(1 for k in late if k > 3) <= bound["above3"] * len(late)


def test_crank_slider_completes_without_piling_failures(crank_runs):
    bdf, _, _ = crank_runs
    assert bdf.t == 0.1
    assert bdf.stats["rejected"] < 0.5 * bdf.stats["steps"]
    assert bdf.newton_failures == 0
    # issue 12 item 4: within 2× of seed Table 6's 436-494 steps, velocities controlled
    assert bdf.stats["steps"] <= 2 * 494


def test_crank_slider_agrees_with_generalized_alpha_and_reference(crank_runs):
    from cosim.models.crank_slider import REFERENCE_Q as qr   # IVP test-set reference, t = 0.1
    bdf, ga, bound = crank_runs
    assert np.max(np.abs(bdf.q - ga.q)) < bound["err"]
    assert np.max(np.abs(bdf.q - qr)) < bound["err"]
    assert np.max(np.abs(ga.q - qr)) < 2e-4


@pytest.mark.parametrize("method", ["bdf", "bdf-i2"])
def test_crank_slider_position_error_control_settles_at_order_two(method):
    """With the local error test on q only (velocity_error=False, like the
    generalized-α estimate; the Skelboe / smoothness tests still watch q and
    v) the unresolved stiff velocities no longer dictate the step: the order
    settles at 2 by itself (seed Fig. 7), few rejections (seed: ~10 %), fewer
    steps than generalized-α, positions as accurate (seed Table 6)."""
    from cosim.models.crank_slider import REFERENCE_Q as qr
    bdf = run("crank_slider", method, 0.1, rtol=1e-3, atol=1e-3, velocity_error=False)
    ga = run("crank_slider", "generalized-alpha", 0.1, rtol=1e-3, atol=1e-3)
    assert bdf.max_order == 5
    late = [k for t, k in bdf.order_history if t > 0.02]
    assert sum(1 for k in late if k == 2) > 0.6 * len(late)
    # measured: bdf late orders {2: 52, 3: 9}; bdf-i2 {2: 42, 3: 16, 4: 1}
    assert sum(1 for k in late if k <= 3) >= 0.95 * len(late)
    assert max(late) <= 4
    assert bdf.stats["rejected"] < 0.1 * bdf.stats["steps"]
    assert bdf.stats["steps"] < ga.stats["steps"]
    assert np.max(np.abs(bdf.q - qr)) < 1e-4
    assert np.max(np.abs(bdf.q - ga.q)) < 1e-4


# -- index-3 spikes vs smooth index-2 / index-1 multipliers -----------------------------
def test_multiplier_spikes_only_in_index3():
    """λ of the index-3 form deviates from the λ consistent with (q, v) (the
    spikes of seed §8.2); index 2 much less, index 1 not at all.  The maximum
    second difference of λ along the steps orders the same way for 3 vs 2/1."""
    spike, rough = {}, {}
    for method in BDF_METHODS:
        # the same error norm for the three forms (the seed's, eq. 35; bdf-i1's
        # default weighs v by |v|): the comparison is of formulations
        integ = make_integrator(load_model("andrews"), method, rtol=1e-5, atol=1e-8, backend="auto",
                                velocity_weights="position")
        integ.initialize()
        lams, dev, scale = [integ.lam.copy()], 0.0, 0.0
        while integ.t < 0.03:
            integ.step(0.03)
            lams.append(integ.lam.copy())
            _, lam_star = consistent_accelerations(integ.model, integ.t, integ.q, integ.v, integ.u)
            dev = max(dev, float(np.max(np.abs(integ.lam - lam_star))))
            scale = max(scale, float(np.max(np.abs(lam_star))))
        spike[method] = dev / scale
        L = np.array(lams)
        rough[method] = float(np.max(np.abs(np.diff(L, 2, axis=0)).max(axis=0) / np.ptp(L, axis=0)))
    assert spike["bdf"] > 30 * spike["bdf-i2"]
    assert spike["bdf-i2"] > 10 * spike["bdf-i1"]
    assert spike["bdf-i1"] < 1e-5
    assert rough["bdf"] > rough["bdf-i2"] and rough["bdf"] > rough["bdf-i1"]


# -- landing, dense output, restart ----------------------------------------------------
def test_exact_landing_on_communication_points_keeps_step_count():
    free = run("pendulum", "bdf", 2.0, rtol=1e-6, atol=1e-8)
    integ = make_integrator(load_model("pendulum"), "bdf", rtol=1e-6, atol=1e-8)
    integ.initialize()
    for i in range(1, 41):
        t = i * 0.05
        integ.advance(t)
        assert integ.t == t
    assert integ.stats["steps"] < 1.6 * free.stats["steps"]
    qr, _ = pendulum_reference(2.0)
    assert np.max(np.abs(integ.q - qr)) < 1e-4


@pytest.mark.parametrize("method", BDF_METHODS)
def test_dense_output_between_steps(method):
    integ = make_integrator(load_model("pendulum"), method, rtol=1e-7, atol=1e-9)
    integ.initialize()
    integ.advance(1.0)
    while integ.t < 1.3:
        integ.step(2.0)
    t0, t1 = integ.t_prev, integ.t
    assert np.array_equal(integ.dense_output(t1), integ.y)
    np.testing.assert_allclose(integ.dense_output(t0), integ.y_prev, atol=1e-12)
    tm = 0.5 * (t0 + t1)
    qr, vr = pendulum_reference(tm)
    ym = integ.dense_output(tm)
    assert np.max(np.abs(ym[:2] - qr)) < 1e-5
    assert np.max(np.abs(ym[2:] - vr)) < 1e-4


def test_restart_goes_back_to_order_one():
    integ = make_integrator(load_model("pendulum"), "bdf", rtol=1e-6, atol=1e-8)
    integ.initialize()
    integ.advance(1.0)
    assert integ._k > 1
    integ.restart()     # a discontinuity (an event's jump, a parameter change)
    assert integ._k == 1 and integ.order == 1
    integ.step(2.0)
    assert integ.order == 1
    integ.advance(2.0)
    assert integ.t == 2.0


@pytest.mark.parametrize("method", BDF_METHODS)
def test_restore_continues_bit_identically(method):
    integ = make_integrator(load_model("andrews"), method, rtol=1e-5, atol=1e-8)
    integ.initialize()
    integ.advance(0.01)
    snap = integ.state()
    integ.advance(0.02)
    y_ref, stats_ref, order_ref = integ.y.copy(), dict(integ.stats), integ.order
    # same object
    integ.restore(snap)
    integ.advance(0.02)
    assert np.array_equal(integ.y, y_ref)
    assert integ.stats == stats_ref and integ.order == order_ref
    # fresh objects, initialised or not
    for init in (True, False):
        other = make_integrator(load_model("andrews"), method, rtol=1e-5, atol=1e-8)
        if init:
            other.initialize()
        other.restore(snap)
        other.advance(0.02)
        assert np.array_equal(other.y, y_ref)
        assert other.stats == stats_ref


def test_order_bookkeeping_and_max_order_option():
    integ = run("pendulum", "bdf", 2.0, rtol=1e-6, atol=1e-8, max_order=2)
    assert max(k for _, k in integ.order_history) <= 2
    assert sum(integ.order_counts) == integ.stats["steps"]
    # one advance() call keeps the (t, k) of its last bdf_kernel.HIST steps
    from cosim.integrators.bdf_kernel import HIST
    assert integ.stats["steps"] > HIST and len(integ.order_history) == HIST
    assert integ.order_history[-1][0] == integ.t
    assert integ.order in (1, 2)
    for key in ("steps", "rejected", "newton_iterations", "residual_evaluations",
                "jacobian_evaluations", "lu_factorizations"):
        assert key in integ.stats
    # index 3: one iteration matrix per attempt (the eq. 80 projector must
    # belong to the step); reuse_matrix=true and bdf-i2 reuse it across steps
    assert integ.stats["lu_factorizations"] >= integ.stats["steps"]
    for method, opts in (("bdf", {"reuse_matrix": True}), ("bdf-i2", {})):
        other = run("pendulum", method, 2.0, rtol=1e-6, atol=1e-8, max_order=2, **opts)
        assert other.stats["lu_factorizations"] < 0.5 * other.stats["steps"]   # LU reuse


def test_fixed_step_mode():
    integ = run("pendulum", "bdf-i2", 1.0, h=1e-3)
    qr, _ = pendulum_reference(1.0)
    assert integ.t == 1.0
    assert integ.stats["rejected"] == 0
    assert np.max(np.abs(integ.q - qr)) < 1e-5


# -- bad input ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", [0, 6, 2.5, "3", True, -1, float("nan")])
def test_max_order_out_of_range(value):
    with pytest.raises(InvalidInputError, match="max_order"):
        make_integrator(load_model("pendulum"), "bdf", max_order=value)


@pytest.mark.parametrize("value", ["maybe", 2, None, 0.5])
def test_velocity_error_option_is_boolean(value):
    with pytest.raises(InvalidInputError, match="velocity_error"):
        make_integrator(load_model("pendulum"), "bdf", velocity_error=value)


@pytest.mark.parametrize("value", ["l2", "", 2, None, True])
def test_error_norm_option_is_max_or_rms(value):
    with pytest.raises(InvalidInputError, match=r"error_norm must be 'max' or 'rms', got " + re.escape(repr(value))):
        make_integrator(load_model("pendulum"), "bdf", error_norm=value)


@pytest.mark.parametrize("method, default", [("bdf", "rms"), ("bdf-i2", "max"), ("bdf-i1", "max")])
def test_error_norm_defaults_and_spelling(method, default):
    assert make_integrator(load_model("pendulum"), method).opts["error_norm"] == default
    assert make_integrator(load_model("pendulum"), method, error_norm=" RMS ").opts["error_norm"] == "rms"


@pytest.mark.parametrize("value", ["maybe", 2, None, 0.5])
def test_reuse_matrix_option_is_boolean(value):
    with pytest.raises(InvalidInputError, match="reuse_matrix"):
        make_integrator(load_model("pendulum"), "bdf", reuse_matrix=value)
    with pytest.raises(UnknownParameterError, match="reuse_matrix"):
        make_integrator(load_model("pendulum"), "bdf-i2", reuse_matrix=True)


def test_velocity_error_option_accepts_command_line_words():
    integ = make_integrator(load_model("pendulum"), "bdf", velocity_error="false")
    assert integ.velocity_error is False


def test_unknown_option():
    with pytest.raises(UnknownParameterError, match="rho_inf"):
        make_integrator(load_model("pendulum"), "bdf", rho_inf=0.5)


def test_step_request_out_of_range():
    integ = make_integrator(load_model("pendulum"), "bdf")
    integ.initialize()
    with pytest.raises(InvalidInputError):
        integ.step(0.0)
    with pytest.raises(InvalidInputError):
        integ.advance(-1.0)
    with pytest.raises(InvalidInputError):
        make_integrator(load_model("pendulum"), "bdf", first_step=-1e-3)


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")
def test_singular_iteration_matrix_names_time_and_step_and_keeps_state():
    integ = make_integrator(load_model("pendulum"), "bdf", rtol=1e-6)
    integ.initialize()
    integ.advance(0.5)
    before = integ.state()
    model = integ.model
    model.constraint_jacobian = lambda q, t: np.zeros((1, 2))   # rank-deficient C_q
    integ.invalidate_iteration_matrix()
    with pytest.raises(SingularMatrixError) as info:
        integ.advance(1.0)
    msg = str(info.value)
    assert "t=0.5" in msg and "h=" in msg and "singular" in msg
    assert info.value.t == 0.5 and info.value.h > 0
    assert integ.t == 0.5 and np.array_equal(integ.y, before["y"])
    assert integ.stats == before["stats"]


def test_newton_failure_after_minimum_step_keeps_state():
    integ = make_integrator(load_model("pendulum"), "bdf-i2", rtol=1e-6)
    integ.initialize()
    integ.advance(0.5)
    before = integ.state()
    integ.model.forces = lambda q, v, t, u: np.full(2, np.nan)
    with pytest.raises(ConvergenceError) as info:
        integ.step(1.0)
    msg = str(info.value)
    assert "t=0.5" in msg and "h=" in msg and info.value.cause
    assert integ.t == 0.5 and np.array_equal(integ.y, before["y"])
    assert integ.stats == before["stats"]
    assert integ.h_next == before["method_state"]["h_next"]
    assert math.isfinite(info.value.h)


@pytest.mark.parametrize("method", BDF_METHODS)
def test_a_start_at_rest_in_equilibrium_converges_at_round_off(method, backend):
    """Andrews' squeezer with the driving torque off is in equilibrium at its start
    (q'' ≈ 1e-11, v = 0): every Newton update is round-off of q, which the index-3 norm
    must weigh below its tolerance (bdf_record.ROUNDOFF_FLOOR) — it used to fail at t = 0
    with h → 1e-16.  The run stays where it started, as dopri5 at rtol 1e-10 does."""
    import cosim
    sims = {m: cosim.Simulation("andrews", method=m, rtol=rtol, atol=rtol / 100, backend=b)
            for m, b, rtol in ((method, backend, 1e-6), ("dopri5", "python", 1e-10))}
    for sim in sims.values():
        sim.set_inputs({"torque": 0.0})
        for k in range(10):
            sim.do_step(k * 1e-3, 1e-3)
    q0 = cosim.Simulation("andrews").integrator.q
    q, q_ref = sims[method].integrator.q, sims["dopri5"].integrator.q
    assert np.max(np.abs(q - q_ref)) < 1e-8, q - q_ref      # both at rest: |q - q0| ~ 1e-11
    assert np.max(np.abs(q_ref - q0)) < 1e-8


# -- a held input that changes (zero-order hold) ------------------------------------------
@pytest.mark.parametrize("method", BDF_METHODS)
def test_a_new_input_shifts_the_history_onto_the_new_inputs_past(method):
    """A new held input keeps the order and the step, and moves the history onto the
    solution under the new input through the current point: the earlier points the
    difference arrays imply (the schema's solved_points) against that solution, computed
    backwards from (t, y) by scipy (DOP853, rtol 1e-12).  Pendulum at rtol 1e-7, torque
    0 → 0.5 N·m, history 4-80 ms back, the jump there 2e-6-1.2e-3: what is left of it is
    the jump polynomial's missing s⁴ term, growing as s² relative to it (measured
    0.0001-0.024 of the jump in q, 0.0002-0.048 in v; the two nearest points ≤ 0.0007,
    without the Δa' term 0.0012-0.009).  A jump whose shift exceeds SHIFT_MAX of
    max(1, |q|) restarts at order 1."""
    model = load_model("pendulum")
    integ = make_integrator(model, method, rtol=1e-7, atol=1e-9, backend="auto")
    integ.initialize()
    integ.advance(1.0)
    k, h_next, y = integ._k, integ.h_next, integ.y.copy()
    assert k > 2
    declared = integ.state_declaration
    before = declared.solved_points(integ.state())
    qdd_before = integ.qdd
    u_old, u_new = integ.u.copy(), np.array([0.5, 0.0, 0.0])
    integ.set_inputs(u_new)
    assert integ._k == k and integ.h_next == h_next and np.array_equal(integ.y, y)
    # q'' moved by Δa: eq. 10 under the new input minus under the old one, at this state
    jump = (consistent_accelerations(integ.model, integ.t, integ.q, integ.v, u_new)[0]
            - consistent_accelerations(integ.model, integ.t, integ.q, integ.v, u_old)[0])
    np.testing.assert_allclose(integ.qdd - qdd_before, jump, rtol=1e-9, atol=1e-12)
    after = declared.solved_points(integ.state())
    assert len(after) == len(before) > k
    times = [p[1] for p in after[1:]]
    back = solve_ivp(index1_rhs(model, u_new), (integ.t, min(times)), y, method="DOP853",
                     rtol=1e-12, atol=1e-12, dense_output=True)
    n = model.n_q
    for (i, t_i, y_old, _, _), (_, _, y_new, _, _) in zip(before[1:], after[1:]):
        exact = back.sol(t_i)
        jump_q, jump_v = (np.max(np.abs(y_old[p] - exact[p])) for p in (slice(0, n), slice(n, None)))
        left_q, left_v = (np.max(np.abs(y_new[p] - exact[p])) for p in (slice(0, n), slice(n, None)))
        assert jump_q > 1e-6                                          # a visible jump
        assert left_q <= 0.05 * jump_q and left_v <= 0.1 * jump_v, (i, t_i, left_q / jump_q)
        if i <= 2:
            assert left_q <= 0.002 * jump_q, (i, t_i, left_q / jump_q)
    # a jump over SHIFT_MAX: the restart at order 1
    integ.advance(1.5)
    assert integ._k > 1
    integ.set_inputs([1e4, 0.0, 0.0])
    assert integ._k == 1 and integ.order == 1


def test_a_fixed_step_refused_right_after_a_new_input_names_its_own_attempt():
    """The warm path's RESTART_THEN_ADVANCE (do_step after set_inputs) refused at a fixed
    step puts back the record as it was before the shift, with the failure slots of the
    refused attempt: the error names that attempt's t, estimate and suggested h, as the
    same refusal without the new input does (two_link, bdf, h = 0.2 cut to 0.15; a new
    torque of 1e-12 N·m moves the estimate by round-off)."""
    pytest.importorskip("numba")

    def refused(steps, nudge):
        sim = cosim.Simulation("two_link", method="bdf", h=0.2, rtol=1e-6, atol=1e-8, backend="numba")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FixedStepAccuracyWarning)
            with pytest.raises(FixedStepError) as info:
                for k in range(steps):
                    if nudge and k == steps - 1:
                        sim.set_inputs(np.array([1e-12, 0.0]))
                    sim.do_step(sim.time, 0.15)
        return sim, info.value

    plain, exc0 = refused(40, False)
    k = round(plain.time / 0.15)   # the refused step is the (k+1)-th
    assert k > 0 and exc0.t == plain.time and exc0.estimate > 1e6
    sim, exc = refused(k + 1, True)
    assert sim.integrator._restart_pending and sim.time == plain.time
    assert exc.t == exc0.t and exc.h == exc0.h and exc.estimate == pytest.approx(exc0.estimate, rel=1e-6)
    suggested = [float(re.search(r"take h of ([0-9.e+-]+) or less", str(e)).group(1)) for e in (exc, exc0)]
    order = float(re.search(r"falls at best as h\^(\d+)", str(exc)).group(1))
    assert suggested[0] == suggested[1] == pytest.approx(0.15 * exc0.estimate ** (-1 / order), rel=0.05)


def test_a_model_error_during_the_deferred_shift_leaves_the_shift_to_do():
    """A model function that raises while the deferred shift runs (python backend, the
    model's own code): the record is put back and the shift stays pending, so the next
    advance shifts and continues bit for bit as a run whose model never raised."""
    from cosim.models import model_class

    class Flaky(model_class("pendulum")):
        armed = False

        def forces(self, q, v, t, u):
            if self.armed:
                self.armed = False
                raise RuntimeError("the model failed once")
            return super().forces(q, v, t, u)

    runs = []
    for fail in (False, True):
        model = Flaky()
        integ = make_integrator(model, "bdf", rtol=1e-6, atol=1e-8, backend="python")
        integ.initialize()
        integ.advance(0.05)
        integ.set_inputs([0.5, 0.0, 0.0])
        assert integ._restart_pending
        if fail:
            model.armed = True
            with pytest.raises(RuntimeError, match="failed once"):
                integ.advance(0.1)
            assert integ._restart_pending and integ.t == 0.05
        integ.advance(0.1)
        runs.append(integ)
    assert runs[0].y.tobytes() == runs[1].y.tobytes() and runs[0].stats == runs[1].stats

def test_restoring_a_state_drops_a_pending_shift_without_running_it():
    """The restored state replaces everything a pending shift would write: restore runs
    no shift (no NEW_INPUTS call of the entry) and continues bit for bit as a restore
    into a fresh integrator; a restore refused keeps the shift pending."""
    pytest.importorskip("numba")
    from cosim.errors import StateError
    from cosim.integrators import bdf_kernel as K

    def fresh():
        integ = make_integrator(load_model("two_link"), "bdf", rtol=1e-6, atol=1e-8, backend="numba")
        integ.initialize()
        return integ

    integ = fresh()
    integ.advance(0.05)
    state = integ.state()
    integ.advance(0.08)
    integ.set_inputs([0.3, -0.2])
    modes, call = [], integ._call
    integ._call = lambda mode, *args: (modes.append(mode), call(mode, *args))[1]
    with pytest.raises(StateError):
        integ.restore(dict(state, y=state["y"][:-1]))
    assert integ._restart_pending and modes == []
    integ.restore(state)
    assert modes == [] and not integ._restart_pending
    other = fresh()
    other.restore(state)
    for i in (integ, other):
        i.advance(0.1)
    assert K.NEW_INPUTS not in modes
    assert integ.y.tobytes() == other.y.tobytes() and integ.stats == other.stats

def test_a_shift_refused_on_the_warm_path_is_tried_once():
    """do_step after an input jump over SHIFT_MAX: the entry's RESTART_THEN_ADVANCE
    refuses the shift, and the integrator restarts at once — no second shift (a
    NEW_INPUTS call) — with the bits of the restart the shift's own refusal makes."""
    pytest.importorskip("numba")
    from cosim.integrators import bdf_kernel as K

    sims = [cosim.Simulation("two_link", method="bdf", rtol=1e-6, atol=1e-8, backend="numba") for _ in range(2)]
    for sim in sims:
        for k in range(40):
            sim.set_inputs(np.array([0.1 * np.sin(0.3 * k), 0.0]))
            sim.do_step(sim.time, 1e-3)
        assert sim.integrator.order > 1
        sim.set_inputs(np.array([1e4, 0.0]))
    warm, ref = sims
    modes, call = [], warm.integrator._call
    warm.integrator._call = lambda mode, *args: (modes.append(mode), call(mode, *args))[1]
    ref.integrator.y    # (reading settles: NEW_INPUTS refused, the restart)
    for sim in sims:
        sim.do_step(sim.time, 1e-3)
    assert modes == [K.RESTART, K.WHOLE_INTERVAL]
    assert warm.y.tobytes() == ref.y.tobytes() and dict(warm.stats) == dict(ref.stats)
    assert warm.serialize_state() == ref.serialize_state()

def test_a_rollback_over_more_than_hist_steps_keeps_the_history_before_the_save_point():
    """order_history read between save_point and back_to with more than HIST steps in
    between (so only the last HIST of them entered it): back_to takes back those
    entries and no earlier ones; the history then goes on as an uninterrupted run's."""
    pytest.importorskip("numba")
    from cosim.integrators.bdf_kernel import HIST

    def run_to(integ, t):
        integ.advance(t)
        return list(integ.order_history)

    integ, plain = (make_integrator(load_model("pendulum"), "bdf", h=1e-3, backend="numba") for _ in range(2))
    for i in (integ, plain):
        i.initialize()
    before = run_to(integ, 0.1)
    assert len(before) > 90 and run_to(plain, 0.1) == before
    saved = integ.save_point()
    assert len(run_to(integ, 0.1 + (HIST + 50) * 1e-3)) == len(before) + HIST   # the last HIST of ~HIST + 50
    integ.back_to(saved)
    assert list(integ.order_history) == before
    assert run_to(integ, 0.2) == run_to(plain, 0.2)

@pytest.mark.parametrize("method", BDF_METHODS)
def test_the_compiled_shift_is_the_uncompiled_one_bit_for_bit(method):
    """The history shift at a new held input is one kernel function
    (bdf_shift.shift_history, entry mode NEW_INPUTS), run compiled and as plain Python:
    from the same record (two_link driven for 60 ms, then restored into both
    backends) the same new input leaves the same bits in every array it writes (D, Dz,
    q'', λ, y_prev) and keeps the order and the step.  (two_link's compiled model
    functions give the python backend's bits: test_backends.)"""
    pytest.importorskip("numba")
    model = load_model("two_link")
    driven = make_integrator(model, method, rtol=1e-6, atol=1e-8, backend="numba")
    driven.initialize()
    for k in range(60):
        driven.set_inputs([0.1 * np.sin(10.0 * k * 1e-3), 0.0])
        driven.advance((k + 1) * 1e-3)
    state = driven.state()
    assert state["method_state"]["k"] > 2
    after = {}
    for backend in ("numba", "python"):
        integ = make_integrator(model, method, rtol=1e-6, atol=1e-8, backend=backend)
        integ.initialize()
        integ.restore(state)
        integ.set_inputs([0.3, -0.2])
        assert integ._k == state["method_state"]["k"] and integ.h_next == state["method_state"]["h_next"]
        after[backend] = integ.state()
    numba, python = after["numba"], after["python"]
    assert not np.array_equal(numba["method_state"]["D"], state["method_state"]["D"])   # it moved
    for key in ("qdd", "lam", "y_prev"):
        assert np.array_equal(numba[key], python[key]), key
    for key in ("D", "Dz"):
        assert np.array_equal(numba["method_state"][key], python["method_state"][key]), key
    assert numba["t_prev"] == python["t_prev"] == state["t"]


@pytest.mark.parametrize("method", BDF_METHODS)
def test_driven_error_follows_rtol(method):
    """A new input at every 1 ms communication step (two_link, joint-1 torque 0.1 sin 10t,
    0.5 s, rtol 1e-6, atol 1e-8): the run keeps its order and step (about one step per
    communication step) and its error against the held-input reference (scipy DOP853 per
    held interval, rtol 1e-12) is within 10 × rtol.  rtol bounds each step's local
    error; the global error of the ~500 steps is their sum carried along, measured
    0.6-1.6 × rtol here, as under a constant input (1.6e-6 for bdf) — 10× leaves room
    for the spread in round-off.  Restarting at order 1 at every new input took 3097-3677
    steps and ended 1.2e-4-4.4e-4 off (benchmarks/driven_loop.py)."""
    dt, n_comm = 1e-3, 500
    rtol = 1e-6
    sim = cosim.Simulation("two_link", method=method, rtol=rtol, atol=rtol / 100, backend="auto")
    times = dt * np.arange(n_comm + 1)
    inputs, qs = [], []
    for k in range(n_comm):
        u = np.array([0.1 * np.sin(10.0 * times[k]), 0.0])
        sim.set_inputs(u)
        sim.do_step(times[k], dt)
        inputs.append(u)
        qs.append(sim.integrator.q)
    q_ref, _ = held_input_trajectory("two_link", times, inputs)
    err = np.max(np.abs(np.array(qs) - q_ref) / np.maximum(1.0, np.abs(q_ref)))
    assert err <= 10 * rtol, err
    assert sim.stats["steps"] < 1.2 * n_comm, sim.stats["steps"]
    assert sim.integrator.order > 2


@pytest.mark.parametrize("method", BDF_METHODS)
def test_driven_run_restored_midway_continues_bit_identically(method):
    """A state saved in the middle of a driven run — after the new input shifted the
    history, before the step — passes the state checks (its history's earlier points
    satisfy the equations of motion under the new input) and continues bit for bit."""
    def drive(sim, ks):
        for k in ks:
            sim.set_inputs([0.4 * np.sin(0.3 * k), -0.2])
            sim.do_step(k * 1e-3, 1e-3)

    sim = cosim.Simulation("two_link", method=method, rtol=1e-6, atol=1e-8, backend="auto")
    drive(sim, range(40))
    sim.set_inputs([0.4 * np.sin(0.3 * 40), -0.2])
    blob = sim.serialize_state()
    assert sim.integrator.order > 1                      # the shift kept the order
    sim.do_step(40e-3, 1e-3)
    drive(sim, range(41, 80))
    other = cosim.Simulation("two_link", method=method, rtol=1e-6, atol=1e-8, backend="auto")
    other.deserialize_state(blob)
    other.do_step(40e-3, 1e-3)
    drive(other, range(41, 80))
    assert np.array_equal(other.y, sim.y)
    assert dict(other.stats) == dict(sim.stats)
    assert other.serialize_state() == sim.serialize_state()
