"""A control loop in Python (read q, v; compute an effort; ``set_inputs``; ``do_step``):
``Simulation.y_view``, ``q`` and ``v`` are read-only views of the state (no copy) that
equal ``y`` after every step, a rollback and a restore; an effort vector takes the steps
a name -> value mapping takes, bit for bit; a rejected vector leaves the simulation
bit-identical and names the value; a clipped effort is said once."""
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from cosim import Simulation
from cosim.errors import InputLimitWarning, InvalidInputError, UnknownModelError

TWO_LINK_URDF = Path(__file__).resolve().parents[1] / "cosim" / "data" / "urdf" / "two_link.urdf"
METHODS = ("generalized-alpha", "bdf", "dopri5")


def _ur5():
    pytest.importorskip("pinocchio")
    from cosim.models.urdf import example_robot_path, load_urdf
    try:
        path = example_robot_path("ur_description/urdf/ur5_robot.urdf")
    except UnknownModelError as exc:
        pytest.skip(str(exc))
    return load_urdf(path)


def _sim(model, method):
    """A simulation of ``model`` ("two_link" or "ur5") with ``method`` at h = 1 ms (dopri5:
    adaptive) on the default backend."""
    opts = {} if method == "dopri5" else {"h": 1e-3}
    if model == "ur5":
        return Simulation(_ur5(), method=method, **opts)
    return Simulation(model="two_link", method=method, **opts)


def _effort(sim, k):
    """A PD-like effort from the state (a new one every step) that stays inside every
    limit: damping on v and a drive that changes sign along the run."""
    n = sim.model.n_inputs
    return -0.5 * np.asarray(sim.v)[:n] + 0.3 * np.sin(0.2 * k + np.arange(n))


def _assert_views(sim):
    y = sim.y
    n = len(sim.coordinate_names)
    for view, ref in ((sim.y_view, y), (sim.q, y[:n]), (sim.v, y[n:])):
        assert not view.flags.writeable
        assert view.tobytes() == ref.tobytes()
        with pytest.raises(ValueError):
            view[0] = 1.0
    assert np.shares_memory(sim.q, sim.y_view) and np.shares_memory(sim.v, sim.y_view)
    assert not np.shares_memory(y, sim.y_view)   # y stays a copy


@pytest.mark.parametrize("method", METHODS + ("rk4",))
def test_views_are_read_only_and_follow_the_state(method):
    """After every step, a rollback (set_state) and a restore (deserialize_state,
    reset), the views read again equal y bit for bit, are read-only, and q, v are
    views into y_view; writing through one raises and changes nothing."""
    sim = _sim("two_link", method)
    _assert_views(sim)
    y0 = sim.y
    for k in range(5):
        sim.set_inputs(_effort(sim, k))
        sim.do_step(sim.time, 1e-3)
        _assert_views(sim)
    snapshot, blob, y5 = sim.get_state(), sim.serialize_state(), sim.y
    for k in range(5, 8):
        sim.set_inputs(_effort(sim, k))
        sim.do_step(sim.time, 1e-3)
    assert not np.array_equal(sim.q, y5[:len(sim.coordinate_names)])
    sim.set_state(snapshot)
    _assert_views(sim)
    assert sim.y_view.tobytes() == y5.tobytes()
    other = _sim("two_link", method)
    other.deserialize_state(blob)
    _assert_views(other)
    assert other.y_view.tobytes() == y5.tobytes()
    sim.reset()
    _assert_views(sim)
    assert sim.y_view.tobytes() == y0.tobytes()


def test_first_order_model_has_y_view_but_no_q_v():
    sim = Simulation(model="lti", method="state-transition", h=0.01)
    sim.do_step(0.0, 0.01)
    assert sim.y_view.tobytes() == sim.y.tobytes() and not sim.y_view.flags.writeable
    for name in ("q", "v"):
        with pytest.raises(InvalidInputError, match="model 'lti' is first-order: read its "
                                                    "state with y_view"):
            getattr(sim, name)


@pytest.mark.parametrize("model", ["two_link", "ur5"])
@pytest.mark.parametrize("method", METHODS)
def test_effort_vector_takes_the_steps_of_a_mapping(model, method):
    """The same closed loop driven once by an effort vector and once by a name -> value
    mapping: the same states after every step, bit for bit (the two paths hold the
    same inputs)."""
    by_vector, by_name = _sim(model, method), _sim(model, method)
    names = by_name.input_names
    for k in range(40):
        u = _effort(by_vector, k)
        by_vector.set_inputs(u)
        by_name.set_inputs(dict(zip(names, _effort(by_name, k).tolist())))
        by_vector.do_step(by_vector.time, 1e-3)
        by_name.do_step(by_name.time, 1e-3)
        assert by_vector.y_view.tobytes() == by_name.y_view.tobytes(), k
    assert by_vector.get_inputs().tobytes() == by_name.get_inputs().tobytes()
    assert by_vector.serialize_state() == by_name.serialize_state()


BAD = [
    (lambda u: np.where(np.arange(u.size) == 1, np.nan, u), "input 'tau2' must be finite, got nan"),
    (lambda u: np.where(np.arange(u.size) == 0, -np.inf, u), "input 'tau1' must be finite, got -inf"),
    (lambda u: np.where(np.arange(u.size) == 1, 1e13, u),
     "input 'tau2' must be at most 1e+12 in size, got 10000000000000.0"),
    (lambda u: u[:1], "inputs must have length 2, got 1"),
    (lambda u: np.concatenate([u, u]), "inputs must have length 2, got 4"),
    (lambda u: u.reshape(1, -1), "inputs must be 1-D, got shape (1, 2)"),
    (lambda u: u + 0j, "inputs must be real numbers"),
]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bad", range(len(BAD)))
def test_rejected_vector_names_the_value_and_changes_nothing(method, bad):
    """A NaN/inf, an input beyond 1e12, the wrong length or shape, complex numbers: one
    InvalidInputError naming it; the simulation's saved state is the same bytes as
    before and it then takes the steps of one that never saw the vector."""
    make, message = BAD[bad]
    sim, ref = _sim("two_link", method), _sim("two_link", method)
    for s in (sim, ref):
        s.set_inputs(np.array([0.4, -0.2]))
        s.do_step(0.0, 1e-3)
    before = sim.serialize_state()
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        sim.set_inputs(make(np.array([0.1, 0.2])))
    assert sim.serialize_state() == before
    assert sim.get_inputs().tolist() == [0.4, -0.2]
    for s in (sim, ref):
        s.do_step(s.time, 1e-3)
        s.set_inputs(np.array([-0.3, 0.1]))
        s.do_step(s.time, 1e-3)
    assert sim.serialize_state() == ref.serialize_state()


def test_clipped_effort_vector_is_said_once_per_joint():
    """An effort vector beyond the URDF's <limit effort>: clipped, the first clip of each
    joint one InputLimitWarning pointing at the caller; the run equals one given the
    efforts at the limits."""
    from cosim.models.urdf import load_urdf
    cls = load_urdf(TWO_LINK_URDF)
    limits = {"joint1.effort_limit": 2.0, "joint2.effort_limit": 1.0}
    sim = Simulation(cls, method="generalized-alpha", h=1e-3, params=limits)
    ref = Simulation(cls, method="generalized-alpha", h=1e-3, params=limits)
    asked = [(1.5, 0.5), (50.0, 0.5), (-60.0, 0.9), (1.0, -3.0), (70.0, 4.0)]
    held = [(1.5, 0.5), (2.0, 0.5), (-2.0, 0.9), (1.0, -1.0), (2.0, 1.0)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for u in asked:
            sim.set_inputs(np.array(u))
            sim.do_step(sim.time, 0.01)
    said = [str(w.message) for w in caught if issubclass(w.category, InputLimitWarning)]
    assert said == [f"input 'joint{j}' = {x!r} is clipped to {c!r} by the effort limit of joint "
                    f"'joint{j}' (parameter 'joint{j}.effort_limit', URDF <limit effort>) (said "
                    f"once per input)" for j, x, c in ((1, 50.0, 2.0), (2, -3.0, -1.0))]
    assert all(w.filename == __file__ for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # at the limits: nothing to say
        for u in held:
            ref.set_inputs(np.array(u))
            ref.do_step(ref.time, 0.01)
    assert sim.y.tobytes() == ref.y.tobytes()


def test_clipped_effort_vector_on_a_robot_with_stops_is_said_once():
    """The UR5 (stops: switching functions an input may move, effort limits 150 and
    28 N·m): a wrist effort of 30 N·m in a vector is said once, pointing at the caller,
    and the run equals one given 28 N·m."""
    sim, ref = _sim("ur5", "generalized-alpha"), _sim("ur5", "generalized-alpha")
    assert sim._has_events
    u = np.array([20.0, -40.0, 10.0, 30.0, 1.0, -1.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(3):
            sim.set_inputs(u * (1.0 + 0.01 * k))
            sim.do_step(sim.time, 1e-3)
    said = [str(w.message) for w in caught if issubclass(w.category, InputLimitWarning)]
    assert len(said) == 1 and said[0].startswith("input 'wrist_1_joint' = 30.0 is clipped to 28.0")
    assert [w.filename for w in caught] == [__file__]
    for k in range(3):
        v = u * (1.0 + 0.01 * k)
        v[3] = 28.0
        ref.set_inputs(v)
        ref.do_step(ref.time, 1e-3)
    assert sim.y.tobytes() == ref.y.tobytes()


@pytest.mark.parametrize("method", ["generalized-alpha", "bdf", "block-lstable", "local-index1",
                                    "spark", "rkc-penalty", "rk4", "dopri5"])
def test_one_input_hold_for_every_record_method(method):
    """RecordIntegrator.hold_inputs (the per-step hold of every record method) takes the
    steps of the integrator's checked ``set_inputs`` (the ``u`` setter, then the restart),
    bit for bit over a loop with a new effort every step."""
    states = []
    for checked in (False, True):
        sim = Simulation(model="two_link", method=method, h=1e-3)
        sim._plain_set_inputs = not checked   # (True: Simulation's per-step hold)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")    # (a fixed step's accuracy warning)
            for k in range(30):
                sim.set_inputs(np.array([0.3 * np.sin(0.3 * k), -0.2 * np.cos(0.2 * k)])
                               - 0.5 * np.asarray(sim.v)[:2])
                sim.do_step(sim.time, 1e-3)
        states.append(sim.serialize_state())
    assert states[0] == states[1]
