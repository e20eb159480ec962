"""`cosim run SCENARIO.yaml`: the shipped scenarios, input signals with ZOH, the JSON
shape (base_step, events, stats) and scenario errors."""
import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq

from cosim.cli import main
from cosim.errors import ScenarioError
from cosim.models.bouncing_ball import BouncingBall
from cosim.scenario import InputSignal, Scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def run_json(capsys, *args):
    assert main(["run", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_shipped_scenarios_exist_and_parse():
    for name in ("pendulum_pd", "bouncing_ball", "lti_state_feedback"):
        sc = Scenario.load(SCENARIOS / f"{name}.yaml")
        assert sc.name == name and sc.description


@pytest.mark.slow
def test_pendulum_pd_multirate_holds_the_scheduled_reference(capsys, tmp_path):
    out = run_json(capsys, SCENARIOS / "pendulum_pd.yaml", "--t-end", "3.0", "--out", tmp_path / "p.csv")
    assert out["base_step"] == 0.0005 and out["base_step_exact"] == "1/2000"
    assert {b["name"]: b["sample_time"] for b in out["blocks"]} == {"supervisor": 0.0025, "pd": 0.001}
    assert out["t"] == pytest.approx(3.0, abs=1e-12)
    for key in ("steps", "rejected", "newton_iterations", "communication_steps", "events"):
        assert key in out["stats"]
    assert out["stats"]["communication_steps"] == 300
    # static equilibrium of the PD loop: kp (r - θ) = m g l sin θ  (r = 0.3 rad after t = 2 s)
    theta = brentq(lambda th: 60.0 * (0.3 - th) - 9.81 * math.sin(th), 0.0, 0.3)
    assert out["outputs"]["angle"] == pytest.approx(theta, abs=2e-3)
    assert out["outputs"]["supervisor.reference"] == 0.3
    table = np.loadtxt(tmp_path / "p.csv", delimiter=",", skiprows=1)
    header = (tmp_path / "p.csv").read_text().splitlines()[0].split(",")
    angle = table[:, header.index("angle")]
    t = table[:, 0]
    assert abs(angle[np.searchsorted(t, 1.99)]) < 2e-3  # settled at reference 0 before the switch
    assert np.max(np.abs(angle)) <= 0.6 + 1e-9  # starts at 0.6 rad and is damped


def test_bouncing_ball_scenario_stops_with_the_analytic_impacts(capsys, tmp_path):
    png = tmp_path / "b.png"
    out = run_json(capsys, SCENARIOS / "bouncing_ball.yaml", "--plot", png)
    assert out["base_step"] is None and out["stopped"]
    exact = BouncingBall(h0=1.0, e=0.8, v_stop=0.1).impact_times()
    states = [e for e in out["events"] if e["kind"] == "state"]
    assert len(states) == len(exact) and states[-1]["name"] == "stop"
    assert np.max(np.abs([e["time"] for e in states] - np.array([t for t, _ in exact]))) < 2e-8
    assert out["events"][-1] == {"time": out["stop_time"], "name": "stop", "kind": "stop", "cause": "stop"}
    assert out["state"] == {"height": 0.0, "dheight": 0.0}
    assert out["t"] == pytest.approx(5.0)
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_lti_state_feedback_scenario_hits_the_reference_step_exactly(capsys, tmp_path):
    path = tmp_path / "l.csv"
    out = run_json(capsys, SCENARIOS / "lti_state_feedback.yaml", "--out", path)
    assert out["method"] == "state-transition" and out["base_step"] == 0.01
    assert out["outputs"]["position"] == pytest.approx(0.5, abs=1e-4)  # unit DC gain, N = 20
    with open(path) as fh:
        rows = list(csv.reader(fh))
    header, data = rows[0], np.array(rows[1:], dtype=float)
    col = header.index("input:controller.reference")
    t = data[:, 0]
    assert set(data[t < 1.0 - 1e-12, col]) == {0.0} and set(data[t >= 1.0 - 1e-12, col]) == {0.5}
    assert 1.0 in t.tolist()  # the step instant is a communication point
    # the controller output is -K x + N r, computed at the 10 ms sample instants; an
    # instant that ends a communication step executes at the start of the next one, so
    # the row at t = 0.5 still shows the value sampled at 0.49, and the row at 0.505 the new one
    force = data[:, header.index("controller.force")]
    x0, x1 = data[:, header.index("position")], data[:, header.index("velocity")]
    row = {round(tk, 9): k for k, tk in enumerate(t)}
    for sample, shown in ((0.49, 0.5), (0.5, 0.505), (2.0, 2.005)):
        k, j = row[sample], row[shown]
        assert force[j] == pytest.approx(-16.0 * x0[k] - 5.6 * x1[k] + 20.0 * (sample >= 1.0) * 0.5,
                                         abs=1e-12)


def test_human_readable_output_and_t_end_override(capsys):
    assert main(["run", str(SCENARIOS / "lti_state_feedback.yaml"), "--t-end", "0.5"]) == 0
    text = capsys.readouterr().out
    assert "base step 0.01 s = 1/100 s" in text and "t = 0.5 s" in text


def test_input_signals_and_zero_order_hold(tmp_path):
    spec = {
        "model": "lti", "method": "state-transition", "stop_time": 1.0, "communication_step": 0.1,
        "params": {"A": [[-1.0]], "B": [[1.0, 1.0, 1.0, 1.0, 1.0]], "C": [[1.0]], "x0": [0.0]},
        "inputs": {"u1": 2.5,
                   "u2": {"type": "step", "time": 0.35, "before": 1.0, "after": -1.0},
                   "u3": {"type": "ramp", "start_time": 0.2, "slope": 2.0, "initial": 1.0},
                   "u4": {"type": "sine", "amplitude": 2.0, "frequency": 0.5, "phase": 0.1, "offset": 1.0},
                   "u5": {"type": "table", "times": [0.0, 0.42, 0.8], "values": [3.0, 4.0, 5.0]}},
    }
    sc = Scenario(spec)
    assert sc.communication_points() == pytest.approx(
        [0.1, 0.2, 0.3, 0.35, 0.4, 0.42, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], abs=1e-15)
    res = sc.run()
    t = res.time
    for k, tk in enumerate(t[:-1]):  # held value = signal at the start of the step
        u = res.inputs[k]
        assert u[0] == 2.5
        assert u[1] == (-1.0 if tk >= 0.35 - 1e-12 else 1.0)
        assert u[2] == pytest.approx(1.0 + 2.0 * max(0.0, tk - 0.2), abs=1e-14)
        assert u[3] == pytest.approx(1.0 + 2.0 * math.sin(math.pi * tk + 0.1), abs=1e-14)
        assert u[4] == (3.0 if tk < 0.42 - 1e-12 else 4.0 if tk < 0.8 - 1e-12 else 5.0)
    # the plant saw exactly these held inputs: x' = -x + sum(u), exact per interval
    x = 0.0
    for k in range(len(t) - 1):
        h, s = t[k + 1] - t[k], res.inputs[k].sum()
        x = math.exp(-h) * x + (1 - math.exp(-h)) * s
    assert res.y[-1, 0] == pytest.approx(x, abs=1e-13)


@pytest.mark.parametrize("spec, match", [
    ({"model": "lti", "colour": 1}, "unknown keys"),
    ({"method": "rk4"}, "'model' is required"),
    ({"model": "lti", "inputs": {"forse": 1.0}}, "forse"),
    ({"model": "lti", "inputs": {"force": {"type": "square"}}}, "unknown signal type 'square'"),
    ({"model": "lti", "inputs": {"force": {"type": "step", "after": 1.0}}}, "needs 'time'"),
    ({"model": "lti", "inputs": {"force": {"type": "table", "times": [0, 1], "values": [1]}}}, "table"),
    ({"model": "lti", "inputs": {"force": {"type": "constant", "value": "nan"}}}, "finite"),
    ({"model": "lti", "communication_step": 0}, "communication_step"),
    ({"model": "lti", "stop_time": -1}, "stop_time"),
    ({"model": "lti", "blocks": [{"type": "pid", "name": "c", "sample_time": -0.1}]}, "sample time"),
    ({"model": "lti", "connections": ["position -> nowhere.u"]}, "nowhere"),
    ({"model": "nosuchmodel"}, "nosuchmodel"),
])
def test_bad_scenarios_raise_scenario_errors_naming_the_problem(spec, match):
    with pytest.raises(ScenarioError, match=match):
        sc = Scenario(spec)
        sc.build()


def test_cli_reports_bad_files_with_exit_code_2(tmp_path, capsys):
    assert main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read scenario" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    assert main(["run", str(bad)]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_input_signal_rejects_frequency_and_omega_together():
    with pytest.raises(ScenarioError, match="not both"):
        InputSignal("u", {"type": "sine", "frequency": 1.0, "omega": 2.0})


def test_default_method_follows_the_model_kind():
    assert Scenario({"model": "lti"}).method == "state-transition"
    assert Scenario({"model": "pendulum"}).method == "dopri5"
    # a fixed step: rk4 where it is stable at h (the pendulum, h·λmax 0.0026), else
    # generalized-alpha (crank_slider, 23: docs/methods/index.md "Default method")
    assert Scenario({"model": "pendulum", "h": 0.001}).method == "rk4"
    assert Scenario({"model": "crank_slider", "h": 0.001}).method == "generalized-alpha"
    assert Scenario({"model": "lti", "method": "dopri5"}).method == "dopri5"


def test_exact_sine_input_is_an_lti_signal_generator():
    """x' = -a x + b u, u = 1 + 1.5 sin(3 t + 0.4) with `exact: true` (seed 001 example 3.4):
    machine precision at 0.5 s communication steps; the held (ZOH) version is visibly off."""
    a, b, U0, w, phi, c, x0 = 0.7, 2.0, 1.5, 3.0, 0.4, 1.0, 0.3
    spec = {"model": "lti", "stop_time": 4.0, "communication_step": 0.5,
            "params": {"A": [[-a]], "B": [[b]], "C": [[1.0]], "x0": [x0], "input_names": ["u"],
                       "output_names": ["x"], "state_names": ["x"]},
            "inputs": {"u": {"type": "sine", "amplitude": U0, "omega": w, "phase": phi, "offset": c,
                             "exact": True}}}

    def exact(t):
        amp = b * U0 / (a * a + w * w)
        xp = amp * (a * np.sin(w * t + phi) - w * np.cos(w * t + phi)) + b * c / a
        xp0 = amp * (a * np.sin(phi) - w * np.cos(phi)) + b * c / a
        return xp + (x0 - xp0) * np.exp(-a * t)

    res = Scenario(spec).run()
    assert res.sim.input_names == () and res.sim.state_names == ("x", "u.v1", "u.v2", "u.v3")
    assert np.max(np.abs(res.outputs[:, 0] - exact(res.time))) < 1e-13
    spec["inputs"]["u"]["exact"] = False
    held = Scenario(spec).run()
    assert np.max(np.abs(held.outputs[:, 0] - exact(held.time))) > 1e-2
    spec["model"], spec["params"] = "pendulum", {}
    spec["inputs"] = {"torque": {"type": "sine", "omega": 1.0, "exact": True}}
    with pytest.raises(ScenarioError, match="need an LTI plant"):
        Scenario(spec).build()


def test_a_million_point_grid_is_the_exact_rounded_grid():
    """A 1000 s run at 1 ms: every communication point and record row is the float
    nearest the exact time start + k·dt (integer arithmetic; checked against
    Fraction arithmetic at 2 000 points, the ends included)."""
    from fractions import Fraction

    from cosim.run import communication_points, record_times
    from cosim.spec import SimulationSpec
    spec = SimulationSpec.from_dict({"model": "pendulum", "start_time": 0.3, "stop_time": 1000.3,
                      "communication_step": 0.001, "record": {"interval": 0.002}})
    points = communication_points(spec, 1000.3)
    rows = record_times(spec, 1000.3)
    assert len(points) == 1_000_000 and len(rows) == 500_001
    start, dt = Fraction("0.3"), Fraction("0.001")
    rng = np.random.default_rng(5)
    for k in [1, 2, 999_999, 1_000_000, *rng.integers(1, 1_000_000, 1_000)]:
        assert points[k - 1] == float(start + k * dt), k
    for k in [0, 1, 499_999, *rng.integers(0, 500_000, 1_000)]:
        assert rows[k] == float(start + k * 2 * dt), k
    assert rows[-1] == 1000.3
