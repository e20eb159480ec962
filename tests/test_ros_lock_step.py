"""Commands never stall the simulation silently: controllers that leave the
stamp at zero or stamp with the wall clock still advance lock step (arrival
order, WARN) and stay bit-identical to cosim.Simulation with the applied
inputs; strict stamps ignore with a WARN; in real time newer stamps win;
per-message logs are throttled; step_n / run_until step N steps / to a time."""
import math
import os
import re
import time

import pytest

rclpy = pytest.importorskip("rclpy")
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64, UInt32  # noqa: E402

import cosim  # noqa: E402
from ros_nodes.common import COMMAND_QOS  # noqa: E402
from ros_nodes.testing import LAUNCH, load_parameters, simulation_kwargs, wait_for  # noqa: E402

pytestmark = pytest.mark.ros

PLANT_YAML = os.path.join(LAUNCH, "pendulum_lock_step.yaml")
STEPS = 30


def reference():
    params = load_parameters(PLANT_YAML, "cosim_sim")
    return cosim.Simulation(**simulation_kwargs(params)), params["communication_step"]


def joint_command(effort, stamp_ns=0):
    msg = JointState(name=["pendulum_joint"], effort=[float(effort)])
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 10**9)
    return msg


def replay(states, h):
    """cosim.Simulation driven with the inputs the plant reports it applied (the
    effort of state k+1 is the input of step k): equal bit for bit."""
    ref, _ = reference()
    for k in range(len(states) - 1):
        ref.set_inputs({"torque": states[k + 1][3][0]})
        ref.do_step(ref.time, h)
        assert round(ref.time * 1e9) == states[k + 1][0]
        assert states[k + 1][1] == (ref.get_output_dict()["angle"],), k
        assert states[k + 1][2] == (ref.get_output_dict()["angular_velocity"],), k


@pytest.mark.parametrize("stamping", ["zero", "wall_clock"])
def test_unstamped_controllers_advance_in_arrival_order(harness, stamping):
    hs = harness()
    _, h = reference()
    # a controller answering every state it receives, without the state's stamp
    pub = hs.node.create_publisher(JointState, "joint_command", COMMAND_QOS)

    def answer(msg):
        stamp = 0 if stamping == "zero" else time.time_ns()
        pub.publish(joint_command(-2.0 * msg.position[0], stamp))
    hs.node.create_subscription(JointState, "joint_states", answer, 10)
    end = round(STEPS * h * 1e9)
    wait_for(lambda: hs.states and hs.states[-1][0] >= end, 30.0, what=f"{STEPS} steps")
    unique = {}
    for s in hs.states:
        unique.setdefault(s[0], s)
    states = [unique[t] for t in sorted(unique)][:STEPS + 1]
    replay(states, h)
    assert any("in arrival order" in w for w in hs.warnings()), hs.warnings()


def test_strict_stamps_ignore_with_a_warning(harness):
    hs = harness({"lock_step_stamps": "strict"})
    hs.wait_state(0)
    hs.joint_cmd.publish(joint_command(1.0, time.time_ns()))
    wait_for(lambda: any("lock_step_stamps: strict" in w for w in hs.warnings()), 5.0,
             what="the WARN")
    time.sleep(0.2)
    assert hs.latest()[0] == 0 and hs.plant.diagnostics_summary()["ignored"] == 1
    hs.joint_cmd.publish(joint_command(1.0, 0))  # the t = 0 state's stamp: steps
    hs.wait_state(round(reference()[1] * 1e9))


def test_real_time_newer_stamps_win(harness):
    hs = harness({"mode": "real_time"})
    hs.joint_cmd.publish(joint_command(2.0, 1000 * 10**9))
    wait_for(lambda: hs.states and hs.states[-1][3] == (2.0,), 10.0, what="the stamped command")
    hs.joint_cmd.publish(joint_command(-5.0, 0))  # older: ignored
    wait_for(lambda: any("older than the newest applied command" in w for w in hs.warnings()),
             5.0, what="the WARN")
    n = len(hs.states)
    time.sleep(0.2)
    wait_for(lambda: len(hs.states) > n + 1, 5.0, what="more states")  # (a loaded machine)
    assert all(s[3] == (2.0,) for s in hs.states[n:])
    hs.joint_cmd.publish(joint_command(3.0, 1001 * 10**9))  # newer: applied
    wait_for(lambda: hs.states[-1][3] == (3.0,), 10.0, what="the newer command")


def test_per_message_logs_are_throttled(harness):
    hs = harness({"mode": "real_time"})
    wait_for(lambda: hs.states, 10.0, what="running")
    # as in the issue: a burst of wrong-length commands (a 1.5 ms cadence), for at least
    # 3 s and until the plant has rejected 20 of them — bounded by 2000 commands and 15 s:
    # with the plant's threads in this process, a 1.5 ms sleep returned after ~41 ms on a
    # 2-core VM (GIL hand-over), and a plant starved that way rejected 10 of 24 in 3 s
    sent, start = 0, time.monotonic()
    while sent < 2000 and time.monotonic() < start + 15.0 and (
            time.monotonic() < start + 3.0 or hs.plant.diagnostics_summary()["rejected"] < 20):
        hs.command([1.0, 2.0])
        sent += 1
        time.sleep(0.0015)
    last = -1
    for _ in range(100):  # until no more arrive (bounded: 30 s)
        if last == hs.plant.diagnostics_summary()["rejected"]:
            break
        last = hs.plant.diagnostics_summary()["rejected"]
        time.sleep(0.3)
    lines = [m for m in hs.logs if "rejected message" in m.msg]
    span = (_log_ns(lines[-1]) - _log_ns(lines[0])) * 1e-9
    # one line per throttle period (1 s, monotonic clock at the decision; the log
    # stamps are taken a little later: one line of slack)
    assert 1 <= len(lines) <= math.floor(span / 1.0) + 2, (len(lines), span)
    assert 20 <= last <= sent and all("has 2 values" in m.msg for m in lines), (last, sent)
    # what was not logged is counted in the next line: with more rejections than lines
    # some line reports suppressed ones, and lines + reported never exceed the rejections (not
    # necessarily the last line: on a loaded machine the messages trickle in and the last may
    # come alone after a quiet period, as it did in a CI run)
    suppressed = [int(re.search(r"\((\d+) similar suppressed", m.msg).group(1))
                  for m in lines if "similar suppressed" in m.msg]
    assert len(lines) < last and suppressed, (len(lines), last)
    assert len(lines) + sum(suppressed) <= last


def _log_ns(m):
    return m.stamp.sec * 10**9 + m.stamp.nanosec


def test_step_n_and_run_until(harness):
    hs = harness()
    ref, h = reference()
    hs.wait_state(0)
    steps = hs.node.create_publisher(UInt32, "step_n", 10)
    until = hs.node.create_publisher(Float64, "run_until", 10)
    wait_for(lambda: steps.get_subscription_count() and until.get_subscription_count(), 10.0,
             what="the step request subscriptions")
    steps.publish(UInt32(data=5))
    for _ in range(5):
        ref.do_step(ref.time, h)
    s = hs.wait_state(round(ref.time * 1e9))
    assert s[1] == (ref.get_output_dict()["angle"],)
    hs.command([0.7])  # paused after the request: the command is held, no step
    time.sleep(0.3)
    assert hs.latest()[0] == round(ref.time * 1e9) and hs.plant.paused
    until.publish(Float64(data=0.1))  # 5 more steps (to the grid time nearest 0.1)
    ref.set_inputs({"torque": 0.7})
    for _ in range(5):
        ref.do_step(ref.time, h)
    s = hs.wait_state(round(0.1 * 1e9))
    assert s[1] == (ref.get_output_dict()["angle"],) and s[3] == (0.7,)
    # refused requests leave the simulation where it is, with a WARN
    for pub, msg, text in ((steps, UInt32(data=0), "N must be in 1.."),
                           (until, Float64(data=0.05), "not after the current time"),
                           (until, Float64(data=float("inf")), "not a finite time")):
        n = len(hs.warnings())
        pub.publish(msg)
        wait_for(lambda: len(hs.warnings()) > n, 5.0, what=text)
        assert text in hs.warnings()[-1], hs.warnings()[-1]
    assert hs.latest()[0] == round(0.1 * 1e9)
    assert hs.service("resume_simulation").success  # lock step resumes with commands
    hs.command([0.0])
    hs.wait_state(round((0.1 + h) * 1e9))
