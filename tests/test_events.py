"""State events (seed 001 §3.7): Illinois location, bouncing-ball impact times against
the analytic solution, no step across an event, terminal stop, chattering."""
import math

import numpy as np
import pytest

import cosim
from cosim.errors import ChatteringError
from cosim.events import ChatterMonitor, crossed, crossings, locate
from cosim.integrators import available_methods, method_class
from cosim.models.bouncing_ball import BouncingBall

MULTIBODY_METHODS = [m for m in ("generalized-alpha", "bdf", "spark", "dopri5", "rk4")
                     if m in available_methods() and "multibody" in method_class(m).model_kinds]


def test_crossing_directions_and_zero_start():
    assert crossed(1.0, -1.0, -1) and crossed(1.0, -1.0, 0) and not crossed(1.0, -1.0, +1)
    assert crossed(-1.0, 2.0, +1) and not crossed(-1.0, 2.0, -1)
    assert crossed(1.0, 0.0, -1)  # landing exactly on zero counts
    assert not crossed(0.0, -1.0, -1)  # a start at zero is the event just handled
    assert crossings(np.array([1.0, -1.0, 1.0]), np.array([-1.0, 1.0, 2.0]), [0, -1, 0]) == [0]


@pytest.mark.parametrize("fun, a, b, root", [
    (lambda t: math.cos(t) - 0.5, 0.0, 2.0, math.acos(0.5)),
    (lambda t: t ** 3 - 2.0, 0.0, 3.0, 2.0 ** (1 / 3)),
    (lambda t: math.exp(t) - 1e4, 0.0, 20.0, math.log(1e4)),     # strongly one-sided: Illinois
    (lambda t: math.atan(1e6 * (t - 0.3)), 0.0, 1.0, 0.3),      # near step: bisection safeguard
    (lambda t: 1.0 if t < 0.123456 else -1.0, 0.0, 1.0, 0.123456),  # discontinuous switch
])
def test_locate_brackets_the_zero_from_the_right_within_the_tolerance(fun, a, b, root):
    tol = 1e-10
    t, z, iters = locate(fun, a, fun(a), b, fun(b), tol)
    assert root - 1e-15 <= t <= root + tol + 4e-16 * max(1, root)
    assert iters < 80


def test_locate_is_superlinear_on_a_smooth_function():
    t, _, iters = locate(lambda t: math.cos(t) - 0.5, 0.0, 0.5, 2.0, math.cos(2.0) - 0.5, 1e-12)
    assert abs(t - math.acos(0.5)) <= 1e-12
    assert iters <= 10


def test_chatter_monitor_counts_close_events_only():
    mon = ChatterMonitor(max_events=3, window=1e-6)
    assert not any(mon.add(t) for t in (0.0, 0.1, 0.2, 0.3))
    assert [mon.add(1.0 + k * 1e-7) for k in range(4)] == [False, False, False, True]


class RecordingBall(BouncingBall):
    """Bouncing ball that records (t, y⁻) of every jump for per-impact checks."""

    def setup(self):
        super().setup()
        self.jumps = []

    def apply_event(self, index, t, y, u):
        self.jumps.append((t, np.array(y)))
        return super().apply_event(index, t, y, u)


def run_ball(method, tol=1e-10, t_end=5.0, dt=0.01, backend="auto", **params):
    model = RecordingBall(**params)
    sim = cosim.Simulation(model=model, method=method, rtol=1e-8, atol=1e-10, event_tolerance=tol,
                           backend=backend)
    steps = []

    def observe(integ):  # every accepted step the result keeps (none rolled back onto an event)
        steps.append((integ.t_prev, integ.t))

    while sim.time < t_end - 1e-9:
        sim.do_step(sim.time, dt, observer=observe)
    return sim, model, steps


@pytest.mark.parametrize("backend", ["python", "auto"])
@pytest.mark.parametrize("method", MULTIBODY_METHODS)
def test_bouncing_ball_impacts_match_the_analytic_solution(method, backend):
    """On the Python reference and on the compiled step loop ("auto": the ball ships
    kernels; its events are located by Simulation on the dense output either way)."""
    tol = 1e-10
    # generalized-α integrates free fall (constant acceleration) exactly: only the location
    # error remains; other methods add their integration error (rtol = 1e-8)
    slack = 1e-11 if method == "generalized-alpha" else 1e-7
    sim, model, steps = run_ball(method, tol, backend=backend)
    exact = model.impact_times()
    log = [e for e in sim.event_log if e["kind"] == "state"]
    assert [e["name"] for e in log] == ["impact"] * (len(exact) - 1) + ["stop"]
    assert log[-1]["terminal"] and sim.event_log[-1]["kind"] == "stop"
    # first impact: analytic time within the event tolerance (plus the integration error)
    assert -slack <= log[0]["time"] - exact[0][0] <= tol + slack
    # each later impact: the analytic flight 2 e |v⁻| / g from the previous located jump
    g, e = model.params["g"], model.params["e"]
    for (t_prev, y_prev), event in zip(model.jumps[:-1], log[1:]):
        predicted = t_prev + 2.0 * e * abs(y_prev[1]) / g
        assert abs(event["time"] - predicted) <= tol + slack, event
    # and all of them within the accumulated tolerance of the closed-form sequence
    times = np.array([ev["time"] for ev in log])
    assert np.max(np.abs(times - [t for t, _ in exact])) < 2e-8 + 10 * slack
    # no accepted integrator step crosses an event: every event time is a step end
    ends = {b for _, b in steps}
    for ev in log:
        assert ev["time"] in ends
        assert not any(a < ev["time"] < b for a, b in steps)
    # the stop freezes the state; communication time still advances
    assert sim.stopped and sim.stop_time == log[-1]["time"] and sim.time == pytest.approx(5.0)
    assert np.array_equal(sim.y, np.zeros(2))
    assert sim.stats["events"] == len(log)


def test_event_tolerance_controls_the_location_accuracy():
    exact = BouncingBall().impact_times()[0][0]
    for tol in (1e-4, 1e-7, 1e-12):
        sim, _, _ = run_ball("generalized-alpha", tol=tol, t_end=0.5)
        t1 = sim.event_log[0]["time"]
        assert 0.0 <= t1 - exact <= tol + 1e-13, (tol, t1 - exact)


def test_events_inside_one_long_communication_step_are_all_logged():
    sim, model, _ = run_ball("generalized-alpha", t_end=5.0, dt=2.5)
    assert sim.stats["communication_steps"] == 2
    assert len([e for e in sim.event_log if e["kind"] == "state"]) == len(model.impact_times())


def test_rollback_and_serialization_across_events_are_bit_identical():
    sim = cosim.Simulation(model="bouncing_ball", method="generalized-alpha")
    for _ in range(30):
        sim.do_step(sim.time, 0.02)
    snap, blob = sim.get_state(), sim.serialize_state()

    def go(s):
        for _ in range(100):
            s.do_step(s.time, 0.02)
        return s.y.tobytes(), s.event_log, s.stats

    first = go(sim)
    sim.set_state(snap)
    assert go(sim) == first
    other = cosim.Simulation(model="bouncing_ball", method="generalized-alpha")
    other.deserialize_state(blob)
    assert go(other) == first
    assert len(first[1]) >= 4  # impacts at 0.45, 1.17, 1.75, 2.21, 2.58 s


def test_chattering_is_detected_and_reported_not_hung():
    """v_stop = 0: the ball bounces infinitely often before t* = t1 (1 + 2e/(1 − e))
    (Zeno); the stepper raises ChatteringError (state unchanged) or stops."""
    params = {"v_stop": 0.0, "e": 0.5}
    sim = cosim.Simulation(model="bouncing_ball", method="generalized-alpha", params=params)
    while sim.time < 1.3 - 1e-9:
        sim.do_step(sim.time, 0.05)
    before = sim.serialize_state()
    with pytest.raises(ChatteringError, match="chattering: 51 events"):
        sim.do_step(sim.time, 0.1)
    assert sim.serialize_state() == before
    t_zeno = BouncingBall(e=0.5).impact_times()[0][0] * (1 + 2 * 0.5 / 0.5)
    stop = cosim.Simulation(model="bouncing_ball", method="generalized-alpha", params=params,
                            on_chattering="stop")
    while stop.time < 2.0 - 1e-9:
        stop.do_step(stop.time, 0.05)
    assert stop.stopped and stop.event_log[-2]["kind"] == "chattering"
    assert stop.stop_time == pytest.approx(t_zeno, abs=1e-6)


def test_state_events_and_sample_instants_together():
    """A sample-and-hold of the height at 7 ms runs while impacts are located: the
    held value at each instant is the height there, impacts are unchanged."""
    from cosim.blocks import SampleHold
    plain, _, _ = run_ball("generalized-alpha", t_end=2.0)
    sim = cosim.Simulation(model="bouncing_ball", method="generalized-alpha", rtol=1e-8, atol=1e-10,
                           blocks=[SampleHold("hold", 0.007)], connections=["height -> hold.u"])
    held = []
    while sim.time < 2.0 - 1e-9:
        sim.do_step(sim.time, 0.01)
        held.append((sim.time, sim.get_output_dict()["hold.y"]))
    impacts = [e["time"] for e in sim.event_log]
    assert impacts == pytest.approx([e["time"] for e in plain.event_log], abs=1e-9)
    g, h0 = 9.81, 1.0
    t1 = math.sqrt(2 * h0 / g)
    for t, value in held:
        k = math.floor((t - 1e-9) / 0.007)  # last instant executed before the end of this step
        ts = k * 0.007
        if ts < t1:  # first fall: h = h0 - g t²/2
            assert value == pytest.approx(h0 - 0.5 * g * ts * ts, abs=1e-9)


class Tank(cosim.models.FirstOrderModel):
    """Draining tank x' = -k x (first order) with a refill jump at x = 0.25 and a terminal
    event at t = 1.9 (switching function of time): analytic event times ln(4)/k, 2 ln(4)/k."""

    name = "tank"
    states = ("level",)
    parameters = (cosim.models.Parameter("k", 2.0),)
    outputs = (cosim.models.Signal("level"),)
    events = (cosim.models.Event("refill", direction=-1), cosim.models.Event("end", direction=+1, terminal=True))

    def initial_state(self):
        return np.array([1.0])

    def rhs(self, t, x, u):
        return -self.params["k"] * x

    def output_values(self, t, y, u):
        return y.copy()

    def event_functions(self, t, y, u):
        return np.array([y[0] - 0.25, t - 1.9])

    def apply_event(self, index, t, y, u):
        return np.array([1.0]) if index == 0 else y


FIRST_ORDER_METHODS = [m for m in available_methods()
                       if "first_order" in method_class(m).model_kinds and m != "state-transition"]


@pytest.mark.parametrize("method", FIRST_ORDER_METHODS)
def test_events_of_a_first_order_model(method):
    sim = cosim.Simulation(model=Tank(), method=method, rtol=1e-10, atol=1e-12)
    while sim.time < 3.0 - 1e-9:
        sim.do_step(sim.time, 0.1)
    log = sim.event_log
    assert [e["name"] for e in log] == ["refill", "refill", "end", "stop"]
    assert log[0]["time"] == pytest.approx(math.log(4) / 2, abs=1e-8)
    assert log[1]["time"] == pytest.approx(math.log(4), abs=1e-8)
    assert log[2]["time"] == pytest.approx(1.9, abs=1e-9) and sim.stopped
    assert sim.y[0] == pytest.approx(math.exp(-2 * (1.9 - math.log(4))), abs=1e-7)
