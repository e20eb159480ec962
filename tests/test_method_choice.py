"""The default method (cosim.method_choice, docs/methods/index.md "Default method"):
one rule for Simulation, specs, the CLI, the FMU builder and the ROS node; an
explicit method always wins (the tight-tolerance refusal and warning, for every
method: tests/test_step_budget.py)."""
import re
from pathlib import Path

import pytest

from cosim import Simulation
from cosim.method_choice import default_method, default_method_and_reason
from cosim.spec import SimulationSpec

DOCS = Path(__file__).resolve().parents[1] / "docs" / "methods" / "index.md"


def documented_rule():
    """The rows of the docs' table "Default method": {case: method}."""
    text = DOCS.read_text()
    section = text[text.index("## Default method"):]
    rows = re.findall(r"^\| ([^|]+?) \| `([a-z0-9-]+)` \|", section, flags=re.M)
    return {case.strip(): method for case, method in rows}


def test_the_documented_rule_is_the_rule():
    rule = documented_rule()
    assert rule["LTI state space"] == default_method("lti") == "state-transition"
    assert rule["multibody, fixed step `h`"] == default_method("two_link", fixed_step=True)
    driven = "multibody, adaptive, driven (FMU, ROS node, blocks or input signals)"
    for model in ("pendulum", "andrews", "crank_slider", "two_link"):
        assert rule[driven] == default_method(model, driven=True)
        assert rule["multibody, adaptive, inputs held"] == default_method(model)
        assert rule["multibody, fixed step `h`"] == default_method(model, fixed_step=True) \
            == default_method(model, fixed_step=True, driven=True)
    assert rule["multibody, fixed step `h`"] == "generalized-alpha"
    assert rule["multibody, adaptive, inputs held"] == "dopri5"
    assert rule[driven] == "dopri5"
    # the measured tables name the default they measured
    text = DOCS.read_text()
    held = text[text.index("**Adaptive runs, inputs held.**"):text.index("**Every method on")]
    driven_table = text[text.index("**Driven runs.**"):text.index("## Tight tolerances")]
    assert f"| {rule['multibody, adaptive, inputs held']} (the default) |" in held
    assert f"| {rule[driven]} (the default) |" in driven_table
    assert "benchmarks/driven_loop.py" in driven_table


def test_every_entry_point_uses_the_rule_and_an_explicit_method_wins():
    assert Simulation("pendulum", backend="python").method == "dopri5"
    assert Simulation("pendulum", backend="python", method="auto").method == "dopri5"
    assert Simulation("pendulum", backend="python", h=1e-3).method == "generalized-alpha"
    assert Simulation("pendulum", backend="python", method="bdf").method == "bdf"
    assert Simulation("pendulum", backend="python", method="generalized-alpha").method \
        == "generalized-alpha"
    assert SimulationSpec.from_dict({"model": "two_link"}).method == "dopri5"
    assert SimulationSpec.from_dict({"model": "two_link", "h": 1e-3}).method == "generalized-alpha"
    signals = {"model": "pendulum", "inputs": {"F": {"type": "sine", "amplitude": 1.0, "frequency": 1.0}}}
    assert SimulationSpec.from_dict(signals).method == "dopri5"      # driven
    assert SimulationSpec.from_dict(dict(signals, h=1e-3)).method == "generalized-alpha"
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
    assert "method generalized-alpha" in capsys.readouterr().out


def test_ros_node_default_is_the_driven_choice():
    pytest.importorskip("rclpy")
    from ros_nodes.params import simulation_spec
    cfg = {"model": "pendulum", "method": "auto", "backend": "python", "params": {}, "rtol": 1e-6,
           "atol": 1e-8, "integrator_step": 0.0, "method_options": {}, "start_time": 0.0,
           "communication_step": 0.01, "end_time": 0.0}
    assert simulation_spec(cfg).method == "dopri5"
    assert simulation_spec(dict(cfg, integrator_step=1e-3)).method == "generalized-alpha"
    assert simulation_spec(dict(cfg, method="bdf")).method == "bdf"
