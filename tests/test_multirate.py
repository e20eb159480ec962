"""Multirate: exact gcd base step, sample instants hit exactly, defined execution order,
discrete blocks (PID, state space, state feedback, sample-hold, user function)."""
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import cosim
from cosim.blocks import PID, DiscreteStateSpace, SampleHold, StateFeedback, StopSimulation, UserBlock
from cosim.errors import InvalidInputError, ScenarioError
from cosim.multirate import SampleClock, base_step, exact_time


def test_gcd_of_decimal_sample_times_is_exact():
    assert base_step([0.001, 0.0025]) == Fraction(1, 2000)
    assert float(base_step([0.001, 0.0025])) == 0.0005
    assert base_step([0.1, 0.3]) == Fraction(1, 10)
    assert float(base_step([0.1, 0.3])) == 0.1  # no 0.09999999999999998 artefact
    assert base_step(["0.001", Decimal("0.0025"), Fraction(1, 400)]) == Fraction(1, 2000)
    assert base_step([0.02, 0.03, 0.05]) == Fraction(1, 100)
    assert base_step([1e-3], offsets=[0.0, 2e-4]) == Fraction(1, 5000)  # offsets on the grid too
    assert exact_time(0.1) == Fraction(1, 10)  # the decimal the user wrote, not the binary float


@pytest.mark.parametrize("bad", [0, 0.0, -0.001, float("nan"), float("inf"), "abc", True, None,
                                 Decimal("NaN"), "-1e-3"])
def test_bad_sample_times_are_rejected_naming_the_value(bad):
    with pytest.raises(InvalidInputError, match="sample time"):
        base_step([0.001, bad])
    with pytest.raises(InvalidInputError):
        PID("pd", bad, kp=1.0)


def test_sample_clock_instants_are_exact_multiples():
    clock = SampleClock(0.0025, offset=0.0005, start=0.001)
    times = []
    for _ in range(5):
        times.append(clock.next_time)
        clock.advance()
    assert times == [float(Fraction(1, 2000) + k * Fraction(1, 400)) for k in range(1, 6)]


def recorder(log):
    def f(t, inputs, state, params):
        log.append((t, params["tag"], dict(inputs)))
        state["n"] = state.get("n", 0) + 1
        return {"y": inputs["u"] + params["add"]}
    return f


def test_execution_order_at_coincident_instants_is_the_listed_order():
    """At t = 0.005 both blocks fire: the plant is sampled first, then 'a' (listed
    first), then 'b' which sees a's output computed at this instant."""
    log = []
    blocks = [UserBlock("a", 0.001, recorder(log), params={"tag": "a", "add": 1.0}),
              UserBlock("b", 0.0025, recorder(log), params={"tag": "b", "add": 0.0})]
    sim = cosim.Simulation(model="lti", method="state-transition", blocks=blocks,
                           connections=["position -> a.u", "a.y -> b.u", "b.y -> force"])
    assert sim.base_step == 0.0005
    assert sim.input_names == ()
    assert sim.output_names == ("position", "velocity", "a.y", "b.y")
    for _ in range(6):
        sim.do_step(sim.time, 0.001)
    fired = [(t, tag) for t, tag, _ in log]
    assert fired[:4] == [(0.0, "a"), (0.0, "b"), (0.001, "a"), (0.002, "a")]
    assert (0.0025, "b") in fired
    at_5ms = [(tag, inp) for t, tag, inp in log if t == 0.005]
    assert [tag for tag, _ in at_5ms] == ["a", "b"]
    assert at_5ms[1][1]["u"] == at_5ms[0][1]["u"] + 1.0  # b sees a's new output
    # every instant is an exact multiple of the block's sample time
    for t, tag, _ in log:
        T = Fraction(1, 1000) if tag == "a" else Fraction(1, 400)
        assert (exact_time(t, positive=False) / T).denominator == 1


def test_integrator_never_steps_across_a_sample_instant_and_lands_on_each():
    """Communication step 0.7 ms, blocks at 1 ms and 2.5 ms (offset 0.5 ms)."""
    pd = PID("pd", 0.001, kp=2.0, kd=0.1)
    sup = UserBlock("sup", 0.0025, lambda t, i, s, p: {"reference": 0.5 if t >= 0.004 else 0.0},
                    inputs=(), outputs=("reference",), offset=0.0005)
    sim = cosim.Simulation(model="lti", method="state-transition", blocks=[pd, sup],
                           connections=["position -> pd.measurement", "sup.reference -> pd.reference",
                                        "pd.u -> force"])
    steps = []
    original = sim.integrator._step

    def spy(t_limit):
        t0 = sim.integrator.t
        original(t_limit)
        steps.append((t0, sim.integrator.t))

    sim.integrator._step = spy
    while sim.time < 0.02 - 1e-12:
        sim.do_step(sim.time, 0.0007)
    instants = [float(Fraction(k, 1000)) for k in range(1, 20)] + [float(Fraction(1, 2000) + k * Fraction(1, 400))
                                                     for k in range(8)]
    ends = {b for _, b in steps}
    for ts in instants:
        # an instant within rounding (1e-7 base steps) of a communication point coincides with it
        assert not any(a + 1e-12 < ts < b - 1e-12 for a, b in steps), ts
        assert ts in ends or any(abs(ts - b) < 1e-12 for b in ends), ts


def test_sample_hold_reads_the_plant_at_its_instants():
    hold = SampleHold("hold", 0.003)
    sim = cosim.Simulation(model="lti", method="state-transition", blocks=[hold],
                           connections=["position -> hold.u"])
    for _ in range(10):
        sim.do_step(sim.time, 0.001)
    # instants executed so far: 0, 0.003, 0.006, 0.009 (0.012 > t = 0.010): value = position(0.009)
    ref2 = cosim.Simulation(model="lti", method="state-transition")
    ref2.do_step(0.0, 0.009)
    # nine exact 1 ms steps against one exact 9 ms step: equal up to rounding (measured
    # 2.2e-16 apart); position(0.008) is 3.4e-5 away
    assert abs(sim.get_output_dict()["hold.y"] - ref2.get_outputs()[0]) <= 1e-14


def test_pid_difference_equations_by_hand():
    pid = PID("c", 0.01, kp=2.0, ki=5.0, kd=0.1, tf=0.02, u_max=1.5)
    out, e_prev, integral, deriv = [], None, 0.0, 0.0
    for k, (r, y) in enumerate([(1.0, 0.0), (1.0, 0.2), (1.0, 0.5), (0.0, 0.5)]):
        out.append(pid.update(k * 0.01, np.array([r, y]))[0])
    # hand computation
    T, exp = 0.01, []
    for r, y in [(1.0, 0.0), (1.0, 0.2), (1.0, 0.5), (0.0, 0.5)]:
        e = r - y
        de = 0.0 if e_prev is None else e - e_prev
        deriv = (0.02 * deriv + 0.1 * de) / (0.02 + T)
        new_int = integral + 5.0 * T * e
        raw = 2.0 * e + new_int + deriv
        u = min(raw, 1.5)
        if u != raw and (raw - u) * e > 0:
            new_int = integral
            u = min(2.0 * e + new_int + deriv, 1.5)
        integral, e_prev = new_int, e
        exp.append(u)
    assert out == pytest.approx(exp, rel=1e-15, abs=1e-15)
    assert out[0] == 1.5  # saturated, integral frozen


def test_discrete_state_space_and_state_feedback_blocks():
    A, B, C, D = [[0.5, 0.1], [0.0, 0.9]], [[0.0], [1.0]], [[1.0, 0.0]], [[0.25]]
    blk = DiscreteStateSpace("f", 0.1, A, B, C, D, x0=[1.0, 0.0])
    x, ys = np.array([1.0, 0.0]), []
    for k, u in enumerate([1.0, 0.0, -2.0, 0.5]):
        ys.append(blk.update(k * 0.1, np.array([u]))[0])
        exp = (np.array(C) @ x + np.array(D) @ [u])[0]
        assert ys[-1] == exp
        x = np.array(A) @ x + np.array(B) @ [u]
    sf = StateFeedback("k", 0.1, K=[[2.0, 3.0]], reference_gain=[[4.0]])
    assert sf.input_names == ("x0", "x1", "reference") and sf.output_names == ("y",)
    assert sf.update(0.0, np.array([1.0, -1.0, 0.5]))[0] == -(2.0 - 3.0) + 2.0
    with pytest.raises(InvalidInputError, match="shape"):
        DiscreteStateSpace("bad", 0.1, A, [[1.0, 2.0, 3.0]], C, None)


def test_block_can_stop_the_simulation_and_the_state_then_freezes():
    def watchdog(t, inputs, state, params):
        if inputs["u"] < 0.5:
            raise StopSimulation("position below 0.5")
        return {}
    sim = cosim.Simulation(model="lti", method="state-transition",
                           blocks=[UserBlock("watch", 0.01, watchdog, outputs=())],
                           connections=["position -> watch.u"])
    while sim.time < 1.0 - 1e-9:
        sim.do_step(sim.time, 0.01)
    assert sim.stopped and sim.time == pytest.approx(1.0)
    log = sim.event_log
    assert log[-1]["kind"] == "stop" and log[-2]["name"] == "watch"
    assert sim.stop_time == log[-1]["time"]
    y_stop = sim.y
    sim.do_step(sim.time, 0.1)
    assert np.array_equal(sim.y, y_stop)
    # the mass-spring position (x0 = 1) first drops below 0.5 near t = 0.53 s
    assert 0.4 < sim.stop_time < 0.7


def test_wiring_errors_name_the_signal():
    with pytest.raises(InvalidInputError, match="'nope.u'"):
        cosim.Simulation(model="lti", method="state-transition",
                         blocks=[SampleHold("h", 0.01)], connections=["position -> nope.u"])
    with pytest.raises(InvalidInputError, match="driven twice"):
        cosim.Simulation(model="lti", method="state-transition",
                         blocks=[SampleHold("h", 0.01), SampleHold("g", 0.01)],
                         connections=["h.y -> force", "g.y -> force"])
    with pytest.raises(InvalidInputError, match="unique"):
        cosim.Simulation(model="lti", method="state-transition",
                         blocks=[SampleHold("h", 0.01), SampleHold("h", 0.02)])
    with pytest.raises(ScenarioError, match="unknown block type"):
        cosim.Simulation(model="lti", method="state-transition", blocks=[{"type": "pidd", "name": "x"}])


def test_unconnected_block_inputs_are_external_inputs():
    sim = cosim.Simulation(model="lti", method="state-transition",
                           blocks=[PID("pd", 0.001, kp=10.0, kd=5.0)],
                           connections=["position -> pd.measurement", "pd.u -> force"])
    assert sim.input_names == ("pd.reference",)
    sim.set_inputs({"pd.reference": 0.2})
    for _ in range(4000):
        sim.do_step(sim.time, 0.001)
    # P-control of k=4 spring: steady state x = kp r / (k + kp) = 10*0.2/14
    assert sim.get_output_dict()["position"] == pytest.approx(2.0 / 14.0, abs=1e-3)
