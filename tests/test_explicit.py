"""Explicit Runge-Kutta + constraint projection (seed 000 §6, eqs. 88-89):
convergence order, constraint residuals after every step, dense output,
bit-identical restore, first-order models, option errors."""
import numpy as np
import pytest

from cosim import load_model, make_integrator
from cosim.errors import InvalidInputError, StateError, UnknownParameterError

from reference import index1_reference, index1_solution, lti_zoh_reference


def _pendulum():
    return load_model("pendulum", phi0=1.0)


def _observed_order(method, hs, T=1.0):
    model = _pendulum()
    q, v = index1_reference(model, T)
    ref = np.concatenate([q, v])
    errs = []
    for h in hs:
        it = make_integrator(model, method, h=h)
        it.initialize()
        it.advance(T)
        errs.append(np.max(np.abs(it.y - ref)))
    return np.polyfit(np.log(hs), np.log(errs), 1)[0], errs


def test_dopri5_fixed_step_order_5():
    order, errs = _observed_order("dopri5", [0.05, 0.025, 0.0125, 0.00625])
    assert abs(order - 5.0) <= 0.3, (order, errs)


def test_rk4_fixed_step_order_4():
    order, errs = _observed_order("rk4", [0.02, 0.01, 0.005])
    assert abs(order - 4.0) <= 0.3, (order, errs)


@pytest.mark.parametrize("method,opts", [("dopri5", {"rtol": 1e-7, "atol": 1e-9}),
                                         ("rk4", {"rtol": 1e-7, "atol": 1e-9}),
                                         ("rk4", {"h": 0.01}),
                                         ("dopri5", {"h": 0.02})])
def test_constraints_at_tolerance_after_every_step(method, opts):
    model = _pendulum()
    it = make_integrator(model, method, **opts)
    it.initialize()
    n_steps = 0
    while it.t < 1.5:
        it.step(1.5)
        n_steps += 1
        pos, vel, _ = model.residual_levels(it.t, it.y)
        assert pos <= 1e-13 and vel <= 1e-12, (it.t, pos, vel)
    q, v = index1_reference(model, 1.5)
    assert np.max(np.abs(it.y - np.concatenate([q, v]))) < 2e-5
    assert n_steps == it.stats["steps"] > 10


def test_andrews_dopri5_against_reference_and_constraints():
    model = load_model("andrews")
    it = make_integrator(model, "dopri5", rtol=1e-7, atol=1e-7)
    it.initialize()
    worst = 0.0
    while it.t < 0.01:
        it.step(0.01)
        pos, vel, _ = it.model.residual_levels(it.t, it.y)
        worst = max(worst, pos)
        assert vel <= 1e-9, (it.t, vel)
    assert worst <= 1e-14
    q_ref, v_ref = index1_reference(model, 0.01)
    assert np.max(np.abs(it.q - q_ref)) < 1e-5
    assert np.max(np.abs(it.v - v_ref) / (1.0 + np.abs(v_ref))) < 1e-3


def test_dense_output_meets_projected_points_and_reference():
    model = _pendulum()
    it = make_integrator(model, "dopri5", rtol=1e-9, atol=1e-11)
    it.initialize()
    ref = index1_solution(model, 1.0)
    while it.t < 1.0:
        it.step(1.0)
        assert np.array_equal(it.dense_output(it.t), it.y)
        assert np.allclose(it.dense_output(it.t_prev), it.y_prev, rtol=0, atol=1e-15)
        tm = 0.5 * (it.t_prev + it.t)
        assert np.max(np.abs(it.dense_output(tm) - ref.sol(tm))) < 1e-7


@pytest.mark.parametrize("method,opts", [("dopri5", {}), ("rk4", {}), ("rk4", {"h": 1e-3}),
                                         ("dopri5", {"h": 2e-4})])
def test_restore_and_continue_bit_identical(method, opts):
    model = load_model("andrews")
    it = make_integrator(model, method, rtol=1e-6, atol=1e-6, **opts)
    it.initialize()
    it.advance(0.002)
    snap = it.state()
    it.advance(0.004)
    y1, stats1, t_prev1 = it.y.copy(), dict(it.stats), it.t_prev
    dense1 = it.dense_output(0.5 * (it.t_prev + it.t))
    # same object
    it.restore(snap)
    it.advance(0.004)
    assert np.array_equal(it.y, y1) and it.stats == stats1 and it.t_prev == t_prev1
    # fresh integrator, as after a restart in a new process
    it2 = make_integrator(load_model("andrews"), method, rtol=1e-6, atol=1e-6, **opts)
    it2.initialize()
    it2.restore(snap)
    it2.advance(0.004)
    assert np.array_equal(it2.y, y1) and it2.stats == stats1
    assert np.array_equal(it2.dense_output(0.5 * (it2.t_prev + it2.t)), dense1)


def test_first_order_model_lti_against_exact_zoh():
    model = load_model("lti")
    u = np.array([0.5])
    exact = lti_zoh_reference(model.A, model.B, model.initial_y(), u, 2.0)
    for method in ("dopri5", "rk4"):
        it = make_integrator(model, method, rtol=1e-9, atol=1e-11)
        it.initialize(u=u)
        it.advance(2.0)
        assert np.max(np.abs(it.y - exact)) < 1e-7, method
    errs = []
    for h in (0.1, 0.05, 0.025):
        it = make_integrator(model, "dopri5", h=h)
        it.initialize(u=u)
        it.advance(2.0)
        errs.append(np.max(np.abs(it.y - exact)))
    order = np.polyfit(np.log([0.1, 0.05, 0.025]), np.log(errs), 1)[0]
    assert abs(order - 5.0) <= 0.3, errs


def test_input_change_drops_fsal_and_matches_fresh_start():
    model = _pendulum()
    it = make_integrator(model, "dopri5", rtol=1e-8, atol=1e-10)
    it.initialize()
    it.advance(0.3)
    it.set_inputs([0.7, 0.0, 0.0])
    assert it.f_cur is None
    it.advance(0.6)
    fresh = make_integrator(model, "dopri5", rtol=1e-8, atol=1e-10)
    fresh.initialize()
    fresh.advance(0.3)
    fresh.set_inputs([0.7, 0.0, 0.0])
    fresh.advance(0.6)
    assert np.array_equal(fresh.y, it.y)
    # the torque did work: the state differs from the unforced run
    free = make_integrator(model, "dopri5", rtol=1e-8, atol=1e-10)
    free.initialize()
    free.advance(0.6)
    assert np.max(np.abs(free.y - it.y)) > 1e-3


def test_fixed_step_lands_exactly_on_targets():
    model = _pendulum()
    it = make_integrator(model, "rk4", h=0.03)
    it.initialize()
    it.advance(0.1)
    assert it.t == 0.1
    assert it.stats["steps"] == 4  # 0.03, 0.06, 0.09, 0.1


def test_andrews_rk4_fixed_step_accuracy():
    model = load_model("andrews")
    it = make_integrator(model, "rk4", h=2e-5)
    it.initialize()
    it.advance(0.003)
    q_ref, _ = index1_reference(model, 0.003)
    assert np.max(np.abs(it.q - q_ref)) < 1e-7


@pytest.mark.parametrize("method", ["dopri5", "rk4"])
def test_bad_options_raise_clear_errors(method):
    model = _pendulum()
    with pytest.raises(InvalidInputError, match="h must be > 0"):
        make_integrator(model, method, h=0.0)
    with pytest.raises(InvalidInputError, match="rtol must be finite"):
        make_integrator(model, method, rtol=float("nan"))
    with pytest.raises(UnknownParameterError, match="no option 'penalty'"):
        make_integrator(model, method, penalty=10.0)
    it = make_integrator(model, method)
    it.initialize()
    with pytest.raises(StateError, match="belongs to method"):
        it.restore({**it.state(), "method": "bdf"})
    before = it.state()
    with pytest.raises(InvalidInputError, match="before t"):
        it.advance(-1.0)
    assert np.array_equal(it.y, before["y"])


@pytest.mark.parametrize("method,opts", [("dopri5", {"rtol": 1e-8, "atol": 1e-10}), ("rk4", {"h": 0.01})])
def test_nonholonomic_constraint_held_by_projection(method, opts):
    """Knife edge (seed 000 §7): B q'' = γ_G in eq. 88 and B v + b = 0 in the projection."""
    model = load_model("knife_edge")
    it = make_integrator(model, method, **opts)
    it.initialize()
    while it.t < 1.0:
        it.step(1.0)
        q, v = model.split(it.y)
        G = model.nonholonomic_matrix(q, it.t) @ v + model.nonholonomic_offset(q, it.t)
        assert np.max(np.abs(G)) < 1e-13, (it.t, G)


@pytest.mark.parametrize("method", ["dopri5", "rk4", "rkc-penalty", "local-index1"])
def test_in_simulation_events_and_serialized_restart(method):
    """Through the stepper: impacts located on our dense output at the analytic
    times, and a serialized state continues bit-identically in a new Simulation."""
    from cosim import Simulation
    sim = Simulation(model="bouncing_ball", method=method, rtol=1e-8, atol=1e-10)
    for k in range(10):
        sim.do_step(k * 0.1, 0.1)
    blob = sim.serialize_state()
    for k in range(10, 20):
        sim.do_step(k * 0.1, 0.1)
    impacts = [e["time"] for e in sim.event_log if e.get("name") == "impact"]
    exact = [t for t, _ in sim.model.impact_times() if t < 2.0][:len(impacts)]
    assert len(impacts) >= 2
    assert np.max(np.abs(np.array(impacts) - exact)) < 1e-6
    sim2 = Simulation(model="bouncing_ball", method=method, rtol=1e-8, atol=1e-10)
    sim2.deserialize_state(blob)
    for k in range(10, 20):
        sim2.do_step(k * 0.1, 0.1)
    assert np.array_equal(sim2.y, sim.y)


@pytest.mark.parametrize("method", ["dopri5", "rk4"])
def test_failed_fixed_step_leaves_state_unchanged(method):
    from cosim.errors import ConvergenceError
    model = load_model("andrews")
    it = make_integrator(model, method, h=5e-3)   # far beyond the stability limit
    it.initialize()
    before = it.state()
    # the fixed step's error estimate refuses it (cosim.fixed_step) before its projection
    # fails ("explicit step failed … projection", as this test read before the rule)
    with pytest.raises(ConvergenceError, match=f"{method}: the fixed step h=0.005 resolves nothing at t="):
        for _ in range(20):
            it.step(1.0)
            before = it.state()   # (if a step survives, compare with the last good state)
    after = it.state()
    assert after["t"] == before["t"] and np.array_equal(after["y"], before["y"])
    assert after["stats"] == before["stats"]


@pytest.mark.parametrize("method,per_step", [("rk4", 4), ("dopri5", 6)])
def test_fixed_step_cost_is_constant_per_step(method, per_step):
    """Real-time use: a fixed number of right-hand sides (and LUs) per step; the
    projection reuses the last factor and needs no refactorisation here."""
    model = load_model("andrews")
    it = make_integrator(model, method, h=1e-5)
    it.initialize()
    it.advance(1e-3)
    n = it.stats["steps"]
    assert n == 100
    assert it.stats["residual_evaluations"] == per_step * n + 1   # +1: f at the start
    assert it.stats["lu_factorizations"] == it.stats["residual_evaluations"]
    assert it.stats["newton_iterations"] == 0


@pytest.mark.parametrize("backend", ["python", "numba"], indirect=True)
def test_rk4_new_input_every_step_costs_four_evaluations_and_the_same_bits(backend):
    """A new held input for fixed-step rk4 costs no evaluation with the old input:
    the end-of-step f is left pending and evaluated only when something needs it
    (the next step, q'', λ, dense output, the state).  Reading those after every
    step (which evaluates it at once) changes no bit of the run."""
    import cosim

    def run(read_every_step):
        sim = cosim.Simulation(model="two_link", method="rk4", h=1e-3, backend=backend)
        seen, t = [], 0.0
        for k in range(60):
            sim.set_inputs([0.5 * np.sin(0.1 * k), -0.2 + 0.01 * k])
            t = sim.do_step(t, 1e-3)
            if read_every_step:
                integ = sim.integrator
                seen.append((integ.qdd, integ.lam, integ.dense_output(t - 4e-4), integ.f_cur))
        return sim, seen

    lazy, _ = run(False)
    eager, seen = run(True)
    evaluations = lazy.integrator.stats["residual_evaluations"]
    assert evaluations == 1 + 4 * 60    # f at the start, then 4 per step (was 5 with a new input)
    # reading after every step evaluates each end at once (the cost before: 5 per step)
    assert eager.integrator.stats["residual_evaluations"] == 1 + 5 * 60
    a, b = lazy.integrator, eager.integrator
    for name in ("y", "qdd", "lam", "f_cur"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(a.dense_output(0.0596), b.dense_output(0.0596))
    state = lazy.get_state()   # the pending end evaluated: the state is the eager one
    assert state["integrator"]["method_state"]["f_cur"] is not None
    # a restart from it continues bit for bit
    again = cosim.Simulation(model="two_link", method="rk4", h=1e-3, backend=backend)
    again.set_state(state)
    for sim in (lazy, again):
        t = sim.time
        for k in range(5):
            sim.set_inputs([0.1 * k, 0.2])
            t = sim.do_step(t, 1e-3)
    assert np.array_equal(lazy.integrator.y, again.integrator.y)
    assert np.array_equal(lazy.integrator.qdd, again.integrator.qdd)
