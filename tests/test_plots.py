"""Figures an engineer can read, checked on what was drawn (read back from the axes):
one panel per unit with the unit on the axis, a reference in the panel of the output
it commands, no panel of constant signals and no residual panel without constraints,
the model's outputs plotted, a sweep coloured by its parameter with a colour bar that
names the parameter and its unit."""
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.commands.simulate import run_simulation, write_plot
from cosim.plotting import reference_targets, write_run_plot, write_sweep_plot
from cosim.scenario import write_scenario_plot

REPO = Path(__file__).resolve().parents[1]


def test_scenario_plot_one_panel_per_unit_reference_with_the_angle(tmp_path):
    r = cosim.run("pendulum_pd", stop_time=2.5, backend="python")
    shown = write_scenario_plot(tmp_path / "pd.png", r, "pendulum_pd")
    assert (tmp_path / "pd.png").stat().st_size > 10_000
    assert shown["panels"] == [
        ("angle [rad]", ["angle", "supervisor.reference (reference of angle)"]),
        ("angular_velocity [rad/s]", ["angular_velocity"]),
        ("rod_force [N]", ["rod_force"]),
        ("pd.u [N.m]", ["pd.u -> torque"]),
    ]
    # held at 0 over the run: listed under the figure, not drawn as flat lines
    assert shown["constant"] == ["supervisor.alarm", "fx", "fy"]
    assert reference_targets(r) == {"supervisor.reference": "angle"}
    ref = r.signal("supervisor.reference")   # the supervisor's schedule: 0, then 0.3 rad at 2 s
    assert set(np.unique(ref)) == {0.0, 0.3}


def test_reference_of_an_external_input_and_signals_without_units(tmp_path):
    """lti_state_feedback: the reference is an external input of the controller and it
    commands the position; the LTI plant declares no units, so each signal has its own panel."""
    r = cosim.run("lti_state_feedback", stop_time=2.0, backend="python")
    shown = write_run_plot(tmp_path / "lti.png", r)
    assert shown["panels"] == [
        ("position [1]", ["position", "controller.reference (reference of position)"]),
        ("velocity [1]", ["velocity"]),
        ("controller.force [1]", ["controller.force -> force"]),
    ]


def test_simulate_plot_shows_the_outputs_and_the_residuals_of_the_rows(tmp_path):
    res = run_simulation("andrews", method="generalized-alpha", backend="python")   # index 3
    shown = write_plot(tmp_path / "a.png", res)
    labels = [p[0] for p in shown["panels"]]
    assert labels == ["beta [rad]", "beta_rate [rad/s]", "spring_length [m]", "spring_force [N]",
                      "|constraint residual|"]
    assert shown["panels"][-1][1] == ["position", "velocity"]   # index 3: no acceleration level
    assert not any("SI" in label for label in labels)
    assert shown["constant"] == ["torque"]


@pytest.mark.parametrize("model", ["bouncing_ball", "robot"])
def test_no_residual_panel_without_constraints(tmp_path, model):
    if model == "robot":
        pytest.importorskip("pinocchio")
        model = str(REPO / "cosim" / "data" / "urdf" / "two_link.urdf")
    res = run_simulation(model, t_end=0.5, backend="python")
    shown = write_plot(tmp_path / "m.png", res)
    labels = [p[0] for p in shown["panels"]]
    assert "|constraint residual|" not in labels and labels
    assert all(p[1] for p in shown["panels"])        # every panel draws something


def test_sweep_plot_coloured_by_the_parameter_with_its_unit(tmp_path):
    pytest.importorskip("pyarrow")
    from cosim.sweep import SweepResult, make_variations, specs_for
    spec = cosim.load_spec("pendulum_pd", stop_time=0.5, backend="python")
    variations = make_variations(spec, grid=["l=0.5:2.0:3"])
    specs = specs_for(spec, variations)
    result = SweepResult(specs=specs, variations=variations, results=[cosim.run(s) for s in specs],
                         wall_time_s=1.0, cluster="in-process")
    shown = write_sweep_plot(tmp_path / "sweep.png", result)
    assert shown["colorbars"] == ["l [m]"]          # on the trajectories; the scatter x axes say l [m]
    assert shown["panels"][0][0] == "angle [rad]" and shown["xlabels"][0] == "time [s]"
    assert [p[0] for p in shown["panels"][1:]] == ["final:angle [rad]", "final:angular_velocity [rad/s]",
                                                    "final:rod_force [N]"]
    assert shown["xlabels"][1:] == ["l [m]"] * 3
