"""Services, pause/step/reset/save/load, bad messages and stale inputs of the
simulation node, run in-process (MultiThreadedExecutor) over DDS on loopback;
this process is the controller."""
import math
import os
import threading
import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from rcl_interfaces.msg import Log  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from rosgraph_msgs.msg import Clock as ClockMsg  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

import cosim  # noqa: E402
from ros_nodes.common import COMMAND_QOS  # noqa: E402
from ros_nodes.sim_node import SimulationNode  # noqa: E402
from ros_nodes.testing import (LAUNCH, RECORD_QOS, Spinner, call_service,  # noqa: E402
                               load_parameters, simulation_kwargs, unique_domain_id, wait_for)

pytestmark = pytest.mark.ros

PLANT_YAML = os.path.join(LAUNCH, "pendulum_lock_step.yaml")
ROSOUT_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.TRANSIENT_LOCAL)


def _ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class Harness:
    """A plant node (from the YAML, plus overrides) and a controller/recorder node."""

    def __init__(self, monkeypatch, label, overrides=(), yaml_path=PLANT_YAML):
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        monkeypatch.delenv("ROS_LOCALHOST_ONLY", raising=False)
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=unique_domain_id(label))
        self.plant = SimulationNode(
            context=self.ctx, cli_args=["--ros-args", "--params-file", yaml_path],
            parameter_overrides=[Parameter(k, value=v) for k, v in dict(overrides).items()])
        self.node = rclpy.create_node("tester", context=self.ctx)
        self.states, self.clock, self.logs, self.diagnostics = [], [], [], []
        self._cv = threading.Condition()
        self.node.create_subscription(JointState, "joint_states", self._on_state, RECORD_QOS)
        self.node.create_subscription(ClockMsg, "/clock", lambda m: self.clock.append(_ns(m.clock)),
                                      RECORD_QOS)
        self.node.create_subscription(Log, "/rosout", self.logs.append, ROSOUT_QOS)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 10)
        self.cmd = self.node.create_publisher(Float64MultiArray, "command", COMMAND_QOS)
        self.joint_cmd = self.node.create_publisher(JointState, "joint_command", COMMAND_QOS)
        self.spinner = Spinner(self.ctx, [self.plant, self.node])
        self.plant.start()
        wait_for(lambda: self.cmd.get_subscription_count() > 0 and
                 self.joint_cmd.get_subscription_count() > 0, 10.0, what="plant subscriptions")

    def _on_state(self, msg):
        with self._cv:
            self.states.append((_ns(msg.header.stamp), tuple(msg.position), tuple(msg.velocity),
                                tuple(msg.effort)))

    def latest(self):
        return self.states[-1] if self.states else None

    def wait_state(self, stamp, timeout=10.0):
        def found():
            return any(s[0] == stamp for s in self.states[-5:])
        wait_for(found, timeout, what=f"state stamped {stamp} ns")
        return next(s for s in reversed(self.states) if s[0] == stamp)

    def command(self, values):
        self.cmd.publish(Float64MultiArray(data=[float(v) for v in values]))

    def service(self, name):
        return call_service(self.node, Trigger, name)

    def errors(self):
        return [m.msg for m in self.logs if m.level >= Log.ERROR]

    def warnings(self):
        return [m.msg for m in self.logs if m.level == Log.WARN]

    def close(self):
        self.plant.stop()
        self.spinner.stop()
        for node in (self.plant, self.node):
            node.destroy_node()
        rclpy.try_shutdown(context=self.ctx)


@pytest.fixture
def harness(monkeypatch, request):
    made = []

    def make(overrides=(), yaml_path=PLANT_YAML):
        h = Harness(monkeypatch, request.node.name, overrides, yaml_path)
        made.append(h)
        return h
    yield make
    for h in made:
        h.close()


def reference(**extra):
    params = load_parameters(PLANT_YAML, "cosim_sim")
    params.update(extra)
    return cosim.Simulation(**simulation_kwargs(params)), params["communication_step"]


def test_step_pause_save_load_reset_lock_step(harness, tmp_path):
    hs = harness({"state_directory": str(tmp_path)})
    ref, h = reference()
    ns = lambda t: round(t * 1e9)  # noqa: E731
    initial = hs.wait_state(0)
    assert initial[1] == (ref.get_output_dict()["angle"],)

    # step_simulation: exactly one communication step with the held input
    res = hs.service("step_simulation")
    assert res.success, res.message
    ref.do_step(0.0, h)
    s = hs.wait_state(ns(ref.time))
    assert s[1] == (ref.get_output_dict()["angle"],) and s[2] == (ref.get_output_dict()["angular_velocity"],)
    wait_for(lambda: hs.clock and hs.clock[-1] == ns(ref.time), 5.0, what="/clock after step")
    time.sleep(0.2)
    assert hs.latest()[0] == ns(ref.time)  # one step only

    # lock-step commands: one step per command, equal to the reference bit for bit
    for k in range(4):
        u = 0.5 * math.sin(k + 1.0)
        hs.command([u])
        ref.set_inputs({"torque": u})
        ref.do_step(ref.time, h)
        s = hs.wait_state(ns(ref.time))
        assert s[1] == (ref.get_output_dict()["angle"],) and s[3] == (u,)

    # save -> continue -> load -> continue reproduces the same states
    res = hs.service("save_state")
    assert res.success and os.path.getsize(tmp_path / "state.bin") > 0, res.message
    saved_ns = ns(ref.time)
    inputs = [1.0, -2.0, 0.5, 3.0, 0.0]

    def run_segment():
        out, t = [], saved_ns
        for u in inputs:
            hs.command([u])
            t += ns(h)
            out.append(hs.wait_state(t))
        return out

    first = run_segment()
    res = hs.service("load_state")
    assert res.success, res.message
    hs.wait_state(saved_ns)
    assert hs.latest()[0] == saved_ns
    second = run_segment()
    assert first == second
    assert [s[3] for s in first] == [(u,) for u in inputs]

    # pause stops time: a command no longer advances; step still does exactly one
    assert hs.service("pause_simulation").success
    t_paused = hs.latest()[0]
    hs.command([0.25])
    time.sleep(0.3)
    assert hs.latest()[0] == t_paused and hs.clock[-1] == t_paused
    assert hs.service("step_simulation").success
    hs.wait_state(t_paused + ns(h))
    time.sleep(0.2)
    assert hs.latest()[0] == t_paused + ns(h) and hs.latest()[3] == (0.25,)
    assert hs.service("resume_simulation").success
    hs.command([0.0])
    hs.wait_state(t_paused + 2 * ns(h))

    # reset restores the initial state
    res = hs.service("reset_simulation")
    assert res.success, res.message
    wait_for(lambda: hs.latest()[0] == 0, 5.0, what="reset state")
    assert hs.latest()[1:3] == initial[1:3]

    # loading a corrupt file fails cleanly and changes nothing
    (tmp_path / "state.bin").write_bytes(b"not a cosim state")
    res = hs.service("load_state")
    assert not res.success and "StateError" in res.message
    hs.command([0.0])
    hs.wait_state(ns(h))


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_bad_messages_rejected_state_unchanged(harness):
    hs = harness({"log_throttle_period": 0.0})  # every rejection logged (throttling: below)
    ref, h = reference()
    hs.wait_state(0)
    good = JointState(name=["pendulum_joint"], effort=[1.5])
    hs.joint_cmd.publish(good)  # zero stamp = t=0: the command for the first step
    ref.set_inputs({"torque": 1.5})
    ref.do_step(0.0, h)
    before = hs.wait_state(round(ref.time * 1e9))

    bad = [
        (lambda: hs.command([1.0, 2.0]), "has 2 values but command_inputs"),
        (lambda: hs.command([float("nan")]), "'torque'"),
        (lambda: hs.command([float("inf")]), "'torque'"),
        (lambda: hs.joint_cmd.publish(JointState(name=["elbow"], effort=[1.0])),
         "unknown joint 'elbow'"),
        (lambda: hs.joint_cmd.publish(JointState(name=["pendulum_joint"], effort=[])),
         "1 names but 0 efforts"),
        (lambda: hs.joint_cmd.publish(JointState()), "empty joint command"),
        (lambda: hs.command([]), "empty command"),
    ]
    logged = []
    for send, text in bad:  # each kind has its own log throttle: every one is logged
        n_warn = len(hs.warnings())
        send()
        wait_for(lambda: len(hs.warnings()) > n_warn, 5.0, what=f"logged warning for {text!r}")
        logged.append(hs.warnings()[-1])
        assert text in logged[-1] and "rejected" in logged[-1], logged[-1]
    print("\n".join(logged))
    assert "finite" in logged[1] and "nan" in logged[1]
    assert "finite" in logged[2] and "inf" in logged[2]
    time.sleep(0.1)
    assert hs.latest() == before  # no step, state unchanged

    # still running, inputs unchanged: a step holds torque = 1.5
    assert hs.service("step_simulation").success
    ref.do_step(ref.time, h)
    s = hs.wait_state(round(ref.time * 1e9))
    assert s[1] == (ref.get_output_dict()["angle"],) and s[3] == (1.5,)
    d = hs.plant.diagnostics_summary()
    assert d["rejected"] == len(bad)

    # a finite but absurd input makes the step itself fail: logged, the simulation
    # pauses with its state unchanged, and resumes after a sane command
    before = hs.latest()
    n_err = len(hs.errors())
    hs.command([1e300])
    wait_for(lambda: len(hs.errors()) > n_err, 10.0, what="logged step failure")
    assert "failed, simulation paused" in hs.errors()[-1], hs.errors()[-1]
    time.sleep(0.1)
    assert hs.latest() == before
    hs.command([-0.5])
    assert hs.service("resume_simulation").success
    ref.set_inputs({"torque": -0.5})
    ref.do_step(ref.time, h)
    s = hs.wait_state(round(ref.time * 1e9))
    assert s[1] == (ref.get_output_dict()["angle"],) and s[3] == (-0.5,)


def test_real_time_pause_and_stale_inputs(harness):
    hs = harness({"mode": "real_time", "input_timeout": 0.3, "stale_input_policy": "zero",
                  "diagnostics_period": 0.2})
    hs.command([2.0])
    wait_for(lambda: hs.states and hs.states[-1][0] > 0.1e9, 10.0, what="real-time progress")
    # no further command: after 0.3 s the inputs go stale and are zeroed (logged)
    wait_for(lambda: any("no command for" in m.msg for m in hs.logs), 5.0, what="stale warning")
    wait_for(lambda: hs.states[-1][3] == (0.0,), 5.0, what="zeroed effort")
    assert any(s[3] == (2.0,) for s in hs.states)

    # pause stops time; /clock keeps the frozen time coming (late joiners), and the
    # state at the pause time is published
    res = hs.service("pause_simulation")
    assert res.success
    t_paused = round(float(res.message.split("t=")[1]) * 1e9)
    wait_for(lambda: hs.states[-1][0] == t_paused, 5.0, what="the state at the pause time")
    n = len(hs.clock)
    time.sleep(0.5)
    assert set(hs.clock[n:]) == {t_paused} and len(hs.clock) - n >= 2, hs.clock[n:]
    assert hs.states[-1][0] == t_paused
    assert hs.service("resume_simulation").success
    wait_for(lambda: hs.clock[-1] > t_paused, 5.0, what="time to run again")
    assert all(b >= a for a, b in zip(hs.clock, hs.clock[1:]))

    # diagnostics: overruns and jitter statistics are reported
    wait_for(lambda: any(any(kv.key == "jitter_p99_us" for kv in st.values)
                         for d in hs.diagnostics for st in d.status), 5.0, what="diagnostics")
    keys = {kv.key for d in hs.diagnostics for st in d.status for kv in st.values}
    assert {"overruns_total", "achieved_rate_hz", "latency_p99_us", "stale_inputs"} <= keys
    summary = hs.plant.diagnostics_summary()
    assert summary["jitter"]["count"] > 10 and not np.isnan(summary["jitter"]["p99_us"])


def test_two_link_joint_commands_by_name_hold_per_joint(harness):
    """JointState effort commands address joints by name; a command naming one
    joint changes only that input (the other keeps its held value)."""
    yaml_path = os.path.join(LAUNCH, "two_link_lock_step.yaml")
    hs = harness(yaml_path=yaml_path)
    params = load_parameters(yaml_path, "cosim_sim")
    ref = cosim.Simulation(**simulation_kwargs(params))
    h = params["communication_step"]
    hs.wait_state(0)
    for names, efforts in ((["shoulder", "elbow"], [3.0, -1.0]), (["elbow"], [2.5]),
                           (["shoulder"], [0.5])):
        stamp = JointState().header.stamp
        stamp.sec, stamp.nanosec = divmod(round(ref.time * 1e9), 10**9)
        msg = JointState(name=names, effort=efforts)
        msg.header.stamp = stamp  # answers the current state (lock-step protocol)
        hs.joint_cmd.publish(msg)
        ref.set_inputs({{"shoulder": "tau1", "elbow": "tau2"}[n]: e for n, e in zip(names, efforts)})
        ref.do_step(ref.time, h)
        s = hs.wait_state(round(ref.time * 1e9))
        out = ref.get_output_dict()
        assert s[1] == (out["joint1_angle"], out["joint2_angle"])
        assert s[2] == (out["joint1_rate"], out["joint2_rate"])
        assert s[3] == tuple(ref.get_inputs())
    assert hs.latest()[3] == (0.5, 2.5)
    # answers to older (nonzero) states are ignored with a WARN: not applied, no step
    n_warn = len(hs.warnings())
    for stamp_ns in (round(h * 1e9), round(2 * h * 1e9)):
        stale = JointState(name=["shoulder"], effort=[-7.0])
        stale.header.stamp.sec, stale.header.stamp.nanosec = divmod(stamp_ns, 10**9)
        hs.joint_cmd.publish(stale)
    wait_for(lambda: any("answers an older state" in w for w in hs.warnings()[n_warn:]), 5.0,
             what="the WARN about ignored commands")
    time.sleep(0.3)
    assert hs.latest()[0] == round(ref.time * 1e9) and hs.latest()[3] == (0.5, 2.5)
    assert hs.plant.diagnostics_summary()["ignored"] == 2
