"""SimulationSpec (issue 17): round trips, one-line validation errors, Simulation.from_spec,
and cosim.run (plain RunResult, dense-output recording, metrics) against independent
references: the stepping loop written out by hand, closed-form solutions."""
import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.errors import ScenarioError, SpecError, UnknownModelError
from cosim.models.pendulum import Pendulum
from cosim.spec import MAX_SPEC_BYTES, SimulationSpec

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
SHIPPED = sorted(SCENARIOS.glob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_scenarios_round_trip_through_dict_yaml_json_and_pickle(path):
    spec = SimulationSpec.load(path)
    assert spec.name == path.stem and spec.method and spec.stop_time > spec.start_time
    again = [SimulationSpec.from_dict(spec.to_dict()), SimulationSpec.from_yaml(spec.to_yaml()),
             SimulationSpec.from_dict(json.loads(spec.to_json())), pickle.loads(pickle.dumps(spec))]
    for other in again:
        assert other == spec and hash(other) == hash(spec)
    with pytest.raises(AttributeError):
        spec.rtol = 1.0  # frozen
    with pytest.raises(TypeError):
        spec.params["m"] = 2.0  # read-only mapping


def test_defaults_are_resolved_in_the_spec():
    spec = SimulationSpec.from_dict({"model": "pendulum"})
    # the default rule (cosim.method_choice, docs/methods/index.md "Default method")
    assert spec.method == "dopri5" and spec.stop_time == 5.0
    # a fixed step: rk4 where it is stable at h (the pendulum), else generalized-alpha
    assert SimulationSpec.from_dict({"model": "pendulum", "h": 0.001}).method == "rk4"
    assert SimulationSpec.from_dict({"model": "crank_slider", "h": 0.001}).method == "generalized-alpha"
    assert SimulationSpec.from_dict({"model": "pendulum", "method": "auto"}).method == "dopri5"
    assert SimulationSpec.from_dict({"model": "lti"}).method == "state-transition"
    assert SimulationSpec.from_dict({"model": "pendulum", "start_time": 1.0}).stop_time == 6.0


def test_urdf_plant_path_is_read_next_to_the_spec_file_and_the_text_travels(tmp_path):
    """{urdf: PATH} in a spec file becomes the robot's text (a sweep worker or an FMU
    elsewhere needs no file); the round trip keeps it and a path outside the folder fails."""
    pytest.importorskip("pinocchio")
    text = (Path(cosim.__file__).parent / "data" / "urdf" / "two_link.urdf").read_text()
    (tmp_path / "arm.urdf").write_text(text)
    (tmp_path / "arm.yaml").write_text("model: {urdf: arm.urdf, frames: [tip]}\n")
    spec = SimulationSpec.load(tmp_path / "arm.yaml")
    assert spec.model_format == "urdf" and spec.method == "dopri5"   # adaptive, inputs held
    assert spec.to_dict()["model"] == {"urdf_text": text, "frames": ["tip"]}
    assert SimulationSpec.from_dict(spec.to_dict()) == spec
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "escape.yaml").write_text("model: {urdf: ../arm.urdf}\n")
    with pytest.raises(SpecError, match="must name a URDF file in the scenario's folder"):
        SimulationSpec.load(tmp_path / "sub" / "escape.yaml")


@pytest.mark.parametrize("data, needle", [
    ({"model": "pendulum", "colour": 1}, "unknown keys ['colour']"),
    ({"model": "pendulum", "rtol": -1e-6}, "rtol must be > 0, got -1e-06"),
    ({"model": "pendulum", "rtol": "abc"}, "rtol must be a number, got 'abc'"),
    ({"model": "pendulum", "stop_time": -1}, "stop_time -1.0 must be after start_time 0.0"),
    ({"model": "pendulum", "communication_step": 0}, "communication_step"),
    ({"model": "pendulum", "method": "nope"}, "unknown method 'nope'"),
    ({"model": "nosuchmodel"}, "unknown model 'nosuchmodel'"),
    ({"model": "pendulum", "method_options": {"rho": 0.5}}, "has no option 'rho'"),
    ({"model": "pendulum", "method": "bdf", "method_options": {"max_order": 2.5}},
     "method_options.max_order must be an integer, got 2.5"),
    ({"model": "pendulum", "method": "generalized-alpha", "method_options": {"project_velocities": "maybe"}},
     "method_options.project_velocities must be true or false, got 'maybe'"),
    ({"model": "pendulum", "method": "generalized-alpha", "method_options": {"tangent_estimate": "maybe"}},
     "method_options.tangent_estimate must be true or false or 'auto', got 'maybe'"),
    ({"model": "pendulum", "backend": "gpu"}, "backend must be one of auto, numba, python, got 'gpu'"),
    ({"model": "pendulum", "record": {"every": 1}}, "record: unknown key 'every'"),
    ({"model": "pendulum", "metrics": [{"signal": "angle", "kind": "median"}]}, "metrics[0].kind"),
    ({"model": "pendulum", "metrics": [{"kind": "max"}]}, "kind 'max' needs a 'signal'"),
    ({"model": "pendulum", "inputs": {"fx": {"type": "square"}}}, "unknown signal type 'square'"),
    ({"model": "pendulum", "on_chattering": "ignore"}, "on_chattering must be 'error' or 'stop'"),
])
def test_bad_values_raise_one_error_naming_the_key_and_value(data, needle):
    with pytest.raises(SpecError) as info:
        SimulationSpec.from_dict(data, source="s.yaml")
    msg = str(info.value)
    assert needle in msg and "\n" not in msg and isinstance(info.value, ScenarioError)


def test_boolean_option_words_are_typed_once():
    """REVIEW §1: `error_estimate="false"` became True inside block-lstable; the spec types it."""
    spec = SimulationSpec.from_dict({"model": "pendulum", "method": "block-lstable", "h": 0.01,
                                     "method_options": {"error_estimate": "false", "r": 3.0}})
    assert spec.method_options["error_estimate"] is False and spec.method_options["r"] == 3
    sim = cosim.Simulation.from_spec(spec)
    assert sim.integrator.opts["error_estimate"] is False


def test_untrusted_files_are_bounded_and_execute_nothing(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("model: pendulum\n" + "#" * MAX_SPEC_BYTES)
    with pytest.raises(SpecError, match="more than 1048576"):
        SimulationSpec.load(big)
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdef", "bcdefg"))
    with pytest.raises(SpecError, match="more than 200000 values"):
        SimulationSpec.from_yaml("model: pendulum\nparams: {}\ndescription: x\n" + laughs.replace("a:", "z0:", 0))
    with pytest.raises(SpecError, match="not valid YAML"):
        SimulationSpec.from_yaml("model: !!python/object/apply:os.system ['true']")
    marker = tmp_path / "ran"
    plant = tmp_path / "plant.py"
    plant.write_text(f"open({str(marker)!r}, 'w').close()\n")
    spec = SimulationSpec.from_dict({"model": f"{plant}:Plant", "method": "dopri5", "stop_time": 1.0})
    with pytest.raises(UnknownModelError, match="only on the cosim command line"):
        cosim.Simulation.from_spec(spec)
    assert not marker.exists()


def test_load_model_and_simulation_leave_the_callers_model_alone():
    model = Pendulum(l=1.0)
    other = cosim.load_model(model, l=2.0)
    assert model.params["l"] == 1.0 and other.params["l"] == 2.0 and other is not model
    sim = cosim.Simulation(model=model, backend="python")
    sim.set_parameter("l", 3.0)
    assert model.params["l"] == 1.0 and sim.model.params["l"] == 3.0


def _landed_by_hand(spec):
    """The stepping loop of the former `cosim run` (commands/ + scenario.py before issue 17),
    written out: do_step to each grid point, then the held inputs, then a row."""
    from cosim.signals import InputSignal
    sim = cosim.Simulation.from_spec(spec)
    signals = [(sim.input_names.index(n), InputSignal(n, s)) for n, s in spec.to_dict()["inputs"].items()]
    u = sim.get_inputs()

    def apply(t):
        for i, sig in signals:
            u[i] = sig.value_at(t)
        sim.set_inputs(u)
    apply(sim.time)
    ts, ys, outs = [sim.time], [sim.y], [sim.get_outputs()]
    n = round((spec.stop_time - spec.start_time) / spec.communication_step)
    for k in range(1, n + 1):
        t_next = spec.start_time + k * spec.communication_step
        sim.do_step(sim.time, t_next - sim.time)
        apply(t_next)
        ts.append(sim.time)
        ys.append(sim.y)
        outs.append(sim.get_outputs())
    return np.array(ts), np.array(ys), np.array(outs), sim


def test_run_equals_the_stepping_loop_bit_for_bit_and_holds_no_live_objects():
    spec = SimulationSpec.load(SCENARIOS / "pendulum_pd.yaml").replace(stop_time=0.3)
    result = cosim.run(spec)
    t, y, out, sim = _landed_by_hand(spec)
    assert result.time.tolist() == t.tolist()
    assert result.states.tobytes() == y.tobytes() and result.outputs.tobytes() == out.tobytes()
    assert result.final_state == sim.serialize_state()
    assert result.stats == sim.stats
    assert len(pickle.dumps(result)) < 400_000  # arrays and a blob, no simulation inside
    assert not any(isinstance(v, cosim.Simulation) for v in vars(result).values())


def test_dense_recording_does_not_change_the_steps_and_lands_on_communication_points():
    """Rows every 2 ms between 10 ms communication points: the integrator takes exactly the
    steps of the run recorded at the communication points only (bit-identical final state),
    rows on communication points are identical, rows between them are the dense output."""
    base = SimulationSpec.load(SCENARIOS / "pendulum_pd.yaml").replace(stop_time=0.3)
    coarse = cosim.run(base)
    fine = cosim.run(base.replace(record_interval=0.002))
    assert fine.final_state == coarse.final_state and fine.stats == coarse.stats
    assert len(fine.time) == 151 and len(coarse.time) == 31
    on_grid = np.isin(np.round(fine.time, 12), np.round(coarse.time, 12))
    assert on_grid.sum() == 31
    assert fine.states[on_grid].tobytes() == coarse.states.tobytes()
    between = fine.residuals[~on_grid]
    assert np.isnan(between[:, 2]).all() and np.max(between[:, 0]) < 1e-6  # interpolated |x²+y²-l²|


def test_simulate_records_from_dense_output_without_landing():
    """`cosim simulate` (no --dt): one communication step, 500 rows from the dense output;
    the same steps as a single do_step to t_end (fewer steps than rows), and interpolated
    angles against an independent solution of the pendulum in polar form (scipy DOP853,
    rtol 1e-13)."""
    from scipy.integrate import solve_ivp

    from cosim.commands.simulate import simulation_spec
    spec = simulation_spec("pendulum", "dopri5", t_end=2.0, rtol=1e-9, atol=1e-11,
                           backend="python")
    result = cosim.run(spec)
    alone = cosim.Simulation.from_spec(spec)
    alone.do_step(0.0, 2.0)
    assert result.stats["steps"] == alone.stats["steps"] and result.final_state == alone.serialize_state()
    assert len(result.time) == 501 and result.stats["steps"] < 500
    ref = solve_ivp(lambda t, s: [s[1], -9.81 * math.sin(s[0])], (0, 2.0), [math.pi / 4, 0.0],
                    method="DOP853", rtol=1e-13, atol=1e-13, dense_output=True)
    # angle from the downward vertical in both; dopri5 with its 4th-order interpolant
    err = np.max(np.abs(result.signal("angle") - ref.sol(result.time)[0]))
    assert err < 1e-8, err  # measured 1.0e-9 (131 steps for 501 rows)


def test_metrics_against_the_closed_form_decay():
    """x' = -x, x(0) = 1 on [0, 3] (exact LTI transition): final e^-3, max 1, min e^-3,
    RMS sqrt((1 - e^-6)/6), settling into |x - x(3)| <= 0.01 at t = -ln(0.01 + e^-3),
    no events.  Rows every 1 ms: trapezoidal RMS and settling time to ~1e-3."""
    spec = SimulationSpec.from_dict({
        "model": "lti", "params": {"A": [[-1.0]], "B": [[0.0]], "C": [[1.0]], "x0": [1.0]},
        "stop_time": 3.0, "communication_step": None, "record": {"interval": 0.001},
        "metrics": [{"signal": "y1", "kind": k} for k in ("final", "max", "min", "rms")] +
                   [{"signal": "y1", "kind": "settling_time", "tolerance": 0.01}, "events"]})
    m = cosim.run(spec).metrics
    e3 = math.exp(-3.0)
    assert m["final:y1"] == pytest.approx(e3, rel=1e-12)
    assert m["max:y1"] == pytest.approx(1.0, rel=1e-12) and m["min:y1"] == pytest.approx(e3, rel=1e-12)
    assert m["rms:y1"] == pytest.approx(math.sqrt((1 - math.exp(-6.0)) / 6.0), rel=1e-6)
    assert m["settling_time:y1"] == pytest.approx(-math.log(0.01 + e3), abs=1.001e-3)
    assert m["events"] == 0.0


def test_cli_ros_and_file_vocabularies_translate_to_one_spec():
    """DESIGN.md: every adapter turns its configuration into a SimulationSpec with one
    function; the same run described by `cosim simulate` flags, ROS node parameters and a
    spec file is the same spec (equal, same hash) and the same run."""
    pytest.importorskip("rclpy")
    from cosim.commands.simulate import simulation_spec
    from ros_nodes.params import simulation_spec as ros_spec
    cli = simulation_spec("pendulum", "generalized-alpha", t_end=1.0, dt=0.01, rtol=1e-7, atol=1e-9,
                          params={"l": 1.5}, method_options={"rho_inf": 0.6})
    ros = ros_spec({"model": "pendulum", "method": "generalized-alpha", "backend": "auto",
                    "params": {"l": 1.5}, "rtol": 1e-7, "atol": 1e-9, "integrator_step": 0.0,
                    "method_options": {"rho_inf": 0.6}, "start_time": 0.0,
                    "communication_step": 0.01, "end_time": 1.0})
    text = SimulationSpec.from_yaml("model: pendulum\nmethod: generalized-alpha\nparams: {l: 1.5}\n"
                                    "rtol: 1.0e-7\natol: 1.0e-9\n"
                                    "method_options: {rho_inf: 0.6}\nstop_time: 1.0\n")
    assert cli == ros and hash(cli) == hash(ros)
    assert text.replace(name=cli.name, description=cli.description) == cli
    assert cosim.run(cli).final_state == cosim.run(ros).final_state
