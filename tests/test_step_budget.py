"""Every adaptive method either finishes or refuses up front (cosim/step_budget.py): a
tolerance the method cannot reach within its step budget is refused before the run with
the measured estimate and a cheaper method; a run far dearer than another method's gets
one warning; a run accepted without either finishes within its budget; the probe leaves
the run bit-identical."""
import math
import warnings

import numpy as np
import pytest

import cosim
from cosim import Simulation, step_budget
from cosim.errors import TightToleranceWarning
from cosim.scenario import Scenario
from cosim.step_budget import UnreachableToleranceError


def test_unreachable_tolerance_is_refused_with_estimate_and_cheaper_method():
    # generalized-α at rtol 1e-9 on Andrews in one communication step: ~2.4e5 steps
    # (764 at rtol 1e-4 × 1e5^(1/2)), over max_steps = 100000; it used to fail there
    with pytest.raises(UnreachableToleranceError) as info:
        cosim.simulate("andrews", 0.03, method="generalized-alpha", rtol=1e-9, atol=1e-11,
                       communication_step=0.03)
    text = str(info.value)
    assert "generalized-alpha (order 2) at rtol 1e-09" in text
    est = float(text.split("about ")[1].split(" steps")[0])
    assert 1e5 < est < 1e6                     # measured 2.42e5 (steps grow as rtol^-1/2)
    assert "max_steps=100000" in text and "suggested: method 'dopri5'" in text
    # a larger budget accepts it (with one warning: dopri5 is far cheaper)
    sim = Simulation("andrews", method="generalized-alpha", rtol=1e-9, atol=1e-11,
                     method_options={"max_steps": 10**6})
    with pytest.warns(TightToleranceWarning, match="suggested: method 'dopri5'"):
        step_budget.check(sim, 0.03, 0.03)


def test_costly_tolerance_warns_once_naming_both_estimates():
    sim = Simulation("pendulum", method="generalized-alpha", rtol=1e-8, atol=1e-10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = step_budget.check(sim, 3.0, 0.01)
    tight = [w for w in caught if issubclass(w.category, TightToleranceWarning)]
    assert len(tight) == 1
    text = str(tight[0].message)
    # 429 steps at rtol 1e-4 × (1e4)^(1/k), k = 2.0 measured from 1360 steps at rtol 1e-5:
    # 4.33e4 (a run takes 42611)
    assert 2e4 < est < 1e5 and f"about {est:.3g} steps to t=3" in text
    assert "429 steps at rtol 0.0001, 1360 at 1e-05: steps growing as rtol^-1/2" in text
    assert "suggested: method 'dopri5'" in text and "steps" in text.split("dopri5")[1]


@pytest.mark.parametrize("model, method, rtol, t_end", [
    ("pendulum", "generalized-alpha", 1e-4, 3.0),
    ("andrews", "generalized-alpha", 1e-4, 0.03),
    ("two_link", "bdf", 1e-8, 1.0),
    ("andrews", "dopri5", 1e-8, 0.03),
    ("crank_slider", "bdf", 1e-5, 0.1),
])
def test_accepted_run_finishes_within_its_budget(model, method, rtol, t_end, monkeypatch):
    monkeypatch.setattr(step_budget, "REF_SECONDS", 60.0)   # whole reference runs (compiled)
    sim = Simulation(model, method=method, rtol=rtol, atol=rtol / 100)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TightToleranceWarning)
        est = step_budget.check(sim, t_end, t_end)
    sim.do_step(0.0, t_end)     # one communication step: at most max_steps steps
    steps = sim.integrator.stats["steps"]
    assert steps <= sim.integrator.max_steps
    assert est / 3 <= steps <= 3 * est, (est, steps)


def test_probe_leaves_the_run_bit_identical():
    a = Simulation("pendulum", method="generalized-alpha", rtol=1e-7, atol=1e-9)
    b = Simulation("pendulum", method="generalized-alpha", rtol=1e-7, atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert step_budget.check(a, 1.0, 0.1) > 1000   # stage B ran too
    for k in range(5):
        a.do_step(0.1 * k, 0.1)
        b.do_step(0.1 * k, 0.1)
    assert np.array_equal(a.y, b.y)
    assert a.integrator.stats == b.integrator.stats


def test_a_do_step_loop_is_judged_at_its_first_communication_step(monkeypatch):
    """A loop of do_step has no end time up front (an FMU without a stopTime, a ROS node
    without an end_time): its first communication step, and each longer one, is judged
    as a run of that one step, refused before it starts (the state as it was) with the
    estimate and a cheaper method, where it used to spend max_steps steps first."""
    sim = Simulation("andrews", method="generalized-alpha", rtol=1e-9, atol=1e-11)
    before = sim.serialize_state()
    with pytest.raises(UnreachableToleranceError,
                       match=r"per communication step of 0\.03, more than max_steps=100000; "
                             r"suggested: method 'dopri5'"):
        sim.do_step(0.0, 0.03)
    assert sim.serialize_state() == before and sim.time == 0.0
    judged = []
    check = step_budget._check
    monkeypatch.setattr(step_budget, "_check", lambda *a: judged.append(a[2]) or check(*a))
    sim = Simulation("pendulum", method="dopri5", rtol=1e-6, atol=1e-8)
    unjudged = Simulation("pendulum", method="dopri5", rtol=1e-6, atol=1e-8)
    unjudged.tolerance_judged(math.inf)
    for k, dt in enumerate([0.01, 0.01, 0.005, 0.01]):
        for s in (sim, unjudged):
            s.do_step(s.time, dt)
    assert judged == [0.01]           # once: the later steps are no longer
    assert np.array_equal(sim.y, unjudged.y)      # the probe undone: bit-identical
    assert sim.integrator.stats == unjudged.integrator.stats


def test_fixed_step_is_not_probed():
    sim = Simulation("pendulum", method="generalized-alpha", h=1e-3)
    assert step_budget.check(sim, 1.0, 0.01) is None


def test_cli_refuses_before_running(capsys):
    from cosim.cli import main
    assert main(["simulate", "andrews", "--method", "generalized-alpha", "--rtol", "1e-9",
                 "--atol", "1e-11", "--t-end", "0.03", "--dt", "0.03"]) == 2
    err = capsys.readouterr().err
    assert "more than max_steps=100000" in err and "suggested: method 'dopri5'" in err


def test_sampled_blocks_bound_every_method_below():
    """Integration never crosses a sample instant, so a scenario's fastest block bounds
    every method's steps below: the shipped pendulum_pd (generalized-α at rtol 1e-6, blocks
    at 1 ms and 2.5 ms) takes at least 1000 steps per second whatever the method, nothing
    is 10× cheaper, and it runs without a warning; the bare pendulum in one communication
    step to the same time is warned (dopri5 far cheaper there)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", TightToleranceWarning)
        sim = Scenario.load("pendulum_pd").run(stop_time=1.0).sim
    assert sim.method == "generalized-alpha" and sim.rtol == 1e-6 and sim.base_step == 5e-4
    assert step_budget.grid_steps(sim, 1.0, 1) == 1000
    assert sim.stats["steps"] >= 1000
    bare = Simulation("pendulum", method="generalized-alpha", rtol=1e-6, atol=1e-8)
    assert step_budget.grid_steps(bare, 4.0, 1) == 1
    with pytest.warns(TightToleranceWarning, match="suggested: method"):
        step_budget.check(bare, 4.0, 4.0)


def test_a_driven_run_is_never_told_to_use_bdf():
    """Inputs that change at every communication step: a driven check suggests dopri5
    only, the cheapest there.  Checked against the driven run itself (pendulum, torque
    sin 3t in 0.01 s steps, rtol 1e-6; measured dopri5 101 steps, bdf 115 — its history
    carried across each new input —, generalized-α 1398): dopri5 takes the fewest steps,
    bdf fewer than generalized-α, and both over 10 times fewer than generalized-α."""
    def steps(method):
        sim = Simulation("pendulum", method=method, rtol=1e-6)
        t = 0.0
        for _ in range(100):
            sim.set_inputs({"torque": float(np.sin(3.0 * t))})
            sim.do_step(t, 0.01)
            t += 0.01
        return sim.integrator.stats["steps"]
    ga, bdf, dopri5 = steps("generalized-alpha"), steps("bdf"), steps("dopri5")
    assert dopri5 < bdf < ga and bdf * 10 < ga, (ga, bdf, dopri5)
    sim = Simulation("pendulum", method="generalized-alpha", rtol=1e-6)
    with pytest.warns(TightToleranceWarning) as caught:
        step_budget.check(sim, 5.0, 0.01, 500, driven=True)
    assert len(caught) == 1 and "suggested: method 'dopri5'" in str(caught[0].message)
