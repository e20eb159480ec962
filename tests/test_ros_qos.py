"""QoS that interoperates by default: subscribers with the default QoS
(reliable, volatile, keep-last 10: robot_state_publisher, most tools) receive
joint_states, outputs and /clock in every mode; best-effort states on request;
/clock as ros_gz_bridge publishes it; while paused, /clock keeps the frozen
time coming for late joiners and the state at the pause time is published."""
import time

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, ReliabilityPolicy, qos_profile_sensor_data  # noqa: E402
from rosgraph_msgs.msg import Clock as ClockMsg  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from ros_nodes.testing import wait_for  # noqa: E402

pytestmark = pytest.mark.ros

MODES = ("lock_step", "real_time", "free_run")


def _ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


@pytest.mark.parametrize("mode", MODES)
def test_default_qos_subscribers_receive_in_every_mode(harness, mode):
    hs = harness({"mode": mode, "end_time": 1.0})
    got = {"js": [], "out": [], "clock": []}
    node = hs.node
    node.create_subscription(JointState, "joint_states", got["js"].append, 10)  # default QoS
    node.create_subscription(Float64MultiArray, "outputs", got["out"].append, 10)
    node.create_subscription(ClockMsg, "/clock", got["clock"].append, 10)
    if mode == "lock_step":  # one command: one more state
        wait_for(lambda: got["js"], 10.0, what="the initial state")
        hs.command([0.5])
        wait_for(lambda: any(_ns(m.header.stamp) > 0 for m in got["js"]), 10.0, what="a step")
    wait_for(lambda: all(got.values()), 10.0, what="messages on every topic")
    assert got["js"][-1].name == ["pendulum_joint"] and len(got["out"][-1].data) > 0
    for topic in ("joint_states", "outputs", "/clock"):
        info = node.get_publishers_info_by_topic(topic)
        assert [i.qos_profile.reliability for i in info] == [ReliabilityPolicy.RELIABLE]
        assert info[0].qos_profile.durability == DurabilityPolicy.VOLATILE  # as ros_gz_bridge


def test_best_effort_states_on_request(harness):
    hs = harness({"mode": "free_run", "state_reliability": "best_effort", "end_time": 1.0})
    got = []
    hs.node.create_subscription(JointState, "joint_states", got.append, qos_profile_sensor_data)
    wait_for(lambda: got, 10.0, what="best-effort joint states")
    info = hs.node.get_publishers_info_by_topic("joint_states")
    assert [i.qos_profile.reliability for i in info] == [ReliabilityPolicy.BEST_EFFORT]


@pytest.mark.parametrize("mode", ["real_time", "lock_step"])
def test_paused_clock_for_late_joiners(harness, mode):
    hs = harness({"mode": mode, "paused_clock_period": 0.1})
    if mode == "lock_step":
        for u in (0.1, 0.2, 0.3):
            n = len(hs.states)
            hs.command([u])
            wait_for(lambda: len(hs.states) > n and hs.states[-1][0] > 0, 10.0, what="a step")
    else:
        wait_for(lambda: hs.states and hs.states[-1][0] > 0.05e9, 10.0, what="progress")
    res = hs.service("pause_simulation")
    assert res.success, res.message
    t_paused = round(float(res.message.split("t=")[1]) * 1e9)
    # the state at the pause time is published (real time: one step ahead of the last one)
    wait_for(lambda: hs.states[-1][0] == t_paused, 5.0, what="the state at the pause time")
    time.sleep(0.3)
    # late joiners: a new /clock subscriber and a new use_sim_time node get the frozen time
    late = []
    hs.node.create_subscription(ClockMsg, "/clock", lambda m: late.append(_ns(m.clock)), 10)
    user = rclpy.create_node("late_sim_time_user", context=hs.ctx,
                             parameter_overrides=[Parameter("use_sim_time", value=True)])
    hs.spinner.executor.add_node(user)
    try:
        wait_for(lambda: len(late) >= 3, 5.0, what="/clock while paused")
        assert set(late) == {t_paused}
        wait_for(lambda: user.get_clock().now().nanoseconds == t_paused, 5.0,
                 what="the late use_sim_time node's clock")
        assert hs.states[-1][0] == t_paused
    finally:
        hs.spinner.executor.remove_node(user)
        user.destroy_node()
