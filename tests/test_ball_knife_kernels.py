"""bouncing_ball and knife_edge ship kernels (issue 13 item 3): their Python methods are
derived from them (cosim.models.kernels.KernelModel).

The former hand-written numpy methods (at fb54bd1) are copied inline below as the
reference: the derived methods must give the same bits at random states.  The ball's
events stay in Python and run with the compiled step loop (Simulation locates them
on the integrator's dense output); the knife edge's nonholonomic rows have kernels
for the Python integrators and the compiled dopri5/rk4 and generalized-α; a model whose
rows lack kernels is refused by the compiled ones with a reason.
"""
import numpy as np
import pytest

import cosim
from cosim.errors import ModelDefinitionError
from cosim import jit
from cosim.jit import BackendFallbackWarning, numba_available
from cosim.models.bouncing_ball import BouncingBall
from cosim.models.kernels import KernelModel, MultibodyKernels
from cosim.models.knife_edge import KnifeEdge


# -- the former numpy methods, verbatim -----------------------------------------------------------
def old_ball(model, q, v, t, u):
    p = model.params
    return dict(mass=np.array([[p["m"]]]),
                forces=np.array([-p["m"] * p["g"] + u[0]]),
                force_jacobians=(np.zeros((1, 1)), np.zeros((1, 1))),
                gamma=np.zeros(0), constraints=np.zeros(0), constraint_jacobian=np.zeros((0, 1)),
                outputs_qv=np.array([q[0], v[0]]))


def old_knife(model, q, v, t, u, mu):
    p = model.params
    c, s = np.cos(q[2]), np.sin(q[2])
    Qq = np.zeros((3, 3))
    Qq[0, 2] = -u[0] * np.sin(q[2])
    Qq[1, 2] = u[0] * np.cos(q[2])
    H = np.zeros((3, 3))
    H[0, 2] = -c * mu[0]
    H[1, 2] = -s * mu[0]
    return dict(mass=np.diag([p["m"], p["m"], p["J"]]),
                forces=np.array([p["m"] * p["g"] * np.sin(p["alpha"]) + u[0] * c, u[0] * s, u[1]]),
                force_jacobians=(Qq, np.zeros((3, 3))),
                gamma=np.zeros(0), constraints=np.zeros(0), constraint_jacobian=np.zeros((0, 3)),
                nonholonomic_matrix=np.array([[-np.sin(q[2]), np.cos(q[2]), 0.0]]),
                nonholonomic_offset=np.zeros(1),
                nonholonomic_gamma=np.array([v[2] * (c * v[0] + s * v[1])]),
                nonholonomic_force_jacobian=H,
                nonholonomic_velocity_jacobian=np.array([[0.0, 0.0, -c * v[0] - s * v[1]]]),
                outputs_qv=np.array([q[2], c * v[0] + s * v[1], -s * v[0] + c * v[1]]))


def new_values(model, q, v, t, u, mu=None):
    out = dict(mass=model.mass(q, t), forces=model.forces(q, v, t, u),
               force_jacobians=model.force_jacobians(q, v, t, u), gamma=model.gamma(q, v, t),
               constraints=model.constraints(q, t), constraint_jacobian=model.constraint_jacobian(q, t),
               outputs_qv=model.outputs_qv(t, q, v, u))
    if mu is not None:
        out.update(nonholonomic_matrix=model.nonholonomic_matrix(q, t),
                   nonholonomic_offset=model.nonholonomic_offset(q, t),
                   nonholonomic_gamma=model.nonholonomic_gamma(q, v, t),
                   nonholonomic_force_jacobian=model.nonholonomic_force_jacobian(q, mu, t),
                   nonholonomic_velocity_jacobian=model.nonholonomic_velocity_jacobian(q, v, t))
    return out


def same_bits(new, old):
    assert new.keys() == old.keys()
    for key, ref in old.items():
        got = new[key]
        pairs = zip(got, ref) if isinstance(ref, tuple) else [(got, ref)]
        for a, b in pairs:
            a = np.asarray(a)
            assert a.dtype == np.float64 and a.shape == b.shape, key
            assert np.array_equal(a, b), (key, a, b)  # bit-identical (0.0 == -0.0 aside)


@pytest.mark.parametrize("params", [{}, dict(m=2.5, g=1.62), dict(m=1e-3, g=9.80665, e=0.3)])
def test_bouncing_ball_methods_are_the_former_equations_bit_for_bit(params):
    rng = np.random.default_rng(13)
    model = BouncingBall(**params)
    assert isinstance(model, KernelModel) and model.kernels() is model.kernel_set  # all kernels given
    for _ in range(50):
        q, v, u = rng.normal(size=1) * 3, rng.normal(size=1) * 5, rng.normal(size=1) * 20
        t = float(rng.uniform(0, 10))
        same_bits(new_values(model, q, v, t, u), old_ball(model, q, v, t, u))


@pytest.mark.parametrize("params", [{}, dict(m=3.0, J=0.02, g=1.62, alpha=1.1)])
def test_knife_edge_methods_are_the_former_equations_bit_for_bit(params):
    rng = np.random.default_rng(93)
    model = KnifeEdge(**params)
    assert isinstance(model, KernelModel) and model.kernels() is model.kernel_set
    for _ in range(50):
        q, v, u = rng.normal(size=3) * 4, rng.normal(size=3) * 5, rng.normal(size=2) * 10
        mu, t = rng.normal(size=1) * 7, float(rng.uniform(0, 10))
        same_bits(new_values(model, q, v, t, u, mu), old_knife(model, q, v, t, u, mu))


def test_nonholonomic_kernels_stay_out_of_the_compiled_entries():
    """functions() (every compiled entry of a model without nonholonomic rows) holds the
    ten holonomic kernels only (mass … outputs, outputs last): adding the nonholonomic
    fields left every existing entry (and its disk cache) unchanged; the five
    nonholonomic kernels come separately, in field order (all_functions() appends
    them)."""
    from cosim.models import knife_edge
    functions = knife_edge.KERNELS.functions()
    assert len(functions) == 10 and functions[-1] is knife_edge.outputs
    assert knife_edge.nonholonomic_matrix not in functions
    assert knife_edge.KERNELS.nonholonomic_functions() == (
        knife_edge.nonholonomic_matrix, knife_edge.nonholonomic_offset, knife_edge.nonholonomic_gamma,
        knife_edge.nonholonomic_force_jacobian, knife_edge.nonholonomic_velocity_jacobian)


def test_a_kernel_model_declaring_nonholonomic_rows_without_their_kernel_is_told_which():
    from cosim.models import bouncing_ball as bb

    class Rolling(BouncingBall):
        nonholonomic_names = ("no_slip",)
        kernel_set = MultibodyKernels(bb.mass, bb.forces, bb.constraints)

    model = Rolling()
    with pytest.raises(ModelDefinitionError, match=r"kernel_set.nonholonomic_matrix.*\['no_slip'\]"):
        model.nonholonomic_matrix(np.zeros(1), 0.0)
    with pytest.raises(ModelDefinitionError, match=r"kernel_set.nonholonomic_gamma"):
        model.nonholonomic_gamma(np.zeros(1), np.zeros(1), 0.0)
    # b and the derivative kernels are optional: b = 0, derivatives by differences
    assert np.array_equal(model.nonholonomic_offset(np.zeros(1), 0.0), np.zeros(1))
    assert model.nonholonomic_force_jacobian(np.zeros(1), np.ones(1), 0.0) is None
    # the compiled methods with nonholonomic rows leave it to the reference
    from cosim.integrators import compiled_unavailable
    if numba_available():
        for method in ("dopri5", "generalized-alpha", "generalized-alpha-i2"):
            assert compiled_unavailable(method, model) == (
                "model 'bouncing_ball' has nonholonomic constraints without all their kernels")


@pytest.mark.skipif(not numba_available(), reason="numba is not importable")
@pytest.mark.parametrize("method", ["generalized-alpha", "generalized-alpha-i2"])
def test_knife_edge_runs_compiled_generalized_alpha(method, monkeypatch):
    """generalized-α (index 3 and GGL) run the knife edge's nonholonomic rows compiled
    (ga_nh_kernel; equivalence with the reference: tests/test_backends.py), under "auto"
    without a notice and under "numba" without a fall-back warning."""
    import warnings
    monkeypatch.setitem(jit._state, "announced", set())
    sim = cosim.Simulation(model="knife_edge", method=method, h=1e-3)
    assert sim.backend == "numba" and sim.backend_reason is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", BackendFallbackWarning)
        assert cosim.Simulation(model="knife_edge", method=method, h=1e-3, backend="numba").backend == "numba"
    sim.do_step(0.0, 0.1)
    q, v = sim.model.exact_solution(0.1)
    assert np.max(np.abs(sim.y - np.concatenate([q, v]))) < 1.5e-6   # h = 1 ms: measured 4.3e-7, 3.7e-7


# -- the ball on the compiled step loop: its events are located by Simulation alike ---------------
COUNTS = ("steps", "rejected", "newton_iterations", "lu_factorizations")


@pytest.mark.skipif(not numba_available(), reason="numba is not importable")
@pytest.mark.parametrize("method", ["generalized-alpha", "bdf", "dopri5", "rk4"])
def test_bouncing_ball_compiled_events_agree_with_the_reference(method):
    """backend "auto" runs the ball compiled (its continuous equations are kernels); the
    switching functions and jump maps stay in Python and Simulation locates them on the
    compiled integrator's dense output.  Measured (4.5 s, 17 events, rtol 1e-8,
    event_tolerance 1e-10): the event times of the two backends agree to 0 (generalized-α,
    bdf, rk4) and 5.0e-11 (dopri5: the locator stops at another point inside the
    tolerance), the states at every communication point to 0 and 1.0e-13; starts
    perturbed by 1e-15 / -2e-15 move the reference's event times by 1.1e-14, 2.6e-10,
    5.0e-11, 8.8e-11 and its states by 1.0e-13, 2.0e-9, 7.4e-14, 1.1e-9, with the same
    counts.  Asserted: the same events and counts, times within max(5 × that spread,
    event_tolerance), states within max(5 × spread, 1e-12), both spreads measured here."""
    tol = 1e-10

    def run(backend, rel=0.0):
        sim = cosim.Simulation(model=BouncingBall(h0=1.0 + rel), method=method, backend=backend,
                               rtol=1e-8, atol=1e-10, event_tolerance=tol)
        ys = []
        for _ in range(450):
            sim.do_step(sim.time, 0.01)
            ys.append(sim.y.copy())
        events = [(e["name"], e["time"]) for e in sim.event_log if e["kind"] == "state"]
        return sim, np.array(ys), events

    ref, y_ref, ev_ref = run("python")
    compiled, y_c, ev_c = run("auto")
    assert compiled.backend == "numba" and compiled.backend_reason is None
    assert ref.stopped and compiled.stopped and len(ev_ref) == 17
    assert [n for n, _ in ev_c] == [n for n, _ in ev_ref]
    assert {k: compiled.stats[k] for k in COUNTS} == {k: ref.stats[k] for k in COUNTS}
    spread_t = spread_y = 0.0
    for rel in (1e-15, -2e-15):
        _, y_o, ev_o = run("python", rel)
        assert [n for n, _ in ev_o] == [n for n, _ in ev_ref]
        spread_t = max(spread_t, max(abs(a[1] - b[1]) for a, b in zip(ev_o, ev_ref)))
        spread_y = max(spread_y, float(np.max(np.abs(y_o - y_ref))))
    assert max(abs(a[1] - b[1]) for a, b in zip(ev_c, ev_ref)) <= max(5.0 * spread_t, tol)
    assert abs(compiled.stop_time - ref.stop_time) <= max(5.0 * spread_t, tol)
    assert np.max(np.abs(y_c - y_ref)) <= max(5.0 * spread_y, 1e-12)
