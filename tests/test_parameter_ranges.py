"""Issue 14 item 2: parameters range-checked by declaration (cosim.models.ranges),
overflow in model evaluation turned into a clear error at set-up (cosim.model_probe),
user-model terms shape-checked at the first call with the model's name.

Each rejection leaves the model / simulation exactly as it was."""
import math
import re
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.errors import ConvergenceError, CosimError, InvalidInputError, ModelDefinitionError, StateError
from cosim.models import model_class
from cosim.models.base import FirstOrderModel, MultibodyModel, Parameter, Signal
from cosim.models.ranges import (DEFAULT, NONNEGATIVE, POSITIVE, SWITCH, UNIT_INTERVAL, Range,
                                 declared_range, parameter_range)
from cosim.spec import SimulationSpec

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("model, key, value, text", [
    ("crank_slider", "damping", -1, "must be 0 or 1, got -1.0"),
    ("crank_slider", "nonlinear_stiffness", 1e300, "must be 0 or 1, got 1e+300"),
    ("crank_slider", "seed_initial_velocity", 0.5, "must be 0 or 1, got 0.5"),
    ("crank_slider", "m1", -1.0, "must be in [1e-12, 1e+12], got -1.0"),
    ("knife_edge", "m", -1.0, "must be in [1e-12, 1e+12], got -1.0"),
    ("knife_edge", "J", 0.0, "must be in [1e-12, 1e+12], got 0.0"),
    ("bouncing_ball", "e", 1.5, "must be in [0, 1], got 1.5"),
    ("bouncing_ball", "v_stop", -0.1, "must be in [0, 1e+12], got -0.1"),
    ("andrews", "i3", -1e-6, "must be in [1e-12, 1e+12], got -1e-06"),
    # the magnitude bound: a positive quantity of 1e-300, any value beyond 1e12 in size
    ("pendulum", "m", 1e-300, "must be in [1e-12, 1e+12], got 1e-300"),
    ("pendulum", "g", -1e300, "must be at most 1e+12 in size, got -1e+300"),
    ("pendulum", "l", 1e300, "must be in [1e-12, 1e+12], got 1e+300"),
    ("two_link", "omega1_0", 2.0 ** 63, "must be at most 1e+12 in size, got 9.223372036854776e+18"),
    ("crank_slider", "youngs_modulus", 1e13, "must be in [1e-12, 1e+12], got 10000000000000.0"),
    ("crank_slider", "rho", True, "must be a number, got bool True"),
])
def test_declared_range_is_enforced_and_state_unchanged(model, key, value, text):
    message = f"parameter {key!r} {text}"
    with pytest.raises(InvalidInputError) as err:
        cosim.load_model(model, **{key: value})
    assert str(err.value) == message
    sim = cosim.Simulation(model, "dopri5", backend="python")
    before = (sim.time, sim.y, dict(sim.model.params))
    with pytest.raises(InvalidInputError) as err:
        sim.set_parameter(key, value)
    assert str(err.value) == message
    assert (sim.time, dict(sim.model.params)) == (before[0], before[2])
    assert np.array_equal(sim.y, before[1])
    with pytest.raises(InvalidInputError, match=message.replace("[", r"\[").replace("(", r"\(")
                       .replace("]", r"\]").replace(")", r"\)").replace("+", r"\+")):
        cosim.Simulation.from_spec(SimulationSpec.from_dict({"model": model, "params": {key: value}}))


def test_switches_accept_exactly_zero_and_one():
    for value in (0, 1, 0.0, 1.0, "1"):
        assert cosim.load_model("crank_slider", damping=value).params["damping"] == float(value)


def test_every_library_model_declares_ranges_its_defaults_satisfy():
    for name in ("pendulum", "two_link", "double_pendulum_natural", "andrews", "crank_slider",
                 "bouncing_ball", "knife_edge"):
        cls = model_class(name)
        declared = {p.name: declared_range(cls, p.name) for p in cls.parameters}
        masses = [k for k in declared if k.startswith(("m", "i", "j", "J")) and k[1:].isdigit() or k in
                  ("m", "J")]
        assert masses and all(declared[k] == POSITIVE for k in masses), (name, declared)
        for p in cls.parameters:  # declared, or the default magnitude bound
            assert parameter_range(cls, p.name).contains(p.default), (name, p.name)


def test_range_wording():
    assert str(POSITIVE) == "in [1e-12, 1e+12]" and str(NONNEGATIVE) == "in [0, 1e+12]"
    assert str(DEFAULT) == "at most 1e+12 in size" and str(SWITCH) == "0 or 1"
    assert str(UNIT_INTERVAL) == "in [0, 1]" and str(Range(-1, 2, high_open=True)) == "in [-1, 2)"
    assert str(Range(high=3.0)) == "in [-1e+12, 3]" and str(Range(values=(1.0, 2.0, 4.0))) == "one of 1, 2, 4"
    assert str(Range(0.0, math.inf, low_open=True)) == "> 0" and str(Range(-math.inf, 3.0)) == "<= 3"


def test_user_model_declares_ranges():
    class Spring(FirstOrderModel):
        name = "spring_user"
        states = ("x", "v")
        parameters = (Parameter("k", 4.0), Parameter("zeta", 0.1))
        parameter_ranges = {"k": POSITIVE, "zeta": Range(0.0, 1.0, high_open=True)}

        def initial_state(self):
            return np.array([1.0, 0.0])

        def rhs(self, t, x, u):
            return np.array([x[1], -self.params["k"] * x[0] - 2 * self.params["zeta"] * x[1]])

    with pytest.raises(InvalidInputError, match=r"parameter 'zeta' must be in \[0, 1\), got 1.0"):
        Spring(zeta=1.0)
    assert Spring(zeta=0.5).params["zeta"] == 0.5


# -- overflow at set-up --------------------------------------------------------------------------
class _Heavy(MultibodyModel):
    """A free particle under a force g² (one coordinate, no constraint) whose parameter is
    declared unbounded: the probe, not the range, catches its overflow."""
    name = "heavy_user"
    coordinates = ("x",)
    parameters = (Parameter("g", 1.0),)
    parameter_ranges = {"g": Range(-math.inf, math.inf)}

    def initial_state(self):
        return np.array([0.0]), np.array([0.0])

    def mass(self, q, t):
        return np.eye(1)

    def forces(self, q, v, t, u):
        return np.array([-self.params["g"] ** 2])


def test_overflow_in_the_model_is_a_clear_error_at_set_up():
    text = "model 'heavy_user': forces(q, v, t, u) overflows at t=0.0"
    for method in ("generalized-alpha", "dopri5"):
        with pytest.raises(InvalidInputError) as err:
            cosim.Simulation(_Heavy, method, params={"g": 1e300}, backend="python")
        assert text in str(err.value)
    sim = cosim.Simulation(_Heavy, "dopri5", backend="python")  # the same through set_parameter
    y0, p0 = sim.y, dict(sim.model.params)
    with pytest.raises(InvalidInputError, match="overflow"):
        sim.set_parameter("g", 1e300)
    assert np.array_equal(sim.y, y0) and sim.model.params == p0 and sim.time == 0.0
    sim.do_step(0.0, 0.01)  # still usable


def test_tunable_parameter_overflowing_after_the_start_is_refused_and_nothing_changes():
    class Drag(FirstOrderModel):
        name = "drag_user"
        states = ("v",)
        parameters = (Parameter("c", 1.0, tunable=True),)
        outputs = (Signal("v"),)

        def initial_state(self):
            return np.array([1e10])

        def rhs(self, t, x, u):
            return -self.params["c"] * x ** 30  # 1e300 at v = 1e10 overflows with c > 1

        def output_values(self, t, y, u):
            return y.copy()

    sim = cosim.Simulation(Drag, "dopri5", params={"c": 1e-300}, backend="python")
    sim.do_step(0.0, 1e-3)
    t, y = sim.time, sim.y
    with pytest.raises(InvalidInputError, match=r"model 'drag_user': rhs\(t, x, u\) overflows at t=0.001 "
                                                r"\(the current state"):
        sim.set_parameter("c", 1e10)
    assert sim.model.params["c"] == 1e-300 and sim.time == t and np.array_equal(sim.y, y)


def test_huge_derivative_and_huge_lti_matrix_are_clear_errors():
    """A library model's parameters stop at 1e12; a model that declares g unbounded
    can still make a derivative too large for any step: dopri5 says so at set-up."""
    pendulum = model_class("pendulum")

    class UnboundedG(pendulum):
        parameter_ranges = dict(getattr(pendulum, "parameter_ranges", None) or {},
                                g=Range(-math.inf, math.inf))

    with pytest.raises(ConvergenceError, match="dopri5: the initial derivative is too large for any step"):
        cosim.Simulation(UnboundedG(), "dopri5", params={"g": 1e300}, backend="python")
    lti = {"A": [[0.0, 1.0], [-1e300, 0.0]], "B": [[0.0], [1.0]], "C": [[1.0, 0.0]], "D": [[0.0]]}
    sim = cosim.Simulation("lti", "state-transition", params=lti)
    with pytest.raises(ConvergenceError, match=r"state-transition: e\^\(A h\) overflows \(max \|A\| = 1e\+300"):
        sim.do_step(0.0, 0.1)
    assert sim.time == 0.0 and np.array_equal(sim.y, [1.0, 0.0])


# -- user-model shapes at the first call ---------------------------------------------------------
class _Bead(MultibodyModel):
    """A free unit mass under gravity (one coordinate, no constraint)."""
    name = "bead_user"
    coordinates = ("x",)
    outputs = (Signal("x"), Signal("v"))

    def initial_state(self):
        return np.array([0.0]), np.array([0.0])

    def mass(self, q, t):
        return np.eye(1)

    def forces(self, q, v, t, u):
        return np.array([-9.81])

    def outputs_qv(self, t, q, v, u):
        return np.array([q[0], v[0]])


def test_user_model_terms_are_shape_checked_at_the_first_call_with_its_name():
    class WrongOutputs(_Bead):
        name = "wrong_outputs"

        def outputs_qv(self, t, q, v, u):
            return np.array([q[0]])  # declares two outputs

    class WrongEvents(_Bead):
        name = "wrong_events"
        events = (cosim.models.base.Event("floor"),)

        def event_functions(self, t, y, u):
            return np.array([y[0], y[1]])

    class WrongRhs(FirstOrderModel):
        name = "wrong_rhs"
        states = ("a", "b")

        def initial_state(self):
            return np.zeros(2)

        def rhs(self, t, x, u):
            return np.zeros(3)

    for cls, text in ((WrongOutputs, r"model 'wrong_outputs': output_values\(t, y, u\) returned shape "
                                     r"\(1,\) at t=0.0, expected \(2,\)"),
                      (WrongEvents, r"model 'wrong_events': event_functions\(t, y, u\) returned shape "
                                    r"\(2,\) at t=0.0, expected \(1,\)"),
                      (WrongRhs, r"model 'wrong_rhs': rhs\(t, x, u\) returned shape \(3,\) at t=0.0, "
                                 r"expected \(2,\)")):
        with pytest.raises(ModelDefinitionError, match=text):  # the probe, without issue 19's check
            cosim.Simulation(cls, "dopri5", backend="python", check="off")
    sim = cosim.Simulation(_Bead, "dopri5", backend="python")
    sim.do_step(0.0, 0.5)
    assert sim.get_outputs() == pytest.approx([-9.81 / 8, -9.81 / 2], rel=1e-10)


# -- block parameters: the same magnitude bound where they enter ------------------------
_BLOCK_SPECS = [
    (dict(type="pid", name="pd", sample_time=0.01, kp=1e13),
     "parameter 'pd.kp' must be at most 1e+12 in size, got 10000000000000.0"),
    (dict(type="pid", name="pd", sample_time=0.01, kd=-1e300),
     "parameter 'pd.kd' must be at most 1e+12 in size, got -1e+300"),
    (dict(type="pid", name="pd", sample_time=0.01, tf=2e12),
     "parameter 'pd.tf' must be in [0, 1e+12], got 2000000000000.0"),
    (dict(type="pid", name="pd", sample_time=0.01, u_min=-1e13),
     "parameter 'pd.u_min' must be at most 1e+12 in size, got -10000000000000.0"),
    (dict(type="state_feedback", name="sf", sample_time=0.01, K=[[1.0, -2e13]]),
     "parameter 'sf.K[1,2]' must be at most 1e+12 in size, got -20000000000000.0"),
    (dict(type="state_feedback", name="sf", sample_time=0.01, K=[[1.0]], reference_gain=[[1e15]]),
     "parameter 'sf.reference_gain[1,1]' must be at most 1e+12 in size, got 1000000000000000.0"),
    (dict(type="discrete_state_space", name="c", sample_time=0.01, A=[[0.5]], B=[[1.0]], C=[[1e300]],
          D=[[0.0]]), "parameter 'c.C[1,1]' must be at most 1e+12 in size, got 1e+300"),
    (dict(type="user", name="ub", sample_time=0.01, function="cosim.blocks:saturate",
          inputs=["u", "limit"], params={"gain": 5e12}),
     "parameter 'ub.gain' must be at most 1e+12 in size, got 5000000000000.0"),
]


@pytest.mark.parametrize("spec, text", _BLOCK_SPECS)
def test_block_parameters_beyond_the_magnitude_bound_are_refused_with_their_name(spec, text):
    """A block's tunable numbers (PID gains and limits, matrix entries, a user block's
    numeric params) have the bound of every model parameter (cosim.models.ranges), in a
    spec or scenario file as in code."""
    from cosim.blocks import make_block
    with pytest.raises(InvalidInputError, match=re.escape(text)):
        make_block(spec)
    if spec["type"] == "pid":   # the bound itself is a value
        key = next(k for k in ("kp", "kd", "tf", "u_min") if k in spec)
        assert getattr(make_block(dict(spec, **{key: math.copysign(1e12, spec[key])})), key) == \
            math.copysign(1e12, spec[key])


def test_a_scenario_file_with_a_gain_beyond_the_bound_is_refused(tmp_path):
    from cosim.scenario import load_scenario
    text = (ROOT / "scenarios" / "pendulum_pd.yaml").read_text(encoding="utf-8")
    assert "kp: 60.0" in text
    path = tmp_path / "pd.yaml"
    path.write_text(text.replace("kp: 60.0", "kp: 6.0e+13"), encoding="utf-8")
    with pytest.raises(CosimError, match=re.escape("parameter 'pd.kp' must be at most 1e+12 in size, "
                                                   "got 60000000000000.0")):
        load_scenario(path).build()


def test_a_block_parameter_beyond_the_bound_is_refused_by_set_parameter_and_in_a_blob():
    """set_parameter (the FMU's tunables and start values go through it) and a state blob's
    params: refused naming the parameter, the simulation unchanged, and it continues."""
    from cosim import serialization
    from cosim.scenario import load_scenario
    sim = load_scenario(ROOT / "scenarios" / "pendulum_pd.yaml").build()
    sim.do_step(0.0, 0.01)
    before = sim.serialize_state()
    for key, value, text in (("pd.kp", 1e13, "parameter 'pd.kp' must be at most 1e+12 in size, got 10000000000000.0"),
                             ("pd.tf", 1e300, "parameter 'pd.tf' must be in [0, 1e+12], got 1e+300")):
        with pytest.raises(InvalidInputError, match=re.escape(text)):
            sim.set_parameter(key, value)
        assert sim.serialize_state() == before
        meta, data = serialization.loads(before)
        data["params"][key] = value
        with pytest.raises(StateError, match=re.escape(f"state field params.pd: {text}")):
            sim.deserialize_state(serialization.dumps(data, meta))
        assert sim.serialize_state() == before
    sim.set_parameter("pd.kp", 1e12)   # the bound itself is a value
    sim.deserialize_state(before)
    sim.do_step(sim.time, 0.01)
