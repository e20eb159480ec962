"""Kernel models that give only M, Q and C kernels run compiled (issues 19 and 13):
cosim.models.auto_kernels generates the derivative kernels — complex step where the
model's kernel compiles for complex numbers, Richardson differences otherwise, γ by a
Cauchy contour integral — and reports the path per term.

The compiled runs use three entries (warmed up in tests/conftest.py through
cosim.commands.warmup.AUTO_KERNEL_ENTRIES): pendulum and two_link with
generalized-α, andrews with BDF."""
import math

import numpy as np
import pytest

from cosim.jit import numba_available
from cosim.models.andrews import Andrews
from cosim.models.auto_kernels import complete, without_derivative_kernels
from cosim.models.base import MultibodyModel, Parameter
from cosim.models.kernels import KernelModel, MultibodyKernels
from cosim.models.pendulum import Pendulum
from cosim.models.two_link import TwoLink
from cosim.simulation import Simulation

needs_numba = pytest.mark.skipif(not numba_available(), reason="numba is not importable")


def _states(model, count=4, seed=3):
    rng = np.random.default_rng(seed)
    q0, v0 = model.initial_state()
    yield q0, v0 + 0.3, 0.0
    for _ in range(count):
        yield (q0 + 0.05 * np.maximum(np.abs(q0), 1e-2) * rng.standard_normal(q0.size),
               v0 + (1.0 + np.abs(v0)) * 0.5 * rng.standard_normal(v0.size), 0.0123)


def _terms(kernels, model, q, v, t):
    n, m, p, u = model.n_q, model.n_c, model._p, model.default_inputs()
    out = {"C_q": np.zeros((m, n)), "C_t": np.zeros(m), "gamma": np.zeros(m), "Q_q": np.zeros((n, n)),
           "Q_v": np.zeros((n, n)), "H": np.zeros((n, n)), "Ma_q": np.zeros((n, n))}
    kernels.constraint_jacobian(q, t, p, out["C_q"])
    kernels.constraint_dt(q, t, p, out["C_t"])
    kernels.gamma(q, v, t, p, out["gamma"])
    kernels.force_jacobians(q, v, t, u, p, out["Q_q"], out["Q_v"])
    kernels.constraint_force_jacobian(q, np.linspace(1.0, 2.0, m), t, p, out["H"])
    if not model.constant_mass:
        kernels.mass_jacobian_term(q, v, t, p, out["Ma_q"])
    return out


# worst relative error over 6 such states, measured (python benchmarks/auto_kernels.py --tables
# accuracy): complex step C_q 1.6e-16, contour γ 1.1e-15 and (C_qᵀλ)_q 1e-14 (pendulum);
# differences C_q 4.4e-14, γ 1.4e-11, Q_v 1.7e-10 (andrews' quadratic-velocity terms),
# (C_qᵀλ)_q by second differences of λᵀC 1.3e-8.  Asserted with a margin of ≥ 7.
TOL = {"complex": {"C_q": 1e-15, "gamma": 1e-13, "H": 1e-12},
       "differences": {"C_q": 1e-12, "gamma": 1e-10, "Q_q": 1e-10, "Q_v": 3e-9, "H": 1e-7, "Ma_q": 1e-11}}


@needs_numba
@pytest.mark.parametrize("cls, paths, tol", [
    (Pendulum, {"C_q": "complex-step", "C_t": "complex-step", "gamma": "complex-contour",
                "Q_q, Q_v": "complex-step"}, TOL["complex"]),
    (TwoLink, {"C_q": "differences", "gamma": "differences", "Q_q, Q_v": "complex-step"},
     TOL["differences"]),
    (Andrews, {"C_q": "differences", "gamma": "differences", "Q_q, Q_v": "differences",
               "(M a)_q": "differences"}, TOL["differences"]),
])
def test_generated_kernels_match_the_analytic_ones(cls, paths, tol):
    ana = cls()
    auto = without_derivative_kernels(cls)()
    kernels, report = complete(auto)
    names = {"constraint_jacobian": "C_q", "constraint_dt": "C_t", "gamma": "gamma",
             "force_jacobians": "Q_q, Q_v", "mass_jacobian_term": "(M a)_q"}
    got = {names[k]: v[0] for k, v in report.items() if k in names}
    assert {k: got[k] for k in paths} == paths
    if paths["C_q"] == "differences":  # the reason names the numba call that failed
        assert "does not compile for complex numbers (no cos(complex128)" in report["constraint_jacobian"][1]
    for q, v, t in _states(ana):
        a, b = _terms(ana.kernel_set, ana, q, v, t), _terms(kernels, ana, q, v, t)
        for term, bound in tol.items():
            size = max(float(np.max(np.abs(a[term]))), 1e-300)
            assert float(np.max(np.abs(a[term] - b[term]))) <= bound * size, term
        assert float(np.max(np.abs(a["C_t"] - b["C_t"]))) <= 1e-13  # scleronomic: C_t = 0


# -- a user kernel model with a time-dependent constraint, written with numpy functions
# (complex-safe), and the same constraint written with abs() (compiles for complex, wrong)
def _road_mass(q, t, p, M):
    M[0, 0] = M[1, 1] = p[0]


def _road_forces(q, v, t, u, p, Q):
    Q[1] = -p[0] * 9.81 - p[1] * v[1] * np.abs(v[1])


def _road(q, t, p, C):
    """y = a sin(x − c t): a road that moves."""
    C[0] = q[1] - p[2] * np.sin(q[0] - p[3] * t)


def _road_abs(q, t, p, C):
    C[0] = q[1] - p[2] * np.sin(q[0] - p[3] * t) + 0.0 * abs(q[0])


def _road_abs_wrong(q, t, p, C):
    C[0] = abs(q[1]) - p[2] * np.sin(q[0] - p[3] * t)


class Road(KernelModel):
    name = "road_kernels"
    coordinates = ("x", "y")
    constraint_names = ("road",)
    parameters = (Parameter("m", 2.0, "kg"), Parameter("drag", 0.3, "kg/m"),
                  Parameter("a", 0.2, "m"), Parameter("c", 1.5, "m/s"))
    constant_mass = True
    kernel_set = MultibodyKernels(_road_mass, _road_forces, _road)

    def kernel_parameters(self):
        return [self.params[k] for k in ("m", "drag", "a", "c")]

    def initial_state(self):
        return np.array([0.3, 0.2 * math.sin(0.3)]), np.array([1.0, 0.2 * math.cos(0.3)])

    def gamma_exact(self, q, v, t):
        a, c = self.params["a"], self.params["c"]
        w = v[0] - c
        return np.array([-a * math.sin(q[0] - c * t) * w * w])

    def ct_exact(self, q, t):
        a, c = self.params["a"], self.params["c"]
        return np.array([a * c * math.cos(q[0] - c * t)])


class RoadAbs(Road):
    kernel_set = MultibodyKernels(_road_mass, _road_forces, _road_abs_wrong)


@needs_numba
def test_time_dependent_constraint_exact_paths_and_report():
    model = Road()
    kernels, report = complete(model)
    assert {k: v[0] for k, v in report.items()} == {
        "constraint_jacobian": "complex-step", "constraint_dt": "complex-step",
        "gamma": "complex-contour", "force_jacobians": "differences",  # np.abs of a complex: |z|
        "constraint_force_jacobian": "differences"}
    assert "differs from differences" in report["force_jacobians"][1]
    p = model._p
    for q, v, t in _states(model):
        g, ct = np.zeros(1), np.zeros(1)
        kernels.gamma(q, v, t, p, g)
        kernels.constraint_dt(q, t, p, ct)
        ref = model.gamma_exact(q, v, t)
        assert abs(g[0] - ref[0]) <= 1e-13 * max(abs(ref[0]), 1.0)   # measured 4e-16
        assert abs(ct[0] - model.ct_exact(q, t)[0]) <= 1e-15 * 0.3
    # abs() of a coordinate compiles for complex numbers but is not complex-step safe: the
    # probe against differences catches it and the term uses differences
    _, report_abs = complete(RoadAbs())
    assert report_abs["constraint_jacobian"][0] == "differences"
    assert "complex step differs from differences" in report_abs["constraint_jacobian"][1]


@needs_numba
@pytest.mark.parametrize("cls, method, t_end, h, bound", [
    # measured: pendulum 1.5e-12 (exact paths); two_link 9.4e-12 (differences; one Newton
    # iteration more in 2000 steps; spread of the analytic run under a 1e-15 change of q0:
    # 2.9e-13); andrews BDF rtol 1e-6 to 0.01 s (differences) 4.3e-11, same step and
    # Jacobian counts — the spread of the analytic run itself is 4.1e-11.  (To 0.03 s the
    # step sequences part, 949 vs 961 steps, 8e-9 apart, both 1.4-1.6e-8 from the test-set
    # reference: benchmarks/auto_kernels.py --tables steps.)
    (Pendulum, "generalized-alpha", 2.0, 1e-3, 1e-10),
    # two_link on another CPU: 1.0e-9 × max|y| = 5.3 apart at the unperturbed start (same
    # Newton count, 5435), 5e-11 at starts with q0·(1 + {1, −2, 3, −5}e-15): a refresh of
    # the iteration matrix decided by roundoff moves the Newton remainder; bound 5× that
    (TwoLink, "generalized-alpha", 2.0, 1e-3, 1e-9),
    (Andrews, "bdf", 0.01, None, 1e-10),
])
def test_library_models_without_derivative_kernels_run_compiled_and_agree(cls, method, t_end, h, bound):
    runs = []
    for c in (cls, without_derivative_kernels(cls)):
        sim = Simulation(c, method=method, h=h, backend="numba")
        assert sim.backend == "numba"
        sim.do_step(0.0, t_end)
        runs.append((sim.y, sim.stats, sim.derivative_report))
    (ya, sa, _), (yb, sb, report) = runs
    assert float(np.max(np.abs(ya - yb))) <= bound * float(np.max(np.abs(ya)))
    assert abs(sa["steps"] - sb["steps"]) <= 1
    rows = {r["term"]: r["path"] for r in report}
    assert rows["C_q"].endswith("(compiled)") and rows["gamma"].endswith("(compiled)")


class Slider(MultibodyModel):
    """A plain-Python user model (no kernels): a mass on a tilted rail."""
    name = "slider_user"
    coordinates = ("x", "y")
    constraint_names = ("rail",)

    def mass(self, q, t):
        return np.eye(2)

    def forces(self, q, v, t, u):
        return np.array([0.0, -9.81])

    def constraints(self, q, t):
        return np.array([q[1] - 0.5 * q[0]])

    def initial_state(self):
        return np.zeros(2), np.zeros(2)


def test_a_model_without_kernels_runs_on_the_python_backend_and_says_why():
    sim = Simulation(Slider, method="generalized-alpha", h=1e-3)
    assert sim.backend == "python"
    assert "has no compiled kernels" in sim.backend_reason
    assert "calling back into its Python methods was measured" in sim.backend_reason
    assert Simulation("pendulum", backend="python").backend_reason == "the python backend was asked for"
