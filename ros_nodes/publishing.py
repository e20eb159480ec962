"""The plant's state publications: ``/clock``, ``joint_states`` and ``outputs``.

Each message is built once; per step ``prepare`` writes the new stamp and
values and ``send`` publishes.  The three are kept as serialized bytes and
patched in place (``wire``): no message conversion or serialization per
step, no per-step allocation beyond the published ``bytes``.  Where the
rmw's layout cannot be located the ordinary messages are filled and
published instead (same values, same topics and types).

``state_publish_rate`` (real_time, free_run): ``joint_states`` and ``outputs``
on every ``every``-th step only (as Gazebo's JointStatePublisher
``update_rate``), counted from the last whole publication; ``/clock`` on
every step.  Steps are the calls with ``step=True``; any other publication
(start, a service, a pause, a new peer, end_time) sends the state whole."""
from __future__ import annotations

import numpy as np
from rclpy.duration import Duration
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from .common import CLOCK_QOS, state_qos, time_to_msg, time_to_ns
from .wire import Wire


class StatePublisher:
    def __init__(self, node, cfg, joints, n_outputs, every=1):
        qos = state_qos(cfg["state_reliability"])
        self.every = int(every)   # joint_states/outputs on every `every`-th step
        self._countdown = 1       # steps until the next step that sends the states
        self.states_ready = False  # the prepared states belong to the current time
        self.joints = joints
        self.clock = (node.create_publisher(ClockMsg, cfg["topics.clock"], CLOCK_QOS)
                      if cfg["publish_clock"] else None)
        self.js = node.create_publisher(JointState, cfg["topics.joint_states"], qos)
        self.out = node.create_publisher(Float64MultiArray, cfg["topics.outputs"], qos)
        self.js_msg = JointState()
        self.js_msg.header.frame_id = cfg["frame_id"]
        self.js_msg.name = joints.names
        n = len(joints.names)
        self.js_msg.position = [0.0] * n
        self.js_msg.velocity = [0.0] * len(joints.vel_index)
        self.js_msg.effort = [0.0] * (n if joints.has_efforts else 0)
        self.out_msg = Float64MultiArray()
        self.out_msg.layout.dim = [MultiArrayDimension(label=joints.output_label,
                                                       size=n_outputs, stride=n_outputs)]
        self.out_msg.data = [0.0] * n_outputs
        self.clock_msg = ClockMsg()
        self.wires = (Wire.build(self.clock_msg, (), lambda m: m.clock),
                      Wire.build(self.js_msg, ("position", "velocity", "effort"),
                                 lambda m: m.header.stamp),
                      Wire.build(self.out_msg, ("data",), None))
        self.serialized = all(w is not None and w.doubles is not None for w in self.wires)
        if self.serialized:  # per message: where each value goes, where it comes from
            self._plan = [(w.doubles, np.concatenate([w.slots[f] for f in fields]),
                           np.concatenate([joints.sources[f] for f in fields]))
                          for w, fields in ((self.wires[1], ("position", "velocity", "effort")),
                                            (self.wires[2], ("data",)))]
        self._payloads = (b"", b"", b"")

    def prepare(self, sim, step=False):
        """Write the simulation's time and values into the messages (no publishing);
        ``step``: only what the next step's ``send(step=True)`` sends."""
        states = not step or self._countdown <= 1
        self.states_ready = states
        if not self.serialized:
            time_to_msg(sim.time, self.clock_msg.clock)
            if states:
                self.joints.fill(sim, self.js_msg, self.out_msg)
                time_to_msg(sim.time, self.js_msg.header.stamp)
            return
        clock, js, out = self.wires
        sec, nanosec = divmod(time_to_ns(sim.time), 1_000_000_000)
        clock.set_stamp(sec, nanosec)
        if states:
            js.set_stamp(sec, nanosec)
            values = self.joints.gather(sim)
            for doubles, slots, sources in self._plan:
                doubles[slots] = values[sources]
            self._payloads = (clock.payload(), js.payload(), out.payload())
        else:
            self._payloads = (clock.payload(),) + self._payloads[1:]

    def send(self, step=False):
        """Publish what ``prepare`` wrote: /clock, and the states unless ``step``
        and this step is not one of every ``every``-th (callers prepare whole
        before a send that is not a step: ``states_ready``).  True when the
        states went out."""
        if step:
            states = self._countdown <= 1
            self._countdown = self.every if states else self._countdown - 1
        else:
            states, self._countdown = True, self.every  # the phase restarts here
        if not self.serialized:
            if self.clock is not None:
                self.clock.publish(self.clock_msg)
            if states:
                self.js.publish(self.js_msg)
                self.out.publish(self.out_msg)
            return states
        clock, js, out = self._payloads
        if self.clock is not None:
            self.clock.publish(clock)
        if states:
            self.js.publish(js)
            self.out.publish(out)
        return states

    def send_clock(self):
        """The prepared /clock again (paused: the frozen time for late joiners)."""
        if self.clock is not None:
            self.clock.publish(self._payloads[0] if self.serialized else self.clock_msg)

    def subscriber_count(self):
        return sum(p.get_subscription_count() for p in (self.js, self.out, self.clock)
                   if p is not None)

    def wait_for_acks(self, timeout=1.0):
        """Let reliable readers get the last state (before exiting at end_time)."""
        for pub in (self.js, self.out, self.clock):
            if pub is not None:
                pub.wait_for_all_acked(Duration(seconds=timeout))
