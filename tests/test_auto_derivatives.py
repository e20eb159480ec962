"""Exact automatic derivatives (issue 19): complex step and hyper-dual numbers through
the model's own numpy code, the path chosen and reported per term, the fall-back to
differences; the library models without any analytic derivative give the same
trajectories for every method; the checker's trajectory and energy rows; check= at
Simulation set-up."""
import math
import re
import warnings

import numpy as np
import pytest

import cosim
from cosim import derivatives
from cosim.derivatives import ALL_TERMS, without_analytic_derivatives
from cosim.errors import ConvergenceError, InvalidInputError, ModelDefinitionError
from cosim.hyperdual import HyperDual, parts, seed
from cosim.integrators import METHOD_REGISTRY
from cosim.models import MultibodyModel, Parameter, model_class
from cosim.models.pendulum import Pendulum
from cosim.simulation import Simulation


def _rel(a, b):
    size = float(np.max(np.abs(b)))
    err = float(np.max(np.abs(np.asarray(a) - b)))
    return err / size if size > 0 else err


def _states(model, n=3, seed_=0):
    rng = np.random.default_rng(seed_)
    q0, v0 = model.initial_state()
    out = [(q0, v0, 0.0)]
    for _ in range(n):
        scale = np.maximum(np.abs(q0), 1e-2)
        out.append((q0 + 0.05 * scale * rng.standard_normal(q0.size),
                    v0 + (1.0 + np.abs(v0)) * 0.5 * rng.standard_normal(v0.size), 0.0123))
    return out


def test_hyperdual_arithmetic_gives_exact_first_and_mixed_second_derivatives():
    # f(x, y) = sin(x y) / sqrt(1 + x²) + atan2(y, x) + x**3 — against closed forms
    x0, y0 = 0.7, -1.3

    def f(x, y):
        return np.sin(x * y) / np.sqrt(1.0 + x * x) + np.arctan2(y, x) + x ** 3

    r = f(HyperDual(x0, 1.0, 0.0), HyperDual(y0, 0.0, 1.0))
    s, c, w = math.sin(x0 * y0), math.cos(x0 * y0), math.sqrt(1 + x0 * x0)
    fx = y0 * c / w - x0 * s / w ** 3 - y0 / (x0 * x0 + y0 * y0) + 3 * x0 * x0
    fy = x0 * c / w + x0 / (x0 * x0 + y0 * y0)
    fxy = (c - x0 * y0 * s) / w - x0 * x0 * c / w ** 3 + (y0 * y0 - x0 * x0) / (x0 * x0 + y0 * y0) ** 2
    assert r.a == pytest.approx(f(x0, y0), rel=1e-15)
    assert r.b1 == pytest.approx(fx, rel=1e-14) and r.b2 == pytest.approx(fy, rel=1e-14)
    assert r.b12 == pytest.approx(fxy, rel=1e-13)
    with pytest.raises(TypeError, match="loses its derivatives"):
        float(r)
    a = parts(np.array([seed([1.0], [2.0])[0] * 3.0, 4.0], dtype=object))
    assert a[:, 0].tolist() == [3.0, 6.0, 6.0, 0.0] and a[:, 1].tolist() == [4.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("name,paths", [
    ("pendulum", {"C_q": "complex-step", "C_t": "complex-step", "gamma": "hyper-dual",
                  "Q_q, Q_v": "complex-step", "(C_q^T lam)_q": "hyper-dual"}),
    ("double_pendulum_natural", {"C_q": "complex-step", "C_t": "complex-step", "gamma": "hyper-dual",
                                 "Q_q, Q_v": "complex-step", "(C_q^T lam)_q": "hyper-dual"}),
    ("crank_slider", {"C_q": "complex-step", "C_t": "complex-step", "gamma": "hyper-dual",
                      "(C_q^T lam)_q": "hyper-dual",
                      # kernels with np.sin/np.cos, called with complex arrays by KernelModel
                      "Q_q, Q_v": "complex-step", "(M a)_q": "complex-step"}),
])
def test_exact_paths_match_the_analytic_library_terms_to_rounding(name, paths):
    """Measured (benchmarks/auto_derivatives.py): 0 … 2e-16 relative (C_q, C_t, γ, Q_q, Q_v,
    (C_qᵀλ)_q); asserted ≤ 1e-12 (the issue's bound for the complex step)."""
    cls = model_class(name)
    ana, auto = cls(), without_analytic_derivatives(cls, ALL_TERMS)()
    assert {t: p for t, p, _ in derivatives.derivative_report(auto) if t in paths} == paths
    lam = np.linspace(1.0, 2.0, ana.n_c)
    for q, v, t in _states(ana):
        u = ana.default_inputs()
        assert _rel(auto.constraint_jacobian(q, t), ana.constraint_jacobian(q, t)) <= 1e-12
        assert np.max(np.abs(auto.constraint_dt(q, t) - ana.constraint_dt(q, t))) <= 1e-12
        assert _rel(auto.gamma(q, v, t), ana.gamma(q, v, t)) <= 1e-12
        if paths["(C_q^T lam)_q"] != "differences":
            assert _rel(derivatives.constraint_force_jacobian(auto, q, lam, t),
                        ana.constraint_force_jacobian(q, lam, t)) <= 1e-12
        if paths["Q_q, Q_v"] != "differences":
            Qq, Qv = derivatives.force_jacobians(auto, q, v, t, u)
            aQq, aQv = ana.force_jacobians(q, v, t, u)
            assert np.max(np.abs(Qq - aQq)) <= 1e-12 * max(1.0, np.max(np.abs(aQq)))
            assert np.max(np.abs(Qv - aQv)) <= 1e-12 * max(1.0, np.max(np.abs(aQv)))


class Road(MultibodyModel):
    """A point mass on the moving curve y = a sin(ω t + 1) + x²/2, written from M, Q, C only;
    ``style`` selects how C is coded (complex-safe, with abs, with a float cast)."""

    name = "road"
    coordinates = ("x", "y")
    constraint_names = ("road",)
    parameters = (Parameter("a", 0.1, "m"), Parameter("omega", 10.0, "rad/s"))
    time_scale = 0.1
    style = "numpy"

    def mass(self, q, t):
        return np.eye(2)

    def forces(self, q, v, t, u):
        return np.array([0.0, -9.81])

    def constraints(self, q, t):
        p = self.params
        if self.style == "abs":      # |x|² = x²: abs breaks the complex step, not hyper-duals
            return np.array([q[1] - p["a"] * np.sin(p["omega"] * t + 1.0) - 0.5 * abs(q[0]) ** 2])
        if self.style == "float":    # a float cast breaks both: differences
            return np.array([float(q[1]) - p["a"] * math.sin(p["omega"] * float(t) + 1.0) - 0.5 * float(q[0]) ** 2])
        return np.array([q[1] - p["a"] * np.sin(p["omega"] * t + 1.0) - 0.5 * q[0] ** 2])

    def initial_state(self):  # on the road: y = a sin 1 + x²/2, y' = x x' + a ω cos 1
        a, w = self.params["a"], self.params["omega"]
        return np.array([0.5, a * math.sin(1.0) + 0.125]), np.array([1.0, 0.5 + a * w * math.cos(1.0)])


@pytest.mark.parametrize("style,expect,tol", [
    ("numpy", {"C_q": "complex-step", "C_t": "complex-step", "gamma": "hyper-dual"}, 1e-14),
    ("abs", {"C_q": "hyper-dual", "C_t": "complex-step", "gamma": "hyper-dual"}, 1e-14),
    # differences: measured 2e-12 (γ); the issue's ~1e-11 for differences
    ("float", {"C_q": "differences", "C_t": "differences", "gamma": "differences"}, 1e-9),
])
def test_each_term_falls_back_when_the_code_is_not_safe_and_reports_why(style, expect, tol):
    m = type("Road_" + style, (Road,), {"style": style})()
    rows = {t: (p, note) for t, p, note in derivatives.derivative_report(m)}
    assert {t: rows[t][0] for t in expect} == expect
    if style == "abs":
        assert "complex-step differs from differences" in rows["C_q"][1]
    if style == "float":
        assert "complex-step not usable (" in rows["C_q"][1]
        assert "hyper-dual not usable (TypeError" in rows["C_q"][1]
    a, w = m.params["a"], m.params["omega"]
    rng = np.random.default_rng(3)
    for _ in range(4):
        q, v, t = rng.standard_normal(2), rng.standard_normal(2), float(rng.uniform(0, 1))
        assert np.max(np.abs(m.constraint_jacobian(q, t) - [[-q[0], 1.0]])) <= tol * max(1, abs(q[0]))
        assert m.constraint_dt(q, t)[0] == pytest.approx(-a * w * math.cos(w * t + 1.0), rel=tol, abs=tol)
        # γ = v_x² − a ω² sin(ω t + 1) (eq. 5 with C_qq, C_tt)
        assert m.gamma(q, v, t)[0] == pytest.approx(v[0] ** 2 - a * w * w * math.sin(w * t + 1.0), rel=tol,
                                                    abs=tol * 10)


def test_simulation_reports_the_path_of_every_term():
    sim = Simulation(Road, method="bdf", h=1e-3, backend="python")
    report = {r["term"]: r["path"] for r in sim.derivative_report}
    assert report == {"C_q": "complex-step", "C_t": "complex-step", "gamma": "hyper-dual",
                      "Q_q, Q_v": "complex-step", "(C_q^T lam)_q": "hyper-dual", "(M a)_q": "complex-step"}
    lib = {r["term"]: r["path"] for r in Simulation("crank_slider", backend="python").derivative_report}
    assert set(lib.values()) == {"analytic"}
    assert Simulation("lti", method="state-transition", h=1e-2).derivative_report is None


@pytest.mark.parametrize("method", sorted(m for m in METHOD_REGISTRY if m != "state-transition"))
@pytest.mark.parametrize("name,t_end,h", [("pendulum", 0.3, 1e-2), ("two_link", 0.1, 1e-2)])
def test_library_models_without_any_analytic_derivative_give_the_same_trajectory(name, t_end, h, method):
    """Every analytic term removed (C_q, C_t, γ, Q_q, Q_v, (C_qᵀλ)_q, (M a)_q): pendulum then
    runs on complex steps / hyper-duals only, two_link on differences for C_q and γ (its
    kernels call math.sin).  Fixed steps, Python reference; relative to max|y|.  Measured
    (benchmarks/auto_derivatives.py) ≤ 9e-13 (rkc-penalty, pendulum), else ≤ 3e-13."""
    cls = model_class(name)
    ys = []
    for c in (cls, without_analytic_derivatives(cls, ALL_TERMS)):
        sim = Simulation(c, method=method, h=h, backend="python")
        sim.do_step(0.0, t_end)
        ys.append(sim.y)
    assert np.max(np.abs(ys[0] - ys[1])) <= 1e-10 * np.max(np.abs(ys[0]))


# -- the checker along a trajectory; check= at set-up -----------------------------------------
class Windy(Pendulum):
    """Declares itself conservative but its forces() has a constant side force: no point
    check can see it (Q is compulsory, nothing to compare it with); the energy row does."""

    def forces(self, q, v, t, u):
        return super().forces(q, v, t, u) + np.array([0.05, 0.0])


class LateGamma(Road):
    """γ without the −C_tt term of the moving road (what a hand derivation forgets)."""

    def gamma(self, q, v, t):
        return np.array([v[0] ** 2])


def test_checker_finds_a_non_conservative_force_by_the_energy_row():
    report = cosim.check_model(Windy)
    row = report.row("energy conserved (trajectory)")
    assert row.verdict == "FAIL" and "dE/dt" in row.note, report.table()
    assert [r.term for r in report.failures()] == ["energy conserved (trajectory)"]
    assert cosim.check_model("pendulum").row("energy conserved (trajectory)").verdict == "ok"


def test_checker_finds_a_missing_time_derivative_of_gamma_along_the_trajectory():
    report = cosim.check_model(LateGamma)
    row = report.row("gamma vs C_q a - d/dt(C_q v + C_t) (trajectory)")
    assert row.verdict == "FAIL" and row.relative > 0.01, report.table()
    assert report.row("gamma vs -d2C/ds2 (eq. 5)").verdict == "FAIL"
    ok = cosim.check_model(Road)
    assert ok.ok and ok.row("gamma vs C_q a - d/dt(C_q v + C_t) (trajectory)").relative < 1e-8, ok.table()


def test_set_up_check_is_quick_for_user_models_and_off_for_the_library():
    assert Simulation("pendulum", backend="python").check == "off"
    assert Simulation(Road, backend="python").check == "quick"
    with pytest.raises(ModelDefinitionError, match=r"fails the set-up check .*gamma vs -d2C/ds2.*"
                                                   r"`cosim check test_auto_derivatives:LateGamma`"):
        Simulation(LateGamma, backend="python")
    sim = Simulation(LateGamma, method="dopri5", h=1e-3, check="off")  # the user's choice
    sim.do_step(0.0, 0.01)
    with pytest.raises(InvalidInputError, match="check must be 'quick' or 'off'"):
        Simulation(Road, check="full")


class BadRow(Pendulum):
    def constraint_jacobian(self, q, t):
        return np.array([[2 * q[0], -2 * q[1]]])   # sign error in dC/dy


def test_an_early_newton_failure_of_a_user_model_points_to_the_checker():
    sim = Simulation(BadRow, method="generalized-alpha", h=1e-2, backend="python", check="off")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ConvergenceError, match=r"run `cosim check test_auto_derivatives:BadRow`"):
            sim.do_step(0.0, 1.0)
    # adaptive: the hint names what happened — the step count, the time, the last step size
    sim = Simulation(BadRow, method="bdf", rtol=1e-6, backend="python", check="off")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ConvergenceError) as info:
            sim.do_step(0.0, 1.0)
    hint = str(info.value).split("a failure at the start of a user model's run (")[1].split(")")[0]
    steps, t, h = re.fullmatch(r"after (\d+) steps, at t=(\S+), last step size (\S+)", hint).groups()
    # measured: 2259 steps to t = 1.06e-7, h down to 3.7e-16 (bdf's Newton accepts a
    # round-off update, bdf_record.ROUNDOFF_FLOOR; with the sign error the steps shrink)
    assert 0 < int(steps) <= 10_000 and 0.0 < float(t) < 1e-4 and 0.0 < float(h) < float(t)
    assert float(t) == info.value.t and float(h) == info.value.h and sim.time == 0.0


class LateCast(Road):
    """Complex-safe at the first state; a branch taken only for x > 1 writes C into a
    float array (TypeError with a complex q, ComplexWarning with float(np.complex128))."""

    def constraints(self, q, t):
        if np.real(q[0]) > 1.0:
            out = np.zeros(1)
            out[0] = q[1] - 0.5 * q[0] ** 2 - self.params["a"] * np.sin(self.params["omega"] * t + 1.0)
            return out
        return super().constraints(q, t)


def test_an_exact_path_that_fails_at_a_later_state_falls_back_to_differences():
    m = LateCast()
    q, v = m.initial_state()
    assert m.constraint_jacobian(q, 0.0) == pytest.approx(np.array([[-q[0], 1.0]]), abs=1e-15)
    assert derivatives.paths(m)["C_q"] == "complex-step"
    q2 = np.array([1.5, 0.0])
    assert m.constraint_jacobian(q2, 0.0) == pytest.approx(np.array([[-1.5, 1.0]]), abs=1e-12)
    assert derivatives.paths(m)["C_q"] == "differences"
    assert "complex-step failed at a later state (" in dict((t, n) for t, _, n in derivatives.derivative_report(m))["C_q"]
