"""Helpers shared by the cosim ROS nodes: QoS profiles, time conversion,
parameter descriptors, keyed log throttling, real-time priority.

QoS (chosen on purpose, see the plant node's docstring):

* ``/clock``: reliable, keep-last 10, volatile: what ros_gz_bridge publishes
  (``rclcpp::QoS(rclcpp::KeepLast(10))``, ``ros_gz_bridge/src/factory.hpp``); it
  matches the best-effort reader of the rclpy/rclcpp time source and reliable
  readers (``ros2 topic echo``, rosbag).
* joint states and outputs: reliable keep-last 10 (the default QoS that
  ``robot_state_publisher`` and most tools subscribe with) in every mode;
  ``best_effort`` (sensor-data profile) on request.
* commands: reliable keep-last 10 (a lost actuator command is a fault).
* ``/diagnostics``: reliable keep-last 10 (diagnostic aggregator convention).
"""
from __future__ import annotations

import os
import time

from builtin_interfaces.msg import Time as TimeMsg
from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor)
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy,
                       qos_profile_sensor_data)

CLOCK_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                       reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                         reliability=ReliabilityPolicy.RELIABLE)
RELIABLE_STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                                reliability=ReliabilityPolicy.RELIABLE)
DIAGNOSTICS_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                             reliability=ReliabilityPolicy.RELIABLE)
RELIABILITIES = ("reliable", "best_effort")


def state_qos(reliability):
    """QoS of state-like topics: ``"reliable"`` (default) or ``"best_effort"``."""
    return RELIABLE_STATE_QOS if reliability == "reliable" else qos_profile_sensor_data


class ConfigurationError(ValueError):
    """A node parameter is invalid (the message names the parameter and value)."""


def time_to_ns(t):
    return int(round(t * 1e9))


def time_to_msg(t, msg=None):
    """Simulation time (s) as a ``builtin_interfaces/Time`` (rounded to 1 ns)."""
    sec, nanosec = divmod(time_to_ns(t), 1_000_000_000)
    msg = TimeMsg() if msg is None else msg
    msg.sec, msg.nanosec = sec, nanosec
    return msg


def stamp_ns(stamp):
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def descriptor(description, *, read_only=True, constraints="", float_range=None,
               integer_range=None, dynamic=False):
    d = ParameterDescriptor(description=description, read_only=read_only,
                            additional_constraints=constraints, dynamic_typing=dynamic)
    if float_range is not None:
        d.floating_point_range = [FloatingPointRange(from_value=float(float_range[0]),
                                                     to_value=float(float_range[1]), step=0.0)]
    if integer_range is not None:
        d.integer_range = [IntegerRange(from_value=int(integer_range[0]),
                                        to_value=int(integer_range[1]), step=0)]
    return d


MAX_LINE = 1000  # characters of a log line or service reply; longer ones are cut
MAX_SHOWN = 80   # characters of a value from a peer quoted in a line


def shown(value, limit=MAX_SHOWN):
    """``repr(value)`` of at most about ``limit`` characters (a value from a peer, in a
    message); a longer string is cut and its length said."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    if isinstance(value, (list, tuple)) and len(value) > 4:  # never the repr of all of it
        head = ", ".join(shown(v, limit // 4) for v in value[:4])
        return f"[{head}, ...] ({len(value)} entries)"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown(v, limit // 4) for v in value) + "]"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


def one_line(text, limit=MAX_LINE):
    """``text`` on one line of at most ``limit`` characters (the rest cut, and said)."""
    text = text.replace("\n", " ").replace("\r", " ")
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters cut)"


class LogThrottle:
    """At most one log line per key and period, of at most ``MAX_LINE`` characters;
    the next line says how many were suppressed meanwhile.  Thread-safe enough for logging (a race costs
    one extra line)."""

    def __init__(self, logger, period=1.0):
        self.logger, self.period = logger, float(period)
        self._last = {}        # key -> monotonic time of the last line
        self._suppressed = {}  # key -> count since then

    def __call__(self, level, key, text):
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.period:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        self._last[key] = now
        n = self._suppressed.pop(key, 0)
        text = one_line(text)
        if n:
            text = f"{text} ({n} similar suppressed in the last {now - last:.1f} s)"
        # rclpy fixes the severity of each logging call site: one site per severity
        if level == "warning":
            self.logger.warning(text)
        elif level == "info":
            self.logger.info(text)
        else:
            self.logger.error(text)
        return True

    def warning(self, key, text):
        return self("warning", key, text)


def set_real_time_priority(priority, logger):
    """SCHED_FIFO for every thread of this process (Linux); logs the outcome."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
        for tid in tids:
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(int(priority)))
    except (OSError, AttributeError) as exc:
        logger.warning(f"cannot set SCHED_FIFO priority {priority}: {exc}; running unprivileged")
        return False
    logger.info(f"SCHED_FIFO priority {priority} for {len(tids)} threads")
    return True
