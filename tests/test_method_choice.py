"""The default method (cosim.method_choice, docs/methods/index.md "Default method"):
one rule for Simulation, specs, the CLI, the FMU builder and the ROS node; an
explicit method always wins (the tight-tolerance refusal and warning, for every
method: tests/test_step_budget.py)."""
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from cosim import Simulation
from cosim.errors import CosimError, FixedStepAccuracyWarning, FixedStepError
from cosim.method_choice import default_method, default_method_and_reason, largest_rate
from cosim.spec import SimulationSpec
from reference import Oscillator  # x'' = −ω² x

DOCS = Path(__file__).resolve().parents[1] / "docs" / "methods" / "index.md"


def documented_rule():
    """The rows of the docs' table "Default method": {case: method}."""
    text = DOCS.read_text()
    section = text[text.index("## Default method"):]
    rows = re.findall(r"^\| ([^|]+?) \| `([a-z0-9-]+)` \|", section, flags=re.M)
    return {case.strip(): method for case, method in rows}


STABLE = "multibody, fixed step `h`, rk4 stable at h (h·λmax ≤ 2)"
STIFF = "multibody, fixed step `h`, stiff at h (h·λmax > 2)"


def test_the_documented_rule_is_the_rule():
    rule = documented_rule()
    assert rule["LTI state space"] == default_method("lti") == "state-transition"
    driven = "multibody, adaptive, driven (FMU, ROS node, blocks or input signals)"
    for model in ("pendulum", "andrews", "crank_slider", "two_link"):
        assert rule[driven] == default_method(model, driven=True)
        assert rule["multibody, adaptive, inputs held"] == default_method(model)
        assert rule[STIFF] == default_method(model, fixed_step=True)   # h unknown: its stiffness too
    # h·λmax at 1 ms (benchmarks/fixed_step_default.py): pendulum 0.0026, two_link 0.0022,
    # andrews 0.47; crank_slider 23
    for model in ("pendulum", "two_link", "andrews"):
        assert rule[STABLE] == default_method(model, fixed_step=1e-3) \
            == default_method(model, fixed_step=1e-3, driven=True)
    assert rule[STIFF] == default_method("crank_slider", fixed_step=1e-3) \
        == default_method("crank_slider", fixed_step=1e-3, driven=True)
    assert rule[STABLE] == "rk4" and rule[STIFF] == "generalized-alpha"
    assert rule["multibody, adaptive, inputs held"] == "dopri5"
    assert rule[driven] == "dopri5"
    # the measured tables name the default they measured
    text = DOCS.read_text()
    held = text[text.index("**Adaptive runs, inputs held.**"):text.index("**Every method on")]
    driven_table = text[text.index("**Driven runs.**"):text.index("**Fixed steps.**")]
    assert f"| {rule['multibody, adaptive, inputs held']} (the default) |" in held
    assert f"| {rule[driven]} (the default) |" in driven_table
    assert "benchmarks/driven_loop.py" in driven_table
    # the fixed-step table: its "default" column is what the rule picks for that model and h
    fixed = text[text.index("**Fixed steps.**"):text.index("## Tight tolerances")]
    assert "benchmarks/fixed_step_default.py" in fixed
    rows = re.findall(r"^\| (pendulum|two_link|crank_slider|andrews) \| [^|]+ \| ([0-9.]+) \| "
                      r"[^|]+ \| ([a-z0-9-]+) \|", fixed, flags=re.M)
    assert len(rows) >= 7
    for model, h_ms, method in rows:
        assert default_method(model, fixed_step=float(h_ms) * 1e-3) == method, (model, h_ms)


def test_largest_rate_is_the_eigenvalue_of_a_spring():
    """x'' = −ω² x: eigenvalues ±iω, so λmax = ω (forward differences of a linear q'')."""
    assert largest_rate(Oscillator(omega=1e4)) == pytest.approx(1e4, rel=1e-6)
    assert largest_rate(Oscillator(omega=2.0)) == pytest.approx(2.0, rel=1e-6)


def test_fixed_step_rule_follows_rk4s_stability_bound():
    """h·λmax ≤ 2 → rk4, else generalized-alpha: on x'' = −10⁸ x (λ = ±10⁴ i) rk4 at
    h = 0.19 ms (h·λ = 1.9), generalized-alpha at 0.21 ms (2.1)."""
    stiff = Oscillator(omega=1e4)
    method, reason = default_method_and_reason(stiff, fixed_step=1.9e-4)
    assert method == "rk4" and "1.9" in reason
    method, reason = default_method_and_reason(stiff, fixed_step=2.1e-4)
    assert method == "generalized-alpha" and "stiff for rk4" in reason
    assert Simulation(Oscillator, params={"omega": 1e4}, backend="python", h=2.1e-4).method \
        == "generalized-alpha"
    assert Simulation(Oscillator, params={"omega": 1e4}, backend="python", h=1.9e-4).method == "rk4"


def oscillator_bank(n):
    """n uncoupled x_i'' = −ω² x_i (ω = 2, λmax = 2), counting its calls of M."""
    from cosim.models.base import MultibodyModel, Parameter

    class Bank(MultibodyModel):
        name = f"bank{n}"
        coordinates = tuple(f"x{i}" for i in range(n))
        parameters = (Parameter("omega", 2.0, "rad/s"),)
        calls = 0

        def mass(self, q, t):
            type(self).calls += 1
            return np.eye(n)

        def forces(self, q, v, t, u):
            return -self.params["omega"] ** 2 * np.asarray(q, dtype=float)

        def initial_state(self):
            return np.ones(n), np.zeros(n)
    return Bank


def test_a_model_too_large_to_estimate_gets_generalized_alpha_unevaluated():
    """Above MAX_ESTIMATED_COORDINATES (64) the O(n_q⁴) estimate is not made: 65
    uncoupled oscillators at 1 ms get generalized-alpha with the reason, without one
    evaluation of M; 64 are estimated (λmax = ω = 2, 2n + 1 = 129 evaluations) and
    get rk4; Simulation takes the same choice."""
    from cosim.method_choice import MAX_ESTIMATED_COORDINATES
    assert MAX_ESTIMATED_COORDINATES == 64
    big = oscillator_bank(65)
    method, reason = default_method_and_reason(big(), fixed_step=1e-3)
    assert method == "generalized-alpha" and big.calls == 0
    assert "too large to estimate at set-up: n_q = 65 > 64" in reason
    assert largest_rate(big()) == float("inf") and big.calls == 0
    small = oscillator_bank(64)
    assert largest_rate(small()) == pytest.approx(2.0, rel=1e-6) and small.calls == 129
    assert default_method_and_reason(small(), fixed_step=1e-3)[0] == "rk4"
    assert Simulation(big, backend="python", h=1e-3).method == "generalized-alpha"


def test_robot_at_1ms_runs_rk4_and_a_stiff_arm_generalized_alpha():
    """The Panda (its mimic finger one constraint, stops off) at 1 ms: rk4 (h·λmax 0.02; its
    error 3e4 times smaller than generalized-alpha's, docs' fixed-step table); three_link with
    joint damping 20: λmax 2700/s, rk4 at 0.5 ms, generalized-alpha from 1 ms — and at 2 ms
    (h·λmax 5.3) rk4 is refused while generalized-alpha ends within 1e-4 of dopri5 at 1e-10."""
    pytest.importorskip("pinocchio")
    from cosim.models import urdf
    three = urdf.load_urdf(Path(__file__).resolve().parents[1] / "benchmarks" / "three_link.urdf")
    damped = {f"joint{i}.damping": 20.0 for i in (1, 2, 3)}
    assert default_method(three, fixed_step=5e-4, params=damped) == "rk4"
    assert default_method(three, fixed_step=1e-3, params=damped) == "generalized-alpha"
    assert default_method(three, fixed_step=1e-3) == "rk4"
    assert SimulationSpec.from_dict({"model": three.spec(), "params": damped,
                                     "h": 1e-3}).method == "generalized-alpha"
    ref = Simulation(three, params=damped, backend="python", rtol=1e-10, atol=1e-12, method="dopri5")
    ref.do_step(0.0, 0.1)
    ga = Simulation(three, params=damped, backend="python", h=2e-3)
    assert ga.method == "generalized-alpha"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FixedStepAccuracyWarning)
        ga.do_step(0.0, 0.1)
    assert np.max(np.abs(ga.q - ref.q)) < 1e-4
    rk4 = Simulation(three, params=damped, backend="python", h=2e-3, method="rk4")
    with pytest.raises(FixedStepError, match="rk4"):
        rk4.do_step(0.0, 0.1)
    try:
        panda = urdf.load_urdf(urdf.example_robot_path(), position_limits=False)
    except CosimError:
        pytest.skip("example-robot-data not installed")
    assert panda().n_c == 1
    assert default_method(panda, fixed_step=1e-3) == "rk4"
    assert Simulation(panda, backend="python", h=1e-3).method == "rk4"


def test_every_entry_point_uses_the_rule_and_an_explicit_method_wins():
    assert Simulation("pendulum", backend="python").method == "dopri5"
    assert Simulation("pendulum", backend="python", method="auto").method == "dopri5"
    assert Simulation("pendulum", backend="python", h=1e-3).method == "rk4"
    assert Simulation("crank_slider", backend="python", h=1e-3).method == "generalized-alpha"
    assert Simulation("pendulum", backend="python", method="bdf").method == "bdf"
    assert Simulation("pendulum", backend="python", method="generalized-alpha", h=1e-3).method \
        == "generalized-alpha"
    assert Simulation("crank_slider", backend="python", method="rk4", h=1e-3).method == "rk4"
    assert SimulationSpec.from_dict({"model": "two_link"}).method == "dopri5"
    assert SimulationSpec.from_dict({"model": "two_link", "h": 1e-3}).method == "rk4"
    assert SimulationSpec.from_dict({"model": "crank_slider", "h": 1e-3}).method == "generalized-alpha"
    assert SimulationSpec.from_dict({"model": "two_link", "h": 1e-3,
                                     "method": "generalized-alpha"}).method == "generalized-alpha"
    signals = {"model": "pendulum", "inputs": {"F": {"type": "sine", "amplitude": 1.0, "frequency": 1.0}}}
    assert SimulationSpec.from_dict(signals).method == "dopri5"      # driven
    assert SimulationSpec.from_dict(dict(signals, h=1e-3)).method == "rk4"
    blocks = [{"type": "pid", "name": "pd", "sample_time": 0.001, "kp": 10.0, "kd": 1.0}]
    assert Simulation("pendulum", backend="python", blocks=blocks,
                      connections=["angle -> pd.measurement", "pd.u -> torque"]).method == "dopri5"
    assert SimulationSpec.from_dict({"model": "two_link", "method": "bdf"}).method == "bdf"
    method, reason = default_method_and_reason("pendulum")
    assert method == "dopri5" and "adaptive" in reason


def test_cli_summary_names_the_method_in_use(capsys):
    from cosim.cli import main
    assert main(["simulate", "pendulum", "--t-end", "0.2", "--backend", "python"]) == 0
    out = capsys.readouterr().out
    assert "method dopri5" in out
    assert main(["simulate", "pendulum", "--t-end", "0.2", "--backend", "python", "--h", "0.01"]) == 0
    assert "method rk4" in capsys.readouterr().out
    assert main(["simulate", "crank_slider", "--t-end", "0.01", "--backend", "python", "--h", "0.001"]) == 0
    assert "method generalized-alpha" in capsys.readouterr().out


def test_ros_node_default_is_the_driven_choice():
    pytest.importorskip("rclpy")
    from ros_nodes.params import simulation_spec
    cfg = {"model": "pendulum", "method": "auto", "backend": "python", "params": {}, "rtol": 1e-6,
           "atol": 1e-8, "integrator_step": 0.0, "method_options": {}, "start_time": 0.0,
           "communication_step": 0.01, "end_time": 0.0}
    assert simulation_spec(cfg).method == "dopri5"
    assert simulation_spec(dict(cfg, integrator_step=1e-3)).method == "rk4"
    assert simulation_spec(dict(cfg, model="crank_slider", integrator_step=1e-3)).method \
        == "generalized-alpha"
    assert simulation_spec(dict(cfg, method="bdf")).method == "bdf"
