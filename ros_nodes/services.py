"""Services and step requests of the plant node.

``std_srvs/Trigger`` services (names chosen not to collide with ROS's
``simulation_interfaces``, which this node does not implement):

* ``reset_simulation``, ``pause_simulation``, ``resume_simulation``;
* ``step_simulation``: one communication step with the held inputs (lock_step,
  or a paused simulation);
* ``save_state`` / ``load_state``: the state as a cosim blob in
  ``state_directory/state_name`` (see ``state_files``).

Step requests (topics, std types only):

* ``step_n`` (``std_msgs/UInt32``): pause, then step N communication steps
  with the held inputs, publishing each state; stays paused;
* ``run_until`` (``std_msgs/Float64``, simulation seconds): pause, then step
  until the first communication time >= the target - step/2; stays paused.

A request runs on the simulation thread step by step (pause, resume, reset,
load or shutdown interrupt it); N and the number of steps to the target are
bounded by ``max_steps_per_request``; the simulation stops at ``end_time``.
Every work function runs on the simulation thread and returns (success, text).
"""
from __future__ import annotations

import math
import time

from std_msgs.msg import Float64, UInt32
from std_srvs.srv import Trigger

from .common import one_line
from .state_files import StateFileError


def create(node):
    """Register the Trigger services (one table) and the step-request topics."""
    for name, work in (("reset_simulation", reset), ("pause_simulation", pause),
                       ("resume_simulation", resume), ("step_simulation", step_once),
                       ("save_state", save), ("load_state", load)):
        node.create_service(Trigger, name, _trigger(node, name, work))
    topics = node.config
    if topics["topics.step_n"]:
        node.create_subscription(UInt32, topics["topics.step_n"],
                                 lambda msg: _request(node, "steps", int(msg.data)), 10)
    if topics["topics.run_until"]:
        node.create_subscription(Float64, topics["topics.run_until"],
                                 lambda msg: _request(node, "until", float(msg.data)), 10)


def _trigger(node, name, work):
    def callback(request, response):
        try:
            response.success, message = node.call(lambda: work(node))
            response.message = one_line(message)
            # a peer may call at any rate: one line per service, outcome and throttle period
            node.throttle("info" if response.success else "warning",
                          f"service:{name}:{response.success}", f"{name}: {response.message}")
        except Exception as exc:  # noqa: BLE001 - always reply, never into the executor
            response.success, response.message = False, f"{name}: internal error: {exc!r}"
        return response
    return callback


# ------------------------------------------------------------------ work (simulation thread)
def reset(node):
    node.sim.reset()
    node.after_state_change()
    return True, f"simulation reset to t={node.sim.time!r}"


def pause(node):
    node.pending_steps = 0
    if node.paused:
        return True, f"already paused at t={node.sim.time!r}"
    node.paused = True
    node.publish_state()  # the state at the pause time (late joiners: /clock republished)
    return True, f"paused at t={node.sim.time!r}"


def resume(node):
    node.pending_steps = 0
    node.step_error = None
    if not node.paused:
        return True, f"already running at t={node.sim.time!r}"
    node.paused = False
    node.last_command = time.monotonic()
    return True, f"resumed at t={node.sim.time!r}"


def step_once(node):
    if node.mode != "lock_step" and not node.paused:
        return False, (f"step_simulation needs mode lock_step or a paused simulation "
                       f"(mode {node.mode})")
    if node.at_end():
        return False, f"end_time {node.end_time!r} reached at t={node.sim.time!r}"
    t0 = node.sim.time
    if not node.advance():
        return False, (f"step at t={t0!r} failed (state unchanged): "
                       f"{type(node.step_error).__name__}: {node.step_error}")
    node.publish_state()
    return True, f"stepped from t={t0!r} to t={node.sim.time!r}"


def save(node):
    name = node.state_name
    try:
        size = node.states.save(name, node.sim.serialize_state())
    except StateFileError as exc:
        return False, str(exc)
    return True, f"saved the state at t={node.sim.time!r} ({size} bytes) as {name!r}"


def load(node):
    name = node.state_name
    try:
        blob = node.states.load(name)
    except StateFileError as exc:
        return False, str(exc)
    try:
        node.sim.deserialize_state(blob)  # StateError leaves the simulation unchanged
    except Exception as exc:  # noqa: BLE001 - reported to the caller, state unchanged
        return False, f"cannot load state {name!r}: {type(exc).__name__}: {exc}"
    node.after_state_change()
    return True, f"loaded state {name!r} at t={node.sim.time!r}"


# ------------------------------------------------------------------ step requests
def _request(node, kind, value):
    """Executor thread: check the request, then queue it for the simulation thread."""
    limit = int(node.config["max_steps_per_request"])
    if kind == "steps" and not 1 <= value <= limit:
        return node.throttle.warning("request:count", f"step_n request for {value} steps refused: "
                                     f"N must be in 1..{limit} (max_steps_per_request)")
    if kind == "until" and not math.isfinite(value):
        return node.throttle.warning("request:finite", f"run_until request for t={value!r} refused: "
                                     f"not a finite time")

    def job():
        n = value if kind == "steps" else math.ceil((value - node.sim.time) / node.step - 0.5)
        if kind == "until" and n < 1:
            node.throttle.warning("request:past", f"run_until request for t={value!r} refused: not "
                                  f"after the current time t={node.sim.time!r}")
            return
        if n > limit:
            node.throttle.warning("request:limit", f"run_until request for t={value!r} refused: "
                                  f"{n} steps exceed max_steps_per_request = {limit}")
            return
        node.paused = True
        node.pending_steps = n
        what = "step_n" if kind == "steps" else "run_until"
        node.throttle("info", "request:accepted",
                      f"{what} request: {n} steps from t={node.sim.time!r}")
    node.post(("job", job))


def step_pending(node):
    """One step of a running step request (simulation thread)."""
    if node.at_end():
        node.get_logger().warning(f"step request stopped at end_time, t={node.sim.time!r} "
                                  f"({node.pending_steps} steps left)")
        node.pending_steps = 0
        node.publish_state()
        return
    node.pending_steps -= 1
    if not node.advance():
        node.pending_steps = 0
        return
    node.publish_state()
    if node.pending_steps == 0:
        node.throttle("info", "request:done", f"step request done: paused at t={node.sim.time!r}")
