"""The plant's state publications: ``/clock``, ``joint_states`` and ``outputs``
with messages reused between steps (filled by the simulation thread only)."""
from __future__ import annotations

from rclpy.duration import Duration
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from .common import CLOCK_QOS, state_qos, time_to_msg


class StatePublisher:
    def __init__(self, node, cfg, joints, n_outputs):
        qos = state_qos(cfg["state_reliability"])
        self.joints = joints
        self.clock = (node.create_publisher(ClockMsg, cfg["topics.clock"], CLOCK_QOS)
                      if cfg["publish_clock"] else None)
        self.js = node.create_publisher(JointState, cfg["topics.joint_states"], qos)
        self.out = node.create_publisher(Float64MultiArray, cfg["topics.outputs"], qos)
        self.js_msg = JointState()
        self.js_msg.header.frame_id = cfg["frame_id"]
        self.js_msg.name = joints.names
        self.out_msg = Float64MultiArray()
        self.out_msg.layout.dim = [MultiArrayDimension(label=joints.output_label,
                                                       size=n_outputs, stride=n_outputs)]
        self.clock_msg = ClockMsg()

    def prepare(self, sim):
        """Fill the messages from the simulation (no publishing)."""
        self.joints.fill(sim, self.js_msg, self.out_msg)
        time_to_msg(sim.time, self.js_msg.header.stamp)
        time_to_msg(sim.time, self.clock_msg.clock)

    def send(self):
        if self.clock is not None:
            self.clock.publish(self.clock_msg)
        self.js.publish(self.js_msg)
        self.out.publish(self.out_msg)

    def send_clock(self):
        """The prepared /clock again (paused: the frozen time for late joiners)."""
        if self.clock is not None:
            self.clock.publish(self.clock_msg)

    def subscriber_count(self):
        return sum(p.get_subscription_count() for p in (self.js, self.out, self.clock)
                   if p is not None)

    def wait_for_acks(self, timeout=1.0):
        """Let reliable readers get the last state (before exiting at end_time)."""
        for pub in (self.js, self.out, self.clock):
            if pub is not None:
                pub.wait_for_all_acked(Duration(seconds=timeout))
