"""cosim-ros with a robot from URDF: the URDF from a parameter file, a file, the command
line or a topic; /robot_description and the joint transforms out; clipped efforts said
once.  Every DDS test runs on loopback in a domain of its own, with bounded waits."""
import threading

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("pinocchio")

pytestmark = pytest.mark.ros

from cosim.errors import UnknownModelError  # noqa: E402
from cosim.models.urdf import example_robot_path  # noqa: E402
from ros_nodes.robot import take_description_argument  # noqa: E402

UR5 = "ur_description/urdf/ur5_robot.urdf"


def _ur5():
    try:
        return example_robot_path(UR5)
    except UnknownModelError as exc:
        pytest.skip(str(exc))


def test_robot_description_argument_is_taken_verbatim_before_rcl():
    """rcl reads a -p value as YAML: ': ' in a comment makes the UR5's URDF a mapping (rcl
    fails), ' #' would start a comment.  The node takes that one argument out itself."""
    text = '<robot name="r"><!-- note: a # b --></robot>'
    argv = ["cosim-ros", "--ros-args", "-p", "mode:=free_run", "-p",
            f"robot_description:={text}", "--param", "end_time:=1"]
    rest, got = take_description_argument(argv)
    assert got == text
    assert rest == ["cosim-ros", "--ros-args", "-p", "mode:=free_run", "--param", "end_time:=1"]
    assert take_description_argument(["x", "--ros-args", "-p", "cosim_sim:robot_description:="
                                      "'<robot name=''q''/>'"])[1] == "<robot name='q'/>"
    # not ROS arguments (before --ros-args), or another parameter: left alone
    argv = ["x", "-p", "robot_description:=a", "--ros-args", "-p", "urdf_file:=/r.urdf"]
    assert take_description_argument(argv) == (argv, None)


def test_cosim_ros_takes_the_ur5_urdf_with_dash_p(tmp_path, request):
    """`cosim-ros --ros-args -p robot_description:="$(cat ur5_robot.urdf)"` (the README's
    command): the node runs the UR5 and exits 0 at end_time, no traceback."""
    from ros_nodes.testing import NodeProcess, ros_environment, unique_domain_id

    text = _ur5().read_text()
    assert ": " in text  # what rcl's YAML parser refuses
    proc = NodeProcess("ros_nodes.sim_node", ros_environment(unique_domain_id(request.node.name)),
                       overrides={"robot_description": text, "mode": "free_run",
                                  "end_time": 0.05, "shutdown_at_end": True},
                       log_dir=tmp_path)
    try:
        status = proc.wait(120)
        log = proc.log()
    finally:
        proc.stop()
    assert status == 0, log
    assert "ready (model ur5 (URDF)" in log and "Traceback" not in log


def _context(monkeypatch, request):
    import rclpy

    from ros_nodes.testing import unique_domain_id
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    monkeypatch.delenv("ROS_LOCALHOST_ONLY", raising=False)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=unique_domain_id(request.node.name))
    return ctx


def test_urdf_from_a_topic_and_from_a_parameter_file(monkeypatch, request, tmp_path):
    """robot_description_topic: the first URDF on the topic (transient local: published
    before the node starts); the node then publishes no description of its own.  A
    parameter file carries the UR5's text as a YAML string.  No publisher: a configuration
    error after robot_description_timeout."""
    import rclpy
    import yaml
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from ros_nodes.common import ConfigurationError
    from ros_nodes.robot import DESCRIPTION_QOS
    from ros_nodes.sim_node import SimulationNode

    text = _ur5().read_text()
    ctx = _context(monkeypatch, request)
    nodes = []
    try:
        peer = rclpy.create_node("description_source", context=ctx)
        nodes.append(peer)
        peer.create_publisher(String, "/my_robot/robot_description",
                              DESCRIPTION_QOS).publish(String(data=text))
        plant = SimulationNode(context=ctx, parameter_overrides=[
            Parameter("robot_description_topic", value="/my_robot/robot_description"),
            Parameter("robot_description_timeout", value=20.0)])
        nodes.append(plant)
        assert plant.sim.model.name == "ur5" and plant.description is None
        assert plant.sim.coordinate_names[0] == "shoulder_pan_joint"
        path = tmp_path / "ur5.yaml"
        path.write_text(yaml.safe_dump({"cosim_sim": {"ros__parameters": {
            "robot_description": text, "params": {"elbow_joint.q0": 0.5}}}}))
        plant = SimulationNode(node_name="cosim_sim", context=ctx,
                               cli_args=["--ros-args", "--params-file", str(path)])
        nodes.append(plant)
        assert plant.sim.model.name == "ur5" and plant.sim.y[2] == 0.5
        assert plant.description is not None
        with pytest.raises(ConfigurationError, match="no URDF on /nothing within "
                                                     "robot_description_timeout = 0.3 s"):
            SimulationNode(node_name="waiting", context=ctx, parameter_overrides=[
                Parameter("robot_description_topic", value="/nothing"),
                Parameter("robot_description_timeout", value=0.3)])
    finally:
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=ctx)


def _compose(transforms, root):
    """World poses (R, p) of every link from parent -> child transforms."""
    from scipy.spatial.transform import Rotation

    poses = {root: (np.eye(3), np.zeros(3))}
    pending = list(transforms)
    while pending:
        left = []
        for parent, child, xyz, quat in pending:
            if parent not in poses:
                left.append((parent, child, xyz, quat))
                continue
            R, p = poses[parent]
            poses[child] = (R @ Rotation.from_quat(quat).as_matrix(), p + R @ xyz)
        assert len(left) < len(pending), "the transforms do not form a tree"
        pending = left
    return poses


def test_ur5_description_and_frames_match_pinocchio(harness, tmp_path):
    """urdf_file: ur5_robot.urdf, publish_tf: a late default-QoS (volatile) subscriber gets
    /robot_description; the joint transforms of each published state, composed from the
    root, give every link's pose as pinocchio's forward kinematics of that state's joint
    positions to 1e-12; an effort beyond the URDF's limit is one WARN however often."""
    import pinocchio as pin
    from geometry_msgs.msg import TransformStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from ros_nodes.testing import wait_for

    path = _ur5()
    yaml_path = tmp_path / "ur5.yaml"
    yaml_path.write_text(
        "cosim_sim:\n  ros__parameters:\n"
        f"    urdf_file: {path}\n    method: generalized-alpha\n    integrator_step: 0.001\n"
        "    communication_step: 0.01\n    mode: lock_step\n    publish_tf: true\n"
        "    params: {shoulder_lift_joint.q0: -1.2, elbow_joint.q0: 1.0, wrist_2_joint.q0: 0.7}\n")
    hs = harness(yaml_path=str(yaml_path))
    names = list(hs.plant.sim.coordinate_names)
    frames, lock = {}, threading.Lock()

    def on_frame(msg):
        t, r = msg.transform.translation, msg.transform.rotation
        with lock:
            frames.setdefault(msg.header.stamp.sec * 10 ** 9 + msg.header.stamp.nanosec, []).append(
                (msg.header.frame_id, msg.child_frame_id, np.array([t.x, t.y, t.z]),
                 np.array([r.x, r.y, r.z, r.w])))
    hs.node.create_subscription(TransformStamped, "tf_frames", on_frame, 1000)
    # the frames' publisher is volatile: a state published before it has matched this
    # subscription is not delivered to it
    wait_for(lambda: hs.plant.frames.pub.get_subscription_count() >= 1, 10.0,
             what="the plant's tf_frames publisher to match this subscription")
    late = []
    hs.node.create_subscription(String, "robot_description", lambda m: late.append(m.data), 10)
    wait_for(lambda: late, 10.0, what="/robot_description at a late volatile subscriber")
    assert late[0] == path.read_text()

    states = [hs.wait_state(0, timeout=10.0)]
    for k in range(3):
        msg = JointState(name=names, effort=[0.0, 0.0, 0.0, 40.0 if k else 30.0, 0.0, 0.0])
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(states[-1][0], 10 ** 9)
        hs.joint_cmd.publish(msg)
        states.append(hs.wait_state(round((k + 1) * 0.01 * 1e9)))
    wait_for(lambda: all(len(frames.get(s[0], ())) == 10 for s in states[1:]), 10.0,
             what="the joint transforms of every state")
    pm = pin.buildModelFromUrdf(str(path))
    pd = pm.createData()
    links = [f.name for f in pm.frames if f.type == pin.FrameType.BODY]
    assert len(links) == 11  # world, base_link, ... tool0: 10 joints, fixed ones included
    for stamp, q, _, _ in states[1:]:
        pin.framesForwardKinematics(pm, pd, np.array(q))
        poses = _compose(frames[stamp], links[0])
        assert sorted(poses) == sorted(links)
        for link in links:
            ref = pd.oMf[pm.getFrameId(link, pin.FrameType.BODY)]
            R, p = poses[link]
            assert np.abs(R - ref.rotation).max() <= 1e-12, link
            assert np.abs(p - ref.translation).max() <= 1e-12, link
    assert states[-1][1] != states[1][1]  # it moved
    wait_for(lambda: any("is clipped" in w for w in hs.warnings()), 5.0, what="the WARN")
    clipped = [w for w in hs.warnings() if "is clipped" in w]
    assert clipped == ["input 'wrist_1_joint' = 30.0 is clipped to 28.0 by the effort limit of "
                       "joint 'wrist_1_joint' (parameter 'wrist_1_joint.effort_limit', URDF "
                       "<limit effort>) (said once per input)"]
    assert hs.errors() == []


def test_position_limits_parameter_turns_the_stops_off():
    """The node's robot has its joints' stops by default; position_limits: false
    (a node parameter) gives the robot without them (no stop events, no .stop
    parameters)."""
    from types import SimpleNamespace

    from ros_nodes.params import PLANT, plant_model

    assert {s.name: s.default for s in PLANT}["position_limits"] is True

    class Node:
        def __init__(self, **values):
            self.values = dict(robot_description="", urdf_file=str(_ur5()),
                               robot_description_topic="", urdf_frames=[], **values)

        def get_parameter(self, name):
            return SimpleNamespace(value=self.values[name])

    on, off = plant_model(Node(position_limits=True)), plant_model(Node(position_limits=False))
    assert on.position_limits and len(on.events) == 3 * 6 and "shoulder_pan_joint.stop" in \
        {p.name for p in on.parameters}
    assert not off.position_limits and off.events == ()
