"""State messages published as serialized bytes patched in place (ros_nodes.wire).

Reference: the rmw's own serialization (rclpy.serialization.serialize_message)
of the ordinary message holding the same values: the patched bytes must be
equal to it byte for byte, for awkward values too (NaN, -0.0, subnormals,
±1e308), and the plant node's published state must equal the state the
message path fills (bit for bit, from the simulation's state vector).
"""
import math

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from rosgraph_msgs.msg import Clock as ClockMsg  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, MultiArrayDimension  # noqa: E402

from ros_nodes.wire import Wire  # noqa: E402

pytestmark = pytest.mark.ros

AWKWARD = [float("nan"), -0.0, 5e-324, -1e308, 1.0 / 3.0, math.pi, 0.0]


def _joint_state(n, n_vel, n_eff, frame="base_link"):
    msg = JointState()
    msg.header.frame_id = frame
    msg.name = [f"joint_{i}" for i in range(n)]
    msg.position, msg.velocity, msg.effort = [0.0] * n, [0.0] * n_vel, [0.0] * n_eff
    return msg


@pytest.mark.parametrize("n,n_vel,n_eff,frame", [(2, 2, 2, "base_link"), (1, 1, 0, ""),
                                                  (7, 0, 7, "w"), (3, 3, 3, "x" * 37)])
def test_joint_state_bytes_equal_rmw_serialization(n, n_vel, n_eff, frame):
    wire = Wire.build(_joint_state(n, n_vel, n_eff, frame), ("position", "velocity", "effort"),
                      lambda m: m.header.stamp)
    assert wire is not None
    ref = _joint_state(n, n_vel, n_eff, frame)
    rng = np.random.default_rng(n)
    for k, (sec, nanosec) in enumerate([(0, 0), (1795540698, 999_999_999), (-3, 1)]):
        for name, size in (("position", n), ("velocity", n_vel), ("effort", n_eff)):
            values = [AWKWARD[(i + k) % len(AWKWARD)] if i % 2 else float(rng.normal())
                      for i in range(size)]
            wire.arrays[name][:] = values
            setattr(ref, name, values)
        wire.set_stamp(sec, nanosec)
        ref.header.stamp.sec, ref.header.stamp.nanosec = sec, nanosec
        assert wire.payload() == serialize_message(ref)


def test_clock_and_outputs_bytes_equal_rmw_serialization():
    clock = Wire.build(ClockMsg(), (), lambda m: m.clock)
    ref = ClockMsg()
    clock.set_stamp(12, 345_678_901)
    ref.clock.sec, ref.clock.nanosec = 12, 345_678_901
    assert clock.payload() == serialize_message(ref)
    out = Float64MultiArray()
    out.layout.dim = [MultiArrayDimension(label="a,b,c", size=3, stride=3)]
    out.data = [0.0] * 3
    wire = Wire.build(out, ("data",), None)
    wire.arrays["data"][:] = AWKWARD[:3]
    out.data = AWKWARD[:3]
    assert wire.payload() == serialize_message(out)


def test_unlocatable_layout_falls_back():
    """Fields that are not float64 sequences: no Wire (the node publishes messages)."""
    msg = _joint_state(2, 2, 2)
    assert Wire.build(msg, ("name",), lambda m: m.header.stamp) is None
    assert Wire.build(msg, ("no_such_field",), lambda m: m.header.stamp) is None


def test_plant_publishes_the_state_the_message_path_fills(harness):
    """The serialized state of a stepped two-link plant deserializes to exactly the
    JointState and outputs the ordinary message path builds (JointMap.fill)."""
    import os

    from ros_nodes.testing import LAUNCH
    hs = harness({"mode": "lock_step", "start_paused": True},
                 yaml_path=os.path.join(LAUNCH, "two_link_lock_step.yaml"))
    plant = hs.plant
    out = plant.out
    assert out.serialized
    with plant.sim_lock:
        plant.sim.set_inputs({"tau1": 0.25, "tau2": -0.5})
        for _ in range(3):
            plant.sim.do_step(plant.sim.time, plant.step)
        out.prepare(plant.sim)
        js_ref, out_ref = JointState(), Float64MultiArray()
        plant.joints.fill(plant.sim, js_ref, out_ref)
        named = dict(zip(plant.sim.state_names, plant.sim.integrator.y))
        for name, value in zip(plant.sim.output_names, plant.sim.get_outputs()):
            named.setdefault(name, value)
        t = plant.sim.time
    clock_b, js_b, out_b = out._payloads
    js = deserialize_message(js_b, JointState)
    assert js.name == ["shoulder", "elbow"] and js.header.frame_id == out.js_msg.header.frame_id
    assert js.header.stamp.sec * 10**9 + js.header.stamp.nanosec == round(t * 1e9)
    for field in ("position", "velocity", "effort"):
        assert np.array_equal(getattr(js, field), getattr(js_ref, field), equal_nan=True)
    # bit for bit from the simulation's states/outputs (launch/two_link_lock_step.yaml names)
    assert list(js.position) == [named["joint1_angle"], named["joint2_angle"]]
    assert list(js.velocity) == [named["joint1_rate"], named["joint2_rate"]]
    assert list(js.effort) == [0.25, -0.5]
    assert list(deserialize_message(out_b, Float64MultiArray).data) == list(out_ref.data)
    clock = deserialize_message(clock_b, ClockMsg).clock
    assert (clock.sec, clock.nanosec) == (js.header.stamp.sec, js.header.stamp.nanosec)


def test_state_publish_rate_decimates_joint_states_not_clock(harness):
    """free_run, 100 Hz steps, state_publish_rate 25 Hz: joint_states and outputs at
    every 4th step counted from the first state (t = 0, 0.04, ... 0.2 = end_time, where
    the final state is published whole), /clock at every step."""
    from ros_nodes.testing import RECORD_QOS, wait_for
    hs = harness({"mode": "free_run", "state_publish_rate": 25.0, "end_time": 0.2,
                  "start_paused": True})
    outputs = []
    hs.node.create_subscription(Float64MultiArray, "outputs", outputs.append, RECORD_QOS)
    wait_for(lambda: hs.plant.out.js.get_subscription_count() > 0
             and hs.plant.out.out.get_subscription_count() > 0, 10.0, what="readers")
    n_clock = len(hs.clock)
    assert hs.service("resume_simulation").success
    end_ns = 200_000_000
    wait_for(lambda: hs.states and hs.states[-1][0] == end_ns and hs.clock
             and hs.clock[-1] == end_ns, 10.0, what="the state at end_time")
    stamps = sorted({s[0] for s in hs.states})
    assert stamps == [k * 40_000_000 for k in range(6)]
    # every step's time after the resume (t = 0 itself may only have come before it:
    # the paused node republishes its frozen time, and a loaded machine can deliver
    # the last of those before n_clock was read)
    assert sorted(set(hs.clock)) == [k * 10_000_000 for k in range(21)]
    assert set(hs.clock[n_clock:]) >= {k * 10_000_000 for k in range(1, 21)}
    # outputs go with joint_states (the same times; output 0 is the angle); the t = 0
    # one may precede the outputs reader's own discovery of the writer
    published = {s[1][0] for s in hs.states}
    wait_for(lambda: len({m.data[0] for m in outputs}) >= len(stamps) - 1, 10.0, what="outputs")
    assert {m.data[0] for m in outputs} <= published
