"""Bring your own model (issue 19): automatic C_q, C_t, γ; the model checker;
clear errors for missing methods; IC repairs reported; user models from a
file; the docs/models.md example executed as written."""
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.cli import main
from cosim.derivatives import without_analytic_derivatives
from cosim.errors import (InitialConditionWarning, ModelDefinitionError, UnknownModelError)
from cosim.models import MultibodyModel, Parameter, model_class
from cosim.models.pendulum import Pendulum
from cosim.simulation import Simulation

MODELS_DOC = Path(__file__).resolve().parents[1] / "docs" / "models.md"
CONSTRAINED = ["pendulum", "andrews", "two_link", "double_pendulum_natural", "crank_slider"]


def _states(model, n=5, seed=0):
    """The initial state and n states near it (as tests/test_models.py)."""
    rng = np.random.default_rng(seed)
    q0, v0 = model.initial_state()
    out = [(q0, v0, 0.0)]
    for _ in range(n):
        scale = np.maximum(np.abs(q0), 1e-2)
        out.append((q0 + 0.05 * scale * rng.standard_normal(q0.size),
                    v0 + (1.0 + np.abs(v0)) * 0.5 * rng.standard_normal(v0.size), 0.0123))
    return out


def _rel(a, b):
    size = float(np.max(np.abs(b)))
    err = float(np.max(np.abs(np.asarray(a) - b)))
    return err / size if size > 0 else err


# -- 1. derivatives on demand ---------------------------------------------------------------
@pytest.mark.parametrize("name", CONSTRAINED)
def test_automatic_derivatives_match_the_analytic_library_terms(name):
    """Measured (benchmarks/auto_derivatives.py): C_q ≤ 4e-14, C_t ≤ 2e-16, γ ≤ 1.7e-11
    relative; asserted with a 25x margin for other CPUs' libm."""
    cls = model_class(name)
    ana, auto = cls(), without_analytic_derivatives(cls)()
    for q, v, t in _states(ana):
        assert _rel(auto.constraint_jacobian(q, t), ana.constraint_jacobian(q, t)) < 1e-12
        assert np.max(np.abs(auto.constraint_dt(q, t) - ana.constraint_dt(q, t))) < 1e-12
        assert _rel(auto.gamma(q, v, t), ana.gamma(q, v, t)) < 5e-10


class RoadFollower(MultibodyModel):
    """A point mass held on the moving curve y = a sin(ω t) + x²/2 (time-dependent
    constraint: C_t and C_tt are non-zero), written with C only."""

    name = "road_follower"
    coordinates = ("x", "y")
    constraint_names = ("road",)
    parameters = (Parameter("a", 0.1, "m"), Parameter("omega", 10.0, "rad/s"))
    time_scale = 0.1

    def mass(self, q, t):
        return np.eye(2)

    def forces(self, q, v, t, u):
        return np.array([0.0, -9.81])

    def constraints(self, q, t):
        p = self.params
        return np.array([q[1] - p["a"] * np.sin(p["omega"] * t) - 0.5 * q[0] ** 2])

    def initial_state(self):
        return np.array([0.5, 0.125]), np.array([1.0, 0.5 + 1.0])


def test_time_dependent_constraint_terms_are_computed_exactly_enough():
    m = RoadFollower()
    a, w = m.params["a"], m.params["omega"]
    rng = np.random.default_rng(3)
    for _ in range(5):
        q, v, t = rng.standard_normal(2), rng.standard_normal(2), float(rng.uniform(0, 1))
        assert m.constraint_jacobian(q, t) == pytest.approx(np.array([[-q[0], 1.0]]), abs=1e-13)
        assert m.constraint_dt(q, t)[0] == pytest.approx(-a * w * np.cos(w * t), abs=1e-12)
        # γ = −(C_q v)_q v − 2 C_qt v − C_tt = v_x² − a ω² sin(ω t)
        assert m.gamma(q, v, t)[0] == pytest.approx(v[0] ** 2 - a * w * w * np.sin(w * t),
                                                    rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("name,method,t_end,h,tol", [
    ("pendulum", "generalized-alpha", 1.0, 1e-2, 1e-12),
    ("pendulum", "bdf", 1.0, 1e-2, 1e-12),
    ("pendulum", "dopri5", 1.0, 1e-2, 1e-12),
    ("two_link", "generalized-alpha", 0.5, 1e-2, 1e-10),
    ("two_link", "bdf", 0.5, 1e-2, 1e-10),
    ("two_link", "dopri5", 0.5, 1e-2, 1e-10),
    ("andrews", "generalized-alpha", 0.001, 1e-5, 1e-10),
])
def test_library_models_without_analytic_derivatives_give_the_same_trajectory(name, method, t_end,
                                                                               h, tol):
    """Fixed steps, Python backend; relative to max|y|.  Measured (benchmarks/auto_derivatives.py)
    ≤ 1.4e-14 (pendulum), ≤ 2.3e-13 (two_link), 3.4e-13 (andrews, 0.003 s)."""
    cls = model_class(name)
    ys = []
    for c in (cls, without_analytic_derivatives(cls)):
        sim = Simulation(c, method=method, h=h, backend="python")
        sim.do_step(0.0, t_end)
        ys.append(sim.y)
    assert np.max(np.abs(ys[0] - ys[1])) <= tol * np.max(np.abs(ys[0]))


def test_missing_compulsory_methods_are_named_with_their_shape():
    class NoMass(MultibodyModel):
        name = "no_mass"
        coordinates = ("x",)

        def forces(self, q, v, t, u):
            return np.zeros(1)

        def initial_state(self):
            return np.zeros(1), np.zeros(1)

    with pytest.raises(ModelDefinitionError, match=r"does not define mass\(q, t\).*shape \(1, 1\)"):
        Simulation(NoMass)

    class NoConstraints(NoMass):
        constraint_names = ("c",)

        def mass(self, q, t):
            return np.eye(1)

    with pytest.raises(ModelDefinitionError, match=r"constraints\(q, t\).*\['c'\], shape \(1,\)"):
        Simulation(NoConstraints)
    with pytest.raises(NotImplementedError):  # still a NotImplementedError for old handlers
        NoMass().mass(np.zeros(1), 0.0)


# -- 2. the model checker --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["pendulum", "andrews", "two_link", "double_pendulum_natural",
                                  "crank_slider", "knife_edge", "bouncing_ball", "lti"])
def test_library_models_pass_the_checker(name):
    report = cosim.check_model(name)
    assert report.ok, report.table()
    verdicts = {r.verdict for r in report.rows}
    assert verdicts <= {"ok", "auto"}, report.table()


class WrongSignGamma(Pendulum):
    def gamma(self, q, v, t):
        return -super().gamma(q, v, t)


class DoubledRow(Pendulum):
    def constraint_jacobian(self, q, t):
        return 2.0 * super().constraint_jacobian(q, t)   # the pendulum's one row, scaled by 2


class AsymmetricMass(Pendulum):
    def mass(self, q, t):
        return np.array([[1.0, 0.1], [0.0, 1.0]])


class WrongQq(Pendulum):
    def force_jacobians(self, q, v, t, u):
        Qq, Qv = super().force_jacobians(q, v, t, u)
        return Qq + 0.5, Qv


class WrongShape(Pendulum):
    def forces(self, q, v, t, u):
        return np.zeros(3)


class NoGamma(Pendulum):
    gamma = MultibodyModel.gamma


class TwoLinkRowScaled(model_class("two_link")):
    def constraint_jacobian(self, q, t):
        Cq = super().constraint_jacobian(q, t).copy()
        Cq[1] *= 2.0
        return Cq


@pytest.mark.parametrize("cls,term,needle", [
    (WrongSignGamma, "gamma vs -d2C/ds2 (eq. 5)", "analytic"),
    (DoubledRow, "C_q vs dC/dq", "analytic"),
    (TwoLinkRowScaled, "C_q vs dC/dq", "entry (1,"),
    (AsymmetricMass, "M symmetric", "M 0.1 vs M^T 0 at entry (0, 1)"),
    (WrongQq, "Q_q vs dQ/dq", "analytic"),
    (WrongShape, "shapes and finiteness", "forces returns shape (3,), expected (2,)"),
])
def test_checker_catches_each_broken_term(cls, term, needle):
    report = cosim.check_model(cls)
    assert not report.ok
    row = report.row(term)
    assert row.verdict == "FAIL" and needle in row.note, report.table()
    if np.isfinite(row.relative):
        assert row.relative >= 0.1           # the size of the mismatch is reported
    assert term in report.table()


def test_wrong_sign_gamma_mismatch_is_twice_gamma():
    row = cosim.check_model(WrongSignGamma).row("gamma vs -d2C/ds2 (eq. 5)")
    assert row.relative == pytest.approx(2.0, rel=1e-6)   # |−γ − γ| / max(|γ|, |−γ|)


def test_missing_gamma_is_computed_and_reported_as_automatic():
    report = cosim.check_model(NoGamma)
    assert report.ok, report.table()
    assert report.row("gamma").verdict == "auto"
    with pytest.raises(KeyError):
        report.row("gamma vs -d2C/ds2 (eq. 5)")   # nothing analytic to compare
    sim_auto, sim = Simulation(NoGamma, method="dopri5", h=1e-2), Simulation("pendulum", method="dopri5",
                                                                             h=1e-2, backend="python")
    sim_auto.do_step(0.0, 0.5)
    sim.do_step(0.0, 0.5)
    assert np.max(np.abs(sim_auto.y - sim.y)) < 1e-12


def test_inconsistent_initial_state_is_a_warning_row():
    class Shifted(Pendulum):
        def initial_state(self):
            q, v = super().initial_state()
            return q + 0.02, v + 0.1

    report = cosim.check_model(Shifted)
    assert report.ok
    assert report.row("initial positions satisfy C = 0").verdict == "warn"
    assert report.row("initial velocities satisfy C_q v + C_t = 0").verdict == "warn"


def test_check_cli_exit_codes_and_json(capsys):
    assert main(["check", "pendulum"]) == 0
    assert "all checks passed" in capsys.readouterr().out
    assert main(["check-model", "test_user_models:WrongSignGamma", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False
    bad = [r for r in out["rows"] if r["verdict"] == "FAIL"]
    # the point check, the check along a trajectory, and (the pendulum declares itself
    # conservative) the energy: the wrong γ lets the velocity constraint drift, so the
    # constraint force does work
    assert [r["term"] for r in bad] == ["gamma vs -d2C/ds2 (eq. 5)",
                                        "gamma vs C_q a - d/dt(C_q v + C_t) (trajectory)",
                                        "energy conserved (trajectory)"]
    assert all(r["error"] > 0 for r in bad)


# -- 3. no silent repairs -------------------------------------------------------------------
class ShiftedPendulum(Pendulum):
    """The library pendulum started 2 % too far out (radially) and with v off by 0.1."""

    name = "pendulum_shifted"

    def initial_state(self):
        q, v = super().initial_state()
        return 1.02 * q, v + np.array([0.1, 0.0])


def test_ic_repair_warns_with_its_size_and_is_public():
    with pytest.warns(InitialConditionWarning, match=r"positions moved by up to 1\.4\d*e-02") as rec:
        sim = Simulation(ShiftedPendulum)
    assert "velocities by up to" in str(rec[0].message)
    rep = sim.ic_report
    assert rep.repaired
    q0, v0 = ShiftedPendulum().initial_state()
    assert rep.position_change == pytest.approx(float(np.max(np.abs(rep.q - q0))), rel=0, abs=0)
    assert rep.velocity_change == pytest.approx(float(np.max(np.abs(rep.v - v0))), rel=0, abs=0)
    # closest point on the unit circle: radial move 0.02·|q0| = 0.02/√2 per coordinate; the
    # radial part of Δv = (0.1, 0) along (1, −1)/√2 is (0.05, −0.05)
    assert rep.position_change == pytest.approx(0.02 / np.sqrt(2.0), rel=1e-12)
    assert rep.velocity_change == pytest.approx(0.05, rel=1e-12)
    assert np.array_equal(sim.y, np.concatenate([rep.q, rep.v]))


def test_consistent_start_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", InitialConditionWarning)
        sim = Simulation("crank_slider")
    assert not sim.ic_report.repaired and sim.ic_report.position_change == 0.0


def test_simulate_prints_and_returns_the_ic_report(capsys):
    spec = "test_user_models:ShiftedPendulum"
    assert main(["simulate", spec, "--t-end", "0.05", "--method", "dopri5"]) == 0
    out = capsys.readouterr().out
    assert "initial state repaired" in out and "positions repaired by" in out
    assert main(["simulate", spec, "--t-end", "0.05", "--method", "dopri5", "--json"]) == 0
    ic = json.loads(capsys.readouterr().out)["ic_report"]
    assert ic["repaired"] is True
    assert ic["position_change"] == pytest.approx(0.02 / np.sqrt(2.0), rel=1e-12)


# -- 4. user models from a file, stated stop time -------------------------------------------
FILE_MODEL = '''
import numpy as np
from cosim.models import MultibodyModel

class Drop(MultibodyModel):
    name = "drop"
    coordinates = ("z",)
    def mass(self, q, t):
        return np.eye(1)
    def forces(self, q, v, t, u):
        return np.array([-9.81])
    def initial_state(self):
        return np.array([0.0]), np.array([0.0])
'''


def test_simulate_a_model_from_a_file_states_the_fallback_stop_time(tmp_path, capsys):
    path = tmp_path / "drop_model.py"
    path.write_text(FILE_MODEL)
    assert main(["simulate", f"{path}:Drop", "--method", "dopri5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["t"] == 1.0 and out["t_end_source"].startswith("fall-back")
    assert out["q"][0] == pytest.approx(-0.5 * 9.81, rel=1e-12)   # z = −g t²/2 at t = 1 s
    assert main(["simulate", f"{path}:Drop", "--method", "dopri5"]) == 0
    assert "stop time 1 s (fall-back: the model declares no default_t_end" in capsys.readouterr().out
    assert main(["simulate", f"{path}:Nope"]) == 2
    assert "defines no 'Nope' (Model classes there: Drop)" in capsys.readouterr().err


def test_module_not_found_gives_a_hint_and_file_specs_stay_on_the_command_line(capsys):
    assert main(["simulate", "caraxis:CarAxis"]) == 2
    err = capsys.readouterr().err
    assert "No module named 'caraxis'" in err and "path/to/caraxis.py:CarAxis" in err
    # scenario files, FMU configurations and ROS parameters never load files
    with pytest.raises(UnknownModelError, match="accepted only on the cosim command line"):
        model_class("/tmp/anything.py:Model")


# -- 5. the docs/models.md example, exactly as written ----------------------------------------------
def _readme_example():
    text = MODELS_DOC.read_text()
    m = re.search(r"<!-- docs-test: file (\S+) -->\n```python\n(.*?)```\n<!-- docs-test: run -->\n```bash\n(.*?)```",
                  text, re.S)
    assert m, "the user-model example of docs/models.md not found"
    return m.group(1), m.group(2), [line.split("#")[0].split() for line in m.group(3).splitlines()
                                    if line.strip()]


def test_readme_user_model_example_runs_as_written(tmp_path, capsys, monkeypatch):
    filename, code, commands = _readme_example()
    (tmp_path / filename).write_text(code)
    monkeypatch.chdir(tmp_path)
    assert [c[:2] for c in commands] == [["cosim", "check"], ["cosim", "simulate"]]
    assert main(commands[0][1:]) == 0
    out = capsys.readouterr().out
    assert "result: all checks passed" in out
    assert re.search(r"^  gamma\s+auto", out, re.M) and re.search(r"^  C_q\s+auto", out, re.M)
    assert main(commands[1][1:] + ["--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["t"] == 2.0 and res["t_end_source"] == "the model's default_t_end"
    assert res["ic_report"]["repaired"] is False
    # conservative and unforced: energy drift measured -2.4e-9 J with dopri5 (rtol 1e-6)
    assert abs(res["energy_drift"]) < 1e-6
    assert res["stats"]["max_constraint_residuals_at_steps"]["position"] < 1e-12


BAD_SIGN = '''
import numpy as np
from cosim.models.pendulum import Pendulum

class BadSign(Pendulum):
    name = "bad_sign"
    def constraint_jacobian(self, q, t):
        return np.array([[2 * q[0], -2 * q[1]]])   # sign error in dC/dy
'''


def test_early_newton_failure_of_a_user_model_points_to_the_checker(tmp_path, capsys):
    path = tmp_path / "badpend.py"
    path.write_text(BAD_SIGN)
    # the default set-up check (user model: check="quick") stops it before the run
    assert main(["simulate", f"{path}:BadSign", "--t-end", "1"]) == 2
    err = capsys.readouterr().err
    assert "fails the set-up check" in err and "C_q vs dC/dq" in err and "cosim check" in err
    # without it the Newton iteration fails in the first steps, or (with another roundoff:
    # the CPU decides) the step shrinks until the set-up check refuses the run: either
    # message points to the checker
    assert main(["simulate", f"{path}:BadSign", "--t-end", "1", "--check", "off",
                 "--method", "generalized-alpha"]) == 2
    err = capsys.readouterr().err
    assert ("Newton iteration failed" in err or "more than max_steps=" in err) \
        and f"run `cosim check {path}:BadSign`" in err
    # the default method (dopri5) fails there too, pointing to the checker
    assert main(["simulate", f"{path}:BadSign", "--t-end", "1", "--check", "off"]) == 2
    assert f"run `cosim check {path}:BadSign`" in capsys.readouterr().err
    assert main(["check", f"{path}:BadSign"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"C_q vs dC/dq\s+FAIL .* at entry \(0, 1\)", out)


@pytest.mark.parametrize("method,energy_tol", [("generalized-alpha", 5e-5), ("bdf", 1e-5),
                                               ("dopri5", 1e-7)])
def test_readme_model_from_m_q_c_only_conserves_energy(tmp_path, method, energy_tol):
    """The docs/models.md slider-crank (M, Q, C only) released from rest, 0.5 s at rtol 1e-6.
    Measured drift (issue 17: rows from the dense output, the integrator no longer
    lands every 1 ms): generalized-α −1.7e-5 J (its numerical damping), BDF −5.2e-7 J,
    dopri5 −2.7e-8 J in 33 steps (−3.2e-11 J when it landed 500 times); potential
    energy at the start 0.41 J.  The three methods agree on θ(0.5) to 3e-5 rad."""
    from cosim.commands.simulate import run_simulation, summary_dict
    from cosim.model_files import load_model_file

    filename, code, _ = _readme_example()
    (tmp_path / filename).write_text(code)
    cls = load_model_file(f"{tmp_path / filename}:SliderCrank")
    res = summary_dict(run_simulation(cls, method, t_end=0.5))
    assert abs(res["energy_drift"]) < energy_tol
    assert res["stats"]["max_constraint_residuals_at_steps"]["position"] < 1e-11
    assert res["q"][0] == pytest.approx(-2.842076, abs=3e-5)   # dopri5: -2.8420765591


def test_wrong_shape_or_nan_from_a_model_method_is_named_at_set_up():
    class FlatMass(Pendulum):
        def mass(self, q, t):
            return np.ones(2)

    with pytest.raises(ModelDefinitionError,
                       match=r"mass\(q, t\) returned shape \(2,\) at t=0.0, expected \(2, 2\)"):
        Simulation(FlatMass, backend="python")

    class NanForce(Pendulum):
        name = "nan_force"

        def forces(self, q, v, t, u):
            return np.array([np.nan, -9.81])

    with pytest.raises(ModelDefinitionError, match=r"'nan_force': forces\(q, v, t, u\) returned "
                                                   r"non-finite values at t=0.0"):
        Simulation(NanForce, backend="python")


def test_kept_automatic_jacobian_follows_parameters_and_is_dropped_after_a_jump():
    from cosim import derivatives

    class Switching(RoadFollower):
        slope = 1.0

        def constraints(self, q, t):
            return np.array([q[1] - self.slope * q[0]])

    m = Switching()
    q = np.array([0.3, 0.4])
    assert m.constraint_jacobian(q, 0.0) == pytest.approx(np.array([[-1.0, 1.0]]), abs=1e-14)
    m.slope = 2.0                        # a mode switched by a jump map (not a parameter)
    derivatives.forget(m)                # what Simulation does after every apply_event
    assert m.constraint_jacobian(q, 0.0) == pytest.approx(np.array([[-2.0, 1.0]]), abs=1e-14)
    m.set_parameter("a", 0.2)            # a parameter change is part of the key
    assert m.constraint_jacobian(q, 0.0) == pytest.approx(np.array([[-2.0, 1.0]]), abs=1e-14)


def test_new_model_template_checks_runs_and_conserves_energy(tmp_path, capsys):
    """`cosim new-model NAME`: the template passes `cosim check`, runs with bdf,
    generalized-α and dopri5 (energy drift within the tolerance), and never overwrites."""
    path = str(tmp_path / "my_arm.py")
    assert main(["new-model", "my_arm", "-o", path]) == 0
    assert f"cosim check {path}:MyArm" in capsys.readouterr().out
    assert main(["check", f"{path}:MyArm"]) == 0
    assert "result: all checks passed" in capsys.readouterr().out
    for method in ("bdf", "generalized-alpha", "dopri5"):
        assert main(["simulate", f"{path}:MyArm", "--method", method, "--rtol", "1e-8",
                           "--atol", "1e-10", "--t-end", "2", "--json"]) == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert summary["t_end"] == 2.0
        # m g l ≈ 9.8 J of potential energy swings; drift measured 4e-8 (bdf) at 1e-8
        assert abs(summary["energy_drift"]) < 1e-5, (method, summary["energy_drift"])
    assert main(["new-model", "my_arm", "-o", path]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["new-model", "My-Arm"]) == 2
    assert "must be lower case letters" in capsys.readouterr().err


HELPER_KERNEL = '''
import dataclasses
from cosim.jit import kernel_helper
from cosim.models.pendulum import KERNELS, Pendulum

def length_squared(p):          # not marked: numba cannot call it from a kernel
    return p[1] * p[1]

@kernel_helper
def length_squared_marked(p):
    return p[1] * p[1]

def forces(q, v, t, u, p, Q):
    s = u[0] / length_squared(p)
    Q[0] = u[1] - s * q[1]
    Q[1] = u[2] - p[0] * p[2] + s * q[0]

def forces_marked(q, v, t, u, p, Q):
    s = u[0] / length_squared_marked(p)
    Q[0] = u[1] - s * q[1]
    Q[1] = u[2] - p[0] * p[2] + s * q[0]

class HelperPendulum(Pendulum):
    name = "helper_pendulum"
    kernel_set = dataclasses.replace(KERNELS, forces=forces)
'''


def test_a_kernel_numba_rejects_runs_on_the_reference_and_says_why(tmp_path, capsys, monkeypatch):
    """A kernel that calls an unmarked helper: the run falls back to the Python reference
    (auto: one line on stderr; numba: a BackendFallbackWarning), with the kernel, the
    numba reason and the remedy named, instead of a compile error from its first step."""
    pytest.importorskip("numba")
    from cosim import jit
    path = tmp_path / "helper_pendulum.py"
    path.write_text(HELPER_KERNEL)
    assert main(["simulate", f"{path}:HelperPendulum", "--t-end", "0.2", "--json"]) == 0
    captured = capsys.readouterr()
    assert "kernel forces of model 'helper_pendulum'" in captured.err
    assert "Untyped global name 'length_squared'" in captured.err
    assert "@cosim.jit.kernel_helper" in captured.err and "running the python backend" in captured.err
    summary = json.loads(captured.out.strip().splitlines()[-1])
    # the same equations as the library pendulum, on the same backend: the same numbers
    ref = Simulation(model="pendulum", backend="python")
    ref.do_step(0.0, 0.2)
    assert summary["outputs"]["angle"] == ref.get_output_dict()["angle"]

    import importlib.util
    spec = importlib.util.spec_from_file_location("helper_pendulum_mod", path)
    module = importlib.util.module_from_spec(spec)
    import sys
    monkeypatch.setitem(sys.modules, spec.name, module)   # as an import would
    spec.loader.exec_module(module)
    with pytest.warns(jit.BackendFallbackWarning, match="length_squared"):
        sim = Simulation(model=module.HelperPendulum, backend="numba")
    assert sim.backend == "python" and "does not compile with numba" in sim.backend_reason
    # marked, the helper compiles with the kernel
    import dataclasses
    marked = dataclasses.replace(module.HelperPendulum.kernel_set, forces=module.forces_marked)
    assert jit.kernels_uncompilable(marked, "marked") is None
