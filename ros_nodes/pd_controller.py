"""Demo controller node: joint-space PD on the cosim plant's joint states.

For every ``sensor_msgs/JointState`` received it answers once with

    effort_i = feedforward_i + kp_i (target_i - position_i) - kd_i velocity_i

(clipped to ±max_effort when max_effort > 0), either as a ``JointState``
effort command stamped with the stamp of the state it answers
(``command_type: joint_state``, the deterministic lock-step protocol: the
plant matches the stamp to its current step) or as a
``std_msgs/Float64MultiArray`` in ``joint_names`` order
(``command_type: array``; the plant's ``command_inputs`` must list the
inputs in the same order).

Run: ``python -m ros_nodes.pd_controller --ros-args -p config:=pd_pendulum`` (a shipped
parameter file; ``--help`` prints the parameters).  With ``exit_with_plant`` (set in the
shipped files) it exits when the plant has gone, e.g. after the plant's ``end_time``.  Integer literals are accepted for the
floating-point parameters; SIGINT/SIGTERM end it with exit status 0.
"""
from __future__ import annotations

import sys

if __name__ == "__main__":
    from ros_nodes.process import install_signal_handlers, require_ros  # before the heavy imports
    install_signal_handlers()
    require_ros("pd_controller")  # without the ros extra: one line naming it, exit 2

import rclpy  # noqa: E402
from rcl_interfaces.msg import ParameterDescriptor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.task import Future  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, MultiArrayDimension  # noqa: E402

from . import process  # noqa: E402
from .common import (COMMAND_QOS, ConfigurationError, one_line,  # noqa: E402
                     set_real_time_priority, shown, state_qos)
from .params import coerce_overrides, integer_to_double_callback  # noqa: E402

DOUBLES = ("kp", "kd", "target_positions", "feedforward", "max_effort")
PLANT_CHECK_PERIOD = 0.2   # s (wall): how often exit_with_plant looks for the plant


def _d(text, constraints=""):
    return ParameterDescriptor(description=text, read_only=True, additional_constraints=constraints)


class PDController(Node):
    def __init__(self, node_name="pd_controller", **kwargs):
        super().__init__(node_name, **kwargs)
        coerce_overrides(self, DOUBLES)
        self.add_pre_set_parameters_callback(integer_to_double_callback(self))
        p = self.declare_parameter
        p("joint_names", Parameter.Type.STRING_ARRAY, _d("controlled joints (order of all arrays)"))
        p("kp", Parameter.Type.DOUBLE_ARRAY, _d("proportional gains [N.m/rad or N/m]"))
        p("kd", Parameter.Type.DOUBLE_ARRAY, _d("derivative gains [N.m.s/rad or N.s/m]"))
        p("target_positions", Parameter.Type.DOUBLE_ARRAY, _d("set points [rad or m]"))
        p("feedforward", Parameter.Type.DOUBLE_ARRAY, _d("constant efforts added (default 0)"))
        p("max_effort", 0.0, _d("saturation |effort| <= max_effort; 0 = none"))
        p("command_type", "joint_state", _d("joint_state (stamped) or array",
                                            "one of joint_state, array"))
        p("state_reliability", "reliable", _d(
            "QoS reliability of the joint_states subscription: reliable (lock_step plant) or "
            "best_effort (matches any plant)", "one of reliable, best_effort"))
        p("sched_priority", 0, _d("SCHED_FIFO priority 1..99 when run by main(); 0 = normal"))
        p("exit_with_plant", False, _d("exit (status 0) when the plant's joint_states publisher "
                                       "has gone, e.g. after its end_time"))
        p("topics.joint_states", "joint_states", _d("JointState input topic"))
        p("topics.command", "command", _d("Float64MultiArray command topic"))
        p("topics.joint_command", "joint_command", _d("JointState effort command topic"))

        def arr(name, default=None):
            try:
                value = self.get_parameter(name).value
            except rclpy.exceptions.ParameterUninitializedException:
                value = None
            return default if value is None else [float(v) for v in value]

        self.joints = [str(j) for j in (self.get_parameter("joint_names").value or [])]
        if not self.joints:
            raise ConfigurationError("parameter 'joint_names' must list the controlled joints")
        n = len(self.joints)
        self.kp = arr("kp")
        self.kd = arr("kd", [0.0] * n)
        self.target = arr("target_positions", [0.0] * n)
        self.feedforward = arr("feedforward", [0.0] * n)
        for key, value in (("kp", self.kp), ("kd", self.kd), ("target_positions", self.target),
                           ("feedforward", self.feedforward)):
            if value is None or len(value) != n:
                raise ConfigurationError(
                    f"parameter {key!r} needs {n} values (one per joint {self.joints}), "
                    f"got {value!r}")
        self.max_effort = float(self.get_parameter("max_effort").value)
        self.command_type = self.get_parameter("command_type").value
        if self.command_type not in ("joint_state", "array"):
            raise ConfigurationError(f"parameter 'command_type' must be joint_state or array, "
                                     f"got {self.command_type!r}")
        reliability = self.get_parameter("state_reliability").value
        if reliability not in ("reliable", "best_effort"):
            raise ConfigurationError(f"parameter 'state_reliability' must be reliable or "
                                     f"best_effort, got {reliability!r}")
        self._index = None
        self._names_seen = None
        if self.command_type == "array":
            self._pub = self.create_publisher(
                Float64MultiArray, self.get_parameter("topics.command").value, COMMAND_QOS)
            self._msg = Float64MultiArray()
            self._msg.layout.dim = [MultiArrayDimension(label=",".join(self.joints), size=n,
                                                        stride=n)]
        else:
            self._pub = self.create_publisher(
                JointState, self.get_parameter("topics.joint_command").value, COMMAND_QOS)
            self._msg = JointState()
            self._msg.name = self.joints
        self._state_sub = self.create_subscription(
            JointState, self.get_parameter("topics.joint_states").value, self._on_state,
            state_qos(reliability))
        self.commands_sent = 0
        self.finished = Future()     # process.run ends the program when it is done
        self._plant_seen = False
        if self.get_parameter("exit_with_plant").value:
            self.create_timer(PLANT_CHECK_PERIOD, self._check_plant)

    def _check_plant(self):
        """exit_with_plant: done once the joint_states publisher that was there has gone."""
        if self._state_sub.get_publisher_count() > 0:
            self._plant_seen = True
        elif self._plant_seen and not self.finished.done():
            self.get_logger().info(f"the plant has gone (no joint_states publisher) after "
                                   f"{self.commands_sent} commands: exiting")
            self.finished.set_result(0)

    def _on_state(self, msg):
        if self._names_seen != msg.name:
            names = list(msg.name)
            try:
                index = [names.index(j) for j in self.joints]
            except ValueError:
                self.get_logger().error(one_line(
                    f"joint state with {len(names)} names {shown(names, 200)} does not contain "
                    f"{self.joints}; no command sent"), throttle_duration_sec=5.0)
                return
            self._index, self._names_seen = index, names
        pos, vel = msg.position, msg.velocity
        if len(pos) <= max(self._index):
            self.get_logger().error(f"joint state has {len(pos)} positions for {len(msg.name)} "
                                    f"names; no command sent", throttle_duration_sec=5.0)
            return
        efforts = []
        for k, i in enumerate(self._index):
            v = vel[i] if len(vel) > i else 0.0
            u = self.feedforward[k] + self.kp[k] * (self.target[k] - pos[i]) - self.kd[k] * v
            if self.max_effort > 0.0:
                u = min(max(u, -self.max_effort), self.max_effort)
            efforts.append(u)
        if self.command_type == "array":
            self._msg.data = efforts
        else:
            self._msg.header.stamp = msg.header.stamp
            self._msg.effort = efforts
        self._pub.publish(self._msg)
        self.commands_sent += 1


HELP = """usage: python -m ros_nodes.pd_controller [--help] --ros-args [-p config:=NAME] [--params-file FILE] [-p NAME:=VALUE ...]

Joint-space PD controller for the cosim plant (node pd_controller).  Parameters:
  joint_names        controlled joints (order of all arrays)
  kp, kd             gains per joint
  target_positions   set points per joint
  feedforward        constant efforts (default 0)
  max_effort = 0.0   saturation; 0 = none
  command_type = joint_state   joint_state (stamped efforts) or array (Float64MultiArray)
  state_reliability = reliable reliable or best_effort joint_states subscription
  sched_priority = 0 SCHED_FIFO priority when run as a program
  exit_with_plant = false   exit 0 when the plant's joint_states publisher has gone
  config             a shipped parameter file by name (pd_pendulum, pd_two_link), read first
  topics.joint_states, topics.command, topics.joint_command
SIGINT/SIGTERM: clean exit 0."""


def _make(context):
    node = PDController(context=context)
    priority = int(node.get_parameter("sched_priority").value)
    if priority > 0:
        set_real_time_priority(priority, node.get_logger())
    return node


def main(args=None):
    return process.run(_make, node_name="pd_controller", argv=args, help_text=HELP,
                       prog="pd_controller")


if __name__ == "__main__":
    sys.exit(main())
