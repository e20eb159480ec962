"""`cosim` command line: listings, simulate outputs, and bad input (exit code 2)."""
import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim import errors
from cosim.cli import main


def run_cli(*args):
    proc = subprocess.run([sys.executable, "-m", "cosim", *args], capture_output=True, text=True,
                          timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def test_version_names_the_version_and_the_distribution():
    """`cosim --version`: one line, the version of cosim/_version.py (pyproject reads it
    there) and the distribution name (`cosim` on the package index is another project)."""
    from cosim._version import DISTRIBUTION
    code, out, err = run_cli("--version")
    assert code == 0 and err == ""
    assert out.strip().startswith(f"cosim {cosim.__version__} (distribution {DISTRIBUTION},")
    assert DISTRIBUTION == "cosim-mbs" and len(out.strip().splitlines()) == 1


def test_models_and_methods_list_what_exists(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "pendulum" in out and "seed 001" in out
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    assert "generalized-alpha" in out


def _library_models():
    from cosim.models import MODEL_REGISTRY, model_class
    return [model_class(name)() for name in MODEL_REGISTRY]


def test_models_lists_parameters_inputs_outputs_as_the_models_declare_them(capsys):
    """`cosim models`: every library model with each declared parameter (default, unit),
    input (default, unit) and output (unit); `--json` carries the declarations exactly."""
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    blocks = {b.split()[0]: b for b in out.strip().split("\n\n")}
    models = _library_models()
    assert [m.name for m in models] == list(blocks)[:len(models)]
    for m in models:
        text = " ".join(blocks[m.name].split())   # wrapped lines joined
        for p in m.parameters:
            assert f"{p.name}={float(p.default):.6g} [{p.unit}]" in text, (m.name, p.name)
        for s in m.inputs:
            assert f"{s.name}={float(s.default):.6g} [{s.unit}]" in text, (m.name, s.name)
        for s in m.outputs:
            assert f"{s.name} [{s.unit}]" in text, (m.name, s.name)
    assert main(["models", "--json"]) == 0
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    for m in models:
        d = listed[m.name]
        assert [(p["name"], p["default"], p["unit"], p["tunable"]) for p in d["parameters"]] == \
            [(p.name, float(p.default), p.unit, p.tunable) for p in m.parameters]
        assert [(s["name"], s["default"], s["unit"]) for s in d["inputs"]] == \
            [(s.name, float(s.default), s.unit) for s in m.inputs]
        assert [(s["name"], s["unit"]) for s in d["outputs"]] == [(s.name, s.unit) for s in m.outputs]
        assert d["states"] == list(m.state_names)
    assert listed["lti"]["configuration"] == ["A", "B", "C", "D", "x0", "state_names", "input_names",
                                              "output_names"]


def test_models_name_shows_one_model_with_exact_defaults(capsys):
    """`cosim models pendulum`: the parameter rows carry the declared default exactly
    (repr of the float), the unit and the description; the events of bouncing_ball."""
    from cosim.models import model_class
    assert main(["models", "pendulum"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ")}
    cls = model_class("pendulum")
    for p in cls.parameters:
        assert float(rows[p.name][1]) == p.default and rows[p.name][2] == p.unit, p.name
    for s in cls.inputs:
        assert float(rows[s.name][1]) == s.default and rows[s.name][2] == s.unit, s.name
    for s in cls.outputs:
        assert rows[s.name][1] == s.unit, s.name
    assert "coordinates (2): x, y" in out and "constraints (1): length" in out
    assert main(["models", "bouncing_ball", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [(e["name"], e["direction"], e["terminal"]) for e in d["events"]] == \
        [(e.name, e.direction, e.terminal) for e in model_class("bouncing_ball").events]
    assert {p["name"] for p in d["parameters"] if p["tunable"]} == {"e", "v_stop"}


def test_models_of_a_urdf_file_shows_its_joints(capsys):
    """`cosim models ROBOT.urdf`: the movable joints of the file (read here with an XML
    parser) are the coordinates and the inputs (efforts, N.m for revolute joints)."""
    pytest.importorskip("pinocchio")
    import xml.etree.ElementTree as ET
    from pathlib import Path
    path = Path(cosim.__file__).parent / "data" / "urdf" / "two_link.urdf"
    joints = [j.get("name") for j in ET.parse(path).getroot().iter("joint") if j.get("type") != "fixed"]
    assert main(["models", str(path), "--json", "--frame", "tip_joint"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["coordinates"] == joints == ["joint1", "joint2"]
    assert [(s["name"], s["unit"]) for s in d["inputs"]] == [(j, "N.m") for j in joints]
    outputs = [s["name"] for s in d["outputs"]]
    assert outputs[:4] == [f"{j}_position" for j in joints] + [f"{j}_velocity" for j in joints]
    assert "tip_joint_x" in outputs and "tip_joint_qw" in outputs
    assert main(["models", str(path)]) == 0
    out = capsys.readouterr().out
    assert "coordinates (2): joint1, joint2" in out and "gravity_z *" in out


def test_models_unknown_name_is_one_line(capsys):
    assert main(["models", "pendelum"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cosim: error: unknown model 'pendelum'") and "\n" not in err


def test_simulate_json_pendulum_conserves_energy_and_constraint(tmp_path, capsys):
    csv_path, png_path = tmp_path / "p.csv", tmp_path / "p.png"
    rc = main(["simulate", "pendulum", "--t-end", "1.0", "--rtol", "1e-8", "--atol", "1e-10",
               "--json", "--out", str(csv_path), "--plot", str(png_path)])
    assert rc == 0
    result = json.loads(capsys.readouterr().out)
    for key in ("model", "method", "t", "q", "v", "outputs", "stats", "wall_time_s"):
        assert key in result
    for key in ("steps", "rejected", "newton_iterations", "residual_evaluations",
                "jacobian_evaluations", "lu_factorizations", "constraint_residuals", "wall_time_s"):
        assert key in result["stats"]
    assert result["t"] == pytest.approx(1.0, abs=1e-12)
    assert set(result["stats"]["constraint_residuals"]) == {"position", "velocity", "acceleration"}
    x, y = result["q"]
    assert math.hypot(x, y) == pytest.approx(1.0, abs=1e-9)  # index-3 constraint held
    assert abs(result["energy_drift"]) < 1e-4  # 1 kg, 1 m, ~7 J of energy scale
    # the CSV has a time column and every coordinate and output by name
    with open(csv_path) as fh:
        header = next(csv.reader(fh))
    assert header[0] == "time"
    for name in ("x", "y", "dx", "dy", "angle", "angular_velocity", "rod_force"):
        assert name in header
    table = np.loadtxt(csv_path, delimiter=",", skiprows=1)
    assert table[-1, 0] == pytest.approx(1.0, abs=1e-12)
    assert png_path.stat().st_size > 10_000 and png_path.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("model, says, lost", [
    ("pendulum", "the model is conservative", False),
    ("bouncing_ball", "not declared conservative", True),  # impacts lose energy on purpose
])
def test_energy_line_says_whether_the_change_is_an_error_measure(model, says, lost, capsys):
    assert main(["simulate", model, "--t-end", "1.0", "--backend", "python"]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if "kinetic + potential" in s)
    assert says in line
    drift = float(line.split("energy")[1].split("J")[0])
    assert (drift < -1.0) if lost else (abs(drift) < 1e-4)  # ball: restitution < 1 over 1 s


def test_simulate_matches_the_independent_pendulum_solution(capsys):
    """Polar-coordinate ODE (seed 001 eq. 3.54) with scipy DOP853 as the reference."""
    from scipy.integrate import solve_ivp

    assert main(["simulate", "pendulum", "--t-end", "2.0", "--rtol", "1e-9", "--atol", "1e-11",
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    phi0 = math.pi / 4
    ref = solve_ivp(lambda t, s: [s[1], -9.81 * math.sin(s[0])], (0, 2.0), [phi0, 0.0],
                    method="DOP853", rtol=1e-13, atol=1e-13)
    phi = ref.y[0, -1]
    assert result["outputs"]["angle"] == pytest.approx(phi, abs=1e-5)


@pytest.mark.parametrize("args, needle", [
    (["simulate", "no_such_model"], "unknown model 'no_such_model'"),
    (["simulate", "pendulum", "--param", "bogus=1"], "no parameter 'bogus'"),
    (["simulate", "pendulum", "--param", "l=nan"], "parameter 'l' must be finite"),
    (["simulate", "pendulum", "--t-end", "0"], "t_end must be > 0"),
    (["simulate", "pendulum", "--t-end=-1"], "t_end must be > 0"),
    (["simulate", "pendulum", "--rtol", "0"], "rtol must be > 0"),
    (["simulate", "pendulum", "--rtol=-1e-6"], "rtol must be > 0"),
    (["simulate", "pendulum", "--method", "nope"], "unknown method 'nope'"),
    # issue 14: bounds that guarantee termination
    (["simulate", "pendulum", "--atol", "1e-300"], "atol must be >= 1e-30"),
    (["simulate", "pendulum", "--dt", "1e-300"], "more than 10000000"),
    (["simulate", "pendulum", "--method", "block-lstable", "--h", "1e-9"], "more than max_steps"),
])
def test_bad_input_gives_one_line_error_and_exit_code_2(args, needle):
    rc, out, err = run_cli(*args)
    assert rc == 2, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("cosim: error: ") and needle in lines[0], err


def test_api_raises_specific_exception_types():
    with pytest.raises(errors.UnknownModelError):
        cosim.load_model("no_such_model")
    with pytest.raises(errors.UnknownParameterError):
        cosim.load_model("pendulum", bogus=1.0)
    with pytest.raises(errors.InvalidInputError):
        cosim.load_model("pendulum", l=float("nan"))
    model = cosim.load_model("pendulum")
    with pytest.raises(errors.InvalidInputError):
        cosim.make_integrator(model, "generalized-alpha", rtol=0.0)
    with pytest.raises(errors.UnknownMethodError):
        cosim.make_integrator(model, "nope")
    from cosim.commands.simulate import run_simulation
    with pytest.raises(errors.InvalidInputError, match="t_end"):
        run_simulation("pendulum", t_end=-1.0)


@pytest.mark.parametrize("model, key", [("pendulum", "l"), ("pendulum", "m"), ("two_link", "l2"),
                                        ("andrews", "m3"), ("double_pendulum_natural", "m1")])
def test_non_positive_mass_or_length_is_rejected_and_leaves_the_model_unchanged(model, key):
    with pytest.raises(errors.InvalidInputError, match=fr"parameter '{key}' must be in \[1e-12, 1e\+12\], got -1.0"):
        cosim.load_model(model, **{key: -1.0})
    instance = cosim.load_model(model)
    before = dict(instance.params)
    with pytest.raises(errors.InvalidInputError, match=r"must be in \[1e-12, 1e\+12\], got 0.0"):
        instance.set_parameter(key, 0.0)
    assert instance.params == before


def test_scenario_with_an_unbounded_number_of_communication_steps_is_refused(tmp_path):
    """Issue 14: `stop_time: 1e12` (and `communication_step: 1e-300`) hung; now one line, exit 2."""
    for stop, dt in (("1.0e+12", "0.01"), ("1.0", "1.0e-300")):
        path = tmp_path / "big.yaml"
        path.write_text(f"name: big\nmodel: pendulum\nmethod: generalized-alpha\n"
                        f"stop_time: {stop}\ncommunication_step: {dt}\n")
        rc, out, err = run_cli("run", str(path))
        assert rc == 2, (out, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "more than 10000000" in lines[0], err


def test_warmup_methods_in_two_workers_names_every_method_once():
    """`cosim warmup --methods -j 2` (what scripts/setup.sh runs on two cores): one line
    per method, each compiled entry once and the methods sharing it said so; every
    method then runs compiled in this process."""
    import cosim
    from cosim.integrators import METHOD_REGISTRY
    from cosim.jit import numba_available
    if not numba_available():
        pytest.skip("numba is not importable")
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "cosim", "warmup", "--methods", "-j", "2"],
                          capture_output=True, text=True, timeout=1800, cwd=repo,
                          env=dict(os.environ, PYTHONPATH=str(repo)))
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip()]
    methods = {r[0]: " ".join(r[1:-2]) for r in rows if r[0] in METHOD_REGISTRY}
    assert set(methods) == set(METHOD_REGISTRY)
    entries = {METHOD_REGISTRY[m].split(":")[0] for m in METHOD_REGISTRY}
    assert sum(v == "compiled (or loaded)" for v in methods.values()) == len(entries)
    assert all(v in ("compiled (or loaded)", "shares that compiled entry") for v in methods.values())
    sim = cosim.Simulation(model="pendulum", method="spark", h=1e-3, backend="numba")
    assert sim.backend == "numba"
