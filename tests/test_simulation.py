"""cosim.Simulation: the communication-step contract (ZOH inputs, exact landing,
validation without side effects, rollback, bit-identical restart in a fresh process)."""
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cosim
from cosim.errors import ConvergenceError, InvalidInputError, StateError, UnknownModelError
from cosim.integrators import available_methods, method_class
from cosim.models.pendulum import Pendulum

EXAMPLES = {"multibody": dict(model="pendulum", params={"phi0": 0.7}),
            "first_order": dict(model="lti")}


def methods_for(kind):
    out = []
    for name in available_methods():
        if kind in method_class(name).model_kinds:
            out.append(name)
    return out


def method_cases():
    cases = []
    for kind in ("multibody", "first_order"):
        for name in methods_for(kind):
            cases.append((kind, name))
    return cases


def make(kind, method, **kw):
    opts = dict(EXAMPLES[kind])
    opts.update(kw)
    return cosim.Simulation(method=method, **opts)


def drive(sim, n, h=0.01):
    """n communication steps with a deterministic input pattern; outputs as bytes."""
    out = []
    for k in range(n):
        if sim.input_names:
            sim.set_inputs([0.3 * np.sin(0.7 * (sim.time + k)) for _ in sim.input_names])
        sim.do_step(sim.time, h)
        out.append(sim.get_outputs().tobytes() + sim.y.tobytes())
    return out


def test_names_and_construction_forms():
    sim = cosim.Simulation(model="pendulum", method="generalized-alpha")
    assert sim.input_names == ("torque", "fx", "fy")
    assert sim.output_names == ("angle", "angular_velocity", "rod_force")
    assert sim.state_names == ("x", "y", "dx", "dy") and sim.coordinate_names == ("x", "y")
    assert sim.parameter_names == ("m", "l", "g", "phi0", "omega0")
    assert sim.time == 0.0 and sim.base_step is None and sim.event_log == []
    by_instance = cosim.Simulation(model=Pendulum(l=2.0), method="generalized-alpha")
    by_spec = cosim.Simulation(model="cosim.models.pendulum:Pendulum", params={"l": 2.0})
    assert np.array_equal(by_instance.y, by_spec.y)
    assert np.hypot(*by_spec.y[:2]) == pytest.approx(2.0)
    with pytest.raises(UnknownModelError, match="nonexistent"):
        cosim.Simulation(model="nonexistent")
    with pytest.raises(cosim.errors.UnknownParameterError, match="'lenght'"):
        cosim.Simulation(model="pendulum", params={"lenght": 1.0})
    with pytest.raises(InvalidInputError, match="state-transition"):
        cosim.Simulation(model="pendulum", method="state-transition")


def test_do_step_lands_exactly_and_counts():
    sim = cosim.Simulation(model="lti", method="state-transition")
    t = sim.do_step(0.0, 0.1)
    assert t == sim.time == 0.1 and sim.integrator.t == 0.1
    sim.do_step(sim.time, 0.2)
    assert sim.time == 0.1 + 0.2
    assert sim.stats["communication_steps"] == 2
    # t within 1e-12 relative of sim.time is accepted (a master's own clock)
    sim.do_step(0.30000000000000004 * (1 + 1e-14), 0.05)
    assert sim.time == 0.30000000000000004 * (1 + 1e-14) + 0.05


@pytest.mark.parametrize("bad, match", [
    (dict(values=[1.0, 2.0]), "length 1"),
    (dict(values=[float("nan")]), "finite"),
    (dict(values={"forse": 1.0}), "unknown input 'forse'"),
    (dict(values={"force": float("inf")}), "'force'"),
    (dict(values={"force": "abc"}), "'abc'"),
    # float64 vectors take set_inputs' hot path (an FMU's input buffer): the same checks
    (dict(values=np.array([1.0, 2.0])), "length 1"),
    (dict(values=np.array([float("nan")])), "finite"),
    (dict(values=np.array([-float("inf")])), "finite"),
    (dict(values=np.zeros(0)), "length 1"),
])
def test_bad_inputs_raise_and_change_nothing(bad, match):
    sim = cosim.Simulation(model="lti", method="state-transition")
    sim.set_inputs({"force": 0.25})
    sim.do_step(0.0, 0.1)
    before = sim.serialize_state()
    with pytest.raises(InvalidInputError, match=match):
        sim.set_inputs(bad["values"])
    assert sim.serialize_state() == before
    assert sim.get_inputs().tolist() == [0.25]


def test_inputs_given_as_a_vector_are_copied_not_aliased():
    """set_inputs(ndarray) keeps its own copy: writing the caller's buffer afterwards (the
    FMU slave's shared input buffer is written in place) changes nothing until the next
    set_inputs, and the run equals one given the same values as a list."""
    a = cosim.Simulation(model="two_link", h=1e-3)
    b = cosim.Simulation(model="two_link", h=1e-3)
    buf = np.zeros(len(a.input_names))
    for k in range(5):
        buf[:] = [0.3 * np.sin(k), -0.1 * k]
        a.set_inputs(buf)
        buf[:] = 99.0  # the caller reuses its buffer
        b.set_inputs([0.3 * np.sin(k), -0.1 * k])
        assert a.get_inputs().tolist() == b.get_inputs().tolist()
        a.do_step(k * 1e-3, 1e-3)
        b.do_step(k * 1e-3, 1e-3)
        assert a.get_outputs().tolist() == b.get_outputs().tolist()
    assert a.serialize_state() == b.serialize_state()


@pytest.mark.parametrize("t, h, match", [
    (0.1, -0.01, "> 0"), (0.1, 0.0, "> 0"), (0.1, float("nan"), "finite"), (0.1, float("inf"), "finite"),
    (0.2, 0.01, "simulation is at t=0.1"), (float("nan"), 0.01, "finite"), (0.1, "x", "number"),
])
def test_bad_step_arguments_raise_and_change_nothing(t, h, match):
    sim = cosim.Simulation(model="pendulum", method="generalized-alpha")
    sim.do_step(0.0, 0.1)
    before = sim.serialize_state()
    with pytest.raises(InvalidInputError, match=match):
        sim.do_step(t, h)
    assert sim.serialize_state() == before


class FailingPendulum(Pendulum):
    """Pendulum whose force evaluation blows up after t_fail (a model bug / non-convergence)."""

    name = "failing_pendulum"
    t_fail = 0.25

    def forces(self, q, v, t, u):
        if t > self.t_fail:
            raise FloatingPointError("force model overflow")
        return super().forces(q, v, t, u)


def test_failed_do_step_leaves_the_serialized_state_identical():
    sim = cosim.Simulation(model=FailingPendulum(), method="generalized-alpha")
    sim.set_inputs([0.1, 0.0, 0.0])
    sim.do_step(0.0, 0.2)
    before = sim.serialize_state()
    outputs = sim.get_outputs().copy()
    with pytest.raises(ConvergenceError, match="overflow") as info:
        sim.do_step(0.2, 0.2)
    assert info.value.t == 0.2 and info.value.h == 0.2
    assert sim.serialize_state() == before and np.array_equal(sim.get_outputs(), outputs)
    # with blocks (general path: several sub-intervals) the same holds
    sim = cosim.Simulation(model=FailingPendulum(), method="generalized-alpha",
                           blocks=[dict(type="sample_hold", name="hold", sample_time=0.01)],
                           connections=["angle -> hold.u", "hold.y -> torque"])
    sim.do_step(0.0, 0.2)
    before = sim.serialize_state()
    with pytest.raises(ConvergenceError):
        sim.do_step(0.2, 0.2)
    assert sim.serialize_state() == before


@pytest.mark.parametrize("backend", ["python", "numba"])
def test_input_change_is_a_discontinuity_for_the_integrator(monkeypatch, backend):
    # (the compiled backend carries the restart out inside its next advance)
    sim = cosim.Simulation(model="pendulum", method="generalized-alpha", backend=backend)
    calls = []
    monkeypatch.setattr(sim.integrator, "restart", lambda: calls.append(sim.integrator.t))
    sim.do_step(0.0, 0.05)
    sim.set_inputs({"torque": 0.0})  # unchanged value: no restart
    assert calls == []
    sim.set_inputs({"torque": 1.0})
    assert calls == [0.05]


@pytest.mark.parametrize("kind, method", method_cases())
def test_rollback_is_bit_identical(kind, method):
    sim = make(kind, method)
    drive(sim, 5)
    snap = sim.get_state()
    first = drive(sim, 8)
    stats = sim.stats
    sim.set_state(snap)
    assert drive(sim, 8) == first
    assert sim.stats == stats


@pytest.mark.parametrize("kind, method", method_cases())
def test_reset_gives_the_fresh_trajectory(kind, method):
    fresh = drive(make(kind, method), 6)
    sim = make(kind, method)
    drive(sim, 4)
    sim.reset()
    assert sim.time == 0.0 and sim.stats["communication_steps"] == 0
    assert drive(sim, 6) == fresh


def test_serialize_then_continue_in_a_fresh_process_is_bit_identical(tmp_path):
    """For every method that exists: blob in this process, continuation in a new one."""
    cases = method_cases()
    assert ("first_order", "state-transition") in cases
    jobs = []
    for kind, method in cases:
        sim = make(kind, method)
        drive(sim, 5)
        blob = sim.serialize_state()
        path = tmp_path / f"{kind}_{method}.bin"
        path.write_bytes(blob)
        expected = [b.hex() for b in drive(sim, 6)]
        jobs.append({"kind": kind, "method": method, "path": str(path), "expected": expected})
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r})
        import test_simulation as t
        jobs = json.load(open({str(tmp_path / 'jobs.json')!r}))
        result = {{}}
        for job in jobs:
            sim = t.make(job["kind"], job["method"])
            sim.deserialize_state(open(job["path"], "rb").read())
            result[job["kind"] + "/" + job["method"]] = [b.hex() for b in t.drive(sim, 6)]
        print(json.dumps(result))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for job in jobs:
        assert result[job["kind"] + "/" + job["method"]] == job["expected"], job["method"]


def test_set_state_rejects_a_state_of_another_simulation():
    lti = cosim.Simulation(model="lti", method="state-transition")
    pend = cosim.Simulation(model="pendulum", method="generalized-alpha")
    before = pend.serialize_state()
    with pytest.raises(StateError):
        pend.set_state(lti.get_state())
    with pytest.raises(StateError):
        pend.set_state({"time": 0.0})
    assert pend.serialize_state() == before


def test_get_state_is_a_deep_snapshot():
    sim = cosim.Simulation(model="lti", method="state-transition")
    snap = sim.get_state()
    y0 = snap["integrator"]["y"].copy()
    sim.set_inputs([1.0])
    sim.do_step(0.0, 0.5)
    assert np.array_equal(snap["integrator"]["y"], y0) and snap["time"] == 0.0


def test_set_parameter_before_start_and_tunable_rules():
    sim = cosim.Simulation(model="pendulum", method="generalized-alpha")
    sim.set_parameter("l", 2.0)  # before the first step: initial state recomputed
    assert np.hypot(*sim.y[:2]) == pytest.approx(2.0)
    sim.do_step(0.0, 0.01)
    with pytest.raises(InvalidInputError, match="not tunable"):
        sim.set_parameter("l", 3.0)
    with pytest.raises(cosim.errors.UnknownParameterError, match="'lenght'"):
        sim.set_parameter("lenght", 3.0)
    with pytest.raises(InvalidInputError):
        cosim.Simulation(model="pendulum").set_parameter("l", float("nan"))


def test_do_step_warm_path_takes_a_tuned_parameter_and_fails_with_the_methods_message():
    """The compiled do_step passes the model's current parameters (a tunable one
    changed mid-run acts from that step on, as on the python backend) and a failed
    step raises the method's own error with the simulation unchanged."""
    pytest.importorskip("numba")
    pytest.importorskip("pinocchio")
    from cosim.models.urdf import example_robot_path, load_urdf
    cls = load_urdf(example_robot_path())
    runs = {}
    for backend, tune in (("numba", True), ("python", True), ("numba", False)):
        sim = cosim.Simulation(cls, method="rk4", h=1e-3, backend=backend)
        t = 0.0
        for k in range(10):
            if k == 5 and tune:
                sim.set_parameter("gravity_z", -3.0)
            t = sim.do_step(t, 1e-3)
        runs[backend, tune] = sim.integrator.y
    assert np.allclose(runs["numba", True], runs["python", True], rtol=0, atol=1e-12)
    assert np.max(np.abs(runs["numba", True] - runs["numba", False])) > 1e-6   # it acted
    sim = cosim.Simulation(model="two_link", method="generalized-alpha", h=1e-3, backend="numba")
    t = sim.do_step(0.0, 1e-3)
    before = sim.get_state()
    sim.set_inputs([1e12, 1e12])   # (the largest inputs set_inputs takes)
    with pytest.raises(ConvergenceError, match="generalized-alpha"):
        sim.do_step(t, 1e-3)
    assert sim.time == before["time"]
    assert np.array_equal(sim.integrator.y, before["integrator"]["y"])
