"""A robot from URDF on ROS: its description in and out, and its link frames.

* **In.**  ``robot_description`` (URDF text: a parameter file, or ``-p``), ``urdf_file``
  (a path read once at start-up), or ``robot_description_topic`` (wait, bounded by
  ``robot_description_timeout``, for the first std_msgs/String on that topic,
  transient-local durability as robot_state_publisher publishes it).
  rcl parses every ``-p NAME:=VALUE`` value as YAML, and a URDF is in general not a
  YAML scalar (``: `` anywhere, in a comment too, makes it a mapping and rcl fails
  with "Couldn't parse parameter override rule"; `` #`` starts a YAML comment that
  would cut the text), so :func:`take_description_argument` takes ``-p
  robot_description:=...`` off the command line before rcl sees it and the node
  uses the text verbatim.
* **Out.**  The URDF text on ``topics.robot_description`` (std_msgs/String,
  reliable, transient local, depth 1; sent again whenever a subscriber matches, so
  a late reader with the default, volatile, QoS gets it too), unless the text came
  from that topic.  With ``publish_tf: true``, the robot's frames with every
  published joint state: for each URDF joint (fixed ones too) the child link's
  pose in the parent link (robot_state_publisher's convention) from the forward
  kinematics of the state.  tf2_msgs is not on PyPI (the ``ros`` extra's
  message wheels do not include it): where ``tf2_msgs`` is importable (a ROS
  installation) they go out as one tf2_msgs/TFMessage on ``topics.tf`` (``/tf``),
  otherwise as one geometry_msgs/TransformStamped per joint on
  ``topics.tf_frames`` (``tf_frames``), the same stamp on all of a state's.
"""
from __future__ import annotations

import time

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from .common import ConfigurationError, time_to_msg

DESCRIPTION_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                             reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
WAIT_NOTICE_PERIOD = 5.0  # s between two "still waiting" lines


def take_description_argument(argv):
    """``(argv without it, text or None)``: a ``-p robot_description:=TEXT`` (or
    ``--param``, or ``NODE:robot_description``) among the ROS arguments, taken out
    before rcl parses them (module docstring).  A YAML-quoted value is unquoted."""
    out, text, ros = [], None, False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--ros-args":
            ros = True
        elif arg == "--":
            ros = False
        elif ros and arg in ("-p", "--param") and i + 1 < len(argv):
            name, sep, value = argv[i + 1].partition(":=")
            if sep and name.rpartition(":")[2] == "robot_description":
                text = _unquote(value)
                i += 2
                continue
        out.append(arg)
        i += 1
    return out, text


def _unquote(value):
    s = value.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        import yaml  # noqa: PLC0415
        try:
            loaded = yaml.safe_load(s)
        except yaml.YAMLError:
            return value
        if isinstance(loaded, str):
            return loaded
    return value


def wait_for_description(node, topic, timeout):
    """The first std_msgs/String on ``topic`` (transient local: one published before
    this node started arrives too); a line every 5 s while waiting; a
    ConfigurationError after ``timeout`` s (0: wait until a signal)."""
    from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
    from std_msgs.msg import String  # noqa: PLC0415
    got = []
    sub = node.create_subscription(String, topic, lambda msg: got.append(msg.data),
                                   DESCRIPTION_QOS)
    name = sub.topic_name
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    start = last = time.monotonic()
    node.get_logger().info(f"waiting for the robot's URDF on {name} "
                           f"(robot_description_timeout {timeout:g} s)")
    try:
        while not got:
            executor.spin_once(timeout_sec=0.1)
            now = time.monotonic()
            if got:
                break
            if timeout > 0.0 and now - start > timeout:
                raise ConfigurationError(
                    f"parameter 'robot_description_topic': no URDF on {name} within "
                    f"robot_description_timeout = {timeout:g} s (a publisher with "
                    f"transient-local durability, as robot_state_publisher's, or give "
                    f"robot_description / urdf_file)")
            if now - last >= WAIT_NOTICE_PERIOD:
                node.get_logger().info(f"still waiting for the robot's URDF on {name} "
                                       f"({now - start:.0f} s)")
                last = now
    finally:
        executor.remove_node(node)
        executor.shutdown(timeout_sec=0.0)
        node.destroy_subscription(sub)
    node.get_logger().info(f"robot's URDF received on {name} ({len(got[0])} characters)")
    return got[0]


class DescriptionPublisher:
    """The URDF text on ``topic``, transient local, sent again to every new subscriber."""

    def __init__(self, node, topic, text):
        from rclpy.event_handler import PublisherEventCallbacks  # noqa: PLC0415
        from std_msgs.msg import String  # noqa: PLC0415
        self.msg = String(data=text)
        self.pub = node.create_publisher(
            String, topic, DESCRIPTION_QOS,
            event_callbacks=PublisherEventCallbacks(matched=self._on_matched))
        self.pub.publish(self.msg)

    def _on_matched(self, info):
        if info.current_count_change > 0:  # a volatile late reader gets no history
            self.pub.publish(self.msg)


class FramePublisher:
    """The robot's joint transforms (module docstring) from the simulation's state."""

    def __init__(self, node, model, cfg):
        try:
            from tf2_msgs.msg import TFMessage  # noqa: PLC0415
        except ImportError:
            TFMessage = None
        from geometry_msgs.msg import TransformStamped  # noqa: PLC0415
        self.msgs = []
        for parent, child, _, _ in model.link_transforms(model.initial_state()[0]):
            m = TransformStamped()
            m.header.frame_id, m.child_frame_id = parent, child
            self.msgs.append(m)
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                         reliability=ReliabilityPolicy.RELIABLE)
        if TFMessage is not None:
            self.tf_msg = TFMessage(transforms=self.msgs)
            self.pub = node.create_publisher(TFMessage, cfg["topics.tf"], qos)
            where = f"tf2_msgs/TFMessage on {self.pub.topic_name}"
        else:
            self.tf_msg = None
            self.pub = node.create_publisher(TransformStamped, cfg["topics.tf_frames"], qos)
            where = (f"geometry_msgs/TransformStamped on {self.pub.topic_name}, one per joint "
                     f"(tf2_msgs is not importable: it is not on PyPI)")
        node.get_logger().info(f"publish_tf: {len(self.msgs)} joint transforms as {where}")

    def publish(self, sim):
        q = sim.y[:sim.model.n_q]
        for m, (_, _, xyz, quat) in zip(self.msgs, sim.model.link_transforms(q)):
            time_to_msg(sim.time, m.header.stamp)
            t, r = m.transform.translation, m.transform.rotation
            t.x, t.y, t.z = float(xyz[0]), float(xyz[1]), float(xyz[2])
            r.x, r.y, r.z, r.w = (float(c) for c in quat)
        if self.tf_msg is not None:
            self.pub.publish(self.tf_msg)
        else:
            for m in self.msgs:
                self.pub.publish(m)
