"""Joint position limits as stops that hold (URDF <limit lower upper>, position_limits=True):
a joint driven into its limit rests there while the load pushes it in and leaves when the
load pulls it away; the stop's mode is state (snapshots and blobs carry it)."""
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pinocchio")

from cosim import Simulation  # noqa: E402
from cosim.errors import InvalidInputError, UnknownModelError  # noqa: E402
from cosim.models.urdf import (example_robot_path, load_urdf, stop_values,  # noqa: E402
                               urdf_model_class)

TWO_LINK = Path(__file__).resolve().parents[1] / "cosim" / "data" / "urdf" / "two_link.urdf"

# one revolute joint about the vertical (no gravity torque): I = 0.1 + 2 * 0.5² = 0.6 kg m²;
# a prismatic joint on another branch of the base (decoupled) keeps the system moving
ARM = """<robot name="stop_arm"><link name="base"/>
<joint name="j" type="revolute"><parent link="base"/><child link="l"/><axis xyz="0 0 1"/>
<limit lower="-0.5" upper="0.5" effort="0" velocity="10"/></joint>
<link name="l"><inertial><origin xyz="0.5 0 0"/><mass value="2"/>
<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
<joint name="s" type="prismatic"><parent link="base"/><child link="c"/><axis xyz="1 0 0"/>
<limit lower="-100" upper="100" effort="0" velocity="10"/></joint>
<link name="c"><inertial><mass value="1"/>
<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link></robot>"""
INERTIA = 0.6
UPPER = 0.5
METHODS = ["generalized-alpha", "generalized-alpha-i2", "bdf", "bdf-i2", "bdf-i1", "dopri5",
           "rk4", "rkc-penalty", "local-index1", "spark", "block-lstable"]
FIXED_STEP = ("rk4", "spark", "block-lstable")


def _panda_path():
    try:
        return example_robot_path()
    except UnknownModelError as exc:
        pytest.skip(str(exc))


def _arm_sim(method, restitution, **opts):
    cls = urdf_model_class(ARM, position_limits=True)
    params = {"restitution": restitution, "s.v0": 0.1}
    if method in FIXED_STEP:
        opts.setdefault("h", 1e-3)
    return Simulation(cls, method=method, params=params, rtol=1e-9, atol=1e-9,
                      backend="python", **opts)


@pytest.mark.parametrize("method", METHODS)
def test_constant_torque_holds_the_joint_on_its_stop_and_reversal_releases_it(method):
    """1 N·m from rest at q = 0 (restitution 0): the joint reaches its upper limit at
    t₁ = √(2·0.5·I) (I = 0.6 kg m²) — located within 1e-7 s (block-lstable: 1e-4 s, its
    dense output; measured 7.8e-5) — stays exactly on it with zero velocity while the
    torque pushes (no chattering, one event), and the reversed torque at t = 1 s releases it
    at that instant: q(t) = 0.5 − (t − 1)²/(2 I) afterwards, within 1e-7 (fixed-step and
    BDF methods: the method's error, measured ≤ 4.5e-8)."""
    sim = _arm_sim(method, 0.0)
    sim.set_inputs({"j": 1.0})
    for _ in range(10):
        sim.do_step(sim.time, 0.1)
        if sim.time > 0.8:  # held: exactly on the limit, at rest
            assert sim.y[0] == UPPER and sim.y[2] == 0.0
    arrival = sim.event_log[0]
    assert [e["name"] for e in sim.event_log] == ["j_upper_limit"]
    assert abs(arrival["time"] - math.sqrt(2.0 * UPPER * INERTIA)) <= (
        1e-4 if method == "block-lstable" else 1e-7)
    assert sim.model.params["j.stop"] == 1.0
    sim.set_inputs({"j": -1.0})  # an input change at a communication point: the stop lets go
    assert sim.event_log[-1]["name"] == "j_stop_release" and sim.event_log[-1]["time"] == sim.time
    assert sim.model.params["j.stop"] == 0.0
    for _ in range(3):
        sim.do_step(sim.time, 0.1)
    assert abs(sim.y[0] - (UPPER - 0.3 ** 2 / (2.0 * INERTIA))) <= 1e-7
    assert abs(sim.y[2] + 0.3 / INERTIA) <= 1e-6
    assert abs(sim.y[1] - 0.13) <= 1e-7  # the other branch, s = 0.1 t, unaffected


@pytest.mark.parametrize("method", ["dopri5", "generalized-alpha"])
def test_bounces_by_the_restitution_then_hold(method):
    """Restitution 0.5 under a constant 1 N·m: impacts at t₁ = √(2·0.5·I) and then every
    2 e^k v₁ / a (v₁ = a t₁, a = 1/I), each rebound e times the speed before; the stop holds
    at the first impact whose rebound e|v| is at most stop_hold_velocity (1e-3 rad/s):
    the event times of the analytic sequence within 1e-8 s."""
    sim = _arm_sim(method, 0.5)
    sim.set_inputs({"j": 1.0})
    for _ in range(30):
        sim.do_step(sim.time, 0.1)
    a = 1.0 / INERTIA
    t, v, expected = math.sqrt(2.0 * UPPER / a), math.sqrt(2.0 * UPPER * a), []
    while True:
        expected.append(t)
        if 0.5 * v <= 1e-3:
            break
        v *= 0.5
        t += 2.0 * v / a
    times = [e["time"] for e in sim.event_log]
    assert [e["name"] for e in sim.event_log] == ["j_upper_limit"] * len(expected)
    assert np.abs(np.array(times) - expected).max() <= 1e-8
    assert sim.y[0] == UPPER and sim.y[2] == 0.0 and sim.model.params["j.stop"] == 1.0


def _two_link_with_stop():
    text = TWO_LINK.read_text()
    i = text.index('<joint name="joint2" type="continuous">')
    tail = text[i:].replace('type="continuous">', 'type="revolute">', 1).replace(
        '<axis xyz="0 0 1"/>',
        '<axis xyz="0 0 1"/><limit lower="-0.5" upper="0.5" effort="0" velocity="10"/>', 1)
    return urdf_model_class(text[:i] + tail, position_limits=True)


def test_release_inside_a_step_matches_the_locked_system_reference():
    """Vertical two-link, link 1 horizontal, joint 2 starting on its upper limit at rest:
    gravity pushes link 2 into the stop (held from t = 0), the links swing down as one
    body, and the stop's reaction changes sign inside a step.  Reference: pinocchio's M and
    bias for the locked system (q₂ = 0.5, q₁'' = Q₁/M₁₁) integrated by scipy's DOP853 at
    1e-12 with the reaction r = M₂₁ q₁'' − Q₂ as the event, then the free two-link system:
    the release time within 1e-8 s (measured 1e-12) and the state at t = 1 s within 1e-7."""
    import pinocchio as pin
    from scipy.integrate import solve_ivp

    cls = _two_link_with_stop()
    sim = Simulation(cls, method="dopri5", params={"joint2.q0": 0.5, "restitution": 0.0},
                     rtol=1e-11, atol=1e-11, backend="python")
    for _ in range(100):
        sim.do_step(sim.time, 0.01)
    names = [e["name"] for e in sim.event_log]
    assert names == ["joint2_upper_limit", "joint2_stop_release"]
    pm = pin.buildModelFromXML(cls.robot.normalized)
    pd = pm.createData()

    def mq(q, v):
        M = pin.crba(pm, pd, q)
        return np.triu(M) + np.triu(M, 1).T, -pin.rnea(pm, pd, q, v, np.zeros(2))

    def locked(t, x):
        q, v = np.array([x[0], 0.5]), np.array([x[1], 0.0])
        M, Q = mq(q, v)
        return [x[1], Q[0] / M[0, 0]]

    def reaction(t, x):
        q, v = np.array([x[0], 0.5]), np.array([x[1], 0.0])
        M, Q = mq(q, v)
        return M[1, 0] * Q[0] / M[0, 0] - Q[1]

    reaction.terminal = True
    assert reaction(0.0, [0.0, 0.0]) < 0.0  # the upper stop pushes the joint down
    ref = solve_ivp(locked, (0.0, 1.0), [0.0, 0.0], method="DOP853", rtol=1e-12, atol=1e-12,
                    events=reaction)
    t_r = ref.t_events[0][0]
    assert abs(sim.event_log[1]["time"] - t_r) <= 1e-8
    q1, v1 = ref.y_events[0][0]

    def free(t, x):
        M, Q = mq(x[:2], x[2:])
        return np.concatenate([x[2:], np.linalg.solve(M, Q)])

    end = solve_ivp(free, (t_r, 1.0), [q1, 0.5, v1, 0.0], method="DOP853", rtol=1e-12,
                    atol=1e-12)
    assert np.abs(sim.y - end.y[:, -1]).max() <= 1e-7


def test_held_kernels_match_the_python_methods():
    """The compiled path's kernels (run as plain Python) with joint 4 and the fingers held
    equal the pinocchio methods (M with unit rows/columns, zero rows of Q, Q_q, Q_v,
    (M a)_q) to 1e-12 relative."""
    from cosim.models import rigid_body as rb

    cls = load_urdf(_panda_path(), position_limits=True)
    model = cls(**{"panda_joint4.stop": 1.0, "panda_finger_joint1.stop": -1.0})
    assert list(model._held) == [3, 7, 8]
    p, n = model._p, 9
    rng = np.random.default_rng(7)
    q, v, a, u = (rng.uniform(-1, 1, n) for _ in range(4))

    def close(x, ref):
        assert np.abs(x - ref).max() <= 1e-12 * np.abs(ref).max()

    M, Q, Qq, Qv, J = (np.zeros((n, n)), np.zeros(n), np.zeros((n, n)), np.zeros((n, n)),
                       np.zeros((n, n)))
    rb.tree_mass(q, 0.0, p, M)
    rb.tree_forces(q, v, 0.0, u, p, Q)
    rb.tree_force_jacobians(q, v, 0.0, u, p, Qq, Qv)
    rb.tree_mass_jacobian_term(q, a, 0.0, p, J)
    close(M, model.mass(q, 0.0))
    assert M[3, 3] == 1.0 and not M[3, :3].any() and Q[3] == Q[7] == Q[8] == 0.0
    close(Q, model.forces(q, v, 0.0, u))
    Qq_ref, Qv_ref = model.force_jacobians(q, v, 0.0, u)
    close(Qq, Qq_ref)
    close(Qv, Qv_ref)
    close(J, model.mass_jacobian_term(q, a, 0.0))


@pytest.fixture(scope="module")
def panda_limits():
    return load_urdf(_panda_path(), position_limits=True)


def _panda_sim(cls, **opts):
    params = {"panda_joint4.q0": -0.3, "panda_joint6.q0": 1.5}
    return Simulation(cls, method="dopri5", params=params, rtol=1e-8, atol=1e-8,
                      backend="python", **opts)


def test_panda_joint_driven_into_its_limit_stays_and_leaves(panda_limits):
    """Panda under gravity, 20 N·m on joint 4 towards its upper limit (−0.0698 rad): it
    arrives, bounces (restitution 0.5), then rests exactly on the limit with zero velocity
    while the other joints move (no ChatteringError); −20 N·m releases it at that instant
    and it leaves the limit."""
    sim = _panda_sim(panda_limits)
    upper = sim.model._upper[3]
    sim.set_inputs({"panda_joint4": 20.0})
    for _ in range(50):
        sim.do_step(sim.time, 0.01)
    assert sim.model.params["panda_joint4.stop"] == 1.0
    assert sim.y[3] == upper and sim.y[9 + 3] == 0.0
    assert np.abs(sim.y[9:]).max() > 0.1  # the arm moves on
    arrivals = [e for e in sim.event_log if e["name"] == "panda_joint4_upper_limit"]
    assert len(arrivals) >= 2 and sim.event_log[-1]["time"] < sim.time
    sim.set_inputs({"panda_joint4": -20.0})
    assert sim.event_log[-1]["name"] == "panda_joint4_stop_release"
    for _ in range(10):
        sim.do_step(sim.time, 0.01)
    assert sim.y[3] < upper - 1e-3 and sim.model.params["panda_joint4.stop"] == 0.0


def test_panda_at_rest_falls_onto_its_limits_and_rests_there(panda_limits):
    """The default Panda, no input, 1 s: the arm falls onto joint 2's upper limit (and the
    fingers onto theirs) and rests there, no ChatteringError; every joint within its
    limits."""
    sim = Simulation(panda_limits, method="dopri5", rtol=1e-6, atol=1e-8, backend="python")
    for _ in range(100):
        sim.do_step(sim.time, 0.01)
    assert sim.model.params["panda_joint2.stop"] == 1.0
    assert sim.y[1] == sim.model._upper[1] and sim.y[9 + 1] == 0.0
    q = sim.y[:9]
    assert np.all(q >= sim.model._lower) and np.all(q <= sim.model._upper)


def test_restart_across_the_stop_is_bit_identical(panda_limits):
    """A state blob written while joint 4 is held (and a snapshot before its arrival),
    restored into a fresh simulation / rolled back: the continuation through the hold and the
    release (an input reversal) is bit-identical, event log included."""
    def continuation(sim):
        ys = []
        for k in range(20):
            if k == 10:
                sim.set_inputs({"panda_joint4": -20.0})
            sim.do_step(sim.time, 0.01)
            ys.append(sim.y.copy())
        return np.array(ys), sim.event_log

    sim = _panda_sim(panda_limits)
    sim.set_inputs({"panda_joint4": 20.0})
    sim.do_step(0.0, 0.05)
    before = sim.get_state()  # before the arrival (t ≈ 0.1 s)
    assert sim.model.params["panda_joint4.stop"] == 0.0
    for _ in range(25):
        sim.do_step(sim.time, 0.01)
    assert sim.model.params["panda_joint4.stop"] == 1.0
    blob = sim.serialize_state()
    ys, log = continuation(sim)
    fresh = _panda_sim(panda_limits)
    fresh.deserialize_state(blob)
    assert fresh.model.params["panda_joint4.stop"] == 1.0
    ys2, log2 = continuation(fresh)
    assert np.array_equal(ys, ys2) and log == log2
    # rollback to before the arrival: the same run again
    sim.set_state(before)
    assert sim.model.params["panda_joint4.stop"] == 0.0
    for _ in range(25):
        sim.do_step(sim.time, 0.01)
    ys3, log3 = continuation(sim)
    assert np.array_equal(ys, ys3) and log == log3


def test_a_stop_starts_free_and_rejects_a_bad_mode():
    cls = urdf_model_class(ARM, position_limits=True)
    with pytest.raises(InvalidInputError, match=r"'j.stop' = 1.0: a stop starts free"):
        Simulation(cls, method="dopri5", params={"j.q0": 0.5, "j.stop": 1.0}, backend="python")
    with pytest.raises(InvalidInputError, match="j.stop"):
        cls(**{"j.stop": 0.5})


@pytest.mark.parametrize("method", ["dopri5", "generalized-alpha"])
def test_stops_on_the_compiled_backend_match_the_python_backend(method):
    """The vertical two-link with its joint-2 stop (held from t = 0, released inside a step)
    and a reversal of a joint-1 effort: the compiled kernels (held flags in p) and
    pinocchio give the same events, times within 1e-10 s, states within 1e-9."""
    pytest.importorskip("numba")
    cls = _two_link_with_stop()
    runs = []
    for backend in ("python", "numba"):
        sim = Simulation(cls, method=method, params={"joint2.q0": 0.5, "restitution": 0.0},
                         rtol=1e-10, atol=1e-10, backend=backend,
                         **({"h": 1e-4} if method == "generalized-alpha" else {}))
        assert sim.backend == backend
        ys = []
        for k in range(60):
            if k == 50:
                sim.set_inputs({"joint1": 5.0})
            sim.do_step(sim.time, 0.01)
            ys.append(sim.y.copy())
        runs.append((np.array(ys), sim.event_log))
    (y_py, ev_py), (y_nb, ev_nb) = runs
    assert [e["name"] for e in ev_py] == [e["name"] for e in ev_nb]
    assert "joint2_stop_release" in [e["name"] for e in ev_py]
    assert max(abs(a["time"] - b["time"]) for a, b in zip(ev_py, ev_nb)) <= 1e-10
    assert np.abs(y_py - y_nb).max() <= 1e-9


def test_a_tunable_parameter_that_pulls_the_joint_away_releases_the_stop():
    """Vertical two-link held on its joint-2 stop by gravity: reversing gravity (a tunable
    parameter) makes the reaction pull away, and the stop lets go at that instant."""
    cls = _two_link_with_stop()
    sim = Simulation(cls, method="dopri5", params={"joint2.q0": 0.5, "restitution": 0.0},
                     rtol=1e-10, atol=1e-10, backend="python")
    sim.do_step(0.0, 0.1)
    assert sim.model.params["joint2.stop"] == 1.0
    sim.set_parameter("gravity_z", 9.81)
    assert sim.event_log[-1]["name"] == "joint2_stop_release"
    assert sim.event_log[-1]["time"] == sim.time and sim.model.params["joint2.stop"] == 0.0
    sim.do_step(sim.time, 0.05)
    assert sim.y[1] < 0.5


# -- on by default, and the compiled fast path kept -------------------------------------------
def _panda_1khz(limits, method="rk4", **params):
    kw = {} if limits is None else {"position_limits": limits}
    cls = load_urdf(_panda_path(), **kw)
    return Simulation(cls, method=method, h=1e-3, params=params)


@pytest.mark.parametrize("method", ["rk4", "generalized-alpha"])
def test_stops_are_on_by_default_a_joint_driven_into_its_limit_stays_there(method):
    """load_urdf(path) without options: 20 N·m on joint 4 towards its upper limit, 1 kHz
    communication steps (the compiled path): after 0.5 s the stop holds the joint exactly
    on the limit at rest; with position_limits=False the same run passes the limit by
    more than 0.1 rad."""
    held = _panda_1khz(None, method, **{"panda_joint4.q0": -0.3, "panda_joint6.q0": 1.5})
    free = _panda_1khz(False, method, **{"panda_joint4.q0": -0.3, "panda_joint6.q0": 1.5})
    assert held.model.position_limits and not free.model.position_limits
    upper = held.model._upper[3]
    for sim in (held, free):
        sim.set_inputs({"panda_joint4": 20.0})
        for _ in range(500):
            sim.do_step(sim.time, 1e-3)
    assert held.model.params["panda_joint4.stop"] == 1.0
    assert held.y[3] == upper and held.y[9 + 3] == 0.0
    assert free.y[3] > upper + 0.1 and free.stats["events"] == 0


@pytest.mark.parametrize("method", ["rk4", "generalized-alpha", "bdf"])
def test_a_robot_away_from_its_limits_takes_the_compiled_path_with_the_same_result(method):
    """The Panda at rest (efforts = its gravity torques), then a PD loop about that pose
    with a new effort every 1 ms step: with its stops (default) no step goes to the event
    path, and the states equal those of position_limits=False bit for bit."""
    sims = [_panda_1khz(None, method), _panda_1khz(False, method)]
    m = sims[0].model
    q0, v0 = m.initial_state()
    u0 = -m._free_forces(q0, v0, np.zeros(m.n_inputs))
    calls = []
    sims[0]._run_until = lambda t_end: calls.append(t_end)  # the event path: must not run
    for sim in sims:
        sim.set_inputs(u0 + np.r_[np.full(7, 0.5), 0.0, 0.0])  # the arm pushed: it moves
        for k in range(300):
            if k >= 100:
                y = sim.y
                sim.set_inputs(u0 + 50.0 * (q0 - y[:9]) - 5.0 * y[9:])
            sim.do_step(sim.time, 1e-3)
    assert calls == [] and sims[0].stats["events"] == 0
    assert np.array_equal(sims[0].y, sims[1].y) and np.abs(sims[0].y[9:]).max() > 1e-3


@pytest.mark.parametrize("method", ["rk4", "generalized-alpha", "bdf"])
@pytest.mark.parametrize("new_inputs", [False, True])
def test_the_fast_path_and_the_event_path_find_the_same_events(method, new_inputs):
    """The Panda falling onto its limits (fingers pushed open, no other effort; or a new
    finger effort every step that pulls them off their stops and back), 0.4 s in 1 ms steps, once through do_step's fast path with
    the stops' check and once with that check off (every integrator step on the event
    path): the same events in the same order at times within 1e-9 s, the same final state
    within 1e-9."""
    runs = []
    for screened in (True, False):
        sim = _panda_1khz(None, method)
        if not screened:
            sim._screen = None
        for k in range(400):
            if k == 0 or new_inputs:
                f = 3.0 * math.cos(0.02 * k) if new_inputs else 2.0  # (pulls away, k 79..235)
                sim.set_inputs({"panda_finger_joint1": f, "panda_finger_joint2": f})
            sim.do_step(sim.time, 1e-3)
        runs.append(sim)
    a, b = ([(e["name"], e["time"]) for e in r.event_log] for r in runs)
    assert len(a) >= 3 and [n for n, _ in a] == [n for n, _ in b]
    assert new_inputs == any(n.endswith("_stop_release") for n, _ in a)
    assert max(abs(x[1] - y[1]) for x, y in zip(a, b)) <= 1e-9
    assert np.abs(runs[0].y - runs[1].y).max() <= 1e-9


@pytest.mark.parametrize("method", ["rk4", "generalized-alpha", "dopri5"])
def test_events_located_on_one_coordinate_equal_the_switching_functions_bit_for_bit(method):
    """Every joint at 0.1 N·m, 1.3 s in 1 ms steps (the fingers bounce onto their stops
    and stay held, arm joints arrive and bounce): the stepper locating a stop's arrival
    on its coordinate's dense output alone (``event_coordinate``) and the general way
    (every switching function evaluated on the whole dense output) give the same event
    log (times, iterations) and the same state after every step, bit for bit."""
    runs, located = [], []
    for one_coordinate in (True, False):
        sim = _panda_1khz(None, method)
        if not one_coordinate:
            sim.model.event_coordinate = lambda index: None
        else:   # (count the functions the stepper located on one coordinate)
            coordinate = sim.model.event_coordinate
            sim.model.event_coordinate = lambda index: located.append(coordinate(index)) or located[-1]
        sim.set_inputs(np.full(sim.model.n_inputs, 0.1))
        states = []
        for _ in range(1300):
            sim.do_step(sim.time, 1e-3)
            states.append(sim.y.tobytes())
        runs.append((sim.event_log, states, sim.model.params["panda_finger_joint1.stop"]))
    (log, states, finger), (log_ref, states_ref, _) = runs
    names = {e["name"] for e in log}
    assert len(log) >= 20 and "panda_finger_joint1_upper_limit" in names and finger == 1.0
    assert any(n.startswith("panda_joint") for n in names)
    assert any(c is not None for c in located)   # the one-coordinate path did run
    assert log == log_ref and states == states_ref


@pytest.mark.parametrize("method", ["rk4", "generalized-alpha"])
def test_a_failing_event_step_after_the_screen_leaves_the_simulation_as_before(method):
    """Every joint at 0.1 N·m, 1 ms steps: the fingers arrive at their stops at t ≈ 0.104 s
    in a step the fast path's check took and handed to the event path.  A jump map that
    raises there: do_step raises, the simulation is as before bit for bit (blob, time,
    event count), and the next do_step, with the jump map back, continues exactly as a
    run that never failed."""
    runs, k_event = [], None
    for fail in (False, True):
        sim = _panda_1khz(None, method)
        sim.set_inputs(np.full(sim.model.n_inputs, 0.1))
        k = 0
        while sim.stats["events"] == 0:
            if k == k_event:  # the step of the first arrival
                before = (sim.serialize_state(), sim.time, sim.stats["events"])
                sim.model.apply_events = _raise
                with pytest.raises(Exception, match="jump map fails"):
                    sim.do_step(sim.time, 1e-3)
                del sim.model.apply_events
                assert (sim.serialize_state(), sim.time, sim.stats["events"]) == before
            sim.do_step(sim.time, 1e-3)
            k += 1
        k_event = k - 1
        for _ in range(50):
            sim.do_step(sim.time, 1e-3)
        runs.append(sim)
    assert 0.1 < runs[0].event_log[0]["time"] < 0.11 and runs[0].event_log == runs[1].event_log
    assert np.array_equal(runs[0].y, runs[1].y)


def _raise(*args):
    raise RuntimeError("jump map fails")


def _finger_sim(cls, method, restitution, **params):
    """The Panda without gravity, the arm at rest, its finger damping off: 3 N and 1 N on
    the fingers (the mimic constraint shares them) drive the pair from 0.02 m into their
    upper limits (0.04 m) at the constant acceleration a = 4 N / (finger masses); the
    jump map's calls recorded (:func:`_record_jumps`)."""
    params = {"restitution": restitution, "gravity_z": 0.0, "panda_finger_joint1.damping": 0.0,
              "panda_finger_joint2.damping": 0.0, **params}
    tol = 1e-11 if method == "bdf" else 1e-9  # (bdf at 1e-9: event times off by 5.7e-8 s)
    kw = {"h": 1e-4} if method == "rk4" else {"rtol": tol, "atol": tol}
    sim = Simulation(cls, method=method, params=params, backend="python", **kw)
    sim.set_inputs({"panda_finger_joint1": 3.0, "panda_finger_joint2": 1.0})
    return sim, _record_jumps(sim)


def _record_jumps(sim):
    """The list that every later call of the simulation's jump map appends to:
    (indices, t, y before, y after)."""
    jumps, apply = [], sim.model.apply_events

    def recorded(indices, t, y, u):
        y_after = apply(indices, t, y, u)
        jumps.append((list(indices), t, np.array(y), np.array(y_after)))
        return y_after

    sim.model.apply_events = recorded
    return jumps


FINGER_METHODS = ["rk4", "dopri5", "bdf", "generalized-alpha"]


@pytest.mark.parametrize("method", FINGER_METHODS)
def test_the_two_fingers_arriving_together_take_one_impact_and_bounce(panda_limits, method):
    """The fingers (one mimic group, two stops) reach their upper limits at one instant:
    one impact, finger rebound = −0.5 × approach velocity (restitution 0.5; to 1e-12
    relative), each stop logged once at that instant, and they bounce: impacts at
    t_{k+1} = t_k + 2 e^k t_1 (the flight of a rebound e^k v_1 under the constant
    acceleration a = v_1 / t_1) — the first four within 1e-8 s (measured ≤ 3.3e-10) — and
    q(t) = 0.04 − e v_1 (t − t_1) + a (t − t_1)² / 2 between the first two, within 1e-9 m
    (measured ≤ 6.3e-11),
    until the rebound e|v| is at most stop_hold_velocity: then the stop holds.  The mimic
    constraint q_2 = q_1 holds to 1e-9 throughout; no ChatteringError."""
    sim, jumps = _finger_sim(panda_limits, method, 0.5)
    upper, e, ys = 0.04, 0.5, []
    while sim.time < 0.06 - 1e-12:
        sim.do_step(sim.time, 1e-3)
        ys.append(np.r_[sim.time, sim.y])
    ys = np.array(ys)
    pairs = [e["index"] for e in sim.event_log]
    assert pairs == [16, 17] * (len(pairs) // 2)  # each instant: both stops, once each
    times = [e["time"] for e in sim.event_log]
    assert times[::2] == times[1::2]
    t1 = times[0]
    v1 = 2.0 * (upper - 0.02) / t1
    a = v1 / t1
    expected, t, v = [], t1, v1
    for k in range(4):
        expected.append(t)
        t += 2.0 * e * v / a
        v *= e
    assert np.abs(np.array(times[::2][:4]) - expected).max() <= 1e-8
    for indices, t, before, after in jumps[:4]:
        assert indices == [16, 17] and np.all(before[16:18] > 0.0)
        assert np.abs(after[16:18] + e * before[16:18]).max() <= 1e-12 * before[16]
    first = (ys[:, 0] > t1) & (ys[:, 0] < expected[1])  # the first rebound, in flight
    assert first.sum() >= 10
    dt = ys[first, 0] - t1
    flight = upper - e * v1 * dt + 0.5 * a * dt ** 2
    assert np.abs(ys[first, 1 + 7] - flight).max() <= 1e-9
    assert np.abs(ys[:, 1 + 7] - ys[:, 1 + 8]).max() <= 1e-9
    assert np.abs(ys[:, 1 + 16] - ys[:, 1 + 17]).max() <= 1e-9
    assert len(pairs) // 2 >= 8  # rebounds down to stop_hold_velocity (v1 ≈ 2.2 m/s)
    assert sim.model.params["panda_finger_joint1.stop"] == 1.0
    assert np.all(sim.y[7:9] == upper) and np.abs(sim.y[16:18]).max() <= 1e-12


@pytest.mark.parametrize("method", FINGER_METHODS)
def test_the_fingers_bounce_without_loss_at_restitution_one(panda_limits, method):
    """Restitution 1: the one impact of the two fingers keeps the kinetic energy ½ vᵀ M v
    (to 1e-12 relative) and reverses their velocity; the fingers swing between 0.02 m and
    the limit, impacts at t_1, 3 t_1, 5 t_1 within 1e-7 s."""
    sim, jumps = _finger_sim(panda_limits, method, 1.0)
    while sim.time < 0.1 - 1e-12:
        sim.do_step(sim.time, 1e-3)
    times = [e["time"] for e in sim.event_log]
    assert [e["index"] for e in sim.event_log] == [16, 17] * 3 and times[::2] == times[1::2]
    t1 = times[0]
    assert np.abs(np.array(times[::2]) - [t1, 3.0 * t1, 5.0 * t1]).max() <= 1e-7
    M = sim.model.mass
    for _, t, before, after in jumps:
        kinetic = [0.5 * y[9:] @ M(y[:9], t) @ y[9:] for y in (before, after)]
        assert abs(kinetic[1] - kinetic[0]) <= 1e-12 * kinetic[0]
        assert np.abs(after[16:18] + before[16:18]).max() <= 1e-12 * before[16]


def test_one_impact_of_the_fingers_of_the_falling_arm_keeps_the_energy(panda_limits):
    """The Panda falling under gravity with the fingers driven open (2 N each), restitution
    1: one impact at the fingers' arrival (both stops logged once at that instant) reverses
    their velocity (to 1e-12 relative) and keeps the kinetic energy ½ vᵀ M v of the moving
    robot (to 1e-12 relative); the two mirrored fingers take equal and opposite impulses,
    so the arm's velocities are unchanged (to 1e-12)."""
    sim = Simulation(panda_limits, method="dopri5", params={"restitution": 1.0}, rtol=1e-9,
                     atol=1e-9, backend="python")
    jumps = _record_jumps(sim)
    sim.set_inputs({"panda_finger_joint1": 2.0, "panda_finger_joint2": 2.0})
    while not jumps:
        sim.do_step(sim.time, 1e-3)
    (indices, t, before, after), = jumps
    assert indices == [16, 17] and [e["index"] for e in sim.event_log] == [16, 17]
    assert np.abs(before[9:16]).max() > 0.1 and np.abs(after[9:16] - before[9:16]).max() <= 1e-12
    assert np.abs(after[16:18] + before[16:18]).max() <= 1e-12 * abs(before[16])
    M = sim.model.mass
    kinetic = [0.5 * y[9:] @ M(y[:9], t) @ y[9:] for y in (before, after)]
    assert abs(kinetic[1] - kinetic[0]) <= 1e-12 * kinetic[0]


def test_two_coupled_stops_at_one_instant_act_in_turn(panda_limits):
    """Joints 2 and 4 of the Panda (coupled through M) on their upper limits at one
    instant, restitution 1: the jump map of the pair applies joint 2's impact law, then
    joint 4's on the velocity that left — its own impulse when joint 4 still approaches
    its limit, none when joint 2's impulse already sent it away; each step keeps the
    kinetic energy ½ vᵀ M v (to 1e-12 relative)."""
    model = panda_limits(restitution=1.0)
    k, n = len(model._limited), 9
    q, v = model.initial_state()
    q[1], q[3] = model._upper[1], model._upper[3]
    u = np.zeros(n)

    def kinetic(y):
        return 0.5 * y[n:] @ model.mass(y[:n], 0.0) @ y[n:]

    for v4, own in ((3.0, True), (0.01, False)):
        y = np.r_[q, v]
        y[n + 1], y[n + 3] = 0.5, v4
        pair = model.apply_events([k + 1, k + 3], 0.0, y, u)
        first = model.apply_event(k + 1, 0.0, y, u)
        assert first[n + 1] == pytest.approx(-0.5, rel=1e-12)
        assert bool(first[n + 3] > 0.0) is own  # still approaching its limit after joint 2's impulse
        expected = model.apply_event(k + 3, 0.0, first, u) if own else first
        assert np.abs(pair - expected).max() <= 1e-12
        assert pair[n + 3] < 0.0  # joint 4 leaves its limit
        assert abs(kinetic(pair) - kinetic(y)) <= 1e-12 * kinetic(y)


def test_the_compiled_stop_functions_match_the_pinocchio_ones(panda_limits):
    """The switching functions from the compiled rigid-body kernels (what the stepper
    uses) against the pinocchio reference, with stops holding (joint 2 and the fingers:
    the reactions solved with the mimic constraint), random efforts: within 1e-9
    (measured 5e-14)."""
    sim = Simulation(panda_limits, method="dopri5", backend="python")
    for _ in range(100):  # falls onto joint 2's limit, the fingers onto theirs
        sim.do_step(sim.time, 0.01)
    m = sim.model
    assert len(m._held) >= 3
    rng = np.random.default_rng(3)
    for _ in range(5):
        u = rng.normal(size=9) * 5.0
        y = sim.y + np.r_[np.zeros(9), rng.normal(size=9) * 0.1 * (m.params["panda_joint2.stop"] == 0)]
        z, ref = m.event_functions(sim.time, y, u), m.event_functions_reference(sim.time, y, u)
        release = ref[2 * len(m._limited):]
        assert np.abs(z - ref).max() <= 1e-9 and np.count_nonzero(release != 1.0) >= 2
        plain = np.empty_like(z)  # the same function uncompiled (hosts without numba)
        stop_values(y[:9].copy(), y[9:].copy(), u, m._p, m._stop_table, plain)
        assert np.abs(plain - ref).max() <= 1e-9


def test_the_compiled_stop_functions_are_cached_on_every_helper_they_call():
    """The compiled stop functions come from one generated module that holds their
    source and every helper they call (the rigid-body kernels, the dense LU): the disk
    cache is keyed on all of it, so a changed helper in another file compiles them
    again instead of loading machine code that reads the old layout of p."""
    import inspect
    import sys

    from cosim import jit
    from cosim.integrators import dense_lu
    from cosim.models import rigid_body
    from cosim.models.urdf import compiled_stop_functions

    if not jit.numba_available():
        pytest.skip("numba not installed")
    values, screen = compiled_stop_functions()
    module = sys.modules[values.py_func.__module__]
    assert module is sys.modules[screen.py_func.__module__]
    assert module.__name__.startswith("cosim_stops_")
    text = inspect.getsource(module)
    for helper in (rigid_body._crba, rigid_body._rnea, rigid_body._tree_work,
                   rigid_body.held_flags, rigid_body.joint_forces, dense_lu.lu_factor_inplace):
        assert f"\ndef {helper.__name__}(" in text, helper.__name__


def test_the_compiled_stop_functions_load_from_the_cache_in_the_next_process(tmp_path):
    """What the set-up compiles is what a run loads: stop_values is compiled under its
    signature before stop_screen (whose compilation would otherwise cache it under its
    argument types only, which the next process's compile(signature) misses)."""
    import os
    import subprocess
    import sys

    from cosim import jit

    if not jit.numba_available():
        pytest.skip("numba not installed")
    env = dict(os.environ, COSIM_CACHE_DIR=str(tmp_path / "cache"))
    code = "from cosim.models.urdf import compiled_stop_functions; compiled_stop_functions()"
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=600) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[1].stderr
    entries = list((tmp_path / "cache").rglob("*stop_values*.nbc"))
    assert len(entries) == 1, entries   # one machine code, not one per process
    assert "compiled" not in runs[1].stderr


def test_position_limits_opt_out_in_the_cli_spec_and_fmu_builder(tmp_path, capsys):
    """--no-position-limits (cosim models/simulate), the spec key position_limits: false,
    and fmu build --no-position-limits give a robot without stops; the default has them."""
    import json

    from cosim.cli import main as cosim_main
    from cosim.models import load_model
    from cosim.models.urdf import model_from_spec

    path = tmp_path / "arm.urdf"
    path.write_text(ARM)
    assert model_from_spec({"urdf_text": ARM}).position_limits
    assert not model_from_spec({"urdf_text": ARM, "position_limits": False}).position_limits
    assert load_model({"urdf_text": ARM}).events
    assert not load_model({"urdf_text": ARM, "position_limits": False}).events
    for flag, stops in (([], True), (["--no-position-limits"], False)):
        assert cosim_main(["models", str(path), "--json", *flag]) == 0
        names = {p["name"] for p in json.loads(capsys.readouterr().out)["parameters"]}
        assert ("j.stop" in names) is stops
        assert cosim_main(["simulate", str(path), "--t-end", "0.01", "--json", *flag]) == 0
        capsys.readouterr()
    assert cosim_main(["simulate", "pendulum", "--no-position-limits", "--t-end", "0.01"]) == 2
    assert "position-limits apply to a robot from URDF" in capsys.readouterr().err
    pytest.importorskip("pythonfmu")
    from fmu.builder import _model_spec
    assert _model_spec(str(path))["position_limits"] is True
    assert _model_spec(str(path), False)["position_limits"] is False
    with pytest.raises(InvalidInputError, match="position-limits"):
        _model_spec("pendulum", False)


def test_a_compiled_run_through_arrivals_holds_and_releases_never_builds_pinocchio():
    """The compiled Panda driven into joint 4's upper stop: it arrives, bounces, holds and
    is released by a reversed effort, each decision (hold or leave at once, release) on
    the compiled stop functions: the model's pinocchio objects (the Python equations)
    are never made, so no event of a compiled run pays pinocchio's import or its
    Python-side dynamics."""
    model = load_urdf(_panda_path(), position_limits=True)
    sim = Simulation(model, method="rk4", h=1e-3, params={"panda_joint4.q0": -0.3,
                                                          "panda_joint6.q0": 1.5})
    assert sim.integrator.backend == "numba"
    sim.set_inputs({"panda_joint4": 20.0})
    for _ in range(500):
        sim.do_step(sim.time, 1e-3)
    assert sim.model.params["panda_joint4.stop"] == 1.0 and sim.y[3] == sim.model._upper[3]
    sim.set_inputs({"panda_joint4": -20.0})
    sim.do_step(sim.time, 1e-3)
    assert sim.model.params["panda_joint4.stop"] == 0.0
    assert sim.event_log[-1]["name"] == "panda_joint4_stop_release"
    assert "_pm" not in vars(sim.model)
