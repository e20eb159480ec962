"""Command messages of the plant node: structure checks on the executor
thread, the stamp policy and application on the simulation thread.

Every rejected or ignored command is counted (``/diagnostics``) and logged
as a WARN, throttled per kind (``log_throttle_period``; the next line counts
the suppressed ones), on one line of at most ``common.MAX_LINE`` characters.
Bounds checked before anything else: a ``JointState`` command carries at most as
many names (and efforts) as there are joints with an effort input, each name at
most ``MAX_JOINT_NAME`` characters; a quoted name is cut to ``common.MAX_SHOWN``.

Stamp policy (``sensor_msgs/JointState`` commands; ``Float64MultiArray``
commands have no stamp and are always taken in arrival order):

* lock_step, ``lock_step_stamps: match`` (default): a command stamped with
  the current simulation time is this step's command.  A stamp of an older
  published state is an answer to that state (a duplicate after a republish,
  or late) and is ignored.  A zero stamp is the t = 0 state's while the t = 0
  state has unanswered publications, otherwise an unset header.  Any other
  stamp (unset, wall clock, a time never published) is not usable: the
  command is taken as the current step's command in arrival order.
  ``strict``: commands with unusable stamps are ignored instead.
  ``arrival``: stamps are not looked at (every command is for the current step).
* real_time / free_run: newer stamps win: a command stamped earlier than the
  newest applied one (same topic) is ignored; equal stamps (e.g. all zero)
  are applied in arrival order.  A reset or load forgets the newest stamp.
"""
from __future__ import annotations

import collections
import time

from cosim.errors import CosimError

from .common import shown, stamp_ns, time_to_ns

_SENT_MEMORY = 4096  # published stamps remembered to recognise answers to older states
MAX_JOINT_NAME = 256  # characters of a joint name in a command (a URDF name's bound)


class Commands:
    def __init__(self, node, topics):
        self.node = node
        self.topics = topics
        self.policy = node.config["lock_step_stamps"]
        self._sent = collections.OrderedDict()  # stamp ns -> [publications, answers]
        self._newest = {}                        # topic -> newest applied stamp (real time)

    # ---------------------------------------------------------------- executor thread
    def on_array(self, msg):
        received = time.monotonic()
        node, topic = self.node, self.topics["command"]
        data = msg.data
        if not data:
            return self.reject("empty", f"empty command on {topic!r} (no values)")
        if len(data) != len(node.command_inputs):
            return self.reject("length", f"command on {topic!r} has {len(data)} values but "
                               f"command_inputs {node.command_inputs} needs "
                               f"{len(node.command_inputs)}")
        node.post(("command", dict(zip(node.command_inputs, data)), None, received, topic))

    def on_joint(self, msg):
        received = time.monotonic()
        node, topic = self.node, self.topics["joint_command"]
        if not msg.name and not msg.effort:
            return self.reject("empty", f"empty joint command on {topic!r} (no names, no "
                               f"efforts)")
        joints = len(node.effort_inputs)
        if max(len(msg.name), len(msg.effort)) > joints:
            return self.reject("count", f"joint command on {topic!r} has {len(msg.name)} names "
                               f"and {len(msg.effort)} efforts, more than the {joints} joints "
                               f"with an effort input")
        if len(msg.effort) != len(msg.name):
            return self.reject("length", f"joint command on {topic!r} has {len(msg.name)} "
                               f"names but {len(msg.effort)} efforts")
        values = {}
        for joint, effort in zip(msg.name, msg.effort):
            if len(joint) > MAX_JOINT_NAME:
                return self.reject("name", f"joint command on {topic!r} has a joint name of "
                                   f"{len(joint)} characters (at most {MAX_JOINT_NAME}): "
                                   f"{shown(joint)}")
            name = node.effort_inputs.get(joint)
            if name is None:
                return self.reject("joint", f"joint command on {topic!r} names unknown joint "
                                   f"{shown(joint)} (joints with an effort input: "
                                   f"{', '.join(node.effort_inputs) or 'none'})")
            values[name] = effort
        stamp = None if self.policy == "arrival" else stamp_ns(msg.header.stamp)
        node.post(("command", values, stamp, received, topic))

    def reject(self, kind, text):
        self.node.telemetry.rejected += 1
        self.node.throttle.warning(f"reject:{kind}",
                                   f"rejected message: {text}; simulation state unchanged")

    def ignore(self, kind, text):
        self.node.telemetry.ignored += 1
        self.node.throttle.warning(f"ignore:{kind}", f"ignored command: {text}")

    # ---------------------------------------------------------------- simulation thread
    def published(self, t):
        """The state at simulation time t was sent (lock step bookkeeping)."""
        entry = self._sent.get(t)
        if entry is None:
            self._sent[t] = [1, 0]
            if len(self._sent) > _SENT_MEMORY:
                self._sent.popitem(last=False)
        else:
            entry[0] += 1

    def forget(self):
        """After a reset/load: stamps start over."""
        self._sent.clear()
        self._newest.clear()

    def accept(self, stamp, topic):
        """Apply the stamp policy; True when the command is to be applied now."""
        if stamp is None:
            return True
        if self.node.mode != "lock_step":
            newest = self._newest.get(topic)
            if newest is not None and stamp < newest:
                self.ignore("older", f"stamp {stamp * 1e-9!r} s on {topic!r} is older than the "
                            f"newest applied command ({newest * 1e-9!r} s): newer stamps win")
                return False
            self._newest[topic] = stamp
            return True
        now = time_to_ns(self.node.sim.time)
        entry = self._sent.get(stamp)
        if stamp == now:
            if entry is not None:
                entry[1] += 1
            return True
        if entry is not None and stamp < now:
            duplicate = entry[1] < entry[0]
            entry[1] += 1
            if stamp != 0 or duplicate:
                self.ignore("answered", f"stamp {stamp * 1e-9!r} s on {topic!r} answers an older "
                            f"state (current t={self.node.sim.time!r}): a duplicate after a "
                            f"republish or a late answer")
                return False
        if self.policy == "strict":
            self.ignore("unusable", f"stamp {stamp * 1e-9!r} s on {topic!r} is not the time of "
                        f"the current state t={self.node.sim.time!r} (lock_step_stamps: strict); "
                        f"stamp commands with the header.stamp of the state they answer")
            return False
        self._warn_arrival(stamp, topic)
        return True

    def _warn_arrival(self, stamp, topic):
        self.node.throttle.warning(
            "arrival", f"command stamp {stamp * 1e-9!r} s on {topic!r} is not the time of a "
            f"published state (unset header or another clock?): taken as the command for the "
            f"current step t={self.node.sim.time!r} in arrival order (lock_step_stamps: match)")

    def apply(self, values, stamp, topic):
        """Set the inputs (validated by cosim, atomic).  True when applied."""
        if not self.accept(stamp, topic):
            return False
        try:
            self.node.sim.set_inputs(values)
        except (CosimError, TypeError, ValueError) as exc:
            self.reject("invalid", f"command on {topic!r}: {exc}")
            return False
        return True
