"""No silent changes (issue 20): every option that the run would clamp, round or
ignore is an error naming the value or a warning on stderr saying what is used
instead; every `cosim` entry point answers --help without side effects."""
import argparse
import csv
import os

import numpy as np
import pytest

from cosim.cli import build_parser, main
from cosim.errors import InvalidInputError
from cosim.options import OptionWarning, check_step_against_grid, exact_grid


def cli(capsys, *args):
    rc = main([str(a) for a in args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def warnings_in(err):
    return [line for line in err.splitlines() if line.startswith("cosim: warning:")]


def steps_of(out):
    line = next(x for x in out.splitlines() if x.strip().startswith("steps "))
    return int(line.split()[1])


# -- cosim simulate ---------------------------------------------------------------------------
def test_h_longer_than_communication_step_is_announced_and_is_what_runs(capsys, tmp_path):
    rc, out, err = cli(capsys, "simulate", "pendulum", "--h", 0.01, "--dt", 0.002, "--t-end", 1)
    assert rc == 0
    [w] = warnings_in(err)
    assert "--h 0.01 is longer than the communication step --dt 0.002" in w
    assert "h = 0.002" in w
    assert steps_of(out) == 500  # 1 s in steps of 0.002, as the warning says
    # issue 17: without --dt the rows (every t_end/500) come from the dense output, so
    # nothing cuts h: 100 steps of 0.01 and 501 rows, no warning
    path = tmp_path / "p.csv"
    rc, out, err = cli(capsys, "simulate", "pendulum", "--h", 0.01, "--t-end", 1, "--out", path)
    assert rc == 0 and warnings_in(err) == []
    assert steps_of(out) == 100
    t = np.loadtxt(path, delimiter=",", skiprows=1)[:, 0]
    assert len(t) == 501 and np.allclose(np.diff(t), 0.002, rtol=0, atol=1e-15)


def test_h_not_dividing_dt_is_announced_with_the_steps_taken(capsys):
    rc, out, err = cli(capsys, "simulate", "pendulum", "--h", 0.003, "--dt", 0.01, "--t-end", 0.1)
    assert rc == 0
    [w] = warnings_in(err)
    assert "--h 0.003 does not divide the communication step --dt 0.01" in w
    assert "3 steps of 0.003 and one of 0.001" in w
    assert steps_of(out) == 10 * 4  # per 0.01: 3 x 0.003 + 1 x 0.001


def test_h_dividing_dt_runs_without_warning(capsys):
    rc, out, err = cli(capsys, "simulate", "pendulum", "--h", 0.001, "--dt", 0.01, "--t-end", 0.1)
    assert rc == 0 and warnings_in(err) == []
    assert steps_of(out) == 100


def test_dt_longer_than_t_end_is_announced(tmp_path, capsys):
    path = tmp_path / "p.csv"
    rc, out, err = cli(capsys, "simulate", "pendulum", "--dt", 2, "--t-end", 1, "--out", path)
    assert rc == 0
    [w] = warnings_in(err)
    assert "--dt 2 is longer than --t-end 1: one communication step of 1 s" in w
    with open(path) as fh:
        rows = list(csv.reader(fh))[1:]
    assert [float(r[0]) for r in rows] == [0.0, 1.0]


def test_tolerance_ignored_by_the_method_is_announced(capsys):
    rc, _, err = cli(capsys, "simulate", "lti", "--method", "state-transition", "--rtol", 1e-3,
                     "--t-end", 0.1)
    assert rc == 0
    [w] = warnings_in(err)
    assert "--rtol ignored: method 'state-transition' does not use tolerances" in w
    rc, _, err = cli(capsys, "simulate", "pendulum", "--method", "spark", "--h", 0.01, "--atol", 1e-9,
                     "--t-end", 0.1)
    assert rc == 0 and warnings_in(err) == []   # its local error estimate's weights (cosim.fixed_step)
    rc, _, err = cli(capsys, "simulate", "pendulum", "--rtol", 1e-5, "--t-end", 0.1)
    assert rc == 0 and warnings_in(err) == []  # generalized-alpha uses it


def test_parameter_given_twice_is_an_error_naming_both_values(capsys):
    rc, _, err = cli(capsys, "simulate", "pendulum", "--param", "l=1", "--param", "l=2", "--t-end", 0.1)
    assert rc == 2
    assert "cosim: error: --param l given twice (1.0 and 2.0)" in err
    rc, _, err = cli(capsys, "simulate", "pendulum", "--method", "bdf", "--option", "max_order=2",
                     "--option", "max_order=3", "--t-end", 0.1)
    assert rc == 2 and "--option max_order given twice (2.0 and 3.0)" in err


def test_max_order_and_option_max_order_must_agree(capsys):
    rc, _, err = cli(capsys, "simulate", "pendulum", "--method", "bdf", "--max-order", 2,
                     "--option", "max_order=3", "--t-end", 0.1)
    assert rc == 2 and "--max-order 2 and --option max_order=3.0 disagree" in err
    rc, _, err = cli(capsys, "simulate", "pendulum", "--method", "bdf", "--max-order", 2,
                     "--option", "max_order=2", "--t-end", 0.1)
    assert rc == 0 and warnings_in(err) == []


@pytest.mark.parametrize("command", [["simulate", "pendulum", "--t-end", "0.1"], ["run", "pendulum_pd"]])
def test_plot_name_without_a_format_is_an_error_not_a_renamed_file(tmp_path, capsys, command):
    # matplotlib would write 'plot.png' next to the 'plot' we were asked for
    rc, _, err = cli(capsys, *command, "--plot", tmp_path / "plot")
    assert rc == 2 and "--plot" in err and "plot'" in err and ".png" in err
    assert list(tmp_path.iterdir()) == []


# -- scenarios -----------------------------------------------------------------------------------
def write(tmp_path, text, name="s.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_scenario_h_against_the_block_grid_is_announced(tmp_path, capsys):
    # communication step 10 ms, PD at 1.5 ms: the integrator lands on both grids (gcd 0.5 ms)
    path = write(tmp_path, """
model: pendulum
h: 0.001
stop_time: 0.03
communication_step: 0.01
blocks:
  - {type: pid, name: pd, sample_time: 0.0015, kp: 10.0, kd: 1.0}
connections: ["angle -> pd.measurement", "pd.u -> torque"]
""")
    rc, _, err = cli(capsys, "run", path)
    assert rc == 0, err
    [w] = warnings_in(err)
    assert "s.yaml: h 0.001 is longer than the grid of the communication step and the blocks' " \
           "sample times 0.0005" in w


def test_scenario_h_not_dividing_the_communication_step_is_announced(tmp_path, capsys):
    path = write(tmp_path, "model: pendulum\nh: 0.004\nstop_time: 0.02\ncommunication_step: 0.01\n")
    rc, _, err = cli(capsys, "run", path)
    assert rc == 0, err
    [w] = warnings_in(err)
    assert "h 0.004 does not divide the communication step 0.01" in w and "2 steps of 0.004 and one of 0.002" in w


def test_scenario_tolerance_ignored_by_the_method_is_announced(tmp_path, capsys):
    from cosim.shipped import shipped_scenario
    data = shipped_scenario("lti_state_feedback").read_text()
    path = write(tmp_path, data + "\nrtol: 1.0e-3\n")
    rc, _, err = cli(capsys, "run", path, "--t-end", 0.1)
    assert rc == 0, err
    [w] = warnings_in(err)
    assert "rtol ignored: method 'state-transition' does not use tolerances" in w


@pytest.mark.parametrize("value", ["2.5", "true", "'3'", "0"])
def test_scenario_max_chattering_events_is_never_rounded(tmp_path, capsys, value):
    path = write(tmp_path, f"model: bouncing_ball\nstop_time: 0.1\nmax_chattering_events: {value}\n")
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    assert "max_chattering_events must be an integer >= 1, got" in err


def test_grid_helpers():
    from fractions import Fraction
    assert exact_grid(Fraction(1, 100), Fraction(3, 2000)) == Fraction(1, 2000)
    assert exact_grid(Fraction(1, 100), None) == Fraction(1, 100)
    with pytest.warns(OptionWarning, match="does not divide"):
        check_step_against_grid(0.003, 0.01)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_step_against_grid(0.001, 0.01)   # 10 steps: roundoff in 0.01/0.001 is no reason
        check_step_against_grid(None, 0.01)


def test_api_run_simulation_warns_like_the_cli():
    from cosim.commands.simulate import run_simulation
    with pytest.warns(OptionWarning, match="longer than the communication step"):
        result = run_simulation("pendulum", t_end=0.1, dt=0.01, h=0.02)
    assert result["sim"].stats["steps"] == 10
    with pytest.raises(InvalidInputError, match="t_end"):
        run_simulation("pendulum", t_end=-1.0)


# -- --help of every subcommand ------------------------------------------------------------------
def _commands(parser, prefix=()):
    """Every (sub)command path of the cosim parser, e.g. ('fmu', 'build')."""
    yield prefix
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub.prog.split()[-1] == name:  # aliases (check-model) share the parser of their command
                    yield from _commands(sub, prefix + (name,))


COMMANDS = sorted(_commands(build_parser()))


def test_every_command_is_listed():
    names = {c[0] for c in COMMANDS if c}
    assert {"models", "methods", "scenarios", "simulate", "run", "demo", "check", "warmup"} <= names
    if "fmu" in names:
        assert ("fmu", "build") in COMMANDS


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(("cosim",) + c))
def test_help_answers_without_side_effects(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main([*command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: cosim" + "".join(" " + c for c in command))
    assert os.listdir(tmp_path) == []  # e.g. `cosim demo --help` writes no out/


def test_fmu_build_step_against_its_default_experiment_step(tmp_path, capsys):
    pytest.importorskip("pythonfmu")
    rc, out, err = cli(capsys, "fmu", "build", "pendulum", "-o", tmp_path / "P.fmu", "--step", 0.004,
                       "--comm-step", 0.01)
    assert rc == 0, err
    [w] = warnings_in(err)
    assert "--step 0.004 does not divide the DefaultExperiment step --comm-step 0.01" in w


@pytest.mark.ros
@pytest.mark.parametrize("module", ["ros_nodes.sim_node", "ros_nodes.pd_controller"])
def test_ros_help_never_initialises_rclpy(module):
    """--help prints and returns before rclpy.init: no context, no DDS participant."""
    import subprocess
    import sys
    pytest.importorskip("rclpy")
    code = ("import sys, rclpy, importlib; calls = []\n"
            "rclpy.init = lambda *a, **k: calls.append(a)\n"
            f"m = importlib.import_module({module!r}); rc = m.main(['prog', '--help'])\n"
            "sys.exit(rc if not calls else 99)")
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("usage:")


def test_output_cut_short_by_a_pipe_gives_no_traceback(tmp_path):
    """`cosim … | head -1`: the first line, then a quiet exit (no BrokenPipeError).
    The CSV on stdout (~100 kB) is larger than a pipe's buffer, so the writer
    always meets the closed pipe."""
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), PYTHONUNBUFFERED="1")
    cmd = f"'{sys.executable}' -m cosim simulate pendulum --t-end 1 --out /dev/stdout | head -n 1"
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert proc.stdout.startswith("time,") and proc.stdout.count("\n") == 1
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_fmu_build_name_that_is_a_model_and_a_scenario_means_the_model():
    pytest.importorskip("pythonfmu")
    from fmu.builder import _is_scenario
    assert not _is_scenario("bouncing_ball")          # the library model
    assert _is_scenario("bouncing_ball.yaml")         # the shipped scenario
    assert _is_scenario("pendulum_pd") and not _is_scenario("pendulum")


# -- one parser for every method's boolean options (issue 13 item 1) ------------------

@pytest.mark.parametrize("word, expected", [("false", False), ("off", False), (0, False),
                                            ("True", True), ("yes", True), (1, True)])
def test_block_lstable_error_estimate_word_means_what_it_says(word, expected):
    """`bool("false")` is True: the option arrived as a word and ran with the estimate on."""
    from cosim.integrators import make_integrator
    from cosim.models import load_model
    it = make_integrator(load_model("pendulum"), "block-lstable", h=0.01, error_estimate=word)
    it.initialize()
    it.advance(0.02)
    assert it.opts["error_estimate"] is expected
    assert (it.error_estimate > 0.0) is expected


@pytest.mark.parametrize("method, option, value", [("block-lstable", "error_estimate", "maybe"),
                                                   ("generalized-alpha", "project_velocities", 2),
                                                   ("bdf", "reuse_matrix", "scaled"),
                                                   ("bdf", "velocity_error", "scaledd")])
def test_boolean_option_with_a_bad_value_is_refused_naming_it(method, option, value):
    from cosim.integrators import make_integrator
    from cosim.models import load_model
    with pytest.raises(InvalidInputError, match=f"{option} must be true or false.*{value!r}"):
        make_integrator(load_model("pendulum"), method, **{option: value})


def test_velocity_error_scaled_is_accepted_from_a_spec_and_the_api_alike():
    from cosim.integrators import make_integrator
    from cosim.models import load_model
    from cosim.spec import typed_method_options
    assert typed_method_options("bdf", {"velocity_error": "Scaled"}) == {"velocity_error": "scaled"}
    it = make_integrator(load_model("pendulum"), "bdf", velocity_error="scaled")
    assert it.velocity_error is True and it._velocity_scaled
